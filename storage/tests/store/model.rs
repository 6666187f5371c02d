//! Model-based property test: random batches of commands applied to the store and to a plain
//! in-memory model of etcd MVCC must give identical outputs (revisions included) and identical
//! state at every retained revision; the store is reopened mid-sequence; watchers started at
//! random revisions must deliver exactly the model's history.
//!
//! `PROPTEST_CASES` changes the number of cases (default 128, about ten seconds).
mod mvcc_model;

use k3rs_storage::*;
use mvcc_model::Model;
use proptest::prelude::*;

const KEYS: &[&str] = &["a", "b", "c", "d", "e"];

#[derive(Debug, Clone)]
enum CmdGen {
    Plain(Command),
    /// Compact at `current - back`.
    Compact(i64),
}

#[derive(Debug, Clone)]
struct WatchGen {
    /// Start at `current + 1 - back` (never at or below the compacted revision); `None` = 0.
    back: Option<i64>,
    req: WatchRequest,
}

#[derive(Debug, Clone)]
enum Step {
    Cmd(CmdGen),
    EndBatch,
    Read(RangeRequest),
    Watch(WatchGen),
    Reopen,
    /// Export a snapshot and import it back into the same store.
    SnapshotRoundtrip,
    Defragment,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(KEYS).prop_map(|k| k.as_bytes().to_vec())
}

fn range_end() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![3 => Just(vec![]), 1 => Just(vec![0]), 2 => key()]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(&["", "x", "y", "zz"][..]).prop_map(|v| v.as_bytes().to_vec())
}

fn lease_id() -> impl Strategy<Value = i64> {
    prop_oneof![3 => Just(0i64), 1 => 1i64..4]
}

fn put(top: bool) -> impl Strategy<Value = PutRequest> {
    let flags = if top { 0.15 } else { 0.08 };
    (
        prop_oneof![12 => key(), 1 => Just(vec![])],
        value(),
        lease_id(),
        any::<bool>(),
        prop::bool::weighted(flags),
        prop::bool::weighted(flags),
    )
        .prop_map(
            move |(key, value, lease, prev_kv, ignore_value, ignore_lease)| PutRequest {
                key: if top || !key.is_empty() {
                    key
                } else {
                    b"a".to_vec()
                },
                value,
                lease,
                prev_kv,
                ignore_value,
                ignore_lease,
            },
        )
}

fn delete() -> impl Strategy<Value = DeleteRangeRequest> {
    (key(), range_end(), any::<bool>()).prop_map(|(key, range_end, prev_kv)| DeleteRangeRequest {
        key,
        range_end,
        prev_kv,
    })
}

fn sort_order() -> impl Strategy<Value = SortOrder> {
    prop::sample::select(&[SortOrder::None, SortOrder::Ascend, SortOrder::Descend][..])
}

fn sort_target() -> impl Strategy<Value = SortTarget> {
    use SortTarget::*;
    prop::sample::select(&[Key, Version, Create, Mod, Value][..])
}

fn range_req() -> impl Strategy<Value = RangeRequest> {
    let filter = || prop_oneof![3 => Just(0i64), 1 => 1i64..20];
    (
        (
            key(),
            range_end(),
            0i64..4,
            prop_oneof![2 => Just(0i64), 1 => 1i64..40],
        ),
        (
            sort_order(),
            sort_target(),
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.2),
        ),
        (filter(), filter(), filter(), filter()),
    )
        .prop_map(
            |(
                (key, range_end, limit, revision),
                (sort_order, sort_target, keys_only, count_only),
                f,
            )| {
                RangeRequest {
                    key,
                    range_end,
                    limit,
                    revision,
                    sort_order,
                    sort_target,
                    serializable: false,
                    keys_only,
                    count_only,
                    min_mod_revision: f.0,
                    max_mod_revision: f.1,
                    min_create_revision: f.2,
                    max_create_revision: f.3,
                }
            },
        )
}

fn compare() -> impl Strategy<Value = Compare> {
    use CompareResult::*;
    let result = prop::sample::select(&[Equal, Greater, Less, NotEqual][..]);
    let target = prop_oneof![
        (0i64..4).prop_map(CompareTarget::Version),
        (0i64..20).prop_map(CompareTarget::Create),
        (0i64..20).prop_map(CompareTarget::Mod),
        value().prop_map(CompareTarget::Value),
        (0i64..4).prop_map(CompareTarget::Lease),
    ];
    (
        result,
        target,
        key(),
        prop_oneof![4 => Just(vec![]), 1 => range_end()],
    )
        .prop_map(|(result, target, key, range_end)| Compare {
            result,
            target,
            key,
            range_end,
        })
}

fn nested_txn() -> impl Strategy<Value = TxnRequest> {
    let op = || {
        prop_oneof![
            range_req().prop_map(RequestOp::Range),
            put(false).prop_map(RequestOp::Put),
            delete().prop_map(RequestOp::DeleteRange),
        ]
    };
    (
        prop::collection::vec(compare(), 0..2),
        prop::collection::vec(op(), 0..3),
        prop::collection::vec(op(), 0..3),
    )
        .prop_map(|(compare, success, failure)| TxnRequest {
            compare,
            success,
            failure,
        })
}

fn txn() -> impl Strategy<Value = TxnRequest> {
    let op = || {
        prop_oneof![
            range_req().prop_map(RequestOp::Range),
            put(false).prop_map(RequestOp::Put),
            delete().prop_map(RequestOp::DeleteRange),
            nested_txn().prop_map(RequestOp::Txn),
        ]
    };
    (
        prop::collection::vec(compare(), 0..3),
        prop::collection::vec(op(), 0..4),
        prop::collection::vec(op(), 0..4),
    )
        .prop_map(|(compare, success, failure)| TxnRequest {
            compare,
            success,
            failure,
        })
}

fn command() -> impl Strategy<Value = CmdGen> {
    prop_oneof![
        6 => put(true).prop_map(|p| CmdGen::Plain(Command::Put(p))),
        2 => delete().prop_map(|d| CmdGen::Plain(Command::DeleteRange(d))),
        4 => txn().prop_map(|t| CmdGen::Plain(Command::Txn(t))),
        1 => (-1i64..6).prop_map(CmdGen::Compact),
        1 => (0i64..4, 1i64..100).prop_map(|(id, ttl)| CmdGen::Plain(Command::LeaseGrant { id, ttl })),
        1 => (1i64..5).prop_map(|id| CmdGen::Plain(Command::LeaseRevoke { id })),
    ]
}

fn watch() -> impl Strategy<Value = WatchGen> {
    (
        prop_oneof![1 => Just(None), 4 => (0i64..30).prop_map(Some)],
        key(),
        prop_oneof![Just(vec![0]), range_end()],
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(back, key, range_end, prev_kv, filter_put, filter_delete)| WatchGen {
                back,
                req: WatchRequest {
                    key,
                    range_end,
                    start_revision: 0,
                    prev_kv,
                    filter_put,
                    filter_delete,
                },
            },
        )
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => command().prop_map(Step::Cmd),
        3 => Just(Step::EndBatch),
        2 => range_req().prop_map(Step::Read),
        2 => watch().prop_map(Step::Watch),
        1 => Just(Step::Reopen),
        1 => Just(Step::SnapshotRoundtrip),
        1 => Just(Step::Defragment),
    ]
}

/// A watcher under test and the model's expectation parameters.
struct Watching {
    req: WatchRequest,
    watcher: Watcher,
    /// Events up to this revision were checked.
    checked: i64,
}

struct Harness {
    dir: tempfile::TempDir,
    store: Option<Store>,
    model: Model,
    batch: Vec<Command>,
    expected: Vec<Output>,
    watchers: Vec<Watching>,
    batches: u64,
}

impl Harness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Some(Store::open(dir.path()).unwrap());
        Harness {
            dir,
            store,
            model: Model::default(),
            batch: vec![],
            expected: vec![],
            watchers: vec![],
            batches: 0,
        }
    }

    fn store(&self) -> &Store {
        self.store.as_ref().unwrap()
    }

    fn command(&mut self, c: CmdGen) {
        let cmd = match c {
            CmdGen::Plain(cmd) => cmd,
            CmdGen::Compact(back) => Command::Compact {
                revision: self.model.rev - back,
            },
        };
        self.expected.push(self.model.apply(&cmd));
        self.batch.push(cmd);
    }

    fn end_batch(&mut self) -> Result<(), TestCaseError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.batches += 1;
        let meta = self.batches.to_be_bytes();
        let outputs = if self.batches.is_multiple_of(2) {
            // Every other batch is written by another thread a little later; the reads and
            // batches that follow at once must still see it.
            let (outputs, commit) = self
                .store()
                .apply_batch_deferred(&self.batch, &meta)
                .unwrap();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(1));
                commit.commit().unwrap();
            });
            outputs
        } else {
            self.store().apply_batch(&self.batch, &meta).unwrap()
        };
        // A lease granted with ID 0 gets a fresh positive ID of the store's choosing.
        for (i, cmd) in self.batch.iter().enumerate() {
            let Command::LeaseGrant { id: 0, .. } = cmd else {
                continue;
            };
            let (
                Ok(CommandResponse::LeaseGrant {
                    id: placeholder, ..
                }),
                Some(out),
            ) = (&self.expected[i].result, outputs.get(i))
            else {
                continue;
            };
            if let Ok(CommandResponse::LeaseGrant { id, .. }) = out.result {
                prop_assert!(
                    id > 0 && !self.model.leases.contains_key(&id),
                    "auto lease id {}",
                    id
                );
                self.model.rename_lease(*placeholder, id);
                self.expected[i].result = out.result.clone();
            }
        }
        prop_assert_eq!(&outputs, &self.expected, "batch {:?}", &self.batch);
        self.batch.clear();
        self.expected.clear();
        self.check_state()?;
        self.check_watchers()
    }

    fn check_state(&self) -> Result<(), TestCaseError> {
        let (s, m) = (self.store(), &self.model);
        prop_assert_eq!(s.current_revision(), m.rev);
        prop_assert_eq!(s.compact_revision(), m.compact.max(0));
        prop_assert_eq!(s.leases().unwrap(), m.leases());
        let meta = (self.batches > 0).then(|| self.batches.to_be_bytes().to_vec());
        prop_assert_eq!(s.applied_meta().unwrap(), meta);
        for rev in m.compact.max(1)..=m.rev {
            let req = RangeRequest {
                key: vec![0],
                range_end: vec![0],
                revision: rev,
                ..Default::default()
            };
            let got = s.range(&req).unwrap();
            prop_assert_eq!(
                got,
                m.range(&req, m.rev).map(|r| (m.rev, r)),
                "all keys at {}",
                rev
            );
        }
        Ok(())
    }

    fn read(&self, req: &RangeRequest) -> Result<(), TestCaseError> {
        let got = self.store().range(req).unwrap();
        prop_assert_eq!(
            got,
            self.model
                .range(req, self.model.rev)
                .map(|r| (self.model.rev, r)),
            "{:?}",
            req
        );
        Ok(())
    }

    fn watch(&mut self, w: WatchGen) -> Result<(), TestCaseError> {
        let mut req = w.req;
        req.start_revision = match w.back {
            None => 0,
            Some(back) => (self.model.rev + 1 - back)
                .max(self.model.compact + 1)
                .max(1),
        };
        let start = if req.start_revision == 0 {
            self.model.rev + 1
        } else {
            req.start_revision
        };
        let watcher = self.store().watch(req.clone());
        prop_assert!(watcher.is_ok(), "{:?}", watcher.err());
        self.watchers.push(Watching {
            req,
            watcher: watcher.unwrap(),
            checked: start - 1,
        });
        self.check_watchers()
    }

    /// Drains every watcher and compares what it yielded since the last check with the model's
    /// history. `prev_kv` is read when the event is delivered: a version compacted away by
    /// then is absent.
    fn check_watchers(&mut self) -> Result<(), TestCaseError> {
        let m = &self.model;
        let retained = |kv: &KeyValue| {
            kv.mod_revision >= m.compact
                || m.kv_at(&kv.key, m.compact)
                    .is_some_and(|k| k.mod_revision == kv.mod_revision)
        };
        let all = m.events();
        for w in &mut self.watchers {
            let mut seen = vec![];
            while let Some(batch) = w.watcher.try_next() {
                match batch {
                    WatchBatch::Events { revision, events } => {
                        prop_assert!(events
                            .iter()
                            .all(|e| e.kv.mod_revision <= revision && revision <= m.rev));
                        seen.extend(events);
                    }
                    WatchBatch::Compacted { compact_revision } => {
                        prop_assert!(false, "watch compacted at {}", compact_revision)
                    }
                }
            }
            prop_assert_eq!(w.watcher.progress_revision(), Some(m.rev));
            let expected: Vec<Event> = all
                .iter()
                .filter(|e| {
                    e.kv.mod_revision > w.checked
                        && in_range(&e.kv.key, &w.req.key, &w.req.range_end)
                })
                .filter(|e| match e.kind {
                    EventKind::Put => !w.req.filter_put,
                    EventKind::Delete => !w.req.filter_delete,
                })
                .map(|e| Event {
                    prev_kv: e.prev_kv.clone().filter(|p| w.req.prev_kv && retained(p)),
                    ..e.clone()
                })
                .collect();
            prop_assert_eq!(
                &seen,
                &expected,
                "watch {:?} from {}",
                &w.req,
                w.checked + 1
            );
            w.checked = w.checked.max(m.rev);
        }
        Ok(())
    }

    fn reopen(&mut self) -> Result<(), TestCaseError> {
        self.check_watchers()?;
        self.watchers.clear();
        if self.model.rev % 2 == 0 {
            self.store().flush().unwrap();
        }
        self.store = None;
        self.store = Some(Store::open(self.dir.path()).unwrap());
        self.check_state()
    }
}

fn in_range(k: &[u8], key: &[u8], end: &[u8]) -> bool {
    match end {
        [] => k == key,
        [0] => k >= key,
        _ => k >= key && k < end,
    }
}

fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut h = Harness::new();
    for step in steps {
        if let Step::Cmd(c) = step {
            h.command(c);
            continue;
        }
        h.end_batch()?;
        match step {
            Step::Read(req) => h.read(&req)?,
            Step::Watch(w) => h.watch(w)?,
            Step::Reopen => h.reopen()?,
            Step::SnapshotRoundtrip => {
                let mut snap = Vec::new();
                h.store().export_snapshot(&mut snap).unwrap();
                h.store().import_snapshot(&mut snap.as_slice()).unwrap();
                h.check_state()?;
                h.check_watchers()?;
            }
            Step::Defragment => {
                h.store().defragment().unwrap();
                h.check_state()?;
            }
            Step::EndBatch | Step::Cmd(_) => {}
        }
    }
    h.end_batch()?;
    h.check_watchers()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128),
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct("tests/store/model.proptest-regressions"),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn store_matches_model(steps in prop::collection::vec(step(), 1..60)) {
        run(steps)?;
    }
}
