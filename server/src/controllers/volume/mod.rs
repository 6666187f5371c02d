//! Persistent volumes: the binder (`persistentvolume-binder`), the PVC and PV protection
//! controllers, and k3s's built-in local-path provisioner. Each has a pure decision core
//! ([`matching`], [`binder`], [`protection`], [`local_path`]) and a thin async shell.

pub mod binder;
pub mod binder_shell;
pub mod edits;
pub mod local_path;
pub mod local_path_shell;
pub mod matching;
pub mod protection;

/// On a claim: its binding is complete (`yes`).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a claim or volume: the controller, not the user, bound it (`yes`).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a claim: the node the scheduler picked for its first consumer.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// On a claim: the provisioner expected to create its volume.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The beta spelling of [`ANN_STORAGE_PROVISIONER`], written too as upstream does.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// On a volume: the provisioner that created it.
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// The finalizer that keeps a claim while pods use it.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The finalizer that keeps a volume while it is bound.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";
