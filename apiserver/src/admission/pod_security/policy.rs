//! A namespace's Pod Security policy, read from its `pod-security.kubernetes.io/*` labels
//! (pod-security-admission's `api.PolicyToEvaluate`).
//!
//! # Guarantees
//! - Unset labels keep the default (`privileged:latest` for every mode, k3s's default).
//! - A bad enforce level or version is an error (and the namespace write is rejected); a bad
//!   audit or warn level fails open to `privileged`.
//! - Without its own `warn` label, warn is raised to the enforce level (and version) when
//!   enforce is stricter, so what is enforced is also warned about on workload resources.

use std::collections::BTreeMap;
use std::fmt;

use k3rs_apimachinery::status::Cause;

pub const ENFORCE_LEVEL: &str = "pod-security.kubernetes.io/enforce";
pub const ENFORCE_VERSION: &str = "pod-security.kubernetes.io/enforce-version";
pub const AUDIT_LEVEL: &str = "pod-security.kubernetes.io/audit";
pub const AUDIT_VERSION: &str = "pod-security.kubernetes.io/audit-version";
pub const WARN_LEVEL: &str = "pod-security.kubernetes.io/warn";
pub const WARN_VERSION: &str = "pod-security.kubernetes.io/warn-version";

/// The newest policy version this server knows: `latest` and anything newer evaluate as
/// this one (the server's Kubernetes minor version).
pub const LATEST_MINOR: u32 = 33;

/// A Pod Security Standards level, least to most restrictive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }
}

/// A policy version: `latest` or `v1.<minor>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Latest,
    Minor(u32),
}

impl Version {
    /// The minor version whose checks apply (`latest` and future versions: [`LATEST_MINOR`]).
    pub fn effective_minor(self) -> u32 {
        match self {
            Version::Latest => LATEST_MINOR,
            Version::Minor(m) => m.min(LATEST_MINOR),
        }
    }

    pub fn parse(s: &str) -> Option<Version> {
        if s == "latest" {
            return Some(Version::Latest);
        }
        let digits = s.strip_prefix("v1.")?;
        let well_formed = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !well_formed {
            return None;
        }
        digits.parse().ok().map(Version::Minor)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::Minor(m) => write!(f, "v1.{m}"),
        }
    }
}

/// A level at a version, printed `restricted:latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

impl LevelVersion {
    pub const PRIVILEGED: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };
}

/// The three modes' levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            enforce: LevelVersion::PRIVILEGED,
            audit: LevelVersion::PRIVILEGED,
            warn: LevelVersion::PRIVILEGED,
        }
    }
}

impl Policy {
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }
}

const LEVEL_ERROR: &str = "must be one of privileged, baseline, restricted";
const VERSION_ERROR: &str = "must be \"latest\" or \"v1.x\"";

/// The policy of a namespace with `labels` (modes it does not label keep `defaults`, the
/// admission configuration's), and the errors of malformed labels (as
/// `metadata.labels[<key>]` causes, in label order: enforce, audit, warn).
pub fn policy_to_evaluate(
    labels: &BTreeMap<String, String>,
    defaults: &Policy,
) -> (Policy, Vec<Cause>) {
    let mut p = *defaults;
    let mut errs = Vec::new();
    let mut bad = |key: &str, value: &str, why: &str| {
        errs.push(Cause::invalid(
            format!("metadata.labels[{key}]"),
            value,
            why,
        ))
    };
    let mut has_enforce_level = false;
    if let Some(v) = labels.get(ENFORCE_LEVEL) {
        match Level::parse(v) {
            Some(l) => {
                p.enforce.level = l;
                has_enforce_level = true;
            }
            None => {
                p.enforce.level = Level::Restricted;
                bad(ENFORCE_LEVEL, v, LEVEL_ERROR);
            }
        }
    }
    if let Some(v) = labels.get(ENFORCE_VERSION) {
        p.enforce.version = Version::parse(v).unwrap_or_else(|| {
            bad(ENFORCE_VERSION, v, VERSION_ERROR);
            Version::Latest
        });
    }
    if let Some(v) = labels.get(AUDIT_LEVEL) {
        p.audit.level = Level::parse(v).unwrap_or_else(|| {
            bad(AUDIT_LEVEL, v, LEVEL_ERROR);
            Level::Privileged
        });
    }
    if let Some(v) = labels.get(AUDIT_VERSION) {
        p.audit.version = Version::parse(v).unwrap_or_else(|| {
            bad(AUDIT_VERSION, v, VERSION_ERROR);
            Version::Latest
        });
    }
    let has_warn_level = labels.contains_key(WARN_LEVEL);
    if let Some(v) = labels.get(WARN_LEVEL) {
        p.warn.level = Level::parse(v).unwrap_or_else(|| {
            bad(WARN_LEVEL, v, LEVEL_ERROR);
            Level::Privileged
        });
    }
    let has_warn_version = labels.contains_key(WARN_VERSION);
    if let Some(v) = labels.get(WARN_VERSION) {
        p.warn.version = Version::parse(v).unwrap_or_else(|| {
            bad(WARN_VERSION, v, VERSION_ERROR);
            Version::Latest
        });
    }
    if !has_warn_level && has_enforce_level && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if !has_warn_version {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errs)
}

/// The labels of a namespace object.
pub fn labels_of(ns: &serde_json::Value) -> BTreeMap<String, String> {
    ns["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn eval(l: &BTreeMap<String, String>) -> (Policy, Vec<Cause>) {
        policy_to_evaluate(l, &Policy::default())
    }

    fn lv(level: Level, version: Version) -> LevelVersion {
        LevelVersion { level, version }
    }

    #[test]
    fn no_labels_is_privileged_everywhere() {
        let (p, errs) = eval(&labels(&[]));
        assert_eq!(p, Policy::default());
        assert!(p.fully_privileged());
        assert!(errs.is_empty());
    }

    #[test]
    fn enforce_raises_warn_with_its_version() {
        let (p, errs) = eval(&labels(&[
            (ENFORCE_LEVEL, "baseline"),
            (ENFORCE_VERSION, "v1.25"),
        ]));
        assert!(errs.is_empty());
        assert_eq!(p.enforce, lv(Level::Baseline, Version::Minor(25)));
        assert_eq!(p.warn, lv(Level::Baseline, Version::Minor(25)));
        assert_eq!(p.audit, LevelVersion::PRIVILEGED);
    }

    #[test]
    fn explicit_warn_is_kept() {
        let (p, _) = eval(&labels(&[
            (ENFORCE_LEVEL, "restricted"),
            (WARN_LEVEL, "privileged"),
        ]));
        assert_eq!(p.warn, LevelVersion::PRIVILEGED);
        let (p, _) = eval(&labels(&[
            (ENFORCE_LEVEL, "restricted"),
            (ENFORCE_VERSION, "v1.20"),
            (WARN_VERSION, "v1.30"),
        ]));
        assert_eq!(p.warn, lv(Level::Restricted, Version::Minor(30)));
    }

    #[test]
    fn labels_override_the_configured_defaults_per_mode() {
        let defaults = Policy {
            enforce: lv(Level::Baseline, Version::Latest),
            audit: lv(Level::Restricted, Version::Minor(30)),
            warn: lv(Level::Restricted, Version::Latest),
        };
        let (p, errs) = policy_to_evaluate(&labels(&[]), &defaults);
        assert_eq!((p, errs.len()), (defaults, 0));
        let (p, _) = policy_to_evaluate(&labels(&[(ENFORCE_LEVEL, "privileged")]), &defaults);
        assert_eq!(p.enforce, LevelVersion::PRIVILEGED);
        assert_eq!(p.audit, defaults.audit);
        assert_eq!(p.warn, defaults.warn, "a laxer enforce does not lower warn");
        let (p, _) = policy_to_evaluate(&labels(&[(AUDIT_LEVEL, "bogus")]), &defaults);
        assert_eq!(
            p.audit,
            lv(Level::Privileged, Version::Minor(30)),
            "a bad level fails open"
        );
    }

    #[test]
    fn bad_labels() {
        let (p, errs) = eval(&labels(&[
            (ENFORCE_LEVEL, "strict"),
            (ENFORCE_VERSION, "1.25"),
            (AUDIT_LEVEL, "x"),
            (WARN_VERSION, "v1.05"),
        ]));
        // A bad enforce level fails closed; bad audit/warn levels fail open.
        assert_eq!(p.enforce, lv(Level::Restricted, Version::Latest));
        assert_eq!(p.audit, LevelVersion::PRIVILEGED);
        let msgs: Vec<String> = errs
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            msgs,
            vec![
                "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: \"1.25\": must be \"latest\" or \"v1.x\"",
                "metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: \"x\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: \"v1.05\": must be \"latest\" or \"v1.x\"",
            ]
        );
    }

    #[test]
    fn versions() {
        assert_eq!(Version::parse("v1.0"), Some(Version::Minor(0)));
        assert_eq!(Version::parse("v1.33"), Some(Version::Minor(33)));
        assert_eq!(Version::parse("v2.1"), None);
        assert_eq!(Version::parse("v1."), None);
        assert_eq!(Version::Latest.effective_minor(), LATEST_MINOR);
        assert_eq!(Version::Minor(99).effective_minor(), LATEST_MINOR);
        assert_eq!(Version::Minor(22).effective_minor(), 22);
        assert_eq!(
            lv(Level::Restricted, Version::Latest).to_string(),
            "restricted:latest"
        );
        assert_eq!(
            lv(Level::Baseline, Version::Minor(24)).to_string(),
            "baseline:v1.24"
        );
    }

    #[test]
    fn latest_is_the_served_version() {
        assert_eq!(LATEST_MINOR.to_string(), crate::version::KUBE_MINOR);
    }
}
