//! What one rotation of a container's log file does, decided from the file's size and the
//! names beside it, without I/O (upstream's `containerLogManager.rotateLog`).
//!
//! A container writes `<log>` (`/var/log/pods/<pod>/<container>/<n>.log`); rotated files are
//! `<log>.<YYYYMMDD-hhmmss>` (the newest, uncompressed, so that a reader still on it can
//! finish) and `<log>.<YYYYMMDD-hhmmss>.gz` (older ones); `<log>.*.tmp` is a compression that
//! did not finish.
//!
//! # Guarantees
//! - Nothing happens while `<log>` is smaller than the policy's `max_size`.
//! - Otherwise the steps are, in order: remove leftovers of an interrupted rotation (`.tmp`
//!   files, and uncompressed files whose `.gz` exists); remove the oldest rotated files until
//!   `max_files - 2` are left; compress those left that are not compressed yet; rename `<log>`
//!   to `<log>.<now>`. With the file the runtime then opens anew, at most `max_files` files
//!   remain.
//! - Rotated files sort oldest first by name (the timestamp format sorts by time).
//! - A rotation whose target name exists already (a second rotation within the same second)
//!   is not planned: nothing is overwritten.

use k8s_openapi::jiff::Timestamp;

/// The suffix of a compressed rotated file.
pub const COMPRESSED: &str = ".gz";
/// The suffix of a compression in progress.
pub const TEMPORARY: &str = ".tmp";

/// The kubelet's `containerLogMaxSize` default (10Mi).
pub const DEFAULT_MAX_SIZE: u64 = 10 * 1024 * 1024;
/// The kubelet's `containerLogMaxFiles` default.
pub const DEFAULT_MAX_FILES: usize = 5;

/// When a log file is rotated and how many files of it are kept (upstream's
/// `LogRotatePolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotatePolicy {
    /// A log file this large (bytes) or larger is rotated.
    pub max_size: u64,
    /// The most files of one container's log, the one being written included (at least 2).
    pub max_files: usize,
}

impl Default for LogRotatePolicy {
    fn default() -> Self {
        LogRotatePolicy {
            max_size: DEFAULT_MAX_SIZE,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

/// One file operation of a rotation; names are file names in the log's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Remove(String),
    /// gzip `name` into `name.gz` (written as `name.tmp`, then renamed), then remove `name`.
    Compress(String),
    /// Rename the live log; the runtime must then reopen it.
    Rotate {
        from: String,
        to: String,
    },
}

/// The name `<log>` is rotated to at `now` (`<log>.<YYYYMMDD-hhmmss>`, UTC).
pub fn rotated_name(log: &str, now: Timestamp) -> String {
    format!("{log}.{}", now.strftime("%Y%m%d-%H%M%S"))
}

/// Whether `name` (a file beside `<log>`) is one of `<log>`'s rotated files or leftovers.
fn belongs_to(log: &str, name: &str) -> bool {
    name.strip_prefix(log)
        .and_then(|rest| rest.strip_prefix('.'))
        .is_some_and(|rest| !rest.is_empty())
}

/// Splits `<log>`'s rotated files among `names` into those in use and leftovers of an
/// interrupted rotation (upstream's `filterUnusedLogs`); both sorted.
pub fn in_use(log: &str, names: &[String]) -> (Vec<String>, Vec<String>) {
    let mine: Vec<&String> = names.iter().filter(|n| belongs_to(log, n)).collect();
    let (mut used, mut unused): (Vec<String>, Vec<String>) =
        mine.iter().map(|n| n.to_string()).partition(|n| {
            if n.ends_with(TEMPORARY) {
                return false;
            }
            n.ends_with(COMPRESSED) || !mine.iter().any(|m| **m == format!("{n}{COMPRESSED}"))
        });
    used.sort();
    unused.sort();
    (used, unused)
}

/// The steps that rotate `log` (a file name) of `size` bytes, given every file name in its
/// directory (`names`, `log` itself may be among them) at `now`.
pub fn plan(
    log: &str,
    size: u64,
    names: &[String],
    policy: LogRotatePolicy,
    now: Timestamp,
) -> Vec<Step> {
    if size < policy.max_size {
        return Vec::new();
    }
    let target = rotated_name(log, now);
    if names.contains(&target) {
        return Vec::new();
    }
    let (used, unused) = in_use(log, names);
    let mut steps: Vec<Step> = unused.into_iter().map(Step::Remove).collect();
    // The live file and the one about to be rotated take two of the files allowed.
    let keep = policy.max_files.saturating_sub(2);
    let excess = used.len().saturating_sub(keep);
    let (old, kept) = used.split_at(excess);
    steps.extend(old.iter().cloned().map(Step::Remove));
    steps.extend(
        kept.iter()
            .filter(|n| !n.ends_with(COMPRESSED))
            .cloned()
            .map(Step::Compress),
    );
    steps.push(Step::Rotate {
        from: log.to_string(),
        to: target,
    });
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "0.log";

    fn now() -> Timestamp {
        "2026-11-29T04:30:05Z".parse().unwrap()
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn policy(max_files: usize) -> LogRotatePolicy {
        LogRotatePolicy {
            max_size: 100,
            max_files,
        }
    }

    fn rotate() -> Step {
        Step::Rotate {
            from: LOG.into(),
            to: "0.log.20261129-043005".into(),
        }
    }

    #[test]
    fn a_small_file_is_left_alone() {
        assert_eq!(plan(LOG, 99, &names(&[LOG]), policy(5), now()), vec![]);
        assert_eq!(
            plan(LOG, 100, &names(&[LOG]), policy(5), now()),
            vec![rotate()]
        );
        assert_eq!(LogRotatePolicy::default().max_size, 10 * 1024 * 1024);
        assert_eq!(LogRotatePolicy::default().max_files, 5);
    }

    #[test]
    fn the_newest_rotated_file_is_compressed_before_the_live_one_is_rotated() {
        let files = names(&[LOG, "0.log.20261129-042955", "0.log.20261129-042945.gz"]);
        assert_eq!(
            plan(LOG, 500, &files, policy(5), now()),
            vec![Step::Compress("0.log.20261129-042955".into()), rotate()]
        );
    }

    #[test]
    fn the_oldest_files_beyond_max_files_are_removed_first() {
        let files = names(&[
            "0.log.20261129-042935.gz",
            LOG,
            "0.log.20261129-042955",
            "0.log.20261129-042925.gz",
            "0.log.20261129-042945.gz",
        ]);
        // max 4: the live file, the one rotated now, and two of the four older ones.
        assert_eq!(
            plan(LOG, 500, &files, policy(4), now()),
            vec![
                Step::Remove("0.log.20261129-042925.gz".into()),
                Step::Remove("0.log.20261129-042935.gz".into()),
                Step::Compress("0.log.20261129-042955".into()),
                rotate(),
            ]
        );
        // max 2: only the live file and the one rotated now.
        assert_eq!(
            plan(LOG, 500, &files, policy(2), now()),
            vec![
                Step::Remove("0.log.20261129-042925.gz".into()),
                Step::Remove("0.log.20261129-042935.gz".into()),
                Step::Remove("0.log.20261129-042945.gz".into()),
                Step::Remove("0.log.20261129-042955".into()),
                rotate(),
            ]
        );
    }

    #[test]
    fn leftovers_of_an_interrupted_rotation_are_removed() {
        let files = names(&[
            LOG,
            "0.log.20261129-042945",
            "0.log.20261129-042945.gz",
            "0.log.20261129-042955",
            "0.log.20261129-042955.tmp",
        ]);
        assert_eq!(
            in_use(LOG, &files),
            (
                names(&["0.log.20261129-042945.gz", "0.log.20261129-042955"]),
                names(&["0.log.20261129-042945", "0.log.20261129-042955.tmp"])
            )
        );
        assert_eq!(
            plan(LOG, 500, &files, policy(5), now()),
            vec![
                Step::Remove("0.log.20261129-042945".into()),
                Step::Remove("0.log.20261129-042955.tmp".into()),
                Step::Compress("0.log.20261129-042955".into()),
                rotate(),
            ]
        );
    }

    #[test]
    fn other_files_in_the_directory_are_not_touched() {
        let files = names(&[LOG, "1.log", "1.log.20261129-042955", "0.log.", "0.logx"]);
        assert_eq!(plan(LOG, 500, &files, policy(2), now()), vec![rotate()]);
        assert_eq!(in_use("1.log", &files).0, names(&["1.log.20261129-042955"]));
        assert_eq!(in_use("10.log", &files), (vec![], vec![]));
    }

    #[test]
    fn a_second_rotation_within_the_same_second_waits() {
        let files = names(&[LOG, "0.log.20261129-043005"]);
        assert_eq!(plan(LOG, 500, &files, policy(5), now()), vec![]);
    }
}
