//! The backend quota (etcd's `etcdserver/quota.go`), shared by the etcd front end and the
//! API server's embedded datastore: before a write that adds data is proposed, the member
//! checks that the backend's size plus the write's estimated cost stays below the quota. If
//! it does not, the member raises NOSPACE for itself (through Raft, so every member refuses
//! such writes from then on) and refuses the write with
//! `etcdserver: mvcc: database space exceeded`.
//!
//! # The backend size
//! etcd measures bbolt's size: every page ever allocated, free pages included, so it grows
//! with writes, does not shrink on compaction and drops only on defragmentation. k3rs
//! measures the same thing of its sled database: its files on disk (sled's `size_on_disk`,
//! the number `etcdctl endpoint status` reports as DB SIZE). sled too keeps freed space
//! until defragmentation writes a fresh database, and grows its files in steps, so the size
//! moves in jumps rather than with every write. The check reads a measurement at most
//! 100 ms old (`Store::db_size_recent`): measuring is a `stat` and a directory listing.

use k3rs_raft::Node;
use k3rs_storage::{AlarmAction, AlarmType, Command, RequestError};

/// etcd's default quota (`DefaultQuotaBytes`): 2 GiB.
pub const DEFAULT_QUOTA_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// etcd's estimate of a key's metadata (`kvOverhead`).
pub const KV_OVERHEAD: u64 = 256;
/// etcd's estimate of a lease (`leaseOverhead`).
pub const LEASE_COST: u64 = 64;

/// The backend quota of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    /// A negative `--etcd-quota-backend-bytes`: no quota.
    Disabled,
    /// At most this many backend bytes.
    Bytes(u64),
}

impl Default for Quota {
    fn default() -> Quota {
        Quota::Bytes(DEFAULT_QUOTA_BYTES)
    }
}

impl Quota {
    /// The quota for a `--etcd-quota-backend-bytes` value, as etcd reads
    /// `--quota-backend-bytes`: 0 is the default, negative disables it.
    pub fn from_flag(bytes: i64) -> Quota {
        match u64::try_from(bytes) {
            Err(_) => Quota::Disabled,
            Ok(0) => Quota::default(),
            Ok(n) => Quota::Bytes(n),
        }
    }

    /// Whether a request costing `cost` fits while the backend holds `backend_size` bytes.
    pub fn available(self, backend_size: u64, cost: u64) -> bool {
        match self {
            Quota::Disabled => true,
            Quota::Bytes(max) => backend_size.saturating_add(cost) < max,
        }
    }
}

/// etcd's `costPut` for a key and value of these lengths.
pub fn put_cost(key_len: usize, value_len: usize) -> u64 {
    KV_OVERHEAD + key_len as u64 + value_len as u64
}

/// The quota check before proposing a write that costs `cost` on the member `node`: if the
/// backend would outgrow `quota`, raises NOSPACE for this member and refuses the write.
pub async fn check(node: &Node, quota: Quota, cost: u64) -> Result<(), RequestError> {
    if quota.available(node.store().db_size_recent(), cost) {
        return Ok(());
    }
    let raise = Command::Alarm {
        action: AlarmAction::Activate,
        member_id: node.status().member_id,
        alarm: AlarmType::Nospace,
    };
    if let Err(e) = node.write(raise).await {
        tracing::warn!(error = %e, "raising the NOSPACE alarm");
    }
    Err(RequestError::NoSpace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_as_etcd_reads_them() {
        assert_eq!(Quota::from_flag(0), Quota::Bytes(2 << 30));
        assert_eq!(Quota::from_flag(-1), Quota::Disabled);
        assert_eq!(Quota::from_flag(1024), Quota::Bytes(1024));
    }

    #[test]
    fn available_is_strictly_below_the_quota() {
        let q = Quota::Bytes(1000);
        assert!(q.available(700, 299));
        assert!(!q.available(700, 300));
        assert!(!q.available(1000, 0));
        assert!(!q.available(u64::MAX, 1));
        assert!(Quota::Disabled.available(u64::MAX, u64::MAX));
    }

    #[test]
    fn put_cost_as_etcd_estimates_it() {
        assert_eq!(put_cost(3, 10), 256 + 3 + 10);
    }
}
