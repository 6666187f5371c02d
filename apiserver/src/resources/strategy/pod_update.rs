//! What an update of a pod may change (upstream's `ValidatePodUpdate`): the images of its
//! containers and init containers, `activeDeadlineSeconds` (set, or lowered), tolerations
//! (only added; an existing one may change its `tolerationSeconds`), scheduling gates (only
//! removed) and `terminationGracePeriodSeconds` from a negative value to 1. Everything else
//! in the spec is fixed once the pod exists; the refusal lists the paths that changed.
//!
//! Not modelled: the extra nodeSelector/affinity additions upstream allows while a pod is
//! still gated, and in-place resource resize (off by default in 1.32).

use serde_json::Value;

use k3rs_apimachinery::status::Cause;

/// The fields a pod update may change, as kube-apiserver lists them.
const UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,\
`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),\
`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Changed paths shown in the refusal, at most.
const DIFF_LINES: usize = 20;

fn list<'a>(spec: &'a Value, field: &str) -> &'a [Value] {
    spec[field].as_array().map_or(&[], Vec::as_slice)
}

/// Why `new` may not replace `old` (both stored-form pods), or nothing.
pub fn validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    let (n, o) = (&new["spec"], &old["spec"]);
    let mut causes = Vec::new();
    for field in ["containers", "initContainers"] {
        let (nc, oc) = (list(n, field), list(o, field));
        if nc.len() != oc.len() {
            let why = "pod updates may not add or remove containers";
            return vec![Cause::forbidden(format!("spec.{field}"), why)];
        }
        for (i, c) in nc.iter().enumerate() {
            if c["image"].as_str().unwrap_or("").is_empty() {
                causes.push(Cause::required(format!("spec.{field}[{i}].image"), ""));
            }
        }
    }
    if !causes.is_empty() {
        return causes;
    }
    if let Some(c) = deadline_change(n, o) {
        return vec![c];
    }
    if let Some(c) = tolerations_change(n, o) {
        causes.push(c);
    }
    if let Some(c) = gates_change(n, o) {
        causes.push(c);
    }
    if n == o {
        return causes;
    }
    let munged = munge(n, o);
    if munged != *o {
        let mut changed = Vec::new();
        diff("spec", o, &munged, &mut changed);
        let shown = changed.len().min(DIFF_LINES);
        let mut text = changed[..shown].join("\n");
        if changed.len() > shown {
            text.push_str(&format!("\n  … and {} more", changed.len() - shown));
        }
        let why = format!("pod updates may not change fields other than {UPDATABLE}\n{text}");
        causes.push(Cause::forbidden("spec", &why));
    }
    causes
}

/// `activeDeadlineSeconds` may be set, or lowered to a non-negative value, never removed.
fn deadline_change(n: &Value, o: &Value) -> Option<Cause> {
    let field = "spec.activeDeadlineSeconds";
    let old = o["activeDeadlineSeconds"].as_i64();
    match n.get("activeDeadlineSeconds").filter(|v| !v.is_null()) {
        Some(v) => {
            let new = v.as_i64().unwrap_or(-1);
            if !(0..=i64::from(i32::MAX)).contains(&new) {
                let why = format!("must be between 0 and {}, inclusive", i32::MAX);
                return Some(Cause::invalid_value(field, v, &why));
            }
            let raised = old.is_some_and(|old| old < new);
            let why = "must be less than or equal to previous value";
            raised.then(|| Cause::invalid_value(field, new, why))
        }
        None => old.map(|_| {
            Cause::invalid_value(
                field,
                "null",
                "must not update from a positive integer to nil value",
            )
        }),
    }
}

/// Every existing toleration must still be there (its `tolerationSeconds` may change).
fn tolerations_change(n: &Value, o: &Value) -> Option<Cause> {
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let new: Vec<Value> = list(n, "tolerations").iter().map(without_seconds).collect();
    let kept = list(o, "tolerations")
        .iter()
        .all(|t| new.contains(&without_seconds(t)));
    let why = "existing toleration can not be modified except its tolerationSeconds";
    (!kept).then(|| Cause::forbidden("spec.tolerations", why))
}

/// Scheduling gates may only be removed.
fn gates_change(n: &Value, o: &Value) -> Option<Cause> {
    let old = list(o, "schedulingGates");
    let added = list(n, "schedulingGates")
        .iter()
        .find(|g| !old.contains(g))?;
    let name = added["name"].as_str().unwrap_or("");
    let why = format!("only deletion is allowed, but found new scheduling gate '{name}'");
    Some(Cause::forbidden("spec.schedulingGates", &why))
}

/// `n` with what an update may change taken back from `o`: equal to `o` when nothing else
/// changed.
fn munge(n: &Value, o: &Value) -> Value {
    let mut m = n.clone();
    for field in ["containers", "initContainers"] {
        let old = list(o, field);
        if let Some(cs) = m[field].as_array_mut() {
            for (c, was) in cs.iter_mut().zip(old) {
                c["image"] = was["image"].clone();
            }
        }
    }
    let Some(spec) = m.as_object_mut() else {
        return m;
    };
    for field in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
        match o.get(field) {
            Some(v) => spec.insert(field.into(), v.clone()),
            None => spec.remove(field),
        };
    }
    let grace = "terminationGracePeriodSeconds";
    let was_negative = o[grace].as_i64().is_some_and(|g| g < 0);
    if was_negative && spec.get(grace).and_then(Value::as_i64) == Some(1) {
        spec.insert(grace.into(), o[grace].clone());
    }
    m
}

/// Lines `  path: old → new` for the leaves that differ between `a` and `b`.
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                if va != vb {
                    diff(&format!("{path}.{k}"), va, vb, out);
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                if va != vb {
                    diff(&format!("{path}[{i}]"), va, vb, out);
                }
            }
        }
        _ => out.push(format!("  {path}: {a} → {b}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod() -> Value {
        json!({"spec": {
            "containers": [{"name": "app", "image": "busybox:1.35", "ports": [{"containerPort": 80}]}],
            "initContainers": [{"name": "init", "image": "busybox:1.35"}],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "schedulingGates": [{"name": "g1"}],
            "terminationGracePeriodSeconds": 30,
            "nodeName": "n1",
        }})
    }

    fn with(f: impl FnOnce(&mut Value)) -> Value {
        let mut p = pod();
        f(&mut p["spec"]);
        p
    }

    fn fields(c: &[Cause]) -> Vec<(&str, &str)> {
        c.iter().map(|c| (c.reason, c.field.as_str())).collect()
    }

    #[test]
    fn images_deadlines_added_tolerations_and_removed_gates_may_change() {
        let new = with(|s| {
            s["containers"][0]["image"] = json!("busybox:latest");
            s["initContainers"][0]["image"] = json!("busybox:latest");
            s["activeDeadlineSeconds"] = json!(60);
            s["tolerations"][0]["tolerationSeconds"] = json!(10);
            s["tolerations"]
                .as_array_mut()
                .unwrap()
                .push(json!({"key": "x", "operator": "Exists"}));
            s["schedulingGates"] = json!([]);
        });
        assert!(validate_update(&new, &pod()).is_empty());
        assert!(validate_update(&pod(), &pod()).is_empty());
    }

    #[test]
    fn other_spec_changes_are_forbidden_with_the_changed_paths() {
        let new = with(|s| {
            s["containers"][0]["ports"][0]["containerPort"] = json!(8080);
            s["nodeName"] = json!("n2");
        });
        let c = validate_update(&new, &pod());
        assert_eq!(fields(&c), [("FieldValueForbidden", "spec")]);
        assert_eq!(
            c[0].message,
            format!(
                "Forbidden: pod updates may not change fields other than {UPDATABLE}\n  \
                 spec.containers[0].ports[0].containerPort: 80 → 8080\n  spec.nodeName: \"n1\" → \"n2\""
            )
        );
    }

    #[test]
    fn containers_may_not_come_or_go_and_keep_an_image() {
        let more = with(|s| {
            let c = s["containers"][0].clone();
            s["containers"].as_array_mut().unwrap().push(c);
        });
        let c = validate_update(&more, &pod());
        assert_eq!(fields(&c), [("FieldValueForbidden", "spec.containers")]);
        assert!(c[0]
            .message
            .ends_with("pod updates may not add or remove containers"));
        let blank = with(|s| s["initContainers"][0]["image"] = json!(""));
        let c = validate_update(&blank, &pod());
        assert_eq!(
            fields(&c),
            [("FieldValueRequired", "spec.initContainers[0].image")]
        );
    }

    #[test]
    fn the_deadline_may_only_be_set_or_lowered() {
        let old = with(|s| s["activeDeadlineSeconds"] = json!(60));
        let raised = with(|s| s["activeDeadlineSeconds"] = json!(61));
        let c = validate_update(&raised, &old);
        assert_eq!(
            fields(&c),
            [("FieldValueInvalid", "spec.activeDeadlineSeconds")]
        );
        assert!(c[0]
            .message
            .ends_with("must be less than or equal to previous value"));
        let c = validate_update(&pod(), &old);
        assert!(c[0]
            .message
            .ends_with("must not update from a positive integer to nil value"));
        let negative = with(|s| s["activeDeadlineSeconds"] = json!(-1));
        let c = validate_update(&negative, &pod());
        assert!(c[0]
            .message
            .ends_with("must be between 0 and 2147483647, inclusive"));
        let lowered = with(|s| s["activeDeadlineSeconds"] = json!(0));
        assert!(validate_update(&lowered, &old).is_empty());
    }

    #[test]
    fn tolerations_and_gates_only_grow_and_shrink() {
        let changed = with(|s| s["tolerations"][0]["effect"] = json!("NoSchedule"));
        let c = validate_update(&changed, &pod());
        assert_eq!(fields(&c), [("FieldValueForbidden", "spec.tolerations")]);
        let gated = with(|s| s["schedulingGates"] = json!([{"name": "g1"}, {"name": "g2"}]));
        let c = validate_update(&gated, &pod());
        assert_eq!(
            fields(&c),
            [("FieldValueForbidden", "spec.schedulingGates")]
        );
        assert!(c[0].message.ends_with("found new scheduling gate 'g2'"));
    }

    #[test]
    fn a_negative_grace_period_may_become_one() {
        let old = with(|s| s["terminationGracePeriodSeconds"] = json!(-1));
        let one = with(|s| s["terminationGracePeriodSeconds"] = json!(1));
        assert!(validate_update(&one, &old).is_empty());
        let two = with(|s| s["terminationGracePeriodSeconds"] = json!(2));
        assert_eq!(
            fields(&validate_update(&two, &old)),
            [("FieldValueForbidden", "spec")]
        );
        assert_eq!(
            fields(&validate_update(&one, &pod())),
            [("FieldValueForbidden", "spec")]
        );
    }
}
