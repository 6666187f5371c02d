//! The Pod Security Standards checks (pod-security-admission's `policy` package): pure
//! functions from a pod's annotations and spec to a violation, and the registry that picks
//! the checks of a level at a version.
//!
//! # Guarantees
//! - A level runs its own checks and every check of the lower levels, minus the baseline
//!   checks a restricted check replaces (capabilities, hostPath volumes, seccomp).
//! - Results come baseline first, then restricted, each in check-ID order (byte order), so
//!   messages are exactly upstream's.
//! - A check runs in the form it had at the requested version (`latest` and newer versions
//!   use [`LATEST_MINOR`](super::policy::LATEST_MINOR)'s); checks newer than the version are
//!   skipped.

mod baseline;
mod restricted;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ContainerPort, PodSpec, SecurityContext};

use super::policy::{Level, LevelVersion};

/// What a check looks at.
#[derive(Debug, Clone, Copy)]
pub struct Pod<'a> {
    pub annotations: &'a BTreeMap<String, String>,
    pub spec: &'a PodSpec,
}

/// Why a pod fails a check: a short reason and the detail naming the culprits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub reason: String,
    pub detail: String,
}

impl Violation {
    fn new(reason: impl Into<String>, detail: impl Into<String>) -> Option<Violation> {
        Some(Violation {
            reason: reason.into(),
            detail: detail.into(),
        })
    }
}

/// A check at a minor version of the policy.
type CheckFn = fn(&Pod<'_>, u32) -> Option<Violation>;

struct Check {
    id: &'static str,
    level: Level,
    /// The first minor version the check exists in.
    since: u32,
    /// Baseline checks this (restricted) check replaces while it exists.
    overrides: &'static [&'static str],
    run: CheckFn,
}

/// Every check, baseline then restricted, each sorted by ID (the order of the messages).
const CHECKS: &[Check] = &[
    Check::baseline("appArmorProfile", baseline::app_armor_profile),
    Check::baseline("capabilities_baseline", baseline::capabilities),
    Check::baseline("hostNamespaces", baseline::host_namespaces),
    Check::baseline("hostPathVolumes", baseline::host_path_volumes),
    Check::baseline("hostPorts", baseline::host_ports),
    Check::baseline("privileged", baseline::privileged),
    Check::baseline("procMount", baseline::proc_mount),
    Check::baseline("seLinuxOptions", baseline::se_linux_options),
    Check::baseline("seccompProfile_baseline", baseline::seccomp_profile),
    Check::baseline("sysctls", baseline::sysctls),
    Check::baseline("windowsHostProcess", baseline::windows_host_process),
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        since: 8,
        overrides: &[],
        run: restricted::allow_privilege_escalation,
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        since: 22,
        overrides: &["capabilities_baseline"],
        run: restricted::capabilities,
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        since: 0,
        overrides: &["hostPathVolumes"],
        run: restricted::volumes,
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        since: 0,
        overrides: &[],
        run: restricted::run_as_non_root,
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        since: 23,
        overrides: &[],
        run: restricted::run_as_user,
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        since: 19,
        overrides: &["seccompProfile_baseline"],
        run: restricted::seccomp_profile,
    },
];

impl Check {
    const fn baseline(id: &'static str, run: CheckFn) -> Check {
        Check {
            id,
            level: Level::Baseline,
            since: 0,
            overrides: &[],
            run,
        }
    }
}

/// The violations of `pod` against `lv` (none for `privileged`), in message order.
pub fn evaluate(lv: LevelVersion, pod: &Pod<'_>) -> Vec<Violation> {
    if lv.level == Level::Privileged {
        return Vec::new();
    }
    let minor = lv.version.effective_minor();
    let active: Vec<&Check> = CHECKS
        .iter()
        .filter(|c| c.level <= lv.level && c.since <= minor)
        .collect();
    let overridden: BTreeSet<&str> = active
        .iter()
        .flat_map(|c| c.overrides.iter().copied())
        .collect();
    active
        .into_iter()
        .filter(|c| !overridden.contains(c.id))
        .filter_map(|c| (c.run)(pod, minor))
        .collect()
}

/// `reason (detail), reason (detail)` — the text after `violates PodSecurity "<lv>": `.
pub fn forbidden_detail(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            if v.detail.is_empty() {
                v.reason.clone()
            } else {
                format!("{} ({})", v.reason, v.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `reason, reason` — the short form used for existing pods.
pub fn forbidden_reason(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| v.reason.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the checks see of a container (init, regular and ephemeral alike).
#[derive(Debug, Clone, Copy)]
struct Container<'a> {
    name: &'a str,
    security_context: Option<&'a SecurityContext>,
    ports: &'a [ContainerPort],
}

/// The pod's containers: init containers, containers, then ephemeral containers.
fn containers(spec: &PodSpec) -> Vec<Container<'_>> {
    let init = spec.init_containers.iter().flatten();
    let regular = spec.containers.iter();
    let mut out: Vec<Container<'_>> = init
        .chain(regular)
        .map(|c| Container {
            name: &c.name,
            security_context: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
        })
        .collect();
    out.extend(
        spec.ephemeral_containers
            .iter()
            .flatten()
            .map(|c| Container {
                name: &c.name,
                security_context: c.security_context.as_ref(),
                ports: c.ports.as_deref().unwrap_or_default(),
            }),
    );
    out
}

fn is_windows(spec: &PodSpec) -> bool {
    spec.os.as_ref().is_some_and(|os| os.name == "windows")
}

/// `"a", "b"`.
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

fn pluralize(singular: &'static str, plural: &'static str, count: usize) -> &'static str {
    if count == 1 {
        singular
    } else {
        plural
    }
}

/// `container "a"` / `containers "a", "b"`.
fn containers_phrase(names: &[&str]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// Go's `%q` of a string (the ASCII cases these messages carry).
fn go_quote(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// A sorted, deduplicated list.
fn sorted(set: BTreeSet<String>) -> Vec<String> {
    set.into_iter().collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::admission::pod_security::policy::Version;
    use serde_json::json;

    /// A pod spec from JSON (the tests' shorthand).
    pub(crate) fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).expect("a PodSpec")
    }

    pub(crate) fn check(
        f: CheckFn,
        minor: u32,
        annotations: &[(&str, &str)],
        s: serde_json::Value,
    ) -> Option<(String, String)> {
        let annotations: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let spec = spec(s);
        f(
            &Pod {
                annotations: &annotations,
                spec: &spec,
            },
            minor,
        )
        .map(|v| (v.reason, v.detail))
    }

    fn ids_sorted(level: Level) -> bool {
        let ids: Vec<&str> = CHECKS
            .iter()
            .filter(|c| c.level == level)
            .map(|c| c.id)
            .collect();
        ids.windows(2).all(|w| w[0].as_bytes() < w[1].as_bytes())
    }

    #[test]
    fn checks_are_in_message_order() {
        assert!(ids_sorted(Level::Baseline));
        assert!(ids_sorted(Level::Restricted));
        let first_restricted = CHECKS
            .iter()
            .position(|c| c.level == Level::Restricted)
            .unwrap();
        assert!(CHECKS[first_restricted..]
            .iter()
            .all(|c| c.level == Level::Restricted));
    }

    fn lv(level: Level, version: Version) -> LevelVersion {
        LevelVersion { level, version }
    }

    fn run(level: Level, version: Version, s: serde_json::Value) -> String {
        let annotations = BTreeMap::new();
        let spec = spec(s);
        forbidden_detail(&evaluate(
            lv(level, version),
            &Pod {
                annotations: &annotations,
                spec: &spec,
            },
        ))
    }

    #[test]
    fn a_plain_pod_against_each_level() {
        let plain = json!({"containers": [{"name": "c", "image": "busybox"}]});
        assert_eq!(run(Level::Privileged, Version::Latest, plain.clone()), "");
        assert_eq!(run(Level::Baseline, Version::Latest, plain.clone()), "");
        assert_eq!(
            run(Level::Restricted, Version::Latest, plain),
            "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
             unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
    }

    #[test]
    fn a_compliant_restricted_pod() {
        let good = json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "busybox", "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
            }}],
            "volumes": [{"name": "v", "emptyDir": {}}]
        });
        assert_eq!(run(Level::Restricted, Version::Latest, good), "");
    }

    #[test]
    fn restricted_includes_baseline_and_replaces_its_overridden_checks() {
        let s = json!({
            "hostNetwork": true,
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "Unconfined"}},
            "containers": [{"name": "c", "image": "i", "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
            }}],
            "volumes": [{"name": "h", "hostPath": {"path": "/"}}]
        });
        // Restricted: hostNetwork from baseline; capabilities, volumes and seccomp once each,
        // in their restricted form.
        assert_eq!(
            run(Level::Restricted, Version::Latest, s.clone()),
            "host namespaces (hostNetwork=true), \
             unrestricted capabilities (container \"c\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add), \
             restricted volume types (volume \"h\" uses restricted volume type \"hostPath\"), \
             seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"
        );
        assert_eq!(
            run(Level::Baseline, Version::Latest, s),
            "non-default capabilities (container \"c\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add), \
             host namespaces (hostNetwork=true), \
             hostPath volumes (volume \"h\"), \
             seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"
        );
    }

    #[test]
    fn older_versions_use_older_checks() {
        let plain = json!({"containers": [{"name": "c", "image": "i"}]});
        // Before 1.22 restricted had no capabilities check; before 1.19 no seccomp field
        // check; before 1.8 no allowPrivilegeEscalation check.
        assert_eq!(
            run(Level::Restricted, Version::Minor(18), plain.clone()),
            "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
             runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true)"
        );
        assert_eq!(
            run(Level::Restricted, Version::Minor(7), plain),
            "runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true)"
        );
        let root = json!({"securityContext": {"runAsUser": 0},
            "containers": [{"name": "c", "image": "i"}]});
        assert!(!run(Level::Restricted, Version::Minor(22), root.clone()).contains("runAsUser=0"));
        assert!(run(Level::Restricted, Version::Minor(23), root)
            .contains("runAsUser=0 (pod must not set runAsUser=0)"));
    }

    #[test]
    fn windows_pods_skip_linux_only_restricted_checks_from_1_25() {
        let s = json!({"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "c", "image": "i"}]});
        assert_eq!(run(Level::Restricted, Version::Latest, s.clone()), "");
        assert!(
            run(Level::Restricted, Version::Minor(24), s).starts_with("allowPrivilegeEscalation")
        );
    }

    #[test]
    fn containers_are_visited_init_regular_ephemeral() {
        let s = spec(json!({
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "c"}],
            "ephemeralContainers": [{"name": "e"}]
        }));
        let names: Vec<&str> = containers(&s).iter().map(|c| c.name).collect();
        assert_eq!(names, vec!["i", "c", "e"]);
    }

    #[test]
    fn helpers() {
        assert_eq!(join_quote::<&str>(&[]), "");
        assert_eq!(join_quote(&["a", "b"]), "\"a\", \"b\"");
        assert_eq!(containers_phrase(&["a"]), "container \"a\"");
        assert_eq!(go_quote("x\"y"), "\"x\\\"y\"");
        assert_eq!(
            forbidden_reason(&[
                Violation {
                    reason: "a".into(),
                    detail: "x".into()
                },
                Violation {
                    reason: "b".into(),
                    detail: String::new()
                }
            ]),
            "a, b"
        );
    }
}
