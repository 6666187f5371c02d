//! Memory protection, made deterministic: `k3rs server` with its embedded agent, inside a
//! network namespace the test makes (loopback only), on the real containerd, with
//! `--kubelet-arg system-reserved=memory=<MemTotal − 400Mi>` so that node allocatable memory
//! is 400 MiB whatever else the machine runs, and thresholds on
//! `allocatableMemory.available` (what the pods' `kubepods` cgroup leaves of it, so only the
//! test's pods count): soft `<300Mi` with a 45 s grace period, hard `<150Mi`,
//! `eviction-pressure-transition-period=15s`.
//!
//! Proven:
//! - A Guaranteed pod within its requests (`steady`) is never evicted.
//! - Soft: a BestEffort pod holding 200 MiB (`hog`: `dd` with a 200 MiB block, writing into a
//!   pipe nobody reads) leaves about 195 MiB: the node reports `MemoryPressure=True` and gets
//!   the `node.kubernetes.io/memory-pressure` NoSchedule taint at once, but the pod keeps
//!   running for the grace period and is evicted only after it, with reason `Evicted` and
//!   upstream's message ("The node was low on resource: memory. Threshold quantity: 300Mi,
//!   available: …. Container hog was using …, request is 0, has larger consumption of
//!   memory. "). Its memory is freed; after the transition period the condition turns False
//!   and the taint goes.
//! - Hard: a BestEffort pod holding 300 MiB (`burst`) is evicted for the hard threshold
//!   (the message names `Threshold quantity: 150Mi`), without waiting for a grace period.
//!
//! The test's pods hold 300 MiB at most, one at a time. Missing prerequisites fail the test
//! (`scripts/prereqs.sh test` installs them).

use std::time::{Duration, Instant};

use crate::common;
use crate::common::kubectl::{json, node_condition_and_taint, Kubectl};
use crate::common::node_lab::{NodeLab, FAST_STATUS};

const NODE: &str = "mem-node";
const MIB: u64 = 1024 * 1024;
const ALLOCATABLE: u64 = 400 * MIB;
const SOFT_GRACE: Duration = Duration::from_secs(45);
const TAINT: &str = "node.kubernetes.io/memory-pressure";

const STEADY: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: steady}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: steady
    image: docker.io/library/busybox:1.35
    command: [sleep, "3600"]
    resources:
      requests: {cpu: 100m, memory: 32Mi}
      limits: {cpu: 100m, memory: 32Mi}
"#;

/// A BestEffort pod named `name` holding `mib` MiB: `dd` reads one block of that size from
/// /dev/zero, then blocks writing it into a pipe `sleep` never reads.
fn holder(name: &str, mib: u64) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 30
  restartPolicy: Never
  containers:
  - name: {name}
    image: docker.io/library/busybox:1.35
    command: [sh, -c, "dd if=/dev/zero bs={mib}M count=1 | sleep 3600"]
"#
    )
}

#[test]
fn memory_pressure_evicts_the_pod_above_its_requests_after_the_soft_grace_period() {
    NodeLab::run("mem", scenario);
}

/// MemTotal of /proc/meminfo, bytes.
fn mem_total() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("MemTotal");
    kib * 1024
}

fn memory_pressure(k: &Kubectl) -> (String, bool) {
    node_condition_and_taint(k, NODE, "MemoryPressure", TAINT)
}

fn phase(k: &Kubectl, pod: &str) -> serde_json::Value {
    json(k, &["get", "pod", pod])
}

/// Waits for `pod` to run; returns when it was seen running.
fn wait_running(server: &mut common::K3rs, k: &Kubectl, pod: &str) -> Instant {
    common::wait_for(&format!("{pod} to run"), Duration::from_secs(150), || {
        server.assert_running();
        (phase(k, pod)["status"]["phase"] == "Running").then(Instant::now)
    })
}

/// Waits for `pod` to be evicted; returns its status.
fn wait_evicted(
    server: &mut common::K3rs,
    k: &Kubectl,
    pod: &str,
    within: Duration,
) -> serde_json::Value {
    let p = common::wait_for(&format!("{pod} to be evicted"), within, || {
        server.assert_running();
        let p = phase(k, pod);
        (p["status"]["phase"] == "Failed").then_some(p)
    });
    assert_eq!(p["status"]["reason"], "Evicted", "{p}");
    p["status"].clone()
}

fn assert_message(status: &serde_json::Value, container: &str, threshold: &str) {
    let message = status["message"].as_str().unwrap_or_default();
    let prefix = format!(
        "The node was low on resource: memory. Threshold quantity: {threshold}, available: "
    );
    assert!(message.starts_with(&prefix), "{message:?}");
    assert!(
        message.contains(&format!(". Container {container} was using "))
            && message.ends_with(", request is 0, has larger consumption of memory. "),
        "{message:?}"
    );
}

fn scenario(lab: &NodeLab) {
    let reserved = mem_total() - ALLOCATABLE;
    let reserved_arg = format!("system-reserved=memory={reserved}");
    let mut args = FAST_STATUS.to_vec();
    args.extend([
        "--kubelet-arg",
        &reserved_arg,
        "--kubelet-arg",
        "eviction-hard=allocatableMemory.available<150Mi",
        "--kubelet-arg",
        "eviction-soft=allocatableMemory.available<300Mi",
        "--kubelet-arg",
        "eviction-soft-grace-period=allocatableMemory.available=45s",
        "--kubelet-arg",
        "eviction-max-pod-grace-period=5",
        "--kubelet-arg",
        "eviction-pressure-transition-period=15s",
    ]);
    let (mut server, k) = lab.start_server(NODE, "127.0.0.1", &args, &[]);
    k.ok_stdin(&["apply", "-f", "-"], Some(STEADY));
    wait_running(&mut server, &k, "steady");
    let node = json(&k, &["get", "node", NODE]);
    let allocatable = node["status"]["allocatable"]["memory"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        allocatable,
        format!("{}Ki", (ALLOCATABLE - 100 * MIB) / 1024),
        "allocatable less system-reserved and the default hard threshold: {node}"
    );
    assert_eq!(memory_pressure(&k), ("False".to_string(), false));

    // Soft: pressure at once, eviction only after the grace period.
    k.ok_stdin(&["apply", "-f", "-"], Some(&holder("hog", 200)));
    let started = wait_running(&mut server, &k, "hog");
    let mut pressure_seen = false;
    while Instant::now() < started + SOFT_GRACE - Duration::from_secs(5) {
        server.assert_running();
        let p = phase(&k, "hog");
        assert_eq!(
            p["status"]["phase"], "Running",
            "the soft threshold's grace period is not over: {p}"
        );
        pressure_seen |= memory_pressure(&k) == ("True".to_string(), true);
        std::thread::sleep(Duration::from_secs(1));
    }
    if !pressure_seen {
        common::wait_for(
            "MemoryPressure and its taint",
            Duration::from_secs(60),
            || {
                server.assert_running();
                (memory_pressure(&k) == ("True".to_string(), true)).then_some(())
            },
        );
    }
    let status = wait_evicted(&mut server, &k, "hog", Duration::from_secs(90));
    assert!(Instant::now() >= started + SOFT_GRACE);
    assert_message(&status, "hog", "300Mi");
    assert_eq!(phase(&k, "steady")["status"]["phase"], "Running");
    common::wait_for(
        "MemoryPressure and its taint to go",
        Duration::from_secs(90),
        || {
            server.assert_running();
            (memory_pressure(&k) == ("False".to_string(), false)).then_some(())
        },
    );

    // Hard: evicted for the hard threshold, whose grace period is zero.
    k.ok_stdin(&["apply", "-f", "-"], Some(&holder("burst", 300)));
    wait_running(&mut server, &k, "burst");
    let status = wait_evicted(&mut server, &k, "burst", Duration::from_secs(90));
    assert_message(&status, "burst", "150Mi");
    assert_eq!(phase(&k, "steady")["status"]["phase"], "Running");
}
