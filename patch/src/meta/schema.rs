//! [`SchemaPatchMeta`]: patch metadata read from an OpenAPI v3 schema, for custom resources
//! (their `openAPIV3Schema`) and for any kind whose published schema is at hand.
//!
//! Read: `x-kubernetes-patch-strategy` (`merge`, `retainKeys`), `x-kubernetes-patch-merge-key`,
//! `x-kubernetes-list-type` (`atomic`, `set`, `map`), `x-kubernetes-list-map-keys` (with the
//! keys' `default`s), `x-kubernetes-map-type` (`atomic`, `granular`), `$ref` into a set of
//! component schemas and single-element `allOf` wrappers.
//!
//! A list merges by the patch strategy when it has one, else by its list type (so a custom
//! resource's `listType: map` list merges by key in server-side apply).

use serde_json::{Map, Value};

use super::{FieldMeta, ListKind, MapKind, PatchMeta};

/// How deep `$ref`/`allOf` chains are followed (guards against cycles).
const MAX_RESOLVE: usize = 32;

/// Patch metadata from an OpenAPI v3 schema.
#[derive(Debug, Clone)]
pub struct SchemaPatchMeta {
    root: Value,
    definitions: Map<String, Value>,
    strategic: bool,
}

impl SchemaPatchMeta {
    /// A custom resource version's `openAPIV3Schema`. kube-apiserver refuses strategic merge
    /// patches for custom resources, so this meta does too.
    pub fn custom_resource(schema: Value) -> SchemaPatchMeta {
        SchemaPatchMeta {
            root: schema,
            definitions: Map::new(),
            strategic: false,
        }
    }

    /// A kind's schema from an OpenAPI document: `root` is the kind's schema, `definitions`
    /// the document's `components.schemas` (refs are resolved by their last segment).
    pub fn openapi(root: Value, definitions: Map<String, Value>) -> SchemaPatchMeta {
        SchemaPatchMeta {
            root,
            definitions,
            strategic: true,
        }
    }

    fn resolve<'a>(&'a self, mut node: &'a Value) -> &'a Value {
        for _ in 0..MAX_RESOLVE {
            if let Some(r) = node.get("$ref").and_then(Value::as_str) {
                let name = r.rsplit('/').next().unwrap_or(r);
                match self.definitions.get(name) {
                    Some(def) => node = def,
                    None => return &Value::Null,
                }
                continue;
            }
            match node
                .get("allOf")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
            {
                Some([only]) if node.get("properties").is_none() => node = only,
                _ => return node,
            }
        }
        &Value::Null
    }

    /// The items schema of a list schema, or the schema itself.
    fn through_items<'a>(&'a self, node: &'a Value) -> &'a Value {
        match node.get("items") {
            Some(items) => self.resolve(items),
            None => node,
        }
    }

    fn node(&self, path: &[&str]) -> Option<&Value> {
        let mut node = self.resolve(&self.root);
        for name in path {
            let object = self.through_items(node);
            let child = match object.get("properties").and_then(|p| p.get(*name)) {
                Some(child) => child,
                None => object
                    .get("additionalProperties")
                    .filter(|a| a.is_object())?,
            };
            node = self.resolve(child);
        }
        Some(node)
    }

    fn list_kind(&self, node: &Value) -> ListKind {
        let text = |k: &str| node.get(k).and_then(Value::as_str);
        let strategies: Vec<&str> = text("x-kubernetes-patch-strategy")
            .map(|s| s.split(',').map(str::trim).collect())
            .unwrap_or_default();
        let map_keys: Vec<&str> = node
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let items = self.through_items(node);
        let keyed = |merge_key: &str, keys: &[&str]| {
            let keys = if keys.is_empty() {
                vec![merge_key]
            } else {
                keys.to_vec()
            };
            ListKind::Map {
                merge_key: merge_key.to_string(),
                keys: keys
                    .into_iter()
                    .map(|k| {
                        let default = items
                            .get("properties")
                            .and_then(|p| p.get(k))
                            .map(|p| self.resolve(p))
                            .and_then(|p| p.get("default"))
                            .cloned();
                        (k.to_string(), default)
                    })
                    .collect(),
            }
        };
        if strategies.contains(&"merge") {
            return match text("x-kubernetes-patch-merge-key") {
                Some(key) => keyed(key, &map_keys),
                None => ListKind::Set,
            };
        }
        match (text("x-kubernetes-list-type"), map_keys.first()) {
            (Some("map"), Some(first)) => keyed(first, &map_keys),
            (Some("set"), _) => ListKind::Set,
            _ => ListKind::Atomic,
        }
    }
}

impl PatchMeta for SchemaPatchMeta {
    fn field(&self, path: &[&str]) -> FieldMeta {
        let Some(node) = self.node(path) else {
            return FieldMeta::default();
        };
        let strategy = node
            .get("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .unwrap_or("");
        let map = match node.get("x-kubernetes-map-type").and_then(Value::as_str) {
            Some("atomic") => MapKind::Atomic,
            _ if node.get("properties").is_none()
                && node
                    .get("additionalProperties")
                    .is_some_and(Value::is_object) =>
            {
                MapKind::Granular
            }
            _ => MapKind::Struct,
        };
        FieldMeta {
            list: self.list_kind(node),
            retain_keys: strategy.split(',').any(|s| s.trim() == "retainKeys"),
            map,
        }
    }

    fn supports_strategic_merge(&self) -> bool {
        self.strategic
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd() -> SchemaPatchMeta {
        SchemaPatchMeta::custom_resource(json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["port", "protocol"],
                              "items": {"type": "object", "properties": {
                                  "port": {"type": "integer"},
                                  "protocol": {"type": "string", "default": "TCP"}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set",
                             "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                 "additionalProperties": {"type": "string"}},
                    "params": {"type": "object", "additionalProperties": {"type": "string"}},
                    "nested": {"type": "array", "items": {"type": "object", "properties": {
                        "deep": {"type": "array", "x-kubernetes-list-type": "set",
                                 "items": {"type": "string"}}}}}
                }}
            }
        }))
    }

    #[test]
    fn custom_resource_list_and_map_types() {
        let m = crd();
        assert!(!m.supports_strategic_merge());
        assert_eq!(
            m.field(&["spec", "ports"]).list,
            ListKind::Map {
                merge_key: "port".into(),
                keys: vec![
                    ("port".into(), None),
                    ("protocol".into(), Some(json!("TCP")))
                ],
            }
        );
        assert_eq!(m.field(&["spec", "tags"]).list, ListKind::Set);
        assert_eq!(m.field(&["spec", "args"]).list, ListKind::Atomic);
        assert_eq!(m.field(&["spec", "selector"]).map, MapKind::Atomic);
        assert_eq!(m.field(&["spec", "params"]).map, MapKind::Granular);
        assert_eq!(m.field(&["spec"]).map, MapKind::Struct);
        assert_eq!(m.field(&["spec", "nested", "deep"]).list, ListKind::Set);
        assert_eq!(m.field(&["spec", "unknown", "x"]), FieldMeta::default());
    }

    #[test]
    fn openapi_refs_and_patch_extensions() {
        let defs = json!({
            "io.k8s.api.core.v1.PodSpec": {"type": "object", "properties": {
                "containers": {"type": "array", "x-kubernetes-patch-merge-key": "name",
                               "x-kubernetes-patch-strategy": "merge",
                               "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}]}},
                "volumes": {"type": "array", "x-kubernetes-patch-merge-key": "name",
                            "x-kubernetes-patch-strategy": "merge,retainKeys",
                            "items": {"type": "object"}}}},
            "io.k8s.api.core.v1.Container": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-patch-merge-key": "containerPort",
                          "x-kubernetes-patch-strategy": "merge",
                          "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                          "items": {"type": "object", "properties": {
                              "protocol": {"type": "string", "default": "TCP"}}}}}}
        });
        let Value::Object(defs) = defs else {
            unreachable!()
        };
        let root = json!({"type": "object", "properties": {"spec": {
            "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}]}}});
        let m = SchemaPatchMeta::openapi(root, defs);
        assert!(m.supports_strategic_merge());
        assert_eq!(m.field(&["spec", "containers"]), FieldMeta::keyed("name"));
        let volumes = m.field(&["spec", "volumes"]);
        assert!(volumes.retain_keys);
        assert_eq!(volumes.merge_key(), Some("name"));
        assert_eq!(
            m.field(&["spec", "containers", "ports"]).list,
            ListKind::Map {
                merge_key: "containerPort".into(),
                keys: vec![
                    ("containerPort".into(), None),
                    ("protocol".into(), Some(json!("TCP")))
                ],
            }
        );
    }

    #[test]
    fn reference_cycles_end() {
        let Value::Object(defs) = json!({"A": {"$ref": "#/components/schemas/B"},
                                         "B": {"$ref": "#/components/schemas/A"}})
        else {
            unreachable!()
        };
        let m = SchemaPatchMeta::openapi(json!({"$ref": "#/components/schemas/A"}), defs);
        assert_eq!(m.field(&["x"]), FieldMeta::default());
    }
}
