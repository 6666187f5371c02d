//! The service-account controller: every active namespace has a `default` ServiceAccount
//! (re-created if deleted).

use crate::backoff::ErrorBackoff;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use tokio_util::sync::CancellationToken;

use super::{namespace_gone, status_code, Error, SharedInformerFactory};
use k3rs_apimachinery::serviceaccount::DEFAULT_SERVICE_ACCOUNT;

/// The controller's identity (`system:serviceaccount:kube-system:service-account-controller`).
pub const NAME: &str = "service-account-controller";

/// Whether accounts are made in `ns`: only while it is active.
pub fn wants_accounts(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_none()
        && ns.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Terminating")
}

/// The account the controller creates.
pub fn default_account() -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some(DEFAULT_SERVICE_ACCOUNT.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    }
}

struct Ctx {
    client: kube::Client,
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if !wants_accounts(&ns) {
        return Ok(Action::await_change());
    }
    // Upstream checks its informer's cache first; the controller's role allows only
    // `create`, so an existing account is recognised by the AlreadyExists answer.
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &ns.name_any());
    match api.create(&PostParams::default(), &default_account()).await {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if status_code(&e) == Some(409) || namespace_gone(&e) => Ok(Action::await_change()),
        Err(source) => Err(Error::Api {
            op: "creating the default service account",
            source,
        }),
    }
}

/// The namespace whose `default` account `sa` is (`None` for any other account): a change
/// of it (a deletion above all) sends that namespace back to the controller.
pub fn namespace_of_default(sa: &ServiceAccount) -> Option<ObjectRef<Namespace>> {
    if sa.metadata.name.as_deref() != Some(DEFAULT_SERVICE_ACCOUNT) {
        return None;
    }
    sa.namespace().map(|ns| ObjectRef::<Namespace>::new(&ns))
}

/// Runs until `stop`.
pub async fn run(client: kube::Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("service_account");
    // The process's ServiceAccount informer (the API server's admission reads it too), not a
    // watch of its own: of its changes only the `default` accounts' matter.
    let accounts = informers.informer::<ServiceAccount>().touched();
    backoff
        .drive(
            super::shared_controller::<Namespace>(&informers)
                .await
                .watches_shared_stream(accounts, |sa| namespace_of_default(&sa)),
            reconcile,
            Arc::new(Ctx { client }),
            stop,
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn only_active_namespaces_get_accounts() {
        let mut ns = Namespace::default();
        assert!(wants_accounts(&ns));
        ns.status = Some(NamespaceStatus {
            phase: Some("Terminating".into()),
            ..NamespaceStatus::default()
        });
        assert!(!wants_accounts(&ns));
        let mut ns = Namespace::default();
        ns.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert!(!wants_accounts(&ns));
        assert_eq!(default_account().metadata.name.as_deref(), Some("default"));
    }

    #[test]
    fn only_default_accounts_send_their_namespace_back() {
        let mut sa = default_account();
        assert_eq!(namespace_of_default(&sa), None, "no namespace");
        sa.metadata.namespace = Some("n".into());
        assert_eq!(
            namespace_of_default(&sa),
            Some(ObjectRef::<Namespace>::new("n"))
        );
        sa.metadata.name = Some("builder".into());
        assert_eq!(namespace_of_default(&sa), None);
    }
}
