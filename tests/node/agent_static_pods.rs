//! Static pods and hostNetwork pods on a real node, end to end and as root: a `k3rs server`
//! and a `k3rs agent` inside a network namespace the test makes (loopback only), the agent's
//! own containerd with the images of `scripts/build-images.sh`, real `kubectl` and `curl`.
//!
//! Proven: a manifest placed in `<data-dir>/agent/pod-manifests` before the agent starts and
//! one placed after both run, each with a mirror pod `<name>-<node>` in the API (namespace
//! `default` when the manifest has none) carrying `kubernetes.io/config.{source,hash,mirror,
//! seen}`, the Node as controlling owner and the Running status; deleting the mirror pod brings
//! a new one (new UID) while the container keeps its ID; editing a manifest replaces the pod
//! (new hash, new container); removing the file removes the containers from containerd and the
//! mirror pod; a `hostNetwork` pod gets the node's IP as its pod IP and answers on the node's
//! address at its port.
//!
//! Missing prerequisites fail the test (`scripts/prereqs.sh test` installs them).

use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::{running_objects, runtime_objects, wait_json, NodeLab};
use serde_json::Value;

const NODE: &str = "static-1";
const IMAGE: &str = "docker.io/library/busybox:1.35";

fn sleeper(name: &str, namespace: Option<&str>, marker: &str) -> String {
    let ns = namespace
        .map(|n| format!("  namespace: {n}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n{ns}  labels: {{app: {name}}}\n\
         spec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    \
         image: {IMAGE}\n    command: [sh, -c, \"echo {marker}; exec sleep 100000\"]\n"
    )
}

const HOST_NET: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: docker.io/library/busybox:1.35
    command: [sh, -c, "mkdir -p /www && echo host-net > /www/index.html && exec httpd -f -p 18080 -h /www"]
    ports: [{containerPort: 18080, hostPort: 18080}]
"#;

fn running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
        && p["status"]["containerStatuses"][0]["state"]["running"].is_object()
}

fn container_id(p: &Value) -> String {
    p["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn annotation(p: &Value, key: &str) -> String {
    p["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn absent(k: &Kubectl, args: &[&str]) -> bool {
    let out = k.run(args);
    !out.ok && out.stderr.contains("NotFound")
}

#[test]
fn static_pods_run_from_files_with_mirror_pods() {
    NodeLab::run("static", scenario);
}

fn scenario(lab: &NodeLab) {
    let (server, k) = Kubectl::start_server(&[]);
    let data = lab.agent_data_with_images();
    let manifests = data.join("agent/pod-manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::write(manifests.join("early.yaml"), sleeper("early", None, "one")).unwrap();
    // Hidden files are not manifests.
    std::fs::write(
        manifests.join(".hidden.yaml"),
        sleeper("hidden", None, "never"),
    )
    .unwrap();

    let mut agent = lab.start_agent(&server, NODE, &data);
    let socket = data.join("agent/containerd/containerd.sock");

    // The manifest that was there before the start: its mirror pod, Running.
    let early_name = format!("early-{NODE}");
    let early = wait_json(
        &k,
        "the early static pod's mirror pod to be Running",
        &["get", "pod", &early_name, "-o", "json"],
        &mut agent,
        running,
    );
    let node = json(&k, &["get", "node", NODE, "-o", "json"]);
    assert_eq!(early["metadata"]["namespace"], "default");
    assert_eq!(early["spec"]["nodeName"], NODE);
    assert_eq!(annotation(&early, "kubernetes.io/config.source"), "file");
    let hash = annotation(&early, "kubernetes.io/config.hash");
    assert_eq!(hash.len(), 32, "{early}");
    assert_eq!(annotation(&early, "kubernetes.io/config.mirror"), hash);
    assert!(!annotation(&early, "kubernetes.io/config.seen").is_empty());
    assert_ne!(early["metadata"]["uid"], hash.as_str(), "the API's own UID");
    let owner = &early["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Node");
    assert_eq!(owner["name"], NODE);
    assert_eq!(owner["uid"], node["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    // The static pod runs under its hash as UID: one sandbox and one container running. An
    // attempt that failed while the node was starting may leave one dead object beside them
    // (CI saw a third one still after 150 s): the container GC keeps the newest dead
    // container of each name, as upstream's `MaxPerPodContainer` = 1 does.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen = runtime_objects(&socket, &hash);
    let mut live = running_objects(&socket, &seen);
    while live.len() != 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        seen = runtime_objects(&socket, &hash);
        live = running_objects(&socket, &seen);
    }
    assert_eq!(
        live.len(),
        2,
        "sandbox + container running under the hash UID: {live:?} of {seen:?}"
    );
    assert!(
        seen.len() <= 3,
        "at most one dead object beside them: {seen:?}"
    );
    assert!(
        absent(&k, &["get", "pod", &format!("hidden-{NODE}")]),
        "hidden files are ignored"
    );

    // A manifest placed while the agent runs, in its own namespace.
    std::fs::write(
        manifests.join("late.json"),
        serde_json::to_string(
            &serde_norway::from_str::<Value>(&sleeper("late", Some("kube-system"), "two")).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    let late_name = format!("late-{NODE}");
    let late = wait_json(
        &k,
        "the late static pod's mirror pod to be Running",
        &["get", "pod", "-n", "kube-system", &late_name, "-o", "json"],
        &mut agent,
        running,
    );
    let late_hash = annotation(&late, "kubernetes.io/config.hash");
    assert_eq!(annotation(&late, "kubernetes.io/config.mirror"), late_hash);

    // Deleting the mirror pod brings a new one; the container is untouched.
    let first_uid = early["metadata"]["uid"].as_str().unwrap().to_string();
    let first_container = container_id(&early);
    k.ok(&["delete", "pod", &early_name, "--wait=false"]);
    let again = wait_json(
        &k,
        "the mirror pod to come back",
        &["get", "pod", &early_name, "-o", "json"],
        &mut agent,
        |p| p["metadata"]["uid"] != first_uid.as_str() && running(p),
    );
    assert_eq!(container_id(&again), first_container, "same container");
    assert_eq!(annotation(&again, "kubernetes.io/config.hash"), hash);

    // Editing the manifest replaces the pod: new hash, new container.
    std::fs::write(
        manifests.join("early.yaml"),
        sleeper("early", None, "three"),
    )
    .unwrap();
    let edited = wait_json(
        &k,
        "the edited static pod's mirror pod to be Running",
        &["get", "pod", &early_name, "-o", "json"],
        &mut agent,
        |p| annotation(p, "kubernetes.io/config.hash") != hash && running(p),
    );
    let new_hash = annotation(&edited, "kubernetes.io/config.hash");
    assert_eq!(annotation(&edited, "kubernetes.io/config.mirror"), new_hash);
    assert_ne!(container_id(&edited), first_container);
    common::wait_for(
        "the old static pod's containers to go",
        Duration::from_secs(60),
        || runtime_objects(&socket, &hash).is_empty().then_some(()),
    );

    // Removing the file removes the pod and its mirror.
    std::fs::remove_file(manifests.join("late.json")).unwrap();
    common::wait_for("the late mirror pod to go", Duration::from_secs(60), || {
        absent(&k, &["get", "pod", "-n", "kube-system", &late_name]).then_some(())
    });
    common::wait_for(
        "the late static pod's containers to go",
        Duration::from_secs(60),
        || {
            runtime_objects(&socket, &late_hash)
                .is_empty()
                .then_some(())
        },
    );

    // A hostNetwork pod: the node's IP, reachable at the node's address.
    k.ok_stdin(&["apply", "-f", "-"], Some(HOST_NET));
    let hostnet = wait_json(
        &k,
        "the hostNetwork pod to be Running",
        &["get", "pod", "hostnet", "-o", "json"],
        &mut agent,
        running,
    );
    assert_eq!(hostnet["status"]["podIP"], "127.0.0.1");
    assert_eq!(hostnet["status"]["podIPs"][0]["ip"], "127.0.0.1");
    assert_eq!(hostnet["status"]["hostIP"], "127.0.0.1");
    let page = common::wait_for(
        "GET http://127.0.0.1:18080/",
        Duration::from_secs(30),
        || {
            let out = Command::new("curl")
                .args(["-s", "--max-time", "2", "http://127.0.0.1:18080/"])
                .output()
                .expect("curl");
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        },
    );
    assert_eq!(page, "host-net\n");
    let uid = hostnet["metadata"]["uid"].as_str().unwrap().to_string();
    k.ok(&["delete", "pod", "hostnet"]);
    common::wait_for(
        "the hostNetwork pod's containers to go",
        Duration::from_secs(60),
        || runtime_objects(&socket, &uid).is_empty().then_some(()),
    );
    agent.assert_running();
}
