//! The `ValidatingAdmissionWebhook` plugin: every matching validating webhook is called at
//! once; the first denial or failure, in configuration order, answers the request.

use futures::future::BoxFuture;

use super::model::Webhook;
use super::{applies, consult, namespace_labels, review, Authz, WebhookCache};
use crate::admission::{Attributes, Validating};
use crate::registry::Registry;
use k3rs_apimachinery::status::ApiResult;

/// The `ValidatingAdmissionWebhook` plugin.
#[derive(Debug, Clone)]
pub struct ValidatingWebhooks {
    pub cache: WebhookCache,
    /// Answers match conditions' `authorizer` checks.
    pub authorizer: Option<Authz>,
}

impl Validating for ValidatingWebhooks {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    fn validate<'a>(
        &'a self,
        a: &'a Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if !applies(&self.cache, a).await? {
                return Ok(());
            }
            let configurations = self.cache.validating();
            let hooks: Vec<&Webhook> = configurations
                .iter()
                .flat_map(|(_, hooks)| hooks.iter())
                .collect();
            let labels = namespace_labels(hooks.iter().copied(), a, reg).await;
            // All are called at once, as upstream does; the first failure in order wins.
            let verdicts = futures::future::join_all(hooks.iter().map(|w| {
                let authz = self.authorizer.as_ref();
                consult(self.cache.clients(), w, a, reg, labels.as_ref(), authz)
            }))
            .await;
            for (w, verdict) in hooks.iter().zip(verdicts) {
                if let Some(v) = verdict? {
                    if !v.allowed {
                        return Err(review::denial(&w.name, &v.status));
                    }
                }
            }
            Ok(())
        })
    }
}
