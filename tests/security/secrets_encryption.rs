//! Secrets encryption at rest end to end: a server started with `--secrets-encryption` stores
//! Secrets as `k8s:enc:aesgcm:v1:<key>:…` (seen with the real etcdctl on its etcd port) while
//! kubectl reads them in plain; ConfigMaps stay plain; `k3rs secrets-encrypt status`,
//! `rotate-keys` (new key, every Secret re-encrypted, old key dropped) and `reencrypt` work and
//! survive a restart; the key file is 0600; a server without the flag says encryption is off;
//! joined servers share the keys, also through a rotation started on any of three servers.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::etcdctl::etcdctl;
use crate::common::k3rs::K3rs;
use crate::common::kubectl::Kubectl;
use crate::common::process::run_with_timeout;

/// `k3rs secrets-encrypt <args> --data-dir <server's>`: (exit code, stdout, stderr).
fn cli(server: &K3rs, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    cmd.arg("secrets-encrypt")
        .args(args)
        .arg("--data-dir")
        .arg(server.data_dir());
    run_with_timeout(cmd, None, Duration::from_secs(60))
}

fn cli_ok(server: &K3rs, args: &[&str]) -> String {
    let (code, out, err) = cli(server, args);
    assert_eq!(code, Some(0), "k3rs secrets-encrypt {args:?}: {out}{err}");
    out
}

/// The raw value stored under `key`, as etcdctl prints it.
fn stored(server: &K3rs, key: &str) -> String {
    etcdctl(
        &server.endpoint(),
        &["get", key, "--print-value-only"],
        None,
    )
    .expect_ok(&format!("etcdctl get {key}"))
    .stdout
}

/// The active key's name from the status output (the row marked `*`).
fn active_key(status: &str) -> String {
    status
        .lines()
        .find(|l| l.trim_start().starts_with('*'))
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_else(|| panic!("no active key in\n{status}"))
        .to_string()
}

#[test]
fn secrets_are_encrypted_at_rest_and_keys_rotate() {
    let (mut server, k) = Kubectl::start_server(&["--secrets-encryption"]);
    let config = server.data_dir().join("server/cred/encryption-config.json");
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", config.display());

    k.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    k.ok(&[
        "create",
        "configmap",
        "c1",
        "--from-literal=password=hunter2",
    ]);
    let status = cli_ok(&server, &["status"]);
    assert!(
        status.starts_with("Encryption Status: Enabled\n"),
        "{status}"
    );
    let first = active_key(&status);
    assert!(first.starts_with("aesgcmkey-"), "{status}");

    let raw = stored(&server, "/registry/secrets/default/s1");
    assert!(
        raw.starts_with(&format!("k8s:enc:aesgcm:v1:{first}:")),
        "{raw:?}"
    );
    assert!(!raw.contains("aHVudGVyMg=="), "{raw:?}");
    assert!(stored(&server, "/registry/configmaps/default/c1").contains("hunter2"));
    assert_eq!(
        k.ok(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]),
        "aHVudGVyMg=="
    );

    // Rotation: a new active key, the Secret rewritten with it, the old key gone.
    let rotated = cli_ok(&server, &["rotate-keys"]);
    let second = active_key(&rotated);
    assert_ne!(second, first, "{rotated}");
    assert!(rotated.contains("Secrets re-encrypted: "), "{rotated}");
    assert!(!rotated.contains(&first), "{rotated}");
    assert!(stored(&server, "/registry/secrets/default/s1")
        .starts_with(&format!("k8s:enc:aesgcm:v1:{second}:")));
    assert_eq!(
        k.ok(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]),
        "aHVudGVyMg=="
    );
    // Nothing left to re-encrypt.
    let again = cli_ok(&server, &["reencrypt"]);
    assert!(again.contains("Secrets re-encrypted: 0\n"), "{again}");

    // A restart reads the key file: old Secrets decrypt, new ones are encrypted.
    server.restart();
    let k = common::kubectl::Kubectl {
        bin: k.bin.clone(),
        kubeconfig: server.kubeconfig(),
    };
    common::wait_for("the API after the restart", Duration::from_secs(60), || {
        k.run(&["get", "secret", "s1", "-o", "name"])
            .ok
            .then_some(())
    });
    k.ok(&["create", "secret", "generic", "s2", "--from-literal=k=v"]);
    assert!(stored(&server, "/registry/secrets/default/s2")
        .starts_with(&format!("k8s:enc:aesgcm:v1:{second}:")));
    assert_eq!(
        k.ok(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]),
        "aHVudGVyMg=="
    );
}

#[test]
fn without_the_flag_secrets_are_plain_and_the_cli_says_so() {
    let (server, k) = Kubectl::start_server(&[]);
    k.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    // Secret data is stored base64-encoded, as the API serves it.
    assert!(stored(&server, "/registry/secrets/default/s1").contains("aHVudGVyMg=="));
    assert!(cli_ok(&server, &["status"]).starts_with("Encryption Status: Disabled\n"));
    let (code, out, err) = cli(&server, &["rotate-keys"]);
    assert_ne!(code, Some(0), "{out}");
    assert!(
        err.contains("secrets encryption is not enabled on this server"),
        "{err}"
    );
}

#[test]
fn servers_share_their_keys_through_joins_and_rotations() {
    let p1 = common::free_port().to_string();
    let (first, k1) =
        Kubectl::start_server(&["--secrets-encryption", "--etcd-peer-port", p1.as_str()]);
    k1.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    let key = active_key(&cli_ok(&first, &["status"]));

    let p2 = common::free_port().to_string();
    let second = K3rs::join_kubernetes(
        &first,
        &first.token(),
        &["--secrets-encryption", "--etcd-peer-port", p2.as_str()],
    );
    let k2 = Kubectl {
        bin: k1.bin.clone(),
        kubeconfig: second.kubeconfig(),
    };
    // The joined server decrypts what the first stored: it received the cluster's key file
    // instead of generating a key of its own.
    let password = common::wait_for(
        "s1 through the joined server",
        Duration::from_secs(60),
        || {
            let out = k2.run(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]);
            out.ok.then_some(out.stdout)
        },
    );
    assert_eq!(password, "aHVudGVyMg==");
    let keys = |s: &K3rs| s.data_dir().join("server/cred/encryption-config.json");
    assert_eq!(
        std::fs::read(keys(&second)).unwrap(),
        std::fs::read(keys(&first)).unwrap()
    );
    let mode = std::fs::metadata(keys(&second))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(active_key(&cli_ok(&second, &["status"])), key);

    // What the joined server encrypts, the first one reads.
    k2.ok(&["create", "secret", "generic", "s2", "--from-literal=k=v"]);
    assert!(stored(&second, "/registry/secrets/default/s2")
        .starts_with(&format!("k8s:enc:aesgcm:v1:{key}:")));
    assert_eq!(
        k1.ok(&["get", "secret", "s2", "-o", "jsonpath={.data.k}"]),
        "dg=="
    );

    // A third server; then the keys are rotated on the second, and every server reads every
    // Secret, each stored with the new key, and holds the same key file.
    let p3 = common::free_port().to_string();
    let third = K3rs::join_kubernetes(
        &first,
        &first.token(),
        &["--secrets-encryption", "--etcd-peer-port", p3.as_str()],
    );
    let k3 = Kubectl {
        bin: k1.bin.clone(),
        kubeconfig: third.kubeconfig(),
    };
    common::wait_for(
        "s1 through the third server",
        Duration::from_secs(60),
        || k3.run(&["get", "secret", "s1"]).ok.then_some(()),
    );
    k3.ok(&["create", "secret", "generic", "s3", "--from-literal=k=w"]);
    let rotated = cli_ok(&second, &["rotate-keys"]);
    let new_key = active_key(&cli_ok(&second, &["status"]));
    assert_ne!(new_key, key, "{rotated}");
    let servers = [(&first, &k1), (&second, &k2), (&third, &k3)];
    for (server, k) in servers {
        common::wait_for(
            "the new key on every server",
            Duration::from_secs(30),
            || (active_key(&cli_ok(server, &["status"])) == new_key).then_some(()),
        );
        assert_eq!(
            k.ok(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]),
            "aHVudGVyMg=="
        );
        assert_eq!(
            k.ok(&["get", "secret", "s2", "-o", "jsonpath={.data.k}"]),
            "dg=="
        );
        assert_eq!(
            k.ok(&["get", "secret", "s3", "-o", "jsonpath={.data.k}"]),
            "dw=="
        );
        assert_eq!(
            std::fs::read(keys(server)).unwrap(),
            std::fs::read(keys(&second)).unwrap(),
            "{}",
            keys(server).display()
        );
    }
    for s in ["s1", "s2", "s3"] {
        let raw = stored(&first, &format!("/registry/secrets/default/{s}"));
        assert!(
            raw.starts_with(&format!("k8s:enc:aesgcm:v1:{new_key}:")),
            "{s}: {raw}"
        );
    }
    // The keys travel sealed: the store never holds them in the clear.
    let shared = stored(&first, "/k3rs/secrets-encryption/config");
    assert!(
        !shared.contains(&new_key),
        "the shared configuration is sealed"
    );
    // New Secrets written through any server are read through the others.
    k1.ok(&["create", "secret", "generic", "s4", "--from-literal=k=x"]);
    assert_eq!(
        k3.ok(&["get", "secret", "s4", "-o", "jsonpath={.data.k}"]),
        "eA=="
    );
}
