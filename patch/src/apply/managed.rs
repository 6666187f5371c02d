//! `metadata.managedFields`: reading and writing the entries of field managers.

use serde_json::{Map, Value};

use super::fieldset::FieldSet;

/// The operation a managedFields entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply (`application/apply-patch+yaml`).
    Apply,
    /// Any other write: create, update (PUT), patch.
    Update,
}

impl Operation {
    /// The managedFields spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One managedFields entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    /// Whether `self` is the entry of this manager and operation. Update entries are per API
    /// version too (an applier keeps one entry whatever version it applies).
    pub fn is(
        &self,
        manager: &str,
        operation: Operation,
        api_version: &str,
        subresource: Option<&str>,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
            && (operation == Operation::Apply || self.api_version == api_version)
    }

    /// How conflict messages name the manager (kube-apiserver's `printManager`).
    pub fn display(&self) -> String {
        let mut s = Value::from(self.manager.as_str()).to_string();
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {}", Value::from(sub.as_str())));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn parse(v: &Value) -> Option<Entry> {
        let m = v.as_object()?;
        let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
        let operation = match m.get("operation")?.as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        Some(Entry {
            manager: text("manager").unwrap_or_default(),
            operation,
            api_version: text("apiVersion").unwrap_or_default(),
            time: text("time"),
            subresource: text("subresource").filter(|s| !s.is_empty()),
            fields: m
                .get("fieldsV1")
                .map_or_else(|| Some(FieldSet::new()), FieldSet::from_fields_v1)?,
        })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), Value::from(self.manager.as_str()));
        m.insert("operation".into(), Value::from(self.operation.as_str()));
        m.insert("apiVersion".into(), Value::from(self.api_version.as_str()));
        if let Some(t) = &self.time {
            m.insert("time".into(), Value::from(t.as_str()));
        }
        m.insert("fieldsType".into(), Value::from("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), Value::from(s.as_str()));
        }
        Value::Object(m)
    }
}

/// The entries of an object's `metadata.managedFields`; malformed entries are dropped.
pub(crate) fn read(object: &Value) -> Vec<Entry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Entry::parse).collect())
        .unwrap_or_default()
}

/// Sets `metadata.managedFields` to the non-empty entries, in kube-apiserver's order
/// (operation, time, manager, apiVersion, subresource); removes it when none is left.
pub(crate) fn write(object: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (
            a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let Some(obj) = object.as_object_mut() else {
        return;
    };
    let metadata = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    if entries.is_empty() {
        metadata.remove("managedFields");
    } else {
        let list = entries.iter().map(Entry::to_value).collect();
        metadata.insert("managedFields".into(), Value::Array(list));
    }
}

/// `object` without `metadata.managedFields`.
pub(crate) fn strip(object: &Value) -> Value {
    let mut out = object.clone();
    strip_in_place(&mut out);
    out
}

/// Removes `object`'s `metadata.managedFields`.
pub(crate) fn strip_in_place(object: &mut Value) {
    if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
}
