//! Auto-deploying manifests end to end: files dropped into `<data-dir>/server/manifests` of a
//! real `k3rs server`, checked with real `kubectl`. The server reads the directory at start
//! and every 15 s, so each wait below allows several passes.
//!
//! One scenario, in order: files appear in the cluster (Namespace first, objects in it,
//! default namespace `kube-system`); a file with a `.skip` is never applied; a broken file and
//! a file of an unknown kind produce `ApplyManifestFailed` Events without stopping the
//! others; an edit updates a ConfigMap value and a Deployment's replicas and prunes the
//! object the file dropped; a `.skip` added later prunes that file's objects; removing a file
//! prunes everything it created, its Namespace included; and after a restart the records are
//! still there (a file removed while the server was down is pruned) and nothing pruned comes
//! back.

use std::path::Path;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(90);

fn a_yaml(color: &str, replicas: u32, with_secret: bool) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: deploy-demo\n\
         data:\n  color: {color}\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: deploy-demo\n\
         spec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n\
         \x20   metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n\
         \x20     - name: web\n        image: registry.invalid/web:1\n---\n\
         # the Namespace comes last in the file but is applied first\n\
         apiVersion: v1\nkind: Namespace\nmetadata:\n  name: deploy-demo\n"
    );
    if with_secret {
        text.push_str(
            "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: extra\n  namespace: deploy-demo\n\
             stringData:\n  k: v\n",
        );
    }
    text
}

fn config_map(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  from: file\n")
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// The object as JSON, `None` when it does not exist.
fn get(k: &Kubectl, args: &[&str]) -> Option<Value> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    let out = k.run(&all);
    if out.ok {
        Some(serde_json::from_str(&out.stdout).unwrap())
    } else {
        assert!(out.stderr.contains("NotFound"), "kubectl {all:?}: {out:?}");
        None
    }
}

/// Waits until `check` holds, polling every half second.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    common::wait_for(what, WAIT, || {
        let ok = check();
        if !ok {
            std::thread::sleep(Duration::from_millis(500));
        }
        ok.then_some(())
    });
}

fn failure_events(k: &Kubectl) -> Vec<String> {
    let events = get(k, &["events", "-n", "kube-system"]).unwrap();
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "ApplyManifestFailed")
        .map(|e| {
            assert_eq!(e["type"], "Warning");
            assert_eq!(e["source"]["component"], "k3rs-deploy");
            e["message"].as_str().unwrap().to_string()
        })
        .collect()
}

fn records(k: &Kubectl) -> Vec<String> {
    let list = get(
        k,
        &[
            "configmaps",
            "-n",
            "kube-system",
            "-l",
            "deploy.k3rs.io/manifest-record=true",
        ],
    )
    .unwrap();
    let mut sources: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cm| cm["data"]["source"].as_str().unwrap().to_string())
        .collect();
    sources.sort();
    sources
}

#[test]
fn manifests_are_applied_updated_skipped_and_pruned() {
    let (mut server, k) = Kubectl::start_server(common::k3rs::AS_BARE_API);
    let dir = server.data_dir().join("server/manifests");
    std::fs::create_dir_all(&dir).unwrap();

    write(&dir, "a.yaml", &a_yaml("blue", 1, true));
    write(&dir, "keeper.yaml", &config_map("keeper"));
    write(&dir, "later-skipped.yml", &config_map("later-skipped"));
    write(&dir, "never.yaml", &config_map("never"));
    write(&dir, "never.yaml.skip", "");
    write(&dir, "broken.yaml", "apiVersion: v1\nkind: [unclosed\n");
    write(
        &dir,
        "unknown.json",
        r#"{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}"#,
    );

    // Applied, the broken files notwithstanding.
    eventually("a.yaml's objects", || {
        get(&k, &["secret", "extra", "-n", "deploy-demo"]).is_some()
            && get(&k, &["configmap", "later-skipped", "-n", "kube-system"]).is_some()
    });
    let settings = get(
        &k,
        &[
            "configmap",
            "settings",
            "-n",
            "deploy-demo",
            "--show-managed-fields",
        ],
    )
    .unwrap();
    assert_eq!(settings["data"]["color"], "blue");
    let managers: Vec<&str> = settings["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["k3rs-deploy"]);
    assert_eq!(
        settings["metadata"]["managedFields"][0]["operation"],
        "Apply"
    );
    let web = get(&k, &["deployment", "web", "-n", "deploy-demo"]).unwrap();
    assert_eq!(web["spec"]["replicas"], 1);
    // No namespace in the file: kube-system, as k3s.
    assert!(get(&k, &["configmap", "keeper", "-n", "kube-system"]).is_some());
    assert!(get(&k, &["configmap", "never", "-n", "kube-system"]).is_none());
    eventually("ApplyManifestFailed events for both bad files", || {
        let messages = failure_events(&k);
        messages.iter().any(|m| m.contains("\"broken.yaml\""))
            && messages.iter().any(|m| {
                m.contains("\"unknown.json\"")
                    && m.contains("Widget")
                    && m.contains("example.com/v1")
            })
    });

    // An edit updates and prunes; a .skip added later prunes that file's objects.
    write(&dir, "a.yaml", &a_yaml("green", 2, false));
    write(&dir, "later-skipped.yml.skip", "");
    eventually("the edit applied and the dropped Secret pruned", || {
        get(&k, &["configmap", "settings", "-n", "deploy-demo"])
            .is_some_and(|cm| cm["data"]["color"] == "green")
            && get(&k, &["deployment", "web", "-n", "deploy-demo"])
                .is_some_and(|d| d["spec"]["replicas"] == 2)
            && get(&k, &["secret", "extra", "-n", "deploy-demo"]).is_none()
    });
    eventually("the skipped file's ConfigMap pruned", || {
        get(&k, &["configmap", "later-skipped", "-n", "kube-system"]).is_none()
    });
    // Each bad file was reported once, not once per pass.
    let messages = failure_events(&k);
    assert_eq!(
        messages
            .iter()
            .filter(|m| m.contains("\"broken.yaml\""))
            .count(),
        1,
        "{messages:?}"
    );

    // Removing the file prunes all it created, its Namespace last.
    std::fs::remove_file(dir.join("a.yaml")).unwrap();
    eventually("a.yaml's Namespace and objects pruned", || {
        get(&k, &["namespace", "deploy-demo"]).is_none()
    });
    assert!(!records(&k).contains(&"a.yaml".to_string()));
    assert!(records(&k).contains(&"keeper.yaml".to_string()));

    // A file removed while the server is down is pruned after the restart: the record
    // outlived the process.
    server.kill();
    std::fs::remove_file(dir.join("keeper.yaml")).unwrap();
    server.relaunch();
    server.wait_ready();
    eventually("keeper.yaml's ConfigMap pruned after the restart", || {
        k.run(&["get", "namespace", "default"]).ok
            && get(&k, &["configmap", "keeper", "-n", "kube-system"]).is_none()
    });
    // That pass saw every file: what was pruned before stays pruned.
    assert!(get(&k, &["namespace", "deploy-demo"]).is_none());
    assert!(get(&k, &["configmap", "later-skipped", "-n", "kube-system"]).is_none());
    assert!(get(&k, &["configmap", "never", "-n", "kube-system"]).is_none());
    assert_eq!(records(&k), ["unknown.json"]);
}
