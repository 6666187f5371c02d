//! `k3rs --version`, `k3rs check-config` on this machine and `k3rs kubectl` against a real
//! server.

use std::process::Command;

use crate::common::kubectl::Kubectl;

fn k3rs(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_k3rs"))
        .args(args)
        .envs(env.iter().copied())
        .env("K3RS_CONFIG_FILE", "/dev/null")
        .output()
        .expect("running k3rs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn which(name: &str) -> Option<String> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `k3rs --version` says the Kubernetes version with k3rs's release as build metadata, as
/// `k3s --version` says `v1.33.0+k3s1`.
#[test]
fn version_is_the_kubernetes_version_with_k3rs_build_metadata() {
    let (ok, out, err) = k3rs(&["--version"], &[]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "k3rs v1.33.0+k3rs1");
}

#[test]
fn check_config_reports_this_machine() {
    let (ok, out, err) = k3rs(&["check-config"], &[]);
    let lines: Vec<&str> = out.lines().collect();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(
        lines[0].starts_with(&format!("- kernel version: pass ({})", kernel.trim())),
        "{out}"
    );
    assert!(lines[1].starts_with("- cgroup hierarchy: "), "{out}");
    // Programs: exactly where the shell finds them, or a failure naming the package.
    for (program, package) in [
        ("runc", "runc"),
        ("iptables-restore", "iptables"),
        ("ip", "iproute2"),
    ] {
        let want = match which(program) {
            Some(path) => format!("- {program}: pass ({path})"),
            None => format!("- {program}: fail (not found; install the {package} package)"),
        };
        assert!(lines.contains(&want.as_str()), "{want:?} in {out}");
    }
    let failed = lines.iter().filter(|l| l.contains(": fail (")).count();
    assert_eq!(
        ok,
        failed == 0,
        "exit status vs {failed} failures: {out}{err}"
    );
    let summary = *lines.last().unwrap();
    if failed == 0 {
        assert_eq!(summary, "STATUS: pass");
    } else {
        assert!(
            summary.starts_with(&format!("STATUS: {failed} check")),
            "{out}"
        );
    }

    // Without the programs on PATH every program check fails, and so does the command.
    let (ok, out, _) = k3rs(&["check-config"], &[("PATH", "/nonexistent")]);
    assert!(!ok);
    for program in ["containerd", "runc", "iptables", "iptables-save", "ip"] {
        assert!(
            out.contains(&format!("- {program}: fail (not found; install")),
            "{out}"
        );
    }
}

#[test]
fn k3rs_kubectl_runs_kubectl_as_the_admin() {
    let (_server, k) = Kubectl::start_server(&["--disable-scheduler"]);
    let kubeconfig = k.kubeconfig.display().to_string();
    let (ok, out, err) = k3rs(
        &["kubectl", "get", "namespace", "default", "-o", "name"],
        &[("KUBECONFIG", &kubeconfig)],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(out.trim(), "namespace/default");
    // kubectl's own flags, --help included, are kubectl's.
    let (ok, out, _) = k3rs(&["kubectl", "--help"], &[("KUBECONFIG", &kubeconfig)]);
    assert!(
        ok && out.contains("kubectl controls the Kubernetes cluster manager"),
        "{out}"
    );
    // Without kubectl the error says so.
    let (ok, _, err) = k3rs(&["kubectl", "version"], &[("PATH", "/nonexistent")]);
    assert!(!ok);
    assert!(err.contains("k3rs kubectl: no kubectl on PATH"), "{err}");
}
