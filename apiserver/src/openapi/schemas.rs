//! `components.schemas` of a group-version document, from k8s-openapi's `schemars` schemas:
//! the kinds, their lists and every definition they reference (named as kube names them,
//! `io.k8s.api.core.v1.Pod`), plus the meta types the operations use. Adds
//! `x-kubernetes-group-version-kind` to top-level kinds, kube's `int-or-string` format, and
//! the patch extensions (see [`super::patch_ext`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::kinds;
use super::patch_ext;
use k3rs_apimachinery::catalog::Resource;

/// Prefix of every `$ref` in the documents.
pub const REF_PREFIX: &str = "#/components/schemas/";

/// A kind's definition name, from the `$ref` schemars returned for it.
fn ref_name(s: &Schema) -> Option<String> {
    s.get("$ref")?
        .as_str()?
        .strip_prefix(REF_PREFIX)
        .map(str::to_string)
}

/// A (group, version, kind) and the definition that describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindSchema {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub name: String,
}

/// The definitions of one group-version's resources.
#[derive(Debug, Default)]
pub struct Components {
    pub schemas: Map<String, Value>,
    pub kinds: Vec<KindSchema>,
}

impl Components {
    /// The definition name of a kind in this document.
    pub fn name_of(&self, group: &str, version: &str, kind: &str) -> Option<String> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.kind == kind)
            .map(|k| k.name.clone())
    }
}

/// Builds the components of `resources` (all of one group-version).
pub fn components(resources: &[&'static Resource]) -> Components {
    let mut gen = SchemaGenerator::new(SchemaSettings::openapi3());
    let mut kinds = Vec::new();
    let mut add_kind =
        |gen: &mut SchemaGenerator, g: &'static str, v: &'static str, k: &'static str| {
            if kinds
                .iter()
                .any(|x: &KindSchema| x.group == g && x.version == v && x.kind == k)
            {
                return;
            }
            if let Some(name) = kinds::schema_of(g, v, k).and_then(|f| ref_name(&f(gen))) {
                kinds.push(KindSchema {
                    group: g,
                    version: v,
                    kind: k,
                    name,
                });
            }
        };
    for r in resources {
        add_kind(&mut gen, r.group, r.version, r.kind);
        for s in r.subresources {
            add_kind(&mut gen, s.group, s.version, s.kind);
        }
    }
    for meta_type in [
        gen.subschema_for::<meta::DeleteOptions>(),
        gen.subschema_for::<meta::Status>(),
        gen.subschema_for::<meta::ListMeta>(),
        gen.subschema_for::<meta::Patch>(),
    ] {
        debug_assert!(ref_name(&meta_type).is_some());
    }
    let mut schemas = gen.take_definitions(true);
    for value in schemas.values_mut() {
        normalize(value);
    }
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent".into(),
        watch_event(),
    );
    for k in &kinds {
        let served = resources
            .iter()
            .any(|r| r.group == k.group && r.version == k.version && r.kind == k.kind);
        if let Some(Value::Object(def)) = schemas.get_mut(&k.name) {
            def.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([gvk(k.group, k.version, k.kind)]),
            );
            optional_metadata(def);
        }
        if served {
            schemas.insert(format!("{}List", k.name), list_of(k));
        }
    }
    for r in resources {
        if let Some(name) = kinds
            .iter()
            .find(|k| k.kind == r.kind && k.group == r.group)
            .map(|k| &k.name)
        {
            patch_ext::annotate(&mut schemas, r, name);
        }
    }
    // Stable order: definitions sorted by name, as kube writes them.
    let sorted: BTreeMap<String, Value> = schemas.into_iter().collect();
    Components {
        schemas: sorted.into_iter().collect(),
        kinds,
    }
}

/// k8s-openapi's kinds have a non-optional `metadata`, so their schemas require it; kube's
/// never do (kubectl's validation against /openapi/v2 would refuse a TokenReview without
/// one).
fn optional_metadata(def: &mut Map<String, Value>) {
    if let Some(Value::Array(required)) = def.get_mut("required") {
        required.retain(|r| r != "metadata");
        if required.is_empty() {
            def.remove("required");
        }
    }
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({ "group": group, "kind": kind, "version": version })
}

/// kube writes `IntOrString` and `Quantity` as strings of format `int-or-string`.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
                && !m.contains_key("type")
            {
                m.insert("type".into(), "string".into());
                m.insert("format".into(), "int-or-string".into());
            }
            m.values_mut().for_each(normalize);
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

fn list_of(k: &KindSchema) -> Value {
    let list_kind = format!("{}List", k.kind);
    json!({
        "description": format!("{list_kind} is a list of {} objects.", k.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object.",
                "type": "string",
            },
            "items": {
                "description": format!("The {} objects of the list.", k.kind),
                "type": "array",
                "items": { "$ref": format!("{REF_PREFIX}{}", k.name) },
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents.",
                "type": "string",
            },
            "metadata": {
                "description": "Standard list metadata.",
                "allOf": [{ "$ref": format!("{REF_PREFIX}io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta") }],
                "default": {},
            },
        },
        "x-kubernetes-group-version-kind": [gvk(k.group, k.version, &list_kind)],
    })
}

fn watch_event() -> Value {
    json!({
        "description": "Event represents a single event to a watched resource.",
        "type": "object",
        "required": ["type", "object"],
        "properties": {
            "object": {
                "description": "The object the event is about: for ADDED and MODIFIED its new state, for DELETED its last state, for BOOKMARK only its resourceVersion, for ERROR a Status.",
                "type": "object",
            },
            "type": { "type": "string", "default": "" },
        },
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k3rs_apimachinery::catalog::{in_group_version, CATALOG};

    /// Every `$ref` under `v`, depth first.
    pub(crate) fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    fn core() -> Components {
        components(&in_group_version("", "v1").collect::<Vec<_>>())
    }

    #[test]
    fn every_ref_resolves_in_every_group_version() {
        let mut gvs: Vec<(&str, &str)> = CATALOG.iter().map(|r| (r.group, r.version)).collect();
        gvs.dedup();
        for (g, v) in gvs {
            let c = components(&in_group_version(g, v).collect::<Vec<_>>());
            let mut all = Vec::new();
            refs(&Value::Object(c.schemas.clone()), &mut all);
            assert!(!all.is_empty());
            for r in all {
                let name = r.strip_prefix(REF_PREFIX).unwrap_or_else(|| panic!("{r}"));
                assert!(c.schemas.contains_key(name), "{g}/{v}: dangling {r}");
            }
        }
    }

    #[test]
    fn kinds_have_kube_names_and_gvk() {
        let c = core();
        let pod = &c.schemas["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );
        assert!(pod["description"].as_str().unwrap().contains("containers"));
        assert_eq!(
            c.schemas["io.k8s.api.core.v1.PodList"]["x-kubernetes-group-version-kind"][0]["kind"],
            "PodList"
        );
        assert_eq!(
            c.schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
                ["creationTimestamp"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Time"
        );
        assert_eq!(
            c.schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]["format"],
            "date-time"
        );
        assert_eq!(
            c.name_of("", "v1", "Pod").as_deref(),
            Some("io.k8s.api.core.v1.Pod")
        );
        assert_eq!(
            c.schemas["io.k8s.api.core.v1.Container"]["required"],
            json!(["name"])
        );
        assert_eq!(pod.get("required"), None, "metadata is not required");
    }

    #[test]
    fn int_or_string_and_quantity_have_kube_format() {
        let c = core();
        for name in [
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
            "io.k8s.apimachinery.pkg.api.resource.Quantity",
        ] {
            assert_eq!(c.schemas[name]["type"], "string", "{name}");
            assert_eq!(c.schemas[name]["format"], "int-or-string", "{name}");
        }
    }

    #[test]
    fn subresource_kinds_are_included() {
        let apps = components(&in_group_version("apps", "v1").collect::<Vec<_>>());
        assert!(apps.schemas.contains_key("io.k8s.api.autoscaling.v1.Scale"));
        assert!(apps
            .schemas
            .contains_key("io.k8s.api.apps.v1.DeploymentList"));
        // Scale is not a resource of apps/v1: no ScaleList.
        assert!(!apps
            .schemas
            .contains_key("io.k8s.api.autoscaling.v1.ScaleList"));
    }
}
