//! `--system-default-registry` for the sandbox image (the rule lives in the shared crate: the
//! local-path provisioner's helper image follows it too).

pub use k3rs_apimachinery::system_image::with_registry;
