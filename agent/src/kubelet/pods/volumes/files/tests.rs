use serde_json::{json, Value};

use super::*;

fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns1", "uid": "u1", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "i",
            "resources": {"limits": {"memory": "64Mi"}}}]}}))
    .unwrap()
}

fn volume(v: Value) -> Volume {
    serde_json::from_value(v).unwrap()
}

struct Objects {
    pod: Pod,
    maps: BTreeMap<String, ConfigMap>,
    secrets: BTreeMap<String, Secret>,
    tokens: BTreeMap<usize, String>,
    alloc: Allocatable,
}

impl Objects {
    fn new() -> Objects {
        let m: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": "cfg"}, "data": {"a": "1", "b": "2"}}),
        )
        .unwrap();
        let s: Secret = serde_json::from_value(
            json!({"metadata": {"name": "sec"}, "data": {"pw": "aHVudGVyMg=="}}),
        )
        .unwrap();
        Objects {
            pod: pod(),
            maps: [("cfg".to_string(), m)].into(),
            secrets: [("sec".to_string(), s)].into(),
            tokens: [(0, "tok".to_string())].into(),
            alloc: Allocatable::default(),
        }
    }

    fn files(&self, v: Value) -> Result<Vec<File>, String> {
        let sources = Sources {
            pod: &self.pod,
            config_maps: &self.maps,
            secrets: &self.secrets,
            tokens: &self.tokens,
            host_ips: &[],
            pod_ips: &[],
            allocatable: &self.alloc,
        };
        volume_files(&volume(v), &sources)
            .expect("a file volume")
            .map_err(|e| e.to_string())
    }
}

fn f(path: &str, content: &str, mode: u32) -> File {
    File {
        path: path.into(),
        content: content.as_bytes().to_vec(),
        mode,
    }
}

#[test]
fn a_config_map_with_and_without_items() {
    let o = Objects::new();
    assert_eq!(
        o.files(json!({"name": "v", "configMap": {"name": "cfg"}})),
        Ok(vec![f("a", "1", 0o644), f("b", "2", 0o644)])
    );
    assert_eq!(
        o.files(json!({"name": "v", "configMap": {"name": "cfg", "defaultMode": 0o600,
            "items": [{"key": "b", "path": "dir/b.txt"}, {"key": "a", "path": "a", "mode": 0o400}]}})),
        Ok(vec![f("dir/b.txt", "2", 0o600), f("a", "1", 0o400)])
    );
    assert_eq!(
        o.files(json!({"name": "v", "configMap": {"name": "cfg", "items": [{"key": "zz", "path": "z"}]}})),
        Err("configmap references non-existent config key: zz".into())
    );
    assert_eq!(
        o.files(json!({"name": "v", "configMap": {"name": "nope"}})),
        Err("configmaps \"nope\" not found".into())
    );
    assert_eq!(
        o.files(json!({"name": "v", "configMap": {"name": "nope", "optional": true}})),
        Ok(vec![])
    );
}

#[test]
fn a_secret() {
    let o = Objects::new();
    assert_eq!(
        o.files(json!({"name": "v", "secret": {"secretName": "sec"}})),
        Ok(vec![f("pw", "hunter2", 0o644)])
    );
    assert_eq!(
        o.files(json!({"name": "v", "secret": {"secretName": "sec", "items": [{"key": "x", "path": "x"}]}})),
        Err("references non-existent secret key: x".into())
    );
}

#[test]
fn downward_api_files() {
    let o = Objects::new();
    assert_eq!(
        o.files(json!({"name": "v", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory",
                "divisor": "1Mi"}}]}})),
        Ok(vec![f("labels", "app=\"web\"", 0o644), f("mem", "64", 0o644)])
    );
}

#[test]
fn the_service_account_projection() {
    let o = Objects::new();
    // The admission plugin's kube-api-access volume, with the CA in a ConfigMap here.
    assert_eq!(
        o.files(
            json!({"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "cfg", "items": [{"key": "a", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}})
        ),
        Ok(vec![
            f("token", "tok", 0o644),
            f("ca.crt", "1", 0o644),
            f("namespace", "ns1", 0o644)
        ])
    );
    let empty = Volume {
        name: "e".into(),
        empty_dir: Some(Default::default()),
        ..Default::default()
    };
    let sources = Sources {
        pod: &o.pod,
        config_maps: &o.maps,
        secrets: &o.secrets,
        tokens: &o.tokens,
        host_ips: &[],
        pod_ips: &[],
        allocatable: &o.alloc,
    };
    assert!(volume_files(&empty, &sources).is_none());
}
