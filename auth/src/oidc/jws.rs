//! An OIDC provider's key set (JWKS, RFC 7517) and the verification of the ID tokens it
//! signs (compact JWS, RFC 7515), with `ring` doing the cryptography.
//!
//! # Guarantees
//! - [`KeySet::verify`] returns claims only for a token whose header names one of the
//!   allowed asymmetric algorithms (never `none`, never HMAC), and whose signature over the
//!   exact header and payload bytes verifies with a key of the set of the algorithm's type
//!   (and curve) — the key the `kid` names when the header has one.
//! - Keys that cannot be used for signatures (`use` other than `sig`, unknown `kty` or
//!   curve, malformed numbers) are left out of the set instead of failing it.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ring::signature::{self, VerificationAlgorithm};
use serde_json::{Map, Value};

use crate::serviceaccount::jwt;

/// A JWS algorithm an ID token may be signed with (`--oidc-signing-algs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    Rs384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    Rs512,
    /// RSASSA-PSS with SHA-256.
    Ps256,
    /// RSASSA-PSS with SHA-384.
    Ps384,
    /// RSASSA-PSS with SHA-512.
    Ps512,
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// ECDSA on P-384 with SHA-384.
    Es384,
}

impl Algorithm {
    /// The algorithm named `name` (`ES512` is not offered: `ring` has no P-521).
    pub fn parse(name: &str) -> Option<Algorithm> {
        Some(match name {
            "RS256" => Algorithm::Rs256,
            "RS384" => Algorithm::Rs384,
            "RS512" => Algorithm::Rs512,
            "PS256" => Algorithm::Ps256,
            "PS384" => Algorithm::Ps384,
            "PS512" => Algorithm::Ps512,
            "ES256" => Algorithm::Es256,
            "ES384" => Algorithm::Es384,
            _ => return None,
        })
    }

    /// The algorithm's JWS `alg` name (e.g. `RS256`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Rs256 => "RS256",
            Algorithm::Rs384 => "RS384",
            Algorithm::Rs512 => "RS512",
            Algorithm::Ps256 => "PS256",
            Algorithm::Ps384 => "PS384",
            Algorithm::Ps512 => "PS512",
            Algorithm::Es256 => "ES256",
            Algorithm::Es384 => "ES384",
        }
    }

    /// The curve of the EC keys this algorithm uses; `None` for RSA.
    fn curve(self) -> Option<Curve> {
        match self {
            Algorithm::Es256 => Some(Curve::P256),
            Algorithm::Es384 => Some(Curve::P384),
            _ => None,
        }
    }

    fn rsa(self) -> Option<&'static signature::RsaParameters> {
        Some(match self {
            Algorithm::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
            Algorithm::Rs384 => &signature::RSA_PKCS1_2048_8192_SHA384,
            Algorithm::Rs512 => &signature::RSA_PKCS1_2048_8192_SHA512,
            Algorithm::Ps256 => &signature::RSA_PSS_2048_8192_SHA256,
            Algorithm::Ps384 => &signature::RSA_PSS_2048_8192_SHA384,
            Algorithm::Ps512 => &signature::RSA_PSS_2048_8192_SHA512,
            Algorithm::Es256 | Algorithm::Es384 => return None,
        })
    }
}

/// An elliptic curve of an EC key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    /// NIST P-256 (`crv: "P-256"`).
    P256,
    /// NIST P-384 (`crv: "P-384"`).
    P384,
}

impl Curve {
    /// Bytes of one coordinate.
    fn size(self) -> usize {
        match self {
            Curve::P256 => 32,
            Curve::P384 => 48,
        }
    }

    fn verifier(self) -> &'static dyn VerificationAlgorithm {
        match self {
            Curve::P256 => &signature::ECDSA_P256_SHA256_FIXED,
            Curve::P384 => &signature::ECDSA_P384_SHA384_FIXED,
        }
    }
}

/// A public key's material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// Modulus and exponent, big-endian without leading zeros.
    Rsa {
        /// The modulus.
        n: Vec<u8>,
        /// The public exponent.
        e: Vec<u8>,
    },
    /// The uncompressed point `04 ‖ x ‖ y`.
    Ec {
        /// The key's curve.
        curve: Curve,
        /// The point, `04 ‖ x ‖ y`.
        point: Vec<u8>,
    },
}

/// One usable key of a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    /// The key's id (`kid`), matched against the token header's `kid`.
    pub kid: Option<String>,
    /// The algorithm the key is restricted to (`alg`), if any.
    pub alg: Option<String>,
    /// The key material.
    pub key: PublicKey,
}

impl Jwk {
    /// The key a JWK object describes, `None` when it is not a usable signature key.
    pub fn parse(v: &Value) -> Option<Jwk> {
        let str_of = |k: &str| v.get(k).and_then(Value::as_str);
        if str_of("use").is_some_and(|u| u != "sig") {
            return None;
        }
        let bytes = |k: &str| str_of(k).and_then(|s| B64.decode(s).ok());
        let key = match str_of("kty")? {
            "RSA" => {
                let strip = |b: Vec<u8>| {
                    let zeros = b.iter().take_while(|x| **x == 0).count();
                    b[zeros..].to_vec()
                };
                let (n, e) = (strip(bytes("n")?), strip(bytes("e")?));
                if n.is_empty() || e.is_empty() {
                    return None;
                }
                PublicKey::Rsa { n, e }
            }
            "EC" => {
                let curve = match str_of("crv")? {
                    "P-256" => Curve::P256,
                    "P-384" => Curve::P384,
                    _ => return None,
                };
                let (x, y) = (bytes("x")?, bytes("y")?);
                if x.len() != curve.size() || y.len() != curve.size() {
                    return None;
                }
                PublicKey::Ec {
                    curve,
                    point: [&[4u8][..], &x, &y].concat(),
                }
            }
            _ => return None,
        };
        Some(Jwk {
            kid: str_of("kid").map(str::to_string),
            alg: str_of("alg").map(str::to_string),
            key,
        })
    }

    /// Whether this key can check a signature made with `alg`.
    fn fits(&self, alg: Algorithm) -> bool {
        if self.alg.as_deref().is_some_and(|a| a != alg.name()) {
            return false;
        }
        match &self.key {
            PublicKey::Rsa { .. } => alg.rsa().is_some(),
            PublicKey::Ec { curve, .. } => alg.curve() == Some(*curve),
        }
    }

    fn verifies(&self, alg: Algorithm, signed: &[u8], sig: &[u8]) -> bool {
        match (&self.key, alg.rsa()) {
            (PublicKey::Rsa { n, e }, Some(params)) => signature::RsaPublicKeyComponents { n, e }
                .verify(params, signed, sig)
                .is_ok(),
            (PublicKey::Ec { curve, point }, None) => {
                signature::UnparsedPublicKey::new(curve.verifier(), point)
                    .verify(signed, sig)
                    .is_ok()
            }
            _ => false,
        }
    }
}

/// Why a token did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The token is not three base64url JWS segments with a JSON header (what is wrong).
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// The header's `alg` is not one of the allowed algorithms.
    #[error("oidc: id token signed with unsupported algorithm {0:?}")]
    Algorithm(String),
    /// No key of the set is the one the token names (or fits its algorithm): the provider
    /// may have rotated its keys.
    #[error("oidc: no key {0:?} for the token's algorithm in the provider's key set")]
    UnknownKey(String),
    /// A key fits but the signature does not verify with it.
    #[error("oidc: failed to verify signature")]
    Signature,
}

/// Why a JWKS document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KeySetError {
    /// The document is not JSON.
    #[error("not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The document has no `keys` array.
    #[error("no \"keys\" array")]
    NoKeys,
}

/// A provider's usable keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeySet {
    /// The keys, in the document's order (unusable ones dropped).
    pub keys: Vec<Jwk>,
}

impl KeySet {
    /// The usable keys of a JWKS document (`{"keys": [...]}`).
    pub fn parse(doc: &[u8]) -> Result<KeySet, KeySetError> {
        let v: Value = serde_json::from_slice(doc).map_err(KeySetError::Json)?;
        let keys = v
            .get("keys")
            .and_then(Value::as_array)
            .ok_or(KeySetError::NoKeys)?;
        Ok(KeySet {
            keys: keys.iter().filter_map(Jwk::parse).collect(),
        })
    }

    /// The claims of `token` when one of these keys signed it with one of `allowed`.
    pub fn verify(
        &self,
        token: &str,
        allowed: &[Algorithm],
    ) -> Result<Map<String, Value>, VerifyError> {
        let malformed = |e: jwt::JwtError| match e {
            jwt::JwtError::Malformed(m) => VerifyError::Malformed(m),
            _ => VerifyError::Malformed("unreadable"),
        };
        let (header, payload, sig) = jwt::split(token).map_err(malformed)?;
        let header = jwt::object(header).map_err(malformed)?;
        let alg_name = header
            .get("alg")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let alg = Algorithm::parse(alg_name)
            .filter(|a| allowed.contains(a))
            .ok_or_else(|| VerifyError::Algorithm(alg_name.chars().take(32).collect()))?;
        let kid = match header.get("kid") {
            None => None,
            Some(Value::String(k)) => Some(k.as_str()),
            Some(_) => return Err(VerifyError::Malformed("kid is not a string")),
        };
        let sig = B64
            .decode(sig)
            .map_err(|_| VerifyError::Malformed("signature is not base64url"))?;
        let signed = &token.as_bytes()[..jwt::header_payload_len(token)];
        let mut candidates = self
            .keys
            .iter()
            .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
            .filter(|k| k.fits(alg))
            .peekable();
        if candidates.peek().is_none() {
            return Err(VerifyError::UnknownKey(
                kid.unwrap_or_default().chars().take(64).collect(),
            ));
        }
        if !candidates.any(|k| k.verifies(alg, signed, &sig)) {
            return Err(VerifyError::Signature);
        }
        jwt::object(payload).map_err(malformed)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, KeyPair, RsaKeyPair};
    use serde_json::json;

    /// A fixed 2048-bit RSA test key (PKCS#8 PEM; `ring` cannot generate RSA keys).
    const RSA_PEM: &[u8] = include_bytes!("testdata/rsa.pem");

    /// A signer for tests: an RSA or P-256 key with its JWK.
    pub(crate) enum Signer {
        Rsa(RsaKeyPair),
        Ec(EcdsaKeyPair),
    }

    impl Signer {
        pub(crate) fn rsa() -> Signer {
            use rustls::pki_types::pem::PemObject;
            let der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(RSA_PEM).unwrap();
            Signer::Rsa(RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).unwrap())
        }

        pub(crate) fn ec() -> Signer {
            let rng = SystemRandom::new();
            let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
            let doc = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
            Signer::Ec(EcdsaKeyPair::from_pkcs8(alg, doc.as_ref(), &rng).unwrap())
        }

        pub(crate) fn jwk(&self, kid: &str) -> Value {
            match self {
                Signer::Rsa(k) => {
                    let c = signature::RsaPublicKeyComponents::<Vec<u8>>::from(k.public());
                    json!({"kty": "RSA", "kid": kid, "use": "sig",
                        "n": B64.encode(&c.n), "e": B64.encode(&c.e)})
                }
                Signer::Ec(k) => {
                    let p = k.public_key().as_ref();
                    json!({"kty": "EC", "kid": kid, "crv": "P-256",
                        "x": B64.encode(&p[1..33]), "y": B64.encode(&p[33..65])})
                }
            }
        }

        /// A compact JWS of `claims` with `header` (signed with RS256 or ES256).
        pub(crate) fn sign_with_header(&self, header: &Value, claims: &Value) -> String {
            let input = format!(
                "{}.{}",
                B64.encode(header.to_string()),
                B64.encode(claims.to_string())
            );
            let rng = SystemRandom::new();
            let sig = match self {
                Signer::Rsa(k) => {
                    let mut sig = vec![0; k.public().modulus_len()];
                    k.sign(
                        &signature::RSA_PKCS1_SHA256,
                        &rng,
                        input.as_bytes(),
                        &mut sig,
                    )
                    .unwrap();
                    sig
                }
                Signer::Ec(k) => k.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec(),
            };
            format!("{input}.{}", B64.encode(sig))
        }

        pub(crate) fn sign(&self, kid: &str, claims: &Value) -> String {
            let alg = match self {
                Signer::Rsa(_) => "RS256",
                Signer::Ec(_) => "ES256",
            };
            self.sign_with_header(&json!({"alg": alg, "kid": kid}), claims)
        }
    }

    fn set(keys: &[(&Signer, &str)]) -> KeySet {
        let doc = json!({"keys": keys.iter().map(|(s, k)| s.jwk(k)).collect::<Vec<_>>()});
        KeySet::parse(doc.to_string().as_bytes()).unwrap()
    }

    const BOTH: &[Algorithm] = &[Algorithm::Rs256, Algorithm::Es256];

    #[test]
    fn rsa_and_ec_tokens_verify_with_their_keys() {
        let (rsa, ec) = (Signer::rsa(), Signer::ec());
        let keys = set(&[(&rsa, "r"), (&ec, "e")]);
        let claims = json!({"iss": "https://issuer", "sub": "alice"});
        for (s, kid) in [(&rsa, "r"), (&ec, "e")] {
            let got = keys.verify(&s.sign(kid, &claims), BOTH).unwrap();
            assert_eq!(Value::Object(got), claims);
        }
        // Without a kid, every key of the algorithm's type is tried.
        let t = ec.sign_with_header(&json!({"alg": "ES256"}), &claims);
        assert!(keys.verify(&t, BOTH).is_ok());
    }

    #[test]
    fn algorithms_outside_the_allowed_list_and_none_or_hmac_are_refused() {
        let rsa = Signer::rsa();
        let keys = set(&[(&rsa, "r")]);
        let t = rsa.sign("r", &json!({"sub": "a"}));
        assert_eq!(
            keys.verify(&t, &[Algorithm::Es256]),
            Err(VerifyError::Algorithm("RS256".into()))
        );
        let body = B64.encode(json!({"sub": "a"}).to_string());
        for alg in ["none", "HS256"] {
            let header = B64.encode(json!({"alg": alg, "kid": "r"}).to_string());
            let forged = format!("{header}.{body}.");
            assert_eq!(
                keys.verify(&forged, BOTH),
                Err(VerifyError::Algorithm(alg.into()))
            );
        }
        // HS256 "signed" with the public modulus as the secret is still refused.
        let mac_key = ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            rsa.jwk("r")["n"].as_str().unwrap().as_bytes(),
        );
        let header = B64.encode(json!({"alg": "HS256", "kid": "r"}).to_string());
        let input = format!("{header}.{body}");
        let tag = ring::hmac::sign(&mac_key, input.as_bytes());
        let forged = format!("{input}.{}", B64.encode(tag.as_ref()));
        assert_eq!(
            keys.verify(&forged, BOTH),
            Err(VerifyError::Algorithm("HS256".into()))
        );
    }

    #[test]
    fn wrong_kid_other_key_and_tampering_fail() {
        let (rsa, other) = (Signer::rsa(), Signer::ec());
        let ec = Signer::ec();
        let keys = set(&[(&rsa, "r"), (&ec, "e")]);
        let claims = json!({"sub": "alice"});
        assert_eq!(
            keys.verify(&rsa.sign("unknown", &claims), BOTH),
            Err(VerifyError::UnknownKey("unknown".into()))
        );
        // An ES256 token naming the RSA key's kid: no key of that type.
        assert_eq!(
            keys.verify(&ec.sign("r", &claims), BOTH),
            Err(VerifyError::UnknownKey("r".into()))
        );
        // Signed by another P-256 key under a known kid.
        assert_eq!(
            keys.verify(&other.sign("e", &claims), BOTH),
            Err(VerifyError::Signature)
        );
        let t = rsa.sign("r", &claims);
        let mut parts: Vec<&str> = t.split('.').collect();
        let tampered = B64.encode(json!({"sub": "admin"}).to_string());
        parts[1] = &tampered;
        assert_eq!(
            keys.verify(&parts.join("."), BOTH),
            Err(VerifyError::Signature)
        );
        assert!(matches!(
            keys.verify("a.b", BOTH),
            Err(VerifyError::Malformed(_))
        ));
    }

    #[test]
    fn jwk_parsing_keeps_only_usable_signature_keys() {
        let rsa = Signer::rsa();
        let mut enc = rsa.jwk("enc");
        enc["use"] = json!("enc");
        let mut restricted = rsa.jwk("ps");
        restricted["alg"] = json!("PS256");
        let doc = json!({"keys": [
            rsa.jwk("ok"), enc, restricted,
            {"kty": "oct", "k": "c2VjcmV0"},
            {"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"},
            {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"},
            {"kty": "RSA", "n": "%%%", "e": "AQAB"},
        ]});
        let keys = KeySet::parse(doc.to_string().as_bytes()).unwrap();
        let kids: Vec<_> = keys.keys.iter().map(|k| k.kid.clone().unwrap()).collect();
        assert_eq!(kids, ["ok", "ps"]);
        // The key restricted to PS256 does not check an RS256 token.
        assert_eq!(
            keys.verify(&rsa.sign("ps", &json!({})), BOTH),
            Err(VerifyError::UnknownKey("ps".into()))
        );
        assert!(KeySet::parse(b"{}").is_err());
        assert!(KeySet::parse(b"nope").is_err());
    }
}
