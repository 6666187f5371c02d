//! Which nodes a DaemonSet's pod belongs on (upstream's `NodeShouldRunDaemonPod`) and the pod
//! it creates there (`NewPod`, `CreatePodTemplate`, `ReplaceDaemonSetPodNodeNameNodeAffinity`).
//! The node checks are the ones the scheduler's filters use (`NodeAffinity` with
//! `nodeSelector`, `TaintToleration`, from [`k3rs_apimachinery::scheduling`]), run against the
//! template with the tolerations every daemon pod gets.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, PodTemplateSpec, Toleration,
};

use crate::pod_template::{pod_from_template, pods_prefix};
use crate::ref_manager::controller_ref;
use k3rs_apimachinery::scheduling::{required_node_affinity_matches, untolerated_taint};

/// The label with the hash of the template a pod was made from (and on ControllerRevisions).
pub const REVISION_LABEL: &str = "controller-revision-hash";
/// The label with the DaemonSet's template generation a pod was made at.
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// The DaemonSet annotation carrying its template generation (the internal
/// `spec.templateGeneration`).
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// Whether a daemon pod should be created on a node, and whether one already there may stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eligibility {
    pub should_run: bool,
    pub should_continue_running: bool,
}

fn exists(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Toleration::default()
    }
}

/// Upstream's `AddOrUpdateTolerationInPodSpec`: a toleration with the same key, operator,
/// value and effect is replaced, any other is kept; the new one is appended otherwise.
fn add_or_update(tolerations: &mut Vec<Toleration>, t: Toleration) {
    let same = |o: &Toleration| {
        o.key == t.key
            && o.operator.as_deref().unwrap_or("Equal") == t.operator.as_deref().unwrap_or("Equal")
            && o.value == t.value
            && o.effect == t.effect
    };
    match tolerations.iter_mut().find(|o| same(o)) {
        Some(o) => *o = t,
        None => tolerations.push(t),
    }
}

/// Adds the tolerations every daemon pod carries (upstream's
/// `AddOrUpdateDaemonPodTolerations`): not-ready and unreachable NoExecute without
/// tolerationSeconds, the pressure conditions and unschedulable NoSchedule, and
/// network-unavailable NoSchedule for hostNetwork pods.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        exists("node.kubernetes.io/not-ready", "NoExecute"),
        exists("node.kubernetes.io/unreachable", "NoExecute"),
        exists("node.kubernetes.io/disk-pressure", "NoSchedule"),
        exists("node.kubernetes.io/memory-pressure", "NoSchedule"),
        exists("node.kubernetes.io/pid-pressure", "NoSchedule"),
        exists("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        wanted.push(exists(
            "node.kubernetes.io/network-unavailable",
            "NoSchedule",
        ));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for t in wanted {
        add_or_update(tolerations, t);
    }
}

/// The pod spec the node checks look at: the template's with the daemon tolerations.
pub fn daemon_pod_spec(template: &PodTemplateSpec) -> PodSpec {
    let mut spec = template.spec.clone().unwrap_or_default();
    add_daemon_tolerations(&mut spec);
    spec
}

/// Upstream's `NodeShouldRunDaemonPod` for `pod` (from [`daemon_pod_spec`]): the template's
/// nodeName (if any) and node affinity/selector must match, else nothing runs there; an
/// untolerated NoSchedule/NoExecute taint keeps new pods off, and an untolerated NoExecute
/// taint also removes the ones there.
pub fn node_should_run(pod: &PodSpec, node: &Node) -> Eligibility {
    const NEITHER: Eligibility = Eligibility {
        should_run: false,
        should_continue_running: false,
    };
    static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
    let name = node.metadata.name.as_deref().unwrap_or("");
    let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
    if pod
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != name)
    {
        return NEITHER;
    }
    if !required_node_affinity_matches(Some(pod), labels, name) {
        return NEITHER;
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tolerations = pod.tolerations.as_deref().unwrap_or_default();
    if untolerated_taint(taints, tolerations, &["NoSchedule", "NoExecute"]).is_some() {
        return Eligibility {
            should_run: false,
            should_continue_running: untolerated_taint(taints, tolerations, &["NoExecute"])
                .is_none(),
        };
    }
    Eligibility {
        should_run: true,
        should_continue_running: true,
    }
}

fn pinned_selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
        }],
    }
}

/// Upstream's `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes
/// the single term `metadata.name In [node]`; preferred terms and other affinities stay.
pub fn pin_to_node(affinity: Option<Affinity>, node: &str) -> Affinity {
    let mut affinity = affinity.unwrap_or_default();
    let na = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution = Some(pinned_selector(node));
    affinity
}

/// The node a daemon pod is for (upstream's `GetTargetNodeName`): its nodeName, else the
/// single `metadata.name In [node]` field requirement of its required node affinity.
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| {
            f.key == "metadata.name"
                && f.operator == "In"
                && f.values.as_ref().is_some_and(|v| v.len() == 1)
        })
        .and_then(|f| f.values.as_ref()?.first().cloned())
}

/// The DaemonSet's template generation (its annotation), if it has a valid one.
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_GENERATION_ANNOTATION)?
        .parse()
        .ok()
}

/// Upstream's `IsPodUpdated`: the pod carries the current hash, or the current template
/// generation.
pub fn is_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    let hash_matches = !hash.is_empty() && label(REVISION_LABEL) == Some(hash);
    let generation_matches =
        generation.is_some_and(|g| label(TEMPLATE_GENERATION_LABEL) == Some(&g.to_string()));
    hash_matches || generation_matches
}

/// The daemon pod for `node` from `template` (the revision's), owned by `ds`: the template's
/// metadata and spec, the daemon tolerations, the revision hash and template generation
/// labels, and the required node affinity pinned to `node` — the scheduler binds it.
pub fn new_pod(ds: &DaemonSet, template: &PodTemplateSpec, node: &str, hash: &str) -> Pod {
    let ns = ds.metadata.namespace.clone().unwrap_or_default();
    let name = ds.metadata.name.clone().unwrap_or_default();
    let owner = controller_ref("apps/v1", "DaemonSet", &ds.metadata);
    let mut pod = pod_from_template(template, &ns, &pods_prefix(&name), owner);
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    let generation = template_generation(ds).or(ds.metadata.generation);
    if let Some(g) = generation {
        labels.insert(TEMPLATE_GENERATION_LABEL.into(), g.to_string());
    }
    labels.insert(REVISION_LABEL.into(), hash.into());
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    add_daemon_tolerations(spec);
    spec.affinity = Some(pin_to_node(spec.affinity.take(), node));
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    fn template(spec: serde_json::Value) -> PodTemplateSpec {
        serde_json::from_value(json!({"metadata": {"labels": {"app": "agent"}}, "spec": spec}))
            .unwrap()
    }

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value::<Node>(v).unwrap()
    }

    fn eligibility(spec: serde_json::Value, n: serde_json::Value) -> (bool, bool) {
        let e = node_should_run(&daemon_pod_spec(&template(spec)), &node(n));
        (e.should_run, e.should_continue_running)
    }

    #[test]
    fn daemon_tolerations_are_added_and_replace_same_ones() {
        let mut spec: PodSpec = serde_json::from_value(json!({"containers": [],
            "hostNetwork": true,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "gpu", "operator": "Exists"}]}))
        .unwrap();
        add_daemon_tolerations(&mut spec);
        assert_eq!(
            serde_json::to_value(&spec.tolerations).unwrap(),
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
                {"key": "gpu", "operator": "Exists"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
                {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"},
            ])
        );
        let mut plain = PodSpec::default();
        add_daemon_tolerations(&mut plain);
        assert_eq!(plain.tolerations.unwrap().len(), 6);
    }

    #[test]
    fn node_selector_and_affinity_decide_both() {
        let n = json!({"metadata": {"name": "n1", "labels": {"disk": "ssd"}}});
        assert_eq!(
            eligibility(json!({"containers": []}), n.clone()),
            (true, true)
        );
        assert_eq!(
            eligibility(
                json!({"containers": [], "nodeSelector": {"disk": "hdd"}}),
                n.clone()
            ),
            (false, false)
        );
        let affinity = json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}});
        assert_eq!(eligibility(affinity, n.clone()), (true, true));
        assert_eq!(
            eligibility(json!({"containers": [], "nodeName": "n2"}), n),
            (false, false)
        );
    }

    #[test]
    fn taints_keep_new_pods_off_and_no_execute_removes_old_ones() {
        let tainted = |effect: &str| {
            json!({"metadata": {"name": "n1"},
                "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": effect}]}})
        };
        let plain = json!({"containers": []});
        assert_eq!(
            eligibility(plain.clone(), tainted("NoSchedule")),
            (false, true)
        );
        assert_eq!(
            eligibility(plain.clone(), tainted("NoExecute")),
            (false, false)
        );
        assert_eq!(
            eligibility(plain, tainted("PreferNoSchedule")),
            (true, true)
        );
        let tolerating = json!({"containers": [], "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "db"}]});
        assert_eq!(eligibility(tolerating, tainted("NoExecute")), (true, true));
        // The daemon tolerations: cordoned and not-ready nodes still run daemon pods.
        let not_ready = json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true,
            "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
                       {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}});
        assert_eq!(
            eligibility(json!({"containers": []}), not_ready),
            (true, true)
        );
    }

    #[test]
    fn new_pods_are_pinned_labelled_and_owned() {
        let ds: DaemonSet = serde_json::from_value(json!({
            "metadata": {"name": "agent", "namespace": "kube-system", "uid": "u", "generation": 3,
                "annotations": {TEMPLATE_GENERATION_ANNOTATION: "2"}},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                "template": {"metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}],
                        "affinity": {"nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "a", "operator": "Exists"}]}]},
                            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                                "preference": {"matchExpressions": [{"key": "b", "operator": "Exists"}]}}]}}}}}
        }))
        .unwrap();
        let template = ds.spec.as_ref().unwrap().template.clone();
        let pod = new_pod(&ds, &template, "n7", "h4sh");
        let v = serde_json::to_value(&pod).unwrap();
        assert_eq!(v["metadata"]["generateName"], "agent-");
        assert_eq!(
            v["metadata"]["labels"],
            json!({"app": "agent", REVISION_LABEL: "h4sh", TEMPLATE_GENERATION_LABEL: "2"})
        );
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
        assert_eq!(v["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(
            v["spec"]["affinity"]["nodeAffinity"],
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n7"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                    "preference": {"matchExpressions": [{"key": "b", "operator": "Exists"}]}}]})
        );
        assert_eq!(v["spec"]["tolerations"].as_array().unwrap().len(), 6);
        assert_eq!(target_node(&pod).as_deref(), Some("n7"));
        assert!(is_updated(&pod, "h4sh", None));
        assert!(is_updated(&pod, "other", Some(2)));
        assert!(!is_updated(&pod, "other", Some(3)));
        assert!(!is_updated(&pod, "", None));
    }

    #[test]
    fn target_node_prefers_the_bound_node() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {},
            "spec": {"containers": [], "nodeName": "n1"}}))
        .unwrap();
        assert_eq!(target_node(&pod).as_deref(), Some("n1"));
        let loose: Pod =
            serde_json::from_value(json!({"metadata": {}, "spec": {"containers": []}})).unwrap();
        assert_eq!(target_node(&loose), None);
    }
}
