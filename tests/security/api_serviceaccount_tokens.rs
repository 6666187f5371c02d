//! Service-account tokens end to end, with the real binary and kubectl: `kubectl create
//! token` mints bound tokens that authenticate as the service account (`kubectl auth
//! whoami`) until the bound pod is deleted; expired, tampered, foreign and garbage tokens
//! are 401; TokenReview honours audiences; the issuer's discovery documents are served.

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::{jwt, users};
use serde_json::{json, Value};

const SA_AND_POD: &str = "
apiVersion: v1
kind: ServiceAccount
metadata:
  name: default
  namespace: default
---
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
spec:
  serviceAccountName: default
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
";

fn as_token(admin: &Kubectl, server: &common::K3rs, name: &str, token: &str) -> Kubectl {
    Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::token_kubeconfig(server, name, token),
    }
}

fn whoami(k: &Kubectl) -> Value {
    let out = k.ok(&["auth", "whoami", "-o", "json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("whoami output {out:?}: {e}"))
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn pod_bound_tokens_authenticate_until_the_pod_is_gone() {
    let (server, admin) = Kubectl::start_server(&[]);
    // The `default` ServiceAccount may already exist (its controller): apply is idempotent.
    admin.ok_stdin(&["apply", "-f", "-"], Some(SA_AND_POD));
    let token = admin.ok(&[
        "create",
        "token",
        "default",
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        "p",
        "--duration",
        "20m",
    ]);
    let token = token.trim();
    let pod_uid = admin.ok(&["get", "pod", "p", "-o", "jsonpath={.metadata.uid}"]);
    let c = jwt::claims(token);
    assert_eq!(c["iss"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(c["sub"], "system:serviceaccount:default:default");
    assert_eq!(c["kubernetes.io"]["pod"]["name"], "p");
    assert_eq!(c["kubernetes.io"]["pod"]["uid"], pod_uid.as_str());
    assert_eq!(
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
        1200
    );

    let sa = as_token(&admin, &server, "sa", token);
    let me = whoami(&sa);
    let info = &me["status"]["userInfo"];
    assert_eq!(info["username"], "system:serviceaccount:default:default");
    let groups: Vec<&str> = info["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        vec![
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ]
    );
    assert_eq!(
        info["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["p"])
    );
    assert_eq!(
        info["extra"]["authentication.kubernetes.io/pod-uid"],
        json!([pod_uid])
    );

    // TokenReview: valid for the API audiences, not for another audience.
    let review = |audiences: Value| -> Value {
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token, "audiences": audiences}});
        // --raw: kubectl's client-side validation of TokenReview falls back to
        // /openapi/v2, which k3rs does not serve.
        let out = admin.ok_stdin(
            &[
                "create",
                "--raw",
                "/apis/authentication.k8s.io/v1/tokenreviews",
                "-f",
                "-",
            ],
            Some(&body.to_string()),
        );
        serde_json::from_str::<Value>(&out).unwrap()["status"].clone()
    };
    let ok = review(json!([]));
    assert_eq!(ok["authenticated"], true, "{ok}");
    assert_eq!(
        ok["user"]["username"],
        "system:serviceaccount:default:default"
    );
    assert_eq!(
        ok["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local", "k3s"])
    );
    let other = review(json!(["vault"]));
    assert_eq!(other["authenticated"], false, "{other}");

    // Once the pod is deleted, the token is 401.
    admin.ok(&["delete", "pod", "p", "--grace-period=0", "--force"]);
    sa.fails_with(&["auth", "whoami"], None, "Unauthorized");
}

#[test]
fn forged_expired_and_garbage_tokens_are_401_and_discovery_is_served() {
    let (server, admin) = Kubectl::start_server(&[]);
    admin.ok_stdin(&["apply", "-f", "-"], Some(SA_AND_POD));
    let token = admin.ok(&["create", "token", "default"]);
    let token = token.trim().to_string();
    let good = as_token(&admin, &server, "good", &token);
    assert_eq!(
        whoami(&good)["status"]["userInfo"]["username"],
        "system:serviceaccount:default:default"
    );
    // An audience the API server does not accept.
    let vault = admin.ok(&["create", "token", "default", "--audience", "vault"]);
    let key = server.data_dir().join("server/tls/service.key");
    let claims = jwt::claims(&token);
    let header = json!({"alg": "ES256"});
    let mut expired = claims.clone();
    expired["iat"] = json!(now() - 7200);
    expired["nbf"] = json!(now() - 7200);
    expired["exp"] = json!(now() - 3600);
    let mut unknown_sa = claims.clone();
    unknown_sa["kubernetes.io"]["serviceaccount"]["uid"] =
        json!("00000000-0000-0000-0000-000000000000");
    // A key that is not the server's.
    let other_key = server.data_dir().join("other.key");
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&other_key)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{out:?}");
    let (h, p, s) = {
        let mut it = token.split('.');
        (it.next().unwrap(), it.next().unwrap(), it.next().unwrap())
    };
    let flipped_sig = {
        let mut b = s.as_bytes().to_vec();
        b[10] = if b[10] == b'A' { b'B' } else { b'A' };
        String::from_utf8(b).unwrap()
    };
    use base64::Engine;
    let none_header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#);
    let bad: Vec<(&str, String)> = vec![
        ("garbage", "garbage".into()),
        ("expired", jwt::sign_es256(&key, &header, &expired)),
        (
            "unknown-sa-uid",
            jwt::sign_es256(&key, &header, &unknown_sa),
        ),
        ("other-key", jwt::sign_es256(&other_key, &header, &claims)),
        ("flipped-signature", format!("{h}.{p}.{flipped_sig}")),
        ("alg-none", format!("{none_header}.{p}.")),
        ("wrong-audience", vault.trim().to_string()),
    ];
    for (name, t) in &bad {
        let k = as_token(&admin, &server, name, t);
        let out = k.run(&["auth", "whoami"]);
        assert!(
            !out.ok && out.stderr.contains("Unauthorized"),
            "{name} must be 401: {out:?}"
        );
        let out = k.run(&["get", "--raw", "/healthz"]);
        assert!(out.ok, "{name}: /healthz stays public: {out:?}");
    }
    // Correctly signed but otherwise fine: the forged copy of a valid token still works (the
    // test's signing matches the server's).
    let resigned = jwt::sign_es256(&key, &header, &claims);
    let k = as_token(&admin, &server, "resigned", &resigned);
    assert_eq!(
        whoami(&k)["status"]["userInfo"]["username"],
        "system:serviceaccount:default:default"
    );

    // Issuer discovery: the key set verifies the server's tokens (same kid).
    let conf: Value =
        serde_json::from_str(&admin.ok(&["get", "--raw", "/.well-known/openid-configuration"]))
            .unwrap();
    assert_eq!(
        conf["issuer"],
        "https://kubernetes.default.svc.cluster.local"
    );
    let jwks: Value =
        serde_json::from_str(&admin.ok(&["get", "--raw", "/openid/v1/jwks"])).unwrap();
    let kid_of = |t: &str| -> Value {
        let h = t.split('.').next().unwrap();
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(h)
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(jwks["keys"][0]["kid"], kid_of(&token)["kid"]);
    assert_eq!(jwks["keys"][0]["alg"], "ES256");

    // whoami for a client-certificate user.
    let bob = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::cert_kubeconfig(&server, "bob", &["dev"]),
    };
    let me = whoami(&bob);
    assert_eq!(me["status"]["userInfo"]["username"], "bob");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!(["dev", "system:authenticated"])
    );
}
