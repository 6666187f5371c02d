//! The kubelet's health checking, lifecycle hooks and Events, end to end and as root: a
//! `k3rs server` with its embedded agent inside a network namespace the test makes (loopback
//! only, no route out), the supervised containerd with the images of `scripts/build-images.sh`,
//! runc, the CNI bridge, and real `kubectl`.
//!
//! Proven:
//! - an httpGet readiness probe keeps a running pod out of its Service's ready Endpoints and
//!   EndpointSlice endpoints (it is listed as not ready) until the page it checks exists (the
//!   test creates it through a hostPath volume), then the pod is Ready and its IP is a ready
//!   endpoint; the failures were reported as `Unhealthy` Events with upstream's message;
//! - an httpGet liveness probe that gets 404 restarts the container again and again
//!   (restartCount grows, `CrashLoopBackOff` shows), with `Unhealthy` and `Killing` Events;
//! - a startup probe holds a liveness probe (that would fail at once) off until it passes:
//!   the container is never restarted and becomes started and ready;
//! - a tcpSocket readiness probe on a named port makes its pod Ready;
//! - a postStart httpGet hook makes its GET (to a listener of the test) before the container
//!   counts as started, and a postStart hook that cannot connect kills the container
//!   (`FailedPostStartHook` Event, restarts);
//! - kubelet Events carry source `kubelet`/node name, and repeats bump `count`.
//!
//! Missing prerequisites fail the test (`scripts/prereqs.sh test` installs them).

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, pod_ready, Kubectl};
use crate::common::node_lab::NodeLab;
use serde_json::Value;

const NODE: &str = "probes-1";

fn manifests(gate: &Path, hook_port: u16) -> String {
    let gate = gate.display();
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: gated, labels: {{app: gated}}}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{{name: gate, hostPath: {{path: "{gate}", type: DirectoryOrCreate}}}}]
  containers:
  - name: web
    image: docker.io/library/busybox:1.35
    command: [httpd, -f, -p, "80", -h, /www]
    volumeMounts: [{{name: gate, mountPath: /www/gate}}]
    readinessProbe:
      httpGet: {{path: /gate/healthz, port: 80}}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {{name: gated}}
spec:
  selector: {{app: gated}}
  ports: [{{port: 80}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: dying}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: docker.io/library/busybox:1.35
    command: [sh, -c, "mkdir -p /www && exec httpd -f -p 80 -h /www"]
    livenessProbe:
      httpGet: {{path: /healthz, port: 80}}
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Pod
metadata: {{name: slow-start}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{{name: gate, hostPath: {{path: "{gate}", type: DirectoryOrCreate}}}}]
  containers:
  - name: app
    image: docker.io/library/busybox:1.35
    command: [sleep, "3600"]
    volumeMounts: [{{name: gate, mountPath: /gate}}]
    startupProbe:
      exec: {{command: [cat, /gate/started]}}
      periodSeconds: 1
      failureThreshold: 120
    livenessProbe:
      exec: {{command: [cat, /gate/started]}}
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Pod
metadata: {{name: tcp}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: docker.io/library/busybox:1.35
    command: [sh, -c, "mkdir -p /www && exec httpd -f -p 8080 -h /www"]
    ports: [{{name: web, containerPort: 8080}}]
    readinessProbe:
      tcpSocket: {{port: web}}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {{name: hooked}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: docker.io/library/busybox:1.35
    command: [sleep, "3600"]
    lifecycle:
      postStart:
        httpGet: {{host: 127.0.0.1, port: {hook_port}, path: /post-start}}
---
apiVersion: v1
kind: Pod
metadata: {{name: hook-fails}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: docker.io/library/busybox:1.35
    command: [sleep, "3600"]
    lifecycle:
      postStart:
        httpGet: {{host: 127.0.0.1, port: 1, path: /nothing}}
"#
    )
}

#[test]
fn probes_hooks_and_events_drive_pods() {
    NodeLab::run("probes", scenario);
}

/// Events about pod `name`: `(reason, message, count)`.
fn events(k: &Kubectl, name: &str) -> Vec<(String, String, i64, Value)> {
    let v = json(k, &["get", "events"]);
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
                e["count"].as_i64().unwrap_or_default(),
                e["source"].clone(),
            )
        })
        .collect()
}

fn has_event(k: &Kubectl, pod: &str, reason: &str, message: &str) -> bool {
    events(k, pod)
        .iter()
        .any(|e| e.0 == reason && e.1.starts_with(message))
}

/// Waits until pod `name` is Ready; the pod.
fn wait_ready(k: &Kubectl, name: &str) -> Value {
    common::wait_for(
        &format!("{name} to be Ready"),
        Duration::from_secs(30),
        || {
            let p = json(k, &["get", "pod", name]);
            pod_ready(&p).then_some(p)
        },
    )
}

fn container(pod: &Value) -> Value {
    pod["status"]["containerStatuses"][0].clone()
}

fn scenario(lab: &NodeLab) {
    let (mut server, k) = lab.start_server(NODE, "127.0.0.1", &[], &[]);
    common::wait_for("the node to be Ready", Duration::from_secs(120), || {
        server.assert_running();
        let out = k.run(&["get", "node", NODE, "-o", "json"]);
        let n: Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
            .then_some(())
    });

    let gate = server.data_dir().join("gate");
    let hook_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let hook_port = hook_listener.local_addr().unwrap().port();
    hook_listener.set_nonblocking(true).unwrap();
    let hook_request = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(150);
        let mut s = loop {
            match hook_listener.accept() {
                Ok((s, _)) => break s,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("no postStart hook connection within 150 s: {e}"),
            }
        };
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = vec![0u8; 4096];
        let n = s.read(&mut buf).unwrap_or(0);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        String::from_utf8_lossy(&buf[..n]).to_string()
    });
    k.ok_stdin(&["apply", "-f", "-"], Some(&manifests(&gate, hook_port)));

    // Readiness: running but not ready, listed as a not-ready endpoint.
    let pod = common::wait_for("gated to run", Duration::from_secs(90), || {
        server.assert_running();
        let p = json(&k, &["get", "pod", "gated"]);
        container(&p)["state"]["running"].is_object().then_some(p)
    });
    let ip = pod["status"]["podIP"].as_str().expect("podIP").to_string();
    common::wait_for(
        "gated to be a not-ready endpoint",
        Duration::from_secs(30),
        || {
            let ep = json(&k, &["get", "endpoints", "gated"]);
            let subset = &ep["subsets"][0];
            let not_ready = subset["notReadyAddresses"][0]["ip"] == ip.as_str();
            not_ready.then(|| assert!(subset["addresses"].is_null(), "{ep}"))
        },
    );
    let slices = json(
        &k,
        &[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=gated",
        ],
    );
    let endpoint = &slices["items"][0]["endpoints"][0];
    assert_eq!(endpoint["addresses"][0], ip.as_str(), "{slices}");
    assert_eq!(endpoint["conditions"]["ready"], false, "{slices}");
    common::wait_for(
        "an Unhealthy event for gated",
        Duration::from_secs(30),
        || {
            has_event(
                &k,
                "gated",
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 404",
            )
            .then_some(())
        },
    );
    let p = json(&k, &["get", "pod", "gated"]);
    assert!(!pod_ready(&p), "gated is not ready before its page exists");
    assert_eq!(container(&p)["ready"], false);

    // The startup probe has failed at least 3 times (3 s) while a liveness probe with period 1
    // and failure threshold 1 would have restarted the container; now it may pass.
    common::wait_for(
        "slow-start's startup probe to fail 3 times",
        Duration::from_secs(60),
        || {
            events(&k, "slow-start")
                .iter()
                .any(|e| e.0 == "Unhealthy" && e.1.starts_with("Startup probe failed") && e.2 >= 3)
                .then_some(())
        },
    );
    let slow = json(&k, &["get", "pod", "slow-start"]);
    assert!(container(&slow)["state"]["running"].is_object(), "{slow}");
    assert_eq!(container(&slow)["started"], false, "{slow}");
    assert_eq!(container(&slow)["restartCount"], 0, "{slow}");

    std::fs::write(gate.join("healthz"), "ok\n").unwrap();
    std::fs::write(gate.join("started"), "yes\n").unwrap();
    wait_ready(&k, "gated");
    common::wait_for(
        "gated to be a ready endpoint",
        Duration::from_secs(30),
        || {
            let ep = json(&k, &["get", "endpoints", "gated"]);
            let subset = &ep["subsets"][0];
            (subset["addresses"][0]["ip"] == ip.as_str() && subset["notReadyAddresses"].is_null())
                .then_some(())
        },
    );
    common::wait_for(
        "gated's EndpointSlice endpoint to be ready",
        Duration::from_secs(30),
        || {
            let s = json(
                &k,
                &[
                    "get",
                    "endpointslices",
                    "-l",
                    "kubernetes.io/service-name=gated",
                ],
            );
            (s["items"][0]["endpoints"][0]["conditions"]["ready"] == true).then_some(())
        },
    );

    // Startup gated liveness: never restarted, now started and ready.
    let slow = wait_ready(&k, "slow-start");
    assert_eq!(container(&slow)["started"], true);
    assert_eq!(container(&slow)["restartCount"], 0, "{slow}");
    assert!(
        !has_event(&k, "slow-start", "Unhealthy", "Liveness"),
        "{:?}",
        events(&k, "slow-start")
    );
    assert!(has_event(
        &k,
        "slow-start",
        "Unhealthy",
        "Startup probe failed: cat: can't open '/gate/started'"
    ));

    // tcpSocket readiness on a named port.
    wait_ready(&k, "tcp");

    // Liveness: restarts, CrashLoopBackOff, Unhealthy and Killing events.
    common::wait_for(
        "dying to restart twice and back off",
        Duration::from_secs(90),
        || {
            let p = json(&k, &["get", "pod", "dying"]);
            let c = container(&p);
            let backing_off = c["state"]["waiting"]["reason"] == "CrashLoopBackOff";
            (backing_off && c["restartCount"].as_i64() >= Some(2)).then_some(())
        },
    );
    let dying = events(&k, "dying");
    // (A probe that runs before httpd listens fails with "connection refused" instead, as
    // upstream's would: that is a different Event; the 404 ones are counted on theirs.)
    let unhealthy = dying
        .iter()
        .find(|e| {
            e.0 == "Unhealthy"
                && e.1 == "Liveness probe failed: HTTP probe failed with statuscode: 404"
        })
        .unwrap_or_else(|| panic!("no Unhealthy event for the 404s: {dying:?}"));
    assert!(unhealthy.2 >= 2, "repeats bump the count: {dying:?}");
    assert_eq!(
        unhealthy.3,
        serde_json::json!({"component": "kubelet", "host": NODE})
    );
    assert!(
        dying
            .iter()
            .any(|e| e.0 == "Killing"
                && e.1 == "Container web failed liveness probe, will be restarted"),
        "{dying:?}"
    );
    assert!(
        dying.iter().any(|e| e.0 == "BackOff"
            && e.1
                .starts_with("Back-off restarting failed container web in pod dying_default(")),
        "{dying:?}"
    );
    for reason in ["Pulled", "Created", "Started"] {
        assert!(dying.iter().any(|e| e.0 == reason), "{reason}: {dying:?}");
    }

    // postStart hooks: the GET reached the test's listener; a refused one kills the container.
    let request = hook_request.join().expect("the hook listener");
    assert!(
        request.starts_with("GET /post-start HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(request.contains("User-Agent: kube-probe/"), "{request}");
    wait_ready(&k, "hooked");
    common::wait_for(
        "hook-fails to restart after FailedPostStartHook",
        Duration::from_secs(60),
        || {
            let p = json(&k, &["get", "pod", "hook-fails"]);
            let restarted = container(&p)["restartCount"].as_i64() >= Some(1);
            let event = has_event(
                &k,
                "hook-fails",
                "FailedPostStartHook",
                "PostStartHook failed",
            );
            (restarted && event).then_some(())
        },
    );
    assert!(has_event(
        &k,
        "hook-fails",
        "Killing",
        "FailedPostStartHook"
    ));
}
