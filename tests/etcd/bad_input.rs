//! Bad input never panics or stops the server, and gets etcd's answer: the same sequence of
//! malformed and erroneous requests goes to a real etcd 3.4 and to `k3rs server` (both fresh,
//! so revisions match too), and every outcome — status code and message, or the response with
//! member/cluster IDs and server-chosen lease IDs blanked — must be identical. After each
//! request the k3rs process must still be running and answering.

use std::fmt::Debug;
use std::time::Duration;

use crate::common::client::{open_watch, runtime, Clients};
use crate::common::{Etcd, K3rs};
use k3rs_datastore::etcdpb::compare::{CompareResult, CompareTarget, TargetUnion};
use k3rs_datastore::etcdpb::request_op::Request;
use k3rs_datastore::etcdpb::{
    CompactionRequest, Compare, DeleteRangeRequest, LeaseGrantRequest, LeaseRevokeRequest,
    LeaseTimeToLiveRequest, PutRequest, RangeRequest, RequestOp, ResponseHeader, TxnRequest,
    WatchCreateRequest,
};

/// Response headers differ between servers only in these fields.
fn blank(h: &mut Option<ResponseHeader>) {
    if let Some(h) = h {
        h.cluster_id = 0;
        h.member_id = 0;
        h.raft_term = 0;
    }
}

fn outcome<T: Debug>(
    r: Result<tonic::Response<T>, tonic::Status>,
    fix: impl FnOnce(&mut T),
) -> String {
    match r {
        Ok(resp) => {
            let mut resp = resp.into_inner();
            fix(&mut resp);
            format!("Ok({resp:?})")
        }
        Err(status) => format!("Err({:?}: {})", status.code(), status.message()),
    }
}

fn put(key: &[u8], value: &[u8]) -> PutRequest {
    PutRequest {
        key: key.to_vec(),
        value: value.to_vec(),
        ..Default::default()
    }
}

fn range(key: &[u8], range_end: &[u8]) -> RangeRequest {
    RangeRequest {
        key: key.to_vec(),
        range_end: range_end.to_vec(),
        ..Default::default()
    }
}

fn op_put(key: &[u8]) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestPut(put(key, b"v"))),
    }
}

fn op_del(key: &[u8], range_end: &[u8]) -> RequestOp {
    let del = DeleteRangeRequest {
        key: key.to_vec(),
        range_end: range_end.to_vec(),
        ..Default::default()
    };
    RequestOp {
        request: Some(Request::RequestDeleteRange(del)),
    }
}

fn txn(success: Vec<RequestOp>) -> TxnRequest {
    TxnRequest {
        compare: vec![],
        success,
        failure: vec![],
    }
}

/// Opens a watch and reports (created, canceled, compact_revision, event revisions) of what
/// arrives within `wait`.
async fn watch(c: &mut Clients, create: WatchCreateRequest, wait: Duration) -> String {
    let mut w = match open_watch(c, create).await {
        Ok(w) => w,
        Err(status) => return format!("Err({:?}: {})", status.code(), status.message()),
    };
    let responses = &mut w.responses;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(msg) = tokio::time::timeout_at(deadline, responses.message()).await {
        match msg {
            Ok(Some(r)) => {
                let revs: Vec<i64> = r
                    .events
                    .iter()
                    .filter_map(|e| e.kv.as_ref().map(|kv| kv.mod_revision))
                    .collect();
                seen.push(format!(
                    "created={} canceled={} compact_revision={} events={revs:?}",
                    r.created, r.canceled, r.compact_revision
                ));
                if r.canceled {
                    break;
                }
            }
            Ok(None) => {
                seen.push("stream ended".into());
                break;
            }
            Err(status) => {
                seen.push(format!("Err({:?}: {})", status.code(), status.message()));
                break;
            }
        }
    }
    seen.join("; ")
}

/// Runs every case in order; `check` runs after each one (is the server still alive?).
async fn run_cases(c: &mut Clients, check: &mut dyn FnMut(&str)) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    macro_rules! case {
        ($name:expr, $outcome:expr) => {{
            let o = $outcome;
            out.push(($name.to_string(), o));
            check($name);
            // The server must still answer a plain read after every bad request.
            let alive = c.kv.range(range(b"health", b"")).await;
            assert!(
                alive.is_ok(),
                "after {:?}: server no longer answers: {alive:?}",
                $name
            );
        }};
    }
    let big = vec![b'x'; 1536 * 1024 + 100 * 1024]; // > 1.5 MiB, < etcd's 2 MiB gRPC limit

    case!(
        "put ok",
        outcome(c.kv.put(put(b"a", b"1")).await, |r| blank(&mut r.header))
    );
    case!(
        "oversized put",
        outcome(c.kv.put(put(b"big", &big)).await, |r| blank(&mut r.header))
    );
    let mut big_txn = txn(vec![op_put(b"big")]);
    if let Some(Request::RequestPut(p)) = &mut big_txn.success[0].request {
        p.value = big.clone();
    }
    case!(
        "oversized txn",
        outcome(c.kv.txn(big_txn).await, |r| blank(&mut r.header))
    );
    let huge = c.kv.put(put(b"huge", &vec![b'y'; 3 * 1024 * 1024])).await;
    // Past gRPC's own limit the exact code/message is transport-specific: any error will do.
    case!(
        "3 MiB put is refused",
        if huge.is_err() {
            "Err".into()
        } else {
            "Ok".into()
        }
    );

    case!(
        "empty key put",
        outcome(c.kv.put(put(b"", b"v")).await, |r| blank(&mut r.header))
    );
    case!(
        "empty key range",
        outcome(c.kv.range(range(b"", b"")).await, |r| blank(&mut r.header))
    );
    let del = DeleteRangeRequest::default();
    case!(
        "empty key delete",
        outcome(c.kv.delete_range(del).await, |r| blank(&mut r.header))
    );
    case!(
        "empty key in txn",
        outcome(c.kv.txn(txn(vec![op_put(b"")])).await, |r| blank(
            &mut r.header
        ))
    );

    case!(
        "range_end < key",
        outcome(c.kv.range(range(b"b", b"a")).await, |r| blank(
            &mut r.header
        ))
    );
    case!(
        "range_end == key",
        outcome(c.kv.range(range(b"a", b"a")).await, |r| blank(
            &mut r.header
        ))
    );
    let del = DeleteRangeRequest {
        key: b"b".to_vec(),
        range_end: b"a".to_vec(),
        ..Default::default()
    };
    case!(
        "delete range_end < key",
        outcome(c.kv.delete_range(del).await, |r| blank(&mut r.header))
    );
    let weird: &[u8] = &[0xff, 0x00, 0xfe, 0x80];
    case!(
        "put binary key",
        outcome(c.kv.put(put(weird, &[0, 159, 255])).await, |r| blank(
            &mut r.header
        ))
    );
    case!(
        "range binary key",
        outcome(c.kv.range(range(weird, b"")).await, |r| blank(
            &mut r.header
        ))
    );
    case!(
        "range [0xff] from-key",
        outcome(c.kv.range(range(&[0xff], &[0])).await, |r| blank(
            &mut r.header
        ))
    );
    case!(
        "range all",
        outcome(c.kv.range(range(&[0], &[0])).await, |r| blank(
            &mut r.header
        ))
    );
    let r = RangeRequest {
        limit: -1,
        ..range(b"a", b"z")
    };
    case!(
        "negative limit",
        outcome(c.kv.range(r).await, |r| blank(&mut r.header))
    );
    let r = RangeRequest {
        revision: -5,
        ..range(b"a", b"")
    };
    case!(
        "negative revision",
        outcome(c.kv.range(r).await, |r| blank(&mut r.header))
    );
    let dup = txn(vec![op_put(b"d"), op_put(b"d")]);
    case!(
        "txn duplicate put",
        outcome(c.kv.txn(dup).await, |r| blank(&mut r.header))
    );
    let dup = txn(vec![op_put(b"d"), op_del(b"d", b"")]);
    case!(
        "txn put and delete same key",
        outcome(c.kv.txn(dup).await, |r| blank(&mut r.header))
    );
    let dup = txn(vec![op_del(b"c", b"e"), op_put(b"d")]);
    case!(
        "txn delete range covering a put",
        outcome(c.kv.txn(dup).await, |r| blank(&mut r.header))
    );
    let nested = RequestOp {
        request: Some(Request::RequestTxn(txn(vec![op_put(b"d")]))),
    };
    let dup = txn(vec![op_put(b"d"), nested]);
    case!(
        "nested txn duplicate",
        outcome(c.kv.txn(dup).await, |r| blank(&mut r.header))
    );
    let ops: Vec<RequestOp> = (0..129)
        .map(|i| op_put(format!("m{i}").as_bytes()))
        .collect();
    case!(
        "txn with 129 ops",
        outcome(c.kv.txn(txn(ops)).await, |r| blank(&mut r.header))
    );
    let ops: Vec<RequestOp> = (0..128)
        .map(|i| op_put(format!("m{i}").as_bytes()))
        .collect();
    case!(
        "txn with 128 ops",
        outcome(c.kv.txn(txn(ops)).await, |r| {
            blank(&mut r.header);
            r.responses.clear();
        })
    );
    let cmp = Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Value as i32,
        key: vec![],
        range_end: vec![],
        target_union: Some(TargetUnion::Value(b"x".to_vec())),
    };
    let t = TxnRequest {
        compare: vec![cmp],
        success: vec![],
        failure: vec![],
    };
    case!(
        "txn compare on empty key",
        outcome(c.kv.txn(t).await, |r| blank(&mut r.header))
    );

    let p = PutRequest {
        lease: 0x1234_5678,
        ..put(b"l", b"v")
    };
    case!(
        "put with unknown lease",
        outcome(c.kv.put(p.clone()).await, |r| blank(&mut r.header))
    );
    let t = txn(vec![RequestOp {
        request: Some(Request::RequestPut(p)),
    }]);
    case!(
        "txn put with unknown lease",
        outcome(c.kv.txn(t).await, |r| blank(&mut r.header))
    );
    let req = LeaseRevokeRequest { id: 0x1234_5678 };
    case!(
        "revoke unknown lease",
        outcome(c.lease.lease_revoke(req).await, |r| blank(&mut r.header))
    );
    let req = LeaseTimeToLiveRequest {
        id: 0x1234_5678,
        keys: true,
    };
    case!(
        "time-to-live of unknown lease",
        outcome(c.lease.lease_time_to_live(req).await, |r| blank(
            &mut r.header
        ))
    );
    let req = LeaseGrantRequest {
        ttl: 9_000_000_001,
        id: 0,
    };
    case!(
        "lease TTL too large",
        outcome(c.lease.lease_grant(req).await, |r| {
            blank(&mut r.header);
            r.id = 0;
        })
    );
    let req = LeaseGrantRequest { ttl: 60, id: 42 };
    case!(
        "lease grant with id",
        outcome(c.lease.lease_grant(req).await, |r| blank(&mut r.header))
    );
    case!(
        "lease grant duplicate id",
        outcome(c.lease.lease_grant(req).await, |r| blank(&mut r.header))
    );

    let p = PutRequest {
        ignore_value: true,
        ..put(b"nokey", b"")
    };
    case!(
        "ignore_value on missing key",
        outcome(c.kv.put(p).await, |r| blank(&mut r.header))
    );
    let p = PutRequest {
        ignore_value: true,
        ..put(b"a", b"value")
    };
    case!(
        "ignore_value with a value",
        outcome(c.kv.put(p).await, |r| blank(&mut r.header))
    );
    let p = PutRequest {
        ignore_lease: true,
        lease: 42,
        ..put(b"a", b"v")
    };
    case!(
        "ignore_lease with a lease",
        outcome(c.kv.put(p).await, |r| blank(&mut r.header))
    );
    let p = PutRequest {
        ignore_lease: true,
        ..put(b"nokey", b"v")
    };
    case!(
        "ignore_lease on missing key",
        outcome(c.kv.put(p).await, |r| blank(&mut r.header))
    );

    let r = RangeRequest {
        revision: 1_000_000,
        ..range(b"a", b"")
    };
    case!(
        "range at a future revision",
        outcome(c.kv.range(r).await, |r| blank(&mut r.header))
    );
    let req = CompactionRequest {
        revision: 1_000_000,
        physical: false,
    };
    case!(
        "compact a future revision",
        outcome(c.kv.compact(req).await, |r| blank(&mut r.header))
    );
    for i in 0..3 {
        c.kv.put(put(b"a", format!("{i}").as_bytes()))
            .await
            .expect("put");
    }
    let now =
        c.kv.range(range(b"a", b""))
            .await
            .expect("range")
            .into_inner();
    let now = now.header.expect("header").revision;
    let req = CompactionRequest {
        revision: now - 1,
        physical: true,
    };
    case!(
        "compact",
        outcome(c.kv.compact(req).await, |r| blank(&mut r.header))
    );
    let r = RangeRequest {
        revision: now - 2,
        ..range(b"a", b"")
    };
    case!(
        "range at a compacted revision",
        outcome(c.kv.range(r).await, |r| blank(&mut r.header))
    );
    let r = RangeRequest {
        revision: now - 1,
        ..range(b"a", b"")
    };
    case!(
        "range at the compaction revision",
        outcome(c.kv.range(r).await, |r| blank(&mut r.header))
    );
    let req = CompactionRequest {
        revision: now - 2,
        physical: false,
    };
    case!(
        "compact a compacted revision",
        outcome(c.kv.compact(req).await, |r| blank(&mut r.header))
    );
    let t = txn(vec![RequestOp {
        request: Some(Request::RequestRange(RangeRequest {
            revision: 2,
            ..range(b"a", b"")
        })),
    }]);
    case!(
        "txn range at a compacted revision",
        outcome(c.kv.txn(t).await, |r| blank(&mut r.header))
    );

    let wait = Duration::from_millis(700);
    let w = WatchCreateRequest {
        key: b"a".to_vec(),
        start_revision: 2,
        ..Default::default()
    };
    case!("watch from a compacted revision", watch(c, w, wait).await);
    let w = WatchCreateRequest {
        key: b"a".to_vec(),
        start_revision: now + 100,
        ..Default::default()
    };
    case!("watch from a future revision", watch(c, w, wait).await);
    let w = WatchCreateRequest {
        key: b"b".to_vec(),
        range_end: b"a".to_vec(),
        ..Default::default()
    };
    case!("watch with range_end < key", watch(c, w, wait).await);
    let w = WatchCreateRequest {
        key: vec![],
        ..Default::default()
    };
    case!("watch on the empty key", watch(c, w, wait).await);
    let w = WatchCreateRequest {
        key: b"a".to_vec(),
        start_revision: -3,
        ..Default::default()
    };
    case!("watch from a negative revision", watch(c, w, wait).await);
    let w = WatchCreateRequest {
        key: vec![],
        start_revision: -3,
        ..Default::default()
    };
    case!(
        "watch on the empty key from a negative revision",
        watch(c, w, wait).await
    );
    out
}

/// Requests that crash etcd 3.4 itself (an unknown sort target panics it), so there is no
/// reference answer: k3rs must answer them (anything) and keep running.
async fn run_robustness_cases(c: &mut Clients, check: &mut dyn FnMut(&str)) {
    macro_rules! case {
        ($name:expr, $outcome:expr) => {{
            let _ = $outcome;
            check($name);
            let alive = c.kv.range(range(b"health", b"")).await;
            assert!(
                alive.is_ok(),
                "after {:?}: server no longer answers: {alive:?}",
                $name
            );
        }};
    }
    let r = RangeRequest {
        sort_target: 99,
        sort_order: 1,
        ..range(b"a", b"z")
    };
    case!(
        "unknown sort target",
        outcome(c.kv.range(r).await, |r| blank(&mut r.header))
    );
    let r = RangeRequest {
        sort_order: 7,
        ..range(b"a", b"z")
    };
    case!(
        "unknown sort order",
        outcome(c.kv.range(r).await, |r| blank(&mut r.header))
    );
}

fn expect(outcomes: &[(String, String)], name: &str, text: &str) {
    let (_, o) = outcomes
        .iter()
        .find(|(n, _)| n == name)
        .expect("case exists");
    assert!(
        o.contains(text),
        "etcd's outcome of {name:?} is {o:?}, expected it to contain {text:?}"
    );
}

/// Runs the cases against a fresh etcd 3.4 and checks that they provoke what they claim.
fn reference_outcomes(rt: &tokio::runtime::Runtime) -> Vec<(String, String)> {
    let mut etcd = Etcd::start();
    let ep = etcd.endpoint();
    let reference = rt.block_on(async {
        let mut c = Clients::connect(&ep).await.expect("connect etcd");
        run_cases(&mut c, &mut |_| etcd.assert_running()).await
    });
    let expected = [
        ("oversized put", "etcdserver: request is too large"),
        ("empty key put", "etcdserver: key is not provided"),
        (
            "txn duplicate put",
            "etcdserver: duplicate key given in txn request",
        ),
        (
            "put with unknown lease",
            "etcdserver: requested lease not found",
        ),
        (
            "range at a future revision",
            "etcdserver: mvcc: required revision is a future revision",
        ),
        (
            "range at a compacted revision",
            "etcdserver: mvcc: required revision has been compacted",
        ),
        (
            "txn with 129 ops",
            "etcdserver: too many operations in txn request",
        ),
    ];
    for (name, text) in expected {
        expect(&reference, name, text);
    }
    reference
}

/// The harness itself: the cases provoke etcd's documented errors on a real etcd 3.4.
#[test]
fn bad_input_cases_provoke_etcds_errors() {
    let rt = runtime();
    let reference = reference_outcomes(&rt);
    if std::env::var_os("K3RS_BAD_INPUT_PRINT").is_some() {
        for (name, o) in &reference {
            eprintln!("{name}: {o}");
        }
    }
}

#[test]
fn bad_input_gets_etcds_answers_and_never_stops_the_server() {
    let rt = runtime();
    let reference = reference_outcomes(&rt);
    let mut k3rs = K3rs::start();
    let ep = k3rs.endpoint();
    let ours = rt.block_on(async {
        let mut c = Clients::connect(&ep).await.expect("connect k3rs");
        let ours = run_cases(&mut c, &mut |_| k3rs.assert_running()).await;
        run_robustness_cases(&mut c, &mut |_| k3rs.assert_running()).await;
        ours
    });
    k3rs.assert_running();

    let mut report = String::new();
    for ((name, want), (_, got)) in reference.iter().zip(&ours) {
        if want != got {
            report.push_str(&format!(
                "\n{name}:\n  etcd 3.4: {want}\n  k3rs:     {got}\n"
            ));
        }
    }
    assert!(
        report.is_empty(),
        "k3rs answers bad input differently from etcd 3.4:{report}"
    );
}
