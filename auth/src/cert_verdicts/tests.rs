use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rcgen::{CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::*;

/// The real webpki verifier for one CA, counting the verifications that reach it.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn ClientCertVerifier>,
    calls: AtomicUsize,
}

impl ClientCertVerifier for Counting {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner
            .verify_client_cert(end_entity, intermediates, now)
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Seconds since the epoch of 2030-01-01, the tests' "now".
const T0: u64 = 1_893_456_000;

fn at(secs: u64) -> UnixTime {
    UnixTime::since_unix_epoch(Duration::from_secs(secs))
}

fn time(secs: u64) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(secs as i64).unwrap()
}

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
}

fn ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.not_before = time(T0 - 86_400);
    params.not_after = time(T0 + 10 * 86_400);
    let key = KeyPair::generate().unwrap();
    let der = params.self_signed(&key).unwrap().der().clone();
    Ca {
        issuer: Issuer::new(params, key),
        der,
    }
}

/// A client certificate for `cn` from `ca`, valid from `T0 - 60` to `not_after`.
fn client(ca: &Ca, cn: &str, not_after: u64) -> Vec<CertificateDer<'static>> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    params.not_before = time(T0 - 60);
    params.not_after = time(not_after);
    let key = KeyPair::generate().unwrap();
    vec![params.signed_by(&key, &ca.issuer).unwrap().der().clone()]
}

fn verifier(ca: &Ca) -> (Arc<Counting>, CachedVerifier) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let inner =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
    let counting = Arc::new(Counting {
        inner,
        calls: AtomicUsize::new(0),
    });
    (counting.clone(), CachedVerifier::new(counting))
}

#[test]
fn a_chain_is_verified_once_and_its_verdict_reused() {
    let ca = ca("client-ca");
    let (count, v) = verifier(&ca);
    let alice = client(&ca, "alice", T0 + 3600);
    for i in 0..5 {
        assert_eq!(v.verify(&alice, at(T0 + i)), Ok(()));
    }
    assert_eq!(count.calls.load(Ordering::SeqCst), 1);
    // Another certificate is verified on its own.
    let bob = client(&ca, "bob", T0 + 3600);
    assert_eq!(v.verify(&bob, at(T0)), Ok(()));
    assert_eq!(count.calls.load(Ordering::SeqCst), 2);
    assert_eq!(v.len(), 2);
}

#[test]
fn an_expired_certificate_is_refused_from_its_not_after_on() {
    let ca = ca("client-ca");
    let (count, v) = verifier(&ca);
    let expiring = client(&ca, "alice", T0 + 100);
    assert_eq!(v.verify(&expiring, at(T0)), Ok(()));
    assert_eq!(
        v.verify(&expiring, at(T0 + 100)),
        Ok(()),
        "valid through notAfter"
    );
    assert_eq!(count.calls.load(Ordering::SeqCst), 1);
    let late = v.verify(&expiring, at(T0 + 101));
    assert!(
        late.is_err_and(|e| e.contains("xpired")),
        "refused once expired"
    );
    assert_eq!(count.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn a_verdict_is_not_reused_past_the_ttl_or_before_it_was_made() {
    let ca = ca("client-ca");
    let (count, v) = verifier(&ca);
    let alice = client(&ca, "alice", T0 + 5 * 86_400);
    assert_eq!(v.verify(&alice, at(T0)), Ok(()));
    assert_eq!(v.verify(&alice, at(T0 + TTL_SECS)), Ok(()));
    assert_eq!(count.calls.load(Ordering::SeqCst), 1);
    assert_eq!(v.verify(&alice, at(T0 + TTL_SECS + 1)), Ok(()));
    assert_eq!(
        count.calls.load(Ordering::SeqCst),
        2,
        "re-verified after the TTL"
    );
    // A clock stepped back before the verdict: verified again.
    assert_eq!(v.verify(&alice, at(T0 + TTL_SECS)), Ok(()));
    assert_eq!(count.calls.load(Ordering::SeqCst), 3);
}

#[test]
fn a_certificate_of_another_ca_stays_refused_and_failures_are_remembered() {
    let ours = ca("client-ca");
    let theirs = ca("client-ca"); // the same name, another key: a forgery of our CA
    let (count, v) = verifier(&ours);
    let good = client(&ours, "admin", T0 + 3600);
    let forged = client(&theirs, "admin", T0 + 3600);
    assert_eq!(v.verify(&good, at(T0)), Ok(()));
    for _ in 0..3 {
        assert!(
            v.verify(&forged, at(T0 + 1)).is_err(),
            "never the good verdict"
        );
    }
    assert_eq!(
        count.calls.load(Ordering::SeqCst),
        2,
        "the failure is remembered"
    );
    assert!(v.verify(&[], at(T0)).is_err(), "no certificate");
}

#[test]
fn the_memory_is_bounded() {
    let ca = ca("client-ca");
    let (count, v) = verifier(&ca);
    // Distinct garbage chains: each fails (and is remembered) on its own.
    for i in 0..(CAPACITY as u32 * 2 + 7) {
        let junk = vec![CertificateDer::from(i.to_be_bytes().to_vec())];
        assert!(v.verify(&junk, at(T0)).is_err());
        assert!(v.len() <= CAPACITY);
    }
    assert_eq!(count.calls.load(Ordering::SeqCst), CAPACITY * 2 + 7);
    assert!(!v.is_empty());
}
