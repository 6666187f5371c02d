//! CertificateSigningRequest (`certificates.k8s.io/v1`): the PEM request is parsed and its
//! signature checked, the requester is recorded in the spec, and the `approval` and `status`
//! subresources change only what kube-apiserver lets them (Approved/Denied through
//! `approval`, mutually exclusive and never removed; the rest through `status`). Signing is
//! the certificate controller's job (a later issue).

use std::collections::BTreeSet;

use base64::Engine;
use serde_json::{json, Value};

use k3rs_apimachinery::status::Cause;

/// Condition types only the `approval` subresource may set.
const APPROVAL_CONDITIONS: [&str; 2] = ["Approved", "Denied"];

/// kube's known key usages (`allValidUsages`), sorted.
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// Who sent the request, as recorded in `spec.username/uid/groups/extra`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl From<&k3rs_auth::UserInfo> for Requester {
    fn from(u: &k3rs_auth::UserInfo) -> Requester {
        Requester {
            username: u.username.clone(),
            uid: u.uid.clone(),
            groups: u.groups.clone(),
            extra: u.extra.clone(),
        }
    }
}

impl Requester {
    /// The admin kubeconfig's identity: every request is the admin's until authentication
    /// hands the registry the real user.
    pub fn admin() -> Requester {
        Requester {
            username: "system:admin".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            extra: Default::default(),
        }
    }
}

/// Create: no status, and the requester's identity in the spec (whatever the body said).
pub fn prepare_for_create(csr: &mut Value, who: &Requester) {
    if let Some(o) = csr.as_object_mut() {
        o.remove("status");
    }
    if !csr["spec"].is_object() {
        csr["spec"] = json!({});
    }
    let spec = &mut csr["spec"];
    spec["username"] = json!(who.username);
    spec["groups"] = json!(who.groups);
    if let Some(s) = spec.as_object_mut() {
        s.remove("extra");
        if !who.extra.is_empty() {
            s.insert("extra".into(), json!(who.extra));
        }
        if who.uid.is_empty() {
            s.remove("uid");
        } else {
            s.insert("uid".into(), json!(who.uid));
        }
    }
}

fn conditions(v: &Value) -> Vec<Value> {
    v["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn is_approval(c: &Value) -> bool {
    APPROVAL_CONDITIONS.contains(&c["type"].as_str().unwrap_or(""))
}

/// Update of the object, its `status` or its `approval` (`subresource`), given the merged
/// object `new` and the stored `old`: the spec never changes; the main resource keeps the old
/// status; `status` keeps the old Approved/Denied conditions; `approval` changes only the
/// conditions. New conditions get `lastUpdateTime`/`lastTransitionTime` (`now`).
pub fn prepare_for_update(subresource: Option<&str>, new: &mut Value, old: &Value, now: &str) {
    new["spec"] = old["spec"].clone();
    match subresource {
        Some("approval") => {
            let conds = conditions(new);
            new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
            new["status"]["conditions"] = json!(conds);
        }
        Some("status") => {
            let mut conds: Vec<Value> = conditions(new)
                .into_iter()
                .filter(|c| !is_approval(c))
                .collect();
            conds.extend(conditions(old).into_iter().filter(is_approval));
            if !new["status"].is_object() {
                new["status"] = json!({});
            }
            new["status"]["conditions"] = json!(conds);
        }
        _ => match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        },
    }
    let old_conds = conditions(old);
    if let Some(conds) = new["status"]["conditions"].as_array_mut() {
        for c in conds.iter_mut() {
            if c["status"].as_str().is_none_or(str::is_empty) {
                c["status"] = json!("True");
            }
            if c["lastUpdateTime"].as_str().is_none_or(str::is_empty) {
                c["lastUpdateTime"] = json!(now);
            }
            if c["lastTransitionTime"].as_str().is_none_or(str::is_empty) {
                let kept = old_conds.iter().find(|o| {
                    o["type"] == c["type"]
                        && o["status"] == c["status"]
                        && o["lastTransitionTime"]
                            .as_str()
                            .is_some_and(|t| !t.is_empty())
                });
                c["lastTransitionTime"] =
                    kept.map_or(json!(now), |o| o["lastTransitionTime"].clone());
            }
        }
    }
    if new["status"]["conditions"]
        .as_array()
        .is_some_and(Vec::is_empty)
    {
        if let Some(s) = new["status"].as_object_mut() {
            s.remove("conditions");
        }
    }
}

/// The subject common name of `request` (the base64 of `spec.request`), if it parses.
pub fn request_common_name(request_b64: &str) -> Option<String> {
    use x509_parser::prelude::FromDer;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(request_b64)
        .ok()?;
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
            .ok()?;
    let cn = csr
        .certification_request_info
        .subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    Some(cn)
}

/// Why `request` (the base64 of `spec.request`) is not a PEM certificate request with a
/// valid signature, in kube's words where it has them.
pub fn request_error(request_b64: &str) -> Option<String> {
    let pem = match base64::engine::general_purpose::STANDARD.decode(request_b64) {
        Ok(b) => b,
        Err(e) => return Some(format!("invalid base64: {e}")),
    };
    let parsed = x509_parser::pem::parse_x509_pem(&pem);
    let Ok((_, block)) = parsed.as_ref().map_err(drop) else {
        return Some("PEM block type must be CERTIFICATE REQUEST".into());
    };
    if block.label != "CERTIFICATE REQUEST" {
        return Some("PEM block type must be CERTIFICATE REQUEST".into());
    }
    use x509_parser::prelude::FromDer;
    let csr = match x509_parser::certification_request::X509CertificationRequest::from_der(
        &block.contents,
    ) {
        Ok((_, csr)) => csr,
        Err(e) => return Some(format!("x509: malformed certificate request: {e}")),
    };
    csr.verify_signature()
        .err()
        .map(|e| format!("x509: signature verification failed: {e}"))
}

fn signer_name_errors(signer: &str) -> Vec<Cause> {
    let field = "spec.signerName";
    if signer.is_empty() {
        return vec![Cause::required(field, "")];
    }
    let parts: Vec<&str> = signer.split('/').collect();
    if parts.len() != 2 {
        return vec![Cause::invalid(
            field,
            signer,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    }
    let (domain, path) = (parts[0], parts[1]);
    let mut causes = Vec::new();
    if !domain.contains('.') || !k3rs_apimachinery::validation::is_dns1123_subdomain(domain) {
        causes.push(Cause::invalid(
            field,
            signer,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    if path.is_empty() {
        causes.push(Cause::required(
            field,
            "path part of signerName must be non-empty",
        ));
    }
    causes
}

/// Create and update validation (`validateCertificateSigningRequest`).
pub fn validate(csr: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &csr["spec"];
    match spec["request"].as_str() {
        None | Some("") => causes.push(Cause::required("spec.request", "")),
        Some(r) => {
            if let Some(e) = request_error(r) {
                causes.push(Cause::invalid("spec.request", "", &e));
            }
        }
    }
    causes.extend(signer_name_errors(
        spec["signerName"].as_str().unwrap_or(""),
    ));
    if let Some(s) = spec["expirationSeconds"].as_i64() {
        if s < 600 {
            causes.push(Cause::invalid(
                "spec.expirationSeconds",
                &s.to_string(),
                "may not specify a duration less than 600 seconds (10 minutes)",
            ));
        }
    }
    let usages = spec["usages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if usages.is_empty() {
        causes.push(Cause::required("spec.usages", ""));
    }
    let mut seen = BTreeSet::new();
    for (i, u) in usages.iter().enumerate() {
        let u = u.as_str().unwrap_or("");
        if !USAGES.contains(&u) {
            causes.push(Cause::not_supported(format!("spec.usages[{i}]"), u, USAGES));
        }
        if !seen.insert(u) {
            causes.push(Cause::duplicate(format!("spec.usages[{i}]"), u));
        }
    }
    causes.extend(validate_conditions(csr));
    causes
}

fn validate_conditions(csr: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let (mut approved, mut denied) = (false, false);
    let mut seen = BTreeSet::new();
    for (i, c) in conditions(csr).iter().enumerate() {
        let at = format!("status.conditions[{i}]");
        let kind = c["type"].as_str().unwrap_or("");
        if kind.is_empty() {
            causes.push(Cause::required(format!("{at}.type"), ""));
        }
        let allowed: &[&str] = match kind {
            "Approved" => {
                approved = true;
                &["True"]
            }
            "Denied" => {
                denied = true;
                &["True"]
            }
            "Failed" => &["True"],
            _ => &["False", "True", "Unknown"],
        };
        let status = c["status"].as_str().unwrap_or("");
        if !allowed.contains(&status) {
            causes.push(Cause::not_supported(
                format!("{at}.status"),
                status,
                allowed,
            ));
        }
        if approved && denied {
            causes.push(Cause::invalid(
                "status.conditions",
                kind,
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        if !seen.insert(kind.to_string()) {
            causes.push(Cause::duplicate(format!("{at}.type"), kind));
        }
    }
    causes
}

/// Approved, Denied and Failed conditions, once set, stay.
pub fn validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    let count = |v: &Value, t: &str| conditions(v).iter().filter(|c| c["type"] == t).count();
    ["Approved", "Denied", "Failed"]
        .iter()
        .filter(|t| count(new, t) < count(old, t))
        .map(|t| {
            Cause::forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {}", json!(t)),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::fields;
    use super::*;

    /// A real CSR (rcgen-generated, as `kubectl`'s users make with openssl).
    fn request() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    fn csr() -> Value {
        json!({"metadata": {"name": "alice"}, "spec": {"request": request(),
            "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"],
            "username": "forged", "uid": "x", "extra": {"a": ["b"]}},
            "status": {"certificate": "Zm9v"}})
    }

    #[test]
    fn create_records_the_requester() {
        let mut c = csr();
        prepare_for_create(&mut c, &Requester::admin());
        assert!(c.get("status").is_none());
        assert_eq!(c["spec"]["username"], "system:admin");
        assert_eq!(
            c["spec"]["groups"],
            json!(["system:masters", "system:authenticated"])
        );
        assert!(c["spec"].get("uid").is_none() && c["spec"].get("extra").is_none());
        assert!(validate(&c).is_empty(), "{:?}", validate(&c));
        let mut user = k3rs_auth::UserInfo::authenticated(
            "system:bootstrap:abcdef",
            vec!["system:bootstrappers".into()],
        );
        user.uid = "u1".into();
        user.extra.insert("scopes".into(), vec!["a".into()]);
        prepare_for_create(&mut c, &Requester::from(&user));
        assert_eq!(c["spec"]["username"], "system:bootstrap:abcdef");
        assert_eq!(
            c["spec"]["groups"],
            json!(["system:bootstrappers", "system:authenticated"])
        );
        assert_eq!(c["spec"]["uid"], "u1");
        assert_eq!(c["spec"]["extra"], json!({"scopes": ["a"]}));
    }

    #[test]
    fn requests_must_be_signed_pem_csrs() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert_eq!(
            request_error(&b64(
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
            ))
            .as_deref(),
            Some("PEM block type must be CERTIFICATE REQUEST")
        );
        assert_eq!(
            request_error(&b64("hello")).as_deref(),
            Some("PEM block type must be CERTIFICATE REQUEST")
        );
        // A flipped bit in the signed body breaks the signature (or the encoding).
        let pem = String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(request())
                .unwrap(),
        )
        .unwrap();
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let mut der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap();
        let last = der.len() - 1;
        der[last] ^= 1;
        let broken = format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
            base64::engine::general_purpose::STANDARD.encode(der)
        );
        assert!(request_error(&b64(&broken)).is_some());
        assert_eq!(request_error(&request()), None);
    }

    #[test]
    fn spec_validation_paths() {
        let c = json!({"spec": {"request": base64::engine::general_purpose::STANDARD.encode("x"),
            "signerName": "example", "usages": ["client auth", "flying", "client auth"],
            "expirationSeconds": 60}});
        assert_eq!(
            fields(validate(&c)),
            [
                "spec.request",
                "spec.signerName",
                "spec.expirationSeconds",
                "spec.usages[1]",
                "spec.usages[2]"
            ]
        );
        assert_eq!(
            fields(validate(&json!({"spec": {}}))),
            ["spec.request", "spec.signerName", "spec.usages"]
        );
    }

    #[test]
    fn approval_sets_conditions_only() {
        let old = csr();
        let mut new = old.clone();
        new["spec"]["signerName"] = json!("example.com/other");
        new["status"] = json!({"certificate": "YmFy", "conditions": [
            {"type": "Approved", "reason": "KubectlApprove", "message": "ok"}]});
        prepare_for_update(Some("approval"), &mut new, &old, "2026-01-01T00:00:00Z");
        assert_eq!(new["spec"], old["spec"]);
        assert_eq!(
            new["status"],
            json!({"certificate": "Zm9v", "conditions": [{"type": "Approved", "status": "True",
                "reason": "KubectlApprove", "message": "ok",
                "lastUpdateTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
        );
        assert!(validate_conditions(&new).is_empty());
    }

    #[test]
    fn status_cannot_approve_and_main_keeps_status() {
        let mut old = csr();
        old["status"] = json!({"conditions": [{"type": "Denied", "status": "True",
            "lastUpdateTime": "t0", "lastTransitionTime": "t0"}]});
        let mut new = old.clone();
        new["status"] = json!({"certificate": "YmFy", "conditions": [
            {"type": "Approved", "status": "True"}, {"type": "Failed", "status": "True"}]});
        prepare_for_update(Some("status"), &mut new, &old, "t1");
        let types: Vec<&str> = new["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["Failed", "Denied"]);
        assert_eq!(new["status"]["certificate"], "YmFy");
        let mut main = old.clone();
        main["status"] = json!({});
        prepare_for_update(None, &mut main, &old, "t1");
        assert_eq!(main["status"], old["status"]);
    }

    #[test]
    fn approved_and_denied_are_exclusive_and_permanent() {
        let both = json!({"status": {"conditions": [{"type": "Approved", "status": "True"},
            {"type": "Denied", "status": "True"}]}});
        let c = validate_conditions(&both);
        assert_eq!(fields(c.clone()), ["status.conditions"]);
        assert_eq!(
            c[0].message,
            "Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
        );
        let approved = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let c = validate_update(&json!({}), &approved);
        assert_eq!(
            c[0].message,
            "Forbidden: updates may not remove a condition of type \"Approved\""
        );
    }
}
