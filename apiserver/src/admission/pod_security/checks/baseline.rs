//! The baseline checks: no known privilege escalations (host namespaces and ports, hostPath,
//! privileged containers, added capabilities beyond the default set, AppArmor/SELinux/seccomp
//! weakening, unsafe sysctls, /proc unmasking, Windows host processes).

use std::collections::BTreeSet;

use super::{
    containers, containers_phrase, go_quote, join_quote, pluralize, sorted, Pod, Violation,
};

/// Container names (in visiting order) and the sorted bad values they used.
#[derive(Default)]
struct Offenders<'a> {
    containers: Vec<&'a str>,
    values: BTreeSet<String>,
}

/// `pod and containers "a", "b"` from who set a forbidden value.
fn setters(pod: bool, bad_containers: &[&str]) -> Vec<String> {
    let mut s = Vec::new();
    if pod {
        s.push("pod".to_string());
    }
    if !bad_containers.is_empty() {
        s.push(containers_phrase(bad_containers));
    }
    s
}

const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// AppArmor: profiles may be RuntimeDefault or Localhost, never Unconfined (fields and the
/// deprecated annotations).
pub(super) fn app_armor_profile(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let allowed_type = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let mut bad_values = BTreeSet::new();
    let pod_bad = match pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref())
    {
        Some(p) if !allowed_type(&p.type_) => {
            bad_values.insert(p.type_.clone());
            true
        }
        _ => false,
    };
    let mut bad = Vec::new();
    for c in containers(pod.spec) {
        if let Some(p) = c
            .security_context
            .and_then(|s| s.app_armor_profile.as_ref())
        {
            if !allowed_type(&p.type_) {
                bad.push(c.name);
                bad_values.insert(p.type_.clone());
            }
        }
    }
    let mut who = setters(pod_bad, &bad);
    let mut values = sorted(bad_values);
    let annotations: BTreeSet<String> = pod
        .annotations
        .iter()
        .filter(|(k, v)| {
            k.starts_with(APPARMOR_ANNOTATION_PREFIX)
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect();
    if !annotations.is_empty() {
        who.push(pluralize("annotation", "annotations", annotations.len()).to_string());
        values.extend(annotations);
    }
    if who.is_empty() {
        return None;
    }
    Violation::new(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            who.join(" and "),
            join_quote(&values)
        ),
    )
}

/// The capabilities a baseline container may add.
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Capabilities: only the container runtime's default set may be added.
pub(super) fn capabilities(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let mut o = Offenders::default();
    for c in containers(pod.spec) {
        let added = c
            .security_context
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|caps| caps.add.as_ref());
        let bad: Vec<&String> = added
            .into_iter()
            .flatten()
            .filter(|cap| !DEFAULT_CAPABILITIES.contains(&cap.as_str()))
            .collect();
        if !bad.is_empty() {
            o.containers.push(c.name);
            o.values.extend(bad.into_iter().cloned());
        }
    }
    if o.containers.is_empty() {
        return None;
    }
    Violation::new(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&o.containers),
            join_quote(&sorted(o.values))
        ),
    )
}

/// Host namespaces: no hostNetwork, hostPID or hostIPC.
pub(super) fn host_namespaces(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let s = pod.spec;
    let used: Vec<&str> = [
        (s.host_network, "hostNetwork=true"),
        (s.host_pid, "hostPID=true"),
        (s.host_ipc, "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(on, _)| *on == Some(true))
    .map(|(_, what)| what)
    .collect();
    if used.is_empty() {
        return None;
    }
    Violation::new("host namespaces", used.join(", "))
}

/// hostPath volumes are forbidden.
pub(super) fn host_path_volumes(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let names: Vec<&str> = pod
        .spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.host_path.is_some())
        .map(|v| v.name.as_str())
        .collect();
    if names.is_empty() {
        return None;
    }
    Violation::new(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", names.len()),
            join_quote(&names)
        ),
    )
}

/// Host ports are forbidden.
pub(super) fn host_ports(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let mut o = Offenders::default();
    for c in containers(pod.spec) {
        let ports: Vec<String> = c
            .ports
            .iter()
            .filter_map(|p| p.host_port.filter(|hp| *hp != 0))
            .map(|hp| hp.to_string())
            .collect();
        if !ports.is_empty() {
            o.containers.push(c.name);
            o.values.extend(ports);
        }
    }
    if o.containers.is_empty() {
        return None;
    }
    let n = o.containers.len();
    let ports = sorted(o.values);
    Violation::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&o.containers),
            pluralize("uses", "use", n),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

/// Privileged containers are forbidden.
pub(super) fn privileged(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let bad: Vec<&str> = containers(pod.spec)
        .into_iter()
        .filter(|c| c.security_context.and_then(|s| s.privileged) == Some(true))
        .map(|c| c.name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&bad)
        ),
    )
}

/// /proc must keep its default masks.
pub(super) fn proc_mount(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let mut o = Offenders::default();
    for c in containers(pod.spec) {
        if let Some(pm) = c.security_context.and_then(|s| s.proc_mount.as_ref()) {
            if pm != "Default" {
                o.containers.push(c.name);
                o.values.insert(pm.clone());
            }
        }
    }
    if o.containers.is_empty() {
        return None;
    }
    Violation::new(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&o.containers),
            join_quote(&sorted(o.values))
        ),
    )
}

/// SELinux: only the container types, and no custom user or role.
pub(super) fn se_linux_options(pod: &Pod<'_>, minor: u32) -> Option<Violation> {
    let mut allowed = vec!["", "container_t", "container_init_t", "container_kvm_t"];
    if minor >= 31 {
        allowed.push("container_engine_t");
    }
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |o: &k8s_openapi::api::core::v1::SELinuxOptions| {
        let mut ok = true;
        let t = o.type_.as_deref().unwrap_or("");
        if !allowed.contains(&t) {
            ok = false;
            bad_types.insert(t.to_string());
        }
        if o.user.as_deref().is_some_and(|u| !u.is_empty()) {
            ok = false;
            set_user = true;
        }
        if o.role.as_deref().is_some_and(|r| !r.is_empty()) {
            ok = false;
            set_role = true;
        }
        ok
    };
    let pod_bad = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.se_linux_options.as_ref())
        .is_some_and(|o| !valid(o));
    let mut bad = Vec::new();
    for c in containers(pod.spec) {
        if let Some(o) = c.security_context.and_then(|s| s.se_linux_options.as_ref()) {
            if !valid(o) {
                bad.push(c.name);
            }
        }
    }
    let who = setters(pod_bad, &bad);
    if who.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !bad_types.is_empty() {
        let types = sorted(bad_types);
        data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if set_user {
        data.push("user may not be set".to_string());
    }
    if set_role {
        data.push("role may not be set".to_string());
    }
    Violation::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            who.join(" and "),
            data.join("; ")
        ),
    )
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

pub(super) fn valid_seccomp_type(t: &str) -> bool {
    matches!(t, "RuntimeDefault" | "Localhost")
}

/// Seccomp: never Unconfined (from 1.19 the fields; before, the alpha annotations).
pub(super) fn seccomp_profile(pod: &Pod<'_>, minor: u32) -> Option<Violation> {
    if minor < 19 {
        return seccomp_annotations(pod);
    }
    let mut bad_values = BTreeSet::new();
    let pod_bad = match pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
    {
        Some(p) if !valid_seccomp_type(&p.type_) => {
            bad_values.insert(p.type_.clone());
            true
        }
        _ => false,
    };
    let mut bad = Vec::new();
    for c in containers(pod.spec) {
        if let Some(p) = c.security_context.and_then(|s| s.seccomp_profile.as_ref()) {
            if !valid_seccomp_type(&p.type_) {
                bad.push(c.name);
                bad_values.insert(p.type_.clone());
            }
        }
    }
    seccomp_setters_violation(setters(pod_bad, &bad), bad_values)
}

/// `<who> must not set securityContext.seccompProfile.type to "<values>"`.
pub(super) fn seccomp_setters_violation(
    who: Vec<String>,
    values: BTreeSet<String>,
) -> Option<Violation> {
    if who.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            who.join(" and "),
            join_quote(&sorted(values))
        ),
    )
}

fn seccomp_annotations(pod: &Pod<'_>) -> Option<Violation> {
    let valid =
        |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let mut forbidden = BTreeSet::new();
    let mut look = |key: String| {
        if let Some(v) = pod.annotations.get(&key) {
            if !valid(v) {
                forbidden.insert(format!("{key}={}", go_quote(v)));
            }
        }
    };
    look(SECCOMP_POD_ANNOTATION.to_string());
    for c in containers(pod.spec) {
        look(format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", c.name));
    }
    if forbidden.is_empty() {
        return None;
    }
    let list = sorted(forbidden);
    Violation::new(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", list.len()),
            list.join(", ")
        ),
    )
}

/// The sysctls a baseline pod may set, growing by version.
fn allowed_sysctl(name: &str, minor: u32) -> bool {
    const V1_0: &[&str] = &[
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    ];
    const V1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
    const V1_29: &[&str] = &[
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    ];
    const V1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];
    [(0, V1_0), (27, V1_27), (29, V1_29), (32, V1_32)]
        .iter()
        .any(|(since, names)| minor >= *since && names.contains(&name))
}

/// Sysctls: only the namespaced, safe set.
pub(super) fn sysctls(pod: &Pod<'_>, minor: u32) -> Option<Violation> {
    let bad: Vec<&str> = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .filter(|n| !allowed_sysctl(n, minor))
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new("forbidden sysctls", bad.join(", "))
}

/// Windows host processes are forbidden.
pub(super) fn windows_host_process(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let pod_bad = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.windows_options.as_ref())
        .and_then(|w| w.host_process)
        == Some(true);
    let bad: Vec<&str> = containers(pod.spec)
        .into_iter()
        .filter(|c| {
            c.security_context
                .and_then(|s| s.windows_options.as_ref())
                .and_then(|w| w.host_process)
                == Some(true)
        })
        .map(|c| c.name)
        .collect();
    let who = setters(pod_bad, &bad);
    if who.is_empty() {
        return None;
    }
    Violation::new(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            who.join(" and ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use super::*;
    use serde_json::json;

    fn r(reason: &str, detail: &str) -> Option<(String, String)> {
        Some((reason.to_string(), detail.to_string()))
    }

    #[test]
    fn app_armor() {
        let s = json!({
            "securityContext": {"appArmorProfile": {"type": "Unconfined"}},
            "containers": [
                {"name": "a", "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "p"}}},
                {"name": "b", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}
            ]
        });
        assert_eq!(
            check(app_armor_profile, 33, &[], s),
            r(
                "forbidden AppArmor profile",
                "pod and container \"b\" must not set AppArmor profile type to \"Unconfined\""
            )
        );
        let s = json!({"containers": [{"name": "a"}]});
        assert_eq!(
            check(
                app_armor_profile,
                33,
                &[
                    ("container.apparmor.security.beta.kubernetes.io/a", "unconfined"),
                    ("container.apparmor.security.beta.kubernetes.io/b", "localhost/x")
                ],
                s.clone()
            ),
            r(
                "forbidden AppArmor profile",
                "annotation must not set AppArmor profile type to \"container.apparmor.security.beta.kubernetes.io/a=\"unconfined\"\""
            )
        );
        assert_eq!(
            check(
                app_armor_profile,
                33,
                &[(
                    "container.apparmor.security.beta.kubernetes.io/a",
                    "runtime/default"
                )],
                s
            ),
            None
        );
    }

    #[test]
    fn capabilities_beyond_the_default_set() {
        let s = json!({"containers": [
            {"name": "a", "securityContext": {"capabilities": {"add": ["NET_ADMIN", "CHOWN", "SYS_ADMIN"]}}},
            {"name": "b", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}},
            {"name": "c", "securityContext": {"capabilities": {"add": ["KILL"]}}}
        ]});
        assert_eq!(
            check(capabilities, 33, &[], s),
            r(
                "non-default capabilities",
                "containers \"a\", \"b\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in securityContext.capabilities.add"
            )
        );
    }

    #[test]
    fn host_namespaces_in_fixed_order() {
        let s = json!({"hostIPC": true, "hostNetwork": true, "hostPID": false, "containers": []});
        assert_eq!(
            check(host_namespaces, 33, &[], s),
            r("host namespaces", "hostNetwork=true, hostIPC=true")
        );
        assert_eq!(
            check(host_namespaces, 33, &[], json!({"containers": []})),
            None
        );
    }

    #[test]
    fn host_path_and_ports() {
        let s = json!({"containers": [], "volumes": [
            {"name": "a", "hostPath": {"path": "/"}},
            {"name": "e", "emptyDir": {}},
            {"name": "b", "hostPath": {"path": "/x"}}
        ]});
        assert_eq!(
            check(host_path_volumes, 33, &[], s),
            r("hostPath volumes", "volumes \"a\", \"b\"")
        );
        let s = json!({"containers": [
            {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 1, "hostPort": 80}]},
            {"name": "b", "ports": [{"containerPort": 80}]}
        ]});
        assert_eq!(
            check(host_ports, 33, &[], s),
            r("hostPort", "container \"a\" uses hostPorts 80, 8080")
        );
    }

    #[test]
    fn privileged_and_proc_mount() {
        let s = json!({"containers": [
            {"name": "a", "securityContext": {"privileged": true, "procMount": "Unmasked"}},
            {"name": "b", "securityContext": {"privileged": false, "procMount": "Default"}}
        ]});
        assert_eq!(
            check(privileged, 33, &[], s.clone()),
            r(
                "privileged",
                "container \"a\" must not set securityContext.privileged=true"
            )
        );
        assert_eq!(
            check(proc_mount, 33, &[], s),
            r(
                "procMount",
                "container \"a\" must not set securityContext.procMount to \"Unmasked\""
            )
        );
    }

    #[test]
    fn se_linux() {
        let s = json!({
            "securityContext": {"seLinuxOptions": {"type": "spc_t"}},
            "containers": [
                {"name": "a", "securityContext": {"seLinuxOptions": {"user": "u", "role": "r"}}},
                {"name": "b", "securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}}
            ]
        });
        assert_eq!(
            check(se_linux_options, 33, &[], s.clone()),
            r(
                "seLinuxOptions",
                "pod and container \"a\" set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set; role may not be set"
            )
        );
        // container_engine_t is allowed from 1.31 only.
        assert_eq!(
            check(se_linux_options, 30, &[], s),
            r(
                "seLinuxOptions",
                "pod and containers \"a\", \"b\" set forbidden securityContext.seLinuxOptions: types \"container_engine_t\", \"spc_t\"; user may not be set; role may not be set"
            )
        );
    }

    #[test]
    fn seccomp_fields_and_annotations() {
        let s = json!({"containers": [
            {"name": "a", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
            {"name": "b", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}
        ]});
        assert_eq!(
            check(seccomp_profile, 33, &[], s),
            r(
                "seccompProfile",
                "container \"a\" must not set securityContext.seccompProfile.type to \"Unconfined\""
            )
        );
        let s = json!({"containers": [{"name": "a"}, {"name": "b"}]});
        let ann = [
            ("seccomp.security.alpha.kubernetes.io/pod", "unconfined"),
            (
                "container.seccomp.security.alpha.kubernetes.io/a",
                "docker/default",
            ),
            (
                "container.seccomp.security.alpha.kubernetes.io/b",
                "unconfined",
            ),
        ];
        assert_eq!(
            check(seccomp_profile, 18, &ann, s.clone()),
            r(
                "seccompProfile",
                "forbidden annotations container.seccomp.security.alpha.kubernetes.io/b=\"unconfined\", seccomp.security.alpha.kubernetes.io/pod=\"unconfined\""
            )
        );
        // From 1.19 the annotations are not looked at.
        assert_eq!(check(seccomp_profile, 19, &ann, s), None);
    }

    #[test]
    fn sysctls_by_version() {
        let s = json!({"securityContext": {"sysctls": [
            {"name": "net.ipv4.tcp_rmem", "value": "1"},
            {"name": "kernel.msgmax", "value": "1"},
            {"name": "net.ipv4.tcp_syncookies", "value": "1"}
        ]}, "containers": []});
        assert_eq!(
            check(sysctls, 33, &[], s.clone()),
            r("forbidden sysctls", "kernel.msgmax")
        );
        assert_eq!(
            check(sysctls, 31, &[], s),
            r("forbidden sysctls", "net.ipv4.tcp_rmem, kernel.msgmax")
        );
    }

    #[test]
    fn host_process() {
        let s = json!({
            "securityContext": {"windowsOptions": {"hostProcess": true}},
            "containers": [{"name": "a", "securityContext": {"windowsOptions": {"hostProcess": true}}}]
        });
        assert_eq!(
            check(windows_host_process, 33, &[], s),
            r(
                "hostProcess",
                "pod and container \"a\" must not set securityContext.windowsOptions.hostProcess=true"
            )
        );
    }
}
