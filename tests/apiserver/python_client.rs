//! End to end: the Python `kubernetes` client (pip) against the real `k3rs server`: CRUD,
//! conflicts, lists with label and field selectors and paging, watch with `timeout_seconds`
//! ending the stream, strategic merge patch, the scale and status subresources, and a
//! Service whose DELETE answers the deleted Service (`tests/python/client_check.py`).
//!
//! The interpreter is `$K3RS_PYTHON`, else the venv `scripts/prereqs.sh` makes
//! (`/var/cache/k3rs-venv`, or `~/.cache/k3rs-venv`), else `python3`; without the `kubernetes` package the test fails
//! with a message saying how to install it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::K3rs;

/// Where `scripts/prereqs.sh test` installs the client.
const PREREQS_VENV: &str = "/var/cache/k3rs-venv/bin/python3";

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("K3RS_PYTHON") {
        return PathBuf::from(p);
    }
    if Path::new(PREREQS_VENV).is_file() {
        return PathBuf::from(PREREQS_VENV);
    }
    if let Some(home) = std::env::var_os("HOME") {
        let user_venv = Path::new(&home).join(".cache/k3rs-venv/bin/python3");
        if user_venv.is_file() {
            return user_venv;
        }
    }
    common::require_program("python3", "python3")
}

#[test]
fn python_kubernetes_client() {
    let python = python();
    let (code, _, stderr) = common::process::run_with_timeout(
        {
            let mut c = Command::new(&python);
            c.args(["-c", "import kubernetes"]);
            c
        },
        None,
        Duration::from_secs(60),
    );
    assert_eq!(
        code,
        Some(0),
        "{} cannot import the `kubernetes` package: run scripts/prereqs.sh test \
         (it installs it into {PREREQS_VENV}) or set K3RS_PYTHON: {stderr}",
        python.display()
    );

    // The script writes a Deployment's status itself: no controller may race it.
    let mut server = K3rs::start_kubernetes(common::k3rs::AS_BARE_API);
    let k = Kubectl {
        bin: common::require_program("kubectl", "kubectl"),
        kubeconfig: server.kubeconfig(),
    };
    common::wait_for("the API", Duration::from_secs(60), || {
        server.assert_running();
        k.run(&["get", "namespace", "default", "-o", "name"])
            .ok
            .then_some(())
    });

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_check.py");
    let mut cmd = Command::new(&python);
    cmd.arg(&script)
        .arg("python-client")
        .env("KUBECONFIG", server.kubeconfig())
        .env("PYTHONUNBUFFERED", "1");
    let (code, stdout, stderr) =
        common::process::run_with_timeout(cmd, None, Duration::from_secs(300));
    assert_eq!(
        code,
        Some(0),
        "the Python client checks failed:\n{stdout}\n{stderr}\nserver log tail:\n{}",
        common::log_tail(&server.log_path(), 30)
    );
    assert!(
        stdout.contains("python client: all checks passed"),
        "{stdout}\n{stderr}"
    );
    // What the script did is visible to kubectl too.
    // kube-root-ca.crt is the root CA publisher's, in every namespace.
    common::wait_for("kube-root-ca.crt", Duration::from_secs(30), || {
        k.run(&["get", "cm", "kube-root-ca.crt", "-n", "python-client"])
            .ok
            .then_some(())
    });
    let left = k.ok(&["get", "configmaps", "-n", "python-client", "-o", "name"]);
    assert_eq!(
        left,
        "configmap/c2\nconfigmap/c3\nconfigmap/kube-root-ca.crt\n"
    );
    server.assert_running();
}
