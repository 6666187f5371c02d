//! The `MutatingAdmissionWebhook` plugin: matching mutating webhooks are called one at a
//! time and their patches applied in turn; see [`reinvocation`](super::super::reinvocation)
//! for the second round.

use futures::future::BoxFuture;

use super::model::Webhook;
use super::{applies, consult, namespace_labels, review, Authz, WebhookCache};
use crate::admission::{Attributes, Mutating};
use crate::registry::Registry;
use k3rs_apimachinery::status::{ApiError, ApiResult};

/// `mutation.webhook.admission.k8s.io/round_<r>_index_<i>`: which webhook was called in
/// which round and whether it changed the object.
fn record_mutation(round: u8, index: usize, configuration: &str, webhook: &str, mutated: bool) {
    let value = serde_json::json!({
        "configuration": configuration, "webhook": webhook, "mutated": mutated,
    });
    crate::audit::annotations::add(
        format!("mutation.webhook.admission.k8s.io/round_{round}_index_{index}"),
        value.to_string(),
    );
}

/// The `MutatingAdmissionWebhook` plugin.
#[derive(Debug, Clone)]
pub struct MutatingWebhooks {
    pub cache: WebhookCache,
    /// Answers match conditions' `authorizer` checks.
    pub authorizer: Option<Authz>,
}

impl Mutating for MutatingWebhooks {
    fn name(&self) -> &'static str {
        "MutatingAdmissionWebhook"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if !applies(&self.cache, a).await? {
                return Ok(());
            }
            let configurations = self.cache.mutating();
            let hooks: Vec<(&str, &Webhook)> = configurations
                .iter()
                .flat_map(|(c, hooks)| hooks.iter().map(move |w| (c.as_str(), w)))
                .collect();
            let labels = namespace_labels(hooks.iter().map(|(_, w)| *w), a, reg).await;
            a.reinvocation.webhooks_start(a.object.as_ref());
            for (index, (configuration, w)) in hooks.into_iter().enumerate() {
                let key = format!("{configuration}/{}", w.name);
                if !a.reinvocation.should_call(&key) {
                    continue;
                }
                let authz = self.authorizer.as_ref();
                let clients = self.cache.clients();
                let Some(v) = consult(clients, w, a, reg, labels.as_ref(), authz).await? else {
                    continue;
                };
                if !v.allowed {
                    return Err(review::denial(&w.name, &v.status));
                }
                let mut changed = false;
                if let (Some(patch), Some(obj)) = (v.patch, a.object.as_mut()) {
                    match k3rs_patch::json_patch::apply(obj, &patch) {
                        Ok(patched) => {
                            changed = patched != *obj;
                            *obj = patched;
                        }
                        Err(e) => {
                            return Err(ApiError::internal(format!(
                            "admission webhook \"{}\" returned a patch that does not apply: {e}",
                            w.name
                        )))
                        }
                    }
                }
                record_mutation(
                    a.reinvocation.round(),
                    index,
                    configuration,
                    &w.name,
                    changed,
                );
                a.reinvocation
                    .webhook_called(&key, changed, w.reinvoke_if_needed);
            }
            a.reinvocation.webhooks_end(a.object.as_ref());
            Ok(())
        })
    }
}
