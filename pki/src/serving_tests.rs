//! The certificates the PKI issues, checked by the TLS configuration that serves them.

use std::path::Path;
use std::sync::Arc;

use k3rs_apimachinery::tls::{certs, server_config};

use super::{Pki, PkiOptions};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{ServerName, UnixTime};

fn pki(dir: &Path) -> Pki {
    let opts = PkiOptions {
        hostname: "edge-1".into(),
        apiserver_dns_names: vec!["kubernetes.default.svc".into(), "api.example.com".into()],
        apiserver_ips: vec!["10.43.0.1".parse().unwrap(), "192.0.2.10".parse().unwrap()],
        ..Default::default()
    };
    Pki::ensure(dir, &opts).unwrap()
}

fn roots(ca: &Path) -> Arc<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(ca).unwrap() {
        roots.add(c).unwrap();
    }
    Arc::new(roots)
}

#[test]
fn serving_certificate_covers_the_api_names_and_admin_is_a_client() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (cert, key) = pki.apiserver_serving_cert();
    server_config(&cert, &key, &pki.client_ca_cert()).expect("server tls config");

    let leaf = certs(&cert).unwrap().remove(0);
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        roots(&pki.server_ca_cert()),
        provider.clone(),
    )
    .build()
    .unwrap();
    for name in [
        "localhost",
        "edge-1",
        "kubernetes.default.svc",
        "api.example.com",
        "127.0.0.1",
        "::1",
        "10.43.0.1",
        "192.0.2.10",
    ] {
        let sn = ServerName::try_from(name.to_string()).unwrap();
        verifier
            .verify_server_cert(&leaf, &[], &sn, &[], UnixTime::now())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let other = ServerName::try_from("evil.example.com".to_string()).unwrap();
    assert!(verifier
        .verify_server_cert(&leaf, &[], &other, &[], UnixTime::now())
        .is_err());

    let (admin, _) = pki.admin_client_cert();
    let admin = certs(&admin).unwrap().remove(0);
    let client_verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots(&pki.client_ca_cert()),
        provider,
    )
    .build()
    .unwrap();
    client_verifier
        .verify_client_cert(&admin, &[], UnixTime::now())
        .expect("admin certificate is signed by the client CA");
    let text = String::from_utf8_lossy(admin.as_ref()).into_owned();
    assert!(text.contains("system:admin") && text.contains("system:masters"));
}
