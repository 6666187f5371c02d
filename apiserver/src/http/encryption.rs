//! `/v1-k3rs/encrypt/{status,reencrypt,rotate-keys}`: what `k3rs secrets-encrypt` calls (k3s
//! serves the same under `/v1-k3s/encrypt/`). Cluster admins (`system:masters`) only.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::json;

use super::handlers::json_response;
use k3rs_apimachinery::status::ApiError;
use k3rs_auth::{user, UserInfo};
use k3rs_datastore::encryption::SecretsEncryption;

/// The route's path.
pub const PATH: &str = "/v1-k3rs/encrypt/{op}";

pub async fn handle(
    Path(op): Path<String>,
    method: Method,
    Extension(who): Extension<Arc<UserInfo>>,
    enc: Option<Extension<Arc<SecretsEncryption>>>,
) -> Response {
    if !who.in_group(user::SYSTEM_MASTERS) {
        return ApiError::new(
            403,
            "Forbidden",
            format!(
                "User {:?} cannot manage secrets encryption: only members of system:masters can",
                who.username
            ),
        )
        .into_response();
    }
    let result = match (op.as_str(), method, enc) {
        ("status", Method::GET, None) => Ok(json!({"enabled": false, "keys": []})),
        ("status", Method::GET, Some(Extension(e))) => Ok(e.status().await),
        ("reencrypt" | "rotate-keys", Method::POST, None) => Err(ApiError::bad_request(
            "secrets encryption is not enabled on this server (start it with --secrets-encryption)",
        )),
        ("reencrypt", Method::POST, Some(Extension(e))) => match e.reencrypt().await {
            Ok(n) => {
                let mut s = e.status().await;
                s["reencrypted"] = json!(n);
                Ok(s)
            }
            Err(err) => Err(ApiError::internal(err.to_string())),
        },
        ("rotate-keys", Method::POST, Some(Extension(e))) => e
            .rotate_keys()
            .await
            .map_err(|err| ApiError::internal(err.to_string())),
        ("status" | "reencrypt" | "rotate-keys", m, _) => {
            Err(ApiError::method_not_allowed(m.as_str()))
        }
        _ => Err(ApiError::path_not_found()),
    };
    match result {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => e.into_response(),
    }
}
