//! Air-gap images are imported in the background: `k3rs server` with its embedded agent,
//! inside a network namespace the test makes (loopback only, so no registry is reachable),
//! with a tarball in `<data-dir>/agent/images` whose import the test holds up: `ctr` on the
//! server's PATH is a wrapper that, for that tarball only, waits for the test's go-ahead
//! before running the real `ctr` (a slow import, made deterministic).
//!
//! Proven:
//! - While that import is held, the node reports Ready with a heartbeat from this start and
//!   runs a pod whose image (busybox) is already present.
//! - A pod whose image is in the held tarball waits for the import: it is not pulled from a
//!   registry (no `ErrImagePull`, no `Pulling` event) and stays Pending.
//! - Once the import goes ahead, that pod runs on the imported image.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::{build_renamed_busybox, run, NodeLab, FAST_STATUS};

const NODE: &str = "airgap-node";
const SLOW_IMAGE: &str = "docker.io/k3rs/slow";

fn pod(name: &str, image: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: {image}
    imagePullPolicy: IfNotPresent
    command: [sleep, "3600"]
"#
    )
}

#[test]
fn the_node_is_ready_and_runs_pods_before_a_slow_air_gap_import_ends() {
    common::require_program("tar", "tar");
    NodeLab::run("airgap", scenario);
}

/// A `ctr` that holds `images import …slow.tar` until `release` exists (two minutes at most).
fn write_ctr_wrapper(dir: &Path, release: &Path) {
    let real = run(Command::new("sh").args(["-c", "command -v ctr"]));
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in *slow.tar) i=0; \
         while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done;; esac; done\n\
         exec '{}' \"$@\"\n",
        release.display(),
        real.trim()
    );
    std::fs::create_dir_all(dir).expect("wrapper dir");
    let path = dir.join("ctr");
    std::fs::write(&path, script).expect("ctr wrapper");
    run(Command::new("chmod").arg("0755").arg(&path));
}

fn images(data: &Path) -> String {
    let socket = data.join("agent/containerd/containerd.sock");
    run(Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["-n", "k8s.io", "images", "ls", "-q"]))
}

/// Whether the node's Ready condition is True with a heartbeat at or after `since` (RFC 3339).
fn ready_since(k: &Kubectl, since: &str) -> bool {
    let node = json(k, &["get", "node", NODE]);
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["type"] == "Ready"
                && c["status"] == "True"
                && c["lastHeartbeatTime"].as_str().unwrap_or_default() >= since
        })
}

fn waiting_reason(k: &Kubectl, pod: &str) -> String {
    let p = json(k, &["get", "pod", pod]);
    p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn scenario(lab: &NodeLab) {
    let wrapper = lab.scratch.path().join("bin");
    let release = lab.scratch.path().join("release-slow-import");
    write_ctr_wrapper(&wrapper, &release);
    let path = format!(
        "{}:{}",
        wrapper.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [("PATH", std::ffi::OsStr::new(&path))];
    let (mut server, k) = lab.start_server(NODE, "127.0.0.1", FAST_STATUS.as_slice(), &env);
    let data = server.data_dir();
    build_renamed_busybox(
        &lab.scratch.path().join("slow"),
        &data.join("agent/images/slow.tar"),
        SLOW_IMAGE,
    );
    let since = run(Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%SZ"]));
    server.restart();

    common::wait_for(
        "the node to be Ready in this start",
        Duration::from_secs(120),
        || {
            server.assert_running();
            ready_since(&k, since.trim()).then_some(())
        },
    );
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&pod("present", "docker.io/library/busybox:1.35")),
    );
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&pod("slow", &format!("{SLOW_IMAGE}:1.35"))),
    );
    common::wait_for(
        "the pod with a present image to run",
        Duration::from_secs(120),
        || {
            server.assert_running();
            let p = json(&k, &["get", "pod", "present"]);
            (p["status"]["phase"] == "Running").then_some(())
        },
    );
    assert!(
        !images(&data).contains(SLOW_IMAGE),
        "the held import has not happened"
    );
    common::wait_for(
        "the pod to wait for the import",
        Duration::from_secs(60),
        || {
            server.assert_running();
            server
                .log()
                .contains("waiting for the air-gap image imports before pulling")
                .then_some(())
        },
    );
    let p = json(&k, &["get", "pod", "slow"]);
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    let reason = waiting_reason(&k, "slow");
    assert!(
        reason.is_empty() || reason == "ContainerCreating",
        "waiting for the import, not pulling: {reason:?}"
    );
    let events = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=slow",
    ]);
    assert!(
        !events.contains("Pulling"),
        "no pull from a registry: {events}"
    );

    std::fs::write(&release, b"go").expect("release the import");
    common::wait_for(
        "the pod on the imported image to run",
        Duration::from_secs(120),
        || {
            server.assert_running();
            let p = json(&k, &["get", "pod", "slow"]);
            (p["status"]["phase"] == "Running").then_some(())
        },
    );
    assert!(images(&data).contains(SLOW_IMAGE));
    let events = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=slow",
    ]);
    assert!(
        !events.contains("Pulling"),
        "no pull from a registry: {events}"
    );
}
