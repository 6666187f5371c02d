//! The runtime-state predicates upstream's kubelet decides with: whether the pod needs a new
//! sandbox (`PodSandboxChanged`), which init container runs next
//! (`findNextInitContainerToRun`), and whether a stopped container starts again
//! (`ShouldContainerBeRestarted`).

use k8s_openapi::api::core::v1::{Container, Pod};

use super::observed::{ContainerState, ObservedContainer, ObservedPod, SandboxState};
use super::spec::RestartPolicy;
use super::spec::{containers, host_network, init_containers, is_deleting, restart_policy};

/// Whether the pod needs a new sandbox, and the attempt to create it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxChange {
    pub create: bool,
    pub attempt: u32,
}

/// A new sandbox is needed when there is none, when more than one is ready, when the newest is
/// not ready, when its network mode differs from the spec's `hostNetwork`, or when a pod-network
/// sandbox has no IP. The attempt is the newest sandbox's plus one (0 for the first).
pub fn sandbox_changed(pod: &Pod, observed: &ObservedPod) -> SandboxChange {
    let sandboxes = observed.sandboxes_newest_first();
    let Some(newest) = sandboxes.first() else {
        return SandboxChange {
            create: true,
            attempt: 0,
        };
    };
    let ready = sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::Ready)
        .count();
    let create = ready > 1
        || newest.state != SandboxState::Ready
        || newest.host_network != host_network(pod)
        || (!host_network(pod) && newest.ip.is_none());
    SandboxChange {
        create,
        attempt: if create {
            newest.attempt + 1
        } else {
            newest.attempt
        },
    }
}

/// An init container failed: it was OOM-killed, exited non-zero, or its state is unknown.
pub fn init_failed(c: &ObservedContainer) -> bool {
    c.reason == "OOMKilled"
        || (c.state == ContainerState::Exited && c.exit_code != 0)
        || c.state == ContainerState::Unknown
}

/// Where the init containers stand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InitProgress<'a> {
    /// The status of the failed init container, when one failed.
    pub failed: Option<&'a ObservedContainer>,
    /// The init container to run next.
    pub next: Option<&'a Container>,
    /// All init containers succeeded.
    pub done: bool,
}

/// Upstream's `findNextInitContainerToRun` (for pods without restartable init containers):
/// done once any regular container runs or the last init container exited; otherwise the last
/// failed one runs again, or the one after the last that exited, or the first.
pub fn next_init_container<'a>(pod: &'a Pod, observed: &'a ObservedPod) -> InitProgress<'a> {
    let inits = init_containers(pod);
    let done = InitProgress {
        failed: None,
        next: None,
        done: true,
    };
    if inits.is_empty() {
        return done;
    }
    let regular_running = containers(pod).iter().any(|c| {
        observed
            .latest(&c.name)
            .is_some_and(|s| s.state == ContainerState::Running)
    });
    if regular_running {
        return done;
    }
    for c in inits.iter().rev() {
        if let Some(s) = observed.latest(&c.name).filter(|s| init_failed(s)) {
            return InitProgress {
                failed: Some(s),
                next: Some(c),
                done: false,
            };
        }
    }
    for (i, c) in inits.iter().enumerate().rev() {
        let Some(s) = observed.latest(&c.name) else {
            continue;
        };
        match s.state {
            ContainerState::Running => {
                return InitProgress {
                    failed: None,
                    next: None,
                    done: false,
                }
            }
            ContainerState::Exited if i == inits.len() - 1 => return done,
            ContainerState::Exited => {
                return InitProgress {
                    failed: None,
                    next: Some(&inits[i + 1]),
                    done: false,
                }
            }
            _ => {}
        }
    }
    InitProgress {
        failed: None,
        next: Some(&inits[0]),
        done: false,
    }
}

/// Whether a container that is not running should be (re)started: never for a pod being
/// deleted; always when it never ran, or its last instance is `created` or `unknown`; for an
/// exited one, always for a sidecar, else per `restartPolicy` (`OnFailure`: only after a
/// non-zero exit).
pub fn should_restart(c: &Container, pod: &Pod, observed: &ObservedPod) -> bool {
    if is_deleting(pod) {
        return false;
    }
    let Some(s) = observed.latest(&c.name) else {
        return true;
    };
    match s.state {
        ContainerState::Running => false,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Exited if super::init_containers::is_restartable(c) => true,
        ContainerState::Exited => match restart_policy(pod) {
            RestartPolicy::Never => false,
            RestartPolicy::OnFailure => s.exit_code != 0,
            RestartPolicy::Always => true,
        },
    }
}

/// The container's latest instance exited with code 0.
pub fn succeeded(c: &Container, observed: &ObservedPod) -> bool {
    observed
        .latest(&c.name)
        .is_some_and(|s| s.state == ContainerState::Exited && s.exit_code == 0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kubelet::plan::observed::ObservedSandbox;
    use crate::kubelet::plan::spec::tests::pod;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    pub(crate) fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    pub(crate) fn sandbox(id: &str, ready: bool, attempt: u32, created: i64) -> ObservedSandbox {
        ObservedSandbox {
            id: id.into(),
            state: if ready {
                SandboxState::Ready
            } else {
                SandboxState::NotReady
            },
            attempt,
            ip: Some("10.42.0.5".parse().unwrap()),
            additional_ips: vec![],
            host_network: false,
            created_at: at(created),
        }
    }

    /// A container `name` (id `name-<restarts>`) created at `created`.
    pub(crate) fn ctr(
        name: &str,
        state: ContainerState,
        code: i32,
        restarts: i32,
        created: i64,
    ) -> ObservedContainer {
        let exited = state == ContainerState::Exited;
        ObservedContainer {
            id: format!("{name}-{restarts}"),
            name: name.into(),
            state,
            created_at: at(created),
            started_at: (state != ContainerState::Created).then(|| at(created + 1)),
            finished_at: exited.then(|| at(created + 2)),
            exit_code: code,
            reason: match (exited, code) {
                (false, _) => String::new(),
                (true, 0) => "Completed".into(),
                (true, _) => "Error".into(),
            },
            message: String::new(),
            image: "docker.io/library/busybox:1.35".into(),
            image_ref: "sha256:b0b0".into(),
            restart_count: restarts,
            hash: crate::kubelet::plan::spec::container_hash(&Container {
                name: name.into(),
                image: Some("busybox:1.35".into()),
                ..Default::default()
            }),
        }
    }

    fn observed(
        sandboxes: Vec<ObservedSandbox>,
        containers: Vec<ObservedContainer>,
    ) -> ObservedPod {
        ObservedPod {
            sandboxes,
            containers,
            ..Default::default()
        }
    }

    #[test]
    fn sandbox_needed_when_none_or_not_ready() {
        let p = pod(json!({}));
        let change = |s| sandbox_changed(&p, &observed(s, vec![]));
        assert_eq!(
            change(vec![]),
            SandboxChange {
                create: true,
                attempt: 0
            }
        );
        assert_eq!(
            change(vec![sandbox("s1", true, 0, 0)]),
            SandboxChange {
                create: false,
                attempt: 0
            }
        );
        assert_eq!(
            change(vec![sandbox("s1", false, 0, 0)]),
            SandboxChange {
                create: true,
                attempt: 1
            }
        );
        // The newest is the one that counts.
        assert_eq!(
            change(vec![sandbox("s2", false, 1, 10), sandbox("s1", true, 0, 0)]),
            SandboxChange {
                create: true,
                attempt: 2
            }
        );
        assert_eq!(
            change(vec![sandbox("s1", false, 0, 0), sandbox("s2", true, 1, 10)]),
            SandboxChange {
                create: false,
                attempt: 1
            }
        );
        // Two ready sandboxes: start over.
        assert_eq!(
            change(vec![sandbox("s1", true, 0, 0), sandbox("s2", true, 1, 10)]),
            SandboxChange {
                create: true,
                attempt: 2
            }
        );
    }

    #[test]
    fn sandbox_needed_when_network_mode_changed_or_no_ip() {
        let p = pod(json!({}));
        let mut s = sandbox("s1", true, 3, 0);
        s.ip = None;
        assert_eq!(
            sandbox_changed(&p, &observed(vec![s.clone()], vec![])),
            SandboxChange {
                create: true,
                attempt: 4
            }
        );
        let host = pod(json!({"spec": {"hostNetwork": true}}));
        // A host-network sandbox has no pod IP and needs none.
        s.host_network = true;
        assert_eq!(
            sandbox_changed(&host, &observed(vec![s.clone()], vec![])),
            SandboxChange {
                create: false,
                attempt: 3
            }
        );
        assert_eq!(
            sandbox_changed(&p, &observed(vec![s], vec![])),
            SandboxChange {
                create: true,
                attempt: 4
            }
        );
    }

    fn with_inits() -> Pod {
        pod(json!({"spec": {"initContainers": [
            {"name": "i1", "image": "busybox:1.35"},
            {"name": "i2", "image": "busybox:1.35"},
        ]}}))
    }

    fn next_name(p: &Pod, o: &ObservedPod) -> (Option<String>, Option<String>, bool) {
        let r = next_init_container(p, o);
        (
            r.failed.map(|c| c.id.clone()),
            r.next.map(|c| c.name.clone()),
            r.done,
        )
    }

    #[test]
    fn init_containers_run_in_order() {
        use ContainerState::*;
        let p = with_inits();
        let o = |cs| observed(vec![], cs);
        assert_eq!(next_name(&pod(json!({})), &o(vec![])), (None, None, true));
        assert_eq!(next_name(&p, &o(vec![])), (None, Some("i1".into()), false));
        assert_eq!(
            next_name(&p, &o(vec![ctr("i1", Running, 0, 0, 0)])),
            (None, None, false)
        );
        assert_eq!(
            next_name(&p, &o(vec![ctr("i1", Exited, 0, 0, 0)])),
            (None, Some("i2".into()), false)
        );
        assert_eq!(
            next_name(
                &p,
                &o(vec![ctr("i1", Exited, 0, 0, 0), ctr("i2", Exited, 0, 0, 5)])
            ),
            (None, None, true)
        );
        // A created (not started) init container is not progress.
        assert_eq!(
            next_name(
                &p,
                &o(vec![
                    ctr("i1", Exited, 0, 0, 0),
                    ctr("i2", Created, 0, 0, 5)
                ])
            ),
            (None, Some("i2".into()), false)
        );
    }

    #[test]
    fn a_failed_init_container_is_next_again() {
        use ContainerState::*;
        let p = with_inits();
        let o = |cs| observed(vec![], cs);
        assert_eq!(
            next_name(
                &p,
                &o(vec![ctr("i1", Exited, 0, 0, 0), ctr("i2", Exited, 1, 0, 5)])
            ),
            (Some("i2-0".into()), Some("i2".into()), false)
        );
        assert_eq!(
            next_name(&p, &o(vec![ctr("i1", Unknown, 0, 0, 0)])),
            (Some("i1-0".into()), Some("i1".into()), false)
        );
        let mut oom = ctr("i1", Exited, 0, 0, 0);
        oom.reason = "OOMKilled".into();
        assert_eq!(
            next_name(&p, &o(vec![oom])),
            (Some("i1-0".into()), Some("i1".into()), false)
        );
        // The newest instance counts: i1 failed once, then succeeded.
        assert_eq!(
            next_name(
                &p,
                &o(vec![ctr("i1", Exited, 1, 0, 0), ctr("i1", Exited, 0, 1, 5)])
            ),
            (None, Some("i2".into()), false)
        );
    }

    #[test]
    fn a_running_regular_container_means_initialized() {
        use ContainerState::*;
        let p = with_inits();
        assert_eq!(
            next_name(&p, &observed(vec![], vec![ctr("c", Running, 0, 0, 0)])),
            (None, None, true)
        );
    }

    #[test]
    fn restart_rules() {
        use ContainerState::*;
        let always = pod(json!({}));
        let on_failure = pod(json!({"spec": {"restartPolicy": "OnFailure"}}));
        let never = pod(json!({"spec": {"restartPolicy": "Never"}}));
        let deleting = pod(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}));
        let c = &containers(&always)[0];
        let o = |s, code| observed(vec![], vec![ctr("c", s, code, 0, 0)]);
        let none = observed(vec![], vec![]);
        let table = [
            (&always, &none, true),
            (&never, &none, true),
            (&deleting, &none, false),
            (&always, &o(Running, 0), false),
            (&never, &o(Created, 0), true),
            (&never, &o(Unknown, 0), true),
            (&always, &o(Exited, 0), true),
            (&always, &o(Exited, 1), true),
            (&on_failure, &o(Exited, 0), false),
            (&on_failure, &o(Exited, 1), true),
            (&never, &o(Exited, 1), false),
            (&never, &o(Exited, 0), false),
        ];
        for (i, (p, o, want)) in table.into_iter().enumerate() {
            assert_eq!(should_restart(c, p, o), want, "row {i}");
        }
    }
}
