//! The built-in signers (upstream's csrsigning controller): approved requests for
//! `kubernetes.io/kube-apiserver-client` and `…-client-kubelet` are signed with the client CA,
//! `kubernetes.io/kubelet-serving` with the server CA (k3s's choice); what a signer's rules
//! forbid gets a `Failed` condition instead.
//!
//! # Guarantees
//! - Only approved, not denied, not failed, not yet signed requests of these signers are
//!   touched; other signers' requests are left alone.
//! - Validity: `spec.expirationSeconds` (default and cap one year), never past the CA's.

use crate::backoff::ErrorBackoff;
use crate::SharedInformerFactory;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::request::{self, Ca};
use super::sign;
use k3rs_pki::ca::Authority;

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Not ours, not approved, or already finished.
    Nothing,
    /// The signer refuses: add `Failed` with this message.
    Fail(String),
    /// Sign with this CA.
    Sign(Ca),
}

fn has(csr: &CertificateSigningRequest, type_: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// The signer's decision on `csr`.
pub fn plan(csr: &CertificateSigningRequest) -> Plan {
    let signed = csr
        .status
        .as_ref()
        .is_some_and(|s| s.certificate.as_ref().is_some_and(|c| !c.0.is_empty()));
    if signed || !has(csr, "Approved") || has(csr, "Denied") || has(csr, "Failed") {
        return Plan::Nothing;
    }
    let req = match request::parse_pem(&csr.spec.request.0) {
        Ok(r) => r,
        Err(e) => return Plan::Fail(e.to_string()),
    };
    let usages = csr.spec.usages.clone().unwrap_or_default();
    match request::check(&csr.spec.signer_name, &req, &usages) {
        None => Plan::Nothing,
        Some((_, Err(why))) => Plan::Fail(why.to_string()),
        Some((ca, Ok(()))) => Plan::Sign(ca),
    }
}

/// The `Failed` condition for `message`.
pub fn failed(message: String, now: &str) -> CertificateSigningRequestCondition {
    let t = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        now.parse()
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    CertificateSigningRequestCondition {
        type_: "Failed".into(),
        status: "True".into(),
        reason: Some("SignerValidationFailure".into()),
        message: Some(message),
        last_update_time: Some(t.clone()),
        last_transition_time: Some(t),
    }
}

/// A CA with its expiry.
pub struct SigningCa {
    authority: Authority,
    not_after: time::OffsetDateTime,
}

impl SigningCa {
    /// Loads `<stem>.crt`/`.key` from `dir`.
    pub fn load(dir: &Path, stem: &str) -> Result<SigningCa, k3rs_pki::Error> {
        let authority = Authority::load(dir, stem)?;
        let not_after = x509_parser::pem::parse_x509_pem(authority.cert_pem.as_bytes())
            .ok()
            .and_then(|(_, p)| {
                p.parse_x509()
                    .ok()
                    .map(|c| c.validity().not_after.timestamp())
            })
            .and_then(|t| time::OffsetDateTime::from_unix_timestamp(t).ok())
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        Ok(SigningCa {
            authority,
            not_after,
        })
    }
}

/// What the signer needs.
pub struct Context {
    pub client: kube::Client,
    pub client_ca: SigningCa,
    pub server_ca: SigningCa,
}

/// Errors of one reconcile (retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("updating the status of {name}: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
}

async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let now = k3rs_apimachinery::meta::now_rfc3339();
    let mut new = (*csr).clone();
    let status = new.status.get_or_insert_with(Default::default);
    match plan(&csr) {
        Plan::Nothing => return Ok(Action::await_change()),
        Plan::Fail(why) => status
            .conditions
            .get_or_insert_with(Vec::new)
            .push(failed(why, &now)),
        Plan::Sign(which) => {
            let ca = match which {
                Ca::Client => &ctx.client_ca,
                Ca::Server => &ctx.server_ca,
            };
            let der = request::parse_pem(&csr.spec.request.0)
                .map(|r| r.der)
                .unwrap_or_default();
            let valid = sign::duration(csr.spec.expiration_seconds.map(i64::from));
            match sign::sign(
                ca.authority.issuer(),
                ca.not_after,
                &der,
                &csr.spec.usages.clone().unwrap_or_default(),
                valid,
                std::time::SystemTime::now(),
            ) {
                Ok(pem) => status.certificate = Some(ByteString(pem.into_bytes())),
                Err(why) => status
                    .conditions
                    .get_or_insert_with(Vec::new)
                    .push(failed(why.to_string(), &now)),
            }
        }
    }
    let name = csr.metadata.name.clone().unwrap_or_default();
    Api::<CertificateSigningRequest>::all(ctx.client.clone())
        .replace_status(&name, &PostParams::default(), &new)
        .await
        .map_err(|source| Error::Status { name, source })?;
    Ok(Action::await_change())
}

/// Runs the signer until `stop`.
pub async fn run(ctx: Arc<Context>, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("csr-signer");
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
    use k3rs_apimachinery::signers;
    use serde_json::json;

    fn pem(cn: &str, org: &str) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, org);
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn csr(signer: &str, cn: &str, conditions: &[&str]) -> CertificateSigningRequest {
        use base64::Engine;
        let conds: Vec<_> = conditions
            .iter()
            .map(|t| json!({"type": t, "status": "True"}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "c"},
            "spec": {"request": base64::engine::general_purpose::STANDARD.encode(pem(cn, "system:nodes")),
                "signerName": signer,
                "usages": ["digital signature", "key encipherment", "client auth"]},
            "status": {"conditions": conds}
        }))
        .unwrap()
    }

    #[test]
    fn plans() {
        let k = signers::KUBELET_CLIENT;
        assert_eq!(plan(&csr(k, "system:node:n1", &[])), Plan::Nothing);
        assert_eq!(
            plan(&csr(k, "system:node:n1", &["Approved"])),
            Plan::Sign(Ca::Client)
        );
        assert_eq!(
            plan(&csr(signers::KUBE_APISERVER_CLIENT, "alice", &["Approved"])),
            Plan::Sign(Ca::Client)
        );
        assert_eq!(
            plan(&csr(k, "alice", &["Approved"])),
            Plan::Fail("subject common name does not begin with system:node:".into())
        );
        assert_eq!(
            plan(&csr(
                signers::KUBELET_SERVING,
                "system:node:n1",
                &["Approved"]
            )),
            Plan::Fail("DNS or IP subjectAltName is required".into())
        );
        assert_eq!(
            plan(&csr(k, "system:node:n1", &["Approved", "Failed"])),
            Plan::Nothing
        );
        assert_eq!(plan(&csr(k, "system:node:n1", &["Denied"])), Plan::Nothing);
        assert_eq!(
            plan(&csr("example.com/x", "system:node:n1", &["Approved"])),
            Plan::Nothing
        );
        let mut signed = csr(k, "system:node:n1", &["Approved"]);
        signed.status.as_mut().unwrap().certificate = Some(ByteString(b"PEM".to_vec()));
        assert_eq!(plan(&signed), Plan::Nothing);
    }
}
