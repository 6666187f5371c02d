//! ServiceAccount admission: a pod runs as a service account that exists (`default` unless
//! it names one), and — unless the pod or its account opts out with
//! `automountServiceAccountToken: false` — gets the `kube-api-access-<random>` projected
//! volume (bound token, cluster CA, namespace) mounted at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in every container and init container.
//! Mirror pods (static pods) may not reference service accounts, secrets or tokens.
//! Accounts are read from the API server's cache ([`super::lister`]); one the cache lacks is
//! looked up in the store, as upstream does.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::lister::{to_value, Lister};
use super::{forbidden, Attributes, Mutating, Operation, Validating};
use crate::registry::Registry;
use crate::registry::Target;
use crate::resources::strategy;
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::meta;
use k3rs_apimachinery::status::ApiResult;
use kube::runtime::reflector::ObjectRef;

pub use k3rs_apimachinery::serviceaccount::{DEFAULT_SERVICE_ACCOUNT, ROOT_CA_CONFIGMAP};
/// Where the token, `ca.crt` and `namespace` appear in containers.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Prefix of the projected volume's generated name.
pub const VOLUME_PREFIX: &str = "kube-api-access-";
/// The projected token's lifetime: an hour plus 7 s, so kubelets refresh before expiry and
/// kube-apiserver can tell these tokens from explicitly requested ones.
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// Annotation that marks a mirror pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Lookups of the `default` account before giving up (it is created by a controller just
/// after its namespace); other accounts are looked up once.
const DEFAULT_ACCOUNT_ATTEMPTS: usize = 10;

/// The plugin.
#[derive(Debug, Clone, Default)]
pub struct ServiceAccount {
    /// The accounts it reads first.
    pub accounts: Lister<k8s_openapi::api::core::v1::ServiceAccount>,
}

/// Only pod creates (and ephemeral container updates, which add nothing here) concern it.
fn applies(a: &Attributes) -> bool {
    a.operation == Operation::Create && a.is("", "Pod") && a.object.is_some()
}

pub fn is_mirror(pod: &Value) -> bool {
    pod["metadata"]["annotations"]
        .get(MIRROR_ANNOTATION)
        .is_some()
}

/// `spec.serviceAccountName`, or "".
pub fn account_name(pod: &Value) -> &str {
    pod["spec"]["serviceAccountName"].as_str().unwrap_or("")
}

/// The pod's choice wins, then the account's; the default is to mount.
pub fn should_automount(sa: &Value, pod: &Value) -> bool {
    pod["spec"]["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| sa["automountServiceAccountToken"].as_bool())
        .unwrap_or(true)
}

/// The projected volume source, as kube-apiserver shapes it (defaultMode 0644 explicit).
pub fn token_volume_source() -> Value {
    json!({
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
            {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
    })
}

/// Mounts the token volume in every container and init container that has nothing at
/// [`TOKEN_MOUNT_PATH`] yet, adding the volume (named `generated` unless the pod already has a
/// `kube-api-access-*` volume) when some container mounts it.
pub fn mount_token(pod: &mut Value, generated: &str) {
    let existing = pod["spec"]["volumes"].as_array().and_then(|vs| {
        vs.iter()
            .filter_map(|v| v["name"].as_str())
            .find(|n| n.starts_with(VOLUME_PREFIX))
            .map(str::to_string)
    });
    let name = existing.clone().unwrap_or_else(|| generated.to_string());
    let mount = json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut needed = false;
    for list in ["initContainers", "containers"] {
        let Some(cs) = pod["spec"].get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs {
            let has = c["volumeMounts"]
                .as_array()
                .is_some_and(|ms| ms.iter().any(|m| m["mountPath"] == TOKEN_MOUNT_PATH));
            if has {
                continue;
            }
            match c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                Some(ms) => ms.push(mount.clone()),
                None => c["volumeMounts"] = json!([mount.clone()]),
            }
            needed = true;
        }
    }
    if existing.is_none() && needed {
        let vol = json!({"name": name, "projected": token_volume_source()});
        match pod["spec"].get_mut("volumes").and_then(Value::as_array_mut) {
            Some(vs) => vs.push(vol),
            None => pod["spec"]["volumes"] = json!([vol]),
        }
    }
}

/// Why a mirror pod is refused, if it is.
pub fn mirror_refusal(pod: &Value) -> Option<&'static str> {
    if !account_name(pod).is_empty() {
        return Some("a mirror pod may not reference service accounts");
    }
    if references_secrets(pod) {
        return Some("a mirror pod may not reference secrets");
    }
    let projects_token = pod["spec"]["volumes"].as_array().is_some_and(|vs| {
        vs.iter().any(|v| {
            v["projected"]["sources"]
                .as_array()
                .is_some_and(|ss| ss.iter().any(|s| s.get("serviceAccountToken").is_some()))
        })
    });
    projects_token.then_some("a mirror pod may not use ServiceAccountToken volume projections")
}

/// Whether the pod names a Secret anywhere (`VisitPodSecretNames`, the common places).
fn references_secrets(pod: &Value) -> bool {
    let spec = &pod["spec"];
    if spec["imagePullSecrets"]
        .as_array()
        .is_some_and(|s| !s.is_empty())
    {
        return true;
    }
    let volume_secret = spec["volumes"].as_array().is_some_and(|vs| {
        vs.iter().any(|v| {
            v.get("secret").is_some()
                || v["projected"]["sources"]
                    .as_array()
                    .is_some_and(|ss| ss.iter().any(|s| s.get("secret").is_some()))
        })
    });
    let env_secret = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|l| spec[*l].as_array())
        .flatten()
        .any(|c| {
            c["env"].as_array().is_some_and(|es| {
                es.iter()
                    .any(|e| e["valueFrom"].get("secretKeyRef").is_some())
            }) || c["envFrom"]
                .as_array()
                .is_some_and(|es| es.iter().any(|e| e.get("secretRef").is_some()))
        });
    volume_secret || env_secret
}

/// The account, waiting briefly for `default` (its controller creates it right after the
/// namespace); `Err` is the plugin's 403.
async fn lookup(
    cache: &Lister<k8s_openapi::api::core::v1::ServiceAccount>,
    reg: &Registry,
    a: &Attributes,
    name: &str,
) -> ApiResult<Value> {
    let cached = cache
        .cache(&a.namespace)
        .and_then(|c| c.get(&ObjectRef::new(name).within(&a.namespace)));
    if let Some(sa) = cached {
        return to_value(sa.as_ref());
    }
    let Some(r) = catalog::lookup("", "v1", "serviceaccounts") else {
        return Ok(Value::Null);
    };
    let t = Target {
        resource: r,
        namespace: Some(a.namespace.clone()),
        name: Some(name.to_string()),
        subresource: None,
    };
    let attempts = if name == DEFAULT_SERVICE_ACCOUNT {
        DEFAULT_ACCOUNT_ATTEMPTS
    } else {
        1
    };
    let pause = Duration::from_millis(100 + rand::random::<u64>() % 100);
    for i in 0..attempts {
        if i > 0 {
            tokio::time::sleep(pause).await;
        }
        match reg.get(&t).await {
            Ok(sa) => return Ok(sa),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Err(forbidden(
        a,
        &format!(
            "error looking up service account {}/{name}: serviceaccount \"{name}\" not found",
            a.namespace
        ),
    ))
}

impl Mutating for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if a.is("", "ServiceAccount") {
                self.accounts.note_write(&a.namespace);
            }
            if !applies(a) || a.object.as_ref().is_some_and(is_mirror) {
                return Ok(());
            }
            let mut pod = a.object.take().unwrap_or_default();
            if let Some(spec) = pod.get_mut("spec").filter(|s| s.is_object()) {
                strategy::mirror_service_account(spec);
            }
            if account_name(&pod).is_empty() {
                pod["spec"]["serviceAccountName"] = json!(DEFAULT_SERVICE_ACCOUNT);
            }
            let name = account_name(&pod).to_string();
            let found = lookup(&self.accounts, reg, a, &name).await;
            let sa = match found {
                Ok(sa) => sa,
                Err(e) => {
                    a.object = Some(pod);
                    return Err(e);
                }
            };
            if should_automount(&sa, &pod) {
                mount_token(
                    &mut pod,
                    &format!("{VOLUME_PREFIX}{}", meta::random_suffix()),
                );
            }
            let no_pull_secrets = pod["spec"]["imagePullSecrets"]
                .as_array()
                .is_none_or(Vec::is_empty);
            if no_pull_secrets {
                if let Some(s) = sa["imagePullSecrets"].as_array().filter(|s| !s.is_empty()) {
                    pod["spec"]["imagePullSecrets"] = json!(s);
                }
            }
            a.object = Some(pod);
            Ok(())
        })
    }
}

impl Validating for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn validate<'a>(
        &'a self,
        a: &'a Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            let Some(pod) = a.object.as_ref().filter(|_| applies(a)) else {
                return Ok(());
            };
            if is_mirror(pod) {
                return match mirror_refusal(pod) {
                    Some(why) => Err(forbidden(a, why)),
                    None => Ok(()),
                };
            }
            lookup(&self.accounts, reg, a, account_name(pod))
                .await
                .map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_in_every_container_and_adds_the_volume() {
        let mut pod = json!({"spec": {
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "a", "volumeMounts": [{"name": "data", "mountPath": "/d"}]},
                           {"name": "b", "volumeMounts": [{"name": "own", "mountPath": TOKEN_MOUNT_PATH}]}],
            "volumes": [{"name": "data", "emptyDir": {}}]}});
        mount_token(&mut pod, "kube-api-access-abcde");
        let m = json!({"name": "kube-api-access-abcde", "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
        assert_eq!(pod["spec"]["initContainers"][0]["volumeMounts"], json!([m]));
        assert_eq!(pod["spec"]["containers"][0]["volumeMounts"][1], m);
        assert_eq!(
            pod["spec"]["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            pod["spec"]["volumes"][1],
            json!({"name": "kube-api-access-abcde", "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]}})
        );
    }

    #[test]
    fn an_existing_token_volume_is_reused_and_no_volume_without_mounts() {
        let mut pod = json!({"spec": {"containers": [{"name": "a"}],
            "volumes": [{"name": "kube-api-access-zzzzz", "projected": {"sources": []}}]}});
        mount_token(&mut pod, "kube-api-access-abcde");
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"][0]["name"],
            "kube-api-access-zzzzz"
        );
        assert_eq!(pod["spec"]["volumes"].as_array().unwrap().len(), 1);
        let mut pod = json!({"spec": {"containers": [{"name": "a",
            "volumeMounts": [{"name": "x", "mountPath": TOKEN_MOUNT_PATH}]}]}});
        mount_token(&mut pod, "kube-api-access-abcde");
        assert_eq!(pod["spec"].get("volumes"), None);
    }

    #[test]
    fn automount_pod_wins_over_account() {
        let pod_off = json!({"spec": {"automountServiceAccountToken": false}});
        let pod_on = json!({"spec": {"automountServiceAccountToken": true}});
        let pod_unset = json!({"spec": {}});
        let sa_off = json!({"automountServiceAccountToken": false});
        let sa_unset = json!({});
        assert!(!should_automount(&sa_unset, &pod_off));
        assert!(should_automount(&sa_off, &pod_on));
        assert!(!should_automount(&sa_off, &pod_unset));
        assert!(should_automount(&sa_unset, &pod_unset));
    }

    #[test]
    fn mirror_pods_reference_no_accounts_secrets_or_tokens() {
        let base = json!({"metadata": {"annotations": {MIRROR_ANNOTATION: "x"}},
            "spec": {"containers": [{"name": "a"}]}});
        assert!(is_mirror(&base));
        assert_eq!(mirror_refusal(&base), None);
        let mut p = base.clone();
        p["spec"]["serviceAccountName"] = json!("default");
        assert_eq!(
            mirror_refusal(&p),
            Some("a mirror pod may not reference service accounts")
        );
        let mut p = base.clone();
        p["spec"]["containers"][0]["env"] =
            json!([{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]);
        assert_eq!(
            mirror_refusal(&p),
            Some("a mirror pod may not reference secrets")
        );
        let mut p = base;
        p["spec"]["volumes"] = json!([{"name": "t", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}}]}}]);
        assert_eq!(
            mirror_refusal(&p),
            Some("a mirror pod may not use ServiceAccountToken volume projections")
        );
    }
}
