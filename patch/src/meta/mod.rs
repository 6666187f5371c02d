//! Schema information for patches: which fields are lists merged by key, sets, or atomic, and
//! which maps are granular, per kind. Strategic merge patch and server-side apply read it
//! through [`PatchMeta`]; [`BuiltinPatchMeta`] knows the built-in types, [`SchemaPatchMeta`]
//! reads `x-kubernetes-patch-merge-key` / `x-kubernetes-patch-strategy` /
//! `x-kubernetes-list-type` from an OpenAPI schema (custom resources).

mod builtin;
mod schema;

pub use builtin::BuiltinPatchMeta;
pub use schema::SchemaPatchMeta;

/// How a list field merges.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ListKind {
    /// Replaced as a whole (no patch strategy; `x-kubernetes-list-type: atomic`).
    #[default]
    Atomic,
    /// A set of scalars (`patchStrategy: merge` on a primitive list; `listType: set`).
    Set,
    /// A list of objects identified by keys (`patchStrategy: merge` + `patchMergeKey`).
    Map {
        /// The strategic merge patch key (`x-kubernetes-patch-merge-key`).
        merge_key: String,
        /// The server-side apply keys (`x-kubernetes-list-map-keys`), with the default of
        /// each key the API server fills in when it is left out (e.g. `protocol: TCP`).
        keys: Vec<(String, Option<serde_json::Value>)>,
    },
}

/// How a map (JSON object) field is tracked by server-side apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapKind {
    /// A struct: its fields are tracked one by one; the struct itself only when empty.
    #[default]
    Struct,
    /// A granular map with free-form keys (labels, annotations, data): the map and each key
    /// are tracked.
    Granular,
    /// Owned and replaced as a whole (`x-kubernetes-map-type: atomic`, e.g. label selectors).
    Atomic,
}

/// Patch metadata of one field.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldMeta {
    /// Merge behaviour when the field is a list.
    pub list: ListKind,
    /// `patchStrategy: retainKeys` (volumes, Deployment `spec.strategy`).
    pub retain_keys: bool,
    /// Tracking behaviour when the field is a map.
    pub map: MapKind,
}

impl FieldMeta {
    /// A list of objects merged by `key` (same key for strategic merge and apply).
    pub fn keyed(key: &str) -> FieldMeta {
        FieldMeta {
            list: ListKind::Map {
                merge_key: key.to_string(),
                keys: vec![(key.to_string(), None)],
            },
            ..FieldMeta::default()
        }
    }

    /// The strategic merge key, when the list merges by key.
    pub fn merge_key(&self) -> Option<&str> {
        match &self.list {
            ListKind::Map { merge_key, .. } => Some(merge_key),
            _ => None,
        }
    }

    /// Whether strategic merge patch merges this list (rather than replacing it).
    pub fn merges_list(&self) -> bool {
        !matches!(self.list, ListKind::Atomic)
    }
}

/// Looks up the patch metadata of a field of one kind.
///
/// `path` holds the field names from the object root (`["spec", "template", "spec",
/// "containers", "ports"]`); list items add no element. Unknown fields get the default
/// (atomic list, struct map).
pub trait PatchMeta {
    /// The metadata of the field at `path`.
    fn field(&self, path: &[&str]) -> FieldMeta;

    /// Whether kube-apiserver accepts strategic merge patches for this kind (built-ins yes,
    /// custom resources no).
    fn supports_strategic_merge(&self) -> bool {
        true
    }
}

/// Metadata of a kind without schema information (custom resources until their OpenAPI schema
/// is read): every list atomic, every map a struct, no strategic merge patch.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPatchMeta;

impl PatchMeta for NoPatchMeta {
    fn field(&self, _path: &[&str]) -> FieldMeta {
        FieldMeta::default()
    }

    fn supports_strategic_merge(&self) -> bool {
        false
    }
}
