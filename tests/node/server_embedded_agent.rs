//! `k3rs server` alone is a working single-node cluster: its embedded agent joins the server
//! over loopback, the node (with the control-plane role) becomes Ready on the supervised
//! containerd, pods run, and a Service's ClusterIP reaches them through the agent's proxy.
//! As root, inside a network namespace the test makes (loopback only, no route out), with the
//! images of `scripts/build-images.sh` imported from `<data-dir>/agent/images`. The server
//! tells systemd READY=1 (`NOTIFY_SOCKET`) only once that node is Ready.
//!
//! Missing prerequisites fail the test (`scripts/prereqs.sh test` installs them).

use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::json;
use crate::common::node_lab::{NodeLab, FAST_STATUS};
use serde_json::Value;

const NODE: &str = "server-1";

const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: httpd
        image: docker.io/library/busybox:1.35
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        command: [sh, -c, "mkdir -p /www && echo $POD_NAME > /www/index.html && exec httpd -f -p 80 -h /www"]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 8080, targetPort: 80}]
"#;

fn curl(url: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "2", url])
        .output()
        .expect("curl");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn a_server_alone_runs_pods_on_its_own_node() {
    NodeLab::run("embedded", scenario);
}

fn scenario(lab: &NodeLab) {
    // systemd's readiness protocol: the server says READY=1 only once its own node is Ready.
    // (Given to the server process alone, on each of its starts.)
    let notify_dir = tempfile::tempdir().unwrap();
    let notify_path = notify_dir.path().join("notify.sock");
    let (mut server, k) = lab.start_server(
        NODE,
        "127.0.0.1",
        &FAST_STATUS,
        &[("NOTIFY_SOCKET", notify_path.as_os_str())],
    );
    // Bound after the first process is gone, long before the new one's node can be Ready.
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut buf = [0u8; 4096];
    // `STATUS=` progress lines may come first (those sent before the socket was bound are
    // lost); the first message that is more than progress must be READY=1.
    let waited = std::time::Instant::now();
    let message = loop {
        assert!(
            waited.elapsed() < Duration::from_secs(120),
            "only STATUS= progress within 120 s"
        );
        let n = notify.recv(&mut buf).unwrap_or_else(|e| {
            panic!(
                "no READY=1 within 120 s: {e}\nserver log:\n{}",
                common::log_tail(&server.log_path(), 60)
            )
        });
        let message = String::from_utf8_lossy(&buf[..n]).into_owned();
        if !message.lines().all(|l| l.starts_with("STATUS=")) {
            break message;
        }
    };
    assert!(message.starts_with("READY=1\n"), "{message:?}");
    let at_ready = json(&k, &["get", "node", NODE]);
    assert!(
        at_ready["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        "READY=1 ({message:?}) came before the node was Ready: {}",
        at_ready["status"]
    );

    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let node = loop {
        server.assert_running();
        let out = k.run(&["get", "node", NODE, "-o", "json"]);
        let n: Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        let conditions = n["status"]["conditions"].as_array().cloned();
        if conditions
            .iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
        {
            break n;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the node is not Ready after 120 s: {conditions:?} {}\nserver log:\n{}",
            out.stderr,
            common::log_tail(&server.log_path(), 60)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["node-role.kubernetes.io/control-plane"], "true");
    assert_eq!(labels["kubernetes.io/hostname"], NODE);
    let nodes = json(&k, &["get", "nodes", "-o", "json"]);
    assert_eq!(nodes["items"].as_array().unwrap().len(), 1, "one node");

    k.ok_stdin(&["apply", "-f", "-"], Some(WEB));
    common::wait_for(
        "the Deployment to be available",
        Duration::from_secs(120),
        || {
            server.assert_running();
            let d = json(&k, &["get", "deployment", "web", "-o", "json"]);
            (d["status"]["availableReplicas"] == 2).then_some(())
        },
    );
    let pods = json(&k, &["get", "pods", "-l", "app=web", "-o", "json"]);
    let mut names = Vec::new();
    for p in pods["items"].as_array().unwrap() {
        let name = p["metadata"]["name"].as_str().unwrap().to_string();
        assert_eq!(p["spec"]["nodeName"], NODE);
        let url = format!("http://{}/", p["status"]["podIP"].as_str().unwrap());
        let page = common::wait_for(&format!("GET {url}"), Duration::from_secs(30), || {
            curl(&url)
        });
        assert_eq!(page, name);
        names.push(name);
    }

    // The Service's ClusterIP, through the embedded agent's iptables proxy: both pods answer
    // within a bounded number of requests. Cluster IPs are routed onto the pods' bridge, as a
    // node's default route would carry them (the lab has none).
    let out = Command::new("ip")
        .args(["route", "add", "10.43.0.0/16", "dev", "cni0"])
        .output();
    assert!(out.is_ok_and(|o| o.status.success()), "ip route add");
    let svc = json(&k, &["get", "service", "web", "-o", "json"]);
    let url = format!(
        "http://{}:8080/",
        svc["spec"]["clusterIP"].as_str().unwrap()
    );
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..60 {
        if let Some(page) = curl(&url) {
            seen.insert(page);
        }
        if seen.len() == names.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    names.sort();
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        names,
        "pages via {url}"
    );
}
