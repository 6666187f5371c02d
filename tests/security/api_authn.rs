//! Authentication at the API: with no credentials only the public endpoints answer (401
//! elsewhere); client certificates signed by the client CA authenticate as their CN; the
//! admin kubeconfig is in `system:masters`.

use crate::common::kubectl::Kubectl;
use crate::common::users;

#[test]
fn no_credentials_get_401_except_the_public_endpoints() {
    let (server, admin) = Kubectl::start_server(&[]);
    for path in ["/healthz", "/livez", "/readyz", "/version", "/cacerts"] {
        let (code, body) = users::anonymous_request(&server, "GET", path);
        assert_eq!(code, 200, "{path}: {body}");
    }
    for (method, path) in [
        ("GET", "/api/v1/namespaces/default/pods"),
        ("GET", "/api"),
        ("GET", "/apis"),
        ("GET", "/metrics"),
        ("GET", "/openapi/v3"),
        ("POST", "/api/v1/namespaces"),
        ("GET", "/nonexistent"),
    ] {
        let (code, body) = users::anonymous_request(&server, method, path);
        assert_eq!(code, 401, "{method} {path}: {body}");
        assert!(body.contains(r#""reason":"Unauthorized""#), "{body}");
    }
    // A certificate from the client CA authenticates (what it may do is RBAC's business).
    let bob = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::cert_kubeconfig(&server, "bob", &["dev"]),
    };
    let out = bob.run(&["get", "--raw", "/api"]);
    assert!(
        !out.stderr.contains("Unauthorized"),
        "bob is authenticated: {}",
        out.stderr
    );
}
