//! The DaemonSet controller against the real binary, real kubectl and hollow nodes
//! (`k3rs agent --hollow`): one pod per eligible node that follows nodes joining and leaving,
//! nodeSelector and taints (with tolerations) limit where, pods are pinned by node affinity
//! and bound by the scheduler; a rolling update keeps within maxUnavailable at every pod event
//! a watch shows, a surging one keeps every node served; `kubectl rollout
//! status/history/undo daemonset` work; events show in `kubectl describe`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::common;
use crate::common::hollow::HollowAgent;
use crate::common::kubectl::{json, pod_ready as is_ready, wait_json, Kubectl, Watch};
use serde_json::Value;

/// A server with Ready hollow nodes `<prefix>0..count`; the nodes stop first when dropped.
struct Cluster {
    agent: Option<HollowAgent>,
    _server: common::K3rs,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.agent.take();
    }
}

fn wait_ready_nodes(k: &Kubectl, agent: &mut HollowAgent, names: &[String]) {
    common::wait_for("Ready hollow nodes", Duration::from_secs(60), || {
        agent.proc.assert_running();
        let rows = common::kubectl::table(&k.run(&["get", "nodes", "--no-headers"]).stdout);
        names
            .iter()
            .all(|n| rows.iter().any(|r| &r[0] == n && r[1] == "Ready"))
            .then_some(())
    });
}

fn node_names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}{i}")).collect()
}

fn cluster(prefix: &str, count: usize) -> (Cluster, Kubectl) {
    let (server, k) = Kubectl::start_server(&[]);
    let mut agent = HollowAgent::start(&k.kubeconfig, count, prefix, &[]);
    wait_ready_nodes(&k, &mut agent, &node_names(prefix, count));
    let cluster = Cluster {
        agent: Some(agent),
        _server: server,
    };
    (cluster, k)
}

/// Node → names of the live (not terminating) pods of `selector`, and whether all are
/// Running and Ready on the node they are pinned to.
fn pods_by_node(k: &Kubectl, selector: &str) -> (BTreeMap<String, Vec<String>>, bool) {
    let pods = json(k, &["get", "pods", "-l", selector]);
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut all_ready = true;
    for p in pods["items"].as_array().unwrap() {
        if !p["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
        all_ready &= is_ready(p) && !node.is_empty() && node == pinned_node(p);
        let name = p["metadata"]["name"].as_str().unwrap().to_string();
        by_node.entry(node.to_string()).or_default().push(name);
    }
    (by_node, all_ready)
}

/// The node a daemon pod's required node affinity pins it to.
fn pinned_node(pod: &Value) -> String {
    let terms = &pod["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    assert_eq!(terms.as_array().map(Vec::len), Some(1), "{terms}");
    let field = &terms[0]["matchFields"][0];
    assert_eq!(field["key"], "metadata.name");
    assert_eq!(field["operator"], "In");
    field["values"][0].as_str().unwrap_or_default().to_string()
}

/// Waits until `selector`'s pods are exactly one Running and Ready pod on each of `nodes`.
fn wait_one_pod_on(k: &Kubectl, selector: &str, nodes: &[&str]) -> BTreeMap<String, Vec<String>> {
    let want: BTreeSet<&str> = nodes.iter().copied().collect();
    common::wait_for(
        &format!("one ready {selector} pod on each of {nodes:?}"),
        Duration::from_secs(90),
        || {
            let (by_node, ready) = pods_by_node(k, selector);
            let on: BTreeSet<&str> = by_node.keys().map(String::as_str).collect();
            (ready && on == want && by_node.values().all(|p| p.len() == 1)).then_some(by_node)
        },
    )
}

fn daemonset(name: &str, extra_spec: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: c, image: "busybox:1.36"}}]
{extra_spec}
"#
    )
}

fn status_of(k: &Kubectl, name: &str) -> Value {
    json(k, &["get", "daemonset", name])["status"].clone()
}

fn wait_status(k: &Kubectl, name: &str, want: &[(&str, i64)]) -> Value {
    let what = format!("daemonset {name} status {want:?}");
    wait_json(k, &what, &["get", "daemonset", name], |ds| {
        want.iter().all(|(f, v)| ds["status"][*f] == *v)
            && ds["status"]["observedGeneration"] == ds["metadata"]["generation"]
    })["status"]
        .clone()
}

#[test]
fn daemon_sets_follow_nodes_selectors_and_taints() {
    let (cluster, k) = cluster("dsn-", 2);
    k.ok_stdin(&["apply", "-f", "-"], Some(&daemonset("agent", "")));
    let first = wait_one_pod_on(&k, "app=agent", &["dsn-0", "dsn-1"]);
    wait_status(
        &k,
        "agent",
        &[
            ("desiredNumberScheduled", 2),
            ("currentNumberScheduled", 2),
            ("numberReady", 2),
            ("numberAvailable", 2),
            ("updatedNumberScheduled", 2),
            ("numberMisscheduled", 0),
        ],
    );
    let ds = json(&k, &["get", "daemonset", "agent"]);
    let pod = json(&k, &["get", "pod", &first["dsn-0"][0]]);
    let labels = &pod["metadata"]["labels"];
    let revisions = json(&k, &["get", "controllerrevisions", "-l", "app=agent"]);
    let revisions = revisions["items"].as_array().unwrap();
    assert_eq!(revisions.len(), 1, "{revisions:?}");
    let hash = revisions[0]["metadata"]["labels"]["controller-revision-hash"].clone();
    assert_eq!(labels["controller-revision-hash"], hash);
    assert_eq!(
        revisions[0]["metadata"]["name"],
        format!("agent-{}", hash.as_str().unwrap())
    );
    assert_eq!(revisions[0]["revision"], 1);
    assert_eq!(
        labels["pod-template-generation"],
        ds["metadata"]["generation"].to_string()
    );
    let owner = &pod["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "DaemonSet");
    assert_eq!(owner["uid"], ds["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    // Daemon pods tolerate not-ready/unreachable for good (no DefaultTolerationSeconds).
    for t in pod["spec"]["tolerations"].as_array().unwrap() {
        if t["effect"] == "NoExecute" {
            assert!(t["tolerationSeconds"].is_null(), "{t}");
        }
    }
    let tolerations = pod["spec"]["tolerations"].to_string();
    for key in ["not-ready", "unreachable", "unschedulable", "disk-pressure"] {
        assert!(
            tolerations.contains(&format!("node.kubernetes.io/{key}")),
            "{tolerations}"
        );
    }
    let describe = k.ok(&["describe", "daemonset", "agent"]);
    assert!(describe.contains("SuccessfulCreate"), "{describe}");
    assert!(
        describe.contains(&format!("Created pod: {}", first["dsn-0"][0])),
        "{describe}"
    );

    // A node joins: it gets a pod. It leaves: its pod goes.
    let mut extra = HollowAgent::start(&k.kubeconfig, 1, "dsx-", &[]);
    wait_ready_nodes(&k, &mut extra, &["dsx-0".to_string()]);
    let three = wait_one_pod_on(&k, "app=agent", &["dsn-0", "dsn-1", "dsx-0"]);
    assert_eq!(three["dsn-0"], first["dsn-0"], "existing pods stay");
    wait_status(
        &k,
        "agent",
        &[("desiredNumberScheduled", 3), ("numberReady", 3)],
    );
    drop(extra);
    k.ok(&["delete", "node", "dsx-0"]);
    common::wait_for(
        "the gone node's pod removed",
        Duration::from_secs(90),
        || {
            let out = k.ok(&["get", "pods", "-l", "app=agent", "-o", "name"]);
            (!out.contains(&three["dsx-0"][0])).then_some(())
        },
    );
    wait_status(
        &k,
        "agent",
        &[("desiredNumberScheduled", 2), ("currentNumberScheduled", 2)],
    );

    // nodeSelector: only the labelled node.
    k.ok(&["label", "node", "dsn-1", "role=edge"]);
    let selected = "      nodeSelector: {role: edge}";
    k.ok_stdin(&["apply", "-f", "-"], Some(&daemonset("edge", selected)));
    wait_one_pod_on(&k, "app=edge", &["dsn-1"]);
    wait_status(
        &k,
        "edge",
        &[("desiredNumberScheduled", 1), ("numberReady", 1)],
    );
    // The label goes: so does the pod.
    k.ok(&["label", "node", "dsn-1", "role-"]);
    common::wait_for("edge pod removed", Duration::from_secs(60), || {
        pods_by_node(&k, "app=edge").0.is_empty().then_some(())
    });
    wait_status(
        &k,
        "edge",
        &[("desiredNumberScheduled", 0), ("currentNumberScheduled", 0)],
    );

    // A NoSchedule taint: new DaemonSets skip the node unless they tolerate it; the pod
    // already there stays, counted as misscheduled.
    k.ok(&["taint", "node", "dsn-0", "dedicated=db:NoSchedule"]);
    k.ok_stdin(&["apply", "-f", "-"], Some(&daemonset("plain", "")));
    let tolerating = "      tolerations: [{key: dedicated, operator: Equal, value: db}]";
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&daemonset("tolerant", tolerating)),
    );
    wait_one_pod_on(&k, "app=plain", &["dsn-1"]);
    wait_one_pod_on(&k, "app=tolerant", &["dsn-0", "dsn-1"]);
    wait_status(
        &k,
        "plain",
        &[("desiredNumberScheduled", 1), ("numberReady", 1)],
    );
    wait_status(
        &k,
        "tolerant",
        &[("desiredNumberScheduled", 2), ("numberReady", 2)],
    );
    wait_status(
        &k,
        "agent",
        &[("desiredNumberScheduled", 1), ("numberMisscheduled", 1)],
    );
    assert_eq!(pods_by_node(&k, "app=agent").0["dsn-0"], first["dsn-0"]);
    // NoExecute: the untolerating pods leave the node.
    k.ok(&["taint", "node", "dsn-0", "dedicated=db:NoExecute"]);
    wait_one_pod_on(&k, "app=agent", &["dsn-1"]);
    wait_one_pod_on(&k, "app=tolerant", &["dsn-0", "dsn-1"]);
    let events = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=SuccessfulDelete",
    ]);
    assert!(events.contains("Deleted pod: edge-"), "{events}");
    drop(cluster);
}

/// What a watch on a DaemonSet's pods showed: the worst moment of a rollout.
#[derive(Default)]
struct Observed {
    events: usize,
    /// Most nodes at once without a Ready, non-terminating pod.
    max_unserved: usize,
    /// Most nodes at once with two live pods of which one is not ready (surging).
    max_surging: usize,
    /// Every event: type, pod, and the pods per node after it (for failure messages).
    timeline: Vec<String>,
}

/// Replays the `kubectl get -w --output-watch-events -o json` output `text` over `nodes`.
fn replay(text: &str, nodes: &[String]) -> Observed {
    let mut pods: BTreeMap<String, Value> = BTreeMap::new();
    let mut seen = Observed::default();
    for ev in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        let Ok(ev) = ev else { break };
        let obj = ev["object"].clone();
        let name: String = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if ev["type"] == "DELETED" {
            pods.remove(&name);
        } else {
            pods.insert(name.clone(), obj);
        }
        seen.events += 1;
        if seen.events <= nodes.len() {
            // The watch's initial list, one pod at a time: not a state of the rollout.
            continue;
        }
        let live: Vec<&Value> = pods
            .values()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        let on = |n: &String| live.iter().filter(|p| pinned_node(p) == *n).count();
        let unready = |n: &String| live.iter().any(|p| pinned_node(p) == *n && !is_ready(p));
        let served = |n: &String| live.iter().any(|p| pinned_node(p) == *n && is_ready(p));
        seen.max_unserved = seen
            .max_unserved
            .max(nodes.iter().filter(|n| !served(n)).count());
        seen.max_surging = seen
            .max_surging
            .max(nodes.iter().filter(|n| on(n) > 1 && unready(n)).count());
        let state: Vec<String> = live
            .iter()
            .map(|p| {
                let ready = if is_ready(p) { "ready" } else { "unready" };
                format!(
                    "{}@{}:{ready}",
                    p["metadata"]["name"].as_str().unwrap_or(""),
                    pinned_node(p)
                )
            })
            .collect();
        seen.timeline
            .push(format!("{} {name}: {}", ev["type"], state.join(" ")));
    }
    seen
}

fn image_of(ds: &Value) -> String {
    ds["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Rolls `roll` to `image` and returns what the pod watch saw from the start of the update
/// to the end of the rollout.
fn roll_to(
    k: &Kubectl,
    dir: &std::path::Path,
    step: &str,
    image: &str,
    nodes: &[String],
) -> Observed {
    let out = dir.join(format!("watch-{step}.json"));
    let watch = Watch::start(
        k,
        &[
            "get",
            "pods",
            "-l",
            "app=roll",
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
        ],
        &out,
    );
    watch.wait_for("\"type\":\"ADDED\"", nodes.len());
    k.ok(&["set", "image", "daemonset/roll", &format!("c={image}")]);
    let status = k.ok(&["rollout", "status", "daemonset/roll", "--timeout=90s"]);
    assert!(
        status.contains("daemon set \"roll\" successfully rolled out"),
        "{status}"
    );
    // Every pod is on the new image, one per node.
    let by_node = wait_one_pod_on(
        k,
        "app=roll",
        &nodes.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for pods in by_node.values() {
        let pod = json(k, &["get", "pod", &pods[0]]);
        assert_eq!(pod["spec"]["containers"][0]["image"], image);
    }
    std::thread::sleep(Duration::from_millis(500));
    let seen = replay(&watch.text(), nodes);
    drop(watch);
    seen
}

/// Merge-patches `roll`'s updateStrategy with `patch`.
fn set_strategy(k: &Kubectl, patch: &str) {
    let p = format!(r#"{{"spec":{{"updateStrategy":{patch}}}}}"#);
    k.ok(&["patch", "daemonset", "roll", "--type=merge", "-p", &p]);
}

/// `kubectl rollout history daemonset/roll` and the revision numbers it lists.
fn revisions(k: &Kubectl) -> (String, Vec<i64>) {
    let history = k.ok(&["rollout", "history", "daemonset/roll"]);
    let numbers = common::kubectl::table(&history)
        .iter()
        .filter_map(|r| r.first()?.parse().ok())
        .collect();
    (history, numbers)
}

#[test]
fn rolling_updates_keep_their_bounds_and_rollout_commands_work() {
    let nodes = node_names("dsr-", 4);
    let (cluster, k) = cluster("dsr-", nodes.len());
    let dir = tempfile::tempdir().unwrap();
    let strategy = "  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 2}}";
    let spec = daemonset("roll", "").replace("busybox:1.36", "busybox:1.35") + strategy;
    k.ok_stdin(&["apply", "-f", "-"], Some(&spec));
    let refs: Vec<&str> = nodes.iter().map(String::as_str).collect();
    wait_one_pod_on(&k, "app=roll", &refs);
    let out = k.ok(&["rollout", "status", "daemonset/roll", "--timeout=90s"]);
    assert!(out.contains("successfully rolled out"), "{out}");

    // maxUnavailable 2: never more than two nodes without a ready pod, and it does use two.
    let seen = roll_to(&k, dir.path(), "unavailable", "busybox:1.36", &nodes);
    assert!(seen.events > 12, "only {} pod events observed", seen.events);
    assert_eq!(
        seen.max_unserved,
        2,
        "nodes without a ready pod at the worst moment:\n{}",
        seen.timeline.join("\n")
    );
    assert_eq!(seen.max_surging, 0);
    wait_status(
        &k,
        "roll",
        &[
            ("updatedNumberScheduled", 4),
            ("numberAvailable", 4),
            ("numberUnavailable", 0),
        ],
    );

    // maxSurge 1, maxUnavailable 0: every node keeps a ready pod, one node at a time doubles.
    set_strategy(&k, r#"{"rollingUpdate":{"maxUnavailable":0,"maxSurge":1}}"#);
    let seen = roll_to(&k, dir.path(), "surge", "busybox:1.37", &nodes);
    assert_eq!(
        seen.max_unserved, 0,
        "a node lost its ready pod while surging"
    );
    assert_eq!(seen.max_surging, 1, "nodes surging at once");

    // History: three revisions; undo goes back to the second template.
    let (history, numbers) = revisions(&k);
    assert_eq!(numbers, [1, 2, 3], "{history}");
    let detail = k.ok(&["rollout", "history", "daemonset/roll", "--revision=1"]);
    assert!(detail.contains("busybox:1.35"), "{detail}");
    let out = k.ok(&["rollout", "undo", "daemonset/roll"]);
    assert!(out.contains("rolled back"), "{out}");
    let out = k.ok(&["rollout", "status", "daemonset/roll", "--timeout=90s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    assert_eq!(
        image_of(&json(&k, &["get", "daemonset", "roll"])),
        "busybox:1.36"
    );
    let by_node = wait_one_pod_on(&k, "app=roll", &refs);
    for pods in by_node.values() {
        let pod = json(&k, &["get", "pod", &pods[0]]);
        assert_eq!(pod["spec"]["containers"][0]["image"], "busybox:1.36");
    }
    // The second revision became the fourth (no duplicate revision for the same template).
    let (history, numbers) = revisions(&k);
    assert_eq!(numbers, [1, 3, 4], "{history}");
    k.ok(&["rollout", "undo", "daemonset/roll", "--to-revision=1"]);
    k.ok(&["rollout", "status", "daemonset/roll", "--timeout=90s"]);
    assert_eq!(
        image_of(&json(&k, &["get", "daemonset", "roll"])),
        "busybox:1.35"
    );
    let st = status_of(&k, "roll");
    assert_eq!(st["updatedNumberScheduled"], 4, "{st}");

    // OnDelete: a new template replaces nothing until a pod is deleted.
    set_strategy(&k, r#"{"type":"OnDelete","rollingUpdate":null}"#);
    let before = pods_by_node(&k, "app=roll").0;
    k.ok(&["set", "image", "daemonset/roll", "c=busybox:1.38"]);
    wait_status(
        &k,
        "roll",
        &[("updatedNumberScheduled", 0), ("numberReady", 4)],
    );
    assert_eq!(pods_by_node(&k, "app=roll").0, before);
    k.ok(&["delete", "pod", &before["dsr-0"][0]]);
    wait_status(
        &k,
        "roll",
        &[("updatedNumberScheduled", 1), ("numberReady", 4)],
    );
    let after = pods_by_node(&k, "app=roll").0;
    assert_ne!(after["dsr-0"], before["dsr-0"]);
    assert_eq!(after["dsr-1"], before["dsr-1"]);
    drop(cluster);
}
