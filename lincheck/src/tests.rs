//! Known-linearizable and known-violating histories, and randomized histories generated from
//! a real sequential execution (linearizable by construction) and then corrupted.

use super::*;

const BUDGET: u64 = 1_000_000;

fn put(key: &str, value: &str) -> KvInput {
    KvInput::Put {
        key: key.into(),
        value: value.into(),
    }
}

fn get(key: &str) -> KvInput {
    KvInput::Get { key: key.into() }
}

fn cas(key: &str, expect: Option<&str>, value: &str) -> KvInput {
    KvInput::Cas {
        key: key.into(),
        expect: expect.map(str::to_string),
        value: value.into(),
    }
}

fn del(key: &str) -> KvInput {
    KvInput::Delete { key: key.into() }
}

fn put_ok(rev: i64) -> Option<KvOutput> {
    Some(KvOutput::Put { rev })
}

fn got(value: &str, rev: i64) -> Option<KvOutput> {
    Some(KvOutput::Get {
        value: Some((value.into(), rev)),
    })
}

fn absent() -> Option<KvOutput> {
    Some(KvOutput::Get { value: None })
}

fn cas_ok(succeeded: bool, rev: i64) -> Option<KvOutput> {
    Some(KvOutput::Cas { succeeded, rev })
}

fn del_ok(deleted: i64, rev: i64) -> Option<KvOutput> {
    Some(KvOutput::Delete { deleted, rev })
}

/// An operation by `client` from `call` to `ret`.
fn op(client: u64, call: u64, ret: u64, input: KvInput, output: Option<KvOutput>) -> KvOperation {
    Operation {
        client,
        call,
        ret,
        input,
        output,
    }
}

fn verdict(h: &[KvOperation]) -> Verdict {
    check(&KvModel, h, BUDGET)
}

fn assert_linearizable(h: &[KvOperation]) {
    assert_eq!(verdict(h), Verdict::Linearizable, "{h:#?}");
}

fn assert_violation(h: &[KvOperation]) {
    assert!(
        matches!(verdict(h), Verdict::Violation { .. }),
        "expected a violation: {h:#?}"
    );
}

#[test]
fn empty_history_is_linearizable() {
    assert_linearizable(&[]);
}

#[test]
fn sequential_put_get_cas_delete() {
    assert_linearizable(&[
        op(1, 0, 1, get("k"), absent()),
        op(1, 2, 3, put("k", "a"), put_ok(5)),
        op(1, 4, 5, get("k"), got("a", 5)),
        op(1, 6, 7, cas("k", Some("a"), "b"), cas_ok(true, 6)),
        op(1, 8, 9, cas("k", Some("a"), "c"), cas_ok(false, 6)),
        op(1, 10, 11, get("k"), got("b", 6)),
        op(1, 12, 13, del("k"), del_ok(1, 9)),
        op(1, 14, 15, del("k"), del_ok(0, 9)),
        op(1, 16, 17, get("k"), absent()),
        op(1, 18, 19, cas("k", None, "d"), cas_ok(true, 10)),
        op(1, 20, 21, cas("k", None, "e"), cas_ok(false, 10)),
        op(1, 22, 23, get("k"), got("d", 10)),
    ]);
}

#[test]
fn stale_read_after_a_completed_write_is_a_violation() {
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(1, 2, 3, put("k", "b"), put_ok(3)),
        op(2, 4, 5, get("k"), got("a", 2)),
    ]);
}

#[test]
fn a_read_concurrent_with_a_write_may_see_either_value() {
    for seen in [got("a", 2), got("b", 3)] {
        assert_linearizable(&[
            op(1, 0, 1, put("k", "a"), put_ok(2)),
            op(1, 2, 6, put("k", "b"), put_ok(3)),
            op(2, 3, 5, get("k"), seen),
        ]);
    }
}

#[test]
fn reads_must_not_go_back_in_time() {
    // Both reads overlap the write, but the second starts after the first saw the new value.
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(1, 2, 10, put("k", "b"), put_ok(3)),
        op(2, 3, 4, get("k"), got("b", 3)),
        op(3, 5, 6, get("k"), got("a", 2)),
    ]);
}

#[test]
fn a_value_never_written_is_a_violation() {
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(2, 0, 3, get("k"), got("z", 2)),
    ]);
}

#[test]
fn revisions_must_match_and_increase() {
    // The read reports another mod_revision than the write's header.
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(1, 2, 3, get("k"), got("a", 7)),
    ]);
    // A later write with a lower revision.
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(5)),
        op(1, 2, 3, put("k", "b"), put_ok(4)),
    ]);
    // Concurrent writes: the order is the revisions' order, and the read must agree.
    assert_linearizable(&[
        op(1, 0, 5, put("k", "a"), put_ok(4)),
        op(2, 0, 5, put("k", "b"), put_ok(3)),
        op(3, 6, 7, get("k"), got("a", 4)),
    ]);
    assert_violation(&[
        op(1, 0, 5, put("k", "a"), put_ok(4)),
        op(2, 0, 5, put("k", "b"), put_ok(3)),
        op(3, 6, 7, get("k"), got("b", 3)),
    ]);
}

#[test]
fn two_compare_and_swaps_from_the_same_value_cannot_both_succeed() {
    let base = op(1, 0, 1, put("k", "a"), put_ok(2));
    assert_violation(&[
        base.clone(),
        op(2, 2, 5, cas("k", Some("a"), "b"), cas_ok(true, 3)),
        op(3, 2, 5, cas("k", Some("a"), "c"), cas_ok(true, 4)),
    ]);
    assert_linearizable(&[
        base,
        op(2, 2, 5, cas("k", Some("a"), "b"), cas_ok(true, 3)),
        op(3, 2, 5, cas("k", Some("a"), "c"), cas_ok(false, 3)),
    ]);
}

#[test]
fn a_failed_compare_and_swap_whose_condition_held_is_a_violation() {
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(1, 2, 3, cas("k", Some("a"), "b"), cas_ok(false, 2)),
    ]);
    // Create-if-absent fails on an existing key, succeeds on a missing one.
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(1, 2, 3, cas("k", None, "b"), cas_ok(true, 3)),
    ]);
    assert_violation(&[op(1, 0, 1, cas("k", None, "b"), cas_ok(false, 1))]);
}

#[test]
fn delete_reports_what_it_deleted() {
    assert_violation(&[op(1, 0, 1, del("k"), del_ok(1, 2))]);
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(1, 2, 3, del("k"), del_ok(0, 2)),
    ]);
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(1, 2, 3, del("k"), del_ok(1, 3)),
        op(1, 4, 5, get("k"), got("a", 2)),
    ]);
}

#[test]
fn an_unknown_write_may_happen_later_or_never() {
    // Seen long after the client gave up.
    assert_linearizable(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(2, 2, 3, put("k", "b"), None),
        op(3, 10, 11, get("k"), got("a", 2)),
        op(3, 12, 13, get("k"), got("b", 3)),
    ]);
    // Never seen.
    assert_linearizable(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(2, 2, 3, put("k", "b"), None),
        op(3, 10, 11, get("k"), got("a", 2)),
    ]);
    // Seen, then gone again without another write: it cannot have happened twice.
    assert_violation(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(2, 2, 3, put("k", "b"), None),
        op(3, 10, 11, get("k"), got("b", 3)),
        op(3, 12, 13, get("k"), got("a", 2)),
    ]);
    // But it cannot have happened before it was called.
    assert_violation(&[
        op(1, 0, 1, get("k"), got("b", 3)),
        op(2, 2, 3, put("k", "b"), None),
    ]);
}

#[test]
fn an_unknown_compare_and_swap_applies_only_if_its_condition_holds() {
    assert_linearizable(&[
        op(1, 0, 1, put("k", "a"), put_ok(2)),
        op(2, 2, 3, cas("k", Some("a"), "b"), None),
        op(3, 4, 5, get("k"), got("b", 3)),
    ]);
    assert_violation(&[
        op(1, 0, 1, put("k", "x"), put_ok(2)),
        op(2, 2, 3, cas("k", Some("a"), "b"), None),
        op(3, 4, 5, get("k"), got("b", 3)),
    ]);
}

#[test]
fn parts_are_checked_independently() {
    let mut h = vec![
        op(1, 0, 1, put("a", "1"), put_ok(2)),
        op(1, 2, 3, put("b", "1"), put_ok(3)),
        op(2, 4, 5, get("a"), got("1", 2)),
        op(2, 6, 7, get("b"), got("1", 3)),
    ];
    assert_linearizable(&h);
    h.push(op(2, 8, 9, get("b"), absent()));
    assert_eq!(
        verdict(&h),
        Verdict::Violation {
            part: "b".into(),
            ops: 3
        }
    );
}

#[test]
fn a_tiny_budget_answers_unknown_not_linearizable() {
    let h: Vec<KvOperation> = (0..20)
        .map(|i| op(i, 0, 100, put("k", &format!("v{i}")), None))
        .chain([op(99, 200, 201, get("k"), got("v7", 30))])
        .collect();
    assert!(matches!(check(&KvModel, &h, 3), Verdict::Unknown { .. }));
    assert_linearizable(&h);
}

/// A small deterministic generator (no dependency, reproducible by seed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A history of `n` operations from `clients` clients on `keys` keys, executed in one real
/// order (the linearization points `10·i`), each with a random interval around its point;
/// some writes lose their outcome (timeout).
fn generated(seed: u64, n: usize, clients: u64, keys: u64) -> Vec<KvOperation> {
    let mut rng = Lcg(seed);
    let mut state: std::collections::HashMap<String, (String, i64)> = Default::default();
    let mut rev = 1i64;
    let mut busy_until = vec![0u64; clients as usize];
    let mut h = Vec::new();
    for i in 0..n {
        let point = 10 * i as u64 + 5;
        // A client whose previous operation has finished.
        let start = rng.next(clients);
        let Some(client) = (0..clients)
            .map(|c| (c + start) % clients)
            .find(|c| busy_until[*c as usize] < point)
        else {
            continue;
        };
        let key = format!("k{}", rng.next(keys));
        let value = format!("v{i}");
        let (input, output) = match rng.next(4) {
            0 => {
                rev += 1;
                state.insert(key.clone(), (value.clone(), rev));
                (put(&key, &value), put_ok(rev))
            }
            1 => {
                let out = match state.get(&key) {
                    Some((v, r)) => got(v, *r),
                    None => absent(),
                };
                (get(&key), out)
            }
            2 => {
                let expect = state.get(&key).map(|(v, _)| v.clone());
                let expect = if rng.next(3) == 0 {
                    Some("nope".to_string())
                } else {
                    expect
                };
                let holds = state.get(&key).map(|(v, _)| v.clone()) == expect;
                if holds {
                    rev += 1;
                    state.insert(key.clone(), (value.clone(), rev));
                }
                (cas(&key, expect.as_deref(), &value), cas_ok(holds, rev))
            }
            _ => {
                let deleted = state.remove(&key).is_some();
                if deleted {
                    rev += 1;
                }
                (del(&key), del_ok(deleted as i64, rev))
            }
        };
        let call = point - 1 - rng.next(25).min(point - 1);
        let call = call.max(busy_until[client as usize] + 1);
        let ret = point + 1 + rng.next(25);
        busy_until[client as usize] = ret;
        let is_write = !matches!(input, KvInput::Get { .. });
        let output = if is_write && rng.next(10) == 0 {
            None
        } else {
            output
        };
        h.push(op(client, call, ret, input, output));
    }
    h
}

#[test]
fn generated_histories_are_linearizable() {
    for seed in 0..200 {
        let h = generated(seed, 150, 5, 3);
        assert_eq!(
            check(&KvModel, &h, BUDGET),
            Verdict::Linearizable,
            "seed {seed}"
        );
    }
}

#[test]
fn corrupted_generated_histories_are_violations() {
    let mut found = 0;
    for seed in 0..200 {
        let mut h = generated(seed, 150, 5, 3);
        // A read answering a value that was never written is always caught.
        let Some(i) = h
            .iter()
            .position(|o| matches!(o.output, Some(KvOutput::Get { value: Some(_) })))
        else {
            continue;
        };
        h[i].output = got("never-written", 1);
        assert!(
            matches!(check(&KvModel, &h, BUDGET), Verdict::Violation { .. }),
            "seed {seed}"
        );
        found += 1;
    }
    assert!(found > 150, "only {found} histories had a read to corrupt");
}

#[test]
fn a_lost_acknowledged_write_is_a_violation() {
    // A read after an acknowledged put reports the key absent, and no other write on the key
    // could explain it (none overlaps, none has an unknown outcome): the put was lost.
    let mut caught = 0;
    for seed in 0..200 {
        let mut h = generated(seed, 150, 5, 3);
        let found = (0..h.len()).find_map(|w| {
            let KvInput::Put { key, .. } = &h[w].input else {
                return None;
            };
            h[w].output.as_ref()?;
            let r = (w + 1..h.len()).find(|&r| {
                h[r].input == get(key) && h[r].call > h[w].ret && h[r].output != absent()
            })?;
            let explained = h.iter().enumerate().any(|(i, o)| {
                i != w
                    && o.input.key() == key
                    && !matches!(o.input, KvInput::Get { .. })
                    && o.call < h[r].ret
                    && (o.output.is_none() || o.ret >= h[w].call)
            });
            (!explained).then_some(r)
        });
        let Some(r) = found else { continue };
        h[r].output = absent();
        assert!(
            matches!(check(&KvModel, &h, BUDGET), Verdict::Violation { .. }),
            "seed {seed}"
        );
        caught += 1;
    }
    assert!(caught > 20, "only {caught} seeds had a read to corrupt");
}
