//! kube-apiserver's `aesgcm` storage transformer: values written as
//! `k8s:enc:aesgcm:v1:<key name>:<12-byte nonce><AES-256-GCM ciphertext and tag>`, with the
//! storage key as additional authenticated data (a value moved to another key does not
//! decrypt). Values without the prefix are read as they are (the `identity` provider), so a
//! store written before encryption was turned on stays readable.
//!
//! # Guarantees
//! - Writes use the first key (`None`: values are written in plain).
//! - Every configured key decrypts; an unknown key name or a tampered value is an error, never
//!   garbage.

use std::borrow::Cow;

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// What encrypted values start with.
pub const PREFIX: &str = "k8s:enc:aesgcm:v1:";

/// One named AES-256 key.
pub struct Key {
    /// The key's name in the configuration.
    pub name: String,
    cipher: LessSafeKey,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("name", &self.name).finish()
    }
}

impl Key {
    /// A key from its 32 secret bytes.
    pub fn new(name: &str, secret: &[u8]) -> Result<Key, TransformError> {
        let unbound = UnboundKey::new(&AES_256_GCM, secret)
            .map_err(|_| TransformError::KeyLength(name.to_string(), secret.len()))?;
        Ok(Key {
            name: name.to_string(),
            cipher: LessSafeKey::new(unbound),
        })
    }
}

/// Why a value could not be encrypted or decrypted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TransformError {
    /// A key (named) is not 32 bytes (its length).
    #[error("encryption key {0:?} has {1} bytes; AES-256-GCM needs 32")]
    KeyLength(String, usize),
    /// A value names a key (named) that is not configured.
    #[error("the value is encrypted with key {0:?}, which is not configured")]
    UnknownKey(String),
    /// A value does not decrypt with its key (named).
    #[error("the value is not a valid aesgcm envelope or does not decrypt with key {0:?}")]
    Corrupt(String),
    /// The system RNG failed.
    #[error("no random nonce could be drawn")]
    Random,
}

/// The configured keys, in order.
#[derive(Debug, Default)]
pub struct Transformer {
    keys: Vec<Key>,
    /// Whether writes encrypt (with the first key) or stay plain (`identity` first).
    encrypt_writes: bool,
}

impl Transformer {
    /// `keys` decrypt; the first also encrypts when `encrypt_writes`.
    pub fn new(keys: Vec<Key>, encrypt_writes: bool) -> Transformer {
        Transformer {
            encrypt_writes: encrypt_writes && !keys.is_empty(),
            keys,
        }
    }

    /// The name of the key new writes use, if they are encrypted.
    pub fn write_key(&self) -> Option<&str> {
        self.encrypt_writes
            .then(|| self.keys.first().map(|k| k.name.as_str()))
            .flatten()
    }

    /// The stored form of `plain` under storage key `key`.
    pub fn encrypt(&self, key: &[u8], plain: &[u8]) -> Result<Vec<u8>, TransformError> {
        let Some(k) = self.keys.first().filter(|_| self.encrypt_writes) else {
            return Ok(plain.to_vec());
        };
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| TransformError::Random)?;
        let mut sealed = plain.to_vec();
        k.cipher
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(key),
                &mut sealed,
            )
            .map_err(|_| TransformError::Corrupt(k.name.clone()))?;
        let mut out =
            Vec::with_capacity(PREFIX.len() + k.name.len() + 1 + NONCE_LEN + sealed.len());
        out.extend_from_slice(PREFIX.as_bytes());
        out.extend_from_slice(k.name.as_bytes());
        out.push(b':');
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The plain form of `stored` (stored under `key`); plain values come back unchanged.
    pub fn decrypt<'a>(
        &self,
        key: &[u8],
        stored: &'a [u8],
    ) -> Result<Cow<'a, [u8]>, TransformError> {
        let Some(rest) = stored.strip_prefix(PREFIX.as_bytes()) else {
            return Ok(Cow::Borrowed(stored));
        };
        let colon = rest
            .iter()
            .position(|b| *b == b':')
            .ok_or_else(|| TransformError::Corrupt(String::new()))?;
        let name = String::from_utf8_lossy(&rest[..colon]).into_owned();
        let k = self
            .keys
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| TransformError::UnknownKey(name.clone()))?;
        let body = &rest[colon + 1..];
        if body.len() < NONCE_LEN {
            return Err(TransformError::Corrupt(name));
        }
        let (nonce, sealed) = body.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| TransformError::Corrupt(name.clone()))?;
        let mut buf = sealed.to_vec();
        let plain = k
            .cipher
            .open_in_place(nonce, Aad::from(key), &mut buf)
            .map_err(|_| TransformError::Corrupt(name.clone()))?;
        let len = plain.len();
        buf.truncate(len);
        Ok(Cow::Owned(buf))
    }

    /// Whether `stored` is encrypted with the key writes use now (a re-encryption would not
    /// change it).
    pub fn is_current(&self, stored: &[u8]) -> bool {
        match self.write_key() {
            None => !stored.starts_with(PREFIX.as_bytes()),
            Some(name) => stored.starts_with(format!("{PREFIX}{name}:").as_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, byte: u8) -> Key {
        Key::new(name, &[byte; 32]).unwrap()
    }

    #[test]
    fn round_trip_with_the_envelope_upstream_writes() {
        let t = Transformer::new(vec![key("k1", 1)], true);
        let stored = t.encrypt(b"/registry/secrets/ns/s", b"hello").unwrap();
        assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:k1:"));
        // prefix + name + ':' + nonce + plaintext + 16-byte tag
        assert_eq!(stored.len(), PREFIX.len() + 3 + 12 + 5 + 16);
        assert!(!stored.windows(5).any(|w| w == b"hello"));
        assert_eq!(
            t.decrypt(b"/registry/secrets/ns/s", &stored)
                .unwrap()
                .as_ref(),
            b"hello"
        );
        // Random nonces: the same value encrypts differently each time.
        assert_ne!(
            stored,
            t.encrypt(b"/registry/secrets/ns/s", b"hello").unwrap()
        );
    }

    #[test]
    fn plain_values_read_as_they_are_and_identity_writes_plain() {
        let t = Transformer::new(vec![key("k1", 1)], false);
        assert_eq!(t.write_key(), None);
        assert_eq!(t.encrypt(b"k", b"plain").unwrap(), b"plain");
        assert_eq!(t.decrypt(b"k", b"plain").unwrap().as_ref(), b"plain");
        assert!(t.is_current(b"plain"));
    }

    #[test]
    fn the_storage_key_is_authenticated() {
        let t = Transformer::new(vec![key("k1", 1)], true);
        let stored = t.encrypt(b"/registry/secrets/a/x", b"v").unwrap();
        assert_eq!(
            t.decrypt(b"/registry/secrets/b/x", &stored).unwrap_err(),
            TransformError::Corrupt("k1".into())
        );
        let mut tampered = stored.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(t.decrypt(b"/registry/secrets/a/x", &tampered).is_err());
    }

    #[test]
    fn rotation_reads_old_keys_and_writes_the_first() {
        let old = Transformer::new(vec![key("k1", 1)], true);
        let stored = old.encrypt(b"k", b"v").unwrap();
        let rotated = Transformer::new(vec![key("k2", 2), key("k1", 1)], true);
        assert_eq!(rotated.decrypt(b"k", &stored).unwrap().as_ref(), b"v");
        assert!(!rotated.is_current(&stored));
        assert!(rotated.is_current(&rotated.encrypt(b"k", b"v").unwrap()));
        let dropped = Transformer::new(vec![key("k2", 2)], true);
        assert_eq!(
            dropped.decrypt(b"k", &stored).unwrap_err(),
            TransformError::UnknownKey("k1".into())
        );
    }

    #[test]
    fn keys_must_be_aes_256() {
        assert_eq!(
            Key::new("short", &[0; 16]).unwrap_err(),
            TransformError::KeyLength("short".into(), 16)
        );
    }
}
