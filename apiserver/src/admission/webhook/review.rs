//! `admission.k8s.io/v1 AdmissionReview`: the request a webhook receives and what its
//! answer means (upstream's `VerifyAdmissionResponse` and `ToStatusErr`).
//!
//! # Guarantees
//! - The request carries the object, old object, user, options and dry-run flag beside the
//!   fields policy expressions see as `request`.
//! - An answer must be an `admission.k8s.io/v1 AdmissionReview` with a `response` whose `uid`
//!   is the request's; anything else is a failed call.
//! - A denial is `admission webhook "<name>" denied the request: <message>` (its reason, or
//!   `without explanation`), with the webhook's code when it is 400 or more (else 400).

use base64::Engine;
use serde_json::{json, Value};

use crate::admission::Attributes;
use k3rs_apimachinery::status::ApiError;

/// The review sent for `a` (matched as `request`, from
/// [`admission_request`](crate::admission::validating_policy::request::admission_request)).
pub fn request(a: &Attributes, mut request: Value) -> Value {
    request["object"] = a.object.clone().unwrap_or(Value::Null);
    request["oldObject"] = a.old_object.as_deref().cloned().unwrap_or(Value::Null);
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// A webhook's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub allowed: bool,
    /// The `status` it gave (for a denial).
    pub status: Value,
    /// A decoded JSON Patch (mutating webhooks).
    pub patch: Option<Vec<u8>>,
    pub warnings: Vec<String>,
    pub audit_annotations: Vec<(String, String)>,
}

/// Why a webhook's answer is unusable (kube-apiserver's messages).
#[derive(Debug, thiserror::Error)]
pub enum VerdictError {
    /// Not JSON.
    #[error("the answer is not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// Not an `admission.k8s.io/v1` AdmissionReview.
    #[error("expected response of kind admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}")]
    Kind {
        /// The answer's apiVersion.
        api_version: String,
        /// The answer's kind.
        kind: String,
    },
    /// No `response`.
    #[error("webhook response was absent")]
    Absent,
    /// The response is for another review.
    #[error("expected response.uid={expected:?}, got {got:?}")]
    Uid {
        /// The review's uid.
        expected: String,
        /// The response's.
        got: String,
    },
    /// A patch of a type other than `JSONPatch`.
    #[error("webhook returned invalid patchType: {0:?}")]
    PatchType(String),
    /// The patch is not base64.
    #[error("the patch is not base64: {0}")]
    PatchEncoding(#[source] base64::DecodeError),
}

/// Reads a webhook's answer to the review `uid`.
pub fn verdict(body: &[u8], uid: &str) -> Result<Verdict, VerdictError> {
    let v: Value = serde_json::from_slice(body).map_err(VerdictError::Json)?;
    if v["apiVersion"] != "admission.k8s.io/v1" || v["kind"] != "AdmissionReview" {
        return Err(VerdictError::Kind {
            api_version: v["apiVersion"].as_str().unwrap_or("").to_string(),
            kind: v["kind"].as_str().unwrap_or("").to_string(),
        });
    }
    let r = &v["response"];
    if !r.is_object() {
        return Err(VerdictError::Absent);
    }
    if r["uid"].as_str() != Some(uid) {
        return Err(VerdictError::Uid {
            expected: uid.to_string(),
            got: r["uid"].as_str().unwrap_or("").to_string(),
        });
    }
    let patch = match r["patch"].as_str() {
        None | Some("") => None,
        Some(p) => {
            if r["patchType"].as_str() != Some("JSONPatch") {
                return Err(VerdictError::PatchType(
                    r["patchType"].as_str().unwrap_or("").to_string(),
                ));
            }
            Some(
                base64::engine::general_purpose::STANDARD
                    .decode(p)
                    .map_err(VerdictError::PatchEncoding)?,
            )
        }
    };
    Ok(Verdict {
        allowed: r["allowed"].as_bool().unwrap_or(false),
        status: r["status"].clone(),
        patch,
        warnings: r["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        audit_annotations: r["auditAnnotations"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
    })
}

/// The error of a webhook's denial.
pub fn denial(webhook: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook \"{webhook}\" denied the request");
    let message = match (status["message"].as_str(), status["reason"].as_str()) {
        (Some(m), _) if !m.is_empty() => format!("{denied_by}: {m}"),
        (_, Some(r)) if !r.is_empty() => format!("{denied_by}: {r}"),
        _ => format!("{denied_by} without explanation"),
    };
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let reason = match status["reason"].as_str() {
        Some("Forbidden") => "Forbidden",
        Some("Invalid") => "Invalid",
        Some("Unauthorized") => "Unauthorized",
        Some("NotFound") => "NotFound",
        Some("AlreadyExists") => "AlreadyExists",
        Some("Conflict") => "Conflict",
        Some("TooManyRequests") => "TooManyRequests",
        _ => "",
    };
    let mut e = ApiError::new(code, reason, message);
    if status["details"].is_object() {
        e.details = Some(status["details"].clone());
    }
    e
}

/// The error of a webhook that could not be called (`failurePolicy: Fail`).
pub fn call_failure(webhook: &str, why: &str) -> ApiError {
    ApiError::internal(format!("failed calling webhook \"{webhook}\": {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(response: Value) -> Vec<u8> {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn verdicts() {
        let patch = base64::engine::general_purpose::STANDARD
            .encode(br#"[{"op":"add","path":"/metadata/labels/x","value":"y"}]"#);
        let v = verdict(
            &answer(
                json!({"uid": "u", "allowed": true, "patchType": "JSONPatch",
                "patch": patch, "warnings": ["careful"], "auditAnnotations": {"k": "v"}}),
            ),
            "u",
        )
        .unwrap();
        assert!(v.allowed);
        assert!(v.patch.unwrap().starts_with(b"[{\"op\""));
        assert_eq!(v.warnings, ["careful"]);
        assert_eq!(v.audit_annotations, [("k".to_string(), "v".to_string())]);
        assert!(
            verdict(&answer(json!({"uid": "other", "allowed": true})), "u")
                .unwrap_err()
                .to_string()
                .contains("expected response.uid")
        );
        assert!(verdict(b"{}", "u").is_err());
        assert!(verdict(b"not json", "u").is_err());
        assert!(verdict(
            &answer(json!({"uid": "u", "allowed": true, "patch": patch})),
            "u"
        )
        .unwrap_err()
        .to_string()
        .contains("patchType"));
    }

    #[test]
    fn denials_as_kube_apiserver_words_them() {
        let e = denial(
            "a.example.com",
            &json!({"code": 403, "message": "no pods on Sunday"}),
        );
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "admission webhook \"a.example.com\" denied the request: no pods on Sunday"
        );
        let e = denial("a.example.com", &Value::Null);
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "admission webhook \"a.example.com\" denied the request without explanation"
        );
        let e = denial(
            "a.example.com",
            &json!({"code": 200, "reason": "Forbidden"}),
        );
        assert_eq!((e.code, e.reason), (400, "Forbidden"));
    }
}
