//! Field selectors: `field=value`, `field==value`, `field!=value`, comma-separated (AND), over
//! `metadata.name`, `metadata.namespace` and the labels a resource declares in the catalog.

use serde_json::Value;

use crate::catalog::Resource;
use crate::status::ApiError;

/// One `field=value` or `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The selector's field label.
    pub field: String,
    /// Dotted path into the object.
    pub path: String,
    /// The value compared.
    pub value: String,
    /// `=` (true) or `!=` (false).
    pub equal: bool,
}

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// The terms, all of which must hold.
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `sel` for resource `r` (only the fields `r` supports); a 400 otherwise.
    pub fn parse(sel: &str, r: &Resource) -> Result<FieldSelector, ApiError> {
        let mut requirements = Vec::new();
        for t in terms(sel)? {
            let path = match t.field {
                "metadata.name" | "metadata.namespace" => t.field,
                _ => r
                    .field_labels
                    .iter()
                    .find(|(label, _)| *label == t.field)
                    .map(|(_, path)| *path)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("field label not supported: {}", t.field))
                    })?,
            };
            requirements.push(FieldRequirement {
                field: t.field.to_string(),
                path: path.to_string(),
                value: t.value.to_string(),
                equal: t.equal,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether it selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// `metadata.name=<n>` if the selector pins one name (lets a list read one key).
    pub fn single_name(&self) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.equal && r.path == "metadata.name")
            .map(|r| r.value.as_str())
    }

    /// Whether `obj` satisfies every term.
    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let actual = field_value(obj, &r.path);
            (actual == r.value) == r.equal
        })
    }
}

/// One `field=value`, `field==value` or `field!=value` term of a selector, trimmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Term<'a> {
    field: &'a str,
    value: &'a str,
    equal: bool,
}

/// The terms of a field selector (comma-separated, AND); empty for a blank selector. The
/// one parser both [`FieldSelector::parse`] and [`exact_match`] read, so authorization
/// narrows a request exactly as the handler filters it.
fn terms(sel: &str) -> Result<Vec<Term<'_>>, ApiError> {
    if sel.trim().is_empty() {
        return Ok(Vec::new());
    }
    sel.split(',')
        .map(|part| {
            let (field, value, equal) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{sel}'; can't understand '{part}'"
                )));
            };
            Ok(Term {
                field: field.trim(),
                value: value.trim(),
                equal,
            })
        })
        .collect()
}

/// The value `sel` requires `field` to equal (`field=v` or `field==v` among its terms), as
/// upstream's `Selector.RequiresExactMatch`; `None` for a selector that does not parse. A
/// selector with this term matches only objects whose `field` is that value, whatever its
/// other terms say.
pub fn exact_match(sel: &str, field: &str) -> Option<String> {
    terms(sel)
        .ok()?
        .into_iter()
        .find(|t| t.equal && t.field == field)
        .map(|t| t.value.to_string())
}

/// The paths of `r`'s objects that field selectors read (what [`selectable`] copies).
pub fn selectable_paths(r: &Resource) -> impl Iterator<Item = &'static str> + '_ {
    ["metadata.name", "metadata.namespace"]
        .into_iter()
        .chain(r.field_labels.iter().map(|(_, path)| *path))
}

/// The part of `obj` that any field selector of `r` reads: `metadata.name`,
/// `metadata.namespace` and each path of `r`'s field labels, copied where present (upstream's
/// `GetAttrs` fields set). For every selector `s` that [`FieldSelector::parse`] accepts for
/// `r`, `s.matches(&selectable(obj, r)) == s.matches(obj)`: a cache keeps this instead of the
/// whole object to filter by.
pub fn selectable(obj: &Value, r: &Resource) -> Value {
    let mut out = Value::Object(serde_json::Map::new());
    for path in selectable_paths(r) {
        let Some(v) = path.split('.').try_fold(obj, |cur, seg| cur.get(seg)) else {
            continue;
        };
        let mut slot = &mut out;
        for seg in path.split('.') {
            let Value::Object(map) = slot else { break };
            slot = map
                .entry(seg)
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
        }
        *slot = v.clone();
    }
    out
}

/// The string form of a field as field selectors see it ("" when absent; booleans and
/// numbers in their JSON form).
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => {
                return match path {
                    "spec.hostNetwork" | "spec.unschedulable" => "false".into(),
                    // Integers of a status that is not written yet read as 0.
                    "status.replicas" | "status.successful" => "0".into(),
                    _ => String::new(),
                };
            }
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::lookup;
    use serde_json::json;

    #[test]
    fn the_selectable_part_matches_as_the_whole_object() {
        let pods = lookup("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"},
                "managedFields": [{"manager": "m"}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}], "hostNetwork": true},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}});
        let part = selectable(&pod, pods);
        assert!(part.pointer("/metadata/managedFields").is_none());
        assert!(part.pointer("/spec/containers").is_none());
        assert_eq!(part["metadata"]["name"], "p");
        for sel in [
            "spec.nodeName=n1",
            "spec.nodeName=n2",
            "spec.nodeName=",
            "status.phase!=Failed,metadata.namespace=ns",
            "metadata.name=p",
            "spec.hostNetwork=true",
            "spec.hostNetwork=false",
            "spec.schedulerName=",
            "status.podIP=10.0.0.1",
        ] {
            let s = FieldSelector::parse(sel, pods).unwrap();
            assert_eq!(s.matches(&part), s.matches(&pod), "{sel}");
        }
        let bare = json!({"metadata": {"name": "p"}});
        assert_eq!(selectable(&bare, pods), bare);
    }

    #[test]
    fn pods_by_node_and_phase() {
        let pods = lookup("", "v1", "pods").unwrap();
        let s = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed", pods).unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        assert!(s.matches(&pod));
        let other = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n2"}});
        assert!(!s.matches(&other));
        let unscheduled = FieldSelector::parse("spec.nodeName=", pods).unwrap();
        assert!(unscheduled.matches(&json!({"spec": {}})));
        assert!(FieldSelector::parse("metadata.name==p", pods)
            .unwrap()
            .matches(&pod));
        assert_eq!(
            FieldSelector::parse("metadata.name=p", pods)
                .unwrap()
                .single_name(),
            Some("p")
        );
    }

    #[test]
    fn exact_matches_are_read_as_the_handler_filters() {
        let pods = lookup("", "v1", "pods").unwrap();
        for sel in [
            "metadata.name=p",
            "metadata.name==p",
            " metadata.name = p ",
            "spec.nodeName=n1,metadata.name=p",
            "metadata.name!=q,metadata.name==p",
        ] {
            assert_eq!(
                exact_match(sel, "metadata.name").as_deref(),
                Some("p"),
                "{sel}"
            );
            let parsed = FieldSelector::parse(sel, pods).unwrap();
            assert_eq!(parsed.single_name(), Some("p"), "{sel}");
        }
        for sel in ["", "metadata.name!=p", "nonsense", "metadata.namespace=p"] {
            assert_eq!(exact_match(sel, "metadata.name"), None, "{sel}");
        }
    }

    #[test]
    fn unknown_fields_and_garbage_are_bad_requests() {
        let cms = lookup("", "v1", "configmaps").unwrap();
        assert_eq!(
            FieldSelector::parse("spec.nodeName=x", cms)
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(FieldSelector::parse("nonsense", cms).unwrap_err().code, 400);
        assert!(FieldSelector::parse("metadata.namespace=default", cms).is_ok());
    }
}
