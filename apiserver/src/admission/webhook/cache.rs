//! The webhook configurations the plugins call, kept in memory by two informers and parsed
//! once per stored version (as the policy cache is).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::runtime::reflector::{self, Store};
use tokio_util::sync::CancellationToken;

use super::model::{parse, Webhook};
use crate::admission::validating_policy::cache::inform;

type Parsed = Mutex<HashMap<String, (String, Arc<Vec<Webhook>>)>>;

/// Read side of the informers.
#[derive(Clone)]
pub struct WebhookCache {
    validating: Store<ValidatingWebhookConfiguration>,
    mutating: Store<MutatingWebhookConfiguration>,
    parsed: Arc<Parsed>,
    /// The webhooks' pooled clients, one per endpoint.
    clients: super::call::Clients,
}

impl std::fmt::Debug for WebhookCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookCache")
            .field("validating", &self.validating.len())
            .field("mutating", &self.mutating.len())
            .finish()
    }
}

/// Write side: consumed by [`WebhookFeed::run`].
pub struct WebhookFeed {
    validating: reflector::store::Writer<ValidatingWebhookConfiguration>,
    mutating: reflector::store::Writer<MutatingWebhookConfiguration>,
}

impl std::fmt::Debug for WebhookFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookFeed")
    }
}

/// An empty cache and the feed that fills it.
pub fn webhook_cache() -> (WebhookCache, WebhookFeed) {
    let (validating, validating_w) = reflector::store();
    let (mutating, mutating_w) = reflector::store();
    (
        WebhookCache {
            validating,
            mutating,
            parsed: Default::default(),
            clients: Default::default(),
        },
        WebhookFeed {
            validating: validating_w,
            mutating: mutating_w,
        },
    )
}

impl WebhookFeed {
    /// Lists and watches both kinds through `client` until `stop`.
    pub async fn run(self, client: kube::Client, stop: CancellationToken) {
        let both = futures::future::join(
            inform(client.clone(), self.validating),
            inform(client, self.mutating),
        );
        tokio::select! {
            _ = both => {}
            _ = stop.cancelled() => {}
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
        futures::FutureExt::now_or_never(self.validating.wait_until_ready()).is_some()
            && futures::FutureExt::now_or_never(self.mutating.wait_until_ready()).is_some()
    }

    /// Waits until both kinds have been listed once.
    pub async fn wait_until_ready(&self) {
        let _ = self.validating.wait_until_ready().await;
        let _ = self.mutating.wait_until_ready().await;
    }

    /// The validating webhooks, configuration by configuration.
    pub fn validating(&self) -> Vec<(String, Arc<Vec<Webhook>>)> {
        webhooks_of(&self.parsed, "validating", self.validating.state())
    }

    /// The pooled clients the webhooks are called with.
    pub fn clients(&self) -> &super::call::Clients {
        &self.clients
    }

    /// The mutating webhooks, configuration by configuration.
    pub fn mutating(&self) -> Vec<(String, Arc<Vec<Webhook>>)> {
        webhooks_of(&self.parsed, "mutating", self.mutating.state())
    }
}
