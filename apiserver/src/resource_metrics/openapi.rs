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

fn common(gen: &mut SchemaGenerator) -> (Schema, Schema) {
    (
        gen.subschema_for::<ObjectMeta>(),
        gen.subschema_for::<Time>(),
    )
}

/// `NodeMetrics`: the resource usage of a node.
#[derive(Debug)]
pub struct NodeMetrics;

impl JsonSchema for NodeMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics".into()
    }

    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        let (metadata, time) = common(gen);
        let usage = usage(gen, "The memory usage is the memory working set.");
        json_schema!({
            "description": "NodeMetrics sets resource usage metrics of a node.",
            "type": "object",
            "properties": {
                "apiVersion": {"description": API_VERSION, "type": "string"},
                "kind": {"description": KIND, "type": "string"},
                "metadata": metadata,
                "timestamp": time,
                "window": {"type": "string"},
                "usage": usage,
            },
            "required": ["timestamp", "window", "usage"],
        })
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
        let (metadata, time) = common(gen);
        let container = gen.subschema_for::<ContainerMetrics>();
        json_schema!({
            "description": "PodMetrics sets resource usage metrics of a pod.",
            "type": "object",
            "properties": {
                "apiVersion": {"description": API_VERSION, "type": "string"},
                "kind": {"description": KIND, "type": "string"},
                "metadata": metadata,
                "timestamp": time,
                "window": {"type": "string"},
                "containers": {
                    "description": "Metrics for all containers are collected within the same time window.",
                    "type": "array",
                    "items": container,
                },
            },
            "required": ["timestamp", "window", "containers"],
        })
    }
}
