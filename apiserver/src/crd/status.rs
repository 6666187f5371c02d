//! The status a CRD should have (apiextensions-apiserver's naming and establishing
//! controllers, decided without I/O): `acceptedNames` unless another CRD of the group already
//! uses one of the names, the `NamesAccepted`, `Established` and `Terminating` conditions,
//! and `storedVersions`.

use serde_json::{json, Value};

/// The names a CRD asks for, as accepted (singular and listKind defaulted).
fn requested_names(crd: &Value) -> Value {
    let mut n = crd["spec"]["names"].clone();
    if !n.is_object() {
        n = json!({});
    }
    n.as_object_mut()
        .map(|m| m.retain(|_, v| !v.is_null()))
        .unwrap_or_default();
    n
}

fn name_list(names: &Value) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for k in ["plural", "singular", "kind", "listKind"] {
        if let Some(v) = names[k].as_str().filter(|v| !v.is_empty()) {
            let field = if k == "plural" || k == "singular" {
                "resource"
            } else {
                "kind"
            };
            out.push((field, v.to_string()));
        }
    }
    for v in names["shortNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        out.push(("resource", v.to_string()));
    }
    out
}

/// The first name of `crd` another CRD of the same group already uses: (condition reason,
/// message).
fn conflict(crd: &Value, others: &[Value]) -> Option<(String, String)> {
    let group = &crd["spec"]["group"];
    let mine = requested_names(crd);
    let name = &crd["metadata"]["name"];
    for other in others
        .iter()
        .filter(|o| &o["spec"]["group"] == group && &o["metadata"]["name"] != name)
    {
        let theirs = match other["status"].get("acceptedNames") {
            Some(a) if a["plural"].is_string() => a.clone(),
            _ => continue,
        };
        let taken = name_list(&theirs);
        for (field, v) in name_list(&mine) {
            if taken.iter().any(|(f, t)| *f == field && *t == v) {
                let reason = if field == "kind" {
                    "KindConflict"
                } else {
                    "PluralConflict"
                };
                return Some((reason.into(), format!("{v:?} is already in use")));
            }
        }
    }
    None
}

fn condition(
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
    old: &Value,
    now: &str,
) -> Value {
    let s = if status { "True" } else { "False" };
    let previous = old["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind);
    let since = match previous {
        Some(p) if p["status"] == s => p["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    json!({"type": kind, "status": s, "reason": reason, "message": message, "lastTransitionTime": since})
}

/// The status `crd` should have, given every other CRD; `now` stamps changed conditions.
pub fn desired(crd: &Value, others: &[Value], now: &str) -> Value {
    let old = &crd["status"];
    let mut st = json!({});
    let accepted = match conflict(crd, others) {
        None => {
            st["acceptedNames"] = requested_names(crd);
            true
        }
        Some((reason, message)) => {
            st["acceptedNames"] = old
                .get("acceptedNames")
                .cloned()
                .unwrap_or_else(|| json!({"plural": "", "kind": ""}));
            st["conditions"] = json!([
                condition("NamesAccepted", false, &reason, &message, old, now),
                condition(
                    "Established",
                    false,
                    "NotAccepted",
                    "not all names are accepted",
                    old,
                    now
                ),
            ]);
            false
        }
    };
    if accepted {
        let mut conds = vec![
            condition(
                "NamesAccepted",
                true,
                "NoConflicts",
                "no conflicts found",
                old,
                now,
            ),
            condition(
                "Established",
                true,
                "InitialNamesAccepted",
                "the initial names have been accepted",
                old,
                now,
            ),
        ];
        if crd["metadata"]
            .get("deletionTimestamp")
            .is_some_and(|d| !d.is_null())
        {
            conds.push(condition(
                "Terminating",
                true,
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
                old,
                now,
            ));
        }
        st["conditions"] = json!(conds);
    }
    let mut stored: Vec<Value> = old["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let storage = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["storage"] == true)
        .map(|v| v["name"].clone());
    if let Some(s) = storage {
        if !stored.contains(&s) {
            stored.push(s);
        }
    }
    st["storedVersions"] = json!(stored);
    st
}

/// Whether the CRD's status says it is established (its resources are served).
pub fn established(crd: &Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, plural: &str, kind: &str, short: &[&str]) -> Value {
        json!({"metadata": {"name": name}, "spec": {"group": "example.com",
            "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind, "listKind": format!("{kind}List"), "shortNames": short},
            "versions": [{"name": "v1", "served": true, "storage": true}]}})
    }

    #[test]
    fn a_new_crd_gets_its_names_and_is_established() {
        let w = crd("widgets.example.com", "widgets", "Widget", &["wd"]);
        let st = desired(&w, &[], "T1");
        assert_eq!(st["acceptedNames"], w["spec"]["names"]);
        assert_eq!(st["storedVersions"], json!(["v1"]));
        assert_eq!(
            st["conditions"],
            json!([
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": "T1"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": "T1"}
            ])
        );
        let mut w2 = w.clone();
        w2["status"] = st.clone();
        assert!(established(&w2));
        // Nothing changed: the same status, transition times kept.
        assert_eq!(desired(&w2, &[], "T2"), st);
        w2["metadata"]["deletionTimestamp"] = json!("T3");
        assert_eq!(
            desired(&w2, &[], "T3")["conditions"][2]["reason"],
            "InstanceDeletionInProgress"
        );
    }

    #[test]
    fn a_name_taken_by_another_crd_is_not_accepted() {
        let mut first = crd("widgets.example.com", "widgets", "Widget", &["wd"]);
        first["status"] = desired(&first, &[], "T");
        let second = crd("gizmos.example.com", "gizmos", "Gizmo", &["wd"]);
        let st = desired(&second, std::slice::from_ref(&first), "T");
        assert_eq!(st["conditions"][0]["status"], "False");
        assert_eq!(st["conditions"][0]["reason"], "PluralConflict");
        assert_eq!(st["conditions"][0]["message"], "\"wd\" is already in use");
        assert_eq!(st["conditions"][1]["reason"], "NotAccepted");
        let mut s2 = second.clone();
        s2["status"] = st;
        assert!(!established(&s2));
    }
}
