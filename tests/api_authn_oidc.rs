//! The OIDC authenticator (`--kube-apiserver-arg oidc-*`, kube-apiserver's flags) against a
//! local issuer on loopback HTTPS serving discovery and a key set: stock kubectl presents ID
//! tokens with `--token`; the user and groups are mapped with their prefixes, RBAC decides
//! on them, bad tokens are 401, the issuer's key rotation is picked up without a restart,
//! the server starts while the issuer is down, and service-account tokens keep working.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::kubectl::Kubectl;
use common::tls_server::{self, Received};
use common::{jwt, users};
use serde_json::{json, Value};

/// The issuer: whether it is up, and the key set it serves.
struct Issuer {
    url: Mutex<String>,
    up: Mutex<bool>,
    keys: Mutex<Value>,
}

impl Issuer {
    fn answer(&self, r: &Received) -> (u16, String) {
        if !*self.up.lock().unwrap() {
            return (503, "{}".into());
        }
        let issuer = self.url.lock().unwrap().clone();
        match r.path.as_str() {
            "/oidc/.well-known/openid-configuration" => (
                200,
                json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys"),
                    "id_token_signing_alg_values_supported": ["RS256", "ES256"]})
                .to_string(),
            ),
            "/oidc/keys" => (200, self.keys.lock().unwrap().to_string()),
            _ => (404, "{}".into()),
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
    let state = Arc::new(Issuer {
        url: Mutex::new(String::new()),
        up: Mutex::new(false),
        keys: Mutex::new(json!({"keys": []})),
    });
    let served = state.clone();
    let hook = tls_server::start(dir.path(), Arc::new(move |r: &Received| served.answer(r)));
    let issuer = format!("{}/oidc", hook.url());
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
