//! Structural `openAPIV3Schema`s of custom resources: validation, pruning and defaulting,
//! pure functions over `serde_json::Value`s, with kube-apiserver's field paths
//! (`spec.items[0].name`).

pub mod default;
pub mod list_type;
pub mod prune;
pub mod rule;
pub mod rules;
pub mod rules_cost;
pub mod rules_definition;
pub mod structural;
pub mod validate;

use serde_json::Value;

/// `a.b` (or `b` at the root).
pub(crate) fn child(at: &str, field: &str) -> String {
    if at.is_empty() {
        field.to_string()
    } else {
        format!("{at}.{field}")
    }
}

/// `a[3]`.
pub(crate) fn index(at: &str, i: usize) -> String {
    format!("{at}[{i}]")
}

/// Whether a schema keeps fields it does not declare.
pub(crate) fn preserves_unknown(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"] == true
}

/// Whether a schema describes an embedded object (`apiVersion`, `kind`, `metadata`).
pub(crate) fn embedded(schema: &Value) -> bool {
    schema["x-kubernetes-embedded-resource"] == true
}

pub(crate) use k3rs_cel::value::field_schema;
