//! Which files, with which content and mode, a configMap, secret, downwardAPI or projected
//! volume holds (upstream's `MakePayload` of each volume plugin). Pure: the objects come in as
//! [`Sources`], the writer ([`super::atomic`]) puts the result on disk.
//!
//! Upstream's rules: without `items` every key becomes a file named after it; with `items`
//! only the listed keys, at their paths, and a missing key fails unless the source is
//! `optional`; a missing object fails unless `optional` (then the volume is empty); a file's
//! mode is the item's `mode`, else the volume's `defaultMode` (0644).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, Volume, VolumeProjection,
};

use crate::kubelet::plan::{field_value, resource_value, spec::containers, Allocatable};

/// The default mode of a volume's files (upstream's `DefaultMode`, 0644).
pub const DEFAULT_MODE: u32 = 0o644;

/// One file of a volume, by its path relative to the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: u32,
}

/// The objects volumes draw from.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    pub pod: &'a Pod,
    pub config_maps: &'a BTreeMap<String, ConfigMap>,
    pub secrets: &'a BTreeMap<String, Secret>,
    /// Service-account tokens by the index of the projection source that asked for them.
    pub tokens: &'a BTreeMap<usize, String>,
    pub host_ips: &'a [String],
    pub pod_ips: &'a [String],
    pub allocatable: &'a Allocatable,
}

fn mode(item: Option<i32>, default: Option<i32>) -> u32 {
    item.or(default)
        .map(|m| m as u32 & 0o777)
        .unwrap_or(DEFAULT_MODE)
}

/// Why a volume's files cannot be made (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilesError {
    /// A ConfigMap or Secret (`kind` in lowercase plural) that does not exist.
    #[error("{kind} {name:?} not found")]
    NotFound {
        /// `configmaps` or `secrets`.
        kind: String,
        /// Its name.
        name: String,
    },
    /// An item names a key the ConfigMap lacks.
    #[error("configmap references non-existent config key: {0}")]
    ConfigMapKey(String),
    /// An item names a key the Secret lacks.
    #[error("references non-existent secret key: {0}")]
    SecretKey(String),
    /// A downward API reference the kubelet does not support.
    #[error(transparent)]
    Downward(#[from] crate::kubelet::plan::DownwardError),
    /// A `resourceFieldRef` names no container of the pod.
    #[error("container {0:?} not found")]
    ContainerNotFound(String),
    /// A projected token that was not requested.
    #[error("no service account token")]
    NoToken,
}

/// The files of one key/value object (`data` of a ConfigMap or Secret).
fn key_files(
    kind: &str,
    name: &str,
    data: Option<BTreeMap<String, Vec<u8>>>,
    items: Option<&Vec<KeyToPath>>,
    optional: bool,
    default_mode: Option<i32>,
) -> Result<Vec<File>, FilesError> {
    let Some(data) = data else {
        if optional {
            return Ok(vec![]);
        }
        return Err(FilesError::NotFound {
            kind: format!("{}s", kind.to_lowercase()),
            name: name.to_string(),
        });
    };
    let Some(items) = items.filter(|i| !i.is_empty()) else {
        return Ok(data
            .into_iter()
            .map(|(k, v)| File {
                path: k,
                content: v,
                mode: mode(None, default_mode),
            })
            .collect());
    };
    let mut out = vec![];
    for item in items {
        match data.get(&item.key) {
            Some(v) => out.push(File {
                path: item.path.clone(),
                content: v.clone(),
                mode: mode(item.mode, default_mode),
            }),
            None if optional => {}
            None if kind == "ConfigMap" => return Err(FilesError::ConfigMapKey(item.key.clone())),
            None => return Err(FilesError::SecretKey(item.key.clone())),
        }
    }
    Ok(out)
}

fn config_map_data(m: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = m
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    for (k, v) in m.binary_data.iter().flatten() {
        data.insert(k.clone(), v.0.clone());
    }
    data
}

fn secret_data(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in s.string_data.iter().flatten() {
        data.insert(k.clone(), v.clone().into_bytes());
    }
    data
}

fn downward_files(
    items: &[DownwardAPIVolumeFile],
    default_mode: Option<i32>,
    s: &Sources<'_>,
) -> Result<Vec<File>, FilesError> {
    let mut out = vec![];
    for item in items {
        let value = if let Some(f) = &item.field_ref {
            field_value(s.pod, &f.field_path, s.host_ips, s.pod_ips)?
        } else if let Some(r) = &item.resource_field_ref {
            let name = r.container_name.as_deref().unwrap_or_default();
            let c = containers(s.pod)
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| FilesError::ContainerNotFound(name.to_string()))?;
            resource_value(c, &r.resource, r.divisor.as_ref(), s.allocatable)?
        } else {
            continue;
        };
        out.push(File {
            path: item.path.clone(),
            content: value.into_bytes(),
            mode: mode(item.mode, default_mode),
        });
    }
    Ok(out)
}

fn projection_files(
    index: usize,
    p: &VolumeProjection,
    default_mode: Option<i32>,
    s: &Sources<'_>,
) -> Result<Vec<File>, FilesError> {
    if let Some(c) = &p.config_map {
        let data = s.config_maps.get(&c.name).map(config_map_data);
        let optional = c.optional.unwrap_or(false);
        return key_files(
            "ConfigMap",
            &c.name,
            data,
            c.items.as_ref(),
            optional,
            default_mode,
        );
    }
    if let Some(c) = &p.secret {
        let data = s.secrets.get(&c.name).map(secret_data);
        let optional = c.optional.unwrap_or(false);
        return key_files(
            "Secret",
            &c.name,
            data,
            c.items.as_ref(),
            optional,
            default_mode,
        );
    }
    if let Some(d) = &p.downward_api {
        return downward_files(d.items.as_deref().unwrap_or_default(), default_mode, s);
    }
    if let Some(t) = &p.service_account_token {
        let token = s.tokens.get(&index).ok_or(FilesError::NoToken)?;
        return Ok(vec![File {
            path: t.path.clone(),
            content: token.clone().into_bytes(),
            mode: mode(None, default_mode),
        }]);
    }
    Ok(vec![])
}

/// The files of `volume`; `None` for volumes that are no file set (emptyDir, hostPath, …).
pub fn volume_files(volume: &Volume, s: &Sources<'_>) -> Option<Result<Vec<File>, FilesError>> {
    if let Some(c) = &volume.config_map {
        let data = s.config_maps.get(&c.name).map(config_map_data);
        let optional = c.optional.unwrap_or(false);
        return Some(key_files(
            "ConfigMap",
            &c.name,
            data,
            c.items.as_ref(),
            optional,
            c.default_mode,
        ));
    }
    if let Some(c) = &volume.secret {
        let name = c.secret_name.clone().unwrap_or_default();
        let data = s.secrets.get(&name).map(secret_data);
        let optional = c.optional.unwrap_or(false);
        return Some(key_files(
            "Secret",
            &name,
            data,
            c.items.as_ref(),
            optional,
            c.default_mode,
        ));
    }
    if let Some(d) = &volume.downward_api {
        let items = d.items.as_deref().unwrap_or_default();
        return Some(downward_files(items, d.default_mode, s));
    }
    if let Some(p) = &volume.projected {
        let mut out = vec![];
        for (i, source) in p.sources.iter().flatten().enumerate() {
            match projection_files(i, source, p.default_mode, s) {
                Ok(files) => out.extend(files),
                Err(e) => return Some(Err(e)),
            }
        }
        return Some(Ok(out));
    }
    None
}

#[cfg(test)]
mod tests;
