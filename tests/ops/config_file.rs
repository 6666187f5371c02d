//! The config file end to end: `k3rs server --config FILE` takes the file's keys as flags,
//! adds `FILE.d/*.yaml` (with `key+:` appending), lets the command line win for single-value
//! flags while repeatable flags add up, and refuses keys that are no flag.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::K3rs;
use serde_json::Value;

fn write_config(dir: &Path) -> String {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        "# k3rs server settings\n\
         tls-san: [from-config.example]\n\
         write-kubeconfig-mode: \"0644\"\n\
         kube-apiserver-arg:\n  - default-not-ready-toleration-seconds=11\n\
         disable-scheduler: true\n\
         node-lease-renew-interval: 10s\n",
    )
    .unwrap();
    std::fs::create_dir(dir.join("config.yaml.d")).unwrap();
    std::fs::write(
        dir.join("config.yaml.d/10-dropin.yaml"),
        "tls-san+: [from-dropin.example]\n",
    )
    .unwrap();
    path.display().to_string()
}

fn serving_sans(data_dir: &Path) -> String {
    let cert = data_dir.join("server/tls/serving-kube-apiserver.crt");
    let out = Command::new(common::require_program("openssl", "openssl"))
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
        .arg(&cert)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn config_file_flags_and_their_precedence() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let (server, k) = Kubectl::start_server(&[
        "--config",
        &config,
        "--tls-san",
        "from-cli.example",
        "--write-kubeconfig-mode",
        "0600",
    ]);

    // Repeatable flags: the file's, the drop-in's and the command line's all apply.
    let sans = serving_sans(&server.data_dir());
    for name in [
        "from-config.example",
        "from-dropin.example",
        "from-cli.example",
    ] {
        assert!(sans.contains(&format!("DNS:{name}")), "{name} in {sans}");
    }
    // A single-value flag: the command line wins over the file.
    let mode = std::fs::metadata(&k.kubeconfig)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    // The file's kube-apiserver-arg reached the API server.
    k.ok(&["run", "p", "--image=busybox", "--restart=Never"]);
    let pod: Value = serde_json::from_str(&k.ok(&["get", "pod", "p", "-o", "json"])).unwrap();
    let not_ready = pod["spec"]["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["key"] == "node.kubernetes.io/not-ready")
        .cloned()
        .unwrap();
    assert_eq!(not_ready["tolerationSeconds"], 11);
    // disable-scheduler: true — no scheduler takes its Lease.
    std::thread::sleep(Duration::from_secs(2));
    let lease = k.run(&["get", "lease", "-n", "kube-system", "kube-scheduler"]);
    assert!(!lease.ok && lease.stderr.contains("NotFound"), "{lease:?}");
}

#[test]
fn a_key_that_is_no_flag_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, "tls-sans: [typo.example]\n").unwrap();
    let (status, log, _dir) = K3rs::run_to_exit(
        &["--config", &path.display().to_string()],
        Duration::from_secs(30),
    );
    assert!(status.is_some_and(|s| !s.success()), "{status:?}: {log}");
    assert!(
        log.contains(r#""tls-sans" is not a flag of any k3rs command"#),
        "{log}"
    );
    // A named file that does not exist is an error too.
    let (status, log, _dir) = K3rs::run_to_exit(
        &["--config", "/nonexistent/k3rs/config.yaml"],
        Duration::from_secs(30),
    );
    assert!(status.is_some_and(|s| !s.success()), "{status:?}: {log}");
    assert!(
        log.contains("reading config file /nonexistent/k3rs/config.yaml"),
        "{log}"
    );
}

#[test]
fn a_disable_item_that_is_no_component_is_refused() {
    // In the config file as k3s users write it, and as a flag: the typo is named.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, "disable:\n  - traefik\n  - core-dns\n").unwrap();
    let (status, log, _dir) = K3rs::run_to_exit(
        &["--config", &path.display().to_string()],
        Duration::from_secs(30),
    );
    assert!(status.is_some_and(|s| !s.success()), "{status:?}: {log}");
    assert!(
        log.contains(r#"--disable: "core-dns" is not a packaged component (valid items: coredns, servicelb, traefik, local-storage, metrics-server, runtimes, network-policy)"#),
        "{log}"
    );
    let (status, log, _dir) =
        K3rs::run_to_exit(&["--disable", "servicelb,ingress"], Duration::from_secs(30));
    assert!(status.is_some_and(|s| !s.success()), "{status:?}: {log}");
    assert!(
        log.contains(r#""ingress" is not a packaged component"#),
        "{log}"
    );
}

/// A malformed config file stops the start before anything runs, naming the file and line
/// (and column for YAML syntax) and the key: invalid YAML, a value of the wrong type for its
/// flag, a list where a switch belongs, and a key that is no flag.
#[test]
fn a_malformed_config_file_names_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "syntax.yaml",
            "tls-san: [a.example\nhttps-listen-port: 7443\n",
            ":2:18: invalid YAML: did not find expected ',' or ']'",
        ),
        (
            "type.yaml",
            "# settings\nnode-name: n1\nhttps-listen-port: many\n",
            r#":3: "https-listen-port": invalid value 'many' for '--https-listen-port"#,
        ),
        (
            "switch.yaml",
            "disable-scheduler: [yes]\n",
            r#":1: "disable-scheduler": "yes": a switch takes true or false"#,
        ),
        (
            "unknown.yaml",
            "tls-san: [a.example]\n\ncluster-dnss: 10.43.0.10\n",
            r#":3: "cluster-dnss" is not a flag of any k3rs command"#,
        ),
    ];
    for (name, text, message) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let path = path.display().to_string();
        let (status, log, _dir) = K3rs::run_to_exit(&["--config", &path], Duration::from_secs(30));
        assert!(status.is_some_and(|s| !s.success()), "{status:?}: {log}");
        let want = format!("config file {path}{message}");
        assert!(log.contains(&want), "{want} not in {log}");
    }
}
