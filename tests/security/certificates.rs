//! Certificate lifetime and rotation with the real binary, `kubectl` and `openssl`:
//! - `k3rs certificate check` on a fresh server lists every certificate file (CAs and
//!   leaves), all OK, as text lines and as k3s's table.
//! - A serving certificate that expires within 90 days (re-signed with openssl by the
//!   server's own CA for 10 days) shows WARNING, and the next start renews it for a year from
//!   the unchanged CA: kubectl with the kubeconfig from before keeps working.
//! - `k3rs certificate rotate --service admin,api-server` (server stopped) backs the tls dir up
//!   to `tls-<unix time>` and removes those leaves; the next start issues new ones from the
//!   same CAs, so both the rewritten and the old admin kubeconfig work.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;

fn k3rs(args: &[&str], data: &Path) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    cmd.args(args)
        .arg("--data-dir")
        .arg(data)
        .env("K3RS_CONFIG_FILE", "/dev/null");
    let (code, out, err) = common::process::run_with_timeout(cmd, None, Duration::from_secs(30));
    (code == Some(0), out, err)
}

fn check(data: &Path, output: &str) -> String {
    let (ok, out, err) = k3rs(&["certificate", "check", "--output", output], data);
    assert!(ok, "certificate check failed: {err}");
    out
}

/// The table's rows as (FILENAME, STATUS).
fn statuses(table: &str) -> Vec<(String, String)> {
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("FILENAME") && header.ends_with("RESIDUAL TIME   STATUS"),
        "{header}"
    );
    lines
        .skip(1)
        .map(|l| {
            let file = l.split_whitespace().next().unwrap().to_string();
            let status = if l.ends_with("NOT YET VALID") {
                "NOT YET VALID".to_string()
            } else {
                l.split_whitespace().last().unwrap().to_string()
            };
            (file, status)
        })
        .collect()
}

fn status_of(data: &Path, file: &str) -> String {
    statuses(&check(data, "table"))
        .into_iter()
        .find(|(f, _)| f == file)
        .unwrap_or_else(|| panic!("{file} not listed"))
        .1
}

fn openssl(args: &[&str]) {
    let out = Command::new(common::require_program("openssl", "openssl"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn wait_api(k: &Kubectl) {
    common::wait_for("kubectl to answer", Duration::from_secs(60), || {
        let ok = k.run(&["get", "namespace", "default", "-o", "name"]).ok;
        if !ok {
            std::thread::sleep(Duration::from_millis(300));
        }
        ok.then_some(())
    });
}

#[test]
fn check_renew_and_rotate() {
    let (mut server, k) = Kubectl::start_server(common::k3rs::AS_BARE_API);
    let data = server.data_dir();
    let tls = data.join("server/tls");

    // A fresh server: every certificate listed and OK.
    let table = check(&data, "table");
    let rows = statuses(&table);
    let files: Vec<&str> = rows.iter().map(|(f, _)| f.as_str()).collect();
    for f in [
        "server/tls/client-admin.crt",
        "server/tls/client-ca.crt",
        "server/tls/etcd/client.crt",
        "server/tls/etcd/peer-server-client.crt",
        "server/tls/etcd/server-client.crt",
        "server/tls/server-ca.crt",
        "server/tls/serving-kube-apiserver.crt",
    ] {
        assert!(files.contains(&f), "{f} missing from\n{table}");
    }
    assert!(rows.iter().all(|(_, s)| s == "OK"), "{table}");
    assert!(
        table.contains("CN=system:admin,O=system:masters"),
        "{table}"
    );
    let text = check(&data, "text");
    let admin_line = text
        .lines()
        .find(|l| l.starts_with("server/tls/client-admin.crt: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        admin_line.contains(": certificate CN=system:admin,O=system:masters is ok, expires at "),
        "{admin_line}"
    );
    assert_eq!(text.lines().count(), rows.len());

    // A serving certificate with 10 days left, signed by the same CA with the same key.
    server.kill();
    let work = tempfile::tempdir().unwrap();
    let csr = work.path().join("serving.csr");
    let serving = tls.join("serving-kube-apiserver.crt");
    let p = |p: &Path| p.display().to_string();
    openssl(&[
        "req",
        "-new",
        "-key",
        &p(&tls.join("serving-kube-apiserver.key")),
        "-subj",
        "/CN=kube-apiserver",
        "-out",
        &p(&csr),
    ]);
    let ext = work.path().join("ext.cnf");
    std::fs::write(
        &ext,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p(&csr),
        "-CA",
        &p(&tls.join("server-ca.crt")),
        "-CAkey",
        &p(&tls.join("server-ca.key")),
        "-CAcreateserial",
        "-days",
        "10",
        "-extfile",
        &p(&ext),
        "-out",
        &p(&serving),
    ]);
    let short_lived = read(&serving);
    assert_eq!(
        status_of(&data, "server/tls/serving-kube-apiserver.crt"),
        "WARNING"
    );
    let ca_before = read(&tls.join("server-ca.crt"));
    let client_ca_before = read(&tls.join("client-ca.crt"));
    let old_kubeconfig = work.path().join("old-kubeconfig.yaml");
    std::fs::copy(server.kubeconfig(), &old_kubeconfig).unwrap();

    server.relaunch();
    server.wait_ready();
    wait_api(&k);
    assert_ne!(
        read(&serving),
        short_lived,
        "the short-lived leaf was not renewed"
    );
    assert_eq!(
        status_of(&data, "server/tls/serving-kube-apiserver.crt"),
        "OK"
    );
    let renewed = check(&data, "table");
    let row = renewed
        .lines()
        .find(|l| l.starts_with("server/tls/serving-kube-apiserver.crt"))
        .unwrap();
    assert!(
        row.contains(" 1 year ") || row.contains(" 364 days ") || row.contains(" 365 days "),
        "{row}"
    );
    assert_eq!(
        read(&tls.join("server-ca.crt")),
        ca_before,
        "the CA changed"
    );
    let old = Kubectl {
        bin: k.bin.clone(),
        kubeconfig: old_kubeconfig.clone(),
    };
    old.ok(&["get", "namespace", "kube-system", "-o", "name"]);

    // Rotation, server stopped.
    server.kill();
    let admin_before = read(&tls.join("client-admin.crt"));
    let serving_before = read(&serving);
    let etcd_before = read(&tls.join("etcd/client.crt"));
    let (ok, _, err) = k3rs(&["certificate", "rotate", "--service", "kubelet"], &data);
    assert!(!ok);
    assert!(
        err.contains(
            "unknown service \"kubelet\"; known services: admin, auth-proxy, api-server, etcd"
        ),
        "{err}"
    );
    let (ok, out, err) = k3rs(
        &[
            "certificate",
            "rotate",
            "--service",
            "admin",
            "--service",
            "api-server",
        ],
        &data,
    );
    assert!(ok, "rotate failed: {err}");
    let backup: PathBuf = out
        .lines()
        .find_map(|l| l.strip_prefix("backed up the certificates to "))
        .unwrap_or_else(|| panic!("{out}"))
        .into();
    let name = backup.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.strip_prefix("tls-")
            .is_some_and(|ts| ts.parse::<u64>().is_ok()),
        "{name}"
    );
    assert_eq!(backup.parent().unwrap(), data.join("server"));
    assert_eq!(read(&backup.join("client-admin.crt")), admin_before);
    assert_eq!(
        read(&backup.join("serving-kube-apiserver.crt")),
        serving_before
    );
    assert!(!tls.join("client-admin.crt").exists());
    assert!(!tls.join("client-admin.key").exists());
    assert!(!serving.exists());

    server.relaunch();
    server.wait_ready();
    wait_api(&k);
    assert_ne!(read(&tls.join("client-admin.crt")), admin_before);
    assert_ne!(read(&serving), serving_before);
    assert_eq!(
        read(&tls.join("etcd/client.crt")),
        etcd_before,
        "etcd was not asked for"
    );
    assert_eq!(read(&tls.join("server-ca.crt")), ca_before);
    assert_eq!(read(&tls.join("client-ca.crt")), client_ca_before);
    // The rewritten kubeconfig (new admin certificate) and the old one (same CAs) both work.
    k.ok(&["get", "namespace", "kube-system", "-o", "name"]);
    old.ok(&["get", "namespace", "kube-system", "-o", "name"]);
    assert!(statuses(&check(&data, "table"))
        .iter()
        .all(|(_, s)| s == "OK"));
}
