//! Put and DeleteRange, as top-level commands and as txn operations.

use crate::store::Result;
use crate::types::{
    DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RequestError,
};
use crate::writer::Writer;

/// The request-shape checks etcd's gRPC layer makes on a put.
pub(crate) fn check_put_shape(p: &PutRequest) -> Result<(), RequestError> {
    if p.key.is_empty() {
        return Err(RequestError::EmptyKey);
    }
    if p.ignore_value && !p.value.is_empty() {
        return Err(RequestError::ValueProvided);
    }
    if p.ignore_lease && p.lease != 0 {
        return Err(RequestError::LeaseProvided);
    }
    Ok(())
}

/// A top-level Put: validates, then writes one revision.
pub(crate) fn put_command(
    w: &mut Writer<'_>,
    p: &PutRequest,
) -> Result<Result<PutResponse, RequestError>> {
    if let Err(e) = check_put_shape(p) {
        return Ok(Err(e));
    }
    if p.lease != 0 && !w.st.leases.contains_key(&p.lease) {
        return Ok(Err(RequestError::LeaseNotFound));
    }
    w.begin();
    let resp = apply_put(w, p)?;
    w.end();
    Ok(resp)
}

/// Applies a validated put inside the current request. Fails only with `KeyNotFound` when an
/// `ignore_*` flag needs a previous version that does not exist (before anything is written).
pub(crate) fn apply_put(
    w: &mut Writer<'_>,
    p: &PutRequest,
) -> Result<Result<PutResponse, RequestError>> {
    let prev = if p.prev_kv || p.ignore_value || p.ignore_lease {
        w.live_kv(&p.key)?
    } else {
        None
    };
    let (mut value, mut lease) = (p.value.clone(), p.lease);
    if p.ignore_value || p.ignore_lease {
        let Some(prev) = &prev else {
            return Ok(Err(RequestError::KeyNotFound));
        };
        if p.ignore_value {
            value = prev.value.clone();
        }
        if p.ignore_lease {
            lease = prev.lease;
        }
    }
    w.put(&p.key, value, lease);
    Ok(Ok(PutResponse {
        prev_kv: if p.prev_kv { prev } else { None },
    }))
}

/// A top-level DeleteRange: one revision if it deleted anything.
pub(crate) fn delete_command(
    w: &mut Writer<'_>,
    d: &DeleteRangeRequest,
) -> Result<Result<DeleteRangeResponse, RequestError>> {
    if d.key.is_empty() {
        return Ok(Err(RequestError::EmptyKey));
    }
    w.begin();
    let resp = apply_delete(w, d)?;
    w.end();
    Ok(Ok(resp))
}

/// Applies a delete-range inside the current request.
pub(crate) fn apply_delete(
    w: &mut Writer<'_>,
    d: &DeleteRangeRequest,
) -> Result<DeleteRangeResponse> {
    let keys = w.live_keys(&d.key, &d.range_end);
    let mut prev_kvs = Vec::new();
    if d.prev_kv {
        for k in &keys {
            prev_kvs.extend(w.live_kv(k)?);
        }
    }
    for k in &keys {
        w.delete(k);
    }
    Ok(DeleteRangeResponse {
        deleted: keys.len() as i64,
        prev_kvs,
    })
}
