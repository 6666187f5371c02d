//! Field selectors: `field=value`, `field==value`, `field!=value`, comma-separated (AND), over
//! `metadata.name`, `metadata.namespace` and the labels a resource declares in the catalog.

use serde_json::Value;

use crate::apiserver::resources::catalog::Resource;
use crate::apiserver::status::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The selector's field label.
    pub field: String,
    /// Dotted path into the object.
    pub path: String,
    pub value: String,
    pub equal: bool,
}

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    pub fn parse(sel: &str, r: &Resource) -> Result<FieldSelector, ApiError> {
        let mut requirements = Vec::new();
        if sel.trim().is_empty() {
            return Ok(FieldSelector { requirements });
        }
        for part in sel.split(',') {
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
            let field = field.trim();
            let path = match field {
                "metadata.name" | "metadata.namespace" => field,
                _ => r
                    .field_labels
                    .iter()
                    .find(|(label, _)| *label == field)
                    .map(|(_, path)| *path)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("field label not supported: {field}"))
                    })?,
            };
            requirements.push(FieldRequirement {
                field: field.to_string(),
                path: path.to_string(),
                value: value.trim().to_string(),
                equal,
            });
        }
        Ok(FieldSelector { requirements })
    }

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

    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let actual = field_value(obj, &r.path);
            (actual == r.value) == r.equal
        })
    }
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
    use crate::apiserver::resources::catalog::lookup;
    use serde_json::json;

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
