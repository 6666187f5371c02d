//! Hand-made JWTs for tests: ES256 tokens signed with any PEM key file through `openssl`
//! (so a test can forge tokens with the server's own `service.key`, e.g. already expired).

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
    let input = format!(
        "{}.{}",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    );
    let dir = tempfile::tempdir().unwrap();
    let msg = dir.path().join("msg");
    std::fs::write(&msg, &input).unwrap();
    let out = Command::new("openssl")
        .args(["dgst", "-sha256", "-sign"])
        .arg(key_pem_file)
        .arg(&msg)
        .output()
        .expect("running openssl (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl dgst: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("{input}.{}", B64.encode(der_to_raw(&out.stdout)))
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
