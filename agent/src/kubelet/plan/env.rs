//! A container's environment (upstream's `makeEnvironmentVariables`): `envFrom` first (with
//! its prefix; keys that are no environment variable name are skipped and reported), then
//! `env` in order — `value` with `$(VAR)` expanded against the variables so far and the
//! service variables, or `valueFrom` (`fieldRef`, `resourceFieldRef`, `configMapKeyRef`,
//! `secretKeyRef`, honouring `optional`) — then the service variables no container variable
//! shadows. A missing ConfigMap, Secret or key fails the container start with
//! `CreateContainerConfigError` and upstream's message.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVarSource, Pod, Secret, Service};
use thiserror::Error;

use super::downward::{field_value, resource_value, Allocatable};
use super::expand::expand;
use super::observed::Waiting;
use super::service_env::service_env;

/// Where a `configMapKeyRef`/`secretKeyRef`/`envFrom` reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    ConfigMap,
    Secret,
}

impl SourceKind {
    /// The API error's resource name (`configmap`).
    fn resource(self) -> &'static str {
        match self {
            SourceKind::ConfigMap => "configmap",
            SourceKind::Secret => "secret",
        }
    }

    /// The kind (`ConfigMap`).
    fn kind(self) -> &'static str {
        match self {
            SourceKind::ConfigMap => "ConfigMap",
            SourceKind::Secret => "Secret",
        }
    }

    /// As `envFrom` events name it (`configMap`).
    fn field(self) -> &'static str {
        match self {
            SourceKind::ConfigMap => "configMap",
            SourceKind::Secret => "secret",
        }
    }
}

/// Why a container's environment cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EnvError {
    #[error("{} \"{name}\" not found", kind.resource())]
    NotFound { kind: SourceKind, name: String },
    #[error("couldn't find key {key} in {} {namespace}/{name}", kind.kind())]
    KeyNotFound {
        kind: SourceKind,
        key: String,
        namespace: String,
        name: String,
    },
    #[error(transparent)]
    Downward(#[from] super::downward::DownwardError),
    #[error("container {0} not found")]
    ContainerNotFound(String),
}

impl EnvError {
    /// The container's waiting state for this error.
    pub fn waiting(&self) -> Waiting {
        Waiting::new("CreateContainerConfigError", self.to_string())
    }
}

/// What the environment is built from.
#[derive(Debug, Clone, Copy)]
pub struct EnvInputs<'a> {
    /// The ConfigMaps of the pod's namespace that exist, by name.
    pub config_maps: &'a BTreeMap<String, ConfigMap>,
    /// The Secrets of the pod's namespace that exist, by name.
    pub secrets: &'a BTreeMap<String, Secret>,
    /// The Services the node knows (any namespace).
    pub services: &'a [Service],
    pub host_ips: &'a [String],
    pub pod_ips: &'a [String],
    pub allocatable: &'a Allocatable,
}

/// The resolved environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerEnv {
    /// Name and value, each name once.
    pub vars: Vec<(String, String)>,
    /// Warnings for the `InvalidEnvironmentVariableNames` events, one per `envFrom` source
    /// that had keys skipped.
    pub invalid_keys: Vec<String>,
}

/// An environment variable name as the API accepts it (relaxed validation, on by default since
/// 1.32): printable ASCII other than `=`, not empty.
pub fn is_env_var_name(k: &str) -> bool {
    !k.is_empty() && k.bytes().all(|b| (0x20..=0x7e).contains(&b) && b != b'=')
}

/// Variables in the order they were first set, later values replacing earlier ones.
#[derive(Default)]
struct Ordered {
    vars: Vec<(String, String)>,
}

impl Ordered {
    fn set(&mut self, k: String, v: String) {
        match self.vars.iter_mut().find(|(name, _)| *name == k) {
            Some(slot) => slot.1 = v,
            None => self.vars.push((k, v)),
        }
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.as_str())
    }
}

fn secret_value(s: &Secret, key: &str) -> Option<String> {
    let bytes = s.data.as_ref()?.get(key)?;
    Some(String::from_utf8_lossy(&bytes.0).into_owned())
}

/// Resolves a `configMapKeyRef`/`secretKeyRef` lookup (`None`: no such object, `Some(None)`:
/// no such key); `Ok(None)` skips an optional one.
fn key_ref(
    found: Option<Option<String>>,
    optional: bool,
    missing: EnvError,
    no_key: EnvError,
) -> Result<Option<String>, EnvError> {
    match found {
        Some(Some(v)) => Ok(Some(v)),
        _ if optional => Ok(None),
        None => Err(missing),
        Some(None) => Err(no_key),
    }
}

/// A `configMapKeyRef` or `secretKeyRef`: kind, object name, key, optional, and the lookup.
type KeySource<'a> = (SourceKind, &'a str, &'a str, bool, Option<Option<String>>);

fn key_source<'a>(from: &'a EnvVarSource, inputs: EnvInputs<'_>) -> Option<KeySource<'a>> {
    if let Some(r) = &from.config_map_key_ref {
        let found = inputs
            .config_maps
            .get(&r.name)
            .map(|cm| cm.data.as_ref().and_then(|d| d.get(&r.key)).cloned());
        let optional = r.optional == Some(true);
        return Some((SourceKind::ConfigMap, &r.name, &r.key, optional, found));
    }
    let r = from.secret_key_ref.as_ref()?;
    let found = inputs.secrets.get(&r.name).map(|s| secret_value(s, &r.key));
    let optional = r.optional == Some(true);
    Some((SourceKind::Secret, &r.name, &r.key, optional, found))
}

/// Builds the environment of `c` in `pod`.
pub fn container_env(
    pod: &Pod,
    c: &Container,
    inputs: EnvInputs<'_>,
) -> Result<ContainerEnv, EnvError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let services = service_env(pod, inputs.services);
    let mut env = Ordered::default();
    let mut invalid_keys = vec![];

    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let (kind, name, data): (SourceKind, &str, Vec<(String, String)>) =
            if let Some(r) = &from.config_map_ref {
                match inputs.config_maps.get(&r.name) {
                    Some(cm) => {
                        let data = cm.data.clone().unwrap_or_default().into_iter().collect();
                        (SourceKind::ConfigMap, &r.name, data)
                    }
                    None if r.optional == Some(true) => continue,
                    None => {
                        return Err(EnvError::NotFound {
                            kind: SourceKind::ConfigMap,
                            name: r.name.clone(),
                        })
                    }
                }
            } else if let Some(r) = &from.secret_ref {
                match inputs.secrets.get(&r.name) {
                    Some(s) => {
                        let keys = s.data.iter().flatten().map(|(k, _)| k.clone());
                        let data = keys
                            .filter_map(|k| Some((k.clone(), secret_value(s, &k)?)))
                            .collect();
                        (SourceKind::Secret, &r.name, data)
                    }
                    None if r.optional == Some(true) => continue,
                    None => {
                        return Err(EnvError::NotFound {
                            kind: SourceKind::Secret,
                            name: r.name.clone(),
                        })
                    }
                }
            } else {
                continue;
            };
        let mut invalid = vec![];
        for (k, v) in data {
            let k = format!("{prefix}{k}");
            if is_env_var_name(&k) {
                env.set(k, v);
            } else {
                invalid.push(k);
            }
        }
        if !invalid.is_empty() {
            invalid.sort();
            invalid_keys.push(format!(
                "Keys [{}] from the EnvFrom {} {ns}/{name} were skipped since they are considered invalid environment variable names.",
                invalid.join(", "),
                kind.field()
            ));
        }
    }

    for var in c.env.iter().flatten() {
        let value = var.value.as_deref().unwrap_or_default();
        let resolved = if !value.is_empty() {
            expand(value, |n| {
                env.get(n)
                    .or_else(|| services.get(n).map(String::as_str))
                    .map(String::from)
            })
        } else if let Some(from) = &var.value_from {
            if let Some(f) = &from.field_ref {
                field_value(pod, &f.field_path, inputs.host_ips, inputs.pod_ips)?
            } else if let Some(r) = &from.resource_field_ref {
                let target = match r.container_name.as_deref().filter(|n| !n.is_empty()) {
                    Some(name) => super::spec::containers(pod)
                        .iter()
                        .chain(super::spec::init_containers(pod))
                        .find(|c| c.name == name)
                        .ok_or_else(|| EnvError::ContainerNotFound(name.to_string()))?,
                    None => c,
                };
                resource_value(target, &r.resource, r.divisor.as_ref(), inputs.allocatable)?
            } else if let Some((kind, name, key, optional, found)) = key_source(from, inputs) {
                let missing = EnvError::NotFound {
                    kind,
                    name: name.into(),
                };
                let no_key = EnvError::KeyNotFound {
                    kind,
                    key: key.into(),
                    namespace: ns.into(),
                    name: name.into(),
                };
                match key_ref(found, optional, missing, no_key)? {
                    Some(v) => v,
                    None => continue,
                }
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        env.set(var.name.clone(), resolved);
    }

    for (k, v) in services {
        if env.get(&k).is_none() {
            env.vars.push((k, v));
        }
    }
    Ok(ContainerEnv {
        vars: env.vars,
        invalid_keys,
    })
}

/// The container's `command` and `args` with `$(VAR)` expanded against its environment.
pub fn expand_command(c: &Container, vars: &[(String, String)]) -> (Vec<String>, Vec<String>) {
    let lookup = |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let all = |list: &Option<Vec<String>>| -> Vec<String> {
        list.iter().flatten().map(|s| expand(s, lookup)).collect()
    };
    (all(&c.command), all(&c.args))
}

#[cfg(test)]
mod tests;
