//! The plain-HTTP endpoints etcd serves on its client port next to gRPC: `/metrics`
//! (Prometheus text, the same families as the HTTPS port's `/metrics`) and `/health`
//! (`{"health":"true"}` once a leader is known and a linearizable read succeeds).

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k3rs_raft::Node;

/// How long `/health` waits for its read barrier (etcd: the request timeout).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// Routes to merge into the gRPC server's.
pub fn routes(node: Arc<Node>) -> axum::Router {
    let metrics_node = node.clone();
    axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let text = super::metrics::render(&super::metrics::Sample::of(&metrics_node));
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        text,
                    )
                        .into_response()
                }
            }),
        )
        .route("/health", get(move || health(node.clone())))
}

async fn health(node: Arc<Node>) -> Response {
    let verdict = if node.status().leader.is_none() {
        Err("RAFT NO LEADER")
    } else {
        match tokio::time::timeout(HEALTH_TIMEOUT, node.read_barrier()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) | Err(_) => Err("QGET ERROR"),
        }
    };
    let (code, body) = match verdict {
        Ok(()) => (StatusCode::OK, r#"{"health":"true"}"#.to_string()),
        Err(reason) => {
            tracing::debug!(reason, "etcd /health is false");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                r#"{"health":"false"}"#.to_string(),
            )
        }
    };
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
