//! The real `k3rs agent --hollow N` (simulated nodes) against a test server.

use std::path::PathBuf;
use std::process::Command;

use super::process::ChildGuard;

/// A running `k3rs agent --hollow`; SIGKILLed when dropped.
#[derive(Debug)]
pub struct HollowAgent {
    pub proc: ChildGuard,
    _dir: tempfile::TempDir,
}

impl HollowAgent {
    /// Starts `count` hollow nodes named `<prefix><index>` with the server's admin kubeconfig,
    /// plus `extra_args`.
    pub fn start(kubeconfig: &PathBuf, count: usize, prefix: &str, extra_args: &[&str]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("k3rs-hollow-")
            .tempdir()
            .expect("tempdir");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
        cmd.arg("agent")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--hollow")
            .arg(count.to_string())
            .arg("--hollow-name-prefix")
            .arg(prefix)
            .args(extra_args)
            .env("K3RS_LOG", "info,k3rs_agent=debug");
        let proc = ChildGuard::spawn("k3rs agent", cmd, &dir.path().join("agent.log"));
        HollowAgent { proc, _dir: dir }
    }
}
