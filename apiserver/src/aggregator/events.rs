//! What wakes the availability controller before its period (kube-aggregator's
//! `AvailableConditionController` handlers): any APIService change, and changes of the
//! Services and Endpoints the service-backed APIServices name.
//!
//! # Guarantees
//! - Every relevant change after the watches started wakes the controller at least once;
//!   changes during a pass wake it once more after it (they coalesce).
//! - The watches restart with backoff after errors; the task ends only when aborted.
//! - Services come from the process's shared informer (the controllers cache them anyway);
//!   APIServices and Endpoints, which nothing else in the process caches, from watches of
//!   their own.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use tokio::sync::Notify;

use super::{Aggregator, Backends};
use k3rs_apimachinery::informers::SharedInformerFactory;

/// A change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    ApiService,
    /// A Service or Endpoints object (they share namespace and name).
    ServiceOrEndpoints {
        namespace: String,
        name: String,
    },
}

/// Whether `change` can change an APIService's availability.
pub fn wakes(change: &Change, backends: &Backends) -> bool {
    match change {
        Change::ApiService => true,
        Change::ServiceOrEndpoints { namespace, name } => backends
            .values()
            .any(|b| b.service.namespace == *namespace && b.service.name == *name),
    }
}

/// The changes of kind `K`'s objects, as [`Change`]s made by `of`.
fn changes<K>(
    client: &kube::Client,
    of: fn(&K) -> Change,
) -> futures::stream::BoxStream<'static, Change>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .filter_map(move |e| async move {
            match e {
                Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => Some(of(&o)),
                Ok(watcher::Event::InitApply(o)) => Some(of(&o)),
                Ok(_) => None,
                Err(e) => {
                    tracing::debug!(error = %e, "aggregation availability watch");
                    None
                }
            }
        })
        .boxed()
}

fn object_change<K: Resource>(o: &K) -> Change {
    Change::ServiceOrEndpoints {
        namespace: o.meta().namespace.clone().unwrap_or_default(),
        name: o.meta().name.clone().unwrap_or_default(),
    }
}

/// Watches APIServices and Endpoints, follows the Services of `informers`, and wakes `wake`
/// for each change [`wakes`] says matters (given `agg`'s backends now).
pub async fn watch(
    client: kube::Client,
    informers: SharedInformerFactory,
    agg: Arc<Aggregator>,
    wake: Arc<Notify>,
) {
    let services = informers
        .informer::<Service>()
        .touched()
        .map(|s| object_change(s.as_ref()))
        .boxed();
    let all = futures::stream::select_all([
        changes::<APIService>(&client, |_| Change::ApiService),
        services,
        changes::<Endpoints>(&client, object_change),
    ]);
    futures::pin_mut!(all);
    while let Some(change) = all.next().await {
        if wakes(&change, &agg.backends()) {
            wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregator::backend::test_backend;

    #[test]
    fn only_the_named_services_and_endpoints_wake() {
        let backends = Backends::from([(
            ("wardle.example.com".to_string(), "v1alpha1".to_string()),
            test_backend("wardle.example.com", "v1alpha1", (1000, 15), false),
        )]);
        let obj = |namespace: &str, name: &str| Change::ServiceOrEndpoints {
            namespace: namespace.into(),
            name: name.into(),
        };
        assert!(wakes(&Change::ApiService, &Backends::new()));
        assert!(wakes(&obj("wardle", "api"), &backends));
        assert!(!wakes(&obj("default", "api"), &backends));
        assert!(!wakes(&obj("wardle", "other"), &backends));
        assert!(!wakes(&obj("wardle", "api"), &Backends::new()));
    }
}
