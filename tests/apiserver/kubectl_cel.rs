//! End to end: CEL with the real `k3rs server` and the real `kubectl`. CRD
//! `x-kubernetes-validations` reject bad custom resources with upstream's field errors
//! (rule messages, `messageExpression`, `reason`, `fieldPath`), transition rules reject a
//! decrease on update, status updates are validated too, and a CRD whose rule does not
//! compile is refused with 422.

use crate::common;
use crate::common::kubectl::Kubectl;

const SCALERS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: scalers.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: scalers, kind: Scaler}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.replicas <= self.maxReplicas", message: "must be <= maxReplicas", fieldPath: ".replicas"}
            - {rule: "self.maxReplicas >= oldSelf.maxReplicas", message: "maxReplicas may not decrease"}
            properties:
              replicas: {type: integer}
              maxReplicas: {type: integer}
              name:
                type: string
                x-kubernetes-validations:
                - {rule: "self == self.lowerAscii()", messageExpression: "'name ' + self + ' must be lower case'", reason: FieldValueForbidden}
          status:
            type: object
            properties:
              ready: {type: integer, x-kubernetes-validations: [{rule: "self >= 0"}]}
"#;

const BROKEN: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: brokens.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: brokens, kind: Broken}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations: [{rule: "self.replicas >"}]
            properties: {replicas: {type: integer}}
"#;

fn scaler(name: &str, spec: &str) -> String {
    common::kubectl::example_object("Scaler", name, spec)
}

#[test]
fn crd_validation_rules() {
    let (_server, k) = Kubectl::start_server(&["--disable-agent"]);
    k.ok_stdin(&["apply", "-f", "-"], Some(SCALERS));
    k.crd_established("scalers.example.com");

    // A rule that evaluates to false: 422 with the rule's message at its fieldPath.
    let err = k.fails_with(
        &["apply", "-f", "-"],
        Some(&scaler("s1", "{replicas: 5, maxReplicas: 3, name: Big}")),
        "is invalid",
    );
    for needle in [
        "The Scaler \"s1\" is invalid",
        "spec.replicas: Invalid value: \"object\": must be <= maxReplicas",
        "spec.name: Forbidden: name Big must be lower case",
    ] {
        assert!(err.contains(needle), "{needle} in {err}");
    }

    // A valid one is stored; a transition rule rejects a decrease on update only.
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&scaler("s1", "{replicas: 2, maxReplicas: 3, name: small}")),
    );
    k.fails_with(
        &["apply", "-f", "-"],
        Some(&scaler("s1", "{replicas: 1, maxReplicas: 2, name: small}")),
        "spec: Invalid value: \"object\": maxReplicas may not decrease",
    );
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&scaler("s1", "{replicas: 4, maxReplicas: 4, name: small}")),
    );
    assert_eq!(
        k.ok(&["get", "scaler", "s1", "-o", "jsonpath={.spec.maxReplicas}"]),
        "4"
    );

    // The status subresource is validated too.
    k.fails_with(
        &[
            "patch",
            "scaler",
            "s1",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"ready":-1}}"#,
        ],
        None,
        "status.ready: Invalid value: \"integer\": failed rule: self >= 0",
    );
    k.ok(&[
        "patch",
        "scaler",
        "s1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"ready":2}}"#,
    ]);

    // A CRD whose rule does not compile is refused.
    let err = k.fails_with(&["apply", "-f", "-"], Some(BROKEN), "is invalid");
    assert!(
        err.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value:"),
        "{err}"
    );
    assert!(
        err.contains("compilation failed: ERROR: <input>:1:"),
        "{err}"
    );
    assert!(!k.run(&["get", "crd", "brokens.example.com"]).ok);
}
