//! What the runtime has of a pod, read through CRI into the planner's [`ObservedPod`]
//! (upstream's `GetPodStatus`), and the relist fingerprint the pod-lifecycle event generator
//! compares to know which pods changed.
//!
//! The conversions from CRI messages are pure; [`observe`] and [`relist`] do the calls.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::cri::{pb, ImageService, Result, RuntimeService};
use crate::kubelet::plan::spec::{containers, init_containers};
use crate::kubelet::plan::{
    read_container_labels, ContainerState, ObservedContainer, ObservedPod, ObservedSandbox,
    SandboxState,
};

/// The label every sandbox and container the kubelet creates carries.
pub use crate::kubelet::plan::labels::POD_UID;

/// CRI nanoseconds since the epoch as a timestamp (0 and garbage: the epoch).
pub fn timestamp(nanos: i64) -> Timestamp {
    Timestamp::from_nanosecond(nanos as i128).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn nonzero(nanos: i64) -> Option<Timestamp> {
    (nanos > 0).then(|| timestamp(nanos))
}

/// A sandbox's status as the planner sees it.
pub fn observed_sandbox(s: &pb::PodSandboxStatus) -> ObservedSandbox {
    let network = s.network.as_ref();
    let parse = |ip: &str| ip.parse::<IpAddr>().ok();
    let host_network = s
        .linux
        .as_ref()
        .and_then(|l| l.namespaces.as_ref())
        .and_then(|n| n.options.as_ref())
        .is_some_and(|o| o.network == pb::NamespaceMode::Node as i32);
    ObservedSandbox {
        id: s.id.clone(),
        state: if s.state == pb::PodSandboxState::SandboxReady as i32 {
            SandboxState::Ready
        } else {
            SandboxState::NotReady
        },
        attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or_default(),
        ip: network.and_then(|n| parse(&n.ip)),
        additional_ips: network
            .into_iter()
            .flat_map(|n| n.additional_ips.iter().filter_map(|p| parse(&p.ip)))
            .collect(),
        host_network,
        created_at: timestamp(s.created_at),
    }
}

/// A container's status as the planner sees it; `None` for containers the kubelet did not
/// create (no pod labels).
pub fn observed_container(c: &pb::ContainerStatus) -> Option<ObservedContainer> {
    let labels: BTreeMap<String, String> = c.labels.clone().into_iter().collect();
    let annotations: BTreeMap<String, String> = c.annotations.clone().into_iter().collect();
    let l = read_container_labels(&labels, &annotations)?;
    let state = match pb::ContainerState::try_from(c.state) {
        Ok(pb::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(pb::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(pb::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    };
    Some(ObservedContainer {
        id: c.id.clone(),
        name: l.name,
        state,
        created_at: timestamp(c.created_at),
        started_at: nonzero(c.started_at),
        finished_at: nonzero(c.finished_at),
        exit_code: c.exit_code,
        reason: c.reason.clone(),
        message: c.message.clone(),
        image: c
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default(),
        image_ref: c.image_ref.clone(),
        restart_count: l.restart_count,
        hash: l.hash,
    })
}

fn by_uid(uid: &str) -> std::collections::HashMap<String, String> {
    [(POD_UID.to_string(), uid.to_string())].into()
}

/// Everything the runtime has of the pod with `uid`; `pod` (when known) names the images
/// whose presence the planner needs.
pub async fn observe(
    runtime: &dyn RuntimeService,
    images: &dyn ImageService,
    uid: &str,
    pod: Option<&Pod>,
) -> Result<ObservedPod> {
    let mut out = ObservedPod::default();
    let sandboxes = runtime
        .list_pod_sandbox(Some(pb::PodSandboxFilter {
            label_selector: by_uid(uid),
            ..Default::default()
        }))
        .await?;
    for s in sandboxes {
        match runtime.pod_sandbox_status(s.id.clone(), false).await {
            Ok(r) => out
                .sandboxes
                .extend(r.status.as_ref().map(observed_sandbox)),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let listed = runtime
        .list_containers(Some(pb::ContainerFilter {
            label_selector: by_uid(uid),
            ..Default::default()
        }))
        .await?;
    for c in listed {
        match runtime.container_status(c.id.clone(), false).await {
            Ok(r) => out
                .containers
                .extend(r.status.as_ref().and_then(observed_container)),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    if let Some(pod) = pod {
        let wanted: BTreeSet<String> = init_containers(pod)
            .iter()
            .chain(containers(pod))
            .filter_map(|c| c.image.clone())
            .collect();
        for image in wanted {
            let spec = pb::ImageSpec {
                image: image.clone(),
                ..Default::default()
            };
            if images.image_status(spec, false).await?.is_some() {
                out.images.insert(image);
            }
        }
    }
    Ok(out)
}

/// Per pod UID, a fingerprint of its sandboxes' and containers' ids and states: a pod whose
/// fingerprint changed between two relists had a lifecycle event.
pub type Fingerprints = BTreeMap<String, Vec<(String, i32)>>;

/// The fingerprints of what the runtime lists (objects without a pod UID label are ignored).
pub fn fingerprints(sandboxes: &[pb::PodSandbox], containers: &[pb::Container]) -> Fingerprints {
    let mut out = Fingerprints::new();
    let items = sandboxes
        .iter()
        .map(|s| (&s.labels, &s.id, s.state))
        .chain(containers.iter().map(|c| (&c.labels, &c.id, 10 + c.state)));
    for (labels, id, state) in items {
        if let Some(uid) = labels.get(POD_UID) {
            out.entry(uid.clone())
                .or_default()
                .push((id.clone(), state));
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// Lists the runtime's sandboxes and containers (upstream's PLEG relist).
pub async fn relist(runtime: &dyn RuntimeService) -> Result<Fingerprints> {
    let sandboxes = runtime.list_pod_sandbox(None).await?;
    let containers = runtime.list_containers(None).await?;
    Ok(fingerprints(&sandboxes, &containers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_ready_sandbox_with_its_ip() {
        let s = pb::PodSandboxStatus {
            id: "sb".into(),
            metadata: Some(pb::PodSandboxMetadata {
                attempt: 2,
                ..Default::default()
            }),
            state: pb::PodSandboxState::SandboxReady as i32,
            created_at: 1_700_000_000_000_000_000,
            network: Some(pb::PodSandboxNetworkStatus {
                ip: "10.42.0.5".into(),
                additional_ips: vec![pb::PodIp {
                    ip: "fd00::5".into(),
                }],
            }),
            ..Default::default()
        };
        let o = observed_sandbox(&s);
        assert_eq!(o.state, SandboxState::Ready);
        assert_eq!(o.attempt, 2);
        assert_eq!(o.ip, Some("10.42.0.5".parse().unwrap()));
        assert_eq!(o.additional_ips, vec!["fd00::5".parse::<IpAddr>().unwrap()]);
        assert!(!o.host_network);
        assert_eq!(o.created_at.to_string(), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn a_not_ready_host_network_sandbox() {
        let s = pb::PodSandboxStatus {
            state: pb::PodSandboxState::SandboxNotready as i32,
            linux: Some(pb::LinuxPodSandboxStatus {
                namespaces: Some(pb::Namespace {
                    options: Some(pb::NamespaceOption {
                        network: pb::NamespaceMode::Node as i32,
                        ..Default::default()
                    }),
                }),
            }),
            ..Default::default()
        };
        let o = observed_sandbox(&s);
        assert_eq!(o.state, SandboxState::NotReady);
        assert!(o.host_network);
        assert_eq!(o.ip, None);
    }

    #[test]
    fn an_exited_container_with_its_labels() {
        let c = pb::ContainerStatus {
            id: "c1".into(),
            state: pb::ContainerState::ContainerExited as i32,
            created_at: 1_000_000_000,
            started_at: 2_000_000_000,
            finished_at: 3_000_000_000,
            exit_code: 1,
            reason: "Error".into(),
            image: Some(pb::ImageSpec {
                image: "docker.io/library/busybox:1.35".into(),
                ..Default::default()
            }),
            image_ref: "sha256:abc".into(),
            labels: labels(&[
                ("io.kubernetes.pod.uid", "u1"),
                ("io.kubernetes.container.name", "app"),
            ]),
            annotations: labels(&[
                ("io.kubernetes.container.hash", "ff"),
                ("io.kubernetes.container.restartCount", "4"),
            ]),
            ..Default::default()
        };
        let o = observed_container(&c).unwrap();
        assert_eq!(o.name, "app");
        assert_eq!(o.state, ContainerState::Exited);
        assert_eq!((o.exit_code, o.reason.as_str()), (1, "Error"));
        assert_eq!((o.restart_count, o.hash), (4, 255));
        assert_eq!(o.started_at.unwrap().to_string(), "1970-01-01T00:00:02Z");
        assert_eq!(o.finished_at.unwrap().to_string(), "1970-01-01T00:00:03Z");
        assert_eq!(o.image_ref, "sha256:abc");
        // Not the kubelet's: no pod labels.
        assert_eq!(observed_container(&pb::ContainerStatus::default()), None);
    }

    #[test]
    fn fingerprints_group_by_pod_uid() {
        let sb = pb::PodSandbox {
            id: "s1".into(),
            labels: labels(&[(POD_UID, "u1")]),
            ..Default::default()
        };
        let c = |id: &str, uid: &str, state: i32| pb::Container {
            id: id.into(),
            state,
            labels: labels(&[(POD_UID, uid)]),
            ..Default::default()
        };
        let stranger = pb::Container {
            id: "x".into(),
            ..Default::default()
        };
        let f = fingerprints(
            &[sb],
            &[c("c2", "u1", 1), c("c1", "u2", 2), stranger.clone()],
        );
        assert_eq!(
            f,
            Fingerprints::from([
                (
                    "u1".to_string(),
                    vec![("c2".to_string(), 11), ("s1".to_string(), 0)]
                ),
                ("u2".to_string(), vec![("c1".to_string(), 12)]),
            ])
        );
        let exited = fingerprints(&[], &[c("c1", "u2", 3)]);
        assert_ne!(exited.get("u2"), f.get("u2"));
    }
}
