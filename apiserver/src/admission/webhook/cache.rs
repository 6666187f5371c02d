//! The webhook configurations the plugins call, read from two shared informers and parsed
//! once per stored version (as the policy cache is).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k3rs_apimachinery::informers::{Informer, SharedInformerFactory};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};

use super::model::{parse, Webhook};

type Parsed = Mutex<HashMap<String, (String, Arc<Vec<Webhook>>)>>;

/// The plugins' view of the two kinds' shared informers, with the parsed webhooks.
#[derive(Clone)]
pub struct WebhookCache {
    validating: Informer<ValidatingWebhookConfiguration>,
    mutating: Informer<MutatingWebhookConfiguration>,
    parsed: Arc<Parsed>,
    /// The webhooks' pooled clients, one per endpoint.
    clients: super::call::Clients,
}

impl std::fmt::Debug for WebhookCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookCache")
            .field("validating", &self.validating.list().len())
            .field("mutating", &self.mutating.list().len())
            .finish()
    }
}

impl WebhookCache {
    /// The two kinds' informers of `informers` (which watch once it is started).
    pub fn new(informers: &SharedInformerFactory) -> WebhookCache {
        WebhookCache {
            validating: informers.informer(),
            mutating: informers.informer(),
            parsed: Default::default(),
            clients: Default::default(),
        }
    }
}

/// `(configuration name, its webhooks)` of `configs`, parsed once per version.
fn webhooks_of<K>(
    parsed: &Parsed,
    kind: &str,
    configs: Vec<Arc<K>>,
) -> Vec<(String, Arc<Vec<Webhook>>)>
where
    K: kube::Resource + serde::Serialize,
{
    let mut cache = parsed.lock().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<(String, Arc<Vec<Webhook>>)> = configs
        .iter()
        .map(|c| {
            let meta = c.meta();
            let name = meta.name.clone().unwrap_or_default();
            let version = meta.resource_version.clone().unwrap_or_default();
            let key = format!("{kind}/{name}");
            let hooks = match cache.get(&key) {
                Some((v, h)) if *v == version => h.clone(),
                _ => {
                    let h = Arc::new(parse(&serde_json::to_value(c.as_ref()).unwrap_or_default()));
                    cache.insert(key, (version, h.clone()));
                    h
                }
            };
            (name, hooks)
        })
        .collect();
    let live: Vec<String> = out.iter().map(|(n, _)| format!("{kind}/{n}")).collect();
    cache.retain(|k, _| !k.starts_with(&format!("{kind}/")) || live.contains(k));
    // kube-apiserver calls configurations in name order.
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

impl WebhookCache {
    /// Whether both kinds have been listed once.
    pub fn ready(&self) -> bool {
        self.validating.has_synced() && self.mutating.has_synced()
    }

    /// Waits until both kinds have been listed once (any number of requests may wait).
    pub async fn wait_until_ready(&self) {
        self.validating.wait_synced().await;
        self.mutating.wait_synced().await;
    }

    /// The validating webhooks, configuration by configuration.
    pub fn validating(&self) -> Vec<(String, Arc<Vec<Webhook>>)> {
        webhooks_of(&self.parsed, "validating", self.validating.list())
    }

    /// The pooled clients the webhooks are called with.
    pub fn clients(&self) -> &super::call::Clients {
        &self.clients
    }

    /// The mutating webhooks, configuration by configuration.
    pub fn mutating(&self) -> Vec<(String, Arc<Vec<Webhook>>)> {
        webhooks_of(&self.parsed, "mutating", self.mutating.list())
    }
}
