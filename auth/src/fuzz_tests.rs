//! Property tests of the whole authentication path (client-certificate verification as the
//! TLS handshake does it, then the authenticator chain): random headers, random and mutated
//! bearer tokens, forged JWTs and random certificates never panic and never authenticate;
//! only the unmodified valid token and a certificate from the client CA do. OIDC ID tokens
//! signed by the issuer's key authenticate exactly when their claims should.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use futures::future::BoxFuture;
use proptest::prelude::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use serde_json::{json, Map, Value};

use super::authn::{AuthnRequest, Chain, Outcome, X509};
use super::oidc::jws::tests::Signer;
use super::oidc::jws::KeySet;
use super::oidc::provider::Provider;
use super::oidc::Oidc;
use super::request_header::{Headers, RequestHeader};
use super::serviceaccount::authenticator::{unix_now, Kind, Lookup};
use super::serviceaccount::claims::{self, Binding, BoundToken, ObjectRef};
use super::serviceaccount::{ServiceAccountTokens, SigningKey};
use super::token_file::TokenFile;

/// The token file's one token.
const STATIC_TOKEN: &str = "static-token-0123456789";
/// The OIDC issuer (on loopback, where nothing listens: key refreshes fail at once).
const OIDC_ISSUER: &str = "https://127.0.0.1:1/oidc";

#[derive(Debug, Default)]
struct Objects(HashMap<String, Value>);

impl Lookup for Objects {
    fn object<'a>(
        &'a self,
        kind: Kind,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, super::serviceaccount::authenticator::LookupError>>
    {
        let v = self.0.get(&format!("{kind:?}/{namespace}/{name}")).cloned();
        Box::pin(async move { Ok(v) })
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    key: Arc<SigningKey>,
    chain: Chain,
    verifier: Arc<dyn ClientCertVerifier>,
    /// A pod-bound token for `ns/default`, valid for an hour.
    token: String,
    claims: Map<String, Value>,
    admin_cert: CertificateDer<'static>,
    /// The OIDC issuer's signing key (kid `r`).
    oidc_key: Signer,
    runtime: tokio::runtime::Runtime,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let pki = k3rs_pki::Pki::ensure(dir.path(), &Default::default()).unwrap();
        let key = Arc::new(
            SigningKey::from_pem(&std::fs::read(pki.service_account_key()).unwrap()).unwrap(),
        );
        let mut objects = Objects::default();
        objects.0.insert(
            "ServiceAccount/ns/default".into(),
            json!({"metadata": {"name": "default", "uid": "sa-uid"}}),
        );
        objects.0.insert(
            "Pod/ns/p".into(),
            json!({"metadata": {"name": "p", "uid": "pod-uid"},
                "spec": {"serviceAccountName": "default"}}),
        );
        let tokens = ServiceAccountTokens::new(key.clone(), Arc::new(objects));
        let oidc_key = Signer::rsa();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            k3rs_apimachinery::tls::client_verifier(&pki.client_ca_cert(), provider).unwrap();
        // kube-apiserver's order: the authenticating proxy (its CA is the client CA here, only
        // `front-proxy` may assert users), certificates, the token file, service accounts.
        let chain = Chain::new(vec![
            Arc::new(RequestHeader {
                verifier: crate::cert_verdicts::CachedVerifier::new(verifier.clone()),
                allowed_names: vec!["front-proxy".into()],
                headers: Headers::default(),
            }),
            Arc::new(X509),
            Arc::new(TokenFile::parse(&format!("{STATIC_TOKEN},static,uid-s,grp"), "f").unwrap()),
            Arc::new(tokens),
            Arc::new(oidc(&oidc_key)),
        ]);
        let claims = claims::bound_claims(&BoundToken {
            namespace: "ns".into(),
            service_account: ObjectRef {
                name: "default".into(),
                uid: "sa-uid".into(),
            },
            audiences: claims::API_AUDIENCES
                .iter()
                .map(|a| a.to_string())
                .collect(),
            issued_at: unix_now(),
            expiration_seconds: 3600,
            binding: Some(Binding::Pod(ObjectRef {
                name: "p".into(),
                uid: "pod-uid".into(),
            })),
            pod_node: None,
            jti: "jti".into(),
        });
        let token = key.sign(&claims).unwrap();
        let admin_cert = CertificateDer::from_pem_file(pki.admin_client_cert().0).unwrap();
        Fixture {
            _dir: dir,
            key,
            chain,
            verifier,
            token,
            claims,
            admin_cert,
            oidc_key,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        }
    })
}

/// The OIDC authenticator of [`OIDC_ISSUER`] for client `k3rs`, groups from `groups` with
/// the `oidc:` prefix, knowing `key` as `r`.
fn oidc(key: &Signer) -> Oidc {
    let opts = super::oidc::Options {
        issuer_url: OIDC_ISSUER.into(),
        client_id: "k3rs".into(),
        groups_claim: Some("groups".into()),
        groups_prefix: "oidc:".into(),
        ..Default::default()
    };
    let jwt = super::oidc::model::JwtAuthenticator::from_flags(&opts).unwrap();
    let keys = KeySet::parse(json!({"keys": [key.jwk("r")]}).to_string().as_bytes()).unwrap();
    let tls = super::webhook::client::tls_config(super::webhook::client::Roots::Insecure, None);
    let provider = Provider::preloaded(OIDC_ISSUER, Arc::new(tls.unwrap()), keys);
    Oidc::with_provider(jwt, provider)
}

/// The TLS handshake's certificate check, then the chain.
fn authenticate(headers: &HeaderMap, certs: &[CertificateDer<'static>]) -> Outcome {
    let fx = fixture();
    if let Some(leaf) = certs.first() {
        if fx
            .verifier
            .verify_client_cert(leaf, &certs[1..], UnixTime::now())
            .is_err()
        {
            return Outcome::Rejected("handshake refused the certificate".into());
        }
    }
    let req = AuthnRequest {
        headers,
        peer_certs: certs,
        path: "/api",
    };
    fx.runtime.block_on(fx.chain.authenticate(&req))
}

fn bearer(token: &[u8]) -> Option<HeaderMap> {
    let value = HeaderValue::from_bytes(&[b"Bearer ", token].concat()).ok()?;
    let mut h = HeaderMap::new();
    h.insert(axum::http::header::AUTHORIZATION, value);
    Some(h)
}

fn is_authenticated(o: &Outcome) -> bool {
    matches!(o, Outcome::Authenticated(_))
}

#[test]
fn only_the_valid_token_and_the_ca_certificate_authenticate() {
    let fx = fixture();
    let Outcome::Authenticated(u) = authenticate(&bearer(fx.token.as_bytes()).unwrap(), &[]) else {
        panic!("the valid token authenticates")
    };
    assert_eq!(u.username, "system:serviceaccount:ns:default");
    let Outcome::Authenticated(u) =
        authenticate(&HeaderMap::new(), std::slice::from_ref(&fx.admin_cert))
    else {
        panic!("the admin certificate authenticates")
    };
    assert_eq!(u.username, "system:admin");
    assert_eq!(authenticate(&HeaderMap::new(), &[]), Outcome::NotApplicable);
    let Outcome::Authenticated(u) = authenticate(&bearer(STATIC_TOKEN.as_bytes()).unwrap(), &[])
    else {
        panic!("the token file's token authenticates")
    };
    assert_eq!((u.username.as_str(), u.uid.as_str()), ("static", "uid-s"));
    // Request headers from a certificate that is not the proxy's are ignored.
    let mut h = HeaderMap::new();
    h.insert("x-remote-user", HeaderValue::from_static("mallory"));
    let Outcome::Authenticated(u) = authenticate(&h, std::slice::from_ref(&fx.admin_cert)) else {
        panic!("the admin certificate authenticates")
    };
    assert_eq!(u.username, "system:admin");
    assert_eq!(authenticate(&h, &[]), Outcome::NotApplicable);
}

type Edit = Box<dyn Fn(&mut Map<String, Value>)>;

fn edit(f: impl Fn(&mut Map<String, Value>) + 'static) -> Edit {
    Box::new(f)
}

/// Tokens with a valid ES256 signature by the server's key but claims that must not pass,
/// and tokens with forged headers: every one is rejected.
#[test]
fn forged_and_misclaimed_tokens_are_rejected() {
    let fx = fixture();
    let now = unix_now();
    let edits: Vec<(&str, Edit)> = vec![
        ("issuer", edit(|c| c["iss"] = json!("https://evil"))),
        (
            "no issuer",
            edit(|c| {
                c.remove("iss");
            }),
        ),
        ("audience", edit(|c| c["aud"] = json!(["vault"]))),
        (
            "no audience",
            edit(|c| {
                c.remove("aud");
            }),
        ),
        ("expired", edit(move |c| c["exp"] = json!(now - 1))),
        (
            "no exp",
            edit(|c| {
                c.remove("exp");
            }),
        ),
        (
            "exp as string",
            edit(move |c| c["exp"] = json!((now + 100).to_string())),
        ),
        ("nbf future", edit(move |c| c["nbf"] = json!(now + 3600))),
        (
            "sa uid",
            edit(|c| c["kubernetes.io"]["serviceaccount"]["uid"] = json!("x")),
        ),
        (
            "sa name",
            edit(|c| c["kubernetes.io"]["serviceaccount"]["name"] = json!("other")),
        ),
        (
            "namespace",
            edit(|c| c["kubernetes.io"]["namespace"] = json!("other")),
        ),
        (
            "pod uid",
            edit(|c| c["kubernetes.io"]["pod"]["uid"] = json!("x")),
        ),
        (
            "pod name",
            edit(|c| c["kubernetes.io"]["pod"]["name"] = json!("gone")),
        ),
        (
            "no kubernetes.io",
            edit(|c| {
                c.remove("kubernetes.io");
            }),
        ),
        (
            "legacy without secret",
            edit(|c| c["iss"] = json!(claims::LEGACY_ISSUER)),
        ),
    ];
    for (what, edit) in &edits {
        let mut c = fx.claims.clone();
        edit(&mut c);
        let t = fx.key.sign(&c).unwrap();
        let out = authenticate(&bearer(t.as_bytes()).unwrap(), &[]);
        assert!(matches!(out, Outcome::Rejected(_)), "{what}: {out:?}");
    }
    let payload = B64.encode(Value::Object(fx.claims.clone()).to_string());
    let jwk = fx.key.jwk();
    let point = [
        &[4u8][..],
        &B64.decode(jwk["x"].as_str().unwrap()).unwrap(),
        &B64.decode(jwk["y"].as_str().unwrap()).unwrap(),
    ]
    .concat();
    let sig = fx.token.rsplit('.').next().unwrap();
    let mut forged = vec![
        format!("{}.{payload}.", B64.encode(r#"{"alg":"none"}"#)),
        format!("{}.{payload}.{sig}", B64.encode(r#"{"alg":"none"}"#)),
        format!("{}.{payload}.{sig}", B64.encode(r#"{"alg":"ES384"}"#)),
        format!(
            "{}.{payload}.{sig}",
            B64.encode(r#"{"alg":"ES256","kid":"other"}"#)
        ),
        format!(
            "{}.{payload}.{sig}",
            B64.encode(r#"{"alg":"ES256","crit":["x"]}"#)
        ),
    ];
    for secret in [point.clone(), jwk.to_string().into_bytes()] {
        let input = format!("{}.{payload}", B64.encode(r#"{"alg":"HS256"}"#));
        let mac = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret),
            input.as_bytes(),
        );
        forged.push(format!("{input}.{}", B64.encode(mac.as_ref())));
    }
    for t in &forged {
        let out = authenticate(&bearer(t.as_bytes()).unwrap(), &[]);
        assert!(!is_authenticated(&out), "{t}: {out:?}");
    }
}

fn self_signed_admin() -> CertificateDer<'static> {
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "system:admin");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:masters");
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().der().clone()
}

#[test]
fn a_look_alike_certificate_is_refused() {
    let out = authenticate(&HeaderMap::new(), &[self_signed_admin()]);
    assert!(matches!(out, Outcome::Rejected(_)), "{out:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// One flipped bit anywhere in the valid token: never authenticated (unless the flip only
    /// touched what the header parser trims away, leaving the valid token).
    #[test]
    fn a_flipped_bit_never_authenticates(pos in any::<usize>(), bit in 0u8..8) {
        let fx = fixture();
        let mut t = fx.token.clone().into_bytes();
        let i = pos % t.len();
        t[i] ^= 1 << bit;
        if let Some(h) = bearer(&t) {
            let out = authenticate(&h, &[]);
            let presented = AuthnRequest { headers: &h, peer_certs: &[], path: "/" }
                .bearer_token()
                .map(str::to_string);
            prop_assert!(
                !is_authenticated(&out) || presented.as_deref() == Some(fx.token.as_str()),
                "{out:?}"
            );
        }
    }

    /// Any token made of JWT-ish pieces (random base64url segments, random JSON headers and
    /// payloads under our issuer) or random bytes: never authenticated, never a panic.
    #[test]
    fn random_tokens_never_authenticate(
        header in prop::collection::vec(any::<u8>(), 0..64),
        payload_extra in "[a-z]{0,8}",
        sig in prop::collection::vec(any::<u8>(), 0..80),
        raw in prop::collection::vec(any::<u8>(), 0..3000),
        iss_ours in any::<bool>(),
    ) {
        let fx = fixture();
        let mut c = fx.claims.clone();
        if !iss_ours {
            c["iss"] = json!(payload_extra.clone());
        }
        c.insert(payload_extra, json!(1));
        let tokens = [
            format!("{}.{}.{}", B64.encode(&header), B64.encode(Value::Object(c.clone()).to_string()), B64.encode(&sig)),
            format!("{}.{}.{}", B64.encode(r#"{"alg":"ES256"}"#), B64.encode(Value::Object(c).to_string()), B64.encode(&sig)),
        ];
        for t in tokens.iter().map(|t| t.as_bytes()).chain([raw.as_slice()]) {
            if let Some(h) = bearer(t) {
                prop_assert!(!is_authenticated(&authenticate(&h, &[])));
            }
        }
    }

    /// Random header names and values (including huge, empty and non-UTF-8 ones, and any
    /// `Authorization` value): never authenticated without a valid credential.
    #[test]
    fn random_headers_never_authenticate(
        headers in prop::collection::vec(
            ("[a-zA-Z-]{1,20}|authorization|x-remote-user|x-remote-group|x-remote-extra-[a-z]{1,5}", prop::collection::vec(any::<u8>(), 0..512)),
            0..8,
        ),
        huge in any::<bool>(),
    ) {
        let mut h = HeaderMap::new();
        for (name, value) in &headers {
            if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value)) {
                h.append(n, v);
            }
        }
        if huge {
            let big = format!("Bearer {}", "A".repeat(1 << 20));
            h.insert(axum::http::header::AUTHORIZATION, HeaderValue::from_str(&big).unwrap());
        }
        prop_assert!(!is_authenticated(&authenticate(&h, &[])));
    }

    /// Random DER, PEM-wrapped random data and the admin certificate with one flipped bit are
    /// refused by the handshake's verifier; the x509 authenticator never panics on them.
    #[test]
    fn random_and_mutated_certificates_never_authenticate(
        der in prop::collection::vec(any::<u8>(), 0..2048),
        pos in any::<usize>(),
        bit in 0u8..8,
    ) {
        let fx = fixture();
        let mut flipped = fx.admin_cert.as_ref().to_vec();
        let i = pos % flipped.len();
        flipped[i] ^= 1 << bit;
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            base64::engine::general_purpose::STANDARD.encode(&der)
        );
        let mut candidates = vec![CertificateDer::from(der), CertificateDer::from(flipped)];
        if let Ok(c) = CertificateDer::from_pem_slice(pem.as_bytes()) {
            candidates.push(c);
        }
        for c in candidates {
            let _ = X509::user_of(&c);
            prop_assert!(!is_authenticated(&authenticate(&HeaderMap::new(), &[c.into_owned()])));
        }
    }
}

/// One way a claim can be present in an ID token, and whether it passes.
#[derive(Debug, Clone)]
struct Claim {
    value: Option<Value>,
    ok: bool,
}

fn claim(options: Vec<(Option<Value>, bool)>) -> impl Strategy<Value = Claim> {
    prop::sample::select(options).prop_map(|(value, ok)| Claim { value, ok })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// ID tokens signed by the issuer's key with random claims authenticate exactly when
    /// every claim passes (issuer, audience, expiry, not-before, username, groups), as the
    /// prefixed user; the same claims signed by another key never authenticate.
    #[test]
    fn oidc_tokens_authenticate_exactly_when_their_claims_pass(
        iss in claim(vec![(Some(json!(OIDC_ISSUER)), true), (Some(json!("https://127.0.0.1:1/other")), false), (None, false)]),
        aud in claim(vec![(Some(json!("k3rs")), true), (Some(json!(["x", "k3rs"])), true), (Some(json!("kubernetes")), false), (Some(json!(["x"])), false), (None, false)]),
        exp in claim(vec![(Some(json!(unix_now() + 600)), true), (Some(json!(unix_now() - 600)), false), (Some(json!("soon")), false), (None, false)]),
        nbf in claim(vec![(None, true), (Some(json!(unix_now() + 60)), true), (Some(json!(unix_now() + 3600)), false)]),
        sub in claim(vec![(Some(json!("alice")), true), (Some(json!("")), false), (Some(json!(7)), false), (None, false)]),
        groups in claim(vec![(None, true), (Some(json!("dev")), true), (Some(json!(["dev", "ops"])), true), (Some(json!([1])), false), (Some(json!({"g": 1})), false)]),
        extra in "[a-z]{1,8}",
        other_key in any::<bool>(),
    ) {
        let fx = fixture();
        let mut c = Map::new();
        for (name, cl) in [("iss", &iss), ("aud", &aud), ("exp", &exp), ("nbf", &nbf), ("sub", &sub), ("groups", &groups)] {
            if let Some(v) = &cl.value {
                c.insert(name.into(), v.clone());
            }
        }
        c.entry(extra).or_insert(json!(true));
        let claims = Value::Object(c);
        let token = if other_key {
            Signer::ec().sign("r", &claims)
        } else {
            fx.oidc_key.sign("r", &claims)
        };
        let out = authenticate(&bearer(token.as_bytes()).unwrap(), &[]);
        let pass = [&iss, &aud, &exp, &nbf, &sub, &groups].iter().all(|c| c.ok) && !other_key;
        prop_assert_eq!(is_authenticated(&out), pass, "{:?}", out);
        if let Outcome::Authenticated(u) = out {
            prop_assert_eq!(u.username, format!("{OIDC_ISSUER}#alice"));
            let want: Vec<String> = match &groups.value {
                None => vec![],
                Some(Value::String(g)) => vec![format!("oidc:{g}")],
                Some(_) => vec!["oidc:dev".into(), "oidc:ops".into()],
            };
            prop_assert_eq!(&u.groups[..want.len()], &want[..]);
            prop_assert_eq!(u.groups.len(), want.len() + 1);
        }
    }
}
