//! Two real nodes, pod network by host-gw (`--flannel-backend host-gw`): `k3rs server` (with its embedded agent) in one
//! network namespace and `k3rs agent` joined by token in another, the two joined by a veth
//! pair the test makes (nothing routed out). Each agent routes the other node's pod CIDR via
//! its InternalIP; a pod on the server's node reaches a Service whose only endpoint is on the
//! agent's node, a pod on one node is reached directly from the other, and a DaemonSet runs
//! on both.
//!
//! As root, with the images of `scripts/build-images.sh`; missing prerequisites fail the test.

use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::json;
use crate::common::node_lab::NodeLab;
use crate::common::two_node_lab::{curl, run, running_pod, TwoNodeLab, TwoNodes, A, A_IP, B, B_IP};
use serde_json::Value;

/// Both nodes run host-gw (the default is vxlan, `tests/node/vxlan.rs`).
const HOST_GW: &[&str] = &["--flannel-backend", "host-gw"];

const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/hostname: gw-b}
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: docker.io/library/busybox:1.35
        command: [sh, -c, "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 80 -h /www"]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 8080, targetPort: 80}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: everywhere}
spec:
  selector: {matchLabels: {app: everywhere}}
  template:
    metadata: {labels: {app: everywhere}}
    spec:
      terminationGracePeriodSeconds: 1
      tolerations: [{operator: Exists}]
      containers:
      - name: sleep
        image: docker.io/library/busybox:1.35
        command: [sleep, "3600"]
"#;

fn client(service_ip: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: client}}
spec:
  nodeSelector: {{kubernetes.io/hostname: gw-a}}
  terminationGracePeriodSeconds: 1
  containers:
  - name: fetch
    image: docker.io/library/busybox:1.35
    command:
    - sh
    - -c
    - |
      mkdir -p /www && httpd -p 80 -h /www
      while true; do
        printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 {service_ip} 8080 > /www/out.tmp 2>&1
        mv /www/out.tmp /www/out
        sleep 1
      done
"#
    )
}

#[test]
fn pods_reach_services_and_pods_on_the_other_node() {
    let lab = TwoNodeLab::new("gw");
    lab.a.inside(|| scenario(&lab));
}

fn scenario(lab: &TwoNodeLab) {
    let TwoNodes {
        server,
        k,
        mut agent,
        node_a,
        node_b,
    } = lab.start_with(HOST_GW, HOST_GW);
    let mut server = server;
    let (lab_a, lab_b) = (&lab.a, &lab.b);
    let cidr = |n: &Value| {
        n["spec"]["podCIDR"]
            .as_str()
            .expect("a pod CIDR")
            .to_string()
    };
    let (cidr_a, cidr_b) = (cidr(&node_a), cidr(&node_b));
    assert_ne!(cidr_a, cidr_b);

    // Each node routes the other's pod CIDR via its InternalIP, with the agent's protocol.
    let routes = |lab: &NodeLab| {
        run(Command::new("ip").args(["-n", &lab.netns, "route", "show", "proto", "75"]))
    };
    common::wait_for("the host-gw routes", Duration::from_secs(30), || {
        let (ra, rb) = (routes(lab_a), routes(lab_b));
        (ra.contains(&format!("{cidr_b} via {B_IP}"))
            && rb.contains(&format!("{cidr_a} via {A_IP}")))
        .then_some(())
    });
    assert!(!routes(lab_a).contains("default"), "no default route");

    k.ok_stdin(&["apply", "-f", "-"], Some(WEB));
    let svc = json(&k, &["get", "service", "web", "-o", "json"]);
    let service_ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    k.ok_stdin(&["apply", "-f", "-"], Some(&client(&service_ip)));
    let web = common::wait_for(
        "the web pod running on gw-b",
        Duration::from_secs(120),
        || {
            server.assert_running();
            agent.assert_running();
            running_pod(&k, "web-")
        },
    );
    assert_eq!(web["spec"]["nodeName"], B);
    let web_name = web["metadata"]["name"].as_str().unwrap().to_string();
    let web_ip = web["status"]["podIP"].as_str().unwrap().to_string();
    // A pod on gw-b, straight from gw-a (host → route → other node's bridge).
    let page = common::wait_for(
        &format!("GET http://{web_ip}/ from gw-a"),
        Duration::from_secs(30),
        || curl(&format!("http://{web_ip}/")),
    );
    assert_eq!(page, web_name);
    // A pod on gw-a reaches the Service whose only endpoint is on gw-b.
    let client = common::wait_for(
        "the client pod running on gw-a",
        Duration::from_secs(120),
        || running_pod(&k, "client"),
    );
    assert_eq!(client["spec"]["nodeName"], A);
    let client_ip = client["status"]["podIP"].as_str().unwrap().to_string();
    let out = common::wait_for(
        "the client's fetch through the Service",
        Duration::from_secs(60),
        || curl(&format!("http://{client_ip}/out")).filter(|o| o.contains(&web_name)),
    );
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");

    // The DaemonSet runs a ready pod on each node.
    common::wait_for(
        "the DaemonSet on both nodes",
        Duration::from_secs(90),
        || {
            let d = json(&k, &["get", "daemonset", "everywhere", "-o", "json"]);
            (d["status"]["desiredNumberScheduled"] == 2 && d["status"]["numberReady"] == 2)
                .then_some(())
        },
    );
    let pods = json(&k, &["get", "pods", "-l", "app=everywhere", "-o", "json"]);
    let mut nodes: Vec<&str> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["spec"]["nodeName"].as_str())
        .collect();
    nodes.sort();
    assert_eq!(nodes, [A, B]);
    agent.terminate(Duration::from_secs(20));
}
