use super::*;
use crate::kubelet::plan::spec::containers;
use crate::kubelet::plan::spec::tests::pod;
use k3rs_apimachinery::quantity::Quantity;
use serde_json::{json, Value};

struct World {
    config_maps: BTreeMap<String, ConfigMap>,
    secrets: BTreeMap<String, Secret>,
    services: Vec<Service>,
    host_ips: Vec<String>,
    pod_ips: Vec<String>,
    allocatable: Allocatable,
}

fn world() -> World {
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cfg"},
        "data": {"LOG_LEVEL": "debug", "mode": "fast", "bad=key": "x", "with space": "ok"}}))
    .unwrap();
    // "s3cr3t" and "admin" in base64.
    let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "creds"},
        "data": {"password": "czNjcjN0", "user": "YWRtaW4="}}))
    .unwrap();
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "kubernetes", "namespace": "default"},
        "spec": {"clusterIP": "10.43.0.1", "ports": [{"name": "https", "port": 443}]}}))
    .unwrap();
    World {
        config_maps: [("cfg".to_string(), cm)].into(),
        secrets: [("creds".to_string(), secret)].into(),
        services: vec![svc],
        host_ips: vec!["192.0.2.10".into()],
        pod_ips: vec!["10.42.0.5".into()],
        allocatable: Allocatable {
            cpu: Quantity::parse("2").unwrap(),
            memory: Quantity::parse("4Gi").unwrap(),
            ephemeral_storage: Quantity::parse("10Gi").unwrap(),
        },
    }
}

fn env_of(container: Value, w: &World) -> Result<ContainerEnv, EnvError> {
    let mut c = json!({"name": "c", "image": "i"});
    crate::kubelet::plan::spec::tests::merge(&mut c, container);
    let p = pod(json!({"spec": {"enableServiceLinks": false, "containers": [c]}}));
    let inputs = EnvInputs {
        config_maps: &w.config_maps,
        secrets: &w.secrets,
        services: &w.services,
        host_ips: &w.host_ips,
        pod_ips: &w.pod_ips,
        allocatable: &w.allocatable,
    };
    container_env(&p, &containers(&p)[0], inputs)
}

/// The variables without the `kubernetes` Service's (always there).
fn own(e: &ContainerEnv) -> Vec<(&str, &str)> {
    e.vars
        .iter()
        .filter(|(k, _)| !k.starts_with("KUBERNETES_"))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[test]
fn values_expand_against_earlier_vars_and_services() {
    let e = env_of(
        json!({"env": [
            {"name": "A", "value": "a"},
            {"name": "B", "value": "$(A)-b"},
            {"name": "C", "value": "$(LATER) $(KUBERNETES_SERVICE_HOST) $$(A)"},
            {"name": "LATER", "value": "late"},
            {"name": "EMPTY"},
        ]}),
        &world(),
    )
    .unwrap();
    assert_eq!(
        own(&e),
        vec![
            ("A", "a"),
            ("B", "a-b"),
            ("C", "$(LATER) 10.43.0.1 $(A)"),
            ("LATER", "late"),
            ("EMPTY", "")
        ]
    );
}

#[test]
fn field_and_resource_refs() {
    let e = env_of(
        json!({"resources": {"requests": {"cpu": "250m"}, "limits": {"memory": "64Mi"}},
        "env": [
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
            {"name": "CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}},
            {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}},
        ]}),
        &world(),
    )
    .unwrap();
    assert_eq!(
        own(&e),
        vec![
            ("POD", "web"),
            ("NODE", "n1"),
            ("IP", "10.42.0.5"),
            ("HOST", "192.0.2.10"),
            ("CPU_M", "250"),
            ("CPU_LIMIT", "2"),
            ("MEM_MI", "64")
        ]
    );
}

#[test]
fn config_map_and_secret_keys() {
    let e = env_of(
        json!({"env": [
            {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "LOG_LEVEL"}}},
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
            {"name": "OPT1", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": true}}},
            {"name": "OPT2", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope", "optional": true}}},
        ]}),
        &world(),
    )
    .unwrap();
    assert_eq!(own(&e), vec![("LEVEL", "debug"), ("PW", "s3cr3t")]);
}

#[test]
fn missing_sources_are_config_errors_with_upstream_messages() {
    let w = world();
    let err = |env: Value| env_of(json!({"env": [env]}), &w).unwrap_err();
    let e =
        err(json!({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}));
    assert_eq!(
        e.waiting(),
        Waiting::new("CreateContainerConfigError", "configmap \"nope\" not found")
    );
    let e =
        err(json!({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}));
    assert_eq!(
        e.to_string(),
        "couldn't find key k in ConfigMap default/cfg"
    );
    let e = err(json!({"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}));
    assert_eq!(e.to_string(), "secret \"nope\" not found");
    let e = err(json!({"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "k"}}}));
    assert_eq!(e.to_string(), "couldn't find key k in Secret default/creds");
    let e = env_of(json!({"envFrom": [{"configMapRef": {"name": "nope"}}]}), &w).unwrap_err();
    assert_eq!(e.to_string(), "configmap \"nope\" not found");
    let e = env_of(json!({"envFrom": [{"secretRef": {"name": "nope"}}]}), &w).unwrap_err();
    assert_eq!(e.to_string(), "secret \"nope\" not found");
}

#[test]
fn env_from_with_prefix_invalid_keys_and_env_overriding() {
    let e = env_of(
        json!({
            "envFrom": [
                {"configMapRef": {"name": "cfg"}},
                {"prefix": "DB_", "secretRef": {"name": "creds"}},
                {"configMapRef": {"name": "nope", "optional": true}},
            ],
            "env": [{"name": "mode", "value": "slow"}, {"name": "U", "value": "$(DB_user)"}],
        }),
        &world(),
    )
    .unwrap();
    assert_eq!(
        own(&e),
        vec![
            ("LOG_LEVEL", "debug"),
            ("mode", "slow"),
            ("with space", "ok"),
            ("DB_password", "s3cr3t"),
            ("DB_user", "admin"),
            ("U", "admin")
        ]
    );
    assert_eq!(
        e.invalid_keys,
        vec!["Keys [bad=key] from the EnvFrom configMap default/cfg were skipped since they are considered invalid environment variable names."]
    );
}

#[test]
fn container_vars_shadow_service_vars() {
    let e = env_of(
        json!({"env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "mine"}]}),
        &world(),
    )
    .unwrap();
    let hosts: Vec<&(String, String)> = e
        .vars
        .iter()
        .filter(|(k, _)| k == "KUBERNETES_SERVICE_HOST")
        .collect();
    assert_eq!(
        hosts,
        vec![&("KUBERNETES_SERVICE_HOST".to_string(), "mine".to_string())]
    );
    assert_eq!(e.vars.len(), 8);
}

#[test]
fn command_and_args_expand() {
    let c: Container = serde_json::from_value(json!({"name": "c",
        "command": ["sh", "-c", "echo $(GREETING) $$(GREETING) $(MISSING)"],
        "args": ["$(GREETING)"]}))
    .unwrap();
    let vars = vec![("GREETING".to_string(), "hello".to_string())];
    assert_eq!(
        expand_command(&c, &vars),
        (
            vec![
                "sh".to_string(),
                "-c".to_string(),
                "echo hello $(GREETING) $(MISSING)".to_string()
            ],
            vec!["hello".to_string()]
        )
    );
}

#[test]
fn env_var_names() {
    assert!(is_env_var_name("PATH"));
    assert!(is_env_var_name("1st.value-x"));
    assert!(!is_env_var_name(""));
    assert!(!is_env_var_name("a=b"));
    assert!(!is_env_var_name("tab\there"));
    assert!(!is_env_var_name("héllo"));
}
