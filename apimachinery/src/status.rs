//! API errors as Kubernetes `metav1.Status` objects (code, reason, details.causes).
//!
//! Every request error leaves the server through [`ApiError`]; the messages follow
//! kube-apiserver's wording so clients that match on them keep working.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// One invalid field (`metav1.StatusCause`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, `FieldValueTooLong`, …
    pub reason: &'static str,
    /// Field path, e.g. `metadata.labels`.
    pub field: String,
    /// kube-apiserver's detail text, e.g. `Invalid value: "x": must be …`.
    pub message: String,
}

impl Cause {
    /// `field: Invalid value: "value": detail`.
    pub fn invalid(field: impl Into<String>, value: &str, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {}: {detail}", json!(value)),
        }
    }

    /// [`Cause::invalid`] for a value that is not a string, printed as given (JSON for
    /// numbers and booleans: `-1`, `true`; Go syntax for maps: `map[string]string{…}`).
    pub fn invalid_value(
        field: impl Into<String>,
        value: impl std::fmt::Display,
        detail: &str,
    ) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {detail}"),
        }
    }

    /// `field: Required value: detail`.
    pub fn required(field: impl Into<String>, detail: &str) -> Cause {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        Cause {
            reason: "FieldValueRequired",
            field: field.into(),
            message,
        }
    }

    /// `field: Too long: must have at most max bytes`.
    pub fn too_long(field: impl Into<String>, max: usize) -> Cause {
        Cause {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: must have at most {max} bytes"),
        }
    }

    /// `field: Unsupported value: "value": supported values: …`.
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Cause {
        let list: Vec<String> = supported.iter().map(|s| json!(s).to_string()).collect();
        Cause {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                json!(value),
                list.join(", ")
            ),
        }
    }

    /// `field: Duplicate value: "value"`.
    pub fn duplicate(field: impl Into<String>, value: &str) -> Cause {
        Cause {
            reason: "FieldValueDuplicate",
            field: field.into(),
            message: format!("Duplicate value: {}", json!(value)),
        }
    }

    /// `field: Forbidden: detail`.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {detail}"),
        }
    }
}

/// A request error, rendered as a `Status`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status code.
    pub code: u16,
    /// The Status `reason` (`NotFound`, `Invalid`, …).
    pub reason: &'static str,
    /// The Status `message`.
    pub message: String,
    /// The Status `details`, when any.
    pub details: Option<Value>,
}

/// Who an error is about (`details.name/group/kind`).
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The API group.
    pub group: &'a str,
    /// The resource (plural) for NotFound/Conflict/AlreadyExists, the kind for Invalid.
    pub kind: &'a str,
    /// The object's name.
    pub name: &'a str,
}

fn details(s: Subject<'_>) -> Value {
    let mut d = json!({ "name": s.name, "kind": s.kind });
    if !s.group.is_empty() {
        d["group"] = json!(s.group);
    }
    d
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// A request's result.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// An error with a code, a reason and a message, no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// The same error with `details` naming its subject.
    pub fn about(mut self, s: Subject<'_>) -> ApiError {
        self.details = Some(details(s));
        self
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 401 `Unauthorized`.
    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 `Forbidden` about `s`, with upstream's message.
    pub fn forbidden(s: Subject<'_>, why: &str) -> ApiError {
        let mut e = ApiError::new(
            403,
            "Forbidden",
            format!(
                "{} {:?} is forbidden: {why}",
                qualified(s.group, s.kind),
                s.name
            ),
        );
        e.details = Some(details(s));
        e
    }

    /// `<resource> "<name>" not found`.
    pub fn not_found(s: Subject<'_>) -> ApiError {
        let mut e = ApiError::new(
            404,
            "NotFound",
            format!("{} {:?} not found", qualified(s.group, s.kind), s.name),
        );
        e.details = Some(details(s));
        e
    }

    /// A path nothing is served at.
    pub fn path_not_found() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(method: &str) -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 409 `AlreadyExists` about `s`.
    pub fn already_exists(s: Subject<'_>) -> ApiError {
        let mut e = ApiError::new(
            409,
            "AlreadyExists",
            format!("{} {:?} already exists", qualified(s.group, s.kind), s.name),
        );
        e.details = Some(details(s));
        e
    }

    /// The optimistic-concurrency conflict.
    pub fn conflict(s: Subject<'_>) -> ApiError {
        ApiError::conflict_because(
            s,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 `Conflict` about `s` for the reason given.
    pub fn conflict_because(s: Subject<'_>, why: &str) -> ApiError {
        let mut e = ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {:?}: {why}",
                qualified(s.group, s.kind),
                s.name
            ),
        );
        e.details = Some(details(s));
        e
    }

    /// 410 Expired (too old resourceVersion or continue token).
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 413 `RequestEntityTooLarge`.
    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(413, "RequestEntityTooLarge", message)
    }

    /// 415 `UnsupportedMediaType` for `content_type`.
    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml ({content_type})"),
        )
    }

    /// 422 with the invalid fields. `s.kind` is the Kind here (kube: `ConfigMap "x" is invalid`).
    pub fn invalid(s: Subject<'_>, causes: Vec<Cause>) -> ApiError {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let summary = if summary.len() == 1 {
            summary[0].clone()
        } else {
            format!("[{}]", summary.join(", "))
        };
        let mut d = details(s);
        d["causes"] = causes
            .iter()
            .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
            .collect();
        let mut e = ApiError::new(
            422,
            "Invalid",
            format!(
                "{} {:?} is invalid: {summary}",
                qualified(s.group, s.kind),
                s.name
            ),
        );
        e.details = Some(d);
        e
    }

    /// 429 TooManyRequests with a retry hint (omitted when 0) and causes of `type` `reason`.
    pub fn too_many_requests(
        message: impl Into<String>,
        retry_after_seconds: u32,
        causes: &[(&str, String)],
    ) -> ApiError {
        let mut e = ApiError::new(429, "TooManyRequests", message);
        let mut d = json!({});
        if retry_after_seconds > 0 {
            d["retryAfterSeconds"] = json!(retry_after_seconds);
        }
        if !causes.is_empty() {
            d["causes"] = causes
                .iter()
                .map(|(reason, message)| json!({"reason": reason, "message": message}))
                .collect();
        }
        e.details = Some(d);
        e
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    /// 503 `ServiceUnavailable`.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    /// 504 `Timeout`.
    pub fn timeout(message: impl Into<String>) -> ApiError {
        ApiError::new(504, "Timeout", message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = self
            .details
            .as_ref()
            .and_then(|d| d["retryAfterSeconds"].as_u64());
        let mut resp = (
            code,
            [(header::CONTENT_TYPE, "application/json")],
            self.to_status().to_string(),
        )
            .into_response();
        if let Some(s) = retry_after {
            resp.headers_mut().insert(header::RETRY_AFTER, s.into());
        }
        resp
    }
}

/// A `Status` with `status: Success` (deletes without a returned object).
pub fn success(s: Subject<'_>, uid: &str) -> Value {
    let mut d = details(s);
    d["uid"] = json!(uid);
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": d,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_message_is_kube_apiservers() {
        let e = ApiError::conflict(Subject {
            group: "",
            kind: "configmaps",
            name: "x",
        });
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!(e.to_status()["code"], 409);
    }

    #[test]
    fn invalid_lists_causes_with_field_paths() {
        let e = ApiError::invalid(
            Subject {
                group: "apps",
                kind: "Deployment",
                name: "d",
            },
            vec![Cause::required("spec.selector", "")],
        );
        let s = e.to_status();
        assert_eq!(s["reason"], "Invalid");
        assert_eq!(s["details"]["causes"][0]["field"], "spec.selector");
        assert_eq!(
            e.message,
            "Deployment.apps \"d\" is invalid: spec.selector: Required value"
        );
    }
}
