//! Txn semantics: compares, branches, nesting, duplicate keys, op limits, atomic validation.
use crate::common::*;
use k3rs_storage::*;

fn cmp(key: &str, result: CompareResult, target: CompareTarget) -> Compare {
    Compare {
        result,
        target,
        key: key.into(),
        range_end: vec![],
    }
}

fn txn(compare: Vec<Compare>, success: Vec<RequestOp>, failure: Vec<RequestOp>) -> Command {
    Command::Txn(TxnRequest {
        compare,
        success,
        failure,
    })
}

fn op_put(k: &str, v: &str) -> RequestOp {
    RequestOp::Put(put_req(k, v))
}

fn op_get(k: &str) -> RequestOp {
    RequestOp::Range(RangeRequest {
        key: k.into(),
        ..Default::default()
    })
}

fn op_del(k: &str, end: &[u8]) -> RequestOp {
    RequestOp::DeleteRange(DeleteRangeRequest {
        key: k.into(),
        range_end: end.to_vec(),
        prev_kv: false,
    })
}

fn txn_resp(out: &Output) -> TxnResponse {
    match &out.result {
        Ok(CommandResponse::Txn(t)) => t.clone(),
        other => panic!("not a txn response: {other:?}"),
    }
}

#[test]
fn create_if_absent_then_update_with_mod() {
    let (_d, s) = open();
    let create = txn(
        vec![cmp("k", CompareResult::Equal, CompareTarget::Mod(0))],
        vec![op_put("k", "v1")],
        vec![op_get("k")],
    );
    let out = apply(&s, create.clone());
    assert_eq!(out.revision, 2);
    assert!(txn_resp(&out).succeeded);
    let out = apply(&s, create);
    assert_eq!(out.revision, 2);
    apply(&s, put("old", "o"));
    let t = txn_resp(&out);
    assert!(!t.succeeded);
    assert_eq!(
        t.responses,
        vec![ResponseOp::Range(RangeResponse {
            kvs: vec![kv("k", "v1", 2, 2, 1)],
            more: false,
            count: 1
        })]
    );
    // Several writes: one revision, sub-revisions inside; reads see earlier writes.
    let out = apply(
        &s,
        txn(
            vec![cmp(
                "k",
                CompareResult::Equal,
                CompareTarget::Value(b"v1".to_vec()),
            )],
            vec![
                op_put("k", "v2"),
                op_put("j", "x"),
                op_get("k"),
                op_del("old", b""),
            ],
            vec![],
        ),
    );
    assert_eq!(out.revision, 4);
    let t = txn_resp(&out);
    assert_eq!(
        t.responses[2],
        ResponseOp::Range(RangeResponse {
            kvs: vec![kv("k", "v2", 2, 4, 2)],
            more: false,
            count: 1
        })
    );
    assert_eq!(
        t.responses[3],
        ResponseOp::DeleteRange(DeleteRangeResponse {
            deleted: 1,
            prev_kvs: vec![]
        })
    );
    assert_eq!(get(&s, "old"), None);
    assert_eq!(get(&s, "j"), Some(kv("j", "x", 4, 4, 1)));
}

#[test]
fn compare_targets_and_missing_keys() {
    let (_d, s) = open();
    apply(&s, put("a", "x"));
    apply(&s, put("b", "y"));
    let check = |c: Compare| txn_resp(&apply(&s, txn(vec![c], vec![], vec![]))).succeeded;
    use CompareResult::*;
    use CompareTarget::*;
    assert!(check(cmp("a", Equal, Version(1))));
    assert!(check(cmp("a", Greater, Create(1))));
    assert!(check(cmp("a", Less, Mod(3))));
    assert!(check(cmp("a", NotEqual, Value(b"z".to_vec()))));
    assert!(check(cmp("a", Equal, Lease(0))));
    assert!(check(cmp("missing", Equal, Version(0))));
    assert!(check(cmp("missing", Equal, Create(0))));
    assert!(!check(cmp("missing", NotEqual, Value(b"z".to_vec()))));
    assert!(!check(cmp("missing", Equal, Value(vec![]))));
    let ranged = |result, target, end: &[u8]| Compare {
        result,
        target,
        key: "a".into(),
        range_end: end.to_vec(),
    };
    assert!(check(ranged(Greater, Mod(1), b"c")));
    assert!(!check(ranged(Equal, Value(b"x".to_vec()), b"c")));
    assert!(check(ranged(Less, Version(2), &[0])));
    // No key in range: compares against zeros, except VALUE which fails.
    assert!(check(Compare {
        key: "x".into(),
        range_end: "y".into(),
        ..cmp("", Equal, Mod(0))
    }));
    assert!(!check(Compare {
        key: "x".into(),
        range_end: "y".into(),
        ..cmp("", Equal, Value(vec![]))
    }));
    assert_eq!(s.current_revision(), 3);
}

#[test]
fn nested_txn_compares_see_state_before_the_txn() {
    let (_d, s) = open();
    let inner = TxnRequest {
        compare: vec![cmp("n", CompareResult::Equal, CompareTarget::Version(0))],
        success: vec![op_put("inner", "then")],
        failure: vec![op_put("inner", "else")],
    };
    let out = apply(
        &s,
        txn(
            vec![],
            vec![op_put("n", "1"), RequestOp::Txn(inner)],
            vec![],
        ),
    );
    assert_eq!(out.revision, 2);
    let t = txn_resp(&out);
    assert!(matches!(&t.responses[1], ResponseOp::Txn(r) if r.succeeded));
    assert_eq!(get(&s, "inner").unwrap().value, b"then");
    assert_eq!(get(&s, "inner").unwrap().mod_revision, 2);
}

#[test]
fn duplicate_keys_and_limits_are_rejected_before_applying() {
    let (_d, s) = open();
    apply(&s, put("a", "1"));
    let err = |c: Command| apply(&s, c).result.unwrap_err();
    assert_eq!(
        err(txn(
            vec![],
            vec![op_put("a", "1"), op_put("a", "2")],
            vec![]
        )),
        RequestError::DuplicateKey
    );
    assert_eq!(
        err(txn(
            vec![],
            vec![op_del("a", b"c"), op_put("b", "2")],
            vec![]
        )),
        RequestError::DuplicateKey
    );
    assert_eq!(
        err(txn(
            vec![],
            vec![op_put("b", "2"), op_del("b", b"")],
            vec![]
        )),
        RequestError::DuplicateKey
    );
    let nested = |k: &str| {
        RequestOp::Txn(TxnRequest {
            compare: vec![],
            success: vec![op_put(k, "x")],
            failure: vec![op_put(k, "y")],
        })
    };
    // then/else of one nested txn may share a key; the parent may not repeat it.
    assert_eq!(
        apply(&s, txn(vec![], vec![nested("z")], vec![])).revision,
        3
    );
    assert_eq!(
        err(txn(vec![], vec![nested("z"), op_put("z", "p")], vec![])),
        RequestError::DuplicateKey
    );
    // Ranges do not count; deletes may overlap each other.
    assert_eq!(
        apply(
            &s,
            txn(
                vec![],
                vec![op_get("a"), op_put("a", "3"), op_get("a")],
                vec![]
            )
        )
        .revision,
        4
    );
    assert_eq!(
        apply(
            &s,
            txn(vec![], vec![op_del("a", b""), op_del("a", b"b")], vec![])
        )
        .revision,
        5
    );
    let many: Vec<RequestOp> = (0..129).map(|i| op_get(&format!("k{i}"))).collect();
    assert_eq!(
        err(txn(vec![], many.clone(), vec![])),
        RequestError::TooManyOps
    );
    assert_eq!(
        apply(&s, txn(vec![], many[..128].to_vec(), vec![])).revision,
        5
    );
    assert_eq!(
        err(txn(vec![], vec![op_put("", "x")], vec![])),
        RequestError::EmptyKey
    );
    // A failing op anywhere on the chosen path: nothing applied.
    let mut leased = put_req("q", "v");
    leased.lease = 77;
    assert_eq!(
        err(txn(
            vec![],
            vec![op_put("p", "v"), RequestOp::Put(leased)],
            vec![]
        )),
        RequestError::LeaseNotFound
    );
    let mut ign = put_req("nope", "");
    ign.ignore_value = true;
    assert_eq!(
        err(txn(
            vec![],
            vec![op_put("p", "v"), RequestOp::Put(ign)],
            vec![]
        )),
        RequestError::KeyNotFound
    );
    let future = RequestOp::Range(RangeRequest {
        key: "a".into(),
        revision: 99,
        ..Default::default()
    });
    assert_eq!(
        err(txn(vec![], vec![op_put("p", "v"), future], vec![])),
        RequestError::FutureRevision
    );
    assert_eq!(get(&s, "p"), None);
    assert_eq!(s.current_revision(), 5);
}
