//! The kubelet API (upstream's kubelet server on `--port`, 10250): HTTPS with the node's
//! serving certificate, callers authenticated by client certificate (the cluster's client CA)
//! or bearer token (TokenReview) and authorized per request (SubjectAccessReview on the node,
//! see [`auth`]).
//!
//! Endpoints: `/healthz`, `/pods`, `/stats/summary` and `/metrics/resource` (`stats`),
//! `/containerLogs/{ns}/{pod}/{container}` ([`logs`]), and
//! the streaming ones `/exec`, `/attach`, `/portForward` ([`streaming`]), which ask the CRI
//! runtime for a streaming URL and carry the upgraded connection there.
//!
//! # Guarantees
//! - Errors are plain text with upstream's status codes; the API server relays them as
//!   Kubernetes `Status` objects.
//! - [`run`] waits for the serving certificate (issued through a CSR) before it listens, and
//!   serves until `stop`.

pub mod auth;
pub mod cri_log;
pub mod logs;
mod stats;
pub mod streaming;
pub mod tail;
use k3rs_apimachinery::tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::Api;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cri::RuntimeService;

pub use k3rs_apimachinery::tls::PeerCertificates;

/// The kubelet's default `--port`.
pub const DEFAULT_PORT: u16 = 10250;

/// Where and as whom the kubelet API serves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub node_name: String,
    pub listen: SocketAddr,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// Where the cluster's client CA is kept once fetched from the API server.
    pub client_ca: PathBuf,
}

/// What the handlers share.
pub struct Kubelet {
    pub node_name: String,
    /// The node's API client (reviews, pod lookups).
    pub client: watch::Receiver<kube::Client>,
    pub cri: Arc<dyn RuntimeService>,
    /// The previous node CPU sample, for `usageNanoCores`.
    pub cpu_rate: stats::CpuRate,
}

impl Kubelet {
    fn client(&self) -> kube::Client {
        self.client.borrow().clone()
    }
}

/// A plain-text error response.
pub fn text_error(code: StatusCode, msg: impl Into<String>) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        msg.into(),
    )
        .into_response()
}

/// The routes, behind authentication and authorization.
pub fn router(k: Arc<Kubelet>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/pods", get(pods))
        .route("/pods/", get(pods))
        .route("/stats/summary", get(stats::summary_handler))
        .route("/stats/summary/", get(stats::summary_handler))
        .route("/metrics/resource", get(stats::metrics_handler))
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(logs::container_logs),
        )
        .route("/exec/{namespace}/{pod}/{container}", any(streaming::exec))
        .route(
            "/exec/{namespace}/{pod}/{uid}/{container}",
            any(streaming::exec_uid),
        )
        .route(
            "/attach/{namespace}/{pod}/{container}",
            any(streaming::attach),
        )
        .route(
            "/attach/{namespace}/{pod}/{uid}/{container}",
            any(streaming::attach_uid),
        )
        .route(
            "/portForward/{namespace}/{pod}",
            any(streaming::port_forward),
        )
        .route(
            "/portForward/{namespace}/{pod}/{uid}",
            any(streaming::port_forward_uid),
        )
        .fallback(|| async { text_error(StatusCode::NOT_FOUND, "404 page not found\n") })
        .layer(middleware::from_fn_with_state(k.clone(), authorize))
        .with_state(k)
}

async fn authorize(State(k): State<Arc<Kubelet>>, req: Request, next: Next) -> Response {
    let client = k.client();
    let cert = req
        .extensions()
        .get::<PeerCertificates>()
        .and_then(|c| c.0.first().cloned());
    let user = match cert {
        Some(c) => auth::user_of_certificate(&c),
        None => {
            let token = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            match token {
                None => None,
                Some(t) => match auth::review_token(&client, t).await {
                    Ok(u) => u,
                    Err(e) => {
                        tracing::warn!(error = %e, "kubelet API authentication");
                        return text_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
                    }
                },
            }
        }
    };
    let Some(user) = user else {
        return text_error(StatusCode::UNAUTHORIZED, "Unauthorized");
    };
    let attrs = auth::attributes(req.method().as_str(), req.uri().path());
    match auth::review_access(&client, &user, &k.node_name, &attrs).await {
        Ok(true) => next.run(req).await,
        Ok(false) => text_error(
            StatusCode::FORBIDDEN,
            auth::forbidden_message(&user, &attrs),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "kubelet API authorization");
            text_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

/// `/pods`: the pods bound to this node, as a `PodList`.
async fn pods(State(k): State<Arc<Kubelet>>) -> Response {
    let lp = ListParams::default().fields(&format!("spec.nodeName={}", k.node_name));
    match Api::<Pod>::all(k.client()).list(&lp).await {
        Ok(list) => {
            let body = serde_json::json!({
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {},
                "items": list.items,
            });
            (
                [(header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
                .into_response()
        }
        Err(e) => text_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Fetches the cluster's client CA from the API server (k3s's `client-ca.crt`).
pub async fn fetch_client_ca(client: &kube::Client) -> Result<String, kube::Error> {
    let req = http::Request::get(CLIENT_CA_PATH)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request_text(req).await
}

/// The API server's path of the client CA bundle.
pub const CLIENT_CA_PATH: &str = "/v1-k3rs/client-ca.crt";

/// Serves the kubelet API until `stop`: waits for the serving certificate and the client CA,
/// then listens on `cfg.listen`.
pub async fn run(
    cfg: ServerConfig,
    client: watch::Receiver<kube::Client>,
    cri: Arc<dyn RuntimeService>,
    stop: CancellationToken,
) {
    loop {
        if cfg.serving_cert.exists() && cfg.serving_key.exists() {
            let c = client.borrow().clone();
            match fetch_client_ca(&c).await {
                Ok(pem) => {
                    match crate::join::files::write_atomic(&cfg.client_ca, pem.as_bytes(), 0o644) {
                        Ok(()) => break,
                        Err(e) => tracing::warn!(error = %e, "storing the client CA"),
                    }
                }
                Err(e) => tracing::warn!(error = %e, "fetching the client CA"),
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    let tls = match tls::server_config(&cfg.serving_cert, &cfg.serving_key, &cfg.client_ca) {
        Ok(mut t) => {
            // HTTP/1.1 only: exec, attach and port-forward are HTTP/1.1 upgrades.
            t.alpn_protocols = vec![b"http/1.1".to_vec()];
            t
        }
        Err(e) => {
            tracing::error!(error = %e, "kubelet API TLS");
            return;
        }
    };
    let listener = match tokio::net::TcpListener::bind(cfg.listen).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(addr = %cfg.listen, error = %e, "kubelet API: cannot listen");
            return;
        }
    };
    tracing::info!(addr = %cfg.listen, "kubelet API listening");
    let k = Arc::new(Kubelet {
        node_name: cfg.node_name,
        client,
        cri,
        cpu_rate: stats::CpuRate::default(),
    });
    // Open streams (exec, logs -f) end with the kubelet.
    let limits = tls::Limits {
        drain: Duration::ZERO,
        ..Default::default()
    };
    tls::serve(listener, tls, router(k), stop, &limits, "kubelet").await;
}
