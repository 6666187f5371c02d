//! The well-known user and group names of Kubernetes (and of k3rs's in-process components).

/// Group of every authenticated user.
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// Group of the anonymous user.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The anonymous user's name.
pub const ANONYMOUS: &str = "system:anonymous";
/// Members are allowed everything (RBAC's superuser group).
pub const SYSTEM_MASTERS: &str = "system:masters";
/// Group of kubelets (`system:node:<name>` users).
pub const NODES_GROUP: &str = "system:nodes";
/// Prefix of kubelet user names.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// Identity of the in-process controller manager.
pub const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
/// Identity of the in-process scheduler.
pub const SCHEDULER: &str = "system:kube-scheduler";
/// The annotation of a kubelet client CertificateSigningRequest carrying the node's password
/// (k3rs's node passwords, after k3s's); the API server checks and removes it before storing.
pub const NODE_PASSWORD_ANNOTATION: &str = "k3rs.io/node-password";
