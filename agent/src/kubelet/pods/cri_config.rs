//! The planner's sandbox and container specs as CRI messages (upstream's
//! `generatePodSandboxConfig` and `generateContainerConfig`), plus the pod's cgroup parent.
//! Pure: no I/O.

use k8s_openapi::api::core::v1::Pod;

use crate::cri::pb;
use crate::kubelet::plan::{qos_class, ContainerSpec, SandboxSpec};

/// A bind mount into a container (a volume's host directory or file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub container_path: String,
    pub host_path: String,
    pub readonly: bool,
}

/// The pod's cgroup parent under the node's cgroup root (upstream's cgroupfs layout):
/// `<root>/kubepods/pod<uid>` for Guaranteed pods, `<root>/kubepods/<qos>/pod<uid>` for
/// Burstable and BestEffort ones.
pub fn cgroup_parent(cgroup_root: &str, pod: &Pod) -> String {
    let root = cgroup_root.trim_end_matches('/');
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let qos = qos_class(pod);
    let tier = match qos.as_str() {
        "Guaranteed" => String::new(),
        other => format!("/{}", other.to_lowercase()),
    };
    format!("{root}/kubepods{tier}/pod{uid}")
}

fn protocol(p: &str) -> i32 {
    match p {
        "UDP" => pb::Protocol::Udp as i32,
        "SCTP" => pb::Protocol::Sctp as i32,
        _ => pb::Protocol::Tcp as i32,
    }
}

fn int64(v: Option<i64>) -> Option<pb::Int64Value> {
    v.map(|value| pb::Int64Value { value })
}

/// `RunPodSandbox`'s config for `spec`, its cgroups under `cgroup_parent`.
pub fn sandbox_config(spec: &SandboxSpec, cgroup_parent: &str) -> pb::PodSandboxConfig {
    let mode = |host: bool| {
        if host {
            pb::NamespaceMode::Node as i32
        } else {
            pb::NamespaceMode::Pod as i32
        }
    };
    pb::PodSandboxConfig {
        metadata: Some(pb::PodSandboxMetadata {
            name: spec.name.clone(),
            uid: spec.uid.clone(),
            namespace: spec.namespace.clone(),
            attempt: spec.attempt,
        }),
        hostname: spec.hostname.clone().unwrap_or_default(),
        log_directory: spec.log_directory.clone(),
        dns_config: Some(pb::DnsConfig {
            servers: spec.dns.servers.clone(),
            searches: spec.dns.searches.clone(),
            options: spec.dns.options.clone(),
        }),
        port_mappings: spec
            .port_mappings
            .iter()
            .filter(|p| p.host_port > 0)
            .map(|p| pb::PortMapping {
                protocol: protocol(&p.protocol),
                container_port: p.container_port,
                host_port: p.host_port,
                host_ip: p.host_ip.clone(),
            })
            .collect(),
        labels: spec.labels.clone().into_iter().collect(),
        annotations: spec.annotations.clone().into_iter().collect(),
        linux: Some(pb::LinuxPodSandboxConfig {
            cgroup_parent: cgroup_parent.to_string(),
            security_context: Some(pb::LinuxSandboxSecurityContext {
                namespace_options: Some(pb::NamespaceOption {
                    network: mode(spec.host_network),
                    pid: if spec.host_pid {
                        pb::NamespaceMode::Node as i32
                    } else {
                        pb::NamespaceMode::Container as i32
                    },
                    ipc: mode(spec.host_ipc),
                    target_id: String::new(),
                }),
                run_as_user: int64(spec.run_as_user),
                run_as_group: int64(spec.run_as_group),
                supplemental_groups: spec.supplemental_groups.clone(),
                ..Default::default()
            }),
            sysctls: spec.sysctls.clone().into_iter().collect(),
        }),
    }
}

/// `CreateContainer`'s config for `spec` with `mounts`; namespaces as the sandbox's.
pub fn container_config(
    spec: &ContainerSpec,
    mounts: &[Mount],
    sandbox: &pb::PodSandboxConfig,
) -> pb::ContainerConfig {
    let s = &spec.security;
    let r = &spec.resources;
    let namespaces = sandbox
        .linux
        .as_ref()
        .and_then(|l| l.security_context.as_ref())
        .and_then(|sc| sc.namespace_options.clone());
    pb::ContainerConfig {
        metadata: Some(pb::ContainerMetadata {
            name: spec.name.clone(),
            attempt: spec.attempt,
        }),
        image: Some(pb::ImageSpec {
            image: spec.image.clone(),
            user_specified_image: spec.image.clone(),
            ..Default::default()
        }),
        command: spec.command.clone(),
        args: spec.args.clone(),
        working_dir: spec.working_dir.clone(),
        envs: spec
            .env
            .iter()
            .map(|(key, value)| pb::KeyValue {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
        mounts: mounts
            .iter()
            .map(|m| pb::Mount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.clone(),
                readonly: m.readonly,
                ..Default::default()
            })
            .collect(),
        labels: spec.labels.clone().into_iter().collect(),
        annotations: spec.annotations.clone().into_iter().collect(),
        log_path: spec.log_path.clone(),
        stdin: spec.stdin,
        stdin_once: spec.stdin_once,
        tty: spec.tty,
        linux: Some(pb::LinuxContainerConfig {
            resources: Some(pb::LinuxContainerResources {
                cpu_period: r.cpu_period,
                cpu_quota: r.cpu_quota,
                cpu_shares: r.cpu_shares,
                memory_limit_in_bytes: r.memory_limit_in_bytes,
                oom_score_adj: r.oom_score_adj,
                ..Default::default()
            }),
            security_context: Some(pb::LinuxContainerSecurityContext {
                capabilities: Some(pb::Capability {
                    add_capabilities: s.add_capabilities.clone(),
                    drop_capabilities: s.drop_capabilities.clone(),
                }),
                privileged: s.privileged,
                namespace_options: namespaces,
                run_as_user: int64(s.run_as_user),
                run_as_group: int64(s.run_as_group),
                readonly_rootfs: s.readonly_rootfs,
                supplemental_groups: s.supplemental_groups.clone(),
                no_new_privs: s.no_new_privs,
                ..Default::default()
            }),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::{container_env, container_spec, sandbox_spec, NodeDns};
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        let mut base = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1"}});
        base.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    fn dns() -> NodeDns {
        NodeDns {
            cluster_dns: vec!["10.43.0.10".parse().unwrap()],
            cluster_domain: "cluster.local".into(),
            host: None,
            node_ips: vec![],
        }
    }

    #[test]
    fn cgroup_parent_follows_the_qos_class() {
        let best_effort = pod(json!({"spec": {"containers": [{"name": "c", "image": "i"}]}}));
        assert_eq!(
            cgroup_parent("/k3rs", &best_effort),
            "/k3rs/kubepods/besteffort/podu1"
        );
        let limits = json!({"cpu": "1", "memory": "1Gi"});
        let guaranteed = pod(json!({"spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"limits": limits, "requests": limits}}]}}));
        assert_eq!(cgroup_parent("/", &guaranteed), "/kubepods/podu1");
        let burstable = pod(json!({"spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}}));
        assert_eq!(cgroup_parent("/", &burstable), "/kubepods/burstable/podu1");
    }

    #[test]
    fn a_sandbox_config() {
        let p = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "i", "ports": [
            {"containerPort": 80}, {"containerPort": 53, "hostPort": 5353, "protocol": "UDP"}]}]}}),
        );
        let c = sandbox_config(&sandbox_spec(&p, 2, &dns()), "/kubepods/besteffort/podu1");
        let meta = c.metadata.clone().unwrap();
        assert_eq!(
            (
                meta.name.as_str(),
                meta.namespace.as_str(),
                meta.uid.as_str(),
                meta.attempt
            ),
            ("web", "default", "u1", 2)
        );
        assert_eq!(c.hostname, "web");
        assert_eq!(c.log_directory, "/var/log/pods/default_web_u1");
        assert_eq!(c.dns_config.unwrap().servers, vec!["10.43.0.10"]);
        // Only host ports are the runtime's business.
        assert_eq!(
            c.port_mappings,
            vec![pb::PortMapping {
                protocol: pb::Protocol::Udp as i32,
                container_port: 53,
                host_port: 5353,
                host_ip: String::new(),
            }]
        );
        assert_eq!(c.labels.get("io.kubernetes.pod.uid").unwrap(), "u1");
        let linux = c.linux.unwrap();
        assert_eq!(linux.cgroup_parent, "/kubepods/besteffort/podu1");
        let ns = linux.security_context.unwrap().namespace_options.unwrap();
        assert_eq!(ns.network, pb::NamespaceMode::Pod as i32);
        assert_eq!(ns.pid, pb::NamespaceMode::Container as i32);
    }

    #[test]
    fn a_container_config() {
        let p = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.35",
            "command": ["sh", "-c"], "args": ["echo $(A)"], "env": [{"name": "A", "value": "x"}],
            "securityContext": {"allowPrivilegeEscalation": false, "runAsUser": 1000}}]}}),
        );
        let c = &p.spec.as_ref().unwrap().containers[0];
        let maps = Default::default();
        let secrets = Default::default();
        let alloc = Default::default();
        let inputs = crate::kubelet::plan::EnvInputs {
            config_maps: &maps,
            secrets: &secrets,
            services: &[],
            host_ips: &[],
            pod_ips: &[],
            allocatable: &alloc,
        };
        let env = container_env(&p, c, inputs).unwrap();
        let spec = container_spec(&p, c, 3, &env, 1 << 30).unwrap();
        let sandbox = sandbox_config(&sandbox_spec(&p, 0, &dns()), "/x");
        let mounts = [Mount {
            container_path: "/data".into(),
            host_path: "/var/lib/k3rs/pods/u1/volumes/data".into(),
            readonly: true,
        }];
        let cfg = container_config(&spec, &mounts, &sandbox);
        assert_eq!(cfg.metadata.unwrap().attempt, 3);
        assert_eq!(cfg.image.unwrap().image, "busybox:1.35");
        assert_eq!(cfg.command, vec!["sh", "-c"]);
        assert_eq!(cfg.args, vec!["echo x"]);
        assert_eq!(
            cfg.envs,
            vec![pb::KeyValue {
                key: "A".into(),
                value: "x".into()
            }]
        );
        assert_eq!(cfg.log_path, "c/3.log");
        assert_eq!(cfg.mounts.len(), 1);
        assert!(cfg.mounts[0].readonly);
        let linux = cfg.linux.unwrap();
        let sc = linux.security_context.unwrap();
        assert!(sc.no_new_privs);
        assert_eq!(sc.run_as_user, Some(pb::Int64Value { value: 1000 }));
        assert_eq!(
            sc.namespace_options.unwrap().network,
            pb::NamespaceMode::Pod as i32
        );
        assert_eq!(linux.resources.unwrap().oom_score_adj, 1000);
    }
}
