//! Well-known names of service accounts and what the API server mounts into pods.

/// The account a pod gets when it names none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The ConfigMap the root-CA publisher keeps in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
