//! The pod subresources that stream from the kubelet (`log`, `exec`, `attach`,
//! `portforward`). The node agent is a later piece of k3rs; until it exists these answer with a
//! Kubernetes `Status` that says so, after the checks kube-apiserver makes first (the pod
//! exists, it has a node).

use axum::http::Method;

use crate::apiserver::registry::{Registry, Target};
use crate::apiserver::status::ApiError;

/// The error a connect request gets.
pub async fn unavailable(reg: &Registry, t: &Target, sub: &str, method: &Method) -> ApiError {
    let pod = match reg.get(t).await {
        Ok(p) => p,
        Err(e) => return e,
    };
    if sub == "log" && method != Method::GET {
        return ApiError::method_not_allowed(method.as_str());
    }
    match pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        None => ApiError::bad_request(format!(
            "pod {} does not have a host assigned",
            t.name()
        )),
        Some(node) => ApiError::unavailable(format!(
            "pods/{sub} of pod {} needs the kubelet of node {node:?}, and this k3rs server does not run a node agent yet",
            t.name()
        )),
    }
}
