//! The OIDC authenticator (`--kube-apiserver-arg oidc-*`, kube-apiserver's flags) against a
//! local issuer on loopback HTTPS serving discovery and a key set: stock kubectl presents ID
//! tokens with `--token`; the user and groups are mapped with their prefixes, RBAC decides
//! on them, bad tokens are 401, the issuer's key rotation is picked up without a restart,
//! the server starts while the issuer is down, and service-account tokens keep working.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::tls_server::{self, Received};
use crate::common::{jwt, users};
use serde_json::{json, Value};

/// The issuer: its URL (`https://127.0.0.1:<port><path>`), the path of its discovery
/// document, whether it is up, and the key set it serves (at `<url>/keys`).
struct Issuer {
    url: Mutex<String>,
    path: &'static str,
    discovery_path: &'static str,
    up: Mutex<bool>,
    keys: Mutex<Value>,
}

impl Issuer {
    fn new(path: &'static str, discovery_path: &'static str, up: bool) -> Arc<Issuer> {
        Arc::new(Issuer {
            url: Mutex::new(String::new()),
            path,
            discovery_path,
            up: Mutex::new(up),
            keys: Mutex::new(json!({"keys": []})),
        })
    }

    fn answer(&self, r: &Received) -> (u16, String) {
        if !*self.up.lock().unwrap() {
            return (503, "{}".into());
        }
        let issuer = self.url.lock().unwrap().clone();
        if r.path == self.discovery_path {
            let doc = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys"),
                "id_token_signing_alg_values_supported": ["RS256", "ES256"]});
            (200, doc.to_string())
        } else if r.path == format!("{}/keys", self.path) {
            (200, self.keys.lock().unwrap().to_string())
        } else {
            (404, "{}".into())
        }
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Claims kube-apiserver should accept: alice in `dev`, for client `k3rs`, tier gold.
fn claims(issuer: &str) -> Value {
    json!({"iss": issuer, "aud": ["k3rs", "other"], "sub": "alice", "groups": ["dev"],
        "tier": "gold", "iat": now(), "exp": now() + 600})
}

fn rs256(key: &Path, kid: &str, claims: &Value) -> String {
    jwt::sign_rs256(
        key,
        &json!({"alg": "RS256", "kid": kid, "typ": "JWT"}),
        claims,
    )
}

fn whoami(k: &Kubectl) -> Result<Value, String> {
    let out = k.run(&["auth", "whoami", "-o", "json"]);
    if out.ok {
        Ok(serde_json::from_str(&out.stdout).unwrap())
    } else {
        Err(out.stderr)
    }
}

#[test]
fn oidc_tokens_from_a_local_issuer() {
    let dir = tempfile::tempdir().unwrap();
    let state = Issuer::new("/oidc", "/oidc/.well-known/openid-configuration", false);
    let served = state.clone();
    let hook = tls_server::start(dir.path(), Arc::new(move |r: &Received| served.answer(r)));
    let issuer = format!("{}{}", hook.url(), state.path);
    *state.url.lock().unwrap() = issuer.clone();
    let (k1, k2, stranger) = (
        dir.path().join("k1.pem"),
        dir.path().join("k2.pem"),
        dir.path().join("stranger.pem"),
    );
    jwt::generate_key(&k1, "rsa");
    jwt::generate_key(&k2, "ec");
    jwt::generate_key(&stranger, "rsa");
    *state.keys.lock().unwrap() = json!({"keys": [jwt::public_jwk(&k1, "rsa", "k1")]});

    // The issuer is down while the server starts: it starts anyway.
    let arg = |a: String| format!("--kube-apiserver-arg={a}");
    let (server, admin) = Kubectl::start_server(&[
        &arg(format!("oidc-issuer-url={issuer}")),
        &arg("oidc-client-id=k3rs".into()),
        &arg("oidc-username-prefix=oidc:".into()),
        &arg("oidc-groups-claim=groups".into()),
        &arg("oidc-groups-prefix=oidc:".into()),
        &arg("oidc-required-claim=tier=gold".into()),
        &arg("oidc-signing-algs=RS256,ES256".into()),
        &arg(format!("oidc-ca-file={}", hook.ca.display())),
    ]);
    let as_token = |name: &str, token: &str| Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::token_kubeconfig(&server, name, token),
    };
    let alice = as_token("alice", &rs256(&k1, "k1", &claims(&issuer)));
    // Until the keys are loaded, the token is refused (401), never anonymous.
    let err = whoami(&alice).unwrap_err();
    assert!(err.contains("Unauthorized"), "{err}");
    *state.up.lock().unwrap() = true;
    let me = common::wait_for("the issuer's keys", Duration::from_secs(40), || {
        whoami(&alice).ok()
    });
    let info = &me["status"]["userInfo"];
    assert_eq!(info["username"], "oidc:alice", "{me}");
    assert_eq!(
        info["groups"],
        json!(["oidc:dev", "system:authenticated"]),
        "{me}"
    );
    assert!(hook.count(|r| r.path == "/oidc/.well-known/openid-configuration") >= 1);

    // RBAC decides on the prefixed names.
    alice.fails_with(&["get", "pods", "-n", "default"], None, "forbidden");
    admin.ok(&[
        "create",
        "clusterrolebinding",
        "oidc-dev-view",
        "--clusterrole=view",
        "--group=oidc:dev",
    ]);
    common::wait_for("the binding", Duration::from_secs(10), || {
        alice
            .run(&["get", "pods", "-n", "default"])
            .ok
            .then_some(())
    });

    // Tokens that must not pass: 401.
    let mut expired = claims(&issuer);
    expired["exp"] = json!(now() - 60);
    let mut wrong_audience = claims(&issuer);
    wrong_audience["aud"] = json!("kubernetes");
    let mut no_tier = claims(&issuer);
    no_tier.as_object_mut().unwrap().remove("tier");
    let mut silver = claims(&issuer);
    silver["tier"] = json!("silver");
    let bad = [
        ("expired", rs256(&k1, "k1", &expired)),
        ("wrong-audience", rs256(&k1, "k1", &wrong_audience)),
        ("no-required-claim", rs256(&k1, "k1", &no_tier)),
        ("wrong-required-claim", rs256(&k1, "k1", &silver)),
        ("other-key", rs256(&stranger, "k1", &claims(&issuer))),
        ("unknown-kid", rs256(&stranger, "k9", &claims(&issuer))),
    ];
    for (name, token) in &bad {
        let err = whoami(&as_token(name, token)).unwrap_err();
        assert!(err.contains("Unauthorized"), "{name}: {err}");
    }

    // The issuer rotates to a new (EC) key: its tokens are accepted without a restart, and
    // tokens of the retired key no longer are.
    *state.keys.lock().unwrap() = json!({"keys": [jwt::public_jwk(&k2, "ec", "k2")]});
    let rotated = jwt::sign_es256(&k2, &json!({"alg": "ES256", "kid": "k2"}), &claims(&issuer));
    let rotated = as_token("rotated", &rotated);
    let me = common::wait_for("the rotated key", Duration::from_secs(30), || {
        whoami(&rotated).ok()
    });
    assert_eq!(me["status"]["userInfo"]["username"], "oidc:alice", "{me}");
    let err = whoami(&alice).unwrap_err();
    assert!(err.contains("Unauthorized"), "{err}");

    // Service-account tokens still authenticate beside OIDC.
    let sa_token = admin.ok(&["create", "token", "default", "-n", "default"]);
    let sa = as_token("sa", sa_token.trim());
    let me = whoami(&sa).unwrap();
    assert_eq!(
        me["status"]["userInfo"]["username"], "system:serviceaccount:default:default",
        "{me}"
    );
}

#[test]
fn oidc_flags_are_checked_at_start() {
    let (status, log, _dir) = common::K3rs::run_to_exit(
        &["--kube-apiserver-arg=oidc-issuer-url=https://127.0.0.1:1/oidc"],
        Duration::from_secs(60),
    );
    assert!(status.is_some_and(|s| !s.success()), "{log}");
    assert!(
        log.contains("oidc-issuer-url and oidc-client-id must be specified together"),
        "{log}"
    );
}

#[test]
fn structured_authentication_config_maps_claims_with_cel() {
    let dir = tempfile::tempdir().unwrap();
    let state = Issuer::new("/sso", "/discovery/.well-known/openid-configuration", true);
    let served = state.clone();
    let hook = tls_server::start(dir.path(), Arc::new(move |r: &Received| served.answer(r)));
    let issuer = format!("{}{}", hook.url(), state.path);
    *state.url.lock().unwrap() = issuer.clone();
    let key = dir.path().join("k.pem");
    jwt::generate_key(&key, "rsa");
    *state.keys.lock().unwrap() = json!({"keys": [jwt::public_jwk(&key, "rsa", "k")]});
    let ca = std::fs::read_to_string(&hook.ca).unwrap();
    let config = json!({
        "apiVersion": "apiserver.config.k8s.io/v1beta1",
        "kind": "AuthenticationConfiguration",
        "jwt": [{
            "issuer": {"url": issuer, "audiences": ["k3rs"],
                "discoveryURL": format!("{}/discovery/.well-known/openid-configuration", hook.url()),
                "certificateAuthority": ca},
            "claimValidationRules": [
                {"expression": "claims.tier == 'gold'", "message": "gold members only"}],
            "claimMappings": {
                "username": {"expression": "'sso:' + claims.sub"},
                "groups": {"claim": "groups", "prefix": "sso:"},
                "uid": {"claim": "sid"},
                "extra": [{"key": "example.com/tier", "valueExpression": "claims.tier"}]},
            "userValidationRules": [
                {"expression": "!user.username.contains('root')", "message": "no root"}]
        }]
    });
    let file = dir.path().join("authn.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let (server, admin) = Kubectl::start_server(&[&format!(
        "--kube-apiserver-arg=authentication-config={}",
        file.display()
    )]);
    let as_claims = |name: &str, edit: &dyn Fn(&mut Value)| {
        let mut c = claims(&issuer);
        c["sid"] = json!("uid-42");
        edit(&mut c);
        Kubectl {
            bin: admin.bin.clone(),
            kubeconfig: users::token_kubeconfig(&server, name, &rs256(&key, "k", &c)),
        }
    };
    let alice = as_claims("alice", &|_| {});
    let me = common::wait_for("the issuer's keys", Duration::from_secs(40), || {
        whoami(&alice).ok()
    });
    let info = &me["status"]["userInfo"];
    assert_eq!(info["username"], "sso:alice", "{me}");
    assert_eq!(info["uid"], "uid-42", "{me}");
    assert_eq!(
        info["groups"],
        json!(["sso:dev", "system:authenticated"]),
        "{me}"
    );
    assert_eq!(info["extra"]["example.com/tier"], json!(["gold"]), "{me}");
    // The claim and user validation rules: 401.
    let silver = as_claims("silver", &|c| c["tier"] = json!("silver"));
    let root = as_claims("root", &|c| c["sub"] = json!("root"));
    for k in [silver, root] {
        let err = whoami(&k).unwrap_err();
        assert!(err.contains("Unauthorized"), "{err}");
    }
}

#[test]
fn a_broken_authentication_config_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("authn.yaml");
    std::fs::write(
        &file,
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: 'https://127.0.0.1:1/x', audiences: [k3rs]}\n  claimMappings:\n    username: {claim: sub}\n",
    )
    .unwrap();
    let (status, log, _dir) = common::K3rs::run_to_exit(
        &[&format!(
            "--kube-apiserver-arg=authentication-config={}",
            file.display()
        )],
        Duration::from_secs(60),
    );
    assert!(status.is_some_and(|s| !s.success()), "{log}");
    assert!(
        log.contains("jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set"),
        "{log}"
    );
}
