//! A plain in-memory model of etcd's MVCC semantics: the whole history as a list of changes,
//! every read a linear scan. Slow and obviously correct; the property test compares the store
//! against it.

use std::collections::{BTreeMap, BTreeSet};

use k3rs_storage::*;

/// One change: the key's new state at `rev` (`None` = deleted).
#[derive(Debug, Clone)]
pub struct Change {
    pub rev: i64,
    pub key: Vec<u8>,
    pub kv: Option<KeyValue>,
}

#[derive(Debug, Clone)]
pub struct Model {
    pub history: Vec<Change>,
    pub rev: i64,
    /// -1 before the first compaction, as in etcd.
    pub compact: i64,
    pub leases: BTreeMap<i64, i64>,
    /// Leases granted with ID 0 so far (their placeholders are -1001, -1002, ...).
    pub auto_leases: i64,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            history: Vec::new(),
            rev: 1,
            compact: -1,
            leases: BTreeMap::new(),
            auto_leases: 0,
        }
    }
}

fn in_range(k: &[u8], key: &[u8], end: &[u8]) -> bool {
    match end {
        [] => k == key,
        [0] => k >= key,
        _ => k >= key && k < end,
    }
}

impl Model {
    pub fn kv_at(&self, key: &[u8], at: i64) -> Option<KeyValue> {
        self.history
            .iter()
            .rev()
            .find(|c| c.rev <= at && c.key == key)
            .and_then(|c| c.kv.clone())
    }

    fn live_in(&self, key: &[u8], end: &[u8], at: i64) -> Vec<KeyValue> {
        let keys: BTreeSet<&Vec<u8>> = self.history.iter().map(|c| &c.key).collect();
        keys.into_iter()
            .filter(|k| in_range(k, key, end))
            .filter_map(|k| self.kv_at(k, at))
            .collect()
    }

    fn compacted(&self) -> RequestError {
        RequestError::Compacted {
            compact_revision: self.compact.max(0),
        }
    }

    /// Gives a lease granted with ID 0 the ID the store picked.
    pub fn rename_lease(&mut self, placeholder: i64, id: i64) {
        if let Some(ttl) = self.leases.remove(&placeholder) {
            self.leases.insert(id, ttl);
        }
    }

    pub fn leases(&self) -> Vec<Lease> {
        let live = self.live_in(&[0], &[0], self.rev);
        self.leases
            .iter()
            .map(|(&id, &ttl)| Lease {
                id,
                ttl,
                keys: live
                    .iter()
                    .filter(|kv| kv.lease == id)
                    .map(|kv| kv.key.clone())
                    .collect(),
            })
            .collect()
    }

    pub fn range(&self, req: &RangeRequest, current: i64) -> Result<RangeResponse, RequestError> {
        if req.key.is_empty() {
            return Err(RequestError::EmptyKey);
        }
        if req.revision > current {
            return Err(RequestError::FutureRevision);
        }
        let at = if req.revision <= 0 {
            current
        } else {
            req.revision
        };
        if at < self.compact {
            return Err(self.compacted());
        }
        let mut kvs = self.live_in(&req.key, &req.range_end, at);
        let count = kvs.len() as i64;
        if req.count_only {
            return Ok(RangeResponse {
                kvs: vec![],
                more: false,
                count,
            });
        }
        // etcd reads only `limit + 1` keys (by key) unless it must sort or filter everything.
        let filters = [
            req.min_mod_revision,
            req.max_mod_revision,
            req.min_create_revision,
            req.max_create_revision,
        ];
        if req.limit > 0 && req.sort_order == SortOrder::None && filters.iter().all(|&f| f == 0) {
            kvs.truncate(req.limit as usize + 1);
        }
        kvs.retain(|kv| {
            (req.min_mod_revision == 0 || kv.mod_revision >= req.min_mod_revision)
                && (req.max_mod_revision == 0 || kv.mod_revision <= req.max_mod_revision)
                && (req.min_create_revision == 0 || kv.create_revision >= req.min_create_revision)
                && (req.max_create_revision == 0 || kv.create_revision <= req.max_create_revision)
        });
        let descending = req.sort_order == SortOrder::Descend;
        let by = |kv: &KeyValue| -> (Vec<u8>, i64) {
            match req.sort_target {
                SortTarget::Key => (kv.key.clone(), 0),
                SortTarget::Value => (kv.value.clone(), 0),
                SortTarget::Version => (vec![], kv.version),
                SortTarget::Create => (vec![], kv.create_revision),
                SortTarget::Mod => (vec![], kv.mod_revision),
            }
        };
        if descending {
            kvs.sort_by_key(|kv| std::cmp::Reverse(by(kv)));
        } else {
            kvs.sort_by_key(by);
        }
        let mut more = false;
        if req.limit > 0 && kvs.len() as i64 > req.limit {
            kvs.truncate(req.limit as usize);
            more = true;
        }
        if req.keys_only {
            kvs.iter_mut().for_each(|kv| kv.value.clear());
        }
        Ok(RangeResponse { kvs, more, count })
    }

    /// Applies one command; writes of a request land at `rev + 1`.
    pub fn apply(&mut self, cmd: &Command) -> Output {
        let result = match cmd {
            Command::Put(p) => self.put_cmd(p).map(CommandResponse::Put),
            Command::DeleteRange(d) if d.key.is_empty() => Err(RequestError::EmptyKey),
            Command::DeleteRange(d) => {
                let mut changed = false;
                let r = self.delete(d, &mut changed);
                self.rev += i64::from(changed);
                Ok(CommandResponse::DeleteRange(r))
            }
            Command::Txn(t) => self.txn(t).map(CommandResponse::Txn),
            Command::Compact { revision } => {
                if *revision <= self.compact {
                    Err(self.compacted())
                } else if *revision > self.rev {
                    Err(RequestError::FutureRevision)
                } else {
                    self.compact = *revision;
                    Ok(CommandResponse::Compact)
                }
            }
            Command::LeaseGrant { id: 0, ttl } => {
                // The store picks the ID; the harness renames this placeholder to it.
                self.auto_leases += 1;
                let placeholder = -1000 - self.auto_leases;
                self.leases.insert(placeholder, *ttl);
                Ok(CommandResponse::LeaseGrant {
                    id: placeholder,
                    ttl: *ttl,
                })
            }
            Command::LeaseGrant { id, ttl } => {
                if self.leases.contains_key(id) {
                    Err(RequestError::LeaseExists)
                } else {
                    self.leases.insert(*id, *ttl);
                    Ok(CommandResponse::LeaseGrant { id: *id, ttl: *ttl })
                }
            }
            Command::Alarm { .. } => {
                unreachable!("the model generates no alarms (tests/store/alarm.rs covers them)")
            }
            Command::LeaseRevoke { id } => {
                if self.leases.remove(id).is_none() {
                    Err(RequestError::LeaseNotFound)
                } else {
                    let keys: Vec<_> = self
                        .live_in(&[0], &[0], self.rev)
                        .into_iter()
                        .filter(|kv| kv.lease == *id)
                        .collect();
                    for kv in &keys {
                        self.history.push(Change {
                            rev: self.rev + 1,
                            key: kv.key.clone(),
                            kv: None,
                        });
                    }
                    self.rev += i64::from(!keys.is_empty());
                    Ok(CommandResponse::LeaseRevoke)
                }
            }
        };
        Output {
            revision: self.rev,
            result,
        }
    }

    fn put_cmd(&mut self, p: &PutRequest) -> Result<PutResponse, RequestError> {
        put_shape(p)?;
        if p.lease != 0 && !self.leases.contains_key(&p.lease) {
            return Err(RequestError::LeaseNotFound);
        }
        let prev = self.kv_at(&p.key, self.rev);
        if (p.ignore_value || p.ignore_lease) && prev.is_none() {
            return Err(RequestError::KeyNotFound);
        }
        let mut changed = false;
        let r = self.put(p, &mut changed);
        self.rev += 1;
        Ok(r)
    }

    /// Writes at `rev + 1`; `changed` says a write already happened in this request.
    fn put(&mut self, p: &PutRequest, changed: &mut bool) -> PutResponse {
        let at = self.rev + i64::from(*changed);
        let prev = self.kv_at(&p.key, at);
        let kv = KeyValue {
            key: p.key.clone(),
            create_revision: prev.as_ref().map_or(self.rev + 1, |kv| kv.create_revision),
            mod_revision: self.rev + 1,
            version: prev.as_ref().map_or(1, |kv| kv.version + 1),
            value: if p.ignore_value {
                prev.clone().unwrap().value
            } else {
                p.value.clone()
            },
            lease: if p.ignore_lease {
                prev.clone().unwrap().lease
            } else {
                p.lease
            },
        };
        self.history.push(Change {
            rev: self.rev + 1,
            key: p.key.clone(),
            kv: Some(kv),
        });
        *changed = true;
        PutResponse {
            prev_kv: if p.prev_kv { prev } else { None },
        }
    }

    fn delete(&mut self, d: &DeleteRangeRequest, changed: &mut bool) -> DeleteRangeResponse {
        let at = self.rev + i64::from(*changed);
        let gone = self.live_in(&d.key, &d.range_end, at);
        for kv in &gone {
            self.history.push(Change {
                rev: self.rev + 1,
                key: kv.key.clone(),
                kv: None,
            });
            *changed = true;
        }
        DeleteRangeResponse {
            deleted: gone.len() as i64,
            prev_kvs: if d.prev_kv { gone } else { vec![] },
        }
    }

    /// Txns in the property test nest one level deep.
    fn txn(&mut self, t: &TxnRequest) -> Result<TxnResponse, RequestError> {
        shape(t)?;
        dup_check(&t.success)?;
        dup_check(&t.failure)?;
        let mut path = vec![];
        self.path(t, &mut path);
        let mut flat = vec![];
        flatten(t, &path, &mut 0, &mut flat);
        // Puts with `ignore_*` need the key before the txn, and not deleted earlier in it.
        let mut deleted: Vec<&DeleteRangeRequest> = vec![];
        for op in &flat {
            match op {
                RequestOp::Put(p) => {
                    let gone = deleted
                        .iter()
                        .any(|d| in_range(&p.key, &d.key, &d.range_end));
                    let needs_key = p.ignore_value || p.ignore_lease;
                    if needs_key && (gone || self.kv_at(&p.key, self.rev).is_none()) {
                        return Err(RequestError::KeyNotFound);
                    }
                    if p.lease != 0 && !self.leases.contains_key(&p.lease) {
                        return Err(RequestError::LeaseNotFound);
                    }
                }
                RequestOp::DeleteRange(d) => deleted.push(d),
                _ => {}
            }
        }
        for op in &flat {
            if let RequestOp::Range(r) = op {
                if r.revision != 0 && r.revision > self.rev {
                    return Err(RequestError::FutureRevision);
                }
                if r.revision != 0 && r.revision < self.compact {
                    return Err(self.compacted());
                }
            }
        }
        let mut changed = false;
        let resp = self.exec(t, &path, &mut 0, &mut changed);
        self.rev += i64::from(changed);
        Ok(resp)
    }

    fn path(&self, t: &TxnRequest, path: &mut Vec<bool>) {
        let ok = t.compare.iter().all(|c| self.compare(c));
        path.push(ok);
        for op in if ok { &t.success } else { &t.failure } {
            if let RequestOp::Txn(inner) = op {
                self.path(inner, path);
            }
        }
    }

    fn compare(&self, c: &Compare) -> bool {
        let kvs = self.live_in(&c.key, &c.range_end, self.rev);
        if kvs.is_empty() {
            return !matches!(c.target, CompareTarget::Value(_))
                && compare_kv(c, &KeyValue::default());
        }
        kvs.iter().all(|kv| compare_kv(c, kv))
    }

    fn exec(
        &mut self,
        t: &TxnRequest,
        path: &[bool],
        i: &mut usize,
        changed: &mut bool,
    ) -> TxnResponse {
        let ok = path[*i];
        *i += 1;
        let mut responses = vec![];
        for op in if ok { &t.success } else { &t.failure } {
            responses.push(match op {
                RequestOp::Range(r) => ResponseOp::Range(
                    self.range(r, self.rev + i64::from(*changed))
                        .expect("checked"),
                ),
                RequestOp::Put(p) => ResponseOp::Put(self.put(p, changed)),
                RequestOp::DeleteRange(d) => ResponseOp::DeleteRange(self.delete(d, changed)),
                RequestOp::Txn(inner) => ResponseOp::Txn(self.exec(inner, path, i, changed)),
            });
        }
        TxnResponse {
            succeeded: ok,
            responses,
        }
    }

    /// Every event of the history, as a watcher with `prev_kv` sees them.
    pub fn events(&self) -> Vec<Event> {
        self.history
            .iter()
            .map(|c| {
                let prev = self.kv_at(&c.key, c.rev - 1);
                match &c.kv {
                    Some(kv) => Event {
                        kind: EventKind::Put,
                        kv: kv.clone(),
                        prev_kv: if kv.version > 1 { prev } else { None },
                    },
                    None => Event {
                        kind: EventKind::Delete,
                        kv: KeyValue {
                            key: c.key.clone(),
                            mod_revision: c.rev,
                            ..Default::default()
                        },
                        prev_kv: prev,
                    },
                }
            })
            .collect()
    }
}

fn put_shape(p: &PutRequest) -> Result<(), RequestError> {
    match () {
        _ if p.key.is_empty() => Err(RequestError::EmptyKey),
        _ if p.ignore_value && !p.value.is_empty() => Err(RequestError::ValueProvided),
        _ if p.ignore_lease && p.lease != 0 => Err(RequestError::LeaseProvided),
        _ => Ok(()),
    }
}

/// The request checks of every put in both branches, nested txns included.
fn shape(t: &TxnRequest) -> Result<(), RequestError> {
    for op in t.success.iter().chain(&t.failure) {
        match op {
            RequestOp::Put(p) => put_shape(p)?,
            RequestOp::Txn(inner) => shape(inner)?,
            _ => {}
        }
    }
    Ok(())
}

fn compare_kv(c: &Compare, kv: &KeyValue) -> bool {
    let ord = match &c.target {
        CompareTarget::Value(v) => kv.value.cmp(v),
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

/// The ops on the chosen path, in execution order.
fn flatten<'a>(t: &'a TxnRequest, path: &[bool], i: &mut usize, out: &mut Vec<&'a RequestOp>) {
    let ok = path[*i];
    *i += 1;
    for op in if ok { &t.success } else { &t.failure } {
        match op {
            RequestOp::Txn(inner) => flatten(inner, path, i, out),
            other => out.push(other),
        }
    }
}

fn puts_of(ops: &[RequestOp]) -> Vec<&Vec<u8>> {
    ops.iter()
        .filter_map(|op| {
            if let RequestOp::Put(p) = op {
                Some(&p.key)
            } else {
                None
            }
        })
        .collect()
}

fn dels_of(ops: &[RequestOp]) -> Vec<&DeleteRangeRequest> {
    ops.iter()
        .filter_map(|op| {
            if let RequestOp::DeleteRange(d) = op {
                Some(d)
            } else {
                None
            }
        })
        .collect()
}

/// Whether a delete covers `k` for the duplicate check: intervals compare literally (a
/// `range_end` of `[0]` covers nothing above it), as in etcd.
fn covers(d: &DeleteRangeRequest, k: &[u8]) -> bool {
    match d.range_end.as_slice() {
        [] => k == d.key.as_slice(),
        end => k >= d.key.as_slice() && k < end,
    }
}

fn has_duplicates(keys: &[&Vec<u8>]) -> bool {
    keys.iter().collect::<BTreeSet<_>>().len() != keys.len()
}

/// etcd's duplicate-key rule for one branch (nested txns one level deep), stated as
/// conditions: no key put twice at this level or within a nested branch; no key put by two
/// different nested txns, or by a nested txn and this level; no nested branch puts a key its
/// own deletes cover; a nested txn's puts are not covered by this level's deletes nor by the
/// deletes of nested txns before it; this level's puts are not covered by any delete.
fn dup_check(ops: &[RequestOp]) -> Result<(), RequestError> {
    let dup = Err(RequestError::DuplicateKey);
    let own_puts = puts_of(ops);
    let own_dels = dels_of(ops);
    let children: Vec<&TxnRequest> = ops
        .iter()
        .filter_map(|op| {
            if let RequestOp::Txn(t) = op {
                Some(t)
            } else {
                None
            }
        })
        .collect();
    let mut groups: Vec<BTreeSet<&Vec<u8>>> = vec![];
    let mut earlier_dels: Vec<&DeleteRangeRequest> = own_dels.clone();
    for t in &children {
        let mut group = BTreeSet::new();
        for branch in [&t.success, &t.failure] {
            let (puts, dels) = (puts_of(branch), dels_of(branch));
            if has_duplicates(&puts) || puts.iter().any(|k| dels.iter().any(|d| covers(d, k))) {
                return dup;
            }
            group.extend(puts);
        }
        if group
            .iter()
            .any(|k| earlier_dels.iter().any(|d| covers(d, k)))
        {
            return dup;
        }
        earlier_dels.extend(dels_of(&t.success).into_iter().chain(dels_of(&t.failure)));
        groups.push(group);
    }
    let mut all: Vec<&Vec<u8>> = groups.iter().flatten().copied().collect();
    all.extend(own_puts.iter().copied());
    if has_duplicates(&all)
        || own_puts
            .iter()
            .any(|k| earlier_dels.iter().any(|d| covers(d, k)))
    {
        return dup;
    }
    Ok(())
}
