//! Bootstrap tokens end to end: `k3rs token create|list|delete` on a server's data dir, the
//! default agent token, and the tokens authenticating (or not) at the API as kubectl sees it.

use std::path::Path;
use std::process::Command;
use std::str::FromStr;
use std::time::Duration;

use crate::common;
use crate::common::k3rs::K3rs;
use crate::common::kubectl::Kubectl;
use crate::common::process::run_with_timeout;
use crate::common::users;

/// `k3rs token <args> --data-dir <server's>`; panics unless it succeeds.
fn token_cli(server: &K3rs, args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    cmd.arg("token")
        .args(args)
        .arg("--data-dir")
        .arg(server.data_dir());
    let (code, out, err) = run_with_timeout(cmd, None, Duration::from_secs(60));
    assert_eq!(code, Some(0), "k3rs token {args:?}: {out}{err}");
    out
}

fn sha256_hex(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

fn as_token(admin: &Kubectl, server: &K3rs, name: &str, token: &str) -> Kubectl {
    Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::token_kubeconfig(server, name, token),
    }
}

/// The username the API recorded for a CSR `name` created with `k`.
fn csr_requester(admin: &Kubectl, k: &Kubectl, name: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k.pem");
    let csr = dir.path().join("csr.pem");
    let out = Command::new(common::require_program("openssl", "openssl"))
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes",
            "-subj",
            "/O=system:nodes/CN=system:node:n1",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&csr)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use base64::Engine;
    let request = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&csr).unwrap());
    let yaml = format!(
        "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: {name}
spec:
  request: {request}
  signerName: kubernetes.io/kube-apiserver-client-kubelet
  usages: [digital signature, key encipherment, client auth]
"
    );
    k.ok_stdin(&["create", "-f", "-"], Some(&yaml));
    admin.ok(&[
        "get",
        "csr",
        name,
        "-o",
        "jsonpath={.spec.username} {.spec.groups}",
    ])
}

#[test]
fn tokens_are_created_listed_authenticate_and_are_revoked() {
    let (server, admin) = Kubectl::start_server(&[]);
    let ca = server.data_dir().join("server/tls/server-ca.crt");
    let hash = sha256_hex(&ca);

    // create: the full form pins the server CA.
    let full = token_cli(&server, &["create", "--description", "e2e token"]);
    let full = full.trim();
    let (prefix, bearer) = full.split_once("::").expect("K10<hash>::<token>");
    assert_eq!(prefix, format!("K10{hash}"));
    let (id, secret) = bearer.split_once('.').unwrap();
    assert_eq!((id.len(), secret.len()), (6, 16), "{bearer}");

    // It authenticates as system:bootstrap:<id> in the bootstrappers groups.
    let bootstrapper = as_token(&admin, &server, "bootstrap", bearer);
    let who = csr_requester(&admin, &bootstrapper, "from-token");
    assert_eq!(
        who,
        format!(
            "system:bootstrap:{id} [\"system:bootstrappers\",\
             \"system:bootstrappers:k3rs:default-node-token\",\"system:authenticated\"]"
        )
    );

    // A wrong secret for an existing id is 401.
    let wrong = as_token(&admin, &server, "wrong", &format!("{id}.0000000000000000"));
    let out = wrong.run(&["get", "--raw", "/api"]);
    assert!(!out.ok && out.stderr.contains("Unauthorized"), "{out:?}");

    // list: kubeadm's table with this token and the default agent token.
    let list = token_cli(&server, &["list"]);
    let rows = common::kubectl::table(&list);
    assert_eq!(
        common::kubectl::header(&list),
        [
            "TOKEN",
            "TTL",
            "EXPIRES",
            "USAGES",
            "DESCRIPTION",
            "EXTRA",
            "GROUPS"
        ]
    );
    let mine = list
        .lines()
        .find(|l| l.starts_with(bearer))
        .unwrap_or_else(|| panic!("{bearer} in\n{list}"));
    let cols: Vec<&str> = mine
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    // kubeadm's ShortHumanDuration: 24h is "1d", a moment less "23h".
    assert!(cols[1] == "23h" || cols[1] == "1d", "{mine}");
    assert_eq!(
        &cols[3..],
        [
            "authentication,signing",
            "e2e token",
            "system:bootstrappers:k3rs:default-node-token"
        ]
    );
    assert_eq!(
        rows.len(),
        3,
        "header, this token and the agent token: {list}"
    );

    // The default agent token: 0600, pins the CA, never expires, authenticates.
    let agent_path = server.data_dir().join("server/agent-token");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&agent_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let agent = std::fs::read_to_string(&agent_path).unwrap();
    let (agent_prefix, agent_bearer) = agent.trim().split_once("::").unwrap();
    assert_eq!(agent_prefix, format!("K10{hash}"));
    let agent_row = list
        .lines()
        .find(|l| l.starts_with(agent_bearer))
        .unwrap_or_else(|| panic!("agent token in\n{list}"));
    assert!(
        agent_row.contains("<forever>") && agent_row.contains("<never>"),
        "{agent_row}"
    );
    let agent_user = as_token(&admin, &server, "agent", agent_bearer);
    assert!(agent_user.run(&["get", "--raw", "/api"]).ok);

    // delete: the token stops authenticating.
    let out = token_cli(&server, &["delete", id]);
    assert_eq!(out.trim(), format!("bootstrap token \"{id}\" deleted"));
    let out = bootstrapper.run(&["get", "--raw", "/api"]);
    assert!(!out.ok && out.stderr.contains("Unauthorized"), "{out:?}");
    assert!(!token_cli(&server, &["list"]).contains(bearer));
}

#[test]
fn expired_and_unmarked_tokens_get_401() {
    let (server, admin) = Kubectl::start_server(&[]);
    let secret = |id: &str, extra: &str| {
        format!(
            "apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-{id}
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  token-id: {id}
  token-secret: 0123456789abcdef
{extra}"
        )
    };
    admin.ok_stdin(
        &["create", "-f", "-"],
        Some(&secret(
            "expire",
            "  usage-bootstrap-authentication: \"true\"\n  expiration: \"2020-01-01T00:00:00Z\"\n",
        )),
    );
    admin.ok_stdin(&["create", "-f", "-"], Some(&secret("nouse1", "")));
    admin.ok_stdin(
        &["create", "-f", "-"],
        Some(&secret(
            "valid1",
            "  usage-bootstrap-authentication: \"true\"\n  expiration: \"2099-01-01T00:00:00Z\"\n",
        )),
    );
    for id in ["expire", "nouse1"] {
        let k = as_token(&admin, &server, id, &format!("{id}.0123456789abcdef"));
        let out = k.run(&["get", "--raw", "/api"]);
        assert!(
            !out.ok && out.stderr.contains("Unauthorized"),
            "{id}: {out:?}"
        );
    }
    let k = as_token(&admin, &server, "valid1", "valid1.0123456789abcdef");
    let out = k.run(&["get", "--raw", "/api"]);
    assert!(out.ok, "a token expiring in 2099 authenticates: {out:?}");

    // Go durations, as every duration flag takes them: --ttl 1h30m expires in 90 minutes.
    let long = token_cli(&server, &["create", "--ttl", "1h30m"]);
    let long_id = long
        .trim()
        .split_once("::")
        .unwrap()
        .1
        .split_once('.')
        .unwrap()
        .0
        .to_string();
    let expiration = admin.ok(&[
        "-n",
        "kube-system",
        "get",
        "secret",
        &format!("bootstrap-token-{long_id}"),
        "-o",
        "jsonpath={.data.expiration}",
    ]);
    use base64::Engine;
    let expiration = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(expiration.trim())
            .unwrap(),
    )
    .unwrap();
    let expires: std::time::SystemTime = k8s_openapi::jiff::Timestamp::from_str(&expiration)
        .map(std::time::SystemTime::from)
        .unwrap_or_else(|e| panic!("{expiration}: {e}"));
    let left = expires
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    assert!(
        left > Duration::from_secs(85 * 60) && left <= Duration::from_secs(90 * 60),
        "--ttl 1h30m expires in {left:?} ({expiration})"
    );
    let mut bad = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    bad.args(["token", "create", "--ttl", "1x"]);
    let (code, _, err) = run_with_timeout(bad, None, Duration::from_secs(30));
    assert!(
        code != Some(0) && err.contains("invalid duration \"1x\""),
        "{err}"
    );

    // `k3rs token create --ttl 1s`: authenticates until it expires, then 401.
    let full = token_cli(&server, &["create", "--ttl", "1s"]);
    let bearer = full.trim().split_once("::").unwrap().1.to_string();
    let k = as_token(&admin, &server, "short", &bearer);
    common::wait_for("the 1s token to expire", Duration::from_secs(30), || {
        let out = k.run(&["get", "--raw", "/api"]);
        out.stderr.contains("Unauthorized").then_some(())
    });
}
