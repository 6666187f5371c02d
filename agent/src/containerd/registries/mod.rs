//! `registries.yaml` (`--private-registry`, `/etc/k3rs/registries.yaml`), in k3s's format:
//! `mirrors` (per registry, the `endpoint`s to try first and `rewrite`s of repository names)
//! and `configs` (per registry host, `auth` and `tls`). [`hosts`] turns it into containerd's
//! registry host directory (`config_path`, one `hosts.toml` per registry) and the CRI plugin's
//! `configs.<host>.auth` credentials in `config.toml` ([`super::Config::render`]).
//!
//! Guarantees:
//! - A missing file is no configuration (as k3s); any other read error, a YAML error, an
//!   unknown key or an endpoint that is no `http(s)` URL is an [`Error`] naming the file (and,
//!   for YAML errors, the key, line and column), so the agent refuses to start on it.
//! - Nothing here touches containerd; [`hosts::hosts_files`] is pure and
//!   [`hosts::write_hosts_dir`] only replaces the directories it generated.

pub mod hosts;
pub mod system_image;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Where k3rs looks for the file when `--private-registry` is not given.
pub const DEFAULT_PATH: &str = "/etc/k3rs/registries.yaml";

/// Why `registries.yaml` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file exists but cannot be read.
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Bad YAML or an unknown key; serde's message (the source) names the key path, line and
    /// column.
    #[error("{path}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_norway::Error,
    },
    /// A mirror endpoint that is no registry URL.
    #[error("{path}: mirrors.{registry}.endpoint: {endpoint:?} {why}")]
    Endpoint {
        path: PathBuf,
        registry: String,
        endpoint: String,
        why: &'static str,
    },
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registries {
    /// Per registry name (`docker.io`, `registry.example.com:5000`, `*` for every registry).
    #[serde(default)]
    pub mirrors: BTreeMap<String, Mirror>,
    /// Per registry host (a mirror endpoint's host or a registry's own).
    #[serde(default)]
    pub configs: BTreeMap<String, RegistryConfig>,
}

/// The endpoints tried before the registry itself, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mirror {
    /// `host[:port][/path]`, with `http://` or `https://` or neither (then `https`, or `http`
    /// for a loopback host with a port other than 443, as k3s).
    #[serde(default)]
    pub endpoint: Vec<String>,
    /// Regular expression → replacement for the repository name at the endpoints.
    #[serde(default)]
    pub rewrite: BTreeMap<String, String>,
}

/// How to talk to one registry host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    #[serde(default)]
    pub auth: Option<Auth>,
    #[serde(default)]
    pub tls: Option<Tls>,
}

/// Credentials (containerd's CRI `registry.configs.<host>.auth`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
    /// base64 of `username:password`.
    #[serde(default)]
    pub auth: String,
    #[serde(default)]
    pub identitytoken: String,
}

/// TLS towards the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

/// Reads `path`; `None` when it does not exist.
pub fn load(path: &Path) -> Result<Option<Registries>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    parse(path, &text).map(Some)
}

/// Parses the text of `path` and checks every endpoint.
pub fn parse(path: &Path, text: &str) -> Result<Registries, Error> {
    let parse_error = |source| Error::Parse {
        path: path.to_path_buf(),
        source,
    };
    // An empty file (or one of comments only) is no configuration.
    let doc: serde_norway::Value = serde_norway::from_str(text).map_err(parse_error)?;
    if doc.is_null() {
        return Ok(Registries::default());
    }
    let registries: Registries = serde_norway::from_str(text).map_err(parse_error)?;
    for (registry, mirror) in &registries.mirrors {
        for endpoint in &mirror.endpoint {
            if let Err(why) = hosts::Endpoint::parse(endpoint) {
                return Err(Error::Endpoint {
                    path: path.to_path_buf(),
                    registry: registry.clone(),
                    endpoint: endpoint.clone(),
                    why,
                });
            }
        }
    }
    Ok(registries)
}

#[cfg(test)]
mod tests;
