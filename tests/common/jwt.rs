//! Hand-made JWTs for tests: ES256 and RS256 tokens signed with any PEM key file through
//! `openssl` (so a test can forge tokens with the server's own `service.key`, e.g. already
//! expired, or play an OIDC issuer), and keys with their public JWKs.

use std::path::Path;
use std::process::Command;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;

/// A compact JWS of `header` and `claims` (JSON), signed ES256 with the P-256 key in
/// `key_pem_file`.
pub fn sign_es256(
    key_pem_file: &Path,
    header: &serde_json::Value,
    claims: &serde_json::Value,
) -> String {
    sign(key_pem_file, header, claims, |der| der_to_raw(&der))
}

/// A compact JWS of `header` and `claims`, signed RS256 (PKCS#1 v1.5, SHA-256) with the RSA
/// key in `key_pem_file`.
pub fn sign_rs256(
    key_pem_file: &Path,
    header: &serde_json::Value,
    claims: &serde_json::Value,
) -> String {
    sign(key_pem_file, header, claims, |sig| sig)
}

fn sign(
    key_pem_file: &Path,
    header: &serde_json::Value,
    claims: &serde_json::Value,
    raw: impl Fn(Vec<u8>) -> Vec<u8>,
) -> String {
    let input = format!(
        "{}.{}",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    );
    let dir = tempfile::tempdir().unwrap();
    let msg = dir.path().join("msg");
    std::fs::write(&msg, &input).unwrap();
    let out = openssl(&["dgst", "-sha256", "-sign", path(key_pem_file), path(&msg)]);
    format!("{input}.{}", B64.encode(raw(out)))
}

/// The claims (JSON payload) of a compact JWS, unverified.
pub fn claims(token: &str) -> serde_json::Value {
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = B64.decode(payload).expect("base64url payload");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

/// A new private key in `file`: `rsa` (2048 bits) or `ec` (P-256).
pub fn generate_key(file: &Path, kind: &str) {
    let opt = match kind {
        "rsa" => "rsa_keygen_bits:2048",
        _ => "ec_paramgen_curve:P-256",
    };
    let alg = if kind == "rsa" { "RSA" } else { "EC" };
    openssl(&[
        "genpkey",
        "-algorithm",
        alg,
        "-pkeyopt",
        opt,
        "-out",
        path(file),
    ]);
}

/// The public JWK of the `kind` key in `file` (made by [`generate_key`]) with key id `kid`.
pub fn public_jwk(file: &Path, kind: &str, kid: &str) -> serde_json::Value {
    if kind == "rsa" {
        let text = openssl(&["rsa", "-in", path(file), "-noout", "-modulus"]);
        let text = String::from_utf8(text).unwrap();
        let n = hex::decode(text.trim().strip_prefix("Modulus=").unwrap()).unwrap();
        // genpkey's public exponent is 65537.
        return serde_json::json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
            "n": B64.encode(n), "e": "AQAB"});
    }
    // A P-256 SubjectPublicKeyInfo ends with the 65-byte uncompressed point.
    let der = openssl(&["pkey", "-in", path(file), "-pubout", "-outform", "DER"]);
    let point = &der[der.len() - 64..];
    serde_json::json!({"kty": "EC", "kid": kid, "use": "sig", "crv": "P-256",
        "x": B64.encode(&point[..32]), "y": B64.encode(&point[32..])})
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `openssl args…`'s stdout (a failure fails the test).
fn openssl(args: &[&str]) -> Vec<u8> {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("running openssl (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// An ECDSA signature in DER (`SEQUENCE { INTEGER r, INTEGER s }`) → JWS's 64-byte `r‖s`.
fn der_to_raw(der: &[u8]) -> Vec<u8> {
    assert_eq!(der[0], 0x30, "DER signature");
    // P-256 signatures are < 128 bytes: one length byte everywhere.
    let mut at = 2;
    let mut raw = Vec::with_capacity(64);
    for _ in 0..2 {
        assert_eq!(der[at], 0x02, "DER integer");
        let len = der[at + 1] as usize;
        let int = &der[at + 2..at + 2 + len];
        let int = &int[int.len().saturating_sub(32)..];
        raw.extend(std::iter::repeat_n(0u8, 32 - int.len()));
        raw.extend_from_slice(int);
        at += 2 + len;
    }
    raw
}
