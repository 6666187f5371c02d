//! Txn: request checks (op limits, duplicate keys), compares, and execution of the chosen
//! branches as one revision. Every check runs before anything is written, so a failing txn
//! changes nothing.

use std::collections::BTreeSet;

use crate::keyindex::range_iter;
use crate::kv::{apply_delete, apply_put, check_put_shape};
use crate::range::{range, View};
use crate::store::{Error, Result};
use crate::types::{
    Compare, CompareResult, CompareTarget, KeyValue, RequestError, RequestOp, ResponseOp,
    TxnRequest, TxnResponse,
};
use crate::writer::Writer;

/// etcd's default `--max-txn-ops`.
pub(crate) const MAX_TXN_OPS: usize = 128;

/// A top-level Txn command.
pub(crate) fn txn_command(
    w: &mut Writer<'_>,
    t: &TxnRequest,
) -> Result<Result<TxnResponse, RequestError>> {
    if let Err(e) = check_shape(t, MAX_TXN_OPS) {
        return Ok(Err(e));
    }
    if let Err(e) = check_intervals(&t.success).and_then(|_| check_intervals(&t.failure)) {
        return Ok(Err(e));
    }
    let mut path = Vec::new();
    compare_to_path(&w.view(), t, &mut path)?;
    if let Err(e) = check_path(w, t, &path)? {
        return Ok(Err(e));
    }
    w.begin();
    let mut cursor = 0;
    let resp = execute(w, t, &path, &mut cursor)?;
    w.end();
    Ok(Ok(resp))
}

/// etcd's `checkTxnRequest`: op counts (nested txns get what the parent leaves) and the
/// shape checks of every op in both branches.
fn check_shape(t: &TxnRequest, max_ops: usize) -> Result<(), RequestError> {
    let opc = t.compare.len().max(t.success.len()).max(t.failure.len());
    if opc > max_ops {
        return Err(RequestError::TooManyOps);
    }
    if t.compare.iter().any(|c| c.key.is_empty()) {
        return Err(RequestError::EmptyKey);
    }
    for op in t.success.iter().chain(&t.failure) {
        match op {
            RequestOp::Range(r) if r.key.is_empty() => return Err(RequestError::EmptyKey),
            RequestOp::DeleteRange(d) if d.key.is_empty() => return Err(RequestError::EmptyKey),
            RequestOp::Put(p) => check_put_shape(p)?,
            RequestOp::Txn(inner) => check_shape(inner, max_ops - opc)?,
            _ => {}
        }
    }
    Ok(())
}

/// A deleted interval as etcd's checker sees it: `[begin, end)` compared literally (a
/// `range_end` of `[0]` is not "to the end" here, exactly as in etcd).
struct Interval {
    begin: Vec<u8>,
    end: Vec<u8>,
}

fn intersects(dels: &[Interval], k: &[u8]) -> bool {
    dels.iter()
        .any(|d| d.begin.as_slice() <= k && k < d.end.as_slice())
}

/// etcd's `checkIntervals`: within one branch, no key may be put twice or put inside a
/// deleted range (a put in a nested `then` may repeat one in its `else`).
fn check_intervals(ops: &[RequestOp]) -> Result<(BTreeSet<Vec<u8>>, Vec<Interval>), RequestError> {
    let mut dels = Vec::new();
    for op in ops {
        if let RequestOp::DeleteRange(d) = op {
            let end = if d.range_end.is_empty() {
                let mut e = d.key.clone();
                e.push(0);
                e
            } else {
                d.range_end.clone()
            };
            dels.push(Interval {
                begin: d.key.clone(),
                end,
            });
        }
    }
    let mut puts = BTreeSet::new();
    for op in ops {
        let RequestOp::Txn(t) = op else { continue };
        let (puts_then, dels_then) = check_intervals(&t.success)?;
        let (puts_else, dels_else) = check_intervals(&t.failure)?;
        for k in &puts_then {
            if puts.contains(k) || intersects(&dels, k) {
                return Err(RequestError::DuplicateKey);
            }
            puts.insert(k.clone());
        }
        for k in puts_else {
            if (puts.contains(&k) && !puts_then.contains(&k)) || intersects(&dels, &k) {
                return Err(RequestError::DuplicateKey);
            }
            puts.insert(k);
        }
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    for op in ops {
        let RequestOp::Put(p) = op else { continue };
        if puts.contains(&p.key) || intersects(&dels, &p.key) {
            return Err(RequestError::DuplicateKey);
        }
        puts.insert(p.key.clone());
    }
    Ok((puts, dels))
}

/// etcd's `compareToPath`: the outcome of this txn's compares and of every nested txn on the
/// chosen branches, in execution order, all evaluated against the state before the txn.
fn compare_to_path(v: &View<'_>, t: &TxnRequest, path: &mut Vec<bool>) -> Result<()> {
    let mut ok = true;
    for c in &t.compare {
        if !apply_compare(v, c)? {
            ok = false;
            break;
        }
    }
    path.push(ok);
    for op in if ok { &t.success } else { &t.failure } {
        if let RequestOp::Txn(inner) = op {
            compare_to_path(v, inner, path)?;
        }
    }
    Ok(())
}

/// etcd's `applyCompare`: every live key of the range must satisfy the compare; with no
/// key, a VALUE compare fails and the others compare against zeros.
pub(crate) fn apply_compare(v: &View<'_>, c: &Compare) -> Result<bool> {
    let mut any = false;
    for (_, ki) in range_iter(v.index, &c.key, &c.range_end) {
        let Some(k) = ki.live() else { continue };
        any = true;
        // Only a VALUE compare needs the record; the index knows the rest.
        let kv = match c.target {
            CompareTarget::Value(_) => v.kvs.must_get(k.rev)?,
            _ => KeyValue {
                create_revision: k.created,
                mod_revision: k.rev.main,
                version: k.version,
                lease: ki.lease,
                ..KeyValue::default()
            },
        };
        if !compare_kv(c, &kv) {
            return Ok(false);
        }
    }
    if any {
        return Ok(true);
    }
    Ok(!matches!(c.target, CompareTarget::Value(_)) && compare_kv(c, &KeyValue::default()))
}

fn compare_kv(c: &Compare, kv: &KeyValue) -> bool {
    let ord = match &c.target {
        CompareTarget::Value(v) => kv.value.as_slice().cmp(v.as_slice()),
        CompareTarget::Version(n) => kv.version.cmp(n),
        CompareTarget::Create(n) => kv.create_revision.cmp(n),
        CompareTarget::Mod(n) => kv.mod_revision.cmp(n),
        CompareTarget::Lease(n) => kv.lease.cmp(n),
    };
    match c.result {
        CompareResult::Equal => ord.is_eq(),
        CompareResult::NotEqual => ord.is_ne(),
        CompareResult::Greater => ord.is_gt(),
        CompareResult::Less => ord.is_lt(),
    }
}

/// etcd's `checkRequests` on the chosen path: puts (`ignore_*` needs the key; leases must
/// exist) and ranges (revision neither future nor compacted), against the state before the
/// txn. Also rejects an `ignore_*` put of a key an earlier delete of the same txn removed
/// (etcd would panic there).
fn check_path(w: &Writer<'_>, t: &TxnRequest, path: &[bool]) -> Result<Result<(), RequestError>> {
    let v = w.view();
    let mut dels: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut cursor = 0;
    let mut ranges = Vec::new();
    if let Err(e) = check_puts(w, t, path, &mut cursor, &mut dels, &mut ranges) {
        return Ok(Err(e));
    }
    for rev in ranges {
        if rev != 0 && rev > v.current {
            return Ok(Err(RequestError::FutureRevision));
        }
        if rev != 0 && rev < v.compact {
            return Ok(Err(RequestError::Compacted {
                compact_revision: v.compact.max(0),
            }));
        }
    }
    Ok(Ok(()))
}

fn check_puts(
    w: &Writer<'_>,
    t: &TxnRequest,
    path: &[bool],
    cursor: &mut usize,
    dels: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ranges: &mut Vec<i64>,
) -> Result<(), RequestError> {
    let ok = path.get(*cursor).copied().unwrap_or(false);
    *cursor += 1;
    for op in if ok { &t.success } else { &t.failure } {
        match op {
            RequestOp::Put(p) => {
                if p.ignore_value || p.ignore_lease {
                    let live = w.st.index.get(&p.key).and_then(|ki| ki.live()).is_some();
                    let deleted = dels
                        .iter()
                        .any(|(k, e)| crate::keyindex::in_range(&p.key, k, e));
                    if !live || deleted {
                        return Err(RequestError::KeyNotFound);
                    }
                }
                if p.lease != 0 && !w.st.leases.contains_key(&p.lease) {
                    return Err(RequestError::LeaseNotFound);
                }
            }
            RequestOp::DeleteRange(d) => dels.push((d.key.clone(), d.range_end.clone())),
            RequestOp::Range(r) => ranges.push(r.revision),
            RequestOp::Txn(inner) => check_puts(w, inner, path, cursor, dels, ranges)?,
        }
    }
    Ok(())
}

/// Executes the chosen branches (all checks passed).
fn execute(
    w: &mut Writer<'_>,
    t: &TxnRequest,
    path: &[bool],
    cursor: &mut usize,
) -> Result<TxnResponse> {
    let ok = path.get(*cursor).copied().unwrap_or(false);
    *cursor += 1;
    let ops = if ok { &t.success } else { &t.failure };
    let mut responses = Vec::with_capacity(ops.len());
    for op in ops {
        let resp = match op {
            RequestOp::Range(r) => ResponseOp::Range(range(&w.view(), r)?.map_err(unexpected)?),
            RequestOp::Put(p) => ResponseOp::Put(apply_put(w, p)?.map_err(unexpected)?),
            RequestOp::DeleteRange(d) => ResponseOp::DeleteRange(apply_delete(w, d)?),
            RequestOp::Txn(inner) => ResponseOp::Txn(execute(w, inner, path, cursor)?),
        };
        responses.push(resp);
    }
    Ok(TxnResponse {
        succeeded: ok,
        responses,
    })
}

fn unexpected(e: RequestError) -> Error {
    Error::Corrupt(format!("txn op failed after its checks passed: {e}"))
}
