//! The backend quota's cost of etcd requests (etcd's `v3rpc/quota.go`); the quota itself
//! and its check are `k3rs_datastore::quota`, shared with the API server's writes.

use k3rs_datastore::etcdpb as pb;
use k3rs_datastore::quota;
pub use k3rs_datastore::quota::{Quota, LEASE_COST};

/// etcd's `costPut`.
pub fn put_cost(req: &pb::PutRequest) -> u64 {
    quota::put_cost(req.key.len(), req.value.len())
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
