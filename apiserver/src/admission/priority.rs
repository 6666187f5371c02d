//! Priority: a new pod gets `spec.priority` and `spec.preemptionPolicy` from the PriorityClass
//! it names — or from the global default class (the lowest-valued one if several claim it),
//! else priority 0 — and may not state values of its own that differ. Updates keep what the
//! create resolved. At most one PriorityClass may be `globalDefault`. Pods read the classes
//! from the API server's cache ([`super::lister`]; a class the cache lacks is looked up in
//! the store before the pod is refused); a class claiming `globalDefault` is checked against
//! the store.

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::lister::Lister;
use super::{forbidden, Attributes, Mutating, Operation, Validating};
use crate::registry::Registry;
use k3rs_apimachinery::status::ApiResult;
use k8s_openapi::api::scheduling::v1::PriorityClass;

/// The plugin (mutating for pods, validating for PriorityClasses).
#[derive(Debug, Clone, Default)]
pub struct Priority {
    /// The classes pods read first.
    pub classes: Lister<PriorityClass>,
}

/// What a pod's create resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The class name to store ("" when no class applies).
    pub class: String,
    pub priority: i64,
    pub preemption_policy: Option<String>,
}

/// Why the Priority plugin refuses a pod (upstream's messages; rendered as 403).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriorityError {
    /// The named class does not exist.
    #[error("no PriorityClass with name {0} was found")]
    NoClass(String),
    /// `spec.priority` differs from the class's value.
    #[error("the integer value of priority ({stated}) must not be provided in pod spec; priority admission controller computed {computed} from the given PriorityClass name")]
    Priority {
        /// The pod's value.
        stated: i64,
        /// The class's value.
        computed: i64,
    },
    /// `spec.preemptionPolicy` differs from the class's.
    #[error("the string value of PreemptionPolicy ({stated}) must not be provided in pod spec; priority admission controller computed {computed} from the given PriorityClass name")]
    PreemptionPolicy {
        /// The pod's policy.
        stated: String,
        /// The class's policy.
        computed: String,
    },
}

/// The pod's class (`Ok(None)` when it names none); `Err` is the plugin's refusal.
fn named_class(pod: &Value, classes: &[Value]) -> Result<Option<Resolved>, PriorityError> {
    let name = pod["spec"]["priorityClassName"].as_str().unwrap_or("");
    if name.is_empty() {
        return Ok(None);
    }
    let class = classes
        .iter()
        .find(|c| c["metadata"]["name"] == name)
        .ok_or_else(|| PriorityError::NoClass(name.to_string()))?;
    Ok(Some(of_class(class)))
}

fn of_class(c: &Value) -> Resolved {
    Resolved {
        class: c["metadata"]["name"].as_str().unwrap_or("").to_string(),
        priority: c["value"].as_i64().unwrap_or(0),
        preemption_policy: c["preemptionPolicy"].as_str().map(str::to_string),
    }
}

/// The global default class: the lowest-valued of those marked `globalDefault`.
pub fn default_class(classes: &[Value]) -> Option<&Value> {
    classes
        .iter()
        .filter(|c| c["globalDefault"] == true)
        .min_by_key(|c| c["value"].as_i64().unwrap_or(0))
}

/// Resolves a new pod's priority against `classes` (pure).
pub fn resolve(pod: &Value, classes: &[Value]) -> Result<Resolved, PriorityError> {
    let resolved = match named_class(pod, classes)? {
        Some(r) => r,
        None => default_class(classes).map(of_class).unwrap_or(Resolved {
            class: String::new(),
            priority: 0,
            preemption_policy: Some("PreemptLowerPriority".into()),
        }),
    };
    if let Some(p) = pod["spec"]["priority"].as_i64() {
        if p != resolved.priority {
            return Err(PriorityError::Priority {
                stated: p,
                computed: resolved.priority,
            });
        }
    }
    if let (Some(own), Some(computed)) = (
        pod["spec"]["preemptionPolicy"].as_str(),
        resolved.preemption_policy.as_deref(),
    ) {
        if own != computed {
            return Err(PriorityError::PreemptionPolicy {
                stated: own.to_string(),
                computed: computed.to_string(),
            });
        }
    }
    Ok(resolved)
}

/// Writes `r` into the pod's spec.
pub fn apply(pod: &mut Value, r: &Resolved) {
    let spec = &mut pod["spec"];
    if !r.class.is_empty() {
        spec["priorityClassName"] = json!(r.class);
    }
    spec["priority"] = json!(r.priority);
    if let Some(p) = &r.preemption_policy {
        spec["preemptionPolicy"] = json!(p);
    }
}

/// On update: what the create resolved stays unless the new object states it.
pub fn keep_on_update(pod: &mut Value, old: &Value) {
    for field in ["priority", "preemptionPolicy"] {
        if pod["spec"].get(field).is_none_or(Value::is_null) {
            if let Some(v) = old["spec"].get(field).filter(|v| !v.is_null()) {
                pod["spec"][field] = v.clone();
            }
        }
    }
}

/// Why a PriorityClass write is refused: another class is already the global default.
pub fn default_conflict(class: &Value, op: Operation, classes: &[Value]) -> Option<String> {
    if class["globalDefault"] != true {
        return None;
    }
    let name = class["metadata"]["name"].as_str().unwrap_or("");
    let existing = default_class(classes)?;
    let existing_name = existing["metadata"]["name"].as_str().unwrap_or("");
    (op == Operation::Create || existing_name != name).then(|| {
        format!("PriorityClass {existing_name} is already marked as default. Only one default can exist")
    })
}

async fn stored_classes(reg: &Registry) -> ApiResult<Vec<Value>> {
    super::stored(reg, "scheduling.k8s.io", "priorityclasses", None).await
}

impl Priority {
    /// What a new pod resolves to: against the cached classes, or the stored ones when the
    /// cache may not answer or lacks the class the pod names.
    async fn resolve_new(
        &self,
        pod: &Value,
        reg: &Registry,
    ) -> ApiResult<Result<Resolved, PriorityError>> {
        if let Some(cached) = self.classes.all() {
            match resolve(pod, &cached?) {
                Err(PriorityError::NoClass(_)) => {}
                decided => return Ok(decided),
            }
        }
        Ok(resolve(pod, &stored_classes(reg).await?))
    }
}

impl Mutating for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if a.is("scheduling.k8s.io", "PriorityClass") {
                self.classes.note_write("");
            }
            if !a.is("", "Pod") || a.object.is_none() {
                return Ok(());
            }
            match a.operation {
                Operation::Update => {
                    if let (Some(pod), Some(old)) = (a.object.as_mut(), a.old_object.as_deref()) {
                        keep_on_update(pod, old);
                    }
                    Ok(())
                }
                Operation::Create => {
                    let Some(pod) = a.object.as_ref() else {
                        return Ok(());
                    };
                    let resolved = match self.resolve_new(pod, reg).await? {
                        Ok(r) => r,
                        Err(why) => return Err(forbidden(a, &why.to_string())),
                    };
                    if let Some(pod) = a.object.as_mut() {
                        apply(pod, &resolved);
                    }
                    Ok(())
                }
                _ => Ok(()),
            }
        })
    }
}

impl Validating for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    fn validate<'a>(
        &'a self,
        a: &'a Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            let write = matches!(a.operation, Operation::Create | Operation::Update);
            let Some(class) = a.object.as_ref() else {
                return Ok(());
            };
            // Only a class claiming to be the default needs the others looked at.
            if !write
                || !a.is("scheduling.k8s.io", "PriorityClass")
                || class["globalDefault"] != true
            {
                return Ok(());
            }
            match default_conflict(class, a.operation, &stored_classes(reg).await?) {
                Some(why) => Err(forbidden(a, &why)),
                None => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i64, default: bool, policy: Option<&str>) -> Value {
        let mut c = json!({"metadata": {"name": name}, "value": value, "globalDefault": default});
        if let Some(p) = policy {
            c["preemptionPolicy"] = json!(p);
        }
        c
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn a_named_class_gives_its_value_and_policy() {
        let classes = [class("high", 1000, false, Some("Never"))];
        let r = resolve(&pod(json!({"priorityClassName": "high"})), &classes).unwrap();
        assert_eq!(
            r,
            Resolved {
                class: "high".into(),
                priority: 1000,
                preemption_policy: Some("Never".into())
            }
        );
        let mut p = pod(json!({"priorityClassName": "high"}));
        apply(&mut p, &r);
        assert_eq!(
            p["spec"],
            json!({"priorityClassName": "high", "priority": 1000, "preemptionPolicy": "Never"})
        );
    }

    #[test]
    fn an_unknown_class_is_refused() {
        assert_eq!(
            resolve(&pod(json!({"priorityClassName": "gold"})), &[])
                .unwrap_err()
                .to_string(),
            "no PriorityClass with name gold was found"
        );
    }

    #[test]
    fn without_a_class_the_lowest_global_default_or_zero() {
        let none = resolve(&pod(json!({})), &[class("x", 5, false, None)]).unwrap();
        assert_eq!(
            none,
            Resolved {
                class: String::new(),
                priority: 0,
                preemption_policy: Some("PreemptLowerPriority".into())
            }
        );
        let mut p = pod(json!({}));
        apply(&mut p, &none);
        assert_eq!(
            p["spec"],
            json!({"priority": 0, "preemptionPolicy": "PreemptLowerPriority"})
        );
        let classes = [
            class("d1", 50, true, Some("PreemptLowerPriority")),
            class("d2", 10, true, None),
        ];
        let r = resolve(&pod(json!({})), &classes).unwrap();
        assert_eq!((r.class.as_str(), r.priority), ("d2", 10));
        assert_eq!(r.preemption_policy, None);
    }

    #[test]
    fn stated_values_must_match_what_the_class_gives() {
        let classes = [class("high", 1000, false, Some("PreemptLowerPriority"))];
        assert_eq!(
            resolve(
                &pod(json!({"priorityClassName": "high", "priority": 7})),
                &classes
            )
            .unwrap_err()
            .to_string(),
            "the integer value of priority (7) must not be provided in pod spec; priority \
             admission controller computed 1000 from the given PriorityClass name"
        );
        assert!(resolve(
            &pod(json!({"priorityClassName": "high", "priority": 1000})),
            &classes
        )
        .is_ok());
        assert_eq!(
            resolve(
                &pod(json!({"priorityClassName": "high", "preemptionPolicy": "Never"})),
                &classes
            )
            .unwrap_err()
            .to_string(),
            "the string value of PreemptionPolicy (Never) must not be provided in pod spec; \
             priority admission controller computed PreemptLowerPriority from the given \
             PriorityClass name"
        );
    }

    #[test]
    fn updates_keep_the_resolved_values() {
        let old = pod(json!({"priority": 1000, "preemptionPolicy": "Never"}));
        let mut new = pod(json!({"containers": []}));
        keep_on_update(&mut new, &old);
        assert_eq!(
            new["spec"],
            json!({"containers": [], "priority": 1000, "preemptionPolicy": "Never"})
        );
        let mut stated = pod(json!({"priority": 3}));
        keep_on_update(&mut stated, &old);
        assert_eq!(stated["spec"]["priority"], 3);
    }

    #[test]
    fn only_one_global_default() {
        let existing = [class("d1", 50, true, None), class("other", 1, false, None)];
        let second = class("d2", 60, true, None);
        assert_eq!(
            default_conflict(&second, Operation::Create, &existing).unwrap(),
            "PriorityClass d1 is already marked as default. Only one default can exist"
        );
        // Updating the default itself is fine; so is a class that is not a default.
        let same = class("d1", 50, true, Some("Never"));
        assert_eq!(default_conflict(&same, Operation::Update, &existing), None);
        assert_eq!(
            default_conflict(&class("x", 1, false, None), Operation::Create, &existing),
            None
        );
        assert_eq!(default_conflict(&second, Operation::Create, &[]), None);
    }
}
