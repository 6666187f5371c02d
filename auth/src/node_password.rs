//! Node passwords, as k3s keeps them: each agent holds a random secret of its own, sent with
//! the kubelet client certificate request it makes with the agent (bootstrap) token; the
//! server stores a salted hash of it in the Secret `<node>.node-password.k3rs` of
//! `kube-system` and refuses a later request for that node name with another password. So
//! the shared agent token cannot take over an existing node's identity.
//!
//! This module is the pure decision; the admission plugin of the API server reads and writes
//! the Secret.
//!
//! # Guarantees
//! - Only a hash is stored: `sha256:<salt hex>:<sha256(salt ‖ password) hex>`, with a fresh
//!   16-byte salt (the agent's password is 32 random bytes, so a fast hash suffices);
//!   comparison does not depend on how much of the digest matched.
//! - A request without a password is accepted only for a node name that has no stored
//!   password (upstream kubelets, which know nothing of node passwords, still bootstrap).

use sha2::{Digest, Sha256};

/// The CSR annotation carrying the password; the API server removes it before anything
/// stores or sees the request.
pub use k3rs_apimachinery::users::NODE_PASSWORD_ANNOTATION as ANNOTATION;
/// Namespace of the password Secrets.
pub const NAMESPACE: &str = "kube-system";
/// The Secret's type.
pub const SECRET_TYPE: &str = "k3rs.io/node-password";
/// The Secret's data key holding the hash.
pub const HASH_KEY: &str = "hash";

/// The Secret holding `node`'s password hash.
pub fn secret_name(node: &str) -> String {
    format!("{node}.node-password.k3rs")
}

fn digest(salt: &[u8], password: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(password.as_bytes());
    h.finalize().into()
}

/// A salted hash of `password` with a fresh salt.
pub fn hash(password: &str) -> String {
    hash_with_salt(password, &rand::random::<[u8; 16]>())
}

fn hash_with_salt(password: &str, salt: &[u8]) -> String {
    format!(
        "sha256:{}:{}",
        hex::encode(salt),
        hex::encode(digest(salt, password))
    )
}

/// Whether `password` is the one `stored` (a [`hash`]) was made from; false for anything
/// unreadable.
pub fn verify(stored: &str, password: &str) -> bool {
    let mut parts = stored.trim().split(':');
    let (Some("sha256"), Some(salt), Some(want), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Ok(salt), Ok(want)) = (hex::decode(salt), hex::decode(want)) else {
        return false;
    };
    let got = digest(&salt, password);
    want.len() == got.len() && want.iter().zip(got).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// What to do with a request for a node, given its stored hash and the password sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let the request through; nothing to store.
    Accept,
    /// First join with a password: store this hash, then let it through.
    Store(String),
    /// Refuse (403) with this message.
    Refuse(String),
}

/// The message of a refused join, naming where the agent keeps its password.
pub fn rejected(node: &str) -> String {
    format!(
        "node password rejected: node {node:?} is registered with another password (a \
         duplicate node name, or a node whose <data-dir>/agent/node-password changed). Use a \
         unique --node-name, or to re-register the node delete the Secret {} in {NAMESPACE}",
        secret_name(node)
    )
}

/// The decision for `node`, with `stored` its stored hash (if any) and `password` the one
/// sent (if any).
pub fn decide(node: &str, stored: Option<&str>, password: Option<&str>) -> Decision {
    match (stored, password) {
        (None, None) => Decision::Accept,
        (None, Some(p)) => Decision::Store(hash(p)),
        (Some(_), None) => Decision::Refuse(format!(
            "node {node:?} is registered with a node password; the request has none ({ANNOTATION} annotation)"
        )),
        (Some(h), Some(p)) if verify(h, p) => Decision::Accept,
        (Some(_), Some(_)) => Decision::Refuse(rejected(node)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_salted_and_verify_only_their_password() {
        let a = hash("pw");
        let b = hash("pw");
        assert_ne!(a, b, "a fresh salt each time");
        assert!(a.starts_with("sha256:") && !a.contains("pw"));
        assert!(verify(&a, "pw") && verify(&b, "pw"));
        assert!(!verify(&a, "pw2") && !verify(&a, ""));
        assert_eq!(
            hash_with_salt("pw", &[0; 16]),
            format!(
                "sha256:{}:{}",
                "00".repeat(16),
                hex::encode(Sha256::digest([&[0u8; 16][..], b"pw"].concat()))
            )
        );
        for junk in [
            "",
            "sha256:zz:00",
            "md5:00:00",
            "sha256:00:00:00",
            "sha256:0:00",
        ] {
            assert!(!verify(junk, "pw"), "{junk}");
        }
    }

    #[test]
    fn decisions() {
        assert_eq!(decide("n1", None, None), Decision::Accept);
        let Decision::Store(h) = decide("n1", None, Some("pw")) else {
            panic!("not stored");
        };
        assert!(verify(&h, "pw"));
        assert_eq!(decide("n1", Some(&h), Some("pw")), Decision::Accept);
        assert_eq!(
            decide("n1", Some(&h), Some("other")),
            Decision::Refuse(rejected("n1"))
        );
        assert!(rejected("n1").contains("n1.node-password.k3rs in kube-system"));
        assert!(matches!(
            decide("n1", Some(&h), None),
            Decision::Refuse(m) if m.contains("has none")
        ));
    }
}
