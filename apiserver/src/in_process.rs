//! `kube::Client`s for the components that run inside the server (controllers, scheduler):
//! requests go through the API router as a tower service — no TCP, no TLS — with the
//! component's own identity, so authorization, admission and validation apply to them as to
//! any client.

use std::sync::Arc;

use tower::ServiceExt;

use k3rs_apimachinery::clients::ClientBuilder;
use k3rs_auth::{InProcessUser, UserInfo};

/// A client that sends every request through `app` as `user` (groups as given, plus
/// `system:authenticated`), with `default_namespace` for `Api::default_namespaced`.
///
/// Must be called inside a tokio runtime (the client spawns its request buffer).
pub fn client(app: axum::Router, user: UserInfo, default_namespace: &str) -> kube::Client {
    let mut user = user;
    user.add_group(k3rs_auth::user::ALL_AUTHENTICATED);
    let agent = user_agent(component_of(&user.username), &user.username);
    let identity = InProcessUser(Arc::new(user));
    let service = tower::service_fn(move |mut req: axum::http::Request<kube::client::Body>| {
        req.extensions_mut().insert(identity.clone());
        set_user_agent(&mut req, &agent);
        app.clone().oneshot(req.map(axum::body::Body::new))
    });
    kube::Client::new(service, default_namespace)
}

/// The client of controller `name`: its lists and watches (what upstream's controllers read
/// through the shared informers, which kube-controller-manager builds with its own
/// credentials) run as `system:kube-controller-manager`; every other request as the
/// controller's service account ([`controller_identity`]).
pub fn controller_client(app: axum::Router, name: &str) -> kube::Client {
    let mut own = controller_identity(name);
    own.add_group(k3rs_auth::user::ALL_AUTHENTICATED);
    let agent = user_agent("kube-controller-manager", &own.username);
    let own = InProcessUser(Arc::new(own));
    let informers = InProcessUser(Arc::new(UserInfo::authenticated(
        k3rs_auth::user::CONTROLLER_MANAGER,
        Vec::new(),
    )));
    let service = tower::service_fn(move |mut req: axum::http::Request<kube::client::Body>| {
        let identity = if is_list_or_watch(&req) {
            informers.clone()
        } else {
            own.clone()
        };
        req.extensions_mut().insert(identity);
        set_user_agent(&mut req, &agent);
        app.clone().oneshot(req.map(axum::body::Body::new))
    });
    kube::Client::new(service, "default")
}

/// The program an in-process user stands for, as upstream names its binaries: the prefix of
/// the User-Agent is the field manager of writes without `fieldManager`.
fn component_of(username: &str) -> &'static str {
    match username {
        k3rs_auth::user::SCHEDULER => "kube-scheduler",
        k3rs_auth::user::CONTROLLER_MANAGER => "kube-controller-manager",
        "system:apiserver" => "kube-apiserver",
        _ => "k3rs",
    }
}

/// client-go's default User-Agent (`rest.DefaultKubernetesUserAgent`) with the user appended,
/// as kube-controller-manager's clients send it.
fn user_agent(program: &str, username: &str) -> axum::http::HeaderValue {
    let text = format!(
        "{program}/{} ({}) kubernetes/k3rs/{username}",
        crate::version::GIT_VERSION,
        crate::version::platform(),
    );
    axum::http::HeaderValue::from_str(&text)
        .unwrap_or_else(|_| axum::http::HeaderValue::from_static("k3rs"))
}

fn set_user_agent<B>(req: &mut axum::http::Request<B>, agent: &axum::http::HeaderValue) {
    req.headers_mut()
        .entry(axum::http::header::USER_AGENT)
        .or_insert_with(|| agent.clone());
}

/// The [`ClientBuilder`] of the components in this server: in-process clients through the
/// router, each with its identity.
#[derive(Clone)]
pub struct InProcessClients(pub axum::Router);

impl std::fmt::Debug for InProcessClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InProcessClients")
    }
}

impl ClientBuilder for InProcessClients {
    fn controller(&self, name: &str) -> kube::Client {
        controller_client(self.0.clone(), name)
    }

    fn user(&self, username: &str, groups: &[&str], default_namespace: &str) -> kube::Client {
        let groups = groups.iter().map(|g| g.to_string()).collect();
        client(
            self.0.clone(),
            UserInfo::authenticated(username, groups),
            default_namespace,
        )
    }
}

/// Whether a request reads a collection (`list` or `watch` in authorization terms).
fn is_list_or_watch<B>(req: &axum::http::Request<B>) -> bool {
    if req.method() != axum::http::Method::GET {
        return false;
    }
    let a = k3rs_auth::Attributes::of_request(
        Arc::new(UserInfo::default()),
        "GET",
        req.uri().path(),
        req.uri().query(),
    );
    a.resource_request && matches!(a.verb.as_str(), "list" | "watch")
}

/// The identity upstream's kube-controller-manager gives controller `name` with
/// `--use-service-account-credentials` (`system:serviceaccount:kube-system:<name>`), which the
/// bootstrap RBAC policy binds its `system:controller:<name>` role to.
pub fn controller_identity(name: &str) -> UserInfo {
    UserInfo {
        username: format!("system:serviceaccount:kube-system:{name}"),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:kube-system".into(),
        ],
        ..UserInfo::default()
    }
}

/// The API server's own loopback identity (`system:apiserver` in `system:masters`), for the
/// work kube-apiserver does through its loopback client (bootstrap policy, its informers).
pub fn apiserver_identity() -> UserInfo {
    UserInfo {
        username: "system:apiserver".into(),
        groups: vec![k3rs_auth::user::SYSTEM_MASTERS.into()],
        ..UserInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str) -> axum::http::Request<()> {
        axum::http::Request::get(uri).body(()).unwrap()
    }

    #[test]
    fn only_collection_reads_use_the_informer_identity() {
        assert!(is_list_or_watch(&get("/api/v1/pods")));
        assert!(is_list_or_watch(&get(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=1"
        )));
        assert!(!is_list_or_watch(&get("/api/v1/namespaces/a/pods/p")));
        assert!(!is_list_or_watch(&get("/apis")));
        let post = axum::http::Request::post("/api/v1/namespaces/a/pods")
            .body(())
            .unwrap();
        assert!(!is_list_or_watch(&post));
    }
}
