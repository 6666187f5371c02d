//! The tokens controller (kube-controller-manager's `serviceaccount-token`): a Secret of type
//! `kubernetes.io/service-account-token` annotated `kubernetes.io/service-account.name` gets
//! a legacy token of that account in `data.token`, with `ca.crt` and `namespace`, and the
//! account's uid in the `kubernetes.io/service-account.uid` annotation.
//!
//! An in-process controller (not the Secret strategy) as upstream: the fill happens after the
//! create, through the API, as the controller manager, so admission and watchers see an
//! ordinary update.
//!
//! # Guarantees
//! - A Secret is filled at most once (one with a `token` is left alone), only when its
//!   account exists, and only if an existing uid annotation names that account's uid.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::{json, Value};

use super::claims::{legacy_claims, ObjectRef};
use super::SigningKey;

/// The Secret type the controller fills.
pub const SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// Annotation naming the account.
pub const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// Annotation with the account's uid.
pub const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// What to do with one Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Not a token Secret, already filled, or not fillable (the reason).
    Skip(&'static str),
    /// Fill it with a token of this account.
    Fill(ObjectRef),
}

/// Decides on `secret`, given its account as read (`None`: it does not exist).
pub fn plan(secret: &Secret, account: Option<&ServiceAccount>) -> Plan {
    if secret.type_.as_deref() != Some(SECRET_TYPE) {
        return Plan::Skip("not a service-account token secret");
    }
    if secret
        .data
        .as_ref()
        .is_some_and(|d| d.contains_key("token"))
    {
        return Plan::Skip("already has a token");
    }
    if secret.metadata.deletion_timestamp.is_some() {
        return Plan::Skip("being deleted");
    }
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    if annotations
        .get(NAME_ANNOTATION)
        .is_none_or(String::is_empty)
    {
        return Plan::Skip("no service-account name annotation");
    }
    let Some(sa) = account else {
        return Plan::Skip("the service account does not exist");
    };
    let uid = sa.metadata.uid.clone().unwrap_or_default();
    if annotations
        .get(UID_ANNOTATION)
        .is_some_and(|u| !u.is_empty() && *u != uid)
    {
        return Plan::Skip("the uid annotation names another service account");
    }
    Plan::Fill(ObjectRef {
        name: sa.metadata.name.clone().unwrap_or_default(),
        uid,
    })
}

/// The merge patch that fills `secret_name` in `namespace` with `token`.
pub fn fill_patch(namespace: &str, sa: &ObjectRef, token: &str, ca_pem: &str) -> Value {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "metadata": {"annotations": {UID_ANNOTATION: sa.uid}},
        "data": {
            "token": b64(token),
            "ca.crt": b64(ca_pem),
            "namespace": b64(namespace),
        },
    })
}

/// Runs until the stream of Secrets ends (never, in practice; the task is aborted on stop).
pub async fn run(client: kube::Client, key: Arc<SigningKey>, ca_pem: String) {
    let secrets: Api<Secret> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("type={SECRET_TYPE}"));
    let mut stream = watcher(secrets, config)
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(item) = stream.next().await {
        let secret = match item {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "tokens controller: watching secrets");
                continue;
            }
        };
        if let Err(e) = reconcile(&client, &key, &ca_pem, &secret).await {
            tracing::warn!(error = %e, secret = ?secret.metadata.name, "tokens controller");
        }
    }
}

/// Why a token Secret could not be filled (logged; the next change retries).
#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    /// Reading the account or patching the Secret failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// Signing the token failed.
    #[error(transparent)]
    Sign(#[from] super::jwt::JwtError),
}

async fn reconcile(
    client: &kube::Client,
    key: &SigningKey,
    ca_pem: &str,
    secret: &Secret,
) -> Result<(), ReconcileError> {
    let ns = secret.metadata.namespace.clone().unwrap_or_default();
    let name = secret.metadata.name.clone().unwrap_or_default();
    let annotations: BTreeMap<String, String> =
        secret.metadata.annotations.clone().unwrap_or_default();
    let account = match annotations.get(NAME_ANNOTATION) {
        Some(sa) if plan(secret, None) == Plan::Skip("the service account does not exist") => {
            Api::<ServiceAccount>::namespaced(client.clone(), &ns)
                .get_opt(sa)
                .await?
        }
        _ => None,
    };
    let Plan::Fill(sa) = plan(secret, account.as_ref()) else {
        return Ok(());
    };
    let token = key.sign(&legacy_claims(&ns, &sa, &name))?;
    Api::<Secret>::namespaced(client.clone(), &ns)
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(fill_patch(&ns, &sa, &token, ca_pem)),
        )
        .await?;
    tracing::info!(namespace = %ns, secret = %name, account = %sa.name, "filled a service-account token secret");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn secret(annotations: &[(&str, &str)], data: bool) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("t".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            type_: Some(SECRET_TYPE.into()),
            data: data
                .then(|| [("token".to_string(), k8s_openapi::ByteString(b"x".to_vec()))].into()),
            ..Default::default()
        }
    }

    fn sa(uid: &str) -> ServiceAccount {
        ServiceAccount {
            metadata: ObjectMeta {
                name: Some("builder".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn plans() {
        let named = secret(&[(NAME_ANNOTATION, "builder")], false);
        assert_eq!(
            plan(&named, Some(&sa("u1"))),
            Plan::Fill(ObjectRef {
                name: "builder".into(),
                uid: "u1".into()
            })
        );
        assert_eq!(
            plan(&named, None),
            Plan::Skip("the service account does not exist")
        );
        let filled = secret(&[(NAME_ANNOTATION, "builder")], true);
        assert_eq!(
            plan(&filled, Some(&sa("u1"))),
            Plan::Skip("already has a token")
        );
        let other_uid = secret(
            &[(NAME_ANNOTATION, "builder"), (UID_ANNOTATION, "u0")],
            false,
        );
        assert_eq!(
            plan(&other_uid, Some(&sa("u1"))),
            Plan::Skip("the uid annotation names another service account")
        );
        let mut opaque = named.clone();
        opaque.type_ = Some("Opaque".into());
        assert_eq!(
            plan(&opaque, Some(&sa("u1"))),
            Plan::Skip("not a service-account token secret")
        );
    }

    #[test]
    fn the_patch_fills_token_ca_and_namespace() {
        let p = fill_patch(
            "ns",
            &ObjectRef {
                name: "b".into(),
                uid: "u1".into(),
            },
            "tok",
            "CA",
        );
        assert_eq!(
            p,
            json!({"metadata": {"annotations": {UID_ANNOTATION: "u1"}},
                "data": {"token": "dG9r", "ca.crt": "Q0E=", "namespace": "bnM="}})
        );
    }
}
