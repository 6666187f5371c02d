//! `authentication.k8s.io/v1` reviews, answered and never stored: TokenReview (is this
//! bearer token valid, for whom, for which audiences) and SelfSubjectReview (who am I).
//!
//! # Guarantees
//! - A TokenReview runs the bearer-token authenticators only (never the caller's own
//!   credentials); service-account tokens are checked against `spec.audiences` (default: the
//!   API server's); tokens of authenticators without audiences are valid only when the
//!   requested audiences include one of the API server's.
//! - A SelfSubjectReview reports exactly the user the request authenticated as.

use axum::http::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

use super::ApiState;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_auth::authn::{AuthnRequest, Outcome};
use k3rs_auth::serviceaccount::authenticator::unix_now;
use k3rs_auth::serviceaccount::claims::API_AUDIENCES;
use k3rs_auth::UserInfo;

/// Answers a review of `kind` (the catalog's kind) posted with `body` by `user`.
pub async fn create(
    st: &ApiState,
    kind: &str,
    body: Value,
    user: Option<&UserInfo>,
) -> ApiResult<Value> {
    match kind {
        "TokenReview" => token_review(st, body).await,
        "SelfSubjectReview" => Ok(self_subject_review(body, user)),
        other => Err(ApiError::method_not_allowed(&format!("POST {other}"))),
    }
}

/// The SelfSubjectReview with `status.userInfo` filled in.
pub fn self_subject_review(mut body: Value, user: Option<&UserInfo>) -> Value {
    let anonymous = UserInfo::anonymous();
    let u = user.unwrap_or(&anonymous);
    body["metadata"]["creationTimestamp"] = Value::Null;
    body["status"] = json!({"userInfo": u});
    body
}

async fn token_review(st: &ApiState, mut body: Value) -> ApiResult<Value> {
    let token = body["spec"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let requested: Vec<String> = match body["spec"]["audiences"].as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => API_AUDIENCES.iter().map(|a| a.to_string()).collect(),
    };
    let result = review(st, &token, &requested).await;
    body["metadata"]["creationTimestamp"] = Value::Null;
    body["status"] = match result {
        Ok((user, audiences)) => json!({
            "authenticated": true,
            "user": user,
            "audiences": audiences,
        }),
        Err(why) => json!({"authenticated": false, "error": why.to_string()}),
    };
    Ok(body)
}

/// Why a TokenReview does not authenticate its token (the status' `error`).
#[derive(Debug, thiserror::Error)]
enum ReviewError {
    /// A service-account token of this cluster that does not check out.
    #[error(transparent)]
    ServiceAccount(#[from] k3rs_auth::serviceaccount::authenticator::TokenError),
    /// No authenticator knows the token (or it is not a header value).
    #[error("invalid bearer token")]
    Invalid,
    /// The token authenticates, but for none of the requested audiences.
    #[error("token audiences {API_AUDIENCES:?} are invalid for the target audiences {0:?}")]
    Audiences(Vec<String>),
    /// An authenticator rejected the token.
    #[error("{0}")]
    Rejected(String),
}

async fn review(
    st: &ApiState,
    token: &str,
    requested: &[String],
) -> Result<(UserInfo, Vec<String>), ReviewError> {
    if let Some(sa) = &st.service_accounts {
        if let Some(a) = sa
            .tokens
            .authenticate_token(token, requested, unix_now())
            .await?
        {
            return Ok((a.user, a.audiences));
        }
    }
    let mut headers = HeaderMap::new();
    let value =
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| ReviewError::Invalid)?;
    headers.insert(axum::http::header::AUTHORIZATION, value);
    let req = AuthnRequest {
        headers: &headers,
        peer_certs: &[],
        path: "/",
    };
    match st.authn.authenticate(&req).await {
        Outcome::Authenticated(u) => {
            let audiences: Vec<String> = requested
                .iter()
                .filter(|a| API_AUDIENCES.contains(&a.as_str()))
                .cloned()
                .collect();
            if audiences.is_empty() {
                return Err(ReviewError::Audiences(requested.to_vec()));
            }
            Ok((u, audiences))
        }
        Outcome::Rejected(why) => Err(ReviewError::Rejected(why)),
        Outcome::NotApplicable => Err(ReviewError::Invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_subject_review_reports_the_requester() {
        let u = UserInfo::authenticated("alice", vec!["dev".into()]);
        let out = self_subject_review(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                "metadata": {}}),
            Some(&u),
        );
        assert_eq!(
            out["status"]["userInfo"],
            json!({"username": "alice", "groups": ["dev", "system:authenticated"]})
        );
        assert_eq!(out["kind"], "SelfSubjectReview");
    }
}
