//! DefaultTolerationSeconds: every pod tolerates the `node.kubernetes.io/not-ready` and
//! `node.kubernetes.io/unreachable` NoExecute taints for a while (300 s unless
//! `--kube-apiserver-arg default-not-ready-toleration-seconds=…` /
//! `default-unreachable-toleration-seconds=…` say otherwise), unless it already tolerates them
//! itself. So a node that stops reporting evicts its pods after five minutes, not at once.

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::{Attributes, Mutating, Operation};
use crate::registry::Registry;
use k3rs_apimachinery::status::ApiResult;

/// The taint a node gets while its Ready condition is False.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint a node gets while its Ready condition is Unknown.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// kube-apiserver's default for both flags.
pub const DEFAULT_SECONDS: i64 = 300;

/// The plugin, with the seconds of the tolerations it adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultTolerationSeconds {
    pub not_ready: i64,
    pub unreachable: i64,
}

impl Default for DefaultTolerationSeconds {
    fn default() -> Self {
        DefaultTolerationSeconds {
            not_ready: DEFAULT_SECONDS,
            unreachable: DEFAULT_SECONDS,
        }
    }
}

/// Whether `t` tolerates the NoExecute taint `key` (an empty key or effect matches any, as
/// upstream's plugin decides; the operator and value are not looked at).
fn covers(t: &Value, key: &str) -> bool {
    let key_ok = matches!(t["key"].as_str(), None | Some("")) || t["key"] == key;
    let effect_ok = matches!(t["effect"].as_str(), None | Some("") | Some("NoExecute"));
    key_ok && effect_ok
}

impl DefaultTolerationSeconds {
    /// Adds the missing tolerations to `pod` (pure).
    pub fn apply(&self, pod: &mut Value) {
        let Some(spec) = pod.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        let existing = spec["tolerations"].as_array().cloned().unwrap_or_default();
        let mut added = Vec::new();
        for (key, seconds) in [(NOT_READY, self.not_ready), (UNREACHABLE, self.unreachable)] {
            if !existing.iter().any(|t| covers(t, key)) {
                added.push(
                    json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": seconds}),
                );
            }
        }
        if added.is_empty() {
            return;
        }
        let mut all = existing;
        all.extend(added);
        spec["tolerations"] = Value::Array(all);
    }
}

impl Mutating for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        _reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            let write = matches!(a.operation, Operation::Create | Operation::Update);
            if write && a.is("", "Pod") {
                if let Some(pod) = a.object.as_mut() {
                    self.apply(pod);
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tolerations(pod: Value) -> Value {
        let mut pod = pod;
        DefaultTolerationSeconds {
            not_ready: 300,
            unreachable: 120,
        }
        .apply(&mut pod);
        pod["spec"]["tolerations"].clone()
    }

    #[test]
    fn adds_both_to_a_pod_without_tolerations() {
        assert_eq!(
            tolerations(json!({"spec": {"containers": []}})),
            json!([
                {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 120},
            ])
        );
    }

    #[test]
    fn keeps_the_pods_own_and_adds_only_what_is_missing() {
        let own = json!({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 5});
        assert_eq!(
            tolerations(json!({"spec": {"tolerations": [own.clone()]}})),
            json!([own,
                {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}])
        );
        // A NoSchedule toleration of the same key does not count.
        let no_schedule = json!({"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"});
        assert_eq!(
            tolerations(json!({"spec": {"tolerations": [no_schedule]}}))
                .as_array()
                .unwrap()
                .len(),
            3
        );
    }

    #[test]
    fn an_empty_key_or_effect_tolerates_everything() {
        let all = json!({"operator": "Exists"});
        assert_eq!(
            tolerations(json!({"spec": {"tolerations": [all.clone()]}})),
            json!([all])
        );
        let any_effect = json!([{"key": NOT_READY, "operator": "Exists"},
                                {"key": UNREACHABLE, "operator": "Exists"}]);
        assert_eq!(
            tolerations(json!({"spec": {"tolerations": any_effect.clone()}})),
            any_effect
        );
    }

    #[test]
    fn leaves_objects_without_a_spec_alone() {
        assert_eq!(tolerations(json!({"metadata": {}})), Value::Null);
    }
}
