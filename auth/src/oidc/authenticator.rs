//! The OIDC bearer-token authenticator: [`decide`] is the whole verdict on a token given the
//! provider's keys; [`Oidc`] fetches the keys again once when a token names one it lacks.
//!
//! # Guarantees
//! - A bearer token that is not a JWT whose `iss` is the configured issuer is
//!   [`Outcome::NotApplicable`], so service-account and other tokens reach their own
//!   authenticators.
//! - A token of the issuer authenticates only when its signature verifies with the
//!   provider's keys and its claims pass [`claims::user`]; before keys are loaded, it is
//!   rejected (401), never anonymous.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::claims;
use super::jws::{KeySet, VerifyError};
use super::model::JwtAuthenticator;
use super::provider::Provider;
use crate::authn::{Authenticator, AuthnRequest, Outcome};
use crate::serviceaccount::jwt;

/// The verdict on one token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A final verdict for the chain.
    Outcome(Outcome),
    /// No key of the set verified it; fresher keys might.
    RefreshKeys(VerifyError),
}

/// The verdict of `jwt` on `token` with the provider's `keys` (`None`: not fetched yet) at
/// unix time `now`.
pub fn decide(jwt: &JwtAuthenticator, keys: Option<&KeySet>, token: &str, now: f64) -> Decision {
    let ours = jwt::unverified_claims(token)
        .ok()
        .and_then(|c| c.get("iss").and_then(Value::as_str).map(str::to_string))
        .is_some_and(|iss| iss == jwt.issuer_url);
    if !ours {
        return Decision::Outcome(Outcome::NotApplicable);
    }
    let Some(keys) = keys else {
        return Decision::Outcome(Outcome::Rejected(
            "oidc: authenticator not initialized".into(),
        ));
    };
    match keys.verify(token, &jwt.signing_algs) {
        Ok(c) => Decision::Outcome(match claims::user(jwt, &c, now) {
            Ok(u) => Outcome::Authenticated(u),
            Err(e) => Outcome::Rejected(e.to_string()),
        }),
        Err(e @ (VerifyError::UnknownKey(_) | VerifyError::Signature)) => Decision::RefreshKeys(e),
        Err(e) => Decision::Outcome(Outcome::Rejected(e.to_string())),
    }
}

/// The authenticator of one issuer (`--oidc-*` flags, or one `jwt` entry of
/// `--authentication-config`).
#[derive(Debug)]
pub struct Oidc {
    jwt: JwtAuthenticator,
    provider: Arc<Provider>,
}

impl Oidc {
    /// The authenticator of `jwt`; starts fetching the provider's keys in the background.
    pub fn start(jwt: JwtAuthenticator) -> Result<Oidc, super::model::IssuerTlsError> {
        let provider = Provider::new(&jwt.issuer_url, jwt.discovery_url.as_deref(), jwt.tls()?);
        provider.start();
        Ok(Oidc { jwt, provider })
    }

    /// The authenticator of `jwt` with a given provider (tests).
    #[cfg(test)]
    pub fn with_provider(jwt: JwtAuthenticator, provider: Arc<Provider>) -> Oidc {
        Oidc { jwt, provider }
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

impl Authenticator for Oidc {
    fn authenticate<'a>(&'a self, req: &'a AuthnRequest<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let Some(token) = req.bearer_token() else {
                return Outcome::NotApplicable;
            };
            let keys = self.provider.keys();
            match decide(&self.jwt, keys.as_deref(), token, unix_now()) {
                Decision::Outcome(o) => o,
                Decision::RefreshKeys(first) => {
                    let fresh = self.provider.refresh().await;
                    match decide(&self.jwt, fresh.as_deref(), token, unix_now()) {
                        Decision::Outcome(o) => o,
                        Decision::RefreshKeys(_) => Outcome::Rejected(first.to_string()),
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::jws::tests::Signer;
    use super::super::Options;
    use super::*;
    use serde_json::json;

    const ISSUER: &str = "https://issuer.example";

    fn opts() -> JwtAuthenticator {
        JwtAuthenticator::from_flags(&Options {
            issuer_url: ISSUER.into(),
            client_id: "k3rs".into(),
            ..Options::default()
        })
        .unwrap()
    }

    fn keys(s: &Signer, kid: &str) -> KeySet {
        KeySet::parse(json!({"keys": [s.jwk(kid)]}).to_string().as_bytes()).unwrap()
    }

    fn good() -> Value {
        json!({"iss": ISSUER, "aud": "k3rs", "sub": "alice", "exp": 2000})
    }

    #[test]
    fn tokens_of_other_issuers_and_non_jwts_are_not_applicable() {
        let rsa = Signer::rsa();
        let k = keys(&rsa, "r");
        let mut other = good();
        other["iss"] = json!("kubernetes/serviceaccount");
        for t in [
            rsa.sign("r", &other),
            "abc.def".into(),
            "static-token".into(),
        ] {
            assert_eq!(
                decide(&opts(), Some(&k), &t, 1000.0),
                Decision::Outcome(Outcome::NotApplicable)
            );
        }
    }

    #[test]
    fn verdicts() {
        let rsa = Signer::rsa();
        let k = keys(&rsa, "r");
        let t = rsa.sign("r", &good());
        let Decision::Outcome(Outcome::Authenticated(u)) = decide(&opts(), Some(&k), &t, 1000.0)
        else {
            panic!()
        };
        assert_eq!(u.username, "https://issuer.example#alice");
        assert_eq!(
            decide(&opts(), None, &t, 1000.0),
            Decision::Outcome(Outcome::Rejected(
                "oidc: authenticator not initialized".into()
            ))
        );
        assert_eq!(
            decide(&opts(), Some(&k), &t, 2001.0),
            Decision::Outcome(Outcome::Rejected("oidc: token is expired".into()))
        );
        assert_eq!(
            decide(&opts(), Some(&k), &rsa.sign("new", &good()), 1000.0),
            Decision::RefreshKeys(VerifyError::UnknownKey("new".into()))
        );
        let ec = Signer::ec();
        let mut o = opts();
        o.signing_algs = vec![super::super::jws::Algorithm::Es256];
        assert!(matches!(
            decide(&o, Some(&k), &t, 1000.0),
            Decision::Outcome(Outcome::Rejected(_))
        ));
        assert_eq!(
            decide(
                &o,
                Some(&keys(&ec, "r")),
                &Signer::ec().sign("r", &good()),
                1000.0
            ),
            Decision::RefreshKeys(VerifyError::Signature)
        );
    }
}
