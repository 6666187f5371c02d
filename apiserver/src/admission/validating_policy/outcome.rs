//! What the policies decided about one request, gathered across policies, bindings and
//! parameters, and turned into the response (upstream's dispatcher): the first denial is
//! the error, warnings and audit annotations are published either way.
//!
//! # Guarantees
//! - A failed validation goes where its binding's `validationActions` say: `Deny` (the
//!   error), `Warn` (`Validation failed for ValidatingAdmissionPolicy '<p>' with binding
//!   '<b>': <message>`), `Audit` (the `validation.policy.admission.k8s.io/validation_failure`
//!   annotation).
//! - Misconfigured policies and bindings deny under `failurePolicy: Fail` whatever the
//!   binding's actions, and are ignored under `Ignore`.
//! - The denial is `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<p>' with
//!   binding '<b>' denied request: <message>` with the validation's reason and its code
//!   (Invalid 422, Forbidden 403, Unauthorized 401, RequestEntityTooLarge 413) and the text
//!   as the one cause, as kube-apiserver sends it.

use serde_json::json;

use super::evaluate::{Action, Evaluation};
use super::model::{Action as BindingAction, Binding, Policy};
use crate::admission::{forbidden, Attributes};
use k3rs_apimachinery::status::ApiError;

/// The audit annotation a failed `Audit` validation adds.
pub const VALIDATION_FAILURE: &str = "validation.policy.admission.k8s.io/validation_failure";

/// One denial: which policy and binding, the message and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub policy: String,
    pub binding: Option<String>,
    pub message: String,
    pub reason: &'static str,
}

/// Everything decided so far.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub denials: Vec<Denial>,
    pub warnings: Vec<String>,
    /// Audit annotations, in order (the first value of a key wins when published).
    pub audit: Vec<(String, String)>,
}

impl Outcome {
    /// A configuration error of `policy` (and `binding`, when it is the binding's).
    pub fn config_error(&mut self, policy: &Policy, binding: Option<&Binding>, err: &str) {
        if policy.ignore_failures {
            return;
        }
        let message = match binding {
            None => format!("failed to configure policy: {err}"),
            Some(_) => format!("failed to configure binding: {err}"),
        };
        self.denials.push(Denial {
            policy: policy.name.clone(),
            binding: binding.map(|b| b.name.clone()),
            message,
            reason: "Invalid",
        });
    }

    /// What one evaluation of `policy` through `binding` decided.
    pub fn record(&mut self, policy: &Policy, binding: &Binding, eval: Evaluation) {
        for d in eval.decisions.iter().filter(|d| d.action == Action::Deny) {
            for action in &binding.actions {
                match action {
                    BindingAction::Deny => self.denials.push(Denial {
                        policy: policy.name.clone(),
                        binding: Some(binding.name.clone()),
                        message: d.message.clone(),
                        reason: d.reason,
                    }),
                    BindingAction::Warn => self.warnings.push(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                        policy.name, binding.name, d.message
                    )),
                    BindingAction::Audit => {
                        let value = json!([{
                            "message": d.message,
                            "policy": binding.policy_name,
                            "binding": binding.name,
                            "expressionIndex": d.index,
                            "validationActions": binding.actions.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
                        }]);
                        self.audit
                            .push((VALIDATION_FAILURE.to_string(), value.to_string()));
                    }
                }
            }
        }
        for (key, value) in eval.annotations {
            let key = format!("{}/{key}", policy.name);
            match self.audit.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) if v.split(", ").any(|x| x == value) => {}
                Some((_, v)) => {
                    v.push_str(", ");
                    v.push_str(&value);
                }
                None => self.audit.push((key, value)),
            }
        }
    }

    /// The request's error, if anything denied it.
    pub fn error(&self, a: &Attributes) -> Option<ApiError> {
        let d = self.denials.first()?;
        let text = match &d.binding {
            Some(b) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
                d.policy, d.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                d.policy, d.message
            ),
        };
        let mut e = forbidden(a, &text);
        e.reason = d.reason;
        e.code = match d.reason {
            "Forbidden" => 403,
            "Unauthorized" => 401,
            "RequestEntityTooLarge" => 413,
            _ => 422,
        };
        if let Some(details) = e.details.as_mut() {
            details["causes"] = json!([{ "message": text }]);
        }
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::validating_policy::evaluate::Decision;
    use crate::admission::Operation;
    use k3rs_apimachinery::catalog;
    use serde_json::Value;

    fn policy(failure: &str) -> Policy {
        Policy::parse(&json!({"metadata": {"name": "max-replicas"}, "spec": {
            "failurePolicy": failure, "validations": [{"expression": "true"}]}}))
    }

    fn binding(actions: Value) -> Binding {
        Binding::parse(&json!({"metadata": {"name": "b"}, "spec": {
            "policyName": "max-replicas", "validationActions": actions}}))
    }

    fn denied(message: &str, reason: &'static str) -> Evaluation {
        Evaluation {
            decisions: vec![
                Decision {
                    index: 0,
                    action: Action::Admit,
                    message: String::new(),
                    reason: "Invalid",
                },
                Decision {
                    index: 1,
                    action: Action::Deny,
                    message: message.into(),
                    reason,
                },
            ],
            annotations: vec![("replicas".into(), "7".into())],
        }
    }

    fn attrs() -> Attributes {
        Attributes {
            operation: Operation::Create,
            resource: catalog::lookup("apps", "v1", "deployments").unwrap(),
            subresource: None,
            namespace: "n".into(),
            name: "web".into(),
            object: Some(json!({"metadata": {"name": "web"}})),
            old_object: None,
            user: None,
            dry_run: false,
            reinvocation: Default::default(),
        }
    }

    #[test]
    fn deny_becomes_kube_apiservers_error() {
        let mut o = Outcome::default();
        o.record(
            &policy("Fail"),
            &binding(json!(["Deny"])),
            denied("too many", "Invalid"),
        );
        let e = o.error(&attrs()).unwrap();
        let text =
            "ValidatingAdmissionPolicy 'max-replicas' with binding 'b' denied request: too many";
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert_eq!(
            e.message,
            format!("deployments.apps \"web\" is forbidden: {text}")
        );
        let d = e.details.unwrap();
        assert_eq!(d["causes"], json!([{"message": text}]));
        assert_eq!(
            (d["kind"].as_str(), d["name"].as_str()),
            (Some("deployments"), Some("web"))
        );
        assert_eq!(o.audit, vec![("max-replicas/replicas".into(), "7".into())]);
        let mut o = Outcome::default();
        o.record(
            &policy("Fail"),
            &binding(json!(["Deny"])),
            denied("no", "Forbidden"),
        );
        assert_eq!(o.error(&attrs()).unwrap().code, 403);
    }

    #[test]
    fn warn_and_audit_do_not_deny() {
        let mut o = Outcome::default();
        o.record(
            &policy("Fail"),
            &binding(json!(["Warn", "Audit"])),
            denied("too many", "Invalid"),
        );
        assert!(o.error(&attrs()).is_none());
        assert_eq!(
            o.warnings,
            vec!["Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'b': too many"]
        );
        let (key, value) = &o.audit[0];
        assert_eq!(key, VALIDATION_FAILURE);
        let v: Value = serde_json::from_str(value).unwrap();
        assert_eq!(
            v,
            json!([{"message": "too many", "policy": "max-replicas", "binding": "b",
                "expressionIndex": 1, "validationActions": ["Warn", "Audit"]}])
        );
    }

    #[test]
    fn configuration_errors_follow_the_failure_policy() {
        let mut o = Outcome::default();
        o.config_error(&policy("Ignore"), None, "broken");
        assert!(o.error(&attrs()).is_none());
        o.config_error(
            &policy("Fail"),
            Some(&binding(json!(["Warn"]))),
            "no params",
        );
        let e = o.error(&attrs()).unwrap();
        assert!(
            e.message.ends_with("ValidatingAdmissionPolicy 'max-replicas' with binding 'b' denied request: failed to configure binding: no params"),
            "{}",
            e.message
        );
        let mut o = Outcome::default();
        o.config_error(&policy("Fail"), None, "bad expression");
        assert!(o
            .error(&attrs())
            .unwrap()
            .message
            .ends_with("ValidatingAdmissionPolicy 'max-replicas' denied request: failed to configure policy: bad expression"));
    }

    #[test]
    fn annotation_values_of_several_bindings_are_joined_once_each() {
        let mut o = Outcome::default();
        let p = policy("Fail");
        let b = binding(json!(["Deny"]));
        for v in ["1", "2", "1"] {
            o.record(
                &p,
                &b,
                Evaluation {
                    decisions: Vec::new(),
                    annotations: vec![("k".into(), v.into())],
                },
            );
        }
        assert_eq!(o.audit, vec![("max-replicas/k".into(), "1, 2".into())]);
    }
}
