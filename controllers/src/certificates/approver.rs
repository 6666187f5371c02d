//! Auto-approval of kubelet client certificates (upstream's csrapproving controller): a
//! request for the kubelet client signer whose subject is a node's is approved when its
//! requester may `create` `certificatesigningrequests/nodeclient` (new nodes, e.g. bootstrap
//! tokens), or `…/selfnodeclient` when the requester renews its own identity.
//!
//! # Guarantees
//! - Only pending requests (no Approved/Denied condition, no certificate) are considered.
//! - The permission is asked with a SubjectAccessReview for the user recorded in the
//!   request's spec, as upstream does; unless it is allowed nothing happens.

use crate::backoff::ErrorBackoff;
use crate::SharedInformerFactory;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::request::{self, Request};
use k3rs_apimachinery::signers::KUBELET_CLIENT;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};

/// One way a request can qualify, and the permission it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recognizer {
    /// The subresource of `certificatesigningrequests` whose `create` is checked.
    pub subresource: &'static str,
    pub message: &'static str,
}

const SELF_NODE_CLIENT: Recognizer = Recognizer {
    subresource: "selfnodeclient",
    message: "Auto approving self kubelet client certificate after SubjectAccessReview.",
};
const NODE_CLIENT: Recognizer = Recognizer {
    subresource: "nodeclient",
    message: "Auto approving kubelet client certificate after SubjectAccessReview.",
};

/// Whether the request is still undecided and unsigned.
pub fn pending(csr: &CertificateSigningRequest) -> bool {
    let Some(status) = &csr.status else {
        return true;
    };
    status.certificate.is_none()
        && !status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Approved" || c.type_ == "Denied")
}

/// The recognizers that match, in upstream's order (self renewal first).
pub fn recognize(csr: &CertificateSigningRequest, req: &Request) -> Vec<Recognizer> {
    let spec = &csr.spec;
    let usages = spec.usages.clone().unwrap_or_default();
    if spec.signer_name != KUBELET_CLIENT || request::kubelet_client(req, &usages).is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if spec.username.as_deref() == Some(req.common_name.as_str()) {
        out.push(SELF_NODE_CLIENT);
    }
    out.push(NODE_CLIENT);
    out
}

/// "May the requester recorded in `csr`'s spec create
/// `certificatesigningrequests/<subresource>`", as a SubjectAccessReview.
pub fn permission(csr: &CertificateSigningRequest, subresource: &str) -> SubjectAccessReview {
    let spec = &csr.spec;
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: spec.username.clone(),
            uid: spec.uid.clone(),
            groups: spec.groups.clone(),
            extra: spec.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some("certificates.k8s.io".into()),
                resource: Some("certificatesigningrequests".into()),
                subresource: Some(subresource.into()),
                verb: Some("create".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Whether the API server's authorizers allow `review`.
async fn allowed(client: &kube::Client, review: &SubjectAccessReview) -> Result<bool, kube::Error> {
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The Approved condition the approver adds.
pub fn approved(message: &str, now: &str) -> CertificateSigningRequestCondition {
    let t = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        now.parse()
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    CertificateSigningRequestCondition {
        type_: "Approved".into(),
        status: "True".into(),
        reason: Some("AutoApproved".into()),
        message: Some(message.into()),
        last_update_time: Some(t.clone()),
        last_transition_time: Some(t),
    }
}

/// What the approver needs.
pub struct Context {
    pub client: kube::Client,
}

/// Errors of one reconcile (retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("asking whether {name} may be approved: {source}")]
    Review {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("approving {name}: {source}")]
    Approve {
        name: String,
        #[source]
        source: kube::Error,
    },
}

async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    if !pending(&csr) {
        return Ok(Action::await_change());
    }
    let Ok(req) = request::parse_pem(&csr.spec.request.0) else {
        return Ok(Action::await_change());
    };
    if let Some(node) = super::serving_approval::own_node(&csr, &req) {
        return approve_serving(&csr, &req, &node, &ctx).await;
    }
    for r in recognize(&csr, &req) {
        let review = permission(&csr, r.subresource);
        let ok = allowed(&ctx.client, &review)
            .await
            .map_err(|source| Error::Review {
                name: csr.metadata.name.clone().unwrap_or_default(),
                source,
            })?;
        if !ok {
            continue;
        }
        approve(&csr, r.message, &ctx).await?;
        return Ok(Action::await_change());
    }
    Ok(Action::await_change())
}

/// A node's serving request: approved once its Node has every name and address asked for and
/// no other Node has any of them (looked at again every few seconds while the Node's status
/// catches up).
async fn approve_serving(
    csr: &CertificateSigningRequest,
    req: &Request,
    node: &str,
    ctx: &Context,
) -> Result<Action, Error> {
    let retry = Action::requeue(Duration::from_secs(3));
    let Ok(nodes) = Api::<Node>::all(ctx.client.clone())
        .list(&Default::default())
        .await
    else {
        return Ok(retry);
    };
    let Some(n) = nodes
        .items
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
    else {
        return Ok(retry);
    };
    if let Err(why) = super::serving_approval::sans_match(req, n, &nodes.items) {
        tracing::debug!(node, %why, "kubelet serving request not approved yet");
        return Ok(retry);
    }
    approve(csr, super::serving_approval::MESSAGE, ctx).await?;
    Ok(Action::await_change())
}

async fn approve(
    csr: &CertificateSigningRequest,
    message: &str,
    ctx: &Context,
) -> Result<(), Error> {
    let name = csr.metadata.name.clone().unwrap_or_default();
    let mut new = csr.clone();
    let status = new.status.get_or_insert_with(Default::default);
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(approved(message, &k3rs_apimachinery::meta::now_rfc3339()));
    Api::<CertificateSigningRequest>::all(ctx.client.clone())
        .replace_subresource("approval", &name, &PostParams::default(), &new)
        .await
        .map_err(|source| Error::Approve { name, source })?;
    Ok(())
}

/// Runs the approver until `stop`.
pub async fn run(ctx: Arc<Context>, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("csr-approver");
    backoff
        .drive(
            crate::shared_controller::<CertificateSigningRequest>(&informers).await,
            reconcile,
            ctx,
            stop,
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csr(username: &str, signer: &str, usages: &[&str]) -> CertificateSigningRequest {
        serde_json::from_value(json!({
            "metadata": {"name": "c"},
            "spec": {"request": "", "signerName": signer, "usages": usages,
                "username": username, "groups": ["system:bootstrappers", "system:authenticated"]}
        }))
        .unwrap()
    }

    fn node_req(cn: &str) -> Request {
        Request {
            common_name: cn.into(),
            organizations: vec!["system:nodes".into()],
            ..Request::default()
        }
    }

    const USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];

    #[test]
    fn recognizers() {
        let bootstrap = csr("system:bootstrap:abcdef", KUBELET_CLIENT, USAGES);
        assert_eq!(
            recognize(&bootstrap, &node_req("system:node:n1")),
            vec![NODE_CLIENT]
        );
        let renewal = csr("system:node:n1", KUBELET_CLIENT, USAGES);
        assert_eq!(
            recognize(&renewal, &node_req("system:node:n1")),
            vec![SELF_NODE_CLIENT, NODE_CLIENT]
        );
        let other_signer = csr(
            "system:node:n1",
            k3rs_apimachinery::signers::KUBE_APISERVER_CLIENT,
            USAGES,
        );
        assert!(recognize(&other_signer, &node_req("system:node:n1")).is_empty());
        let bad_usage = csr("system:node:n1", KUBELET_CLIENT, &["client auth"]);
        assert!(recognize(&bad_usage, &node_req("system:node:n1")).is_empty());
        assert!(recognize(&bootstrap, &node_req("alice")).is_empty());
    }

    #[test]
    fn pending_and_permission() {
        let mut c = csr("u", KUBELET_CLIENT, USAGES);
        assert!(pending(&c));
        c.status = Some(Default::default());
        c.status.as_mut().unwrap().conditions = Some(vec![approved("ok", "2026-11-21T12:00:00Z")]);
        assert!(!pending(&c));
        let review = permission(
            &csr("system:bootstrap:x", KUBELET_CLIENT, USAGES),
            "nodeclient",
        );
        let a = review.spec.resource_attributes.clone().unwrap();
        assert_eq!(
            (
                a.verb.as_deref().unwrap(),
                a.group.as_deref().unwrap(),
                a.resource.as_deref().unwrap(),
                a.subresource.as_deref().unwrap(),
                review.spec.user.as_deref().unwrap()
            ),
            (
                "create",
                "certificates.k8s.io",
                "certificatesigningrequests",
                "nodeclient",
                "system:bootstrap:x"
            )
        );
        assert_eq!(
            review.spec.groups.unwrap(),
            vec!["system:bootstrappers", "system:authenticated"]
        );
    }
}
