//! Rolling-update arithmetic (upstream's `deployment/util` and `rolling.go`), on ReplicaSet
//! sizes only: how far the new ReplicaSet may grow and how far the old ones may shrink so
//! that at most `replicas + maxSurge` pods exist and at least `replicas - maxUnavailable` are
//! available.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// An int or a percentage of `total` (upstream's `GetScaledValueFromIntOrPercent`); a
/// percentage rounds up for `round_up` (maxSurge) and down otherwise (maxUnavailable).
/// `None` for a malformed value.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Option<i32> {
    match v {
        IntOrString::Int(i) => Some(*i),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            let prod = pct * i64::from(total);
            let v = if round_up {
                (prod + 99).div_euclid(100)
            } else {
                prod.div_euclid(100)
            };
            i32::try_from(v).ok()
        }
    }
}

/// `(maxSurge, maxUnavailable)` for `replicas` (upstream's `ResolveFenceposts`): both zero
/// would stall a rollout, so maxUnavailable becomes 1.
pub fn fenceposts(surge: &IntOrString, unavailable: &IntOrString, replicas: i32) -> (i32, i32) {
    let s = scaled_value(surge, replicas, true).unwrap_or(0);
    let u = scaled_value(unavailable, replicas, false).unwrap_or(0);
    if s == 0 && u == 0 {
        (0, 1)
    } else {
        (s, u)
    }
}

/// One ReplicaSet as the arithmetic sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Size {
    pub name: String,
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.availableReplicas`.
    pub available: i32,
}

/// The new ReplicaSet's size for a rolling update (upstream's `NewRSNewReplicas`): grow by
/// what `replicas + max_surge` leaves room for, never past `replicas`.
pub fn new_rs_replicas(replicas: i32, max_surge: i32, all: &[&Size], new: &Size) -> i32 {
    let current: i32 = all.iter().map(|r| r.replicas).sum();
    let max_total = replicas + max_surge;
    if current >= max_total {
        return new.replicas;
    }
    let up = (max_total - current).min(replicas - new.replicas).max(0);
    new.replicas + up
}

/// How the old ReplicaSets shrink in one rolling-update step (upstream's
/// `reconcileOldReplicaSets`): first the unavailable pods of the oldest sets, then available
/// ones while more than `replicas - max_unavailable` stay available. `old` must be sorted
/// oldest first. Returns `(name, new size)` for each set that shrinks.
pub fn scale_down_old(
    replicas: i32,
    max_unavailable: i32,
    old: &[Size],
    new: &Size,
) -> Vec<(String, i32)> {
    let old_count: i32 = old.iter().map(|r| r.replicas).sum();
    if old_count == 0 {
        return Vec::new();
    }
    let all_count = old_count + new.replicas;
    let min_available = replicas - max_unavailable.min(replicas);
    let new_unavailable = new.replicas - new.available;
    let max_scaled_down = all_count - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut sizes: Vec<Size> = old.to_vec();
    let mut ops: Vec<(String, i32)> = Vec::new();
    // Unhealthy replicas first: they cost no availability.
    let mut cleaned = 0;
    for rs in sizes.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        if rs.replicas == 0 || rs.available >= rs.replicas {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(rs.replicas - rs.available);
        rs.replicas -= down;
        cleaned += down;
        ops.push((rs.name.clone(), rs.replicas));
    }
    // Then available ones, down to the minimum availability.
    let available: i32 = sizes.iter().map(|r| r.available).sum::<i32>() + new.available;
    if available > min_available {
        let total = available - min_available;
        let mut done = 0;
        for rs in sizes.iter_mut() {
            if done >= total {
                break;
            }
            if rs.replicas == 0 {
                continue;
            }
            let down = rs.replicas.min(total - done);
            rs.replicas -= down;
            done += down;
            match ops.iter_mut().find(|(n, _)| *n == rs.name) {
                Some(op) => op.1 = rs.replicas,
                None => ops.push((rs.name.clone(), rs.replicas)),
            }
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, replicas: i32, available: i32) -> Size {
        Size {
            name: name.into(),
            replicas,
            available,
        }
    }

    #[test]
    fn percentages_round_surge_up_and_unavailable_down() {
        let pct = |p: &str| IntOrString::String(p.into());
        assert_eq!(fenceposts(&pct("25%"), &pct("25%"), 10), (3, 2));
        assert_eq!(fenceposts(&pct("25%"), &pct("25%"), 1), (1, 0));
        assert_eq!(fenceposts(&IntOrString::Int(0), &pct("10%"), 5), (0, 1));
        assert_eq!(
            fenceposts(&IntOrString::Int(2), &IntOrString::Int(1), 10),
            (2, 1)
        );
        assert_eq!(scaled_value(&pct("x"), 10, true), None);
    }

    #[test]
    fn new_replica_set_grows_within_the_surge() {
        let old = s("old", 10, 10);
        let new = s("new", 0, 0);
        assert_eq!(new_rs_replicas(10, 3, &[&old, &new], &new), 3);
        let new = s("new", 3, 0);
        assert_eq!(new_rs_replicas(10, 3, &[&old, &new], &new), 3);
        let old = s("old", 8, 8);
        assert_eq!(new_rs_replicas(10, 3, &[&old, &new], &new), 5);
        let old = s("old", 0, 0);
        let new = s("new", 9, 9);
        assert_eq!(new_rs_replicas(10, 3, &[&old, &new], &new), 10);
    }

    #[test]
    fn old_replica_sets_shrink_to_the_minimum_availability() {
        // 10 replicas, maxUnavailable 2: 13 pods (3 new, not available): 2 old go.
        let ops = scale_down_old(10, 2, &[s("old", 10, 10)], &s("new", 3, 0));
        assert_eq!(ops, [("old".to_string(), 8)]);
        // New pods available: the old set shrinks by what they add.
        let ops = scale_down_old(10, 2, &[s("old", 8, 8)], &s("new", 5, 3));
        assert_eq!(ops, [("old".to_string(), 5)]);
        // Nothing may go while the new pods are unavailable and the old at the minimum.
        assert_eq!(
            scale_down_old(10, 2, &[s("old", 8, 8)], &s("new", 5, 0)),
            []
        );
    }

    #[test]
    fn unhealthy_old_replicas_go_first_oldest_set_first() {
        let old = [s("oldest", 3, 1), s("older", 4, 4)];
        let ops = scale_down_old(5, 1, &old, &s("new", 2, 0));
        // all 9, min available 4, new unavailable 2: 3 may go; 2 unhealthy of "oldest",
        // then available ones: available 1 + 4 = 5 > 4, so one more from "oldest".
        assert_eq!(ops, [("oldest".to_string(), 0)]);
    }
}
