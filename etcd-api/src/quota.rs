//! The backend quota (etcd's `etcdserver/quota.go` and `v3rpc/quota.go`): before a request
//! that adds data is proposed, the member checks that the backend's size plus the request's
//! estimated cost stays below the quota. If it does not, the member raises NOSPACE for
//! itself (through Raft, so every member refuses such writes from then on) and answers
//! `etcdserver: mvcc: database space exceeded`.
//!
//! # The backend size
//! etcd measures bbolt's size: every page ever allocated, free pages included, so it grows
//! with writes, does not shrink on compaction and drops only on defragmentation. k3rs
//! measures the same thing of its sled database: its files on disk (sled's `size_on_disk`,
//! the number `etcdctl endpoint status` reports as DB SIZE). sled too keeps freed space
//! until defragmentation writes a fresh database, and grows its files in steps, so the size
//! moves in jumps rather than with every write.

use k3rs_datastore::etcdpb as pb;

/// etcd's default quota (`DefaultQuotaBytes`): 2 GiB.
pub const DEFAULT_QUOTA_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// etcd's estimate of a key's metadata (`kvOverhead`).
const KV_OVERHEAD: u64 = 256;
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

impl Quota {
    /// The quota for a `--etcd-quota-backend-bytes` value, as etcd reads
    /// `--quota-backend-bytes`: 0 is the default, negative disables it.
    pub fn from_flag(bytes: i64) -> Quota {
        match u64::try_from(bytes) {
            Err(_) => Quota::Disabled,
            Ok(0) => Quota::Bytes(DEFAULT_QUOTA_BYTES),
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

/// etcd's `costPut`.
pub fn put_cost(req: &pb::PutRequest) -> u64 {
    KV_OVERHEAD + req.key.len() as u64 + req.value.len() as u64
}

/// etcd's `costTxn`: the costlier branch, counting the top-level puts.
pub fn txn_cost(req: &pb::TxnRequest) -> u64 {
    let branch = |ops: &[pb::RequestOp]| -> u64 {
        ops.iter()
            .map(|op| match &op.request {
                Some(pb::request_op::Request::RequestPut(p)) => put_cost(p),
                _ => 0,
            })
            .sum()
    };
    branch(&req.success).max(branch(&req.failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_op(key: &str, value_len: usize) -> pb::RequestOp {
        pb::RequestOp {
            request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
                key: key.into(),
                value: vec![0; value_len],
                ..Default::default()
            })),
        }
    }

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
    fn costs_as_etcd_estimates_them() {
        let p = pb::PutRequest {
            key: b"key".to_vec(),
            value: vec![0; 10],
            ..Default::default()
        };
        assert_eq!(put_cost(&p), 256 + 3 + 10);
        let txn = pb::TxnRequest {
            success: vec![put_op("a", 100), put_op("b", 100)],
            failure: vec![put_op("c", 150)],
            ..Default::default()
        };
        assert_eq!(txn_cost(&txn), 2 * (256 + 1 + 100));
        let read_only = pb::TxnRequest {
            success: vec![pb::RequestOp {
                request: Some(pb::request_op::Request::RequestRange(Default::default())),
            }],
            ..Default::default()
        };
        assert_eq!(txn_cost(&read_only), 0);
    }
}
