//! Everything the executor needs to create a container (upstream's `generateContainerConfig`
//! and `generateLinuxContainerConfig`), as plain data it maps onto CRI's `ContainerConfig`:
//! identity, image, command and args with `$(VAR)` expanded, working dir, environment,
//! labels/annotations, log path, cgroup resources and the effective security context.
//! Volume mounts and devices are the executor's (they need the node's files).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::env::{expand_command, ContainerEnv};
use super::labels::{container_annotations, container_labels, container_log_path};
use super::resources::{linux_resources, LinuxResources};

/// The effective security settings (container's `securityContext` over the pod's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    pub privileged: bool,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub supplemental_groups: Vec<i64>,
    pub readonly_rootfs: bool,
    /// `allowPrivilegeEscalation: false`.
    pub no_new_privs: bool,
    pub add_capabilities: Vec<String>,
    pub drop_capabilities: Vec<String>,
}

/// A container to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    pub name: String,
    pub attempt: u32,
    pub image: String,
    /// The image's entrypoint is replaced when not empty.
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub env: Vec<(String, String)>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Relative to the sandbox's log directory.
    pub log_path: String,
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
    pub resources: LinuxResources,
    pub security: Security,
}

/// Why a container cannot be created as specified (a `CreateContainerConfigError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
pub struct NonRootViolation {
    pub pod: String,
    pub container: String,
}

/// The container's security settings: `runAsUser`, `runAsGroup` and `runAsNonRoot` from the
/// container's context, else the pod's; the rest from the container's.
pub fn security(pod: &Pod, c: &Container) -> Security {
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let caps = sc.and_then(|s| s.capabilities.as_ref());
    Security {
        privileged: sc.and_then(|s| s.privileged).unwrap_or(false),
        run_as_user: sc
            .and_then(|s| s.run_as_user)
            .or(pod_sc.and_then(|s| s.run_as_user)),
        run_as_group: sc
            .and_then(|s| s.run_as_group)
            .or(pod_sc.and_then(|s| s.run_as_group)),
        supplemental_groups: pod_sc
            .and_then(|s| s.supplemental_groups.clone())
            .unwrap_or_default(),
        readonly_rootfs: sc
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false),
        no_new_privs: sc.and_then(|s| s.allow_privilege_escalation) == Some(false),
        add_capabilities: caps.and_then(|c| c.add.clone()).unwrap_or_default(),
        drop_capabilities: caps.and_then(|c| c.drop.clone()).unwrap_or_default(),
    }
}

fn run_as_non_root(pod: &Pod, c: &Container) -> bool {
    c.security_context
        .as_ref()
        .and_then(|s| s.run_as_non_root)
        .or_else(|| {
            pod.spec
                .as_ref()?
                .security_context
                .as_ref()?
                .run_as_non_root
        })
        .unwrap_or(false)
}

/// Builds the spec of container `c` (attempt `attempt`) with its resolved environment `env`
/// on a node with `memory_capacity` bytes. Refuses `runAsNonRoot` with `runAsUser: 0`; a
/// non-root check against the image's user is the executor's (it needs the image config).
pub fn container_spec(
    pod: &Pod,
    c: &Container,
    attempt: u32,
    env: &ContainerEnv,
    memory_capacity: i64,
) -> Result<ContainerSpec, NonRootViolation> {
    let security = security(pod, c);
    if run_as_non_root(pod, c) && security.run_as_user == Some(0) {
        return Err(NonRootViolation {
            pod: super::spec::format_pod(pod),
            container: c.name.clone(),
        });
    }
    let (command, args) = expand_command(c, &env.vars);
    Ok(ContainerSpec {
        name: c.name.clone(),
        attempt,
        image: c.image.clone().unwrap_or_default(),
        command,
        args,
        working_dir: c.working_dir.clone().unwrap_or_default(),
        env: env.vars.clone(),
        labels: container_labels(pod, c),
        annotations: container_annotations(pod, c, attempt),
        log_path: container_log_path(c, attempt),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        resources: linux_resources(pod, c, memory_capacity),
        security,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::labels::{CONTAINER_NAME, CONTAINER_RESTART_COUNT};
    use crate::kubelet::plan::spec::containers;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::json;

    fn p() -> Pod {
        pod(json!({"spec": {
        "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "supplementalGroups": [4000]},
        "containers": [{
            "name": "c", "image": "busybox:1.35", "workingDir": "/srv",
            "command": ["sh", "-c"], "args": ["echo $(MSG) > /tmp/x"],
            "tty": true, "stdin": true,
            "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
            "securityContext": {"runAsUser": 2000, "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}},
        }]}}))
    }

    #[test]
    fn a_full_container_spec() {
        let p = p();
        let c = &containers(&p)[0];
        let env = ContainerEnv {
            vars: vec![("MSG".into(), "hi".into())],
            invalid_keys: vec![],
        };
        let spec = container_spec(&p, c, 2, &env, 1 << 30).unwrap();
        assert_eq!(spec.name, "c");
        assert_eq!(spec.attempt, 2);
        assert_eq!(spec.image, "busybox:1.35");
        assert_eq!(spec.command, vec!["sh", "-c"]);
        assert_eq!(spec.args, vec!["echo hi > /tmp/x"]);
        assert_eq!(spec.working_dir, "/srv");
        assert_eq!(spec.env, vec![("MSG".to_string(), "hi".to_string())]);
        assert_eq!(spec.labels[CONTAINER_NAME], "c");
        assert_eq!(spec.annotations[CONTAINER_RESTART_COUNT], "2");
        assert_eq!(spec.log_path, "c/2.log");
        assert_eq!((spec.stdin, spec.stdin_once, spec.tty), (true, false, true));
        assert_eq!(
            spec.resources,
            LinuxResources {
                cpu_shares: 512,
                cpu_quota: 50_000,
                cpu_period: 100_000,
                memory_limit_in_bytes: 67_108_864,
                oom_score_adj: 999,
            }
        );
        assert_eq!(
            spec.security,
            Security {
                privileged: false,
                run_as_user: Some(2000),
                run_as_group: Some(3000),
                supplemental_groups: vec![4000],
                readonly_rootfs: true,
                no_new_privs: true,
                add_capabilities: vec!["NET_ADMIN".into()],
                drop_capabilities: vec!["ALL".into()],
            }
        );
    }

    #[test]
    fn defaults_are_empty_and_permissive() {
        let p = pod(json!({}));
        let c = &containers(&p)[0];
        assert_eq!(security(&p, c), Security::default());
        let spec = container_spec(&p, c, 0, &ContainerEnv::default(), 1 << 30).unwrap();
        assert_eq!((spec.command.len(), spec.args.len()), (0, 0));
        assert_eq!(spec.working_dir, "");
    }

    #[test]
    fn run_as_non_root_refuses_uid_0() {
        let p = pod(json!({"spec": {"securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "c", "image": "i", "securityContext": {"runAsUser": 0}}]}}));
        let c = &containers(&p)[0];
        let err = container_spec(&p, c, 0, &ContainerEnv::default(), 1 << 30).unwrap_err();
        assert_eq!(
            err.to_string(),
            "container's runAsUser breaks non-root policy (pod: \"web_default(u1)\", container: c)"
        );
    }
}
