//! Protobuf bodies of `kubectl create deployment|job|service|serviceaccount` (field numbers of
//! k8s.io/api's `generated.proto`). Only what those generators set is modelled; see
//! [`super::protobuf`] for the envelope and metadata.

use std::collections::BTreeMap;

use prost::Message;
use serde_json::{json, Map, Value};

use super::protobuf::{insert_opt, meta, non_empty, string_map, ObjectMeta};

#[derive(Clone, PartialEq, Message)]
pub struct IntOrString {
    #[prost(int64, optional, tag = "1")]
    r#type: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    int_val: Option<i32>,
    #[prost(string, optional, tag = "3")]
    str_val: Option<String>,
}

fn int_or_string(v: Option<IntOrString>) -> Option<Value> {
    let v = v?;
    Some(match v.r#type {
        Some(1) => json!(v.str_val.unwrap_or_default()),
        _ => json!(v.int_val.unwrap_or(0)),
    })
}

#[derive(Clone, PartialEq, Message)]
pub struct Quantity {
    #[prost(string, optional, tag = "1")]
    string: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct LabelSelectorRequirement {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    operator: Option<String>,
    #[prost(string, repeated, tag = "3")]
    values: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct LabelSelector {
    #[prost(btree_map = "string, string", tag = "1")]
    match_labels: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "2")]
    match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ContainerPort {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    host_port: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    container_port: Option<i32>,
    #[prost(string, optional, tag = "4")]
    protocol: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct EnvVar {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ResourceRequirements {
    #[prost(btree_map = "string, message", tag = "1")]
    limits: BTreeMap<String, Quantity>,
    #[prost(btree_map = "string, message", tag = "2")]
    requests: BTreeMap<String, Quantity>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Container {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    image: Option<String>,
    #[prost(string, repeated, tag = "3")]
    command: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    args: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    ports: Vec<ContainerPort>,
    #[prost(message, repeated, tag = "7")]
    env: Vec<EnvVar>,
    #[prost(message, optional, tag = "8")]
    resources: Option<ResourceRequirements>,
    #[prost(string, optional, tag = "14")]
    image_pull_policy: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct PodSpec {
    #[prost(message, repeated, tag = "20")]
    init_containers: Vec<Container>,
    #[prost(message, repeated, tag = "2")]
    containers: Vec<Container>,
    #[prost(string, optional, tag = "3")]
    restart_policy: Option<String>,
    #[prost(map = "string, string", tag = "7")]
    node_selector: std::collections::HashMap<String, String>,
    #[prost(string, optional, tag = "8")]
    service_account_name: Option<String>,
    #[prost(string, optional, tag = "10")]
    node_name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct PodTemplateSpec {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<PodSpec>,
}

#[derive(Clone, PartialEq, Message)]
pub struct RollingUpdateDeployment {
    #[prost(message, optional, tag = "1")]
    max_unavailable: Option<IntOrString>,
    #[prost(message, optional, tag = "2")]
    max_surge: Option<IntOrString>,
}

#[derive(Clone, PartialEq, Message)]
pub struct DeploymentStrategy {
    #[prost(string, optional, tag = "1")]
    r#type: Option<String>,
    #[prost(message, optional, tag = "2")]
    rolling_update: Option<RollingUpdateDeployment>,
}

#[derive(Clone, PartialEq, Message)]
pub struct DeploymentSpec {
    #[prost(int32, optional, tag = "1")]
    replicas: Option<i32>,
    #[prost(message, optional, tag = "2")]
    selector: Option<LabelSelector>,
    #[prost(message, optional, tag = "3")]
    template: Option<PodTemplateSpec>,
    #[prost(message, optional, tag = "4")]
    strategy: Option<DeploymentStrategy>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Deployment {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<DeploymentSpec>,
}

/// batch/v1 JobSpec: the scalar fields and the pod template (what `kubectl create job`, also
/// `--from=cronjob/…`, sends for the templates this model covers).
#[derive(Clone, PartialEq, Message)]
pub struct JobSpec {
    #[prost(int32, optional, tag = "1")]
    parallelism: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    completions: Option<i32>,
    #[prost(int64, optional, tag = "3")]
    active_deadline_seconds: Option<i64>,
    #[prost(message, optional, tag = "4")]
    selector: Option<LabelSelector>,
    #[prost(bool, optional, tag = "5")]
    manual_selector: Option<bool>,
    #[prost(message, optional, tag = "6")]
    template: Option<PodTemplateSpec>,
    #[prost(int32, optional, tag = "7")]
    backoff_limit: Option<i32>,
    #[prost(int32, optional, tag = "8")]
    ttl_seconds_after_finished: Option<i32>,
    #[prost(string, optional, tag = "9")]
    completion_mode: Option<String>,
    #[prost(bool, optional, tag = "10")]
    suspend: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Job {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<JobSpec>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ServicePort {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    protocol: Option<String>,
    #[prost(int32, optional, tag = "3")]
    port: Option<i32>,
    #[prost(message, optional, tag = "4")]
    target_port: Option<IntOrString>,
    #[prost(int32, optional, tag = "5")]
    node_port: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ServiceSpec {
    #[prost(message, repeated, tag = "1")]
    ports: Vec<ServicePort>,
    #[prost(btree_map = "string, string", tag = "2")]
    selector: BTreeMap<String, String>,
    #[prost(string, optional, tag = "3")]
    cluster_ip: Option<String>,
    #[prost(string, optional, tag = "4")]
    r#type: Option<String>,
    #[prost(string, optional, tag = "10")]
    external_name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Service {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<ServiceSpec>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ServiceAccount {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(bool, optional, tag = "4")]
    automount_service_account_token: Option<bool>,
}

pub(super) fn selector(s: LabelSelector) -> Value {
    let mut o = Map::new();
    insert_opt(&mut o, "matchLabels", string_map(&s.match_labels));
    if !s.match_expressions.is_empty() {
        let exprs: Vec<Value> = s
            .match_expressions
            .into_iter()
            .map(|e| json!({"key": e.key.unwrap_or_default(), "operator": e.operator.unwrap_or_default(), "values": e.values}))
            .collect();
        o.insert("matchExpressions".into(), json!(exprs));
    }
    Value::Object(o)
}

fn quantities(m: BTreeMap<String, Quantity>) -> Option<Value> {
    (!m.is_empty()).then(|| {
        m.into_iter()
            .map(|(k, q)| (k, json!(q.string.unwrap_or_default())))
            .collect::<Map<_, _>>()
            .into()
    })
}

fn container(c: Container) -> Value {
    let mut o = Map::new();
    insert_opt(&mut o, "name", non_empty(c.name));
    insert_opt(&mut o, "image", non_empty(c.image));
    if !c.command.is_empty() {
        o.insert("command".into(), json!(c.command));
    }
    if !c.args.is_empty() {
        o.insert("args".into(), json!(c.args));
    }
    if !c.ports.is_empty() {
        let ports: Vec<Value> = c
            .ports
            .into_iter()
            .map(|p| {
                let mut po = Map::new();
                insert_opt(&mut po, "name", non_empty(p.name));
                insert_opt(&mut po, "hostPort", p.host_port.filter(|p| *p != 0));
                insert_opt(&mut po, "containerPort", p.container_port);
                insert_opt(&mut po, "protocol", non_empty(p.protocol));
                Value::Object(po)
            })
            .collect();
        o.insert("ports".into(), json!(ports));
    }
    if !c.env.is_empty() {
        let env: Vec<Value> = c
            .env
            .into_iter()
            .map(|e| json!({"name": e.name.unwrap_or_default(), "value": e.value.unwrap_or_default()}))
            .collect();
        o.insert("env".into(), json!(env));
    }
    if let Some(r) = c.resources {
        let mut ro = Map::new();
        insert_opt(&mut ro, "limits", quantities(r.limits));
        insert_opt(&mut ro, "requests", quantities(r.requests));
        o.insert("resources".into(), Value::Object(ro));
    }
    insert_opt(&mut o, "imagePullPolicy", non_empty(c.image_pull_policy));
    Value::Object(o)
}

fn pod_spec(s: PodSpec) -> Value {
    let mut o = Map::new();
    o.insert(
        "containers".into(),
        json!(s.containers.into_iter().map(container).collect::<Vec<_>>()),
    );
    if !s.init_containers.is_empty() {
        o.insert(
            "initContainers".into(),
            json!(s
                .init_containers
                .into_iter()
                .map(container)
                .collect::<Vec<_>>()),
        );
    }
    insert_opt(&mut o, "restartPolicy", non_empty(s.restart_policy));
    if !s.node_selector.is_empty() {
        o.insert("nodeSelector".into(), json!(s.node_selector));
    }
    insert_opt(
        &mut o,
        "serviceAccountName",
        non_empty(s.service_account_name),
    );
    insert_opt(&mut o, "nodeName", non_empty(s.node_name));
    Value::Object(o)
}

pub fn deployment(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let d = Deployment::decode(raw)?;
    let mut out = json!({"metadata": meta(d.metadata)});
    if let Some(s) = d.spec {
        let mut o = Map::new();
        insert_opt(&mut o, "replicas", s.replicas);
        insert_opt(&mut o, "selector", s.selector.map(selector));
        insert_opt(&mut o, "template", s.template.map(template));
        if let Some(st) = s.strategy {
            let mut so = Map::new();
            insert_opt(&mut so, "type", non_empty(st.r#type));
            if let Some(ru) = st.rolling_update {
                let mut ro = Map::new();
                insert_opt(&mut ro, "maxUnavailable", int_or_string(ru.max_unavailable));
                insert_opt(&mut ro, "maxSurge", int_or_string(ru.max_surge));
                so.insert("rollingUpdate".into(), Value::Object(ro));
            }
            o.insert("strategy".into(), Value::Object(so));
        }
        out["spec"] = Value::Object(o);
    }
    Ok(out)
}

fn template(t: PodTemplateSpec) -> Value {
    let mut to = Map::new();
    to.insert("metadata".into(), meta(t.metadata));
    insert_opt(&mut to, "spec", t.spec.map(pod_spec));
    Value::Object(to)
}

pub fn job(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let j = Job::decode(raw)?;
    let mut out = json!({"metadata": meta(j.metadata)});
    if let Some(s) = j.spec {
        let mut o = Map::new();
        insert_opt(&mut o, "parallelism", s.parallelism);
        insert_opt(&mut o, "completions", s.completions);
        insert_opt(&mut o, "activeDeadlineSeconds", s.active_deadline_seconds);
        insert_opt(&mut o, "selector", s.selector.map(selector));
        insert_opt(&mut o, "manualSelector", s.manual_selector);
        insert_opt(&mut o, "template", s.template.map(template));
        insert_opt(&mut o, "backoffLimit", s.backoff_limit);
        insert_opt(
            &mut o,
            "ttlSecondsAfterFinished",
            s.ttl_seconds_after_finished,
        );
        insert_opt(&mut o, "completionMode", non_empty(s.completion_mode));
        insert_opt(&mut o, "suspend", s.suspend);
        out["spec"] = Value::Object(o);
    }
    Ok(out)
}

pub fn service(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let s = Service::decode(raw)?;
    let mut out = json!({"metadata": meta(s.metadata)});
    if let Some(spec) = s.spec {
        let mut o = Map::new();
        if !spec.ports.is_empty() {
            let ports: Vec<Value> = spec
                .ports
                .into_iter()
                .map(|p| {
                    let mut po = Map::new();
                    insert_opt(&mut po, "name", non_empty(p.name));
                    insert_opt(&mut po, "protocol", non_empty(p.protocol));
                    insert_opt(&mut po, "port", p.port);
                    insert_opt(&mut po, "targetPort", int_or_string(p.target_port));
                    insert_opt(&mut po, "nodePort", p.node_port.filter(|p| *p != 0));
                    Value::Object(po)
                })
                .collect();
            o.insert("ports".into(), json!(ports));
        }
        insert_opt(&mut o, "selector", string_map(&spec.selector));
        insert_opt(&mut o, "clusterIP", non_empty(spec.cluster_ip));
        insert_opt(&mut o, "type", non_empty(spec.r#type));
        insert_opt(&mut o, "externalName", non_empty(spec.external_name));
        out["spec"] = Value::Object(o);
    }
    Ok(out)
}

pub fn service_account(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let sa = ServiceAccount::decode(raw)?;
    let mut out = json!({"metadata": meta(sa.metadata)});
    if let Some(a) = sa.automount_service_account_token {
        out["automountServiceAccountToken"] = json!(a);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_create_deployment_shape() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let d = Deployment {
            metadata: Some(ObjectMeta {
                name: Some("web".into()),
                labels: labels.clone(),
                ..Default::default()
            }),
            spec: Some(DeploymentSpec {
                replicas: Some(2),
                selector: Some(LabelSelector {
                    match_labels: labels.clone(),
                    ..Default::default()
                }),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels,
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: Some("nginx".into()),
                            image: Some("nginx:1.27".into()),
                            resources: Some(ResourceRequirements::default()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                }),
                strategy: Some(DeploymentStrategy::default()),
            }),
        };
        let v = deployment(&d.encode_to_vec()).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "resources": {}}]}},
                    "strategy": {}}})
        );
    }

    #[test]
    fn service_ports_with_named_and_numbered_targets() {
        let s = Service {
            metadata: Some(ObjectMeta {
                name: Some("s".into()),
                ..Default::default()
            }),
            spec: Some(ServiceSpec {
                ports: vec![ServicePort {
                    name: Some("80-8080".into()),
                    protocol: Some("TCP".into()),
                    port: Some(80),
                    target_port: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(8080),
                        str_val: Some(String::new()),
                    }),
                    node_port: Some(0),
                }],
                r#type: Some("ClusterIP".into()),
                ..Default::default()
            }),
        };
        let v = service(&s.encode_to_vec()).unwrap();
        assert_eq!(
            v["spec"],
            json!({"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}], "type": "ClusterIP"})
        );
    }
}
