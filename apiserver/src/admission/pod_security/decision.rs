//! What PodSecurity answers for one write, without I/O (pod-security-admission's
//! `Admission.EvaluatePod`, `EvaluatePodsInNamespace` and friends).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::Value;

use super::checks::{self, Pod};
use super::policy::{LevelVersion, Policy};

/// A pod's annotations and spec, owned (from a pod or a workload's pod template).
#[derive(Debug, Clone)]
pub struct PodParts {
    pub annotations: BTreeMap<String, String>,
    pub spec: PodSpec,
}

impl PodParts {
    fn view(&self) -> Pod<'_> {
        Pod {
            annotations: &self.annotations,
            spec: &self.spec,
        }
    }
}

/// The resources whose objects carry a pod template (`(group, kind)`), besides pods.
pub const POD_TEMPLATE_KINDS: &[(&str, &str)] = &[
    ("", "ReplicationController"),
    ("", "PodTemplate"),
    ("apps", "ReplicaSet"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
];

/// The pod template of a workload object of `kind` (`None` when it has none).
pub fn template_of<'a>(kind: &str, obj: &'a Value) -> Option<&'a Value> {
    let t = match kind {
        "PodTemplate" => &obj["template"],
        "CronJob" => &obj["spec"]["jobTemplate"]["spec"]["template"],
        _ => &obj["spec"]["template"],
    };
    t.is_object().then_some(t)
}

/// The annotations and spec of a pod (or pod template); an error when they do not decode.
pub fn parts_of(pod: &Value) -> Result<PodParts, serde_json::Error> {
    let annotations = match pod["metadata"].get("annotations") {
        Some(a) if !a.is_null() => serde_json::from_value(a.clone())?,
        _ => BTreeMap::new(),
    };
    let spec = match pod.get("spec") {
        Some(s) if !s.is_null() => serde_json::from_value(s.clone())?,
        _ => PodSpec::default(),
    };
    Ok(PodParts { annotations, spec })
}

/// The outcome of evaluating one pod against a namespace's policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evaluation {
    /// `violates PodSecurity "<enforce>": …` when enforcement denies the write.
    pub denied: Option<String>,
    /// `would violate PodSecurity "<audit>": …`, the `audit-violations` audit annotation.
    pub audit: Option<String>,
    /// `would violate PodSecurity "<warn>": …`, sent as a Warning (only when not denied).
    pub warning: Option<String>,
}

/// Evaluates `pod` against `policy`: enforce (for pods; `enforce == false` for workload
/// templates, which are only warned about), audit and warn, each level evaluated once.
pub fn evaluate(policy: &Policy, pod: &PodParts, enforce: bool) -> Evaluation {
    let view = pod.view();
    let mut cache: HashMap<LevelVersion, Vec<checks::Violation>> = HashMap::new();
    let mut violations = |lv: LevelVersion| -> Vec<checks::Violation> {
        cache
            .entry(lv)
            .or_insert_with(|| checks::evaluate(lv, &view))
            .clone()
    };
    let mut out = Evaluation::default();
    let text = |prefix: &str, lv: LevelVersion, v: &[checks::Violation]| {
        (!v.is_empty()).then(|| {
            format!(
                "{prefix} PodSecurity \"{lv}\": {}",
                checks::forbidden_detail(v)
            )
        })
    };
    if enforce {
        out.denied = text("violates", policy.enforce, &violations(policy.enforce));
    }
    out.audit = text("would violate", policy.audit, &violations(policy.audit));
    if out.denied.is_none() {
        out.warning = text("would violate", policy.warn, &violations(policy.warn));
    }
    out
}

/// At most this many existing pods are checked when a namespace's enforce level tightens.
pub const MAX_PODS_TO_CHECK: usize = 3000;

/// An existing pod, as the namespace check sees it.
#[derive(Debug, Clone)]
pub struct ExistingPod {
    pub name: String,
    /// The uid of its controller (`ownerReferences[controller=true]`), if any.
    pub controller: Option<String>,
    pub parts: PodParts,
}

/// The warnings for tightening `namespace`'s enforce level to `enforce` while `pods` exist:
/// a summary line, then one line per distinct set of violations naming the first pod (by
/// name) and how many others share it. Pods of one controller are checked once before
/// their siblings.
pub fn namespace_warnings(
    namespace: &str,
    enforce: LevelVersion,
    pods: &[ExistingPod],
) -> Vec<String> {
    let prioritized = prioritize(pods);
    let total = prioritized.len();
    let checked = &prioritized[..total.min(MAX_PODS_TO_CHECK)];
    // reason → (first pod name, count), in first-seen order.
    let mut order: Vec<String> = Vec::new();
    let mut seen: HashMap<String, (String, usize)> = HashMap::new();
    for pod in checked {
        let v = checks::evaluate(enforce, &pod.parts.view());
        if v.is_empty() {
            continue;
        }
        let reason = checks::forbidden_reason(&v);
        match seen.get_mut(&reason) {
            Some((first, count)) => {
                if pod.name < *first {
                    *first = pod.name.clone();
                }
                *count += 1;
            }
            None => {
                order.push(reason.clone());
                seen.insert(reason, (pod.name.clone(), 1));
            }
        }
    }
    let mut warnings = Vec::new();
    if checked.len() < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {} of {total} existing pods",
            checked.len()
        ));
    }
    if !order.is_empty() {
        warnings.push(format!(
            "existing pods in namespace \"{namespace}\" violate the new PodSecurity enforce level \"{enforce}\""
        ));
    }
    let mut lines: Vec<String> = order
        .iter()
        .map(|reason| {
            let (first, count) = &seen[reason];
            match count {
                1 => format!("{first}: {reason}"),
                2 => format!("{first} (and 1 other pod): {reason}"),
                n => format!("{first} (and {} other pods): {reason}", n - 1),
            }
        })
        .collect();
    lines.sort();
    warnings.extend(lines);
    warnings
}

/// Pods without a controller and the first pod of each controller, then the other replicas.
fn prioritize(pods: &[ExistingPod]) -> Vec<&ExistingPod> {
    let mut first = Vec::new();
    let mut rest = Vec::new();
    let mut controllers = BTreeSet::new();
    for p in pods {
        match &p.controller {
            Some(uid) if !controllers.insert(uid.as_str()) => rest.push(p),
            _ => first.push(p),
        }
    }
    first.extend(rest);
    first
}

/// Whether tightening from `old` to `new` needs the existing pods checked.
pub fn enforce_tightened(old: &Policy, new: &Policy) -> bool {
    let (o, n) = (old.enforce, new.enforce);
    if n == o || n.level == super::policy::Level::Privileged {
        return false;
    }
    !(n.version == o.version && n.level <= o.level)
}

/// Whether a pod update can change what the checks see (the image of a container, the
/// containers themselves, or a new ephemeral container); other updates are not evaluated.
pub fn significant_pod_update(new: &Value, old: &Value) -> bool {
    let list = |p: &Value, k: &str| p["spec"][k].as_array().cloned().unwrap_or_default();
    for k in ["containers", "initContainers"] {
        let (n, o) = (list(new, k), list(old, k));
        if n.len() != o.len() || n.iter().zip(&o).any(|(a, b)| a["image"] != b["image"]) {
            return true;
        }
    }
    let old_eph = list(old, "ephemeralContainers");
    list(new, "ephemeralContainers").iter().any(|c| {
        match old_eph.iter().find(|o| o["name"] == c["name"]) {
            None => true,
            Some(o) => o["image"] != c["image"],
        }
    })
}

/// The uid of the controller owning `pod`.
pub fn controller_uid(pod: &Value) -> Option<String> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)
        .and_then(|r| r["uid"].as_str())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::super::policy::{Level, Version};
    use super::*;
    use serde_json::json;

    fn lv(level: Level) -> LevelVersion {
        LevelVersion {
            level,
            version: Version::Latest,
        }
    }

    fn parts(v: Value) -> PodParts {
        parts_of(&json!({"spec": v})).unwrap()
    }

    const ROOTFUL: &str = "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
        unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
        runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
        seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

    #[test]
    fn enforce_denies_and_then_nothing_is_warned() {
        let p = Policy {
            enforce: lv(Level::Restricted),
            audit: LevelVersion::PRIVILEGED,
            warn: lv(Level::Restricted),
        };
        let e = evaluate(
            &p,
            &parts(json!({"containers": [{"name": "c", "image": "i"}]})),
            true,
        );
        assert_eq!(
            e.denied.as_deref(),
            Some(format!("violates PodSecurity \"restricted:latest\": {ROOTFUL}").as_str())
        );
        assert_eq!(e.warning, None);
        assert_eq!(e.audit, None, "audit is privileged");
    }

    #[test]
    fn audit_is_evaluated_whatever_enforce_decides() {
        let p = Policy {
            enforce: lv(Level::Restricted),
            audit: lv(Level::Baseline),
            warn: LevelVersion::PRIVILEGED,
        };
        let host = parts(json!({"hostNetwork": true, "containers": [{"name": "c", "image": "i"}]}));
        for enforce in [true, false] {
            let e = evaluate(&p, &host, enforce);
            assert_eq!(e.denied.is_some(), enforce);
            assert_eq!(
                e.audit.as_deref(),
                Some("would violate PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)")
            );
        }
    }

    #[test]
    fn warn_only_and_workloads_are_not_enforced() {
        let p = Policy {
            enforce: lv(Level::Baseline),
            audit: LevelVersion::PRIVILEGED,
            warn: lv(Level::Restricted),
        };
        let pod = parts(json!({"containers": [{"name": "c", "image": "i"}]}));
        let e = evaluate(&p, &pod, true);
        assert_eq!(e.denied, None);
        assert_eq!(
            e.warning.as_deref(),
            Some(format!("would violate PodSecurity \"restricted:latest\": {ROOTFUL}").as_str())
        );
        let host = parts(json!({"hostPID": true, "containers": [{"name": "c", "image": "i"}]}));
        let e = evaluate(&p, &host, false);
        assert_eq!(e.denied, None);
        assert!(e
            .warning
            .unwrap()
            .starts_with("would violate PodSecurity \"restricted:latest\": host namespaces (hostPID=true), allowPrivilegeEscalation"));
    }

    #[test]
    fn templates_of_workloads() {
        let d = json!({"spec": {"template": {"spec": {"containers": []}}}});
        assert_eq!(template_of("Deployment", &d), Some(&d["spec"]["template"]));
        let cj = json!({"spec": {"jobTemplate": {"spec": {"template": {"metadata": {}}}}}});
        assert!(template_of("CronJob", &cj).is_some());
        let pt = json!({"template": {"spec": {}}});
        assert!(template_of("PodTemplate", &pt).is_some());
        assert_eq!(
            template_of("ReplicationController", &json!({"spec": {}})),
            None
        );
    }

    fn existing(name: &str, controller: Option<&str>, spec: Value) -> ExistingPod {
        ExistingPod {
            name: name.into(),
            controller: controller.map(str::to_string),
            parts: parts(spec),
        }
    }

    #[test]
    fn namespace_warnings_group_pods_by_reason() {
        let host = json!({"hostNetwork": true, "containers": [{"name": "c"}]});
        let privileged =
            json!({"containers": [{"name": "c", "securityContext": {"privileged": true}}]});
        let fine = json!({"containers": [{"name": "c"}]});
        let pods = vec![
            existing("web-b", Some("rs1"), host.clone()),
            existing("web-a", Some("rs1"), host.clone()),
            existing("solo", None, privileged),
            existing("ok", None, fine),
            existing("net", None, host),
        ];
        assert_eq!(
            namespace_warnings("ns", lv(Level::Baseline), &pods),
            vec![
                "existing pods in namespace \"ns\" violate the new PodSecurity enforce level \"baseline:latest\"".to_string(),
                "net (and 2 other pods): host namespaces".to_string(),
                "solo: privileged".to_string(),
            ]
        );
        assert!(namespace_warnings("ns", lv(Level::Baseline), &pods[3..4]).is_empty());
    }

    #[test]
    fn replicas_of_one_controller_come_last() {
        let s = json!({"containers": []});
        let pods = vec![
            existing("a1", Some("a"), s.clone()),
            existing("a2", Some("a"), s.clone()),
            existing("x", None, s.clone()),
            existing("b1", Some("b"), s),
        ];
        let names: Vec<&str> = prioritize(&pods).iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, vec!["a1", "x", "b1", "a2"]);
    }

    #[test]
    fn when_existing_pods_are_checked() {
        let p = |l: Level, v: Version| Policy {
            enforce: LevelVersion {
                level: l,
                version: v,
            },
            ..Policy::default()
        };
        use Level::*;
        use Version::*;
        assert!(enforce_tightened(
            &p(Privileged, Latest),
            &p(Baseline, Latest)
        ));
        assert!(!enforce_tightened(
            &p(Restricted, Latest),
            &p(Baseline, Latest)
        ));
        assert!(!enforce_tightened(
            &p(Baseline, Latest),
            &p(Privileged, Latest)
        ));
        assert!(!enforce_tightened(
            &p(Baseline, Latest),
            &p(Baseline, Latest)
        ));
        assert!(enforce_tightened(
            &p(Restricted, Latest),
            &p(Baseline, Minor(20))
        ));
    }

    #[test]
    fn significant_updates() {
        let pod = |img: &str| json!({"spec": {"containers": [{"name": "c", "image": img}]}});
        assert!(!significant_pod_update(&pod("a"), &pod("a")));
        assert!(significant_pod_update(&pod("b"), &pod("a")));
        let mut with_eph = pod("a");
        with_eph["spec"]["ephemeralContainers"] = json!([{"name": "d", "image": "x"}]);
        assert!(significant_pod_update(&with_eph, &pod("a")));
        assert!(!significant_pod_update(&with_eph, &with_eph));
    }

    #[test]
    fn controllers() {
        let p = json!({"metadata": {"ownerReferences": [
            {"uid": "1", "controller": false}, {"uid": "2", "controller": true}
        ]}});
        assert_eq!(controller_uid(&p).as_deref(), Some("2"));
        assert_eq!(controller_uid(&json!({})), None);
    }
}
