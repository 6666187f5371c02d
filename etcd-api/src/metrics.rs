//! The datastore's Prometheus metrics, in etcd's names: leader, leader changes, proposals
//! committed and applied (etcd reports the commit and applied indexes under these names) and
//! the database size, and the WAL's fsync durations. Served on the HTTPS port's `/metrics`.
//!
//! k3rs' own: `k3rs_datastore_stage_duration_seconds{stage}` (a histogram per stage of the
//! write path, see `k3rs_raft::stages`, with finer buckets than etcd's) and
//! `k3rs_datastore_stage_duration_max_seconds{stage}` (the longest run of each since start).

use std::fmt::Write;

/// What is reported, read from the node at scrape time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Whether a leader is known.
    pub has_leader: bool,
    /// Whether this member leads.
    pub is_leader: bool,
    /// Leader changes seen since start.
    pub leader_changes_seen: u64,
    /// The last committed log index.
    pub committed_index: u64,
    /// The last applied log index.
    pub applied_index: u64,
    /// The store's size on disk.
    pub db_size_bytes: u64,
    /// The part of it in use.
    pub db_size_in_use_bytes: u64,
    /// WAL fsync durations.
    pub wal_fsync: k3rs_raft::FsyncSnapshot,
    /// Proposals waiting to commit.
    pub proposals_pending: u64,
    /// Proposals that failed since start.
    pub proposals_failed: u64,
    /// Store commit durations.
    pub backend_commit: k3rs_raft::FsyncSnapshot,
    /// Every stage of the write path, by name.
    pub stages: Vec<(&'static str, k3rs_raft::FsyncSnapshot)>,
}

impl Sample {
    /// The member's numbers now.
    pub fn of(node: &k3rs_raft::Node) -> Sample {
        let status = node.status();
        Sample {
            has_leader: status.leader.is_some(),
            is_leader: node.is_leader(),
            leader_changes_seen: node.leader_changes_seen(),
            committed_index: status.commit_index,
            applied_index: status.applied_index,
            db_size_bytes: node.store().db_size(),
            db_size_in_use_bytes: node.store().db_size_in_use(),
            wal_fsync: node.wal_fsync_histogram(),
            proposals_pending: node.proposals_pending(),
            proposals_failed: node.proposals_failed(),
            backend_commit: node.backend_commit_histogram(),
            stages: node.stage_histograms(),
        }
    }
}

/// The Prometheus text exposition of `s`.
pub fn render(s: &Sample) -> String {
    let rows: [(&str, &str, &str, u64); 9] = [
        (
            "etcd_server_has_leader",
            "gauge",
            "Whether or not a leader exists. 1 is existence, 0 is not.",
            u64::from(s.has_leader),
        ),
        (
            "etcd_server_is_leader",
            "gauge",
            "Whether or not this member is a leader. 1 if is, 0 otherwise.",
            u64::from(s.is_leader),
        ),
        (
            "etcd_server_leader_changes_seen_total",
            "counter",
            "The number of leader changes seen.",
            s.leader_changes_seen,
        ),
        (
            "etcd_server_proposals_committed_total",
            "gauge",
            "The total number of consensus proposals committed.",
            s.committed_index,
        ),
        (
            "etcd_server_proposals_applied_total",
            "gauge",
            "The total number of consensus proposals applied.",
            s.applied_index,
        ),
        (
            "etcd_server_proposals_pending",
            "gauge",
            "The current number of pending proposals to commit.",
            s.proposals_pending,
        ),
        (
            "etcd_server_proposals_failed_total",
            "counter",
            "The total number of failed proposals seen.",
            s.proposals_failed,
        ),
        (
            "etcd_mvcc_db_total_size_in_bytes",
            "gauge",
            "Total size of the underlying database physically allocated in bytes.",
            s.db_size_bytes,
        ),
        (
            "etcd_mvcc_db_total_size_in_use_in_bytes",
            "gauge",
            "Total size of the underlying database logically in use in bytes.",
            s.db_size_in_use_bytes,
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in rows {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    }
    histogram(
        &mut out,
        "etcd_disk_wal_fsync_duration_seconds",
        "The latency distributions of fsync called by WAL.",
        &s.wal_fsync,
    );
    histogram(
        &mut out,
        "etcd_disk_backend_commit_duration_seconds",
        "The latency distributions of commit called by backend.",
        &s.backend_commit,
    );
    stages(&mut out, &s.stages);
    out
}

/// The stage histograms (fine buckets, labelled by stage) and their maxima.
fn stages(out: &mut String, all: &[(&'static str, k3rs_raft::FsyncSnapshot)]) {
    let name = "k3rs_datastore_stage_duration_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Time spent in each stage of the datastore's write path.\n\
         # TYPE {name} histogram"
    );
    for (stage, h) in all {
        for (le, n) in &h.fine {
            let _ = writeln!(out, "{name}_bucket{{stage=\"{stage}\",le=\"{le}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{stage=\"{stage}\",le=\"+Inf\"}} {}",
            h.count
        );
        let _ = writeln!(out, "{name}_sum{{stage=\"{stage}\"}} {}", h.sum_seconds);
        let _ = writeln!(out, "{name}_count{{stage=\"{stage}\"}} {}", h.count);
    }
    let max = "k3rs_datastore_stage_duration_max_seconds";
    let _ = writeln!(
        out,
        "# HELP {max} The longest run of each stage of the datastore's write path since start.\n\
         # TYPE {max} gauge"
    );
    for (stage, h) in all {
        let _ = writeln!(out, "{max}{{stage=\"{stage}\"}} {}", h.max_seconds);
    }
}

/// Prometheus text of one histogram (cumulative `le` buckets, `+Inf`, sum, count).
fn histogram(out: &mut String, name: &str, help: &str, h: &k3rs_raft::FsyncSnapshot) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    for (le, n) in &h.buckets {
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {n}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum {}", h.sum_seconds);
    let _ = writeln!(out, "{name}_count {}", h.count);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_etcd_names() {
        let text = render(&Sample {
            has_leader: true,
            is_leader: false,
            leader_changes_seen: 2,
            committed_index: 10,
            applied_index: 9,
            db_size_bytes: 4096,
            db_size_in_use_bytes: 1024,
            wal_fsync: k3rs_raft::FsyncSnapshot {
                buckets: vec![(0.001, 2), (0.002, 3)],
                count: 4,
                sum_seconds: 0.5,
                ..Default::default()
            },
            proposals_pending: 3,
            proposals_failed: 7,
            backend_commit: k3rs_raft::FsyncSnapshot {
                buckets: vec![(0.001, 5)],
                count: 6,
                sum_seconds: 0.25,
                ..Default::default()
            },
            stages: vec![(
                "raft_write",
                k3rs_raft::FsyncSnapshot {
                    fine: vec![(0.0005, 3), (0.001, 4)],
                    count: 5,
                    sum_seconds: 0.125,
                    max_seconds: 0.1,
                    ..Default::default()
                },
            )],
        });
        assert!(text.contains("\netcd_server_has_leader 1\n"), "{text}");
        assert!(text.contains("# TYPE etcd_server_leader_changes_seen_total counter\netcd_server_leader_changes_seen_total 2\n"));
        assert!(text.contains("etcd_server_proposals_committed_total 10\n"));
        assert!(text.contains("etcd_server_proposals_applied_total 9\n"));
        assert!(text.contains("etcd_mvcc_db_total_size_in_bytes 4096\n"));
        assert!(text.contains("# TYPE etcd_disk_wal_fsync_duration_seconds histogram\n"));
        assert!(text.contains("etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 2\n"));
        assert!(text.contains("etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.002\"} 3\n"));
        assert!(text.contains("etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 4\n"));
        assert!(text.contains("etcd_disk_wal_fsync_duration_seconds_sum 0.5\n"));
        assert!(text.contains("etcd_disk_wal_fsync_duration_seconds_count 4\n"));
        assert!(text.contains(
            "# TYPE etcd_server_proposals_pending gauge\netcd_server_proposals_pending 3\n"
        ));
        assert!(text.contains("# TYPE etcd_server_proposals_failed_total counter\netcd_server_proposals_failed_total 7\n"));
        assert!(text.contains("etcd_disk_backend_commit_duration_seconds_bucket{le=\"0.001\"} 5\n"));
        assert!(text.contains("etcd_disk_backend_commit_duration_seconds_bucket{le=\"+Inf\"} 6\n"));
        assert!(text.contains("etcd_disk_backend_commit_duration_seconds_sum 0.25\n"));
        let stage = "k3rs_datastore_stage_duration_seconds";
        assert!(text.contains(&format!("# TYPE {stage} histogram\n")));
        assert!(text.contains(&format!(
            "{stage}_bucket{{stage=\"raft_write\",le=\"0.0005\"}} 3\n"
        )));
        assert!(text.contains(&format!(
            "{stage}_bucket{{stage=\"raft_write\",le=\"+Inf\"}} 5\n"
        )));
        assert!(text.contains(&format!("{stage}_count{{stage=\"raft_write\"}} 5\n")));
        assert!(
            text.contains("k3rs_datastore_stage_duration_max_seconds{stage=\"raft_write\"} 0.1\n")
        );
        assert!(render(&Sample::default()).contains("etcd_server_has_leader 0\n"));
    }
}
