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

/// Why a leaf must be reissued, if it must.
pub fn renewal_reason(
    ca_pem: &str,
    leaf_pem: &[u8],
    spec: &LeafSpec,
    renew_before: Duration,
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
    let later = SystemTime::now()
        .checked_add(renew_before)
        .unwrap_or_else(SystemTime::now);
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
