//! Service-account tokens: the signer (`service.key`), the token authenticator, the
//! TokenRequest API that mints bound tokens, and the issuer discovery documents.
//!
//! # Guarantees
//! - Every token is an ES256 JWS by the cluster's `service.key`; bound tokens carry issuer
//!   [`claims::ISSUER`], legacy Secret tokens [`claims::LEGACY_ISSUER`].
//! - See [`authenticator`] for when a token authenticates.

pub mod authenticator;
pub mod claims;
pub mod discovery;
pub mod jwt;
pub mod token_request;
pub mod tokens_controller;

use std::path::Path;
use std::sync::Arc;

pub use authenticator::ServiceAccountTokens;
pub use jwt::SigningKey;

/// The signer and the authenticator built on it, shared by the API server's handlers.
#[derive(Debug, Clone)]
pub struct ServiceAccounts {
    /// Signs the tokens TokenRequest and the tokens controller mint.
    pub key: Arc<SigningKey>,
    /// Verifies service-account tokens presented as bearer tokens.
    pub tokens: ServiceAccountTokens,
}

impl ServiceAccounts {
    /// Loads the signing key from `key_file` (`service.key`).
    pub fn load(
        key_file: &Path,
        lookup: Arc<dyn authenticator::Lookup>,
    ) -> Result<ServiceAccounts, jwt::JwtError> {
        let pem = std::fs::read(key_file)
            .map_err(|e| jwt::JwtError::Key(format!("reading {}: {e}", key_file.display())))?;
        let key = Arc::new(SigningKey::from_pem(&pem)?);
        Ok(ServiceAccounts {
            tokens: ServiceAccountTokens::new(key.clone(), lookup),
            key,
        })
    }
}
