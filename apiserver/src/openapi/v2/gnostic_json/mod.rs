//! The Swagger 2.0 JSON document ↔ gnostic's messages, as gnostic's compiler maps them
//! (`openapi_v2.ParseDocument`, which kube-openapi uses to write the protobuf form): maps
//! become ordered `Named…` pairs, `x-…` keys vendor extensions, and free values (`default`,
//! `example`, `enum` entries, extensions) `Any`s holding YAML text.
//!
//! # Guarantees
//! - [`from_json`] refuses a key it does not model ([`Error::UnknownKey`]) instead of dropping
//!   it, so what is served as JSON is all in the protobuf form.
//! - [`to_json`] ∘ [`from_json`] is the identity on served documents, except for the values
//!   proto3 cannot tell from absent (`false`, `0`, `""`), which no served document carries.

mod decode;
mod encode;

pub use decode::from_json;
pub use encode::to_json;

/// Why a JSON document has no protobuf form (a bug in what is served, never user input:
/// custom resources' schemas are converted to the modelled subset first).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{at}: {key:?} is not part of the served Swagger 2.0 subset")]
    UnknownKey { at: String, key: String },
    #[error("{at}: expected {expected}")]
    Shape { at: String, expected: &'static str },
    #[error("{at}: a value as YAML")]
    Yaml {
        at: String,
        #[source]
        source: serde_norway::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::v2::gnostic::*;
    use prost::Message;
    use serde_json::json;
    use serde_json::Value;

    fn small() -> Value {
        json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": {
                "/api/v1/namespaces/{namespace}/pods/{name}": {
                    "parameters": [
                        {"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true, "description": "name of the Pod"},
                        {"name": "pretty", "in": "query", "type": "string", "uniqueItems": true},
                    ],
                    "patch": {
                        "consumes": ["application/merge-patch+json"],
                        "produces": ["application/json"],
                        "schemes": ["https"],
                        "tags": ["core_v1"],
                        "operationId": "patchCoreV1NamespacedPod",
                        "parameters": [
                            {"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
                            {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true},
                        ],
                        "responses": {
                            "200": {"description": "OK", "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.Pod"}},
                            "401": {"description": "Unauthorized"},
                        },
                        "x-kubernetes-action": "patch",
                        "x-kubernetes-group-version-kind": {"group": "", "kind": "Pod", "version": "v1"},
                    },
                },
            },
            "definitions": {
                "io.k8s.api.core.v1.Pod": {
                    "description": "Pod is a collection of containers.",
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "default": {}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "ports": {"type": "array", "items": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535}, "x-kubernetes-list-type": "set"},
                        "policy": {"type": "string", "enum": ["Always", "Never"], "default": "Always"},
                        "ratio": {"type": "number", "multipleOf": 0.5},
                        "free": {"x-kubernetes-preserve-unknown-fields": true},
                        "closed": {"type": "object", "additionalProperties": false},
                    },
                    "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
                },
            },
            "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header", "description": "Bearer Token authentication"}},
            "security": [{"BearerToken": []}],
        })
    }

    #[test]
    fn round_trip_through_protobuf_bytes() {
        let doc = small();
        let bytes = from_json(&doc).unwrap().encode_to_vec();
        let back = to_json(&Document::decode(bytes.as_slice()).unwrap()).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn fields_carry_gnostic_numbers_and_yaml_extensions() {
        let d = from_json(&small()).unwrap();
        let pod = &d.definitions.as_ref().unwrap().additional_properties[0];
        assert_eq!(pod.name, "io.k8s.api.core.v1.Pod");
        let pod = pod.value.as_ref().unwrap();
        assert_eq!(pod.r#type.as_ref().unwrap().value, ["object"]);
        assert_eq!(
            pod.vendor_extension[0].name,
            "x-kubernetes-group-version-kind"
        );
        assert_eq!(
            pod.vendor_extension[0].value.as_ref().unwrap().yaml,
            "- group: ''\n  kind: Pod\n  version: v1\n"
        );
        // Document.swagger is field 1, a string: tag byte 0x0a, then the length.
        let bytes = d.encode_to_vec();
        assert_eq!(&bytes[..5], b"\x0a\x032.0");
        let item = d.paths.unwrap().path[0].value.clone().unwrap();
        let Some(ParametersItemOneof::Parameter(p)) = &item.parameters[1].oneof else {
            panic!("a parameter")
        };
        assert!(matches!(
            &p.oneof,
            Some(ParameterOneof::NonBodyParameter(NonBodyParameter {
                oneof: Some(NonBodyParameterOneof::QueryParameterSubSchema(q))
            })) if q.name == "pretty" && q.unique_items
        ));
    }

    #[test]
    fn unmodelled_keys_are_refused_not_dropped() {
        let mut doc = small();
        doc["definitions"]["io.k8s.api.core.v1.Pod"]["nullable"] = json!(true);
        let e = from_json(&doc).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/definitions/io.k8s.api.core.v1.Pod: \"nullable\" is not part of the served Swagger 2.0 subset"
        );
        let mut doc = small();
        doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["parameters"][0]["in"] =
            json!("cookie");
        assert!(matches!(from_json(&doc), Err(Error::Shape { .. })));
    }
}
