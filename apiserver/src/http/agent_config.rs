//! `GET /v1-k3rs/agent-config` ([`k3rs_apimachinery::agent_config`]): the server's settings
//! its agents take. Authorized like any non-resource URL: the bootstrap policy lets nodes
//! (`system:nodes`, ClusterRole `k3rs:agent-config`) and cluster admins read it; other
//! methods get 405.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;

use super::handlers::json_response;
use k3rs_apimachinery::agent_config::AgentConfig;
use k3rs_apimachinery::status::ApiError;

pub use k3rs_apimachinery::agent_config::PATH;

pub async fn handle(method: Method, config: Option<Extension<Arc<AgentConfig>>>) -> Response {
    if method != Method::GET {
        return ApiError::method_not_allowed(method.as_str()).into_response();
    }
    let config = config.map(|Extension(c)| (*c).clone()).unwrap_or_default();
    match serde_json::to_value(&config) {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}
