//! Put, Range and DeleteRange semantics with exact expected values.
use crate::common::*;
use k3rs_storage::*;

#[test]
fn revisions_versions_and_recreate() {
    let (_d, s) = open();
    assert_eq!(s.current_revision(), 1);
    assert_eq!(apply(&s, put("a", "1")).revision, 2);
    assert_eq!(apply(&s, put("a", "2")).revision, 3);
    assert_eq!(get(&s, "a"), Some(kv("a", "2", 2, 3, 2)));
    let out = apply(&s, del("a", ""));
    assert_eq!(out.revision, 4);
    assert_eq!(
        out.result,
        Ok(CommandResponse::DeleteRange(DeleteRangeResponse {
            deleted: 1,
            prev_kvs: vec![]
        }))
    );
    // Deleting nothing does not bump.
    assert_eq!(apply(&s, del("a", "")).revision, 4);
    assert_eq!(apply(&s, put("a", "3")).revision, 5);
    assert_eq!(get(&s, "a"), Some(kv("a", "3", 5, 5, 1)));
    // Past revisions.
    let at = |rev| {
        range(
            &s,
            RangeRequest {
                key: "a".into(),
                revision: rev,
                ..Default::default()
            },
        )
    };
    assert_eq!(
        at(2).unwrap(),
        (
            5,
            RangeResponse {
                kvs: vec![kv("a", "1", 2, 2, 1)],
                more: false,
                count: 1
            }
        )
    );
    assert_eq!(at(4).unwrap().1.kvs, vec![]);
    assert_eq!(at(6), Err(RequestError::FutureRevision));
    assert_eq!(at(1).unwrap().1.count, 0);
}

#[test]
fn put_options() {
    let (_d, s) = open();
    let p = |r: PutRequest| apply(&s, Command::Put(r));
    assert_eq!(p(put_req("", "x")).result, Err(RequestError::EmptyKey));
    let mut r = put_req("a", "");
    r.ignore_value = true;
    assert_eq!(p(r.clone()).result, Err(RequestError::KeyNotFound));
    assert_eq!(p(r.clone()).revision, 1);
    p(put_req("a", "v1"));
    let mut pr = put_req("a", "v2");
    pr.prev_kv = true;
    assert_eq!(
        p(pr).result,
        Ok(CommandResponse::Put(PutResponse {
            prev_kv: Some(kv("a", "v1", 2, 2, 1))
        }))
    );
    assert_eq!(p(r).revision, 4);
    assert_eq!(get(&s, "a").unwrap().value, b"v2");
    let mut bad = put_req("a", "x");
    bad.ignore_value = true;
    assert_eq!(p(bad).result, Err(RequestError::ValueProvided));
    let mut bad = put_req("a", "x");
    bad.ignore_lease = true;
    bad.lease = 5;
    assert_eq!(p(bad).result, Err(RequestError::LeaseProvided));
    let mut l = put_req("a", "x");
    l.lease = 9;
    assert_eq!(p(l.clone()).result, Err(RequestError::LeaseNotFound));
    apply(&s, Command::LeaseGrant { id: 9, ttl: 10 });
    assert_eq!(p(l).revision, 5);
    let mut keep = put_req("a", "y");
    keep.ignore_lease = true;
    p(keep);
    assert_eq!(get(&s, "a").unwrap().lease, 9);
    assert_eq!(get(&s, "a").unwrap().version, 5);
    p(put_req("a", "z"));
    assert_eq!(get(&s, "a").unwrap().lease, 0);
    assert_eq!(s.lease(9).unwrap().unwrap().keys, Vec::<Vec<u8>>::new());
}

fn fill(s: &Store) {
    // a@2 b@3 c@4 d@5, then b modified @6, c deleted @7
    for k in ["a", "b", "c", "d"] {
        apply(s, put(k, k));
    }
    apply(s, put("b", "bb"));
    apply(s, del("c", ""));
}

#[test]
fn range_forms_limit_count() {
    let (_d, s) = open();
    fill(&s);
    let req = |key: &str, end: &[u8]| RangeRequest {
        key: key.into(),
        range_end: end.to_vec(),
        ..Default::default()
    };
    assert_eq!(keys(&range(&s, req("a", b"c")).unwrap().1), ["a", "b"]);
    assert_eq!(keys(&range(&s, req("b", &[0])).unwrap().1), ["b", "d"]);
    assert_eq!(
        keys(
            &range(
                &s,
                RangeRequest {
                    key: vec![0],
                    range_end: vec![0],
                    ..Default::default()
                }
            )
            .unwrap()
            .1
        ),
        ["a", "b", "d"]
    );
    assert_eq!(range(&s, req("", b"")), Err(RequestError::EmptyKey));
    let r = range(
        &s,
        RangeRequest {
            limit: 2,
            ..req("a", &[0])
        },
    )
    .unwrap();
    assert_eq!(
        (r.0, keys(&r.1), r.1.more, r.1.count),
        (7, vec!["a".to_string(), "b".into()], true, 3)
    );
    let r = range(
        &s,
        RangeRequest {
            limit: 3,
            ..req("a", &[0])
        },
    )
    .unwrap()
    .1;
    assert_eq!((r.more, r.count), (false, 3));
    let r = range(
        &s,
        RangeRequest {
            count_only: true,
            ..req("a", &[0])
        },
    )
    .unwrap()
    .1;
    assert_eq!((r.kvs.len(), r.more, r.count), (0, false, 3));
    let r = range(
        &s,
        RangeRequest {
            keys_only: true,
            ..req("a", &[0])
        },
    )
    .unwrap()
    .1;
    assert!(r.kvs.iter().all(|kv| kv.value.is_empty()));
    // At revision 5 c still exists.
    let r = range(
        &s,
        RangeRequest {
            revision: 5,
            ..req("a", &[0])
        },
    )
    .unwrap();
    assert_eq!(
        (r.0, keys(&r.1), r.1.count),
        (
            7,
            vec!["a".to_string(), "b".into(), "c".into(), "d".into()],
            4
        )
    );
}

#[test]
fn range_sort_and_filters() {
    let (_d, s) = open();
    fill(&s);
    let all = RangeRequest {
        key: vec![0],
        range_end: vec![0],
        ..Default::default()
    };
    let sorted = |order, target, limit| {
        keys(
            &range(
                &s,
                RangeRequest {
                    sort_order: order,
                    sort_target: target,
                    limit,
                    ..all.clone()
                },
            )
            .unwrap()
            .1,
        )
    };
    assert_eq!(
        sorted(SortOrder::Descend, SortTarget::Key, 0),
        ["d", "b", "a"]
    );
    assert_eq!(sorted(SortOrder::None, SortTarget::Mod, 0), ["a", "d", "b"]);
    assert_eq!(sorted(SortOrder::Descend, SortTarget::Mod, 2), ["b", "d"]);
    assert_eq!(
        sorted(SortOrder::Descend, SortTarget::Value, 0),
        ["d", "b", "a"]
    );
    assert_eq!(
        sorted(SortOrder::Ascend, SortTarget::Version, 0),
        ["a", "d", "b"]
    );
    let summary = |req: RangeRequest| {
        let r = range(&s, req).unwrap().1;
        (keys(&r), r.more, r.count)
    };
    let r = summary(RangeRequest {
        min_mod_revision: 5,
        limit: 1,
        ..all.clone()
    });
    assert_eq!(r, (vec!["b".to_string()], true, 3));
    let r = summary(RangeRequest {
        max_create_revision: 2,
        ..all.clone()
    });
    assert_eq!(r, (vec!["a".to_string()], false, 3));
    let r = summary(RangeRequest {
        min_create_revision: 3,
        max_mod_revision: 5,
        ..all
    });
    assert_eq!(r.0, ["d"]);
}

#[test]
fn delete_range_prev_kv_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path()).unwrap();
        fill(&s);
        let out = apply(
            &s,
            Command::DeleteRange(DeleteRangeRequest {
                key: "a".into(),
                range_end: vec![0],
                prev_kv: true,
            }),
        );
        assert_eq!(out.revision, 8);
        assert_eq!(
            out.result,
            Ok(CommandResponse::DeleteRange(DeleteRangeResponse {
                deleted: 3,
                prev_kvs: vec![
                    kv("a", "a", 2, 2, 1),
                    kv("b", "bb", 3, 6, 2),
                    kv("d", "d", 5, 5, 1)
                ],
            }))
        );
        apply(&s, put("b", "new"));
        s.flush().unwrap();
    }
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.current_revision(), 9);
    assert_eq!(s.applied_meta().unwrap(), Some(b"meta".to_vec()));
    assert_eq!(get(&s, "b"), Some(kv("b", "new", 9, 9, 1)));
    let r = range(
        &s,
        RangeRequest {
            key: "b".into(),
            revision: 6,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.1.kvs, vec![kv("b", "bb", 3, 6, 2)]);
}

/// etcd quirk: with sort order NONE and another target, only `limit + 1` keys (in key order)
/// are fetched, then sorted ascending by the target, then cut.
#[test]
fn sort_none_with_limit_sorts_only_the_first_keys() {
    let (_d, s) = open();
    for k in ["c", "b", "a"] {
        apply(&s, put(k, k)); // c@2 b@3 a@4
    }
    let req = RangeRequest {
        key: vec![0],
        range_end: vec![0],
        limit: 1,
        sort_target: SortTarget::Mod,
        ..Default::default()
    };
    let r = range(&s, req.clone()).unwrap().1;
    assert_eq!(
        (keys(&r), r.more, r.count),
        (vec!["b".to_string()], true, 3)
    );
    let r = range(
        &s,
        RangeRequest {
            sort_order: SortOrder::Ascend,
            ..req
        },
    )
    .unwrap()
    .1;
    assert_eq!(
        (keys(&r), r.more, r.count),
        (vec!["c".to_string()], true, 3)
    );
}

/// Readers never see half a batch: every batch writes the same value to `x` and `y`.
#[test]
fn concurrent_readers_see_whole_batches() {
    let (_d, s) = open();
    let s = std::sync::Arc::new(s);
    apply(&s, put("x", "0"));
    apply(&s, put("y", "0"));
    let writer = {
        let s = s.clone();
        std::thread::spawn(move || {
            for i in 1..300 {
                let v = i.to_string();
                s.apply_batch(&[put("x", &v), put("y", &v)], b"m").unwrap();
            }
        })
    };
    let all = RangeRequest {
        key: "x".into(),
        range_end: "z".into(),
        ..Default::default()
    };
    while !writer.is_finished() {
        let (rev, r) = range(&s, all.clone()).unwrap();
        assert_eq!(r.kvs[0].value, r.kvs[1].value, "at {rev}");
        assert_eq!(rev % 2, 1);
    }
    writer.join().unwrap();
}
