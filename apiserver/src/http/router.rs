//! The router: anonymous endpoints, then authentication, then the API; every response is
//! counted in the metrics.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::{agent_config, audit, encryption, handlers, inflight};
use crate::metrics::RequestLabels;
use crate::{health, openapi, version, ApiState};
use k3rs_apimachinery::request_info::RequestInfo;
use k3rs_apimachinery::status::ApiError;
use k3rs_apimachinery::tls::PeerCertificates;
use k3rs_auth::authn::{AuthnRequest, Outcome};
use k3rs_auth::authz::Decision;
use k3rs_auth::serviceaccount::discovery as sa_discovery;
use k3rs_auth::{self as auth, impersonation, Attributes, InProcessUser, UserInfo};

/// Every route of the API server (API groups, discovery, OpenAPI, health, version, metrics,
/// k3s's endpoints) over `st`, with authentication, authorization, audit and the inflight
/// limits in front.
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
        .route(CLIENT_CA_PATH, get(client_ca))
        .route("/metrics", get(metrics))
        .route(sa_discovery::CONFIGURATION_PATH, get(openid_configuration))
        .route(sa_discovery::JWKS_PATH, get(jwks))
        // go-restful matches a route with a trailing slash too, and /openapi/v2 lists these
        // paths with one (as it lists `/api/` and `/apis/`).
        .route(
            &format!("{}/", sa_discovery::CONFIGURATION_PATH),
            get(openid_configuration),
        )
        .route(&format!("{}/", sa_discovery::JWKS_PATH), get(jwks))
        .route("/openapi/v2", get(openapi_v2))
        .route("/openapi/v3", get(openapi_v3_index))
        .route("/openapi/v3/{*path}", get(openapi_v3_document))
        .route("/api", axum::routing::any(handlers::api))
        .route("/api/", axum::routing::any(handlers::api))
        .route("/api/{*rest}", axum::routing::any(handlers::api))
        .route("/apis", axum::routing::any(handlers::api))
        .route("/apis/", axum::routing::any(handlers::api))
        .route("/apis/{*rest}", axum::routing::any(handlers::api))
        .route(encryption::PATH, axum::routing::any(encryption::handle))
        .route(agent_config::PATH, axum::routing::any(agent_config::handle))
        .fallback(|| async { ApiError::path_not_found().into_response() })
        .layer(middleware::from_fn(warnings))
        .layer(middleware::from_fn_with_state(st.clone(), authenticate))
        .layer(middleware::from_fn_with_state(st.clone(), record))
        .layer(middleware::from_fn(parse_request))
        .with_state(st)
}

/// `/openapi/v2`, with the available extension servers' documents.
async fn openapi_v2(State(st): State<Arc<ApiState>>, req: Request) -> Response {
    let extensions = st
        .aggregator
        .as_ref()
        .map(|a| a.openapi_v2())
        .unwrap_or_default();
    openapi::v2::serve(extensions, req).await
}

fn openapi_v3_extensions(st: &ApiState) -> openapi::Extensions {
    st.aggregator
        .as_ref()
        .map(|a| a.openapi_v3())
        .unwrap_or_default()
}

/// `/openapi/v3`, listing the available extension servers' documents too.
async fn openapi_v3_index(State(st): State<Arc<ApiState>>, req: Request) -> Response {
    openapi::index(&openapi_v3_extensions(&st), req)
}

/// `/openapi/v3/<path>`, an extension server's document included.
async fn openapi_v3_document(State(st): State<Arc<ApiState>>, req: Request) -> Response {
    openapi::group_version(&openapi_v3_extensions(&st), req)
}

/// Parses the request once ([`RequestInfo`]); every later stage reads that value.
async fn parse_request(mut req: Request, next: Next) -> Response {
    let info = Arc::new(RequestInfo::parse(
        req.method().as_str(),
        req.uri().path(),
        req.uri().query(),
    ));
    req.extensions_mut().insert(info);
    next.run(req).await
}

/// Authentication, then auditing, then authorization, before any handler. In-process
/// clients carry their identity ([`InProcessUser`]); network clients are authenticated by the
/// chain. Public paths are served to anyone; everything else needs an identity (401) and an
/// `Allow` (403).
async fn authenticate(State(st): State<Arc<ApiState>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let public = auth::is_public(&path);
    let in_process = req.extensions().get::<InProcessUser>().is_some();
    let user = match req.extensions().get::<InProcessUser>() {
        Some(InProcessUser(u)) => Some(u.clone()),
        None => {
            let certs = req
                .extensions()
                .get::<PeerCertificates>()
                .map(|c| c.0.clone())
                .unwrap_or_default();
            let areq = AuthnRequest {
                headers: req.headers(),
                peer_certs: &certs,
                path: &path,
            };
            match st.authn.authenticate(&areq).await {
                Outcome::Authenticated(u) => Some(Arc::new(u)),
                Outcome::NotApplicable => None,
                Outcome::Rejected(why) => {
                    tracing::debug!(%path, reason = %why, "authentication failed");
                    None
                }
            }
        }
    };
    let user = match user {
        Some(u) => u,
        None if public => Arc::new(UserInfo::anonymous()),
        None => {
            let resp = ApiError::unauthorized().into_response();
            if let Some(auditor) = &st.audit {
                audit::unauthenticated(auditor, &req, &resp);
            }
            return resp;
        }
    };
    let Some(auditor) = &st.audit else {
        return authorize_and_run(&st, user, public || in_process, req, next, None).await;
    };
    let mut audit = audit::begin(auditor, &req, user.clone());
    let resp = authorize_and_run(&st, user, public || in_process, req, next, audit.as_mut()).await;
    match audit {
        Some(a) => a.finish(resp).await,
        None => resp,
    }
}

/// Impersonation (unless `trusted`), authorization (unless public), then the handler.
async fn authorize_and_run(
    st: &ApiState,
    user: Arc<UserInfo>,
    trusted: bool,
    mut req: Request,
    next: Next,
    mut audit: Option<&mut audit::Audit>,
) -> Response {
    let path = req.uri().path().to_string();
    let public = auth::is_public(&path);
    let user = if trusted {
        user
    } else {
        match impersonate(st, user, req.headers()).await {
            Ok((u, impersonated)) => {
                if let (Some(a), true) = (audit.as_deref_mut(), impersonated) {
                    a.impersonated(&u);
                }
                u
            }
            Err(e) => return e.into_response(),
        }
    };
    // kube-apiserver's order: impersonation, then the in-flight limits, then authorization.
    // The in-process clients are the API server's loopback (system:masters upstream).
    let privileged = req.extensions().get::<InProcessUser>().is_some()
        || user.in_group(k3rs_apimachinery::users::SYSTEM_MASTERS);
    let slot = match st
        .inflight
        .admit(&super::request::info_of(&req), privileged)
    {
        inflight::Admission::Slot(slot) => Some(slot),
        inflight::Admission::Exempt => None,
        // Counted in apiserver_request_total with code 429 by `record`.
        inflight::Admission::Refused(e) => return e.into_response(),
    };
    if !public {
        let attrs = Attributes::of(user.clone(), &super::request::info_of(&req));
        let checks = std::iter::once(attrs.clone())
            .chain(attrs.websocket_create_check(req.method().as_str()));
        for attrs in checks {
            if let Decision::Deny(reason) = st.authz.authorize(&attrs).await {
                if let Some(a) = audit {
                    a.annotate(DECISION_ANNOTATION, "forbid");
                    a.annotate(REASON_ANNOTATION, reason.clone());
                }
                return k3rs_auth::authz::forbidden(&attrs, &reason).into_response();
            }
        }
        if let Some(a) = audit.as_deref_mut() {
            a.annotate(DECISION_ANNOTATION, "allow");
            a.annotate(REASON_ANNOTATION, "");
        }
    }
    let resp = match audit {
        None => {
            req.extensions_mut().insert(user);
            next.run(req).await
        }
        Some(a) => {
            req = a.capture_request(req).await;
            req.extensions_mut().insert(user);
            let (resp, annotations) = crate::audit::annotations::scope(next.run(req)).await;
            for (k, v) in annotations {
                a.annotate(&k, v);
            }
            resp
        }
    };
    match slot {
        Some(slot) => inflight::hold(resp, slot),
        None => resp,
    }
}

/// The audit annotations of the authorization decision (kube-apiserver's keys).
const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// The identity the request runs as once its impersonation headers (if any) are allowed:
/// each requested attribute needs the `impersonate` verb on it (403 otherwise).
/// The flag says whether the request impersonates.
async fn impersonate(
    st: &ApiState,
    user: Arc<UserInfo>,
    headers: &axum::http::HeaderMap,
) -> Result<(Arc<UserInfo>, bool), ApiError> {
    let requested = match impersonation::requested(headers) {
        Ok(None) => return Ok((user, false)),
        Ok(Some(r)) => r,
        Err(msg) => return Err(ApiError::bad_request(msg.to_string())),
    };
    for a in impersonation::checks(&user, &requested) {
        if let Decision::Deny(reason) = st.authz.authorize(&a).await {
            return Err(k3rs_auth::authz::forbidden(&a, &reason));
        }
    }
    Ok((Arc::new(impersonation::impersonated(&requested)), true))
}

/// The [warnings](crate::warning) the handler added, as `Warning` headers.
async fn warnings(req: Request, next: Next) -> Response {
    let (resp, warnings) = crate::warning::scope(next.run(req)).await;
    openapi::with_warnings(resp, &warnings)
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

/// Where agents fetch the client CA (public, like `/cacerts`: a CA certificate, no secret).
pub const CLIENT_CA_PATH: &str = "/v1-k3rs/client-ca.crt";

async fn client_ca(State(st): State<Arc<ApiState>>) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "text/plain")],
        st.client_ca_pem.clone(),
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

/// The service-account issuer's discovery document (authenticated users only for now;
/// upstream grants it to everyone through `system:service-account-issuer-discovery`).
async fn openid_configuration(State(st): State<Arc<ApiState>>) -> Response {
    match &st.service_accounts {
        Some(_) => {
            handlers::json_response(axum::http::StatusCode::OK, &sa_discovery::configuration())
        }
        None => ApiError::path_not_found().into_response(),
    }
}

/// The service-account issuer's key set.
async fn jwks(State(st): State<Arc<ApiState>>) -> Response {
    match &st.service_accounts {
        Some(sa) => (
            [(axum::http::header::CONTENT_TYPE, "application/jwk-set+json")],
            sa_discovery::jwks(&sa.key).to_string(),
        )
            .into_response(),
        None => ApiError::path_not_found().into_response(),
    }
}
