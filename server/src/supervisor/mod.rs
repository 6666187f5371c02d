//! The supervisor: what servers ask each other over the HTTPS port (6443), on the router the
//! API server shares (served alone with `--disable-apiserver`), following k3s:
//!
//! - `GET /cacerts` (anonymous): the server CA, whose sha256 the token pins;
//! - `GET /v1-k3rs/server-bootstrap` (basic auth `server:<secret>`): the cluster's CAs and
//!   keys, the token secret and the cluster ID ([`cluster_files`]);
//! - `POST /v1-k3rs/members` (basic auth): adds the caller as a member (a learner the leader
//!   promotes to voter once caught up); idempotent for the same ID and peer URLs;
//! - `GET /metrics` (client certificate) when the API server is disabled (else the API
//!   server serves it and `/cacerts`, with these metrics appended).
//!
//! # Errors
//! Refusals are Kubernetes `Status` objects: 401 for a wrong or missing secret, 400 for a bad
//! request, 409 for a member that conflicts with an existing one, 503 without a leader.

pub mod basic_auth;
pub mod cluster_files;

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use k3rs_raft::types::NodeInfo;
use k3rs_raft::{MembershipError, Node};
use serde::{Deserialize, Serialize};

use k3rs_apimachinery::status::ApiError;
use k3rs_apimachinery::tls::PeerCertificates;
use k3rs_pki::Token;

pub use k3rs_apiserver::metrics::MetricsSource;

/// What the supervisor routes need.
pub struct Supervisor {
    /// `server-ca.crt` as on disk (the bytes the token's hash covers).
    pub server_ca_pem: Vec<u8>,
    /// `<data-dir>/server/tls`.
    pub tls_dir: PathBuf,
    /// The server token whose credentials the routes require.
    pub token: Token,
    /// The cluster's ID (see [`crate::identity`]).
    pub cluster_id: u64,
    /// The embedded datastore; `None` with an external one (no members to add).
    pub node: Option<Arc<Node>>,
    /// Served on `/metrics` by [`standalone_router`].
    pub metrics: Option<MetricsSource>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("tls_dir", &self.tls_dir)
            .field("cluster_id", &self.cluster_id)
            .finish_non_exhaustive()
    }
}

fn json<T: Serialize>(v: &T) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(v).unwrap_or_default(),
    )
        .into_response()
}

/// `POST /v1-k3rs/members`: the joining server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JoinRequest {
    /// Its member ID (its Raft node ID).
    pub id: u64,
    /// Its name (the hostname).
    pub name: String,
    /// Where other members reach its Raft peer port.
    #[serde(rename = "peerURLs")]
    pub peer_urls: Vec<String>,
    /// Where clients reach its etcd API.
    #[serde(rename = "clientURLs")]
    pub client_urls: Vec<String>,
}

/// A member in the answer to [`JoinRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberInfo {
    /// Its member ID.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Where other members reach its Raft peer port.
    #[serde(rename = "peerURLs")]
    pub peer_urls: Vec<String>,
    /// Whether it is a learner (not yet voting).
    pub is_learner: bool,
}

/// The answer to [`JoinRequest`]: the membership after the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinResponse {
    /// Every member, the new one included.
    pub members: Vec<MemberInfo>,
}

/// The route that hands a joining server the cluster files.
pub const BOOTSTRAP_PATH: &str = "/v1-k3rs/server-bootstrap";
/// The route that adds a joining server to the Raft membership.
pub const MEMBERS_PATH: &str = "/v1-k3rs/members";

/// The routes the API server does not serve itself (it serves `/cacerts` and `/metrics`).
pub fn router(sup: Arc<Supervisor>) -> Router {
    routes().with_state(sup)
}

/// Every supervisor route, alone (`--disable-apiserver`): anything else is a 404 `Status`.
pub fn standalone_router(sup: Arc<Supervisor>) -> Router {
    routes()
        .route("/cacerts", get(cacerts))
        .route("/metrics", get(metrics))
        .fallback(|| async { ApiError::path_not_found().into_response() })
        .with_state(sup)
}

fn routes() -> Router<Arc<Supervisor>> {
    Router::new()
        .route(BOOTSTRAP_PATH, get(server_bootstrap))
        .route(MEMBERS_PATH, post(add_member))
}

async fn cacerts(State(sup): State<Arc<Supervisor>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain")],
        sup.server_ca_pem.clone(),
    )
        .into_response()
}

fn authorized(sup: &Supervisor, headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if basic_auth::verify(given, &sup.token.username, &sup.token.password) {
        Ok(())
    } else {
        Err(ApiError::unauthorized())
    }
}

async fn server_bootstrap(State(sup): State<Arc<Supervisor>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorized(&sup, &headers) {
        return e.into_response();
    }
    match cluster_files::collect(&sup.tls_dir, sup.cluster_id, &sup.token.password) {
        Ok(data) => json(&data),
        Err(e) => ApiError::internal(format!("reading the cluster files: {e}")).into_response(),
    }
}

async fn add_member(
    State(sup): State<Arc<Supervisor>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(e) = authorized(&sup, &headers) {
        return e.into_response();
    }
    let req: JoinRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return ApiError::bad_request(format!("join request: {e}")).into_response(),
    };
    let Some(node) = &sup.node else {
        return ApiError::bad_request(
            "this server uses an external datastore: servers share it instead of joining",
        )
        .into_response();
    };
    if req.id == 0 {
        return ApiError::bad_request("join request: member ID 0 is reserved").into_response();
    }
    if let Err(status) = k3rs_etcd_api::cluster::check_peer_urls(&req.peer_urls) {
        return ApiError::bad_request(status.message().to_string()).into_response();
    }
    let already = node
        .members()
        .iter()
        .any(|m| m.id == req.id && m.peer_urls == req.peer_urls);
    if !already {
        let info = NodeInfo {
            name: req.name.clone(),
            peer_urls: req.peer_urls.clone(),
            client_urls: req.client_urls.clone(),
            auto_promote: true,
        };
        if let Err(e) = node.add_voter(req.id, info).await {
            return membership_error(e).into_response();
        }
        tracing::info!(member = req.id, name = %req.name, peer_urls = ?req.peer_urls, "a server joined: added as a learner, promoted once caught up");
    }
    let members = node
        .members()
        .into_iter()
        .map(|m| MemberInfo {
            id: m.id,
            name: m.name,
            peer_urls: m.peer_urls,
            is_learner: m.is_learner,
        })
        .collect();
    json(&JoinResponse { members })
}

fn membership_error(e: MembershipError) -> ApiError {
    let msg = e.to_string();
    match e {
        MembershipError::MemberExists | MembershipError::PeerUrlExists => {
            ApiError::new(409, "AlreadyExists", msg)
        }
        MembershipError::NotEnoughStartedMembers => ApiError::new(409, "Conflict", msg),
        MembershipError::NoLeader | MembershipError::Timeout | MembershipError::Stopped => {
            ApiError::unavailable(msg)
        }
        _ => ApiError::internal(msg),
    }
}

async fn metrics(
    State(sup): State<Arc<Supervisor>>,
    certs: Option<axum::Extension<PeerCertificates>>,
) -> Response {
    if certs.is_none_or(|c| c.0 .0.is_empty()) {
        return ApiError::unauthorized().into_response();
    }
    let text = sup.metrics.as_ref().map(|m| (m.0)()).unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
