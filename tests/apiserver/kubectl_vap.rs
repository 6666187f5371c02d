//! End to end: ValidatingAdmissionPolicy with the real `k3rs server` and the real `kubectl`.
//! A policy bound with `Deny` rejects deployments over five replicas in the namespaces its
//! binding selects (kube-apiserver's message and 422), a `Warn` binding only warns, an
//! `Audit` binding annotates the audit event, a ConfigMap parameter changes the verdict
//! (and a missing one denies), runtime errors follow `failurePolicy`, invalid policies and
//! bindings are refused with field errors, `kubectl get` prints upstream's columns,
//! `kubectl explain` knows the kinds, and deleting the binding stops enforcement.

use std::path::Path;
use std::time::Duration;

use crate::common;
use crate::common::audit_log::{s, wait_event};
use crate::common::kubectl::{table, Kubectl};

const MAX_REPLICAS: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-replicas}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= 5"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas-prod}
spec:
  policyName: max-replicas
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
"#;

const WARN_AND_AUDIT: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas-dev}
spec:
  policyName: max-replicas
  validationActions: [Warn, Audit]
  matchResources:
    namespaceSelector: {matchLabels: {env: dev}}
"#;

const CONFIGMAP_LIMIT: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: ["*"], resources: [deployments]}
  variables:
  - {name: limit, expression: "int(params.data.max)"}
  validations:
  - expression: "object.spec.replicas <= variables.limit"
    messageExpression: "'replicas must be at most ' + string(variables.limit) + ' for ' + request.userInfo.username"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit-params}
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef: {name: limits, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector: {matchLabels: {env: params}}
"#;

const TEAM_LABEL: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: team-label}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    namespaceSelector: {matchLabels: {env: prod}}
  matchConditions:
  - {name: not-kube-root, expression: "object.metadata.name != 'kube-root-ca.crt'"}
  validations:
  - expression: "object.metadata.labels.team != ''"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: team-label}
spec:
  policyName: team-label
  validationActions: [Deny]
"#;

const BROKEN_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.spec.replicas <="
"#;

const BROKEN_BINDING: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: broken}
spec:
  policyName: max-replicas
  validationActions: [Deny, Warn]
"#;

const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources:\n  - group: apps\n    resources: [deployments]\n- level: None\n";

/// A Deployment manifest (for `kubectl apply`, which prints the server's Status as is).
fn manifest(ns: &str, name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n\
         \x20 template:\n    metadata: {{labels: {{app: {name}}}}}\n\
         \x20   spec: {{containers: [{{name: c, image: busybox}}]}}\n"
    )
}

const DENIED: &str = "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-prod' denied request: failed expression: object.spec.replicas <= 5";

fn deployment(k: &Kubectl, ns: &str, name: &str, replicas: u32) -> common::kubectl::Out {
    k.run(&[
        "create",
        "deployment",
        name,
        "--image=busybox",
        &format!("--replicas={replicas}"),
        "-n",
        ns,
    ])
}

/// Waits (bounded) until creating `name` with `replicas` in `ns` fails with `needle`: the
/// plugin sees new policies and bindings through a watch.
fn until_denied(k: &Kubectl, ns: &str, name: &str, replicas: u32, needle: &str) -> String {
    common::wait_for(needle, Duration::from_secs(20), || {
        let out = deployment(k, ns, name, replicas);
        if out.ok {
            k.ok(&["delete", "deployment", name, "-n", ns]);
            std::thread::sleep(Duration::from_millis(200));
            return None;
        }
        out.stderr.contains(needle).then_some(out.stderr)
    })
}

fn namespace(k: &Kubectl, name: &str, env: &str) {
    k.ok(&["create", "namespace", name]);
    k.ok(&["label", "namespace", name, &format!("env={env}")]);
}

fn audit_server(dir: &Path) -> (common::K3rs, Kubectl, std::path::PathBuf) {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, AUDIT_POLICY).unwrap();
    let log = dir.join("audit.log");
    let (server, k) = Kubectl::start_server(&[
        "--disable-agent",
        &format!(
            "--kube-apiserver-arg=audit-policy-file={}",
            policy.display()
        ),
        &format!("--kube-apiserver-arg=audit-log-path={}", log.display()),
    ]);
    (server, k, log)
}

#[test]
fn policies_deny_warn_audit_and_stop_with_their_binding() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, k, log) = audit_server(dir.path());
    namespace(&k, "prod", "prod");
    namespace(&k, "dev", "dev");
    k.ok_stdin(&["apply", "-f", "-"], Some(MAX_REPLICAS));

    // Deny in the selected namespace: kube-apiserver's 422 and message.
    until_denied(&k, "prod", "big", 7, DENIED);
    // The 422 Status as kubectl prints one: the message as the one cause.
    let err = k.fails_with(
        &["apply", "-f", "-"],
        Some(&manifest("prod", "big", 7)),
        DENIED,
    );
    assert!(
        err.contains(&format!("The deployments \"big\" is invalid: : {DENIED}")),
        "{err}"
    );
    // Within the limit, and outside the binding's namespaces, writes pass.
    k.ok(&[
        "create",
        "deployment",
        "small",
        "--image=busybox",
        "--replicas=3",
        "-n",
        "prod",
    ]);
    assert!(deployment(&k, "dev", "big", 7).ok);
    // Updates are validated too.
    k.fails_with(
        &[
            "patch",
            "deployment",
            "small",
            "-n",
            "prod",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":9}}"#,
        ],
        None,
        DENIED,
    );
    assert_eq!(
        k.ok(&[
            "get",
            "deployment",
            "small",
            "-n",
            "prod",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "3"
    );

    // Warn and Audit: the write passes with a warning and an audit annotation.
    k.ok_stdin(&["apply", "-f", "-"], Some(WARN_AND_AUDIT));
    let warning = "Warning: Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-dev': failed expression: object.spec.replicas <= 5";
    let mut n = 0;
    let out = common::wait_for("the Warn binding", Duration::from_secs(20), || {
        n += 1;
        let out = deployment(&k, "dev", &format!("warned-{n}"), 8);
        assert!(out.ok, "{out:?}");
        out.stderr.contains(warning).then_some(out)
    });
    assert!(out
        .stdout
        .contains(&format!("deployment.apps/warned-{n} created")));
    let event = wait_event(&log, "the audited create", |e| {
        s(e, "/objectRef/name") == format!("warned-{n}") && s(e, "/stage") == "ResponseComplete"
    });
    let failure: serde_json::Value = serde_json::from_str(s(
        &event,
        "/annotations/validation.policy.admission.k8s.io~1validation_failure",
    ))
    .unwrap_or_else(|e| panic!("{e}: {event}"));
    assert_eq!(
        failure,
        serde_json::json!([{"message": "failed expression: object.spec.replicas <= 5",
            "policy": "max-replicas", "binding": "max-replicas-dev", "expressionIndex": 0,
            "validationActions": ["Warn", "Audit"]}])
    );

    // Deleting the binding stops enforcement (the watch carries it).
    k.ok(&[
        "delete",
        "validatingadmissionpolicybinding",
        "max-replicas-prod",
    ]);
    common::wait_for("enforcement to stop", Duration::from_secs(20), || {
        let out = deployment(&k, "prod", "big", 7);
        if !out.ok {
            assert!(out.stderr.contains(DENIED), "{out:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
        out.ok.then_some(())
    });
}

#[test]
fn params_failure_policy_validation_and_printing() {
    let (_server, k) = Kubectl::start_server(&["--disable-agent"]);
    namespace(&k, "limited", "params");
    namespace(&k, "prod", "prod");
    k.ok_stdin(&["apply", "-f", "-"], Some(CONFIGMAP_LIMIT));

    // The binding's parameter is missing: parameterNotFoundAction Deny.
    until_denied(
        &k,
        "limited",
        "web",
        1,
        "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-params' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
    );
    // With the ConfigMap (read in the request's namespace) its value decides.
    k.ok(&[
        "create",
        "configmap",
        "limits",
        "-n",
        "limited",
        "--from-literal=max=2",
    ]);
    let err = k.fails_with(
        &["apply", "-f", "-"],
        Some(&manifest("limited", "web", 3)),
        "denied request: replicas must be at most 2 for system:admin",
    );
    assert!(
        err.contains("Error from server (Forbidden)"),
        "the validation's reason: {err}"
    );
    k.ok(&[
        "patch",
        "configmap",
        "limits",
        "-n",
        "limited",
        "--type=merge",
        "-p",
        r#"{"data":{"max":"4"}}"#,
    ]);
    k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=3",
        "-n",
        "limited",
    ]);

    // A runtime error under failurePolicy Fail denies; matchConditions skip requests.
    k.ok_stdin(&["apply", "-f", "-"], Some(TEAM_LABEL));
    common::wait_for("the team-label policy", Duration::from_secs(20), || {
        let out = k.run(&["create", "configmap", "unlabelled", "-n", "prod"]);
        if out.ok {
            k.ok(&["delete", "configmap", "unlabelled", "-n", "prod"]);
            std::thread::sleep(Duration::from_millis(200));
            return None;
        }
        assert!(
            out.stderr.contains("ValidatingAdmissionPolicy 'team-label' with binding 'team-label' denied request: expression 'object.metadata.labels.team != ''' resulted in error: no such key"),
            "{out:?}"
        );
        Some(())
    });
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: labelled, namespace: prod, labels: {team: a}}\n"),
    );
    // failurePolicy Ignore: the same error admits.
    k.ok(&[
        "patch",
        "validatingadmissionpolicy",
        "team-label",
        "--type=merge",
        "-p",
        r#"{"spec":{"failurePolicy":"Ignore"}}"#,
    ]);
    common::wait_for("failurePolicy Ignore", Duration::from_secs(20), || {
        let ok = k
            .run(&["create", "configmap", "unlabelled", "-n", "prod"])
            .ok;
        if !ok {
            std::thread::sleep(Duration::from_millis(200));
        }
        ok.then_some(())
    });

    // Invalid policies and bindings are refused with field errors.
    let err = k.fails_with(&["apply", "-f", "-"], Some(BROKEN_POLICY), "is invalid");
    assert!(
        err.contains("spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": compilation failed: ERROR: <input>:1:"),
        "{err}"
    );
    let err = k.fails_with(&["apply", "-f", "-"], Some(BROKEN_BINDING), "is invalid");
    assert!(
        err.contains("spec.validationActions: Invalid value:"),
        "{err}"
    );
    assert!(err.contains("must not contain both Deny and Warn"), "{err}");

    // Defaults, tables, explain.
    assert_eq!(
        k.ok(&["get", "validatingadmissionpolicy", "replica-limit", "-o", "jsonpath={.spec.failurePolicy} {.spec.matchConstraints.matchPolicy} {.spec.matchConstraints.resourceRules[0].scope}"]),
        "Fail Equivalent *"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "validatingadmissionpolicybinding",
            "replica-limit-params",
            "-o",
            "jsonpath={.spec.paramRef.parameterNotFoundAction}"
        ]),
        "Deny"
    );
    let t = table(&k.ok(&["get", "validatingadmissionpolicies"]));
    assert_eq!(t[0], ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"]);
    let row = t.iter().find(|r| r[0] == "replica-limit").unwrap();
    assert_eq!(row[1..3], ["1", "v1/ConfigMap"]);
    let t = table(&k.ok(&["get", "validatingadmissionpolicybindings"]));
    assert_eq!(t[0], ["NAME", "POLICYNAME", "PARAMREF", "AGE"]);
    let row = t.iter().find(|r| r[0] == "replica-limit-params").unwrap();
    assert_eq!(row[1..3], ["replica-limit", "*/limits"]);
    let explain = k.ok(&["explain", "validatingadmissionpolicy.spec"]);
    for field in [
        "validations",
        "failurePolicy",
        "paramKind",
        "matchConstraints",
    ] {
        assert!(explain.contains(field), "{field} in {explain}");
    }
    let resources = k.ok(&["api-resources", "--api-group=admissionregistration.k8s.io"]);
    assert!(
        resources.contains("validatingadmissionpolicybindings"),
        "{resources}"
    );
}

/// A ConfigMap may name a Secret (label `secret-ref`) only when its author may read that
/// Secret; and only those who may `approve` configmaps may label one `approved`.
const SECRET_REF: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: secret-ref}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  variables:
  - name: ref
    expression: "has(object.metadata.labels) && 'secret-ref' in object.metadata.labels ? object.metadata.labels['secret-ref'] : ''"
  validations:
  - expression: "variables.ref == '' || authorizer.group('').resource('secrets').namespace(object.metadata.namespace).name(variables.ref).check('get').allowed()"
    messageExpression: "'may not refer to secret ' + variables.ref + ': ' + authorizer.group('').resource('secrets').namespace(object.metadata.namespace).name(variables.ref).check('get').reason()"
    reason: Forbidden
  - expression: "!has(object.metadata.labels) || !('approved' in object.metadata.labels) || authorizer.requestResource.check('approve').allowed()"
    message: "only approvers may create approved configmaps"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: secret-ref}
spec:
  policyName: secret-ref
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {env: authz}}
"#;

fn configmap(k: &Kubectl, name: &str, labels: &str, user: &str) -> common::kubectl::Out {
    k.run_stdin(
        &["create", "--as", user, "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: team, labels: {{{labels}}}}}\n"
        )),
    )
}

#[test]
fn policies_ask_the_authorizer() {
    let (_server, k) = Kubectl::start_server(&["--disable-agent"]);
    namespace(&k, "team", "authz");
    // bob may create configmaps in `team`, nothing else.
    k.ok(&[
        "create",
        "role",
        "cm-writer",
        "-n",
        "team",
        "--verb=create,get",
        "--resource=configmaps",
    ]);
    k.ok(&[
        "create",
        "rolebinding",
        "bob-cm",
        "-n",
        "team",
        "--role=cm-writer",
        "--user=bob",
    ]);
    k.ok_stdin(&["apply", "-f", "-"], Some(SECRET_REF));

    // Without access to the secret: denied with the authorizer's reason (bounded retry
    // while the policy reaches the cache).
    let mut n = 0;
    let err = common::wait_for("the policy", Duration::from_secs(20), || {
        n += 1;
        let out = configmap(&k, &format!("c{n}"), "secret-ref: db", "bob");
        (!out.ok).then_some(out.stderr)
    });
    assert!(err.contains("may not refer to secret db"), "{err}");
    assert!(err.contains("is forbidden: ValidatingAdmissionPolicy 'secret-ref' with binding 'secret-ref' denied request"), "{err}");
    // Unlabelled configmaps and the admin (system:masters) pass.
    assert!(configmap(&k, "plain", "a: b", "bob").ok);
    k.ok_stdin(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: admins, namespace: team, labels: {secret-ref: db}}\n"),
    );

    // Read access to exactly that secret (resourceNames): the check names it.
    k.ok(&[
        "create",
        "role",
        "db-reader",
        "-n",
        "team",
        "--verb=get",
        "--resource=secrets",
        "--resource-name=db",
    ]);
    k.ok(&[
        "create",
        "rolebinding",
        "bob-db",
        "-n",
        "team",
        "--role=db-reader",
        "--user=bob",
    ]);
    let out = configmap(&k, "refers-db", "secret-ref: db", "bob");
    assert!(out.ok, "{out:?}");
    let out = configmap(&k, "refers-other", "secret-ref: other", "bob");
    assert!(
        !out.ok && out.stderr.contains("may not refer to secret other"),
        "{out:?}"
    );

    // authorizer.requestResource: the request's own resource with another verb.
    let out = configmap(&k, "approved-1", "approved: \"yes\"", "bob");
    assert!(
        !out.ok
            && out
                .stderr
                .contains("only approvers may create approved configmaps"),
        "{out:?}"
    );
    k.ok(&[
        "create",
        "role",
        "cm-approver",
        "-n",
        "team",
        "--verb=approve",
        "--resource=configmaps",
    ]);
    k.ok(&[
        "create",
        "rolebinding",
        "bob-approve",
        "-n",
        "team",
        "--role=cm-approver",
        "--user=bob",
    ]);
    let out = configmap(&k, "approved-2", "approved: \"yes\"", "bob");
    assert!(out.ok, "{out:?}");
}
