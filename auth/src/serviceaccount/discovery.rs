//! Service-account issuer discovery (OIDC): `/.well-known/openid-configuration` and
//! `/openid/v1/jwks`, so relying parties outside the cluster can verify bound tokens.

use serde_json::{json, Value};

use super::claims::ISSUER;
use super::jwt::{SigningKey, ALGORITHM};

/// Path of the discovery document.
pub const CONFIGURATION_PATH: &str = "/.well-known/openid-configuration";
/// Path of the key set.
pub const JWKS_PATH: &str = "/openid/v1/jwks";

/// The discovery document, as kube-apiserver serves it (`jwks_uri` under the issuer).
pub fn configuration() -> Value {
    json!({
        "issuer": ISSUER,
        "jwks_uri": format!("{ISSUER}{JWKS_PATH}"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": [ALGORITHM],
    })
}

/// The key set: the signing key's public JWK.
pub fn jwks(key: &SigningKey) -> Value {
    json!({"keys": [key.jwk()]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents() {
        let c = configuration();
        assert_eq!(c["issuer"], "https://kubernetes.default.svc.cluster.local");
        assert_eq!(
            c["jwks_uri"],
            "https://kubernetes.default.svc.cluster.local/openid/v1/jwks"
        );
        let k = super::super::jwt::tests::key();
        let set = jwks(&k);
        assert_eq!(set["keys"].as_array().unwrap().len(), 1);
        assert_eq!(set["keys"][0]["kid"], k.kid());
    }
}
