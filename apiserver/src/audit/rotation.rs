//! `--audit-log-maxsize/-maxbackup/-maxage`: when the audit log is rotated and which old
//! files go, as kube-apiserver's log writer (lumberjack) decides. Pure.
//!
//! # Guarantees
//! - A line that would take the file past `max_size` rotates it first (0 means 100 MB).
//! - Backups are `<name>-<UTC 2006-01-02T15-04-05.000><ext>` next to the log.
//! - After a rotation the newest `max_backup` backups are kept (0: all), and of those, the ones
//!   older than `max_age` days go (0: no age limit).

use std::path::{Path, PathBuf};

/// The rotation limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// Megabytes (0: 100).
    pub max_size_mb: u64,
    pub max_backup: usize,
    /// Days.
    pub max_age_days: u64,
}

const DEFAULT_MAX_SIZE_MB: u64 = 100;
const MEGABYTE: u64 = 1024 * 1024;

impl Limits {
    pub fn max_size_bytes(&self) -> u64 {
        match self.max_size_mb {
            0 => DEFAULT_MAX_SIZE_MB * MEGABYTE,
            n => n * MEGABYTE,
        }
    }

    /// Whether writing `line` bytes to a file of `size` bytes rotates it first.
    pub fn rotates(&self, size: u64, line: u64) -> bool {
        size > 0 && size + line > self.max_size_bytes()
    }
}

/// `(stem, ext)` of the log's file name: `audit.log` → (`audit`, `.log`).
fn split_name(path: &Path) -> (String, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rfind('.') {
        Some(i) if i > 0 => (name[..i].to_string(), name[i..].to_string()),
        _ => (name, String::new()),
    }
}

/// The backup's name for a rotation at `unix_millis`.
pub fn backup_name(path: &Path, unix_millis: i64) -> PathBuf {
    let (stem, ext) = split_name(path);
    let ts = jiff::Timestamp::from_millisecond(unix_millis).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let name = format!(
        "{stem}-{}.{:03}{ext}",
        ts.strftime("%Y-%m-%dT%H-%M-%S"),
        unix_millis.rem_euclid(1000)
    );
    path.with_file_name(name)
}

/// When the backup named `file_name` (of the log at `path`) was made, in unix milliseconds;
/// `None` if the name is not one of its backups.
pub fn backup_time(path: &Path, file_name: &str) -> Option<i64> {
    let (stem, ext) = split_name(path);
    let ts = file_name
        .strip_prefix(&format!("{stem}-"))?
        .strip_suffix(ext.as_str())?;
    let (secs, millis) = ts.split_once('.')?;
    let millis: i64 = millis.parse().ok().filter(|_| millis.len() == 3)?;
    let dt = jiff::civil::DateTime::strptime("%Y-%m-%dT%H-%M-%S", secs).ok()?;
    let t = dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    Some(t.as_millisecond() + millis)
}

/// The backups to delete: `backups` are `(name, unix millis)`; `now` in unix millis.
pub fn expired(mut backups: Vec<(String, i64)>, now: i64, limits: Limits) -> Vec<String> {
    backups.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let mut remove = Vec::new();
    if limits.max_backup > 0 && backups.len() > limits.max_backup {
        remove.extend(backups.drain(limits.max_backup..).map(|(n, _)| n));
    }
    if limits.max_age_days > 0 {
        let cutoff = now - (limits.max_age_days as i64) * 24 * 3600 * 1000;
        remove.extend(
            backups
                .into_iter()
                .filter(|(_, t)| *t < cutoff)
                .map(|(n, _)| n),
        );
    }
    remove
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_before_exceeding_the_size() {
        let l = Limits {
            max_size_mb: 1,
            ..Limits::default()
        };
        assert!(!l.rotates(0, 5 * MEGABYTE), "an empty file takes any line");
        assert!(!l.rotates(MEGABYTE - 10, 10));
        assert!(l.rotates(MEGABYTE - 10, 11));
        assert_eq!(Limits::default().max_size_bytes(), 100 * MEGABYTE);
    }

    #[test]
    fn backup_names_round_trip() {
        let p = Path::new("/var/log/audit.log");
        let b = backup_name(p, 1_700_000_000_123);
        assert_eq!(b, Path::new("/var/log/audit-2023-11-14T22-13-20.123.log"));
        let name = b.file_name().unwrap().to_str().unwrap();
        assert_eq!(backup_time(p, name), Some(1_700_000_000_123));
        assert_eq!(backup_time(p, "audit.log"), None);
        assert_eq!(backup_time(p, "other-2023-11-14T22-13-20.123.log"), None);
        assert_eq!(
            backup_name(Path::new("/x/audit"), 0),
            Path::new("/x/audit-1970-01-01T00-00-00.000")
        );
    }

    #[test]
    fn keeps_newest_backups_then_drops_old_ones() {
        let day = 24 * 3600 * 1000;
        let now = 100 * day;
        let b = vec![
            ("a".to_string(), now - day),
            ("b".to_string(), now - 10 * day),
            ("c".to_string(), now - 2 * day),
            ("d".to_string(), now - 3 * day),
        ];
        let lim = |max_backup, max_age_days| Limits {
            max_size_mb: 1,
            max_backup,
            max_age_days,
        };
        assert_eq!(expired(b.clone(), now, lim(0, 0)), Vec::<String>::new());
        assert_eq!(expired(b.clone(), now, lim(2, 0)), ["d", "b"]);
        assert_eq!(expired(b.clone(), now, lim(0, 5)), ["b"]);
        assert_eq!(
            expired(b, now, lim(3, 2)),
            ["b", "d"],
            "c is exactly 2 days old"
        );
    }
}
