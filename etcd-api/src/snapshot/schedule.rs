//! Scheduled snapshots in `k3rs server`: at each time of `--etcd-snapshot-schedule-cron`
//! (system time zone, as k3s), a voter that has a leader writes a snapshot of its store and
//! prunes that name to `--etcd-snapshot-retention`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k3rs_raft::Node;
use k8s_openapi::jiff::Zoned;
use tokio_util::sync::CancellationToken;

use super::{dir, etcd_format, file, io_error, retention, Error, Result, Settings};
use k3rs_apimachinery::cron::Schedule;

/// How long to sleep from `now` until the next scheduled minute (`None`: the schedule never
/// fires again).
pub fn next_delay(schedule: &Schedule, now: &Zoned) -> Option<(Zoned, Duration)> {
    let next = schedule.next_after(now)?;
    let wait = now.duration_until(&next).unsigned_abs();
    Some((next, wait))
}

/// Whether this member should take scheduled snapshots now: a voter (not a learner still
/// catching up) that knows a leader.
pub fn should_take(node: &Node) -> bool {
    let st = node.status();
    st.leader.is_some()
        && node
            .members()
            .iter()
            .any(|m| m.id == st.member_id && !m.is_learner)
}

/// Writes a snapshot of `node`'s store into `dir` as `<base>-<node_name>-<now>`.
pub async fn take(
    node: Arc<Node>,
    dir: PathBuf,
    base: &str,
    node_name: &str,
) -> Result<(PathBuf, file::Metadata)> {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let name = retention::snapshot_name(base, node_name, now);
    let node_name = node_name.to_string();
    tokio::task::spawn_blocking(move || {
        let io_dir = dir.clone();
        file::save(&dir, &name, &node_name, now, move |f| {
            let applied = node.status().applied_index;
            etcd_format::write_snapshot(node.store(), f, applied)
                .map(drop)
                .map_err(|e| match e {
                    etcd_format::FormatError::Io(e) => io_error(&io_dir)(e),
                    e => Error::Take(e.to_string()),
                })
        })
    })
    .await
    .map_err(|e| Error::Take(format!("snapshot task: {e}")))?
}

/// Starts [`run`] for `k3rs server` unless `--etcd-disable-snapshots`.
pub fn spawn(
    settings: &Settings,
    data_dir: &std::path::Path,
    node: Arc<Node>,
    node_name: String,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if settings.disabled {
        return None;
    }
    let settings = settings.clone();
    let dir = settings.dir(data_dir);
    Some(k3rs_apimachinery::tasks::spawn(
        "datastore/snapshot-schedule",
        run(node, settings, dir, node_name, stop),
    ))
}

/// Takes snapshots on `settings`' schedule until `stop`.
pub async fn run(
    node: Arc<Node>,
    settings: Settings,
    dir: PathBuf,
    node_name: String,
    stop: CancellationToken,
) {
    loop {
        let Some((at, wait)) = next_delay(&settings.schedule, &Zoned::now()) else {
            tracing::warn!("the etcd snapshot schedule never fires again");
            return;
        };
        tracing::debug!(%at, "next scheduled etcd snapshot");
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        if !should_take(&node) {
            tracing::info!(
                "not taking the scheduled etcd snapshot: this server is not a voter with a leader"
            );
            continue;
        }
        match take(node.clone(), dir.clone(), &settings.name, &node_name).await {
            Ok((path, meta)) => {
                tracing::info!(path = %path.display(), revision = meta.revision, size = meta.size, "saved scheduled etcd snapshot");
            }
            Err(e) => {
                tracing::error!(error = %e, "scheduled etcd snapshot failed");
                continue;
            }
        }
        match dir::prune(&dir, &settings.name, &node_name, settings.retention) {
            Ok(pruned) if !pruned.is_empty() => {
                tracing::info!(?pruned, "pruned etcd snapshots beyond the retention");
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "pruning etcd snapshots"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::tz::TimeZone;

    fn at(s: &str) -> Zoned {
        s.parse::<k8s_openapi::jiff::civil::DateTime>()
            .unwrap()
            .to_zoned(TimeZone::UTC)
            .unwrap()
    }

    #[test]
    fn next_delay_is_the_wait_until_the_next_scheduled_minute() {
        let every_12h = Schedule::parse(super::super::DEFAULT_SCHEDULE).unwrap();
        let (next, wait) = next_delay(&every_12h, &at("2026-11-22T01:30:15")).unwrap();
        assert_eq!(next, at("2026-11-22T12:00:00"));
        assert_eq!(wait, Duration::from_secs(10 * 3600 + 29 * 60 + 45));
        // Exactly at a scheduled minute: the next one, not this one again.
        let (next, _) = next_delay(&every_12h, &at("2026-11-22T12:00:00")).unwrap();
        assert_eq!(next, at("2026-11-23T00:00:00"));
        let every_minute = Schedule::parse("* * * * *").unwrap();
        let (_, wait) = next_delay(&every_minute, &at("2026-11-22T01:30:59.5")).unwrap();
        assert_eq!(wait, Duration::from_millis(500));
    }
}
