//! `max-requests-inflight` / `max-mutating-requests-inflight`: kube-apiserver's maxinflight
//! filter (the limits it applies without API Priority and Fairness).
//!
//! # Guarantees
//! - At most `readonly` `get`/`list` requests and at most `mutating` requests of any other
//!   verb run at once (0: no limit). A request beyond the limit is answered at once with 429
//!   `TooManyRequests`, `Retry-After: 1` and a `Status`, before authorization and the handler.
//! - Long-running requests are not counted and never refused: watches, `proxy`, and the
//!   `attach`, `exec`, `log`, `portforward` and `proxy` subresources (upstream's
//!   `BasicLongRunningRequestCheck`).
//! - A privileged request (`system:masters`, or the API server's in-process clients, which
//!   are its loopback) takes a slot when one is free and is served without one otherwise.
//! - A slot is held while the handler produces the response and, for a streamed body (a
//!   list encoded item by item), until the body is finished or dropped: as upstream, whose
//!   handler holds it while it writes the body.

use std::sync::Arc;

use axum::body::{Body, HttpBody};
use axum::response::Response;
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use k3rs_apimachinery::request_info::RequestInfo;
use k3rs_apimachinery::status::ApiError;

/// The two limits; 0 is unlimited. Upstream's defaults are 400 and 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InflightLimits {
    /// `max-requests-inflight`: concurrent `get`, `list` (and non-resource reads).
    pub readonly: usize,
    /// `max-mutating-requests-inflight`: concurrent requests of every other verb.
    pub mutating: usize,
}

impl Default for InflightLimits {
    fn default() -> InflightLimits {
        InflightLimits {
            readonly: 400,
            mutating: 200,
        }
    }
}

/// How the filter counts a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Not counted (watches, exec, logs, proxy…).
    LongRunning,
    /// Counted against `readonly`.
    ReadOnly,
    /// Counted against `mutating`.
    Mutating,
}

/// Upstream's long-running verbs and subresources.
const LONG_RUNNING_VERBS: &[&str] = &["watch", "proxy"];
const LONG_RUNNING_SUBRESOURCES: &[&str] = &["attach", "exec", "proxy", "log", "portforward"];
/// Upstream's `nonMutatingRequestVerbs`; `watch` is long-running before it gets here.
const READ_ONLY_VERBS: &[&str] = &["get", "list", "watch"];

/// The class of a request (upstream's long-running check, then its mutating split).
pub fn classify(info: &RequestInfo) -> Class {
    let long_running = LONG_RUNNING_VERBS.contains(&info.verb.as_str())
        || (info.resource_request
            && LONG_RUNNING_SUBRESOURCES.contains(&info.subresource.as_str()));
    if long_running {
        Class::LongRunning
    } else if READ_ONLY_VERBS.contains(&info.verb.as_str()) {
        Class::ReadOnly
    } else {
        Class::Mutating
    }
}

/// What the filter decided for one request.
#[derive(Debug)]
pub enum Admission {
    /// Run it holding this slot (dropped when the handler returns).
    Slot(OwnedSemaphorePermit),
    /// Run it without a slot (long-running, unlimited, or privileged while full).
    Exempt,
    /// Answer 429.
    Refused(ApiError),
}

/// The slots of both limits.
#[derive(Debug, Clone)]
pub struct Inflight {
    readonly: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

impl Inflight {
    /// Slots for `limits`; a limit of 0 means no limit (as kube-apiserver's flags).
    pub fn new(limits: InflightLimits) -> Inflight {
        let slots =
            |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS))));
        Inflight {
            readonly: slots(limits.readonly),
            mutating: slots(limits.mutating),
        }
    }

    /// Takes a slot for the request, or says why it runs without one or is refused.
    pub fn admit(&self, info: &RequestInfo, privileged: bool) -> Admission {
        let slots = match classify(info) {
            Class::LongRunning => return Admission::Exempt,
            Class::ReadOnly => &self.readonly,
            Class::Mutating => &self.mutating,
        };
        let Some(slots) = slots else {
            return Admission::Exempt;
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => Admission::Slot(slot),
            Err(_) if privileged => Admission::Exempt,
            Err(_) => Admission::Refused(too_many_requests()),
        }
    }
}

/// `resp` with `slot` released only when its body is done (at once when the body is whole:
/// only a streamed body, one without an exact size, carries the slot along).
pub fn hold(resp: Response, slot: OwnedSemaphorePermit) -> Response {
    if resp.body().size_hint().exact().is_some() {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _held = &slot;
        chunk
    }));
    Response::from_parts(parts, body)
}

/// kube-apiserver's answer (its message, `Retry-After: 1`), as a `Status`.
pub fn too_many_requests() -> ApiError {
    ApiError::too_many_requests("Too many requests, please try again later.", 1, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, path: &str, query: Option<&str>) -> RequestInfo {
        RequestInfo::parse(method, path, query)
    }

    #[test]
    fn classes_follow_upstream() {
        let cases = [
            ("GET", "/api/v1/namespaces/a/pods", None, Class::ReadOnly),
            ("GET", "/api/v1/namespaces/a/pods/p", None, Class::ReadOnly),
            (
                "GET",
                "/api/v1/pods",
                Some("watch=true"),
                Class::LongRunning,
            ),
            ("GET", "/api/v1/watch/pods", None, Class::LongRunning),
            (
                "GET",
                "/api/v1/namespaces/a/pods/p/log",
                None,
                Class::LongRunning,
            ),
            (
                "POST",
                "/api/v1/namespaces/a/pods/p/exec",
                None,
                Class::LongRunning,
            ),
            (
                "GET",
                "/api/v1/namespaces/a/pods/p/attach",
                None,
                Class::LongRunning,
            ),
            (
                "POST",
                "/api/v1/namespaces/a/pods/p/portforward",
                None,
                Class::LongRunning,
            ),
            (
                "GET",
                "/api/v1/nodes/n/proxy/metrics",
                None,
                Class::LongRunning,
            ),
            ("POST", "/api/v1/namespaces/a/pods", None, Class::Mutating),
            (
                "PATCH",
                "/api/v1/namespaces/a/pods/p",
                None,
                Class::Mutating,
            ),
            ("DELETE", "/api/v1/namespaces/a/pods", None, Class::Mutating),
            (
                "PUT",
                "/api/v1/namespaces/a/pods/p/status",
                None,
                Class::Mutating,
            ),
            ("GET", "/healthz", None, Class::ReadOnly),
            ("GET", "/apis", None, Class::ReadOnly),
            // A non-resource path named like a subresource is not one.
            ("GET", "/logs/exec", None, Class::ReadOnly),
        ];
        for (method, path, query, want) in cases {
            assert_eq!(
                classify(&info(method, path, query)),
                want,
                "{method} {path}?{query:?}"
            );
        }
    }

    #[test]
    fn refuses_beyond_the_limit_and_frees_the_slot() {
        let f = Inflight::new(InflightLimits {
            readonly: 1,
            mutating: 1,
        });
        let get = info("GET", "/api/v1/namespaces/a/pods", None);
        let post = info("POST", "/api/v1/namespaces/a/pods", None);
        let Admission::Slot(read) = f.admit(&get, false) else {
            panic!("the first read gets a slot")
        };
        let Admission::Refused(e) = f.admit(&get, false) else {
            panic!("the second read is refused")
        };
        assert_eq!((e.code, e.reason), (429, "TooManyRequests"));
        assert_eq!(e.to_status()["details"]["retryAfterSeconds"], 1);
        // The mutating limit is separate.
        let Admission::Slot(write) = f.admit(&post, false) else {
            panic!("a write gets its own slot")
        };
        assert!(matches!(f.admit(&post, false), Admission::Refused(_)));
        // Watches and exec are never counted nor refused.
        let watch = info("GET", "/api/v1/pods", Some("watch=1"));
        assert!(matches!(f.admit(&watch, false), Admission::Exempt));
        let exec = info("POST", "/api/v1/namespaces/a/pods/p/exec", None);
        assert!(matches!(f.admit(&exec, false), Admission::Exempt));
        // system:masters passes while full, without a slot.
        assert!(matches!(f.admit(&get, true), Admission::Exempt));
        drop((read, write));
        assert!(matches!(f.admit(&get, false), Admission::Slot(_)));
        assert!(matches!(f.admit(&post, false), Admission::Slot(_)));
    }

    #[test]
    fn zero_is_unlimited() {
        let f = Inflight::new(InflightLimits {
            readonly: 0,
            mutating: 0,
        });
        let get = info("GET", "/api/v1/pods", None);
        let held: Vec<_> = (0..1000).map(|_| f.admit(&get, false)).collect();
        assert!(held.iter().all(|a| matches!(a, Admission::Exempt)));
    }

    #[test]
    fn the_answer_is_a_status_with_retry_after() {
        use axum::response::IntoResponse;
        let resp = too_many_requests().into_response();
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "1");
        assert_eq!(resp.headers()["content-type"], "application/json");
    }
}
