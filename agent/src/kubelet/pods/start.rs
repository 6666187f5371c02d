//! Starting one container (upstream's `startContainer`): the objects its environment names,
//! its environment and CRI config, its volumes and mounts, then CRI `CreateContainer` and
//! `StartContainer`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};

use super::cri_config::{container_config, Mount};
use super::sync::{Executor, Sandbox};
use super::volumes;
use crate::kubelet::plan::{container_env, container_spec, EnvInputs, Waiting};

/// The ConfigMaps and Secrets `c`'s environment refers to.
fn env_sources(c: &Container) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut maps = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    for e in c.env.iter().flatten() {
        if let Some(v) = &e.value_from {
            if let Some(r) = &v.config_map_key_ref {
                maps.insert(r.name.clone());
            }
            if let Some(r) = &v.secret_key_ref {
                secrets.insert(r.name.clone());
            }
        }
    }
    for e in c.env_from.iter().flatten() {
        if let Some(r) = &e.config_map_ref {
            maps.insert(r.name.clone());
        }
        if let Some(r) = &e.secret_ref {
            secrets.insert(r.name.clone());
        }
    }
    (maps, secrets)
}

impl Executor {
    pub(super) async fn env_objects(
        &self,
        pod: &Pod,
        c: &Container,
    ) -> Result<(BTreeMap<String, ConfigMap>, BTreeMap<String, Secret>), super::api::Error> {
        let ns = Self::namespace(pod);
        let (map_names, secret_names) = env_sources(c);
        let mut maps = BTreeMap::new();
        for name in map_names {
            if let Some(m) = self.api.config_map(ns, &name).await? {
                maps.insert(name, m);
            }
        }
        let mut secrets = BTreeMap::new();
        for name in secret_names {
            if let Some(s) = self.api.secret(ns, &name).await? {
                secrets.insert(name, s);
            }
        }
        Ok((maps, secrets))
    }

    /// Creates and starts `c` in `sandbox`; the waiting reason on failure.
    pub(super) async fn start_container(
        &self,
        pod: &Pod,
        c: &Container,
        attempt: u32,
        sandbox: &Sandbox,
    ) -> Result<(), Waiting> {
        let config_error = |m: String| Waiting::new("CreateContainerConfigError", m);
        let (maps, secrets) = self
            .env_objects(pod, c)
            .await
            .map_err(|e| config_error(e.to_string()))?;
        let services = (self.services)();
        let host_ips: Vec<String> = self.node.host_ips.iter().map(|i| i.to_string()).collect();
        let inputs = EnvInputs {
            config_maps: &maps,
            secrets: &secrets,
            services: &services,
            host_ips: &host_ips,
            pod_ips: &sandbox.ips,
            allocatable: &self.node.allocatable,
        };
        let env = container_env(pod, c, inputs).map_err(|e| e.waiting())?;
        let spec = container_spec(pod, c, attempt, &env, self.node.memory_capacity)
            .map_err(|e| config_error(e.to_string()))?;
        let mounts: Vec<Mount> = volumes::mounts(&self.node.pods_dir, pod, c)
            .map_err(|e| config_error(e.to_string()))?;
        let config = container_config(&spec, &mounts, &sandbox.config);
        let log_dir = PathBuf::from(&sandbox.config.log_directory).join(&c.name);
        if let Err(e) = std::fs::create_dir_all(&log_dir) {
            tracing::warn!(dir = %log_dir.display(), "creating the log directory: {e}");
        }
        let id = self
            .runtime
            .create_container(sandbox.id.clone(), config, sandbox.config.clone())
            .await
            .map_err(|e| Waiting::new("CreateContainerError", e.to_string()))?;
        self.runtime
            .start_container(id)
            .await
            .map_err(|e| Waiting::new("RunContainerError", e.to_string()))
    }

    pub(super) async fn set_up_volumes(
        &self,
        pod: &Pod,
        sandbox: Option<&Sandbox>,
    ) -> Result<(), volumes::VolumeError> {
        let host_ips: Vec<String> = self.node.host_ips.iter().map(|i| i.to_string()).collect();
        let facts = volumes::NodeFacts {
            host_ips: &host_ips,
            pod_ips: sandbox.map(|s| s.ips.as_slice()).unwrap_or_default(),
            allocatable: &self.node.allocatable,
        };
        volumes::set_up(&*self.api, &self.node.pods_dir, pod, facts).await
    }
}
