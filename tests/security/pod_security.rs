//! PodSecurity admission end to end with kubectl: namespace labels choose the level,
//! `enforce` denies pods in upstream's words, `warn` reaches kubectl as `Warning:` lines,
//! workloads are only warned about (their pods are denied when the controller creates them),
//! tightening a namespace warns about its existing pods, and bad labels are rejected.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;

const ROOTFUL_RESTRICTED: &str = "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

fn pod(name: &str, ns: &str, spec: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "{ns}"}},
        "spec": {spec}}}"#
    )
}

const PLAIN: &str = r#"{"containers": [{"name": "c", "image": "busybox"}]}"#;
const HOST_NETWORK: &str =
    r#"{"hostNetwork": true, "containers": [{"name": "c", "image": "busybox"}]}"#;
const RESTRICTED_OK: &str = r#"{
    "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "c", "image": "busybox", "securityContext": {
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}"#;

fn namespace(k: &Kubectl, name: &str, labels: &[&str]) {
    k.ok(&["create", "namespace", name]);
    if !labels.is_empty() {
        let mut args = vec!["label", "namespace", name];
        args.extend_from_slice(labels);
        k.ok(&args);
    }
}

#[test]
fn enforce_warn_and_namespace_labels() {
    let (_server, k) = Kubectl::start_server(&[]);

    // No labels: privileged, anything goes and nothing is said.
    namespace(&k, "open", &[]);
    let out = k.run_stdin(
        &["create", "-f", "-"],
        Some(&pod("host", "open", HOST_NETWORK)),
    );
    assert!(out.ok, "{out:?}");
    assert!(!out.stderr.contains("Warning"), "{out:?}");

    // enforce=restricted: a plain pod is denied with every reason, in upstream's order.
    namespace(
        &k,
        "strict",
        &["pod-security.kubernetes.io/enforce=restricted"],
    );
    let out = k.run_stdin(&["create", "-f", "-"], Some(&pod("p", "strict", PLAIN)));
    assert!(!out.ok, "{out:?}");
    let want = format!(
        "pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": {ROOTFUL_RESTRICTED}"
    );
    assert!(out.stderr.contains(&want), "{out:?}\nwant: {want}");
    // The same through a server-side dry run, and a compliant pod passes silently.
    let out = k.run_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        Some(&pod("p", "strict", PLAIN)),
    );
    assert!(out.stderr.contains("violates PodSecurity"), "{out:?}");
    let out = k.run_stdin(
        &["create", "-f", "-"],
        Some(&pod("good", "strict", RESTRICTED_OK)),
    );
    assert!(out.ok, "{out:?}");
    assert!(!out.stderr.contains("Warning"), "{out:?}");

    // A pinned version evaluates that version's checks: before v1.22 restricted had no
    // capabilities check, before v1.19 no seccomp check.
    namespace(
        &k,
        "old",
        &[
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/enforce-version=v1.18",
        ],
    );
    let out = k.run_stdin(&["create", "-f", "-"], Some(&pod("p", "old", PLAIN)));
    assert!(
        out.stderr.contains(
            "violates PodSecurity \"restricted:v1.18\": allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true"
        ) && !out.stderr.contains("capabilities"),
        "{out:?}"
    );

    // enforce=baseline + warn=restricted: a plain pod is admitted with kubectl printing the
    // warning; a host-network pod is denied.
    namespace(
        &k,
        "mixed",
        &[
            "pod-security.kubernetes.io/enforce=baseline",
            "pod-security.kubernetes.io/warn=restricted",
        ],
    );
    let out = k.run_stdin(&["create", "-f", "-"], Some(&pod("p", "mixed", PLAIN)));
    assert!(out.ok, "{out:?}");
    let want =
        format!("Warning: would violate PodSecurity \"restricted:latest\": {ROOTFUL_RESTRICTED}");
    assert!(out.stderr.contains(&want), "{out:?}\nwant: {want}");
    let out = k.run_stdin(
        &["create", "-f", "-"],
        Some(&pod("h", "mixed", HOST_NETWORK)),
    );
    assert!(
        out.stderr.contains(
            "pods \"h\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)"
        ),
        "{out:?}"
    );

    // Malformed labels are refused on the namespace itself.
    let out = k.run(&[
        "label",
        "namespace",
        "open",
        "pod-security.kubernetes.io/enforce=strict",
    ]);
    assert!(!out.ok, "{out:?}");
    assert!(
        out.stderr.contains(
            "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
        ),
        "{out:?}"
    );

    // Tightening "open" (which holds a host-network pod) warns about that pod, and the
    // label is applied.
    let out = k.run(&[
        "label",
        "namespace",
        "open",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    assert!(out.ok, "{out:?}");
    assert!(
        out.stderr.contains(
            "Warning: existing pods in namespace \"open\" violate the new PodSecurity enforce level \"baseline:latest\""
        ) && out.stderr.contains("Warning: host: host namespaces"),
        "{out:?}"
    );
    // Updating the existing pod without changing an image is not re-evaluated.
    let out = k.run(&["label", "pod", "host", "-n", "open", "x=y"]);
    assert!(out.ok, "{out:?}");
}

#[test]
fn workloads_are_warned_and_their_pods_denied() {
    let (_server, k) = Kubectl::start_server(&[]);
    namespace(
        &k,
        "apps",
        &["pod-security.kubernetes.io/enforce=restricted"],
    );
    // The Deployment is stored (never denied) with the warning that enforce implies.
    let out = k.run(&[
        "create",
        "deployment",
        "web",
        "-n",
        "apps",
        "--image=busybox",
    ]);
    assert!(out.ok, "{out:?}");
    assert!(
        out.stderr.contains(
            "Warning: would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"busybox\" must set securityContext.allowPrivilegeEscalation=false)"
        ),
        "{out:?}"
    );
    // Its ReplicaSet's pods are refused: the controller reports why, with the pod's name.
    common::wait_for(
        "the FailedCreate event of web's ReplicaSet",
        Duration::from_secs(60),
        || {
            let out = k.ok(&[
                "get",
                "events",
                "-n",
                "apps",
                "--field-selector=reason=FailedCreate",
                "-o",
                "jsonpath={.items[*].message}",
            ]);
            out.contains("is forbidden: violates PodSecurity \"restricted:latest\"")
                .then_some(out)
        },
    );
    let pods = k.ok(&["get", "pods", "-n", "apps", "-o", "name"]);
    assert_eq!(pods.trim(), "", "no pod may exist");
}

const ADMISSION_CONFIG: &str = r#"apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
      audit: restricted
    exemptions:
      usernames: [ci-bot]
      namespaces: [legacy]
"#;

const AUDIT_PODS: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["pods"]
  verbs: ["create"]
- level: None
"#;

/// The `pod-security.kubernetes.io/<key>` annotation of the audit event of pod `name`'s create.
fn pod_annotation(log: &std::path::Path, ns: &str, name: &str, key: &str) -> String {
    let e = common::audit_log::wait_event(log, &format!("create pod {ns}/{name}"), |e| {
        common::audit_log::s(e, "/objectRef/namespace") == ns
            && common::audit_log::s(e, "/objectRef/name") == name
    });
    common::audit_log::s(
        &e,
        &format!("/annotations/pod-security.kubernetes.io~1{key}"),
    )
    .to_string()
}

#[test]
fn admission_configuration_defaults_exemptions_and_audit_annotations() {
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("psa.yaml");
    std::fs::write(&config, ADMISSION_CONFIG).unwrap();
    let policy = files.path().join("audit.yaml");
    std::fs::write(&policy, AUDIT_PODS).unwrap();
    let log = files.path().join("audit.log");
    let (_server, k) = Kubectl::start_server(&[
        &format!("--pod-security-admission-config-file={}", config.display()),
        &format!(
            "--kube-apiserver-arg=audit-policy-file={}",
            policy.display()
        ),
        &format!("--kube-apiserver-arg=audit-log-path={}", log.display()),
    ]);

    // No labels: the configured default enforce level (baseline) applies.
    namespace(&k, "plain", &[]);
    let out = k.run_stdin(
        &["create", "-f", "-"],
        Some(&pod("host", "plain", HOST_NETWORK)),
    );
    assert!(
        out.stderr.contains(
            "pods \"host\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)"
        ),
        "{out:?}"
    );
    // A baseline pod passes; the audit default (restricted) records its violations.
    k.ok_stdin(&["create", "-f", "-"], Some(&pod("p", "plain", PLAIN)));
    assert_eq!(
        pod_annotation(&log, "plain", "p", "enforce-policy"),
        "baseline:latest"
    );
    assert_eq!(
        pod_annotation(&log, "plain", "p", "audit-violations"),
        format!("would violate PodSecurity \"restricted:latest\": {ROOTFUL_RESTRICTED}")
    );

    // A namespace label overrides the default for its mode only.
    namespace(
        &k,
        "open",
        &["pod-security.kubernetes.io/enforce=privileged"],
    );
    k.ok_stdin(
        &["create", "-f", "-"],
        Some(&pod("host", "open", HOST_NETWORK)),
    );
    assert_eq!(
        pod_annotation(&log, "open", "host", "enforce-policy"),
        "privileged:latest"
    );
    assert!(pod_annotation(&log, "open", "host", "audit-violations")
        .starts_with("would violate PodSecurity \"restricted:latest\": host namespaces"));

    // Exempt namespace and exempt user: not evaluated, and the audit event says why.
    namespace(&k, "legacy", &[]);
    k.ok_stdin(
        &["create", "-f", "-"],
        Some(&pod("host", "legacy", HOST_NETWORK)),
    );
    assert_eq!(
        pod_annotation(&log, "legacy", "host", "exempt"),
        "namespace"
    );
    k.ok(&[
        "create",
        "rolebinding",
        "ci",
        "--clusterrole=edit",
        "--user=ci-bot",
        "-n",
        "plain",
    ]);
    k.ok_stdin(
        &["create", "--as=ci-bot", "-f", "-"],
        Some(&pod("bot", "plain", HOST_NETWORK)),
    );
    assert_eq!(pod_annotation(&log, "plain", "bot", "exempt"), "user");
}

#[test]
fn a_bad_admission_configuration_stops_the_server() {
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("psa.yaml");
    std::fs::write(
        &config,
        ADMISSION_CONFIG.replace("enforce: baseline", "enforce: strict"),
    )
    .unwrap();
    let (status, log, _dir) = common::K3rs::run_to_exit(
        &[&format!(
            "--kube-apiserver-arg=admission-control-config-file={}",
            config.display()
        )],
        Duration::from_secs(60),
    );
    assert!(status.is_some_and(|s| !s.success()), "{log}");
    assert!(
        log.contains("defaults.enforce: Invalid value: \"strict\": must be one of privileged, baseline, restricted"),
        "{log}"
    );
}
