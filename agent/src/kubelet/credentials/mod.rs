//! Image pull credentials from a pod's `imagePullSecrets` (upstream's
//! `credentialprovider/secrets.MakeDockerKeyring` and `credentialprovider.BasicDockerKeyring`):
//! the Docker config JSON of `kubernetes.io/dockerconfigjson` (`.dockerconfigjson`, an
//! `auths` object) and legacy `kubernetes.io/dockercfg` (`.dockercfg`, the object itself)
//! Secrets, each entry with `username`/`password` or `auth` (base64 of `user:password`).
//!
//! Guarantees:
//! - [`Keyring::lookup`] returns the credentials to try for an image, most specific key first
//!   (a key with a longer path before its host), as the kubelet orders them; none means an
//!   anonymous pull.
//! - Secrets of other types, or without their key, are skipped as upstream; a Secret whose
//!   JSON is malformed is an [`Error`] (upstream fails the pull with it).

mod keyring;

pub use keyring::{repository, Keyring};

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

/// One registry's credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
}

/// Why a pull secret cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The secret's data is not Docker config JSON.
    #[error("reading the image pull secret {secret}: {source}")]
    Json {
        secret: String,
        #[source]
        source: serde_json::Error,
    },
    /// An `auth` field that is not base64 of `user:password`.
    #[error("reading the image pull secret {secret}: unable to parse auth field, must be formatted as base64(username:password)")]
    Auth { secret: String },
}

/// `.dockerconfigjson`.
#[derive(Debug, Default, Deserialize)]
struct DockerConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, DockerConfigEntry>,
}

/// One entry of a Docker config.
#[derive(Debug, Default, Deserialize)]
struct DockerConfigEntry {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    auth: String,
}

impl DockerConfigEntry {
    /// The credential; `auth`, when set, wins over the separate fields (as upstream).
    fn credential(&self) -> Option<Credential> {
        if self.auth.is_empty() {
            return Some(Credential {
                username: self.username.clone(),
                password: self.password.clone(),
            });
        }
        // Padded or not, as upstream accepts both.
        let decoded = if self.auth.trim().ends_with('=') {
            base64::engine::general_purpose::STANDARD.decode(&self.auth)
        } else {
            base64::engine::general_purpose::STANDARD_NO_PAD.decode(&self.auth)
        };
        let text = String::from_utf8(decoded.ok()?).ok()?;
        let (user, password) = text.split_once(':')?;
        Some(Credential {
            username: user.to_string(),
            password: password.to_string(),
        })
    }
}

/// The Docker config entries of one pull secret: `None` for a Secret of another type or
/// without its key.
fn entries(secret: &Secret) -> Result<Option<BTreeMap<String, DockerConfigEntry>>, Error> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let data = secret.data.as_ref();
    let field = |key: &str| {
        data.and_then(|d| d.get(key))
            .map(|b| b.0.as_slice())
            .filter(|b| !b.is_empty())
    };
    let json_error = |source| Error::Json {
        secret: name.clone(),
        source,
    };
    match secret.type_.as_deref() {
        Some("kubernetes.io/dockerconfigjson") => match field(".dockerconfigjson") {
            Some(bytes) => {
                let config: DockerConfigJson = serde_json::from_slice(bytes).map_err(json_error)?;
                Ok(Some(config.auths))
            }
            None => Ok(None),
        },
        Some("kubernetes.io/dockercfg") => match field(".dockercfg") {
            Some(bytes) => Ok(Some(serde_json::from_slice(bytes).map_err(json_error)?)),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}

/// The keyring of a pod's pull secrets, in the pod's order.
pub fn keyring(secrets: &[Secret]) -> Result<Keyring, Error> {
    let mut ring = Keyring::default();
    for secret in secrets {
        let Some(entries) = entries(secret)? else {
            continue;
        };
        for (key, entry) in entries {
            let credential = entry.credential().ok_or_else(|| Error::Auth {
                secret: secret.metadata.name.clone().unwrap_or_default(),
            })?;
            ring.add(&key, credential);
        }
    }
    Ok(ring)
}

#[cfg(test)]
mod tests;
