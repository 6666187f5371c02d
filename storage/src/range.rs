//! Range reads (etcd's `Range` apply): revision checks, limit, count, filters, sort.

use std::cmp::Ordering;

use crate::keyindex::{range_iter, TreeIndex};
use crate::reader::KvReader;
use crate::store::Result;
use crate::types::{KeyValue, RangeRequest, RangeResponse, RequestError, SortOrder, SortTarget};

/// The read view a range runs against.
pub(crate) struct View<'a> {
    pub index: &'a TreeIndex,
    pub kvs: KvReader<'a>,
    /// Revision a `revision == 0` read sees (inside a txn with writes: the txn's revision).
    pub current: i64,
    /// Raw compacted revision (-1 before any compaction).
    pub compact: i64,
}

/// Checks that a range may read at `revision` and returns the revision it reads at.
pub(crate) fn read_revision(v: &View<'_>, revision: i64) -> Result<i64, RequestError> {
    if revision > v.current {
        return Err(RequestError::FutureRevision);
    }
    let at = if revision <= 0 { v.current } else { revision };
    if at < v.compact {
        return Err(RequestError::Compacted {
            compact_revision: v.compact.max(0),
        });
    }
    Ok(at)
}

/// Runs a range request. The outer `Result` is an engine failure, the inner one the answer.
pub(crate) fn range(
    v: &View<'_>,
    req: &RangeRequest,
) -> Result<Result<RangeResponse, RequestError>> {
    if req.key.is_empty() {
        return Ok(Err(RequestError::EmptyKey));
    }
    let at = match read_revision(v, req.revision) {
        Ok(at) => at,
        Err(e) => return Ok(Err(e)),
    };
    let filtered = req.min_mod_revision != 0
        || req.max_mod_revision != 0
        || req.min_create_revision != 0
        || req.max_create_revision != 0;
    // Like etcd: sorting or filtering reads everything, then sorts and cuts; otherwise read
    // one more than the limit to learn `more`.
    let fetch = if req.sort_order != SortOrder::None || filtered || req.limit <= 0 {
        usize::MAX
    } else {
        usize::try_from(req.limit)
            .unwrap_or(usize::MAX)
            .saturating_add(1)
    };
    let mut count = 0i64;
    let mut revs = Vec::new();
    for (_, ki) in range_iter(v.index, &req.key, &req.range_end) {
        if let Some(k) = ki.get(at) {
            count += 1;
            if !req.count_only && revs.len() < fetch {
                revs.push(k.rev);
            }
        }
    }
    if req.count_only {
        return Ok(Ok(RangeResponse {
            kvs: Vec::new(),
            more: false,
            count,
        }));
    }
    let mut kvs = Vec::with_capacity(revs.len());
    for rev in revs {
        let kv = v.kvs.must_get(rev)?;
        if passes_filters(req, &kv) {
            kvs.push(kv);
        }
    }
    sort(&mut kvs, req.sort_order, req.sort_target);
    let mut more = false;
    if req.limit > 0 && kvs.len() as i64 > req.limit {
        kvs.truncate(req.limit as usize);
        more = true;
    }
    if req.keys_only {
        for kv in &mut kvs {
            kv.value = Vec::new();
        }
    }
    Ok(Ok(RangeResponse { kvs, more, count }))
}

fn passes_filters(req: &RangeRequest, kv: &KeyValue) -> bool {
    (req.min_mod_revision == 0 || kv.mod_revision >= req.min_mod_revision)
        && (req.max_mod_revision == 0 || kv.mod_revision <= req.max_mod_revision)
        && (req.min_create_revision == 0 || kv.create_revision >= req.min_create_revision)
        && (req.max_create_revision == 0 || kv.create_revision <= req.max_create_revision)
}

/// etcd's sort rules: results come sorted by key ascending; `None` with another target means
/// ascending. Ties keep key order (etcd's sort is unstable; ours is deterministic).
fn sort(kvs: &mut [KeyValue], order: SortOrder, target: SortTarget) {
    let order = match (order, target) {
        (SortOrder::None, SortTarget::Key) | (SortOrder::Ascend, SortTarget::Key) => return,
        (SortOrder::None, _) => SortOrder::Ascend,
        (o, _) => o,
    };
    let cmp = |a: &KeyValue, b: &KeyValue| -> Ordering {
        match target {
            SortTarget::Key => a.key.cmp(&b.key),
            SortTarget::Version => a.version.cmp(&b.version),
            SortTarget::Create => a.create_revision.cmp(&b.create_revision),
            SortTarget::Mod => a.mod_revision.cmp(&b.mod_revision),
            SortTarget::Value => a.value.cmp(&b.value),
        }
    };
    if order == SortOrder::Descend {
        kvs.sort_by(|a, b| cmp(b, a));
    } else {
        kvs.sort_by(cmp);
    }
}
