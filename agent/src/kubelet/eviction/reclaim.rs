//! Node-level disk reclaim before any pod is evicted (upstream's `DeleteAllUnusedContainers`
//! with `evictNonDeletedPods`): every dead container and not-ready sandbox of a pod that no
//! longer runs here (its phase is terminal, or the node no longer has it) is removed, so the
//! writable layers of evicted and finished pods stop counting. Pure.

use std::collections::BTreeSet;

use crate::cri::pb;
use crate::kubelet::plan::labels;

fn pod_uid(labels_of: &std::collections::HashMap<String, String>) -> Option<&str> {
    labels_of.get(labels::POD_UID).map(String::as_str)
}

/// The IDs of the containers to remove: not running, of a pod whose UID is not in `active`
/// (containers without the kubelet's labels are not the kubelet's and stay).
pub fn unused_containers(containers: &[pb::Container], active: &BTreeSet<String>) -> Vec<String> {
    containers
        .iter()
        .filter(|c| c.state != pb::ContainerState::ContainerRunning as i32)
        .filter(|c| pod_uid(&c.labels).is_some_and(|uid| !active.contains(uid)))
        .map(|c| c.id.clone())
        .collect()
}

/// The IDs of the sandboxes to remove: not ready, of a pod not in `active`, with no container
/// left in them after `removed`.
pub fn unused_sandboxes(
    sandboxes: &[pb::PodSandbox],
    containers: &[pb::Container],
    removed: &[String],
    active: &BTreeSet<String>,
) -> Vec<String> {
    sandboxes
        .iter()
        .filter(|s| s.state != pb::PodSandboxState::SandboxReady as i32)
        .filter(|s| pod_uid(&s.labels).is_some_and(|uid| !active.contains(uid)))
        .filter(|s| {
            !containers
                .iter()
                .any(|c| c.pod_sandbox_id == s.id && !removed.contains(&c.id))
        })
        .map(|s| s.id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels_for(uid: &str) -> std::collections::HashMap<String, String> {
        [(labels::POD_UID.to_string(), uid.to_string())].into()
    }

    fn ctr(id: &str, sandbox: &str, uid: &str, running: bool) -> pb::Container {
        let state = if running {
            pb::ContainerState::ContainerRunning
        } else {
            pb::ContainerState::ContainerExited
        };
        pb::Container {
            id: id.into(),
            pod_sandbox_id: sandbox.into(),
            state: state as i32,
            labels: labels_for(uid),
            ..Default::default()
        }
    }

    fn sandbox(id: &str, uid: &str, ready: bool) -> pb::PodSandbox {
        let state = if ready {
            pb::PodSandboxState::SandboxReady
        } else {
            pb::PodSandboxState::SandboxNotready
        };
        pb::PodSandbox {
            id: id.into(),
            state: state as i32,
            labels: labels_for(uid),
            ..Default::default()
        }
    }

    #[test]
    fn only_dead_parts_of_pods_that_no_longer_run_go() {
        let active: BTreeSet<String> = ["live".to_string()].into();
        let mut foreign = ctr("foreign", "s0", "x", false);
        foreign.labels.clear();
        let containers = vec![
            ctr("live-dead", "s1", "live", false),
            ctr("live-running", "s1", "live", true),
            ctr("evicted-dead", "s2", "evicted", false),
            ctr("gone-running", "s3", "gone", true),
            foreign,
        ];
        let removed = unused_containers(&containers, &active);
        assert_eq!(removed, vec!["evicted-dead".to_string()]);
        let sandboxes = vec![
            sandbox("s1", "live", false),
            sandbox("s2", "evicted", false),
            sandbox("s3", "gone", false),
            sandbox("s4", "gone", true),
        ];
        assert_eq!(
            unused_sandboxes(&sandboxes, &containers, &removed, &active),
            vec!["s2".to_string()]
        );
    }
}
