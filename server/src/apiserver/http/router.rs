//! The router: anonymous endpoints, then authentication, then the API; every response is
//! counted in the metrics.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::handlers;
use super::tls::PeerCertificates;
use crate::apiserver::metrics::RequestLabels;
use crate::apiserver::status::ApiError;
use crate::apiserver::{health, openapi, version, ApiState};

/// Paths served without authentication (like k3s: health, version and the CA bundle).
const ANONYMOUS: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/cacerts"];

pub fn router(st: Arc<ApiState>) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/version", get(version::version))
        // kube-apiserver's go-restful service answers `/version/` too (the Python client's
        // VersionApi asks for that).
        .route("/version/", get(version::version))
        .route("/cacerts", get(cacerts))
        .route("/metrics", get(metrics))
        .route("/openapi/v3", get(openapi::index))
        .route("/openapi/v3/{*path}", get(openapi::group_version))
        .route("/api", axum::routing::any(handlers::api))
        .route("/api/{*rest}", axum::routing::any(handlers::api))
        .route("/apis", axum::routing::any(handlers::api))
        .route("/apis/{*rest}", axum::routing::any(handlers::api))
        .fallback(|| async { ApiError::path_not_found().into_response() })
        .layer(middleware::from_fn(authenticate))
        .layer(middleware::from_fn_with_state(st.clone(), record))
        .with_state(st)
}

/// For now: any client certificate verified against the client CA (the TLS handshake
/// already checked the chain) authenticates; anything else is 401 outside [`ANONYMOUS`].
async fn authenticate(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let anonymous = ANONYMOUS
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")));
    let has_cert = req
        .extensions()
        .get::<PeerCertificates>()
        .is_some_and(|c| !c.0.is_empty());
    if anonymous || has_cert {
        next.run(req).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

async fn record(State(st): State<Arc<ApiState>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().as_str().to_string();
    let resp = next.run(req).await;
    let labels = resp.extensions().get::<RequestLabels>().copied();
    let (verb, resource) = match labels {
        Some(l) => (l.verb.to_string(), l.resource),
        None => (method, ""),
    };
    st.metrics
        .observe(&verb, resource, resp.status().as_u16(), started.elapsed());
    resp
}

async fn cacerts(State(st): State<Arc<ApiState>>) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "text/plain")],
        st.server_ca_pem.clone(),
    )
        .into_response()
}

async fn metrics(State(st): State<Arc<ApiState>>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        st.metrics.render(),
    )
        .into_response()
}
