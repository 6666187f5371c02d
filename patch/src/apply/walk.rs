//! Field sets of objects: which paths an applied configuration sets, and which paths changed
//! between two versions of an object.

use serde_json::Value;

use super::fieldset::{FieldSet, Path, PathElement};
use super::Scope;
use crate::{FieldMeta, ListKind, MapKind, PatchMeta};

/// Fields kube-apiserver never tracks in managedFields (its `stripMeta`).
const UNTRACKED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
];

/// Whether the field at `names` is left out of field tracking in `scope`.
fn untracked(names: &[String], scope: Scope) -> bool {
    match names {
        [top] => {
            top == "apiVersion"
                || top == "kind"
                || match scope {
                    Scope::Whole => false,
                    Scope::Main => top == "status",
                    Scope::Status => top != "status" && top != "metadata",
                }
        }
        [meta, field] => meta == "metadata" && UNTRACKED_METADATA.contains(&field.as_str()),
        _ => false,
    }
}

/// The path element naming `item` (at `index`) in a list with metadata `meta`.
pub(crate) fn item_element(meta: &FieldMeta, item: &Value, index: usize) -> PathElement {
    match &meta.list {
        ListKind::Set => PathElement::value(item),
        ListKind::Map { keys, .. } => {
            let Value::Object(m) = item else {
                return PathElement::Index(index);
            };
            let mut fields = Vec::with_capacity(keys.len());
            for (i, (key, default)) in keys.iter().enumerate() {
                match (m.get(key), default) {
                    (Some(v), _) => fields.push((key.clone(), v.clone())),
                    (None, Some(d)) => fields.push((key.clone(), d.clone())),
                    // Without its primary key the item can only be named by its position.
                    (None, None) if i == 0 => return PathElement::Index(index),
                    (None, None) => {}
                }
            }
            PathElement::key(&fields)
        }
        ListKind::Atomic => PathElement::Index(index),
    }
}

/// What changed from one version of an object to the next.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    /// Paths added or whose value changed.
    pub changed: FieldSet,
    /// Paths that are gone.
    pub removed: FieldSet,
}

/// Walks objects with the schema of their kind.
pub(crate) struct Walker<'a> {
    pub meta: &'a dyn PatchMeta,
    pub scope: Scope,
}

impl Walker<'_> {
    pub(crate) fn field(&self, names: &[String]) -> FieldMeta {
        let path: Vec<&str> = names.iter().map(String::as_str).collect();
        self.meta.field(&path)
    }

    fn map_kind(&self, names: &[String]) -> MapKind {
        if names.is_empty() {
            MapKind::Struct
        } else {
            self.field(names).map
        }
    }

    /// The paths `value` sets, as server-side apply records them for an applier.
    pub(crate) fn field_set(&self, value: &Value) -> FieldSet {
        let mut out = FieldSet::new();
        self.collect(value, &mut Vec::new(), &mut Vec::new(), &mut out, false);
        out
    }

    /// Adds the paths of `value` to `out`. With `added` (the value is new in an update), new
    /// granular maps and merging lists are recorded themselves too (`.`).
    fn collect(
        &self,
        value: &Value,
        names: &mut Vec<String>,
        path: &mut Path,
        out: &mut FieldSet,
        added: bool,
    ) {
        match value {
            Value::Object(m) => {
                let kind = self.map_kind(names);
                if kind == MapKind::Atomic || m.is_empty() || (added && kind == MapKind::Granular) {
                    out.insert(path);
                }
                if kind == MapKind::Atomic {
                    return;
                }
                for (k, child) in m {
                    names.push(k.clone());
                    if !untracked(names, self.scope) {
                        path.push(PathElement::Field(k.clone()));
                        self.collect(child, names, path, out, added);
                        if kind == MapKind::Granular {
                            out.insert(path);
                        }
                        path.pop();
                    }
                    names.pop();
                }
            }
            Value::Array(items) => {
                let meta = self.field(names);
                if meta.list == ListKind::Atomic || (added && !items.is_empty()) {
                    out.insert(path);
                }
                if meta.list == ListKind::Atomic {
                    return;
                }
                for (i, item) in items.iter().enumerate() {
                    path.push(item_element(&meta, item, i));
                    if matches!(meta.list, ListKind::Map { .. }) {
                        self.collect(item, names, path, out, added);
                    }
                    out.insert(path);
                    path.pop();
                }
            }
            _ => out.insert(path),
        }
    }

    /// The paths added, changed and removed from `old` to `new`.
    pub(crate) fn compare(&self, old: &Value, new: &Value) -> Comparison {
        let mut c = Comparison::default();
        self.compare_at(
            Some(old),
            Some(new),
            &mut Vec::new(),
            &mut Vec::new(),
            &mut c,
        );
        c
    }

    fn compare_at(
        &self,
        old: Option<&Value>,
        new: Option<&Value>,
        names: &mut Vec<String>,
        path: &mut Path,
        c: &mut Comparison,
    ) {
        match (old, new) {
            (None, None) => {}
            (None, Some(n)) => self.collect(n, names, path, &mut c.changed, true),
            (Some(o), None) => {
                self.collect(o, names, path, &mut c.removed, false);
                c.removed.insert(path);
            }
            (Some(Value::Object(om)), Some(Value::Object(nm)))
                if self.map_kind(names) != MapKind::Atomic =>
            {
                // managedFields are never compared, so a metadata of only them is empty.
                let managed_only = names.len() == 1
                    && names[0] == "metadata"
                    && om.len() == 1
                    && om.contains_key("managedFields");
                if nm.is_empty() && !om.is_empty() && !managed_only {
                    // Emptied: the empty map is now the value.
                    c.changed.insert(path);
                }
                let keys: std::collections::BTreeSet<&String> =
                    om.keys().chain(nm.keys()).collect();
                for k in keys {
                    names.push(k.clone());
                    if !untracked(names, self.scope) {
                        path.push(PathElement::Field(k.clone()));
                        self.compare_at(om.get(k), nm.get(k), names, path, c);
                        path.pop();
                    }
                    names.pop();
                }
            }
            (Some(Value::Array(oa)), Some(Value::Array(na)))
                if self.field(names).list != ListKind::Atomic =>
            {
                let meta = self.field(names);
                let index = |items: &[Value]| -> Vec<(PathElement, usize)> {
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (item_element(&meta, v, i), i))
                        .collect()
                };
                let (old_items, new_items) = (index(oa), index(na));
                let find = |items: &[(PathElement, usize)], e: &PathElement| {
                    items.iter().find(|(x, _)| x == e).map(|(_, i)| *i)
                };
                for (e, i) in &new_items {
                    path.push(e.clone());
                    match find(&old_items, e) {
                        Some(j) if matches!(meta.list, ListKind::Map { .. }) => {
                            self.compare_at(Some(&oa[j]), Some(&na[*i]), names, path, c)
                        }
                        Some(_) => {}
                        None => {
                            if matches!(meta.list, ListKind::Map { .. }) {
                                self.collect(&na[*i], names, path, &mut c.changed, true);
                            }
                            c.changed.insert(path);
                        }
                    }
                    path.pop();
                }
                for (e, i) in &old_items {
                    if find(&new_items, e).is_none() {
                        path.push(e.clone());
                        if matches!(meta.list, ListKind::Map { .. }) {
                            self.collect(&oa[*i], names, path, &mut c.removed, false);
                        }
                        c.removed.insert(path);
                        path.pop();
                    }
                }
            }
            (Some(o), Some(n)) => {
                if o != n {
                    c.changed.insert(path);
                    if o.is_object() || o.is_array() {
                        // The old shape is gone; its sub-paths are removed.
                        self.collect(o, names, path, &mut c.removed, false);
                    }
                }
            }
        }
    }
}
