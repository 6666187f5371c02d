//! The TLS Secrets of the served Ingresses, read one at a time by name: a node may not list
//! or watch Secrets, only get those the Node authorizer relates to it (an Ingress of the
//! built-in class naming it in `spec.tls[].secretName` relates it to every node).
//!
//! Guarantees:
//! - Only the Secrets the served Ingresses name are read ([`wanted`]); one no longer named is
//!   forgotten at the next sync.
//! - A newly named Secret is read at the next sync; a known one is read again once it is
//!   older than the cache's `max_age` (the controller's syncs come at least every
//!   `sync_period`, so a rotated certificate is served within about `sync_period`).
//! - A read that fails (other than 404, which records the Secret as missing) keeps the
//!   previous answer and is retried at the next sync; a Secret never read successfully is
//!   [`Reads::unread`], which the table treats as not yet known (default certificate, no
//!   warning).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k3rs_apimachinery::ingress_class;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::{Api, Client};
use tokio::time::Instant;

/// A Secret's `(namespace, name)`.
pub type SecretKey = (String, String);

/// The TLS Secrets the Ingresses the built-in controller serves name.
pub fn wanted(ingresses: &[Ingress], classes: &[IngressClass]) -> BTreeSet<SecretKey> {
    ingresses
        .iter()
        .filter(|i| ingress_class::is_ours(i, classes))
        .flat_map(|i| {
            let ns = i.metadata.namespace.clone().unwrap_or_default();
            i.spec
                .iter()
                .flat_map(|s| s.tls.iter().flatten())
                .filter_map(|t| t.secret_name.clone())
                .filter(|n| !n.is_empty())
                .map(move |n| (ns.clone(), n))
        })
        .collect()
}

/// One Secret's last successful read: when, and what (`None`: it does not exist).
#[derive(Debug, Clone)]
struct Read {
    at: Instant,
    secret: Option<Secret>,
}

/// The Secrets read so far.
#[derive(Debug, Clone)]
pub struct Reads {
    max_age: Duration,
    read: BTreeMap<SecretKey, Read>,
    /// Wanted and never read successfully.
    unread: BTreeSet<SecretKey>,
}

impl Reads {
    /// No Secret read yet; each is read again once older than `max_age`.
    pub fn new(max_age: Duration) -> Reads {
        Reads {
            max_age,
            read: BTreeMap::new(),
            unread: BTreeSet::new(),
        }
    }

    /// Forgets what is not `wanted`; returns the wanted Secrets to read at `now` (never read,
    /// or read `max_age` ago or earlier).
    pub fn due(&mut self, wanted: &BTreeSet<SecretKey>, now: Instant) -> Vec<SecretKey> {
        self.read.retain(|k, _| wanted.contains(k));
        self.unread.retain(|k| wanted.contains(k));
        wanted
            .iter()
            .filter(|k| {
                self.read
                    .get(*k)
                    .is_none_or(|r| now.duration_since(r.at) >= self.max_age)
            })
            .cloned()
            .collect()
    }

    /// Records the outcome of reading `key` at `at`: `Ok(None)` is a 404; an error keeps the
    /// previous answer (or leaves the Secret unread).
    pub fn record<E>(&mut self, key: SecretKey, at: Instant, outcome: Result<Option<Secret>, E>) {
        match outcome {
            Ok(secret) => {
                self.unread.remove(&key);
                self.read.insert(key, Read { at, secret });
            }
            Err(_) => {
                if !self.read.contains_key(&key) {
                    self.unread.insert(key);
                }
            }
        }
    }

    /// The Secrets that exist, as last read.
    pub fn secrets(&self) -> Vec<Secret> {
        self.read
            .values()
            .filter_map(|r| r.secret.clone())
            .collect()
    }

    /// The wanted Secrets no read has answered yet (a failed read, e.g. before the API
    /// server's authorizer knew of the Ingress).
    pub fn unread(&self) -> &BTreeSet<SecretKey> {
        &self.unread
    }
}

/// Reads the `due` Secrets with `client` into `reads`; `false` if a read failed (it is
/// retried at the next sync, which the caller should bring forward).
pub async fn read(client: &Client, reads: &mut Reads, due: Vec<SecretKey>) -> bool {
    let gets = due.into_iter().map(|(ns, name)| async move {
        let outcome = Api::<Secret>::namespaced(client.clone(), &ns)
            .get_opt(&name)
            .await;
        ((ns, name), outcome)
    });
    let mut ok = true;
    for ((ns, name), outcome) in futures::future::join_all(gets).await {
        if let Err(e) = &outcome {
            tracing::warn!(namespace = %ns, secret = %name, error = %e, "ingress: reading a TLS secret failed; retrying");
            ok = false;
        }
        reads.record((ns, name), Instant::now(), outcome);
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(ns: &str, name: &str) -> SecretKey {
        (ns.into(), name.into())
    }

    fn secret(name: &str, rv: &str) -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "web",
            "resourceVersion": rv}}))
        .unwrap()
    }

    #[test]
    fn only_the_tls_secrets_of_served_ingresses_are_wanted() {
        let ingresses: Vec<Ingress> = serde_json::from_value(json!([
            {"metadata": {"name": "a", "namespace": "web"},
             "spec": {"tls": [{"secretName": "a-tls"}, {"hosts": ["x"]}, {"secretName": ""}]}},
            {"metadata": {"name": "b", "namespace": "shop"},
             "spec": {"ingressClassName": "k3rs", "tls": [{"secretName": "b-tls"}]}},
            {"metadata": {"name": "c", "namespace": "web"},
             "spec": {"ingressClassName": "nginx", "tls": [{"secretName": "c-tls"}]}},
        ]))
        .unwrap();
        let classes = [ingress_class::ingress_class()];
        assert_eq!(
            wanted(&ingresses, &classes),
            [key("shop", "b-tls"), key("web", "a-tls")].into()
        );
        assert!(wanted(&ingresses, &[]).is_empty(), "no class: none served");
    }

    #[test]
    fn secrets_are_read_when_new_and_again_when_old() {
        let t0 = Instant::now();
        let max_age = Duration::from_secs(15);
        let mut reads = Reads::new(max_age);
        let both: BTreeSet<_> = [key("web", "a"), key("web", "b")].into();
        assert_eq!(reads.due(&both, t0), [key("web", "a"), key("web", "b")]);
        reads.record(key("web", "a"), t0, Ok::<_, ()>(Some(secret("a", "1"))));
        reads.record(key("web", "b"), t0, Ok::<_, ()>(None));
        assert!(reads.due(&both, t0 + Duration::from_secs(14)).is_empty());
        assert_eq!(reads.secrets().len(), 1, "a 404 is remembered as missing");
        assert!(reads.unread().is_empty());

        let later = t0 + max_age;
        assert_eq!(reads.due(&both, later), [key("web", "a"), key("web", "b")]);
        reads.record(key("web", "a"), later, Ok::<_, ()>(Some(secret("a", "2"))));
        let rv = |r: &Reads| r.secrets()[0].metadata.resource_version.clone();
        assert_eq!(rv(&reads).as_deref(), Some("2"), "a rotation is picked up");

        // A failed read keeps the last answer and is retried next time.
        reads.record(key("web", "a"), later, Err(()));
        assert_eq!(rv(&reads).as_deref(), Some("2"));
        assert!(reads.unread().is_empty());

        // No longer named: forgotten.
        let only_b: BTreeSet<_> = [key("web", "b")].into();
        reads.due(&only_b, later);
        assert!(reads.secrets().is_empty());
    }

    #[test]
    fn a_secret_never_read_is_unread_until_an_answer() {
        let t0 = Instant::now();
        let mut reads = Reads::new(Duration::from_secs(15));
        let a: BTreeSet<_> = [key("web", "a")].into();
        assert_eq!(reads.due(&a, t0), [key("web", "a")]);
        reads.record(key("web", "a"), t0, Err("forbidden"));
        assert_eq!(reads.unread(), &a);
        assert_eq!(reads.due(&a, t0), [key("web", "a")], "retried at once");
        reads.record(key("web", "a"), t0, Ok::<_, ()>(None));
        assert!(reads.unread().is_empty());
        reads.record(key("web", "a"), t0, Err("forbidden"));
        reads.due(&BTreeSet::new(), t0);
        assert!(reads.unread().is_empty(), "forgotten when no longer wanted");
    }
}
