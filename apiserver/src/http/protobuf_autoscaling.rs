//! `autoscaling/v1` HorizontalPodAutoscaler in protobuf: `kubectl autoscale` posts it that
//! way (k8s.io/api `autoscaling/v1/generated.proto` field numbers). Only metadata and spec
//! are decoded: a create resets the status anyway.

use prost::Message;
use serde_json::{Map, Value};

use super::protobuf::{insert_opt, meta, non_empty, ObjectMeta};

#[derive(Clone, PartialEq, Message)]
struct CrossVersionObjectReference {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    api_version: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Spec {
    #[prost(message, optional, tag = "1")]
    scale_target_ref: Option<CrossVersionObjectReference>,
    #[prost(int32, optional, tag = "2")]
    min_replicas: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    max_replicas: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    target_cpu_utilization_percentage: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct HorizontalPodAutoscaler {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<Spec>,
}

/// An autoscaling/v1 HorizontalPodAutoscaler's JSON form (without apiVersion/kind).
pub fn hpa_v1(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let h = HorizontalPodAutoscaler::decode(raw)?;
    let mut o = Map::new();
    o.insert("metadata".into(), meta(h.metadata));
    if let Some(s) = h.spec {
        let mut spec = Map::new();
        if let Some(r) = s.scale_target_ref {
            let mut target = Map::new();
            insert_opt(&mut target, "apiVersion", non_empty(r.api_version));
            insert_opt(&mut target, "kind", non_empty(r.kind));
            insert_opt(&mut target, "name", non_empty(r.name));
            spec.insert("scaleTargetRef".into(), Value::Object(target));
        }
        insert_opt(&mut spec, "minReplicas", s.min_replicas);
        insert_opt(&mut spec, "maxReplicas", s.max_replicas);
        insert_opt(
            &mut spec,
            "targetCPUUtilizationPercentage",
            s.target_cpu_utilization_percentage,
        );
        o.insert("spec".into(), Value::Object(spec));
    }
    Ok(Value::Object(o))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_what_kubectl_autoscale_sends() {
        let h = HorizontalPodAutoscaler {
            metadata: Some(ObjectMeta {
                name: Some("web".into()),
                namespace: Some(String::new()),
                ..Default::default()
            }),
            spec: Some(Spec {
                scale_target_ref: Some(CrossVersionObjectReference {
                    kind: Some("Deployment".into()),
                    name: Some("web".into()),
                    api_version: Some("apps/v1".into()),
                }),
                min_replicas: Some(2),
                max_replicas: Some(5),
                target_cpu_utilization_percentage: Some(60),
            }),
        };
        assert_eq!(
            hpa_v1(&h.encode_to_vec()).unwrap(),
            json!({"metadata": {"name": "web"}, "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}})
        );
        assert!(hpa_v1(&[0xff, 0xff]).is_err());
    }
}
