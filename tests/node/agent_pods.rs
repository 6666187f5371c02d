//! `k3rs agent` runs the pods bound to its node, end to end and as root, with the real pieces:
//! a `k3rs server` and a `k3rs agent --server … --token …` inside a network namespace the test
//! makes (loopback only, no route out), the agent's own supervised containerd with the images of
//! `scripts/build-images.sh` imported from `<data-dir>/agent/images`, runc, the CNI bridge on the
//! node's pod CIDR, and real `kubectl` and `curl`.
//!
//! Proven: the node becomes Ready (CRI status, CNI conflist written once the node has its pod
//! CIDR); a Deployment of 3 busybox `httpd` pods becomes available with distinct pod IPs in
//! that CIDR, and each pod serves a page written by its init container into a shared emptyDir
//! plus its env (a value, `metadata.name` and `status.podIP` fieldRefs) and a file of its
//! service-account volume; a Job runs to completion; a crashing container restarts and ends up
//! in CrashLoopBackOff; deleting the Deployment removes its containers and sandboxes from
//! containerd and the pods from the API.
//!
//! Missing prerequisites fail the test (`scripts/prereqs.sh test` installs them).

use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::{run, runtime_objects, wait_json, NodeLab};
use serde_json::Value;

const NODE: &str = "pods-1";

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      volumes: [{name: work, emptyDir: {}}]
      initContainers:
      - name: init
        image: docker.io/library/busybox:1.35
        command: [sh, -c, "echo init-ran > /work/init.txt"]
        volumeMounts: [{name: work, mountPath: /work}]
      containers:
      - name: httpd
        image: docker.io/library/busybox:1.35
        env:
        - {name: GREETING, value: hello}
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
        command:
        - sh
        - -c
        - >-
          mkdir -p /www &&
          echo "pod=$POD_NAME ip=$POD_IP greeting=$GREETING $(cat /work/init.txt)
          ns=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)" > /www/index.html &&
          exec httpd -f -p 80 -h /www
        volumeMounts: [{name: work, mountPath: /work}]
"#;

const JOB: &str = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: once, image: "docker.io/library/busybox:1.35", command: [sh, -c, "echo done"]}
"#;

const CRASH: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: crash, image: "docker.io/library/busybox:1.35", command: [sh, -c, "exit 3"]}
"#;

/// The BestEffort pod's cgroup directories (`<root>/kubepods/besteffort/pod<uid>`).
fn pod_cgroups(lab: &NodeLab, uid: &str) -> Vec<std::path::PathBuf> {
    lab.cgroup_dirs()
        .into_iter()
        .map(|d| d.join(format!("kubepods/besteffort/pod{uid}")))
        .filter(|p| p.is_dir())
        .collect()
}

/// Waits until the pod's log directory (`/var/log/pods/<ns>_<name>_<uid>`) is gone.
fn wait_logs_removed(uid: &str) {
    common::wait_for(
        "the pod's log directory to go",
        Duration::from_secs(30),
        || {
            let logs = std::fs::read_dir("/var/log/pods")
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(uid));
            (!logs).then_some(())
        },
    );
}

fn condition(obj: &Value, kind: &str) -> Option<String> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str().map(str::to_string))
}

#[test]
fn an_agent_runs_the_pods_bound_to_its_node() {
    NodeLab::run("pods", scenario);
}

fn scenario(lab: &NodeLab) {
    let (server, k) = Kubectl::start_server(&[]);
    let data = lab.agent_data_with_images();
    let mut agent = lab.start_agent(&server, NODE, &data);
    let socket = data.join("agent/containerd/containerd.sock");

    // Ready: containerd answers CRI and its network is configured for the node's pod CIDR.
    let node = wait_json(
        &k,
        "the node to be Ready",
        &["get", "node", NODE, "-o", "json"],
        &mut agent,
        |n| condition(n, "Ready").as_deref() == Some("True"),
    );
    let cidr: ipnet::Ipv4Net = node["spec"]["podCIDR"]
        .as_str()
        .expect("a pod CIDR")
        .parse()
        .unwrap();
    assert!(node["status"]["nodeInfo"]["containerRuntimeVersion"]
        .as_str()
        .unwrap()
        .starts_with("containerd://"));

    // A Deployment of 3 web servers.
    k.ok_stdin(&["apply", "-f", "-"], Some(DEPLOYMENT));
    wait_json(
        &k,
        "the Deployment to be available",
        &["get", "deployment", "web", "-o", "json"],
        &mut agent,
        |d| d["status"]["availableReplicas"] == 3,
    );
    let pods = json(&k, &["get", "pods", "-l", "app=web", "-o", "json"]);
    let pods = pods["items"].as_array().unwrap().clone();
    assert_eq!(pods.len(), 3);
    let mut ips = Vec::new();
    let mut uids = Vec::new();
    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap();
        let ip: std::net::Ipv4Addr = p["status"]["podIP"].as_str().unwrap().parse().unwrap();
        assert!(cidr.contains(&ip), "{name}'s IP {ip} is in {cidr}");
        assert_eq!(p["spec"]["nodeName"], NODE);
        assert_eq!(p["status"]["hostIP"], "127.0.0.1");
        assert_eq!(condition(p, "Ready").as_deref(), Some("True"));
        let init = &p["status"]["initContainerStatuses"][0]["state"]["terminated"];
        assert_eq!(init["exitCode"], 0, "{name}: {init}");
        assert_eq!(init["reason"], "Completed");
        // The page: the init container's file, the env, the service-account volume.
        let url = format!("http://{ip}/");
        let page = common::wait_for(&format!("GET {url}"), Duration::from_secs(30), || {
            let out = Command::new("curl")
                .args(["-s", "--max-time", "2", &url])
                .output()
                .expect("curl");
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        });
        assert_eq!(
            page,
            format!("pod={name} ip={ip} greeting=hello init-ran ns=default\n")
        );
        ips.push(ip);
        uids.push(p["metadata"]["uid"].as_str().unwrap().to_string());
    }
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 3, "distinct pod IPs");
    for uid in &uids {
        assert_eq!(
            runtime_objects(&socket, uid).len(),
            3,
            "a sandbox, the init container and the web server of {uid}"
        );
        assert!(
            !pod_cgroups(lab, uid).is_empty(),
            "the pod's cgroup is under --kubelet-arg cgroup-root"
        );
    }

    // A Job runs to completion.
    k.ok_stdin(&["apply", "-f", "-"], Some(JOB));
    wait_json(
        &k,
        "the Job to complete",
        &["get", "job", "once", "-o", "json"],
        &mut agent,
        |j| j["status"]["succeeded"] == 1 && condition(j, "Complete").as_deref() == Some("True"),
    );
    let job_pod = json(&k, &["get", "pods", "-l", "job-name=once", "-o", "json"]);
    assert_eq!(job_pod["items"][0]["status"]["phase"], "Succeeded");

    // A container that keeps failing: restarted, then held back.
    k.ok_stdin(&["apply", "-f", "-"], Some(CRASH));
    let crash = wait_json(
        &k,
        "CrashLoopBackOff",
        &["get", "pod", "crash", "-o", "json"],
        &mut agent,
        |p| {
            let s = &p["status"]["containerStatuses"][0];
            s["restartCount"].as_i64().unwrap_or(0) >= 1
                && s["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        },
    );
    let s = &crash["status"]["containerStatuses"][0];
    assert_eq!(s["lastState"]["terminated"]["exitCode"], 3, "{s}");
    assert_eq!(s["lastState"]["terminated"]["reason"], "Error", "{s}");
    assert!(s["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .starts_with("back-off 10s restarting failed container=crash pod=crash_default("));

    // Deleting the Deployment stops and removes everything of its pods.
    k.ok(&["delete", "deployment", "web"]);
    common::wait_for("the web pods to be gone", Duration::from_secs(90), || {
        agent.assert_running();
        let pods = json(&k, &["get", "pods", "-l", "app=web", "-o", "json"]);
        pods["items"].as_array().unwrap().is_empty().then_some(())
    });
    for uid in &uids {
        common::wait_for(
            "containerd to forget the pod",
            Duration::from_secs(30),
            || runtime_objects(&socket, uid).is_empty().then_some(()),
        );
        wait_logs_removed(uid);
        common::wait_for("the pod's cgroups to go", Duration::from_secs(30), || {
            pod_cgroups(lab, uid).is_empty().then_some(())
        });
    }

    // The rest goes too, so no pod network namespace outlives the test.
    uids.clear();
    for p in json(&k, &["get", "pods", "-o", "json"])["items"]
        .as_array()
        .unwrap()
    {
        uids.push(p["metadata"]["uid"].as_str().unwrap().to_string());
    }
    assert_eq!(uids.len(), 2, "the Job's pod and crash");
    k.ok(&["delete", "job", "once", "--cascade=foreground"]);
    k.ok(&["delete", "pod", "crash"]);
    common::wait_for("every pod to be gone", Duration::from_secs(90), || {
        let pods = json(&k, &["get", "pods", "-o", "json"]);
        pods["items"].as_array().unwrap().is_empty().then_some(())
    });
    common::wait_for(
        "containerd to have no container",
        Duration::from_secs(30),
        || {
            let left = run(Command::new("ctr").arg("--address").arg(&socket).args([
                "-n",
                "k8s.io",
                "containers",
                "ls",
                "-q",
            ]));
            left.trim().is_empty().then_some(())
        },
    );
    for uid in &uids {
        wait_logs_removed(uid);
    }
    let log_text = std::fs::read_to_string(agent.log_path()).unwrap_or_default();
    let failures: Vec<&str> = log_text
        .lines()
        .filter(|l| l.contains("sync failed") || l.contains("FailedMount"))
        .collect();
    assert!(
        failures.is_empty(),
        "the agent logged failures:\n{}",
        failures.join("\n")
    );
    agent.terminate(Duration::from_secs(20));
    drop(server);
}
