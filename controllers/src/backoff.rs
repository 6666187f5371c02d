//! The error policy every controller uses: a failed reconcile is retried per object after an
//! exponential delay (client-go's `ItemExponentialFailureRateLimiter`: 5 ms doubling, capped
//! at 1000 s by default), and a successful one forgets the object's failures.
//!
//! Each controller wraps its reconcile and gets its error policy from one [`ErrorBackoff`]:
//! `backoff.drive(controller, reconcile, ctx, stop)` runs a controller with it until `stop`.

use std::collections::HashMap;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::runtime::controller::{Action, Controller};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// The first retry delay (client-go's).
pub const BASE: Duration = Duration::from_millis(5);
/// The longest retry delay (client-go's default controller rate limiter).
pub const MAX: Duration = Duration::from_secs(1000);

/// Per-object failure counts of one controller.
#[derive(Debug)]
pub struct ErrorBackoff {
    controller: &'static str,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

/// The retry delay after `failures` failures in a row (1-based).
pub fn delay(failures: u32, max: Duration) -> Duration {
    let exp = failures.saturating_sub(1).min(40);
    BASE.saturating_mul(1u32 << exp.min(31)).min(max)
}

fn key<K: Resource>(obj: &K) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

impl ErrorBackoff {
    /// The backoff of `controller`, with the default cap.
    pub fn new(controller: &'static str) -> Arc<ErrorBackoff> {
        ErrorBackoff::with_max(controller, MAX)
    }

    /// The backoff of `controller` capped at `max` (upstream's namespace controller: 60 s).
    pub fn with_max(controller: &'static str, max: Duration) -> Arc<ErrorBackoff> {
        Arc::new(ErrorBackoff {
            controller,
            max,
            failures: Mutex::default(),
        })
    }

    /// Records a failure of `key`; the delay before its retry.
    pub fn failed(&self, key: &str) -> Duration {
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = f.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        delay(*n, self.max)
    }

    /// Forgets `key`'s failures.
    pub fn succeeded(&self, key: &str) {
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        f.remove(key);
    }

    /// How many objects are failing now.
    #[cfg(test)]
    pub fn failing(&self) -> usize {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// `reconcile`, forgetting an object's failures when it succeeds.
    pub fn reconcile<K, C, E, F, Fut>(
        self: &Arc<Self>,
        reconcile: F,
    ) -> impl FnMut(Arc<K>, Arc<C>) -> BoxFuture<'static, Result<Action, E>>
    where
        K: Resource + Send + Sync + 'static,
        C: Send + Sync + 'static,
        E: Send + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let backoff = self.clone();
        move |obj, ctx| {
            let key = key(obj.as_ref());
            let run = reconcile(obj, ctx);
            let backoff = backoff.clone();
            async move {
                let result = run.await;
                if result.is_ok() {
                    backoff.succeeded(&key);
                }
                result
            }
            .boxed()
        }
    }

    /// Runs `controller` until `stop` (letting running reconciles finish), each reconcile
    /// wrapped by [`ErrorBackoff::reconcile`] and failures retried by [`ErrorBackoff::policy`].
    pub async fn drive<K, C, E, F, Fut>(
        self: &Arc<Self>,
        controller: Controller<K>,
        reconcile: F,
        ctx: Arc<C>,
        stop: CancellationToken,
    ) where
        K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Debug + Unpin,
        C: Send + Sync + 'static,
        E: std::error::Error + Send + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        controller
            .graceful_shutdown_on(stop.cancelled_owned())
            .run(self.reconcile(reconcile), self.policy(), ctx)
            .for_each(|_| futures::future::ready(()))
            .await;
    }

    /// The error policy: log, then retry the object after its backoff.
    pub fn policy<K, C, E>(self: &Arc<Self>) -> impl Fn(Arc<K>, &E, Arc<C>) -> Action
    where
        K: Resource,
        E: Display,
    {
        let backoff = self.clone();
        move |obj, err, _| {
            let key = key(obj.as_ref());
            let retry = backoff.failed(&key);
            tracing::debug!(controller = backoff.controller, object = %key, error = %err, ?retry, "reconcile failed; retrying");
            Action::requeue(retry)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(ns: &str, name: &str) -> Arc<ConfigMap> {
        let mut c = ConfigMap::default();
        c.metadata.namespace = Some(ns.into());
        c.metadata.name = Some(name.into());
        Arc::new(c)
    }

    #[test]
    fn delays_double_per_object_and_reset_on_success() {
        let b = ErrorBackoff::new("test");
        let policy = b.policy::<ConfigMap, (), String>();
        let err = "boom".to_string();
        let a = cm("x", "a");
        assert_eq!(policy(a.clone(), &err, Arc::new(())), Action::requeue(BASE));
        assert_eq!(
            policy(a.clone(), &err, Arc::new(())),
            Action::requeue(BASE * 2)
        );
        assert_eq!(
            policy(cm("y", "a"), &err, Arc::new(())),
            Action::requeue(BASE)
        );
        assert_eq!(b.failing(), 2);
        b.succeeded("x/a");
        assert_eq!(policy(a, &err, Arc::new(())), Action::requeue(BASE));
    }

    #[test]
    fn delays_are_capped() {
        assert_eq!(delay(1, MAX), BASE);
        assert_eq!(delay(3, MAX), BASE * 4);
        assert_eq!(delay(30, MAX), MAX);
        assert_eq!(delay(u32::MAX, MAX), MAX);
        assert_eq!(delay(20, Duration::from_secs(60)), Duration::from_secs(60));
    }

    #[tokio::test]
    async fn a_success_forgets_the_failures() {
        let b = ErrorBackoff::new("test");
        b.failed("x/a");
        let mut reconcile = b.reconcile(|_: Arc<ConfigMap>, _: Arc<()>| async {
            Ok::<_, String>(Action::await_change())
        });
        reconcile(cm("x", "a"), Arc::new(())).await.unwrap();
        assert_eq!(b.failing(), 0);
    }

    #[tokio::test]
    async fn drive_reconciles_until_stopped() {
        let (reader, mut writer) = kube::runtime::reflector::store::<ConfigMap>();
        let obj = cm("x", "a");
        writer.apply_watcher_event(&kube::runtime::watcher::Event::InitDone);
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply((*obj).clone()));
        let (seen, mut got) = tokio::sync::mpsc::unbounded_channel();
        let triggers = futures::stream::iter([obj]).chain(futures::stream::pending());
        let controller = Controller::for_shared_stream(triggers, reader);
        let stop = CancellationToken::new();
        let b = ErrorBackoff::new("test");
        let reconcile =
            |o: Arc<ConfigMap>, seen: Arc<tokio::sync::mpsc::UnboundedSender<String>>| {
                let _ = seen.send(o.name_any());
                async { Ok::<_, std::io::Error>(Action::await_change()) }
            };
        let run = b.drive(controller, reconcile, Arc::new(seen), stop.clone());
        let check = async {
            assert_eq!(got.recv().await.as_deref(), Some("a"));
            stop.cancel();
        };
        let both = async { tokio::join!(run, check) };
        tokio::time::timeout(Duration::from_secs(10), both)
            .await
            .expect("drive returns once stopped");
    }
}
