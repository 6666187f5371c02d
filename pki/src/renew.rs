//! Whether an existing leaf certificate can stay: signed by the current CA, valid for every
//! name it must cover, and not expiring within the renewal window (k3s renews 90 days ahead).
//! Checked with rustls' own WebPKI verifiers, exactly as a peer would check it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::ca::{LeafSpec, Usage};

/// Leaves are renewed when they expire within this window.
pub const RENEW_BEFORE: Duration = Duration::from_secs(90 * 24 * 3600);

/// Why a leaf must be reissued at `now`, if it must: not signed by the CA, missing one of
/// `spec`'s names, or not valid throughout `[now, now + renew_before]`.
pub fn renewal_reason(
    ca_pem: &str,
    leaf_pem: &[u8],
    spec: &LeafSpec,
    renew_before: Duration,
    now: SystemTime,
) -> Option<String> {
    let ca = match CertificateDer::from_pem_slice(ca_pem.as_bytes()) {
        Ok(ca) => ca,
        Err(e) => return Some(format!("unreadable CA: {e}")),
    };
    let leaf = match CertificateDer::from_pem_slice(leaf_pem) {
        Ok(leaf) => leaf,
        Err(e) => return Some(format!("unreadable certificate: {e}")),
    };
    let mut roots = rustls::RootCertStore::empty();
    if let Err(e) = roots.add(ca) {
        return Some(format!("unusable CA: {e}"));
    }
    let roots = Arc::new(roots);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let later = now.checked_add(renew_before).unwrap_or(now);
    let at = UnixTime::since_unix_epoch(later.duration_since(UNIX_EPOCH).unwrap_or_default());
    match spec.usage {
        Usage::Client => {
            let verifier =
                match rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider)
                    .build()
                {
                    Ok(v) => v,
                    Err(e) => return Some(format!("verifier: {e}")),
                };
            verifier
                .verify_client_cert(&leaf, &[], at)
                .err()
                .map(|e| e.to_string())
        }
        Usage::Server | Usage::ServerAndClient => {
            let verifier =
                match rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                {
                    Ok(v) => v,
                    Err(e) => return Some(format!("verifier: {e}")),
                };
            let names = spec
                .dns_names
                .iter()
                .cloned()
                .chain(spec.ips.iter().map(|ip| ip.to_string()));
            for name in names {
                let Ok(server_name) = ServerName::try_from(name.clone()) else {
                    continue;
                };
                if let Err(e) = verifier.verify_server_cert(&leaf, &[], &server_name, &[], at) {
                    return Some(format!("{name}: {e}"));
                }
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ca;

    #[test]
    fn renewal_is_decided_at_the_given_instant() {
        let dir = tempfile::tempdir().unwrap();
        let authority = ca::load_or_create_ca(dir.path(), "ca", "test-ca").unwrap();
        let spec = LeafSpec {
            common_name: "kube-apiserver".into(),
            organization: None,
            dns_names: vec!["localhost".into()],
            ips: Vec::new(),
            usage: Usage::Server,
        };
        ca::ensure_leaf(dir.path(), "leaf", &spec, &authority).unwrap();
        let leaf = std::fs::read(dir.path().join("leaf.crt")).unwrap();
        let day = Duration::from_secs(86_400);
        let now = SystemTime::now();
        let at = |t| renewal_reason(&authority.cert_pem, &leaf, &spec, 90 * day, t);
        assert_eq!(at(now), None);
        // 300 days on, the year-long leaf expires within the 90-day window.
        assert!(at(now + 300 * day).is_some_and(|r| r.contains("xpired")));
        // A name the leaf does not cover.
        let mut wider = spec.clone();
        wider.dns_names.push("k3rs.example".into());
        assert!(
            renewal_reason(&authority.cert_pem, &leaf, &wider, 90 * day, now)
                .is_some_and(|r| r.starts_with("k3rs.example: "))
        );
    }
}
