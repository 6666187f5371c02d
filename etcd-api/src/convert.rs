//! Conversions between the etcd wire messages and the store's types, with etcd's request
//! validation (`v3rpc/key.go`): empty keys, unknown enum values, txn op limits.
//!
//! Every function here is total: any decoded message converts or yields an [`EtcdError`].

use k3rs_storage as st;

use super::error::{ApiResult, EtcdError};
use k3rs_datastore::etcdpb as pb;
use k3rs_datastore::mvccpb;

/// etcd's default `--max-txn-ops`.
pub const MAX_TXN_OPS: usize = 128;

/// A gRPC RangeRequest as the store's (unknown enum values refused).
pub fn range_request(r: pb::RangeRequest) -> ApiResult<st::RangeRequest> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    let sort_order = match pb::range_request::SortOrder::try_from(r.sort_order) {
        Ok(pb::range_request::SortOrder::None) => st::SortOrder::None,
        Ok(pb::range_request::SortOrder::Ascend) => st::SortOrder::Ascend,
        Ok(pb::range_request::SortOrder::Descend) => st::SortOrder::Descend,
        Err(_) => return Err(EtcdError::InvalidSortOption),
    };
    let sort_target = match pb::range_request::SortTarget::try_from(r.sort_target) {
        Ok(pb::range_request::SortTarget::Key) => st::SortTarget::Key,
        Ok(pb::range_request::SortTarget::Version) => st::SortTarget::Version,
        Ok(pb::range_request::SortTarget::Create) => st::SortTarget::Create,
        Ok(pb::range_request::SortTarget::Mod) => st::SortTarget::Mod,
        Ok(pb::range_request::SortTarget::Value) => st::SortTarget::Value,
        Err(_) => return Err(EtcdError::InvalidSortOption),
    };
    Ok(st::RangeRequest {
        key: r.key,
        range_end: r.range_end,
        limit: r.limit,
        revision: r.revision,
        sort_order,
        sort_target,
        serializable: r.serializable,
        keys_only: r.keys_only,
        count_only: r.count_only,
        min_mod_revision: r.min_mod_revision,
        max_mod_revision: r.max_mod_revision,
        min_create_revision: r.min_create_revision,
        max_create_revision: r.max_create_revision,
    })
}

/// A gRPC PutRequest as the store's.
pub fn put_request(r: pb::PutRequest) -> ApiResult<st::PutRequest> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    if r.ignore_value && !r.value.is_empty() {
        return Err(EtcdError::ValueProvided);
    }
    if r.ignore_lease && r.lease != 0 {
        return Err(EtcdError::LeaseProvided);
    }
    Ok(st::PutRequest {
        key: r.key,
        value: r.value,
        lease: r.lease,
        prev_kv: r.prev_kv,
        ignore_value: r.ignore_value,
        ignore_lease: r.ignore_lease,
    })
}

/// A gRPC DeleteRangeRequest as the store's.
pub fn delete_request(r: pb::DeleteRangeRequest) -> ApiResult<st::DeleteRangeRequest> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    Ok(st::DeleteRangeRequest {
        key: r.key,
        range_end: r.range_end,
        prev_kv: r.prev_kv,
    })
}

/// A gRPC TxnRequest as the store's (empty operations refused).
pub fn txn_request(r: pb::TxnRequest) -> ApiResult<st::TxnRequest> {
    if r.compare.len() > MAX_TXN_OPS
        || r.success.len() > MAX_TXN_OPS
        || r.failure.len() > MAX_TXN_OPS
    {
        return Err(EtcdError::TooManyOps);
    }
    let compare = r
        .compare
        .into_iter()
        .map(compare)
        .collect::<ApiResult<Vec<_>>>()?;
    let success = r
        .success
        .into_iter()
        .map(request_op)
        .collect::<ApiResult<Vec<_>>>()?;
    let failure = r
        .failure
        .into_iter()
        .map(request_op)
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(st::TxnRequest {
        compare,
        success,
        failure,
    })
}

/// Whether a txn only reads (no put/delete at any depth).
pub fn txn_is_read_only(t: &st::TxnRequest) -> bool {
    t.success.iter().chain(t.failure.iter()).all(|op| match op {
        st::RequestOp::Range(_) => true,
        st::RequestOp::Txn(t) => txn_is_read_only(t),
        st::RequestOp::Put(_) | st::RequestOp::DeleteRange(_) => false,
    })
}

fn request_op(op: pb::RequestOp) -> ApiResult<st::RequestOp> {
    use pb::request_op::Request;
    match op.request {
        Some(Request::RequestRange(r)) => Ok(st::RequestOp::Range(range_request(r)?)),
        Some(Request::RequestPut(r)) => Ok(st::RequestOp::Put(put_request(r)?)),
        Some(Request::RequestDeleteRange(r)) => Ok(st::RequestOp::DeleteRange(delete_request(r)?)),
        Some(Request::RequestTxn(r)) => Ok(st::RequestOp::Txn(txn_request(r)?)),
        None => Err(EtcdError::EmptyOp),
    }
}

fn compare(c: pb::Compare) -> ApiResult<st::Compare> {
    use pb::compare::{CompareResult as R, CompareTarget as T, TargetUnion as U};
    if c.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    let result = match R::try_from(c.result) {
        Ok(R::Equal) => st::CompareResult::Equal,
        Ok(R::Greater) => st::CompareResult::Greater,
        Ok(R::Less) => st::CompareResult::Less,
        Ok(R::NotEqual) => st::CompareResult::NotEqual,
        Err(_) => {
            return Err(EtcdError::InvalidArgument(format!(
                "invalid compare result {}",
                c.result
            )))
        }
    };
    // Like etcd, the operand is read from the union member that matches the target; a missing
    // or mismatched member reads as zero / empty.
    let u = c.target_union;
    let target = match T::try_from(c.target) {
        Ok(T::Version) => st::CompareTarget::Version(match u {
            Some(U::Version(v)) => v,
            _ => 0,
        }),
        Ok(T::Create) => st::CompareTarget::Create(match u {
            Some(U::CreateRevision(v)) => v,
            _ => 0,
        }),
        Ok(T::Mod) => st::CompareTarget::Mod(match u {
            Some(U::ModRevision(v)) => v,
            _ => 0,
        }),
        Ok(T::Value) => st::CompareTarget::Value(match u {
            Some(U::Value(v)) => v,
            _ => Vec::new(),
        }),
        Ok(T::Lease) => st::CompareTarget::Lease(match u {
            Some(U::Lease(v)) => v,
            _ => 0,
        }),
        Err(_) => {
            return Err(EtcdError::InvalidArgument(format!(
                "invalid compare target {}",
                c.target
            )))
        }
    };
    Ok(st::Compare {
        result,
        target,
        key: c.key,
        range_end: c.range_end,
    })
}

// ------------------------------------------------------------------ store -> wire

/// A store KeyValue as gRPC's.
pub fn kv(k: st::KeyValue) -> mvccpb::KeyValue {
    mvccpb::KeyValue {
        key: k.key,
        create_revision: k.create_revision,
        mod_revision: k.mod_revision,
        version: k.version,
        value: k.value,
        lease: k.lease,
    }
}

/// A store event as gRPC's.
pub fn event(e: st::Event) -> mvccpb::Event {
    let kind = match e.kind {
        st::EventKind::Put => mvccpb::event::EventType::Put,
        st::EventKind::Delete => mvccpb::event::EventType::Delete,
    };
    mvccpb::Event {
        r#type: kind as i32,
        kv: Some(kv(e.kv)),
        prev_kv: e.prev_kv.map(kv),
    }
}

/// A store RangeResponse as gRPC's, with `header`.
pub fn range_response(
    r: st::RangeResponse,
    header: Option<pb::ResponseHeader>,
) -> pb::RangeResponse {
    pb::RangeResponse {
        header,
        kvs: r.kvs.into_iter().map(kv).collect(),
        more: r.more,
        count: r.count,
    }
}

/// A store PutResponse as gRPC's, with `header`.
pub fn put_response(r: st::PutResponse, header: Option<pb::ResponseHeader>) -> pb::PutResponse {
    pb::PutResponse {
        header,
        prev_kv: r.prev_kv.map(kv),
    }
}

/// A store DeleteRangeResponse as gRPC's, with `header`.
pub fn delete_response(
    r: st::DeleteRangeResponse,
    header: Option<pb::ResponseHeader>,
) -> pb::DeleteRangeResponse {
    pb::DeleteRangeResponse {
        header,
        deleted: r.deleted,
        prev_kvs: r.prev_kvs.into_iter().map(kv).collect(),
    }
}

/// A txn response; nested responses carry a header with only the revision, as in etcd.
pub fn txn_response(
    r: st::TxnResponse,
    header: Option<pb::ResponseHeader>,
    revision: i64,
) -> pb::TxnResponse {
    use pb::response_op::Response;
    let nested = || {
        Some(pb::ResponseHeader {
            revision,
            ..Default::default()
        })
    };
    let responses = r
        .responses
        .into_iter()
        .map(|op| pb::ResponseOp {
            response: Some(match op {
                st::ResponseOp::Range(r) => Response::ResponseRange(range_response(r, nested())),
                st::ResponseOp::Put(r) => Response::ResponsePut(put_response(r, nested())),
                st::ResponseOp::DeleteRange(r) => {
                    Response::ResponseDeleteRange(delete_response(r, nested()))
                }
                st::ResponseOp::Txn(r) => {
                    Response::ResponseTxn(txn_response(r, nested(), revision))
                }
            }),
        })
        .collect();
    pb::TxnResponse {
        header,
        succeeded: r.succeeded,
        responses,
    }
}

/// A gRPC WatchCreateRequest as the store's.
pub fn watch_request(r: &pb::WatchCreateRequest) -> st::WatchRequest {
    use pb::watch_create_request::FilterType;
    let mut req = st::WatchRequest {
        // "\0" is the smallest key: an empty key watches from the start.
        key: if r.key.is_empty() {
            vec![0]
        } else {
            r.key.clone()
        },
        range_end: r.range_end.clone(),
        start_revision: r.start_revision,
        prev_kv: r.prev_kv,
        filter_put: false,
        filter_delete: false,
    };
    for f in &r.filters {
        match FilterType::try_from(*f) {
            Ok(FilterType::Noput) => req.filter_put = true,
            Ok(FilterType::Nodelete) => req.filter_delete = true,
            Err(_) => {} // etcd ignores unknown filters
        }
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_op(key: &[u8]) -> pb::RequestOp {
        pb::RequestOp {
            request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
                key: key.to_vec(),
                ..Default::default()
            })),
        }
    }

    #[test]
    fn range_validation() {
        assert!(matches!(
            range_request(pb::RangeRequest::default()),
            Err(EtcdError::EmptyKey)
        ));
        let bad_sort = pb::RangeRequest {
            key: b"a".to_vec(),
            sort_order: 7,
            ..Default::default()
        };
        assert!(matches!(
            range_request(bad_sort),
            Err(EtcdError::InvalidSortOption)
        ));
        let bad_target = pb::RangeRequest {
            key: b"a".to_vec(),
            sort_target: -1,
            ..Default::default()
        };
        assert!(matches!(
            range_request(bad_target),
            Err(EtcdError::InvalidSortOption)
        ));
        let ok = pb::RangeRequest {
            key: b"a".to_vec(),
            range_end: b"b".to_vec(),
            limit: 3,
            revision: 9,
            sort_order: 2,
            sort_target: 3,
            keys_only: true,
            min_create_revision: 4,
            ..Default::default()
        };
        let r = range_request(ok).unwrap();
        assert_eq!(r.sort_order, st::SortOrder::Descend);
        assert_eq!(r.sort_target, st::SortTarget::Mod);
        assert_eq!(
            (r.limit, r.revision, r.min_create_revision, r.keys_only),
            (3, 9, 4, true)
        );
        assert_eq!(r.range_end, b"b");
    }

    #[test]
    fn put_validation() {
        assert!(matches!(
            put_request(pb::PutRequest::default()),
            Err(EtcdError::EmptyKey)
        ));
        let v = pb::PutRequest {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            ignore_value: true,
            ..Default::default()
        };
        assert!(matches!(put_request(v), Err(EtcdError::ValueProvided)));
        let l = pb::PutRequest {
            key: b"k".to_vec(),
            lease: 5,
            ignore_lease: true,
            ..Default::default()
        };
        assert!(matches!(put_request(l), Err(EtcdError::LeaseProvided)));
    }

    #[test]
    fn txn_validation_and_compare_operands() {
        let too_many = pb::TxnRequest {
            success: vec![put_op(b"k"); MAX_TXN_OPS + 1],
            ..Default::default()
        };
        assert!(matches!(txn_request(too_many), Err(EtcdError::TooManyOps)));
        let empty_op = pb::TxnRequest {
            success: vec![pb::RequestOp { request: None }],
            ..Default::default()
        };
        assert!(matches!(txn_request(empty_op), Err(EtcdError::EmptyOp)));
        let nested_empty_key = pb::TxnRequest {
            failure: vec![pb::RequestOp {
                request: Some(pb::request_op::Request::RequestTxn(pb::TxnRequest {
                    success: vec![put_op(b"")],
                    ..Default::default()
                })),
            }],
            ..Default::default()
        };
        assert!(matches!(
            txn_request(nested_empty_key),
            Err(EtcdError::EmptyKey)
        ));

        let cmp = |target: i32, u: Option<pb::compare::TargetUnion>| pb::Compare {
            result: 3,
            target,
            key: b"k".to_vec(),
            target_union: u,
            range_end: Vec::new(),
        };
        use pb::compare::TargetUnion as U;
        let t = txn_request(pb::TxnRequest {
            compare: vec![
                cmp(2, Some(U::ModRevision(7))),
                cmp(3, Some(U::Value(b"x".to_vec()))),
                cmp(0, Some(U::ModRevision(7))), // mismatched member reads as 0
                cmp(4, None),
            ],
            success: vec![put_op(b"k")],
            ..Default::default()
        })
        .unwrap();
        let targets: Vec<_> = t.compare.iter().map(|c| c.target.clone()).collect();
        assert_eq!(
            targets,
            vec![
                st::CompareTarget::Mod(7),
                st::CompareTarget::Value(b"x".to_vec()),
                st::CompareTarget::Version(0),
                st::CompareTarget::Lease(0),
            ]
        );
        assert!(t
            .compare
            .iter()
            .all(|c| c.result == st::CompareResult::NotEqual));
        assert!(!txn_is_read_only(&t));
        assert!(matches!(
            txn_request(pb::TxnRequest {
                compare: vec![cmp(9, None)],
                ..Default::default()
            }),
            Err(EtcdError::InvalidArgument(_))
        ));
    }

    #[test]
    fn read_only_txn() {
        let range = pb::RequestOp {
            request: Some(pb::request_op::Request::RequestRange(pb::RangeRequest {
                key: b"a".to_vec(),
                ..Default::default()
            })),
        };
        let t = txn_request(pb::TxnRequest {
            success: vec![range],
            ..Default::default()
        })
        .unwrap();
        assert!(txn_is_read_only(&t));
    }

    #[test]
    fn txn_response_nests_revision_headers() {
        let r = st::TxnResponse {
            succeeded: true,
            responses: vec![
                st::ResponseOp::Put(st::PutResponse { prev_kv: None }),
                st::ResponseOp::Range(st::RangeResponse {
                    kvs: vec![st::KeyValue::default()],
                    more: false,
                    count: 1,
                }),
            ],
        };
        let out = txn_response(r, None, 42);
        assert!(out.succeeded);
        assert_eq!(out.responses.len(), 2);
        match &out.responses[1].response {
            Some(pb::response_op::Response::ResponseRange(rr)) => {
                assert_eq!(rr.header.as_ref().unwrap().revision, 42);
                assert_eq!(rr.count, 1);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn watch_request_forms_and_filters() {
        let r = watch_request(&pb::WatchCreateRequest {
            filters: vec![0, 1, 77],
            ..Default::default()
        });
        assert_eq!(r.key, vec![0]);
        assert!(r.filter_put && r.filter_delete);
        let ev = event(st::Event {
            kind: st::EventKind::Delete,
            kv: st::KeyValue {
                key: b"k".to_vec(),
                mod_revision: 5,
                ..Default::default()
            },
            prev_kv: None,
        });
        assert_eq!(ev.r#type, mvccpb::event::EventType::Delete as i32);
        assert_eq!(ev.kv.unwrap().mod_revision, 5);
    }
}
