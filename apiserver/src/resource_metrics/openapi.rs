//! The OpenAPI schemas of `metrics.k8s.io/v1beta1` (metrics-server's types, which
//! k8s-openapi does not carry), named as upstream names them
//! (`io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics`).

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

const API_VERSION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

fn usage(gen: &mut SchemaGenerator, description: &str) -> Schema {
    let quantity = gen.subschema_for::<Quantity>();
    json_schema!({
        "description": description,
        "type": "object",
        "additionalProperties": quantity,
    })
}

/// A metrics kind: `apiVersion`, `kind`, `metadata`, `timestamp`, `window` and its own
/// `field` (required, like `timestamp` and `window`).
fn metrics_kind(
    gen: &mut SchemaGenerator,
    description: &str,
    field: &str,
    schema: Schema,
) -> Schema {
    let metadata = gen.subschema_for::<ObjectMeta>();
    let time = gen.subschema_for::<Time>();
    let mut out = json_schema!({
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": {"description": API_VERSION, "type": "string"},
            "kind": {"description": KIND, "type": "string"},
            "metadata": metadata,
            "timestamp": time,
            "window": {"type": "string"},
        },
        "required": ["timestamp", "window", field],
    });
    if let Some(props) = out.get_mut("properties").and_then(|p| p.as_object_mut()) {
        props.insert(field.to_string(), schema.into());
    }
    out
}

/// `NodeMetrics`: the resource usage of a node.
#[derive(Debug)]
pub struct NodeMetrics;

impl JsonSchema for NodeMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics".into()
    }

    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        let usage = usage(gen, "The memory usage is the memory working set.");
        metrics_kind(
            gen,
            "NodeMetrics sets resource usage metrics of a node.",
            "usage",
            usage,
        )
    }
}

/// `ContainerMetrics`: one container's usage in a PodMetrics.
#[derive(Debug)]
pub struct ContainerMetrics;

impl JsonSchema for ContainerMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.ContainerMetrics".into()
    }

    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        let usage = usage(gen, "The memory usage is the memory working set.");
        json_schema!({
            "description": "ContainerMetrics sets resource usage metrics of a container.",
            "type": "object",
            "properties": {
                "name": {"description": "Container name corresponding to the one from pod.spec.containers.", "type": "string"},
                "usage": usage,
            },
            "required": ["name", "usage"],
        })
    }
}

/// `PodMetrics`: the resource usage of a pod's containers.
#[derive(Debug)]
pub struct PodMetrics;

impl JsonSchema for PodMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics".into()
    }

    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        let container = gen.subschema_for::<ContainerMetrics>();
        let containers = json_schema!({
            "description": "Metrics for all containers are collected within the same time window.",
            "type": "array",
            "items": container,
        });
        metrics_kind(
            gen,
            "PodMetrics sets resource usage metrics of a pod.",
            "containers",
            containers,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::schemars::generate::SchemaSettings;
    use serde_json::{json, Value};

    const REF: &str = "#/components/schemas/";

    #[test]
    fn kinds_reference_the_meta_types_and_require_their_fields() {
        let mut gen = SchemaGenerator::new(SchemaSettings::openapi3());
        let node: Value = NodeMetrics::json_schema(&mut gen).into();
        assert_eq!(node["required"], json!(["timestamp", "window", "usage"]));
        assert_eq!(
            node["properties"]["usage"]["additionalProperties"]["$ref"],
            format!("{REF}io.k8s.apimachinery.pkg.api.resource.Quantity")
        );
        assert_eq!(
            node["properties"]["metadata"]["$ref"],
            format!("{REF}io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        );
        let pod: Value = PodMetrics::json_schema(&mut gen).into();
        assert_eq!(
            pod["required"],
            json!(["timestamp", "window", "containers"])
        );
        assert_eq!(
            pod["properties"]["containers"]["items"]["$ref"],
            format!("{REF}io.k8s.metrics.pkg.apis.metrics.v1beta1.ContainerMetrics")
        );
        assert_eq!(pod["properties"]["window"]["type"], "string");
    }
}
