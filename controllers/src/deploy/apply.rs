//! Executes the [`plan`](super::plan) steps against the API: server-side apply as
//! [`FIELD_MANAGER`] with conflicts forced (k3s's deploy controller takes ownership the same
//! way), deletes for pruning, the records, and Events for what happened.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;

use super::manifest::ObjectRef;
use super::plan::Step;
use super::record::{self, Record};
use super::{reason, DEFAULT_NAMESPACE, RECORD_NAMESPACE};
use crate::{EventRecorder, EventType};

/// The field manager of everything applied from the manifests dir.
pub const FIELD_MANAGER: &str = "k3rs-deploy";

/// Applies steps; remembers the failures it reported so each is reported once.
pub struct Applier {
    client: kube::Client,
    events: EventRecorder,
    /// The failure last reported per file.
    reported: HashMap<String, String>,
}

impl Applier {
    pub fn new(client: kube::Client, events: EventRecorder) -> Applier {
        Applier {
            client,
            events,
            reported: HashMap::new(),
        }
    }

    /// Every record in `kube-system`.
    pub async fn records(&self) -> kube::Result<Vec<Record>> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), RECORD_NAMESPACE);
        let list = api
            .list(&ListParams::default().labels(&format!("{}=true", record::LABEL)))
            .await?;
        Ok(list
            .items
            .iter()
            .filter_map(Record::from_config_map)
            .collect())
    }

    /// Executes one step; problems are logged and reported as Events, never returned.
    pub async fn execute(&mut self, step: Step) {
        match step {
            Step::Apply {
                source,
                checksum,
                objects,
                prune,
                recorded,
            } => {
                let mut applied = Vec::new();
                let mut errors = Vec::new();
                for (r, value) in &objects {
                    match self.apply(r, value).await {
                        Ok(()) => applied.push(r.clone()),
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                if !errors.is_empty() {
                    // Keep what was applied before and now; try again on the next pass.
                    let mut all = recorded;
                    all.extend(applied);
                    all.sort();
                    all.dedup();
                    self.save(&source, String::new(), all).await;
                    self.failed(&source, reason::APPLY_FAILED, &errors).await;
                    return;
                }
                let leftovers = self.prune(&prune, &mut errors).await;
                let done = leftovers.is_empty();
                let mut all = applied;
                all.extend(leftovers);
                self.save(&source, if done { checksum } else { String::new() }, all)
                    .await;
                if done {
                    let message = format!("Applied manifest at {source:?}");
                    self.succeeded(&source, reason::APPLIED, &message).await;
                } else {
                    self.failed(&source, reason::DELETE_FAILED, &errors).await;
                }
            }
            Step::Invalid { source, error, .. } => {
                self.failed(&source, reason::APPLY_FAILED, &[error.to_string()])
                    .await;
            }
            Step::Remove { source, prune } => {
                let mut errors = Vec::new();
                let leftovers = self.prune(&prune, &mut errors).await;
                if leftovers.is_empty() {
                    let api: Api<ConfigMap> =
                        Api::namespaced(self.client.clone(), RECORD_NAMESPACE);
                    match api
                        .delete(&record::name(&source), &DeleteParams::default())
                        .await
                    {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => {
                            tracing::warn!(%source, error = %e, "deleting the manifest record")
                        }
                    }
                    let message = format!("Deleted the objects of manifest {source:?}");
                    self.succeeded(&source, reason::DELETED, &message).await;
                } else {
                    self.save(&source, String::new(), leftovers).await;
                    self.failed(&source, reason::DELETE_FAILED, &errors).await;
                }
            }
        }
    }

    /// Deletes `prune` in order; returns what could not be deleted.
    async fn prune(&self, prune: &[ObjectRef], errors: &mut Vec<String>) -> Vec<ObjectRef> {
        let mut leftovers = Vec::new();
        for r in prune {
            if let Err(e) = self.delete(r).await {
                errors.push(e.to_string());
                leftovers.push(r.clone());
            } else {
                tracing::info!(object = %r, "pruned");
            }
        }
        leftovers
    }

    async fn apply(&self, r: &ObjectRef, value: &Value) -> Result<(), ApplyError> {
        let (api, namespace) = self.api(r).await?;
        let mut value = value.clone();
        if let (Some(ns), Some(meta)) = (namespace, value.get_mut("metadata")) {
            meta["namespace"] = Value::String(ns);
        }
        api.patch(
            &r.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&value),
        )
        .await
        .map(|_| ())
        .map_err(|source| ApplyError::Apply {
            object: r.clone(),
            source,
        })
    }

    async fn delete(&self, r: &ObjectRef) -> Result<(), ApplyError> {
        // A kind the API no longer serves has no objects left to delete.
        let Ok((api, _)) = self.api(r).await else {
            return Ok(());
        };
        match api.delete(&r.name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(ApplyError::Delete {
                object: r.clone(),
                source,
            }),
        }
    }

    /// The API of `r`'s kind, and the namespace it goes in when the kind is namespaced.
    async fn api(&self, r: &ObjectRef) -> Result<(Api<DynamicObject>, Option<String>), ApplyError> {
        let (group, version) = match r.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", r.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &r.kind);
        let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|source| ApplyError::Kind {
                object: r.clone(),
                source,
            })?;
        Ok(match caps.scope {
            Scope::Namespaced => {
                let ns = r
                    .namespace
                    .clone()
                    .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
                (
                    Api::namespaced_with(self.client.clone(), &ns, &resource),
                    Some(ns),
                )
            }
            Scope::Cluster => (Api::all_with(self.client.clone(), &resource), None),
        })
    }

    async fn save(&self, source: &str, checksum: String, objects: Vec<ObjectRef>) {
        let rec = Record {
            source: source.to_string(),
            checksum,
            objects,
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), RECORD_NAMESPACE);
        let cm = rec.to_config_map(RECORD_NAMESPACE);
        let mut value = match serde_json::to_value(&cm) {
            Ok(v) => v,
            Err(e) => return tracing::warn!(%source, error = %e, "encoding the manifest record"),
        };
        value["apiVersion"] = "v1".into();
        value["kind"] = "ConfigMap".into();
        if let Err(e) = api
            .patch(
                &record::name(source),
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&value),
            )
            .await
        {
            tracing::warn!(%source, error = %e, "saving the manifest record");
        }
    }

    /// Reports a success (and forgets the file's last failure).
    async fn succeeded(&mut self, source: &str, reason: &str, message: &str) {
        self.reported.remove(source);
        self.report(source, EventType::Normal, reason, message)
            .await;
    }

    /// Logs `errors` and reports them as a Warning Event, unless this very failure was the
    /// last one reported for the file.
    async fn failed(&mut self, source: &str, reason: &str, errors: &[String]) {
        let verb = if reason == reason::DELETE_FAILED {
            "Deleting the objects of"
        } else {
            "Applying"
        };
        let message = format!(
            "{verb} manifest at {source:?} failed: {}",
            errors.join("; ")
        );
        if self.reported.get(source) == Some(&message) {
            tracing::debug!(%source, %message, "manifest still failing");
            return;
        }
        tracing::warn!(%source, %message, "manifest failed");
        self.report(source, EventType::Warning, reason, &message)
            .await;
        self.reported.insert(source.to_string(), message);
    }

    async fn report(&self, source: &str, type_: EventType, reason: &str, message: &str) {
        if type_ == EventType::Normal {
            tracing::info!(%source, reason, "{message}");
        }
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some(RECORD_NAMESPACE.into()),
            name: Some(record::name(source)),
            ..ObjectReference::default()
        };
        self.events.publish(&regarding, type_, reason, message);
    }
}

/// Why one object could not be applied or deleted (an Event's line).
#[derive(Debug, thiserror::Error)]
enum ApplyError {
    /// The server-side apply failed.
    #[error("{object}: {}", crate::api_message(.source))]
    Apply {
        object: ObjectRef,
        #[source]
        source: kube::Error,
    },
    /// The delete failed.
    #[error("deleting {object}: {}", crate::api_message(.source))]
    Delete {
        object: ObjectRef,
        #[source]
        source: kube::Error,
    },
    /// The server does not serve the object's kind.
    #[error("{object}: the server does not serve kind {} in {} ({})", .object.kind, .object.api_version, crate::api_message(.source))]
    Kind {
        object: ObjectRef,
        #[source]
        source: kube::Error,
    },
}
