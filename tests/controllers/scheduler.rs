//! The scheduler inside `k3rs server`, observed with kubectl: nodes are hollow nodes
//! (`k3rs agent --hollow`) or created with kubectl (capacity and a Ready condition in their
//! status); pods land where upstream's default profile puts them, stay Pending with
//! upstream's `FailedScheduling` explanation when no node fits, and a high-priority pod
//! preempts a low-priority one.

use std::time::Duration;

use crate::common;
use crate::common::hollow::HollowAgent;
use crate::common::kubectl::{table, Kubectl};

const WAIT: Duration = Duration::from_secs(60);

/// For the suites with kubectl-created nodes, which post no heartbeats: the node lifecycle
/// controller leaves them Ready for the test's length.
const NO_HEARTBEAT_NODES: &[&str] =
    &["--kube-controller-manager-arg=node-monitor-grace-period=10m"];

/// Creates node `name` with `cpu` cores, 8 GiB, 110 pods, a Ready condition, the hostname
/// label plus `labels`, and `taints` (YAML flow sequence).
fn add_node(k: &Kubectl, name: &str, cpu: &str, labels: &str, taints: &str) {
    let manifest = format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}{labels}}}\nspec:\n  taints: {taints}\n"
    );
    k.ok_stdin(&["apply", "-f", "-"], Some(&manifest));
    let status = format!(
        r#"{{"status":{{"capacity":{{"cpu":"{cpu}","memory":"8Gi","pods":"110"}},"allocatable":{{"cpu":"{cpu}","memory":"8Gi","pods":"110"}},"conditions":[{{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}}]}}}}"#
    );
    k.ok(&[
        "patch",
        "node",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ]);
}

/// A pod manifest: `name`, requesting `cpu`, with extra spec lines (YAML, indented by 2).
fn pod(name: &str, labels: &str, cpu: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\nspec:\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    resources: {{requests: {{cpu: {cpu}}}}}\n{spec}"
    )
}

fn create(k: &Kubectl, manifest: &str) {
    k.ok_stdin(&["create", "-f", "-"], Some(manifest));
}

fn node_of(k: &Kubectl, pod: &str) -> String {
    k.ok(&["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"])
}

fn wait_scheduled(k: &Kubectl, pod: &str) -> String {
    common::wait_for(&format!("pod {pod} to be scheduled"), WAIT, || {
        Some(node_of(k, pod)).filter(|n| !n.is_empty())
    })
}

/// Waits until `kubectl describe pod` shows `needle` (an Event message) and returns the text.
fn wait_described(k: &Kubectl, pod: &str, needle: &str) -> String {
    let mut last = String::new();
    common::wait_for(&format!("{needle:?} in describe pod {pod}"), WAIT, || {
        last = k.ok(&["describe", "pod", pod]);
        last.contains(needle).then(|| last.clone())
    })
}

/// The NODE column of `kubectl get pods -o wide` per pod name.
fn wide_nodes(k: &Kubectl, selector: &str) -> Vec<(String, String)> {
    let out = k.ok(&["get", "pods", "-l", selector, "-o", "wide"]);
    let rows = table(&out);
    let header = &rows[0];
    let col = header
        .iter()
        .position(|h| h == "NODE")
        .expect("NODE column");
    rows[1..]
        .iter()
        .map(|r| (r[0].clone(), r[col].clone()))
        .collect()
}

/// Waits until hollow nodes `names` are Ready.
fn wait_ready_nodes(k: &Kubectl, agent: &mut HollowAgent, names: &[&str]) {
    common::wait_for(&format!("Ready hollow nodes {names:?}"), WAIT, || {
        agent.proc.assert_running();
        let out = k.run(&["get", "nodes", "--no-headers"]);
        let rows = table(&out.stdout);
        let ready = names
            .iter()
            .all(|n| rows.iter().any(|r| r[0] == *n && r[1] == "Ready"));
        ready.then_some(())
    });
}

#[test]
fn a_pod_too_big_for_every_node_waits_then_lands_on_a_new_node() {
    let (_server, k) = Kubectl::start_server(&[]);
    let mut small = HollowAgent::start(&k.kubeconfig, 2, "small-", &["--hollow-cpu", "1"]);
    wait_ready_nodes(&k, &mut small, &["small-0", "small-1"]);
    create(&k, &pod("big", "app: big", "2", ""));

    let msg = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: \
               2 No preemption victims found for incoming pod.";
    let described = wait_described(&k, "big", msg);
    assert!(described.contains("FailedScheduling"), "{described}");
    assert!(described.contains("default-scheduler"), "{described}");
    assert!(described.contains("Warning"), "{described}");
    let condition = k.ok(&[
        "get",
        "pod",
        "big",
        "-o",
        r#"jsonpath={.status.conditions[?(@.type=="PodScheduled")].status}/{.status.conditions[?(@.type=="PodScheduled")].reason}/{.status.conditions[?(@.type=="PodScheduled")].message}"#,
    ]);
    assert_eq!(condition, format!("False/Unschedulable/{msg}"));
    let phase = k.ok(&[
        "get",
        "pod",
        "big",
        "-o",
        "jsonpath={.status.phase}/{.spec.nodeName}",
    ]);
    assert_eq!(phase, "Pending/");
    let events = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=FailedScheduling",
    ]);
    assert!(events.contains("pod/big"), "{events}");
    // The scheduler runs as the holder of its own Lease.
    let holder = k.ok(&[
        "get",
        "lease",
        "-n",
        "kube-system",
        "kube-scheduler",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    assert!(!holder.is_empty(), "kube-scheduler Lease without a holder");

    // A node with room: its registration brings the pod back from the unschedulable pool,
    // and the node's (hollow) kubelet runs it.
    let mut large = HollowAgent::start(&k.kubeconfig, 1, "large-", &["--hollow-cpu", "4"]);
    wait_ready_nodes(&k, &mut large, &["large-0"]);
    assert_eq!(wait_scheduled(&k, "big"), "large-0");
    wait_described(&k, "big", "Successfully assigned default/big to large-0");
    let scheduled = k.ok(&[
        "get",
        "pod",
        "big",
        "-o",
        r#"jsonpath={.status.conditions[?(@.type=="PodScheduled")].status}"#,
    ]);
    assert_eq!(scheduled, "True");
    common::wait_for("pod big Running", WAIT, || {
        let phase = k.ok(&["get", "pod", "big", "-o", "jsonpath={.status.phase}"]);
        (phase == "Running").then_some(())
    });
    // Pods that fit spread by LeastAllocated: three 500m pods (little-1..3) go to the emptiest
    // nodes.
    for i in 1..=3 {
        create(&k, &pod(&format!("little-{i}"), "app: little", "500m", ""));
        wait_scheduled(&k, &format!("little-{i}"));
    }
    let mut nodes: Vec<String> = wide_nodes(&k, "app=little")
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    nodes.sort();
    // Scores (LeastAllocated + BalancedAllocation over cpu and memory, the memory request
    // being upstream's 200Mi non-zero default; the other plugins score every node alike): an
    // empty small node 74 + 75 beats large-0 (2 of 4 cpu used) 67 + 69, so small-0 and
    // small-1 first; the third finds them at 48 + 51 and goes to large-0.
    assert_eq!(nodes, vec!["large-0", "small-0", "small-1"]);
}

#[test]
fn taints_selectors_and_anti_affinity_decide_placement() {
    let (_server, k) = Kubectl::start_server(NO_HEARTBEAT_NODES);
    add_node(&k, "ssd", "4", ", disk: ssd", "[]");
    add_node(
        &k,
        "gpu",
        "4",
        "",
        "[{key: dedicated, value: gpu, effect: NoSchedule}]",
    );
    add_node(&k, "plain", "4", "", "[]");

    create(
        &k,
        &pod("fast", "app: fast", "100m", "  nodeSelector: {disk: ssd}\n"),
    );
    assert_eq!(wait_scheduled(&k, "fast"), "ssd");

    let tolerate =
        "  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n";
    create(
        &k,
        &pod(
            "trainer",
            "app: trainer",
            "100m",
            &format!("{tolerate}  nodeSelector: {{kubernetes.io/hostname: gpu}}\n"),
        ),
    );
    assert_eq!(wait_scheduled(&k, "trainer"), "gpu");

    // Without the toleration the gpu node is refused for its taint, the others for the
    // selector; preemption cannot help with either.
    create(
        &k,
        &pod(
            "intruder",
            "app: intruder",
            "100m",
            "  nodeSelector: {kubernetes.io/hostname: gpu}\n",
        ),
    );
    wait_described(
        &k,
        "intruder",
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, \
         2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are \
         available: 3 Preemption is not helpful for scheduling.",
    );

    // Required anti-affinity by hostname: one web pod per node, the fourth waits.
    let anti = format!(
        "{tolerate}  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - topologyKey: kubernetes.io/hostname\n        labelSelector: {{matchLabels: {{app: web}}}}\n"
    );
    for i in 1..=3 {
        create(&k, &pod(&format!("web-{i}"), "app: web", "100m", &anti));
        wait_scheduled(&k, &format!("web-{i}"));
    }
    let mut nodes: Vec<String> = wide_nodes(&k, "app=web")
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    nodes.sort();
    assert_eq!(nodes, vec!["gpu", "plain", "ssd"]);
    create(&k, &pod("web-4", "app: web", "100m", &anti));
    wait_described(
        &k,
        "web-4",
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. \
         preemption: \
         0/3 nodes are available: 3 No preemption victims found for incoming pod.",
    );
    // Deleting one web pod frees its node for the waiting one.
    let freed = node_of(&k, "web-2");
    k.ok(&["delete", "pod", "web-2", "--grace-period=0", "--force"]);
    assert_eq!(wait_scheduled(&k, "web-4"), freed);
}

#[test]
fn a_high_priority_pod_preempts_a_low_priority_one() {
    let (_server, k) = Kubectl::start_server(NO_HEARTBEAT_NODES);
    // The Priority admission plugin gives pods their class's value and preemption policy.
    for (name, value, policy) in [
        ("low", 10, "PreemptLowerPriority"),
        ("high", 1000, "PreemptLowerPriority"),
        ("high-polite", 1000, "Never"),
    ] {
        k.ok_stdin(
            &["apply", "-f", "-"],
            Some(&format!(
                "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: {name}\nvalue: {value}\npreemptionPolicy: {policy}\n"
            )),
        );
    }
    add_node(&k, "only", "2", "", "[]");
    create(
        &k,
        &pod(
            "victim",
            "app: victim",
            "1500m",
            "  priorityClassName: low\n",
        ),
    );
    assert_eq!(wait_scheduled(&k, "victim"), "only");

    // preemptionPolicy: Never: waits instead of preempting.
    create(
        &k,
        &pod(
            "polite",
            "app: polite",
            "1500m",
            "  priorityClassName: high-polite\n",
        ),
    );
    wait_described(
        &k,
        "polite",
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.",
    );
    assert_eq!(node_of(&k, "victim"), "only");
    k.ok(&["delete", "pod", "polite", "--grace-period=0", "--force"]);

    let victim_uid = k.ok(&["get", "pod", "victim", "-o", "jsonpath={.metadata.uid}"]);
    create(
        &k,
        &pod("vip", "app: vip", "1500m", "  priorityClassName: high\n"),
    );
    let vip_uid = k.ok(&["get", "pod", "vip", "-o", "jsonpath={.metadata.uid}"]);
    // The victim is deleted (gracefully: no kubelet here, so we finish its deletion as the
    // kubelet would), and the preemptor is nominated, then bound, to the node.
    common::wait_for("the victim's deletion", WAIT, || {
        let out = k.run(&[
            "get",
            "pod",
            "victim",
            "-o",
            "jsonpath={.metadata.uid}/{.metadata.deletionTimestamp}",
        ]);
        let gone = !out.ok || !out.stdout.starts_with(&victim_uid);
        let terminating = out.ok
            && out.stdout.starts_with(&format!("{victim_uid}/"))
            && !out.stdout.ends_with('/');
        (gone || terminating).then_some(())
    });
    let nominated = k.ok(&[
        "get",
        "pod",
        "vip",
        "-o",
        "jsonpath={.status.nominatedNodeName}/{.spec.nodeName}",
    ]);
    assert!(
        nominated == "only/" || nominated == "only/only",
        "{nominated}"
    );
    let _ = k.run(&["delete", "pod", "victim", "--grace-period=0", "--force"]);
    assert_eq!(wait_scheduled(&k, "vip"), "only");
    let events = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Preempted",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert_eq!(events, format!("Preempted by pod {vip_uid} on node only"));
}
