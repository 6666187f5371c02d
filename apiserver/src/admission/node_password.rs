//! The NodePassword admission plugin (k3rs's, after k3s's node password check): a kubelet
//! client certificate request made with a bootstrap token for `system:node:<name>` must carry
//! that node's password (the [`ANNOTATION`] annotation) when the node has one stored; the
//! first request with a password stores its hash ([`k3rs_auth::node_password`]).
//!
//! # Guarantees
//! - The password annotation is removed from every CertificateSigningRequest before later
//!   plugins (webhooks) see it, and it is never stored.
//! - A bootstrapper's request for a node whose stored password differs (or that sends none)
//!   is refused with 403 `Forbidden`; requests from other users (a node renewing itself, an
//!   administrator) are not judged here.
//! - Two first joins racing for a name: one stores its hash, the other is judged against it.

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};

use super::{forbidden, Attributes, Mutating, Operation};
use crate::registry::{Registry, Target, WriteOptions};
use crate::resources::strategy::csr::request_common_name;
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::signers::KUBELET_CLIENT;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_auth::node_password::{self, Decision, ANNOTATION};

/// Checks (and on a first join stores) node passwords; see the module docs.
pub struct NodePassword;

impl Mutating for NodePassword {
    fn name(&self) -> &'static str {
        "NodePassword"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        async move {
            if a.operation != Operation::Create
                || !a.is("certificates.k8s.io", "CertificateSigningRequest")
            {
                return Ok(());
            }
            let password = a.object.as_mut().and_then(take_password);
            let Some(node) = judged_node(a) else {
                return Ok(());
            };
            let secret = password_secret(&node)?;
            let stored = stored_hash(reg, &secret).await?;
            match node_password::decide(&node, stored.as_deref(), password.as_deref()) {
                Decision::Accept => Ok(()),
                Decision::Refuse(why) => Err(forbidden(a, &why)),
                Decision::Store(_) if a.dry_run => Ok(()),
                Decision::Store(hash) => {
                    match reg
                        .create(
                            &secret,
                            secret_object(&node, &hash),
                            WriteOptions::default(),
                        )
                        .await
                    {
                        Ok(_) => {
                            tracing::info!(node, "node password stored");
                            Ok(())
                        }
                        // Another first join won the race: judge this one against it.
                        Err(e) if e.reason == "AlreadyExists" => {
                            let stored = stored_hash(reg, &secret).await?;
                            match node_password::decide(
                                &node,
                                stored.as_deref(),
                                password.as_deref(),
                            ) {
                                Decision::Refuse(why) => Err(forbidden(a, &why)),
                                _ => Ok(()),
                            }
                        }
                        Err(e) => Err(e),
                    }
                }
            }
        }
        .boxed()
    }
}

/// Removes the password annotation (and an annotations map it leaves empty).
fn take_password(obj: &mut Value) -> Option<String> {
    let annotations = obj["metadata"]["annotations"].as_object_mut()?;
    let password = annotations.remove(ANNOTATION)?;
    if annotations.is_empty() {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("annotations");
        }
    }
    password.as_str().map(str::to_string)
}

/// The node whose password judges this request: a bootstrapper's kubelet client request for
/// `system:node:<name>`.
fn judged_node(a: &Attributes) -> Option<String> {
    let user = a.user.as_ref()?;
    if !user.in_group(k3rs_auth::bootstrap_token::GROUP) {
        return None;
    }
    let spec = &a.object.as_ref()?["spec"];
    if spec["signerName"] != KUBELET_CLIENT {
        return None;
    }
    let cn = request_common_name(spec["request"].as_str()?)?;
    cn.strip_prefix(k3rs_auth::user::NODE_USER_PREFIX)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

fn password_secret(node: &str) -> ApiResult<Target> {
    let secrets = catalog::lookup("", "v1", "secrets")
        .ok_or_else(|| ApiError::internal("the secrets resource is not served"))?;
    Ok(Target {
        resource: secrets,
        namespace: Some(node_password::NAMESPACE.into()),
        name: Some(node_password::secret_name(node)),
        subresource: None,
    })
}

/// The stored hash, `None` when the Secret does not exist.
async fn stored_hash(reg: &Registry, secret: &Target) -> ApiResult<Option<String>> {
    use base64::Engine;
    let obj = match reg.get(secret).await {
        Ok(obj) => obj,
        Err(e) if e.code == 404 => return Ok(None),
        Err(e) => return Err(e),
    };
    let data = obj["data"][node_password::HASH_KEY].as_str().unwrap_or("");
    let hash = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default();
    // An unreadable hash still names a registered node: it verifies no password.
    Ok(Some(hash))
}

fn secret_object(node: &str, hash: &str) -> Value {
    use base64::Engine;
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": node_password::secret_name(node),
            "namespace": node_password::NAMESPACE,
        },
        "type": node_password::SECRET_TYPE,
        "immutable": true,
        "data": {(node_password::HASH_KEY): base64::engine::general_purpose::STANDARD.encode(hash)},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_never_stays_in_the_object() {
        let mut csr = json!({"metadata": {"name": "c", "annotations": {(ANNOTATION): "pw"}}});
        assert_eq!(take_password(&mut csr), Some("pw".into()));
        assert_eq!(csr, json!({"metadata": {"name": "c"}}));
        let mut other = json!({"metadata": {"annotations": {(ANNOTATION): "pw", "a": "b"}}});
        assert_eq!(take_password(&mut other), Some("pw".into()));
        assert_eq!(other, json!({"metadata": {"annotations": {"a": "b"}}}));
        assert_eq!(take_password(&mut json!({"metadata": {}})), None);
    }
}
