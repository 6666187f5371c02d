//! Auditing (kube-apiserver's `--audit-policy-file` and `--audit-log-*`): every request the
//! policy selects is written to the audit log as `audit.k8s.io/v1 Event` JSON lines, at the
//! stages `RequestReceived`, `ResponseStarted` (long-running requests only) and
//! `ResponseComplete`.
//!
//! # Guarantees
//! - Without a policy file nothing is logged (as kube-apiserver).
//! - The policy is decided on the authenticated user (before impersonation).
//! - Each request carries one audit ID (the client's `Audit-ID` header, or a new UUID),
//!   answered in the `Audit-Id` response header.

pub(crate) mod annotations;
pub(crate) mod event;
pub(crate) mod log;
pub(crate) mod policy;
pub(crate) mod rotation;

use std::path::PathBuf;

pub(crate) use event::Event;
pub(crate) use policy::{Decision, Level, Policy, Stage};

/// The `--audit-*` flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `audit-log-path` (`-`: stdout).
    pub log_path: Option<String>,
    /// `audit-policy-file`.
    pub policy_file: Option<PathBuf>,
    /// `audit-log-maxsize/-maxbackup/-maxage`.
    pub limits: rotation::Limits,
}

/// Setting auditing up failed (the server does not start).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The policy file cannot be read.
    #[error("reading the audit policy file {path}: {source}")]
    ReadPolicy {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The policy file is not a valid `audit.k8s.io/v1 Policy`.
    #[error("loading the audit policy file {path}: {source}")]
    Policy {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: policy::PolicyError,
    },
    /// The log cannot be opened.
    #[error(transparent)]
    Open(#[from] log::OpenError),
}

/// Reads and validates the policy file at `path`.
pub fn load_policy(path: &std::path::Path) -> Result<Policy, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadPolicy {
        path: path.to_path_buf(),
        source,
    })?;
    Policy::parse(&text).map_err(|source| Error::Policy {
        path: path.to_path_buf(),
        source,
    })
}

/// The policy and where its events go.
#[derive(Debug)]
pub struct Auditor {
    /// Which requests are logged, at which level and stages.
    pub(crate) policy: Policy,
    backend: log::LogBackend,
}

impl Auditor {
    /// The auditor of `opts`; `None` when no events can be logged (no log path or no policy).
    pub(crate) fn load(opts: &Options) -> Result<Option<Auditor>, Error> {
        let Some(path) = &opts.log_path else {
            return Ok(None);
        };
        let backend = log::LogBackend::open(path, opts.limits)?;
        let Some(policy_file) = &opts.policy_file else {
            tracing::info!("no audit policy file: no audit events are logged");
            return Ok(None);
        };
        let policy = load_policy(policy_file)?;
        Ok(Some(Auditor { policy, backend }))
    }

    /// Writes `event` as one JSON line.
    pub(crate) fn emit(&self, event: &Event) {
        match serde_json::to_string(event) {
            Ok(line) => self.backend.write(line),
            Err(e) => tracing::warn!(error = %e, "encoding an audit event"),
        }
    }
}
