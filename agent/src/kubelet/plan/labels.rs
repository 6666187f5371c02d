//! The labels and annotations the kubelet puts on the sandboxes and containers it creates, and
//! reads back to know what it is looking at (upstream's `kuberuntime/labels.go`): which pod and
//! container a runtime object belongs to, the spec hash and restart count of a container, and
//! where its log goes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::spec::container_hash;

pub const POD_NAME: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const POD_UID: &str = "io.kubernetes.pod.uid";
pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";
pub const CONTAINER_HASH: &str = "io.kubernetes.container.hash";
pub const CONTAINER_RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
pub const TERMINATION_MESSAGE_PATH: &str = "io.kubernetes.container.terminationMessagePath";
pub const TERMINATION_MESSAGE_POLICY: &str = "io.kubernetes.container.terminationMessagePolicy";
pub const POD_DELETION_GRACE: &str = "io.kubernetes.pod.deletionGracePeriod";
pub const POD_TERMINATION_GRACE: &str = "io.kubernetes.pod.terminationGracePeriod";
pub const PRE_STOP_HANDLER: &str = "io.kubernetes.container.preStopHandler";
pub const CONTAINER_PORTS: &str = "io.kubernetes.container.ports";

/// Where a node keeps its pods' logs.
pub const POD_LOGS_ROOT: &str = "/var/log/pods";

type Map = BTreeMap<String, String>;

fn identity(pod: &Pod) -> Map {
    let m = &pod.metadata;
    [
        (POD_NAME, m.name.clone()),
        (POD_NAMESPACE, m.namespace.clone()),
        (POD_UID, m.uid.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.unwrap_or_default()))
    .collect()
}

/// A sandbox's labels: the pod's labels plus its identity.
pub fn sandbox_labels(pod: &Pod) -> Map {
    let mut labels = pod.metadata.labels.clone().unwrap_or_default();
    labels.extend(identity(pod));
    labels
}

/// A sandbox's annotations: the pod's.
pub fn sandbox_annotations(pod: &Pod) -> Map {
    pod.metadata.annotations.clone().unwrap_or_default()
}

/// A container's labels: the pod's identity and the container's name.
pub fn container_labels(pod: &Pod, c: &Container) -> Map {
    let mut labels = identity(pod);
    labels.insert(CONTAINER_NAME.into(), c.name.clone());
    labels
}

/// A container's annotations: spec hash (hex), restart count, termination message settings,
/// grace periods, and the preStop handler and ports as JSON.
pub fn container_annotations(pod: &Pod, c: &Container, restart_count: u32) -> Map {
    let mut a = Map::new();
    a.insert(CONTAINER_HASH.into(), format!("{:x}", container_hash(c)));
    a.insert(CONTAINER_RESTART_COUNT.into(), restart_count.to_string());
    a.insert(
        TERMINATION_MESSAGE_PATH.into(),
        c.termination_message_path.clone().unwrap_or_default(),
    );
    a.insert(
        TERMINATION_MESSAGE_POLICY.into(),
        c.termination_message_policy.clone().unwrap_or_default(),
    );
    if let Some(d) = pod.metadata.deletion_grace_period_seconds {
        a.insert(POD_DELETION_GRACE.into(), d.to_string());
    }
    if let Some(t) = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    {
        a.insert(POD_TERMINATION_GRACE.into(), t.to_string());
    }
    if let Some(pre_stop) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
        if let Ok(json) = serde_json::to_string(pre_stop) {
            a.insert(PRE_STOP_HANDLER.into(), json);
        }
    }
    if let Some(ports) = c.ports.as_ref().filter(|p| !p.is_empty()) {
        if let Ok(json) = serde_json::to_string(ports) {
            a.insert(CONTAINER_PORTS.into(), json);
        }
    }
    a
}

/// `/var/log/pods/<namespace>_<name>_<uid>`: the sandbox's log directory.
pub fn pod_log_directory(pod: &Pod) -> String {
    let m = &pod.metadata;
    format!(
        "{POD_LOGS_ROOT}/{}_{}_{}",
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default()
    )
}

/// `<container>/<restart count>.log`: a container's log path, relative to the pod's directory.
pub fn container_log_path(c: &Container, restart_count: u32) -> String {
    format!("{}/{restart_count}.log", c.name)
}

/// What the kubelet reads back from a runtime container's labels and annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLabels {
    pub pod_uid: String,
    pub pod_name: String,
    pub pod_namespace: String,
    pub name: String,
    pub hash: u64,
    pub restart_count: i32,
}

/// Reads a container's identity; `None` for containers the kubelet did not create.
pub fn read_container_labels(labels: &Map, annotations: &Map) -> Option<ContainerLabels> {
    let get = |m: &Map, k: &str| m.get(k).cloned();
    Some(ContainerLabels {
        pod_uid: get(labels, POD_UID)?,
        pod_name: get(labels, POD_NAME).unwrap_or_default(),
        pod_namespace: get(labels, POD_NAMESPACE).unwrap_or_default(),
        name: get(labels, CONTAINER_NAME)?,
        hash: annotations
            .get(CONTAINER_HASH)
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .unwrap_or_default(),
        restart_count: annotations
            .get(CONTAINER_RESTART_COUNT)
            .and_then(|r| r.parse().ok())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::spec::containers;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::json;

    fn map(pairs: &[(&str, &str)]) -> Map {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn p() -> Pod {
        pod(json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {"note": "x"}},
            "spec": {"terminationGracePeriodSeconds": 30, "containers": [{
                "name": "c", "image": "busybox:1.35",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}},
            }]},
        }))
    }

    #[test]
    fn sandbox_labels_and_annotations() {
        let p = p();
        assert_eq!(
            sandbox_labels(&p),
            map(&[
                ("app", "web"),
                (POD_NAME, "web"),
                (POD_NAMESPACE, "default"),
                (POD_UID, "u1")
            ])
        );
        assert_eq!(sandbox_annotations(&p), map(&[("note", "x")]));
        assert_eq!(pod_log_directory(&p), "/var/log/pods/default_web_u1");
    }

    #[test]
    fn container_labels_and_annotations() {
        let p = p();
        let c = &containers(&p)[0];
        assert_eq!(
            container_labels(&p, c),
            map(&[
                (POD_NAME, "web"),
                (POD_NAMESPACE, "default"),
                (POD_UID, "u1"),
                (CONTAINER_NAME, "c")
            ])
        );
        let hash = format!("{:x}", container_hash(c));
        assert_eq!(
            container_annotations(&p, c, 3),
            map(&[
                (CONTAINER_HASH, &hash),
                (CONTAINER_RESTART_COUNT, "3"),
                (TERMINATION_MESSAGE_PATH, "/dev/termination-log"),
                (TERMINATION_MESSAGE_POLICY, "File"),
                (POD_TERMINATION_GRACE, "30"),
                (PRE_STOP_HANDLER, r#"{"exec":{"command":["sleep","1"]}}"#),
                (
                    CONTAINER_PORTS,
                    r#"[{"containerPort":80,"protocol":"TCP"}]"#
                ),
            ])
        );
        assert_eq!(container_log_path(c, 3), "c/3.log");
    }

    #[test]
    fn labels_read_back() {
        let p = p();
        let c = &containers(&p)[0];
        let read =
            read_container_labels(&container_labels(&p, c), &container_annotations(&p, c, 4));
        assert_eq!(
            read,
            Some(ContainerLabels {
                pod_uid: "u1".into(),
                pod_name: "web".into(),
                pod_namespace: "default".into(),
                name: "c".into(),
                hash: container_hash(c),
                restart_count: 4,
            })
        );
        assert_eq!(
            read_container_labels(&map(&[("app", "x")]), &Map::new()),
            None
        );
    }
}
