//! Running `etcdctl` (API v3) against an endpoint.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::process::{run_with_timeout, Background};

/// Client certificate files for an mTLS endpoint.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// Where a store answers: `url` is what goes into `--endpoints`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: String,
    pub tls: Option<TlsFiles>,
}

impl Endpoint {
    /// `host:port` of the endpoint.
    pub fn addr(&self) -> &str {
        self.url.split("://").nth(1).unwrap_or(&self.url)
    }

    /// The same server, but with other client credentials.
    pub fn with_tls(&self, tls: Option<TlsFiles>) -> Endpoint {
        Endpoint {
            url: self.url.clone(),
            tls,
        }
    }

    /// The global flags etcdctl needs for this endpoint.
    pub fn etcdctl_flags(&self) -> Vec<String> {
        let mut flags = vec![
            format!("--endpoints={}", self.url),
            "--dial-timeout=3s".to_string(),
            "--command-timeout=5s".to_string(),
        ];
        if let Some(tls) = &self.tls {
            flags.push(format!("--cacert={}", tls.ca.display()));
            if let Some(cert) = &tls.cert {
                flags.push(format!("--cert={}", cert.display()));
            }
            if let Some(key) = &tls.key {
                flags.push(format!("--key={}", key.display()));
            }
        }
        flags
    }
}

/// What one etcdctl run produced. `code` is `None` if we had to kill it.
#[derive(Debug, Clone)]
pub struct CtlOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CtlOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Panics with the whole output unless the run succeeded.
    pub fn expect_ok(self, what: &str) -> CtlOutput {
        assert!(self.success(), "{what} failed: {self:?}");
        self
    }
}

fn command(ep: &Endpoint, args: &[&str]) -> Command {
    let etcdctl = super::require_program("etcdctl", "etcd-client");
    let mut cmd = Command::new(etcdctl);
    for (var, _) in std::env::vars() {
        if var.starts_with("ETCDCTL_") {
            cmd.env_remove(var);
        }
    }
    cmd.env("ETCDCTL_API", "3");
    cmd.args(ep.etcdctl_flags());
    cmd.args(args);
    cmd
}

/// Runs `etcdctl <flags> <args>` with optional stdin; kills it after 30 s.
pub fn etcdctl(ep: &Endpoint, args: &[&str], stdin: Option<&str>) -> CtlOutput {
    etcdctl_with_timeout(ep, args, stdin, Duration::from_secs(30))
}

pub fn etcdctl_with_timeout(
    ep: &Endpoint,
    args: &[&str],
    stdin: Option<&str>,
    timeout: Duration,
) -> CtlOutput {
    let (code, stdout, stderr) =
        run_with_timeout(command(ep, args), stdin.map(str::as_bytes), timeout);
    CtlOutput {
        code,
        stdout,
        stderr,
    }
}

/// Starts a long-running etcdctl (e.g. `watch`) in the background.
pub fn etcdctl_background(ep: &Endpoint, args: &[&str]) -> Background {
    Background::spawn(command(ep, args))
}

/// `etcdctl member list`: (name, peer URL, started, is learner) per member.
pub fn members(ep: &Endpoint) -> Option<Vec<(String, String, bool, bool)>> {
    let out = etcdctl_with_timeout(ep, &["member", "list"], None, Duration::from_secs(10));
    if !out.success() {
        return None;
    }
    Some(
        out.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split(", ").collect();
                (
                    f.get(2).unwrap_or(&"").to_string(),
                    f.get(3).unwrap_or(&"").to_string(),
                    f.get(1) == Some(&"started"),
                    f.last() == Some(&"true"),
                )
            })
            .collect(),
    )
}

/// `Some` when `ep` lists exactly `n` started voters.
pub fn started_voters(ep: &Endpoint, n: usize) -> Option<()> {
    let m = members(ep)?;
    (m.len() == n
        && m.iter()
            .all(|(name, _, started, learner)| *started && !learner && !name.is_empty()))
    .then_some(())
}

/// The ID (hex, as etcdctl prints it) of the member with `peer_url`, from `etcdctl member list`.
pub fn member_id(ep: &Endpoint, peer_url: &str) -> Option<String> {
    let out = etcdctl_with_timeout(ep, &["member", "list"], None, Duration::from_secs(10));
    out.stdout.lines().find_map(|l| {
        let f: Vec<&str> = l.split(", ").collect();
        (f.get(3) == Some(&peer_url)).then(|| f[0].to_string())
    })
}

/// `(this member's id, the leader's id)` from `etcdctl endpoint status -w json`.
pub fn endpoint_status(ep: &Endpoint) -> Option<(u64, u64)> {
    let out = etcdctl_with_timeout(
        ep,
        &["endpoint", "status", "-w", "json"],
        None,
        Duration::from_secs(10),
    );
    let v: serde_json::Value = serde_json::from_str(&out.stdout).ok()?;
    let s = &v[0]["Status"];
    Some((s["header"]["member_id"].as_u64()?, s["leader"].as_u64()?))
}
