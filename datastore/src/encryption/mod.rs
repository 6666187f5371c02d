//! Secrets encryption at rest (`--secrets-encryption`, as k3s): kube-apiserver's `aesgcm`
//! provider over the datastore, keys in `<data-dir>/server/cred/encryption-config.json`.

pub mod client;
pub mod config;
pub mod ops;
pub mod store;
pub mod sync;
pub mod transformer;

pub use config::Config;
pub use ops::SecretsEncryption;
pub use store::Encrypted;
pub use sync::KeySync;
pub use transformer::Transformer;
