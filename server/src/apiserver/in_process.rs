//! `kube::Client`s for the components that run inside the server (controllers, scheduler):
//! requests go through the API router as a tower service — no TCP, no TLS — with the
//! component's own identity, so authorization, admission and validation apply to them as to
//! any client.

use std::sync::Arc;

use tower::ServiceExt;

use crate::auth::{InProcessUser, UserInfo};

/// A client that sends every request through `app` as `user` (groups as given, plus
/// `system:authenticated`), with `default_namespace` for `Api::default_namespaced`.
///
/// Must be called inside a tokio runtime (the client spawns its request buffer).
pub fn client(app: axum::Router, user: UserInfo, default_namespace: &str) -> kube::Client {
    let mut user = user;
    user.add_group(crate::auth::user::ALL_AUTHENTICATED);
    let identity = InProcessUser(Arc::new(user));
    let service = tower::service_fn(move |mut req: axum::http::Request<kube::client::Body>| {
        req.extensions_mut().insert(identity.clone());
        app.clone().oneshot(req.map(axum::body::Body::new))
    });
    kube::Client::new(service, default_namespace)
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
