use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::*;

const CAS: [&str; 5] = [
    "server-ca",
    "client-ca",
    "request-header-ca",
    "etcd/server-ca",
    "etcd/peer-ca",
];
const LEAVES: [&str; 4] = [
    "etcd/server-client",
    "etcd/peer-server-client",
    "etcd/client",
    "client-auth-proxy",
];

fn opts() -> PkiOptions {
    PkiOptions {
        hostname: "edge-1".into(),
        etcd_ips: vec!["10.0.0.7".parse().unwrap()],
        ..Default::default()
    }
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn cert(p: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(p).unwrap()
}

fn roots(ca: &Path) -> Arc<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert(ca)).unwrap();
    Arc::new(roots)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[test]
fn creates_every_file_with_modes() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(dir.path(), &opts()).unwrap();
    for stem in CAS.iter().chain(LEAVES.iter()) {
        let crt = pki.tls_dir().join(format!("{stem}.crt"));
        let key = pki.tls_dir().join(format!("{stem}.key"));
        assert_eq!(mode(&key), 0o600, "{stem}.key");
        assert_eq!(mode(&crt), 0o644, "{stem}.crt");
        assert!(fs::read_to_string(&key).unwrap().contains("PRIVATE KEY"));
        assert!(fs::read_to_string(&crt)
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----"));
    }
    assert_eq!(mode(&dir.path().join("token")), 0o600);
    assert!(pki.etcd_server_ca_cert().exists());
}

#[test]
fn token_pins_the_server_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(dir.path(), &opts()).unwrap();
    let text = fs::read_to_string(dir.path().join("token")).unwrap();
    let text = text.trim_end();
    let ca = fs::read(dir.path().join("tls/server-ca.crt")).unwrap();
    let (prefix, secret) = text.split_once("::server:").unwrap();
    assert_eq!(prefix, format!("K10{}", token::ca_hash(&ca)));
    assert_eq!(secret.len(), 32);
    assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(pki.server_token.to_string(), text);
}

#[test]
fn restart_reuses_everything() {
    let dir = tempfile::tempdir().unwrap();
    Pki::ensure(dir.path(), &opts()).unwrap();
    let snapshot = |root: &Path| {
        let mut all = Vec::new();
        for stem in CAS.iter().chain(LEAVES.iter()) {
            for ext in ["crt", "key"] {
                all.push(fs::read(root.join(format!("tls/{stem}.{ext}"))).unwrap());
            }
        }
        all.push(fs::read(root.join("token")).unwrap());
        all
    };
    let before = snapshot(dir.path());
    let pki = Pki::ensure(dir.path(), &opts()).unwrap();
    assert_eq!(before, snapshot(dir.path()));
    assert_eq!(
        pki.server_token.to_string().as_bytes(),
        before.last().unwrap().trim_ascii_end()
    );
}

#[test]
fn missing_leaf_is_reissued_by_the_existing_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(dir.path(), &opts()).unwrap();
    let ca_before = fs::read(pki.etcd_server_ca_cert()).unwrap();
    let (crt, key) = pki.etcd_client_cert();
    fs::remove_file(&crt).unwrap();
    fs::remove_file(&key).unwrap();
    Pki::ensure(dir.path(), &opts()).unwrap();
    assert_eq!(ca_before, fs::read(pki.etcd_server_ca_cert()).unwrap());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots(&pki.etcd_server_ca_cert()),
        provider(),
    )
    .build()
    .unwrap();
    verifier
        .verify_client_cert(&cert(&crt), &[], UnixTime::now())
        .unwrap();
}

#[test]
fn half_a_pair_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    Pki::ensure(dir.path(), &opts()).unwrap();
    fs::remove_file(dir.path().join("tls/etcd/peer-ca.key")).unwrap();
    assert!(matches!(
        Pki::ensure(dir.path(), &opts()),
        Err(Error::Incomplete { .. })
    ));
}

#[test]
fn serving_cert_verifies_for_local_names() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(dir.path(), &opts()).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        roots(&pki.etcd_server_ca_cert()),
        provider(),
    )
    .build()
    .unwrap();
    let leaf = cert(&pki.etcd_serving_cert().0);
    for name in ["localhost", "127.0.0.1", "::1", "edge-1", "10.0.0.7"] {
        let sn = ServerName::try_from(name).unwrap();
        verifier
            .verify_server_cert(&leaf, &[], &sn, &[], UnixTime::now())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let other = ServerName::try_from("example.com").unwrap();
    assert!(verifier
        .verify_server_cert(&leaf, &[], &other, &[], UnixTime::now())
        .is_err());

    // The client cert verifies against the etcd server CA, not against another CA.
    let client = cert(&pki.etcd_client_cert().0);
    let ok = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots(&pki.etcd_server_ca_cert()),
        provider(),
    )
    .build()
    .unwrap();
    ok.verify_client_cert(&client, &[], UnixTime::now())
        .unwrap();
    let wrong = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots(&pki.tls_dir().join("server-ca.crt")),
        provider(),
    )
    .build()
    .unwrap();
    assert!(wrong
        .verify_client_cert(&client, &[], UnixTime::now())
        .is_err());
}

#[test]
fn serving_cert_is_reissued_for_a_new_listen_ip() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(dir.path(), &opts()).unwrap();
    let (serving, _) = pki.etcd_serving_cert();
    let (client, _) = pki.etcd_client_cert();
    let before = (fs::read(&serving).unwrap(), fs::read(&client).unwrap());
    let mut more = opts();
    more.etcd_ips.push("192.168.7.9".parse().unwrap());
    Pki::ensure(dir.path(), &more).unwrap();
    assert_ne!(
        fs::read(&serving).unwrap(),
        before.0,
        "serving cert reissued"
    );
    assert_eq!(fs::read(&client).unwrap(), before.1, "client cert kept");
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        roots(&pki.etcd_server_ca_cert()),
        provider(),
    )
    .build()
    .unwrap();
    let sn = ServerName::try_from("192.168.7.9").unwrap();
    verifier
        .verify_server_cert(&cert(&serving), &[], &sn, &[], UnixTime::now())
        .unwrap();
    // And kept from then on.
    let after = fs::read(&serving).unwrap();
    Pki::ensure(dir.path(), &more).unwrap();
    assert_eq!(fs::read(&serving).unwrap(), after);
}

#[test]
fn leaves_expiring_within_the_window_are_renewed() {
    let dir = tempfile::tempdir().unwrap();
    Pki::ensure(dir.path(), &opts()).unwrap();
    let etcd = dir.path().join("tls/etcd");
    let ca = ca::load_or_create_ca(&etcd, "server-ca", "unused").unwrap();
    let spec = ca::LeafSpec {
        common_name: "etcd-client".into(),
        organization: None,
        dns_names: Vec::new(),
        ips: Vec::new(),
        usage: Usage::Client,
    };
    let before = fs::read(etcd.join("client.crt")).unwrap();
    let day = std::time::Duration::from_secs(24 * 3600);
    ca::ensure_leaf_renewing(&etcd, "client", &spec, &ca, 90 * day).unwrap();
    assert_eq!(
        fs::read(etcd.join("client.crt")).unwrap(),
        before,
        "a fresh leaf stays"
    );
    ca::ensure_leaf_renewing(&etcd, "client", &spec, &ca, 400 * day).unwrap();
    let renewed = fs::read(etcd.join("client.crt")).unwrap();
    assert_ne!(
        renewed, before,
        "a leaf expiring within the window is reissued"
    );
    assert_eq!(mode(&etcd.join("client.key")), 0o600);
}
