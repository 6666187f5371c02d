//! Compact JWS (RFC 7515) signed with ES256 (ECDSA P-256, SHA-256) by the service-account
//! key, with `ring` (already in the tree for TLS) doing the cryptography.
//!
//! # Guarantees
//! - [`SigningKey::verify`] returns claims only for a token whose header names `ES256` (never
//!   `none`, never an HMAC or other algorithm), whose `kid`, when present, is this key's, and
//!   whose signature over the exact header and payload bytes verifies with this key.
//! - The key id is kube-apiserver's: base64url (unpadded) of the SHA-256 of the public key's
//!   DER `SubjectPublicKeyInfo`, so tokens and JWKS look like upstream's.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// The only algorithm tokens are signed and accepted with.
pub const ALGORITHM: &str = "ES256";

/// `SubjectPublicKeyInfo` DER prefix of an uncompressed P-256 point (id-ecPublicKey,
/// prime256v1, BIT STRING of 66 bytes).
const P256_SPKI_PREFIX: &[u8] = &[
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// Why a key could not be loaded or a token not signed or verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// The signing key could not be read or parsed (why).
    #[error("service-account key: {0}")]
    Key(String),
    /// The token is not three base64url JWS segments with JSON header and payload (what is wrong).
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// The header's `alg` is not `ES256`.
    #[error("unexpected signing algorithm {0:?}")]
    Algorithm(String),
    /// The header's `kid` is not this key's id.
    #[error("token signed by another key ({0:?})")]
    KeyId(String),
    /// The signature does not verify with the key.
    #[error("invalid signature")]
    Signature,
    /// The signer failed to sign.
    #[error("signing failed")]
    Sign,
}

/// The service-account signing key and its public half.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Loads a PKCS#8 P-256 private key (PEM `PRIVATE KEY`, as `service.key` is written).
    pub fn from_pem(pem: &[u8]) -> Result<SigningKey, JwtError> {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(pem)
            .map_err(|e| JwtError::Key(format!("not a PKCS#8 PEM key: {e}")))?;
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            der.secret_pkcs8_der(),
            &rng,
        )
        .map_err(|e| JwtError::Key(format!("not an ECDSA P-256 key: {e}")))?;
        let spki = [P256_SPKI_PREFIX, pair.public_key().as_ref()].concat();
        let kid = B64.encode(Sha256::digest(&spki));
        Ok(SigningKey { pair, kid, rng })
    }

    /// The key id (`kid` header of every token, and of the JWK).
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK (RFC 7517), as `/openid/v1/jwks` lists it.
    pub fn jwk(&self) -> Value {
        let point = self.pair.public_key().as_ref();
        json!({
            "use": "sig",
            "kty": "EC",
            "kid": self.kid,
            "crv": "P-256",
            "alg": ALGORITHM,
            "x": B64.encode(&point[1..33]),
            "y": B64.encode(&point[33..65]),
        })
    }

    /// Signs `claims` (a JSON object) into a compact JWS.
    pub fn sign(&self, claims: &Map<String, Value>) -> Result<String, JwtError> {
        let header = json!({"alg": ALGORITHM, "kid": self.kid});
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(Value::Object(claims.clone()).to_string())
        );
        let sig = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| JwtError::Sign)?;
        Ok(format!("{input}.{}", B64.encode(sig.as_ref())))
    }

    /// The claims of `token` when it is a JWS this key signed (see the module guarantees).
    pub fn verify(&self, token: &str) -> Result<Map<String, Value>, JwtError> {
        let (header, payload, sig) = split(token)?;
        let header = object(header)?;
        match header.get("alg").and_then(Value::as_str) {
            Some(ALGORITHM) => {}
            other => {
                return Err(JwtError::Algorithm(
                    other.unwrap_or_default().chars().take(32).collect(),
                ))
            }
        }
        match header.get("kid") {
            None => {}
            Some(Value::String(k)) if *k == self.kid => {}
            Some(other) => return Err(JwtError::KeyId(other.to_string())),
        }
        let sig = B64
            .decode(sig)
            .map_err(|_| JwtError::Malformed("signature is not base64url"))?;
        let signed = &token[..header_payload_len(token)];
        signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            self.pair.public_key().as_ref(),
        )
        .verify(signed.as_bytes(), &sig)
        .map_err(|_| JwtError::Signature)?;
        object(payload)
    }
}

/// The claims of a token without checking its signature: only to decide whether a token is
/// this authenticator's kind (its issuer) before verifying it.
pub fn unverified_claims(token: &str) -> Result<Map<String, Value>, JwtError> {
    let (_, payload, _) = split(token)?;
    object(payload)
}

pub(crate) fn split(token: &str) -> Result<(&str, &str, &str), JwtError> {
    let mut parts = token.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(p), Some(s), None) if !h.is_empty() && !p.is_empty() => Ok((h, p, s)),
        _ => Err(JwtError::Malformed("not three dot-separated parts")),
    }
}

/// Length of `header.payload` (the signed input) in a token [`split`] accepted.
pub(crate) fn header_payload_len(token: &str) -> usize {
    token.rfind('.').unwrap_or(token.len())
}

pub(crate) fn object(part: &str) -> Result<Map<String, Value>, JwtError> {
    let bytes = B64
        .decode(part)
        .map_err(|_| JwtError::Malformed("segment is not base64url"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(JwtError::Malformed("segment is not a JSON object")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh key, as `service.key` would hold it.
    pub(crate) fn key() -> SigningKey {
        let pem = rcgen::KeyPair::generate().unwrap().serialize_pem();
        SigningKey::from_pem(pem.as_bytes()).unwrap()
    }

    fn claims() -> Map<String, Value> {
        json!({"iss": "me", "sub": "you"})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let k = key();
        let t = k.sign(&claims()).unwrap();
        assert_eq!(t.split('.').count(), 3);
        assert_eq!(k.verify(&t).unwrap(), claims());
        let header = object(t.split('.').next().unwrap()).unwrap();
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["kid"], k.kid());
        assert_eq!(k.kid().len(), 43);
    }

    #[test]
    fn another_key_alg_none_and_hmac_are_refused() {
        let (k, other) = (key(), key());
        let t = other.sign(&claims()).unwrap();
        assert!(matches!(k.verify(&t), Err(JwtError::KeyId(_))));
        // The same token without a kid: the signature decides.
        let (_, p, s) = split(&t).unwrap();
        let no_kid = format!("{}.{p}.{s}", B64.encode(r#"{"alg":"ES256"}"#));
        assert_eq!(k.verify(&no_kid), Err(JwtError::Signature));
        let none = format!("{}.{p}.", B64.encode(r#"{"alg":"none"}"#));
        assert_eq!(k.verify(&none), Err(JwtError::Algorithm("none".into())));
        let hs = format!("{}.{p}.{s}", B64.encode(r#"{"alg":"HS256"}"#));
        assert_eq!(k.verify(&hs), Err(JwtError::Algorithm("HS256".into())));
        assert_eq!(
            k.verify("a.b"),
            Err(JwtError::Malformed("not three dot-separated parts"))
        );
    }

    #[test]
    fn jwk_is_the_public_point() {
        let k = key();
        let jwk = k.jwk();
        let x = B64.decode(jwk["x"].as_str().unwrap()).unwrap();
        let y = B64.decode(jwk["y"].as_str().unwrap()).unwrap();
        let point = [&[4u8][..], &x, &y].concat();
        assert_eq!(point, k.pair.public_key().as_ref());
        assert_eq!(jwk["kid"], k.kid());
        assert_eq!(jwk["crv"], "P-256");
    }
}
