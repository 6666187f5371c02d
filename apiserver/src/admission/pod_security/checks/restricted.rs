//! The restricted checks: current pod hardening best practice (no privilege escalation,
//! non-root, all capabilities dropped, a seccomp profile, only volume types that cannot
//! reach the host).

use std::collections::BTreeSet;

use super::baseline::{seccomp_setters_violation, valid_seccomp_type};
use super::{containers, containers_phrase, is_windows, join_quote, pluralize, sorted};
use super::{Pod, Violation};

/// Privilege escalation must be disabled explicitly (Linux pods, from 1.25).
pub(super) fn allow_privilege_escalation(pod: &Pod<'_>, minor: u32) -> Option<Violation> {
    if minor >= 25 && is_windows(pod.spec) {
        return None;
    }
    let bad: Vec<&str> = containers(pod.spec)
        .into_iter()
        .filter(|c| {
            c.security_context
                .and_then(|s| s.allow_privilege_escalation)
                != Some(false)
        })
        .map(|c| c.name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad)
        ),
    )
}

/// Every capability dropped; only NET_BIND_SERVICE added back.
pub(super) fn capabilities(pod: &Pod<'_>, minor: u32) -> Option<Violation> {
    if minor >= 25 && is_windows(pod.spec) {
        return None;
    }
    let mut missing_drop_all = Vec::new();
    let mut adding = Vec::new();
    let mut forbidden = BTreeSet::new();
    for c in containers(pod.spec) {
        let Some(caps) = c.security_context.and_then(|s| s.capabilities.as_ref()) else {
            missing_drop_all.push(c.name);
            continue;
        };
        if !caps.drop.iter().flatten().any(|d| d == "ALL") {
            missing_drop_all.push(c.name);
        }
        let bad: Vec<&String> = caps
            .add
            .iter()
            .flatten()
            .filter(|a| *a != "NET_BIND_SERVICE")
            .collect();
        if !bad.is_empty() {
            adding.push(c.name);
            forbidden.extend(bad.into_iter().cloned());
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&sorted(forbidden))
        ));
    }
    if details.is_empty() {
        return None;
    }
    Violation::new("unrestricted capabilities", details.join("; "))
}

/// Only volume types that cannot reach the host or the network's storage directly.
pub(super) fn volumes(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for v in pod.spec.volumes.iter().flatten() {
        let allowed = v.config_map.is_some()
            || v.csi.is_some()
            || v.downward_api.is_some()
            || v.empty_dir.is_some()
            || v.ephemeral.is_some()
            || v.image.is_some()
            || v.persistent_volume_claim.is_some()
            || v.projected.is_some()
            || v.secret.is_some();
        if allowed {
            continue;
        }
        bad.push(v.name.as_str());
        let kinds = [
            (v.host_path.is_some(), "hostPath"),
            (v.gce_persistent_disk.is_some(), "gcePersistentDisk"),
            (v.aws_elastic_block_store.is_some(), "awsElasticBlockStore"),
            (v.git_repo.is_some(), "gitRepo"),
            (v.nfs.is_some(), "nfs"),
            (v.iscsi.is_some(), "iscsi"),
            (v.glusterfs.is_some(), "glusterfs"),
            (v.rbd.is_some(), "rbd"),
            (v.flex_volume.is_some(), "flexVolume"),
            (v.cinder.is_some(), "cinder"),
            (v.cephfs.is_some(), "cephfs"),
            (v.flocker.is_some(), "flocker"),
            (v.fc.is_some(), "fc"),
            (v.azure_file.is_some(), "azureFile"),
            (v.vsphere_volume.is_some(), "vsphereVolume"),
            (v.quobyte.is_some(), "quobyte"),
            (v.azure_disk.is_some(), "azureDisk"),
            (v.photon_persistent_disk.is_some(), "photonPersistentDisk"),
            (v.portworx_volume.is_some(), "portworxVolume"),
            (v.scale_io.is_some(), "scaleIO"),
            (v.storageos.is_some(), "storageos"),
        ];
        let kind = kinds
            .iter()
            .find(|(set, _)| *set)
            .map_or("unknown", |(_, k)| k);
        types.insert(kind.to_string());
    }
    if bad.is_empty() {
        return None;
    }
    let types = sorted(types);
    Violation::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}

/// The pod or every container must set runAsNonRoot=true, and none may set it false.
pub(super) fn run_as_non_root(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let pod_setting = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_non_root);
    let mut setters = Vec::new();
    if pod_setting == Some(false) {
        setters.push("pod".to_string());
    }
    let pod_non_root = pod_setting == Some(true);
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(pod.spec) {
        match c.security_context.and_then(|s| s.run_as_non_root) {
            Some(false) => explicit.push(c.name),
            Some(true) => {}
            None if !pod_non_root => implicit.push(c.name),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if !setters.is_empty() {
        return Violation::new(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        );
    }
    if implicit.is_empty() {
        return None;
    }
    Violation::new(
        "runAsNonRoot != true",
        format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            containers_phrase(&implicit)
        ),
    )
}

/// Nobody may set runAsUser=0.
pub(super) fn run_as_user(pod: &Pod<'_>, _minor: u32) -> Option<Violation> {
    let mut setters = Vec::new();
    if pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_user)
        == Some(0)
    {
        setters.push("pod".to_string());
    }
    let bad: Vec<&str> = containers(pod.spec)
        .into_iter()
        .filter(|c| c.security_context.and_then(|s| s.run_as_user) == Some(0))
        .map(|c| c.name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
    )
}

/// The pod or every container must set a RuntimeDefault or Localhost seccomp profile.
pub(super) fn seccomp_profile(pod: &Pod<'_>, minor: u32) -> Option<Violation> {
    if minor >= 25 && is_windows(pod.spec) {
        return None;
    }
    let mut bad_values = BTreeSet::new();
    let mut setters = Vec::new();
    let mut pod_set = false;
    if let Some(p) = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
    {
        if valid_seccomp_type(&p.type_) {
            pod_set = true;
        } else {
            setters.push("pod".to_string());
            bad_values.insert(p.type_.clone());
        }
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(pod.spec) {
        match c.security_context.and_then(|s| s.seccomp_profile.as_ref()) {
            Some(p) if !valid_seccomp_type(&p.type_) => {
                explicit.push(c.name);
                bad_values.insert(p.type_.clone());
            }
            Some(_) => {}
            None if !pod_set => implicit.push(c.name),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if let Some(v) = seccomp_setters_violation(setters, bad_values) {
        return Some(v);
    }
    if implicit.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            containers_phrase(&implicit)
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
    fn privilege_escalation() {
        let s = json!({"containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"allowPrivilegeEscalation": true}},
            {"name": "c", "securityContext": {"allowPrivilegeEscalation": false}}
        ]});
        assert_eq!(
            check(allow_privilege_escalation, 33, &[], s),
            r(
                "allowPrivilegeEscalation != false",
                "containers \"a\", \"b\" must set securityContext.allowPrivilegeEscalation=false"
            )
        );
    }

    #[test]
    fn capabilities_drop_all_add_only_net_bind_service() {
        let s = json!({"containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}},
            {"name": "c", "securityContext": {"capabilities": {"drop": ["NET_RAW"], "add": ["CHOWN", "NET_ADMIN"]}}}
        ]});
        assert_eq!(
            check(capabilities, 33, &[], s),
            r(
                "unrestricted capabilities",
                "containers \"a\", \"c\" must set securityContext.capabilities.drop=[\"ALL\"]; container \"c\" must not include \"CHOWN\", \"NET_ADMIN\" in securityContext.capabilities.add"
            )
        );
    }

    #[test]
    fn volume_types() {
        let s = json!({"containers": [], "volumes": [
            {"name": "ok", "configMap": {"name": "x"}},
            {"name": "h", "hostPath": {"path": "/"}},
            {"name": "n", "nfs": {"server": "s", "path": "/"}},
            {"name": "g", "gitRepo": {"repository": "r"}},
            {"name": "u"}
        ]});
        assert_eq!(
            check(volumes, 33, &[], s),
            r(
                "restricted volume types",
                "volumes \"h\", \"n\", \"g\", \"u\" use restricted volume types \"gitRepo\", \"hostPath\", \"nfs\", \"unknown\""
            )
        );
        let s = json!({"containers": [], "volumes": [{"name": "h", "hostPath": {"path": "/"}}]});
        assert_eq!(
            check(volumes, 33, &[], s),
            r(
                "restricted volume types",
                "volume \"h\" uses restricted volume type \"hostPath\""
            )
        );
    }

    #[test]
    fn non_root() {
        // Explicit false wins over the implicit message.
        let s = json!({"securityContext": {"runAsNonRoot": false}, "containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"runAsNonRoot": false}}
        ]});
        assert_eq!(
            check(run_as_non_root, 33, &[], s),
            r(
                "runAsNonRoot != true",
                "pod and container \"b\" must not set securityContext.runAsNonRoot=false"
            )
        );
        let s = json!({"containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"runAsNonRoot": true}}
        ]});
        assert_eq!(
            check(run_as_non_root, 33, &[], s),
            r(
                "runAsNonRoot != true",
                "pod or container \"a\" must set securityContext.runAsNonRoot=true"
            )
        );
        let s = json!({"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "a"}]});
        assert_eq!(check(run_as_non_root, 33, &[], s), None);
    }

    #[test]
    fn root_user() {
        let s = json!({"securityContext": {"runAsUser": 0}, "containers": [
            {"name": "a", "securityContext": {"runAsUser": 0}},
            {"name": "b", "securityContext": {"runAsUser": 1000}}
        ]});
        assert_eq!(
            check(run_as_user, 33, &[], s),
            r(
                "runAsUser=0",
                "pod and container \"a\" must not set runAsUser=0"
            )
        );
    }

    #[test]
    fn seccomp_required() {
        let s = json!({"containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p"}}}
        ]});
        assert_eq!(
            check(seccomp_profile, 33, &[], s),
            r(
                "seccompProfile",
                "pod or container \"a\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\""
            )
        );
        let s = json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, "containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}
        ]});
        assert_eq!(
            check(seccomp_profile, 33, &[], s),
            r(
                "seccompProfile",
                "container \"b\" must not set securityContext.seccompProfile.type to \"Unconfined\""
            )
        );
    }
}
