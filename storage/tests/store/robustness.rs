//! No input makes the store panic or fail as an engine: arbitrary numbers, empty keys, odd
//! range ends, deep nesting, oversized txns.

use crate::common;
use k3rs_storage::*;
use proptest::prelude::*;

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(vec![]),
        Just(vec![0]),
        Just(vec![0xff]),
        prop::collection::vec(any::<u8>(), 0..3)
    ]
}

fn range_req() -> impl Strategy<Value = RangeRequest> {
    (
        bytes(),
        bytes(),
        any::<i64>(),
        prop_oneof![Just(0i64), any::<i64>()],
        any::<bool>(),
        any::<[i64; 4]>(),
    )
        .prop_map(|(key, range_end, limit, revision, flag, f)| RangeRequest {
            key,
            range_end,
            limit,
            revision,
            sort_order: if flag {
                SortOrder::Descend
            } else {
                SortOrder::None
            },
            sort_target: if flag {
                SortTarget::Value
            } else {
                SortTarget::Create
            },
            serializable: flag,
            keys_only: flag,
            count_only: !flag && limit % 2 == 0,
            min_mod_revision: f[0] % 8,
            max_mod_revision: f[1],
            min_create_revision: f[2] % 8,
            max_create_revision: f[3],
        })
}

fn op() -> impl Strategy<Value = RequestOp> {
    let leaf = prop_oneof![
        range_req().prop_map(RequestOp::Range),
        (bytes(), bytes(), any::<i64>(), any::<[bool; 3]>()).prop_map(|(key, value, lease, f)| {
            RequestOp::Put(PutRequest {
                key,
                value,
                lease: lease % 3,
                prev_kv: f[0],
                ignore_value: f[1],
                ignore_lease: f[2],
            })
        }),
        (bytes(), bytes(), any::<bool>()).prop_map(|(key, range_end, prev_kv)| {
            RequestOp::DeleteRange(DeleteRangeRequest {
                key,
                range_end,
                prev_kv,
            })
        }),
    ];
    leaf.prop_recursive(3, 40, 6, |inner| {
        (
            prop::collection::vec(inner.clone(), 0..6),
            prop::collection::vec(inner, 0..6),
            bytes(),
            any::<i64>(),
        )
            .prop_map(|(success, failure, key, n)| {
                let compare = vec![Compare {
                    result: CompareResult::Greater,
                    target: CompareTarget::Mod(n),
                    key,
                    range_end: vec![0],
                }];
                RequestOp::Txn(TxnRequest {
                    compare,
                    success,
                    failure,
                })
            })
    })
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        op().prop_map(|op| match op {
            RequestOp::Put(p) => Command::Put(p),
            RequestOp::DeleteRange(d) => Command::DeleteRange(d),
            RequestOp::Txn(t) => Command::Txn(t),
            RequestOp::Range(r) => Command::Txn(TxnRequest {
                compare: vec![],
                success: vec![RequestOp::Range(r)],
                failure: vec![]
            }),
        }),
        any::<i64>().prop_map(|revision| Command::Compact {
            revision: revision % 20
        }),
        (any::<i64>(), any::<i64>()).prop_map(|(id, ttl)| Command::LeaseGrant { id: id % 3, ttl }),
        any::<i64>().prop_map(|id| Command::LeaseRevoke { id: id % 3 }),
        (1usize..200).prop_map(|n| Command::Txn(TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Range(RangeRequest {
                    key: b"k".to_vec(),
                    ..Default::default()
                });
                n
            ],
            failure: vec![],
        })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
        failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_commands_never_break_the_store(
        batches in prop::collection::vec(prop::collection::vec(command(), 0..6), 1..8),
        reads in prop::collection::vec(range_req(), 0..6),
        start in any::<i64>(),
    ) {
        let (_d, s) = common::open();
        for batch in &batches {
            let outputs = s.apply_batch(batch, b"m").unwrap();
            prop_assert_eq!(outputs.len(), batch.len());
            prop_assert!(outputs.windows(2).all(|w| w[0].revision <= w[1].revision));
            prop_assert!(outputs.last().is_none_or(|o| o.revision == s.current_revision()));
        }
        for r in &reads {
            let _ = s.range(r).unwrap();
        }
        if let Ok(mut w) = s.watch(WatchRequest { key: vec![0], range_end: vec![0], start_revision: start % 40, ..Default::default() }) {
            while let Some(WatchBatch::Events { .. }) = w.try_next() {}
        }
        let mut snap = Vec::new();
        s.export_snapshot(&mut snap).unwrap();
        s.import_snapshot(&mut snap.as_slice()).unwrap();
    }
}
