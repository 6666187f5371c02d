use super::*;
use k8s_openapi::ByteString;
use serde_json::json;

fn cred(user: &str, password: &str) -> Credential {
    Credential {
        username: user.into(),
        password: password.into(),
    }
}

fn secret(name: &str, type_: &str, key: &str, value: serde_json::Value) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.type_ = Some(type_.into());
    s.data = Some(
        [(key.to_string(), ByteString(value.to_string().into_bytes()))]
            .into_iter()
            .collect(),
    );
    s
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn reads_dockerconfigjson_and_dockercfg() {
    let ring = keyring(&[
        secret(
            "new",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            json!({"auths": {"https://reg.example.com/v1/": {"auth": b64("alice:pa:ss")}}}),
        ),
        secret(
            "old",
            "kubernetes.io/dockercfg",
            ".dockercfg",
            json!({"other.example.com:5000": {"username": "bob", "password": "pw",
                "email": "b@example.com"}}),
        ),
        // Another type, or the wrong key for its type: skipped as upstream.
        secret(
            "opaque",
            "Opaque",
            ".dockerconfigjson",
            json!({"auths": {"x.io": {}}}),
        ),
        secret(
            "wrongkey",
            "kubernetes.io/dockercfg",
            ".dockerconfigjson",
            json!({}),
        ),
    ])
    .unwrap();
    assert_eq!(
        ring.lookup("reg.example.com/team/app"),
        vec![cred("alice", "pa:ss")]
    );
    assert_eq!(
        ring.lookup("other.example.com:5000/app"),
        vec![cred("bob", "pw")]
    );
    assert!(ring.lookup("x.io/app").is_empty());
}

#[test]
fn auth_wins_and_may_be_unpadded() {
    let unpadded = b64("u:p1").trim_end_matches('=').to_string();
    assert_ne!(unpadded, b64("u:p1"));
    let ring = keyring(&[secret(
        "s",
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        json!({"auths": {"reg.io": {"username": "ignored", "password": "x", "auth": unpadded}}}),
    )])
    .unwrap();
    assert_eq!(ring.lookup("reg.io/a"), vec![cred("u", "p1")]);
}

#[test]
fn malformed_secrets_are_errors() {
    let bad_json = Secret {
        data: Some(
            [(
                ".dockerconfigjson".to_string(),
                ByteString(b"{not json".to_vec()),
            )]
            .into_iter()
            .collect(),
        ),
        ..secret("s", "kubernetes.io/dockerconfigjson", "x", json!(null))
    };
    let e = keyring(&[bad_json]).unwrap_err().to_string();
    assert!(e.starts_with("reading the image pull secret s: "), "{e}");
    let no_colon = secret(
        "t",
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        json!({"auths": {"reg.io": {"auth": b64("nocolon")}}}),
    );
    assert_eq!(
        keyring(&[no_colon]).unwrap_err().to_string(),
        "reading the image pull secret t: unable to parse auth field, must be formatted as \
         base64(username:password)"
    );
}

#[test]
fn keys_match_as_the_kubelet_matches_them() {
    let mut ring = Keyring::default();
    ring.add("reg.example.com", cred("host", ""));
    ring.add("https://reg.example.com/v2/team", cred("team", ""));
    ring.add("*.wild.io", cred("wild", ""));
    ring.add("reg.example.com:5000", cred("port", ""));
    ring.add("http://plain.io/", cred("plain", ""));
    // Most specific first, then the host's.
    assert_eq!(
        ring.lookup("reg.example.com/team/app"),
        vec![cred("team", ""), cred("host", "")]
    );
    assert_eq!(ring.lookup("reg.example.com/other"), vec![cred("host", "")]);
    // Ports must agree.
    assert_eq!(
        ring.lookup("reg.example.com:5000/a"),
        vec![cred("port", "")]
    );
    assert!(ring.lookup("reg.example.com:6000/a").is_empty());
    // The wildcard stands for one label.
    assert_eq!(ring.lookup("a.wild.io/x"), vec![cred("wild", "")]);
    assert!(ring.lookup("a.b.wild.io/x").is_empty());
    assert!(ring.lookup("wild.io/x").is_empty());
    // The scheme is dropped.
    assert_eq!(ring.lookup("plain.io/x"), vec![cred("plain", "")]);
    assert!(ring.lookup("docker.io/library/busybox").is_empty());
}

#[test]
fn docker_hub_credentials_serve_docker_hub_images() {
    let mut ring = Keyring::default();
    ring.add("https://index.docker.io/v1/", cred("hub", ""));
    assert_eq!(
        ring.lookup("docker.io/library/busybox"),
        vec![cred("hub", "")]
    );
    assert!(ring.lookup("reg.example.com/busybox").is_empty());
    let mut ring = Keyring::default();
    ring.add("docker.io", cred("io", ""));
    assert_eq!(ring.lookup(&repository("busybox")), vec![cred("io", "")]);
}

#[test]
fn repositories_are_fully_qualified() {
    assert_eq!(repository("busybox"), "docker.io/library/busybox");
    assert_eq!(repository("busybox:1.35"), "docker.io/library/busybox");
    assert_eq!(repository("team/app:v1"), "docker.io/team/app");
    assert_eq!(
        repository("index.docker.io/library/busybox"),
        "docker.io/library/busybox"
    );
    assert_eq!(
        repository("reg.io:5000/team/app:v1@sha256:abcd"),
        "reg.io:5000/team/app"
    );
    assert_eq!(repository("localhost/app"), "localhost/app");
    assert_eq!(
        repository("10.0.0.1:5443/private/busybox:1.35"),
        "10.0.0.1:5443/private/busybox"
    );
}

#[test]
fn globs_match_one_label() {
    assert!(keyring::glob("*", "abc"));
    assert!(keyring::glob("a*c", "abbbc"));
    assert!(keyring::glob("a?c", "abc"));
    assert!(!keyring::glob("a?c", "ac"));
    assert!(!keyring::glob("ab", "abc"));
}
