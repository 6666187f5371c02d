//! When a pod must leave a node because of the node's `NoExecute` taints, without I/O
//! (upstream's `ToleratesTaint` and `getMinTolerationTime`): at once when a taint is not
//! tolerated, after the smallest `tolerationSeconds` of the tolerations used otherwise, never
//! when they tolerate it forever.

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::jiff::Timestamp;

/// What happens to a pod on a tainted node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// No untolerated or time-limited `NoExecute` taint.
    Never,
    /// Delete the pod at this time (at once if it is past).
    At(Timestamp),
}

/// `Toleration.ToleratesTaint`: effects match (an empty effect matches all), keys match (an
/// empty key with `Exists` matches every key), and `Exists` or an equal value
/// (`Equal`, the default operator).
pub fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    let effect = tol.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = tol.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match tol.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            !key.is_empty()
                && tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// When a pod with `tolerations` is evicted from a node with `taints`. The clock of a
/// time-limited toleration starts when the newest `NoExecute` taint was added (`now` for a
/// taint without `timeAdded`).
pub fn eviction(tolerations: &[Toleration], taints: &[Taint], now: Timestamp) -> Eviction {
    let no_execute: Vec<&Taint> = taints.iter().filter(|t| t.effect == "NoExecute").collect();
    if no_execute.is_empty() {
        return Eviction::Never;
    }
    let mut min_seconds: Option<i64> = None;
    for taint in &no_execute {
        let used: Vec<&Toleration> = tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if used.is_empty() {
            return Eviction::At(now);
        }
        for t in used {
            if let Some(s) = t.toleration_seconds {
                min_seconds = Some(min_seconds.map_or(s, |m| m.min(s)));
            }
        }
    }
    let Some(seconds) = min_seconds else {
        return Eviction::Never;
    };
    let start = no_execute
        .iter()
        .map(|t| t.time_added.as_ref().map_or(now, |x| x.0))
        .max()
        .unwrap_or(now);
    Eviction::At(k3rs_apimachinery::meta::timestamp_after(start, seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn taint(key: &str, effect: &str, added: Option<&str>) -> Taint {
        Taint {
            key: key.into(),
            value: None,
            effect: effect.into(),
            time_added: added.map(|a| Time(t(a))),
        }
    }

    fn tol(key: Option<&str>, op: &str, effect: Option<&str>, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: key.map(Into::into),
            operator: Some(op.into()),
            effect: effect.map(Into::into),
            toleration_seconds: seconds,
            value: None,
        }
    }

    #[test]
    fn toleration_matching() {
        let unreachable = taint("node.kubernetes.io/unreachable", "NoExecute", None);
        assert!(tolerates(&tol(None, "Exists", None, None), &unreachable));
        assert!(tolerates(
            &tol(
                Some("node.kubernetes.io/unreachable"),
                "Exists",
                Some("NoExecute"),
                None
            ),
            &unreachable
        ));
        assert!(!tolerates(
            &tol(
                Some("node.kubernetes.io/unreachable"),
                "Exists",
                Some("NoSchedule"),
                None
            ),
            &unreachable
        ));
        assert!(!tolerates(
            &tol(Some("other"), "Exists", None, None),
            &unreachable
        ));
        assert!(tolerates(
            &tol(Some("node.kubernetes.io/unreachable"), "Equal", None, None),
            &unreachable
        ));
        let mut with_value = tol(Some("node.kubernetes.io/unreachable"), "Equal", None, None);
        with_value.value = Some("x".into());
        assert!(!tolerates(&with_value, &unreachable));
    }

    #[test]
    fn eviction_time() {
        let now = t("2026-01-01T00:10:00Z");
        let taints = [
            taint(
                "node.kubernetes.io/unreachable",
                "NoExecute",
                Some("2026-01-01T00:00:00Z"),
            ),
            taint("node.kubernetes.io/unreachable", "NoSchedule", None),
        ];
        assert_eq!(eviction(&[], &taints, now), Eviction::At(now));
        assert_eq!(eviction(&[], &taints[1..], now), Eviction::Never);
        let forever = tol(
            Some("node.kubernetes.io/unreachable"),
            "Exists",
            Some("NoExecute"),
            None,
        );
        assert_eq!(
            eviction(std::slice::from_ref(&forever), &taints, now),
            Eviction::Never
        );
        let five_min = tol(
            Some("node.kubernetes.io/unreachable"),
            "Exists",
            Some("NoExecute"),
            Some(300),
        );
        let one_min = tol(None, "Exists", None, Some(60));
        assert_eq!(
            eviction(&[forever, five_min.clone(), one_min], &taints, now),
            Eviction::At(t("2026-01-01T00:01:00Z"))
        );
        // A second, untolerated NoExecute taint evicts at once.
        let both = [
            taints[0].clone(),
            taint("example.com/gone", "NoExecute", None),
        ];
        assert_eq!(eviction(&[five_min], &both, now), Eviction::At(now));
    }
}
