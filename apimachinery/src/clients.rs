//! How a component gets its `kube::Client`s: each with its own identity, as upstream's
//! controller manager builds one client per controller (`--use-service-account-credentials`).
//! The scheduler and the controllers see only this trait; the server implements it with
//! in-process clients through the API router, tests with whatever they like.

/// Makes identity-bearing clients of one API server.
pub trait ClientBuilder: Send + Sync + std::fmt::Debug {
    /// The client of controller `name`: as its service account
    /// `system:serviceaccount:kube-system:<name>` (its lists and watches may use the
    /// controller manager's shared identity).
    fn controller(&self, name: &str) -> kube::Client;

    /// A client as user `username` in `groups` (plus `system:authenticated`), with
    /// `default_namespace` for `Api::default_namespaced`.
    fn user(&self, username: &str, groups: &[&str], default_namespace: &str) -> kube::Client;
}
