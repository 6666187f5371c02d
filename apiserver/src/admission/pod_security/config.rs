//! PodSecurity's configuration (`pod-security.admission.config.k8s.io/v1`
//! `PodSecurityConfiguration`), read from kube-apiserver's `--admission-control-config-file`
//! (an `apiserver.config.k8s.io` `AdmissionConfiguration` whose `PodSecurity` plugin entry
//! carries it inline under `configuration` or in the file `path` names) — k3s's
//! `--pod-security-admission-config-file`.
//!
//! # Guarantees
//! - [`Config::default`] is upstream's: every mode `privileged:latest`, no exemptions.
//! - A file that does not parse, names an unknown version or kind, or holds a bad level,
//!   version, or exemption is refused with a message naming the field (the server does not
//!   start), as kube-apiserver refuses it.
//! - Other plugins' entries are ignored (their plugins have no configuration here).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::policy::{Level, LevelVersion, Policy, Version};

/// Cluster-wide defaults (used for modes a namespace does not label) and exemptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    pub defaults: Policy,
    pub exemptions: Exemptions,
}

/// Requests PodSecurity does not evaluate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exemptions {
    /// Authenticated (or impersonated) user names.
    pub usernames: Vec<String>,
    /// Pods whose `runtimeClassName` is one of these.
    pub runtime_classes: Vec<String>,
    pub namespaces: Vec<String>,
}

impl Exemptions {
    pub fn namespace(&self, ns: &str) -> bool {
        !ns.is_empty() && self.namespaces.iter().any(|n| n == ns)
    }

    pub fn user(&self, name: &str) -> bool {
        !name.is_empty() && self.usernames.iter().any(|n| n == name)
    }

    pub fn runtime_class(&self, class: Option<&str>) -> bool {
        class.is_some_and(|c| !c.is_empty() && self.runtime_classes.iter().any(|r| r == c))
    }
}

/// Why the admission configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    Invalid {
        path: PathBuf,
        #[source]
        reason: Invalid,
    },
}

/// What is wrong with a configuration document.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    /// Not YAML or JSON.
    #[error("{0}")]
    Syntax(#[source] serde_norway::Error),
    /// Not of the `AdmissionConfiguration` shape.
    #[error("not an AdmissionConfiguration: {0}")]
    AdmissionShape(#[source] serde_norway::Error),
    /// An `AdmissionConfiguration` of an unknown version.
    #[error("unknown apiVersion {0:?} (want apiserver.config.k8s.io/v1)")]
    AdmissionVersion(String),
    /// Another kind where an `AdmissionConfiguration` belongs.
    #[error("unknown kind {0:?} (want AdmissionConfiguration)")]
    AdmissionKind(String),
    /// Not of the `PodSecurityConfiguration` shape.
    #[error("not a PodSecurityConfiguration: {0}")]
    Shape(#[source] serde_json::Error),
    /// A `PodSecurityConfiguration` of an unknown version.
    #[error("unknown apiVersion {0:?} (want pod-security.admission.config.k8s.io/v1)")]
    Version(String),
    /// Another kind where a `PodSecurityConfiguration` belongs.
    #[error("unknown kind {0:?} (want PodSecurityConfiguration)")]
    Kind(String),
    /// A field fails validation (upstream's field error text).
    #[error("{0}")]
    Field(String),
}

const ADMISSION_VERSIONS: &[&str] = &[
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1alpha1",
    "apiserver.k8s.io/v1alpha1",
];
const POD_SECURITY_VERSIONS: &[&str] = &[
    "pod-security.admission.config.k8s.io/v1",
    "pod-security.admission.config.k8s.io/v1beta1",
    "pod-security.admission.config.k8s.io/v1alpha1",
];

#[derive(Deserialize)]
struct AdmissionConfiguration {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    plugins: Vec<PluginEntry>,
}

#[derive(Deserialize)]
struct PluginEntry {
    name: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    configuration: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default)]
    exemptions: RawExemptions,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    enforce: Option<String>,
    #[serde(rename = "enforce-version")]
    enforce_version: Option<String>,
    audit: Option<String>,
    #[serde(rename = "audit-version")]
    audit_version: Option<String>,
    warn: Option<String>,
    #[serde(rename = "warn-version")]
    warn_version: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawExemptions {
    #[serde(default)]
    usernames: Vec<String>,
    #[serde(default, rename = "runtimeClasses")]
    runtime_classes: Vec<String>,
    #[serde(default)]
    namespaces: Vec<String>,
}

/// Reads the admission configuration file at `path`: PodSecurity's configuration, or the
/// default one when the file has no `PodSecurity` entry.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let invalid = |reason: Invalid| ConfigError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    let base = path.parent().unwrap_or(Path::new("."));
    match plugin_configuration(&text, "PodSecurity").map_err(invalid)? {
        None => Ok(Config::default()),
        Some(Source::Inline(v)) => from_value(v).map_err(invalid),
        Some(Source::File(p)) => {
            let p = base.join(p);
            let text = std::fs::read_to_string(&p).map_err(|e| ConfigError::Read {
                path: p.clone(),
                reason: e.to_string(),
            })?;
            parse(&text).map_err(|reason| ConfigError::Invalid { path: p, reason })
        }
    }
}

/// Where a plugin's configuration is.
#[derive(Debug, PartialEq)]
enum Source {
    Inline(Value),
    File(String),
}

/// The configuration of plugin `name` in an `AdmissionConfiguration` document.
fn plugin_configuration(text: &str, name: &str) -> Result<Option<Source>, Invalid> {
    let doc: AdmissionConfiguration =
        serde_norway::from_str(text).map_err(Invalid::AdmissionShape)?;
    if !ADMISSION_VERSIONS.contains(&doc.api_version.as_str()) {
        return Err(Invalid::AdmissionVersion(doc.api_version));
    }
    if doc.kind != "AdmissionConfiguration" {
        return Err(Invalid::AdmissionKind(doc.kind));
    }
    let Some(entry) = doc.plugins.into_iter().find(|p| p.name == name) else {
        return Ok(None);
    };
    match (entry.configuration, entry.path) {
        (Some(v), _) => Ok(Some(Source::Inline(v))),
        (None, Some(p)) if !p.is_empty() => Ok(Some(Source::File(p))),
        _ => Ok(None),
    }
}

/// A `PodSecurityConfiguration` document (YAML or JSON).
pub fn parse(text: &str) -> Result<Config, Invalid> {
    let v: Value = serde_norway::from_str(text).map_err(Invalid::Syntax)?;
    from_value(v)
}

fn from_value(v: Value) -> Result<Config, Invalid> {
    let raw: RawConfig = serde_json::from_value(v).map_err(Invalid::Shape)?;
    if !POD_SECURITY_VERSIONS.contains(&raw.api_version.as_str()) {
        return Err(Invalid::Version(raw.api_version));
    }
    if raw.kind != "PodSecurityConfiguration" {
        return Err(Invalid::Kind(raw.kind));
    }
    let d = &raw.defaults;
    let defaults = Policy {
        enforce: level_version("enforce", &d.enforce, &d.enforce_version)?,
        audit: level_version("audit", &d.audit, &d.audit_version)?,
        warn: level_version("warn", &d.warn, &d.warn_version)?,
    };
    let e = raw.exemptions;
    check_list("exemptions.usernames", &e.usernames, |_| None)?;
    check_list("exemptions.namespaces", &e.namespaces, dns_label_error)?;
    check_list("exemptions.runtimeClasses", &e.runtime_classes, |s| {
        dns_subdomain_error(s)
    })?;
    Ok(Config {
        defaults,
        exemptions: Exemptions {
            usernames: e.usernames,
            runtime_classes: e.runtime_classes,
            namespaces: e.namespaces,
        },
    })
}

fn level_version(
    mode: &str,
    level: &Option<String>,
    version: &Option<String>,
) -> Result<LevelVersion, Invalid> {
    let level = match level.as_deref() {
        None | Some("") => Level::Privileged,
        Some(l) => Level::parse(l).ok_or_else(|| {
            Invalid::Field(format!(
                "defaults.{mode}: Invalid value: {l:?}: must be one of privileged, baseline, restricted"
            ))
        })?,
    };
    let version = match version.as_deref() {
        None | Some("") => Version::Latest,
        Some(v) => Version::parse(v).ok_or_else(|| {
            Invalid::Field(format!(
                "defaults.{mode}-version: Invalid value: {v:?}: must be \"latest\" or \"v1.x\""
            ))
        })?,
    };
    Ok(LevelVersion { level, version })
}

/// Each entry non-empty, valid by `check`, and not repeated.
fn check_list(
    field: &str,
    items: &[String],
    check: impl Fn(&str) -> Option<String>,
) -> Result<(), Invalid> {
    for (i, s) in items.iter().enumerate() {
        if s.is_empty() {
            return Err(Invalid::Field(format!(
                "{field}[{i}]: Invalid value: \"\": must not be empty"
            )));
        }
        if let Some(why) = check(s) {
            return Err(Invalid::Field(format!(
                "{field}[{i}]: Invalid value: {s:?}: {why}"
            )));
        }
        if items[..i].contains(s) {
            return Err(Invalid::Field(format!(
                "{field}[{i}]: Duplicate value: {s:?}"
            )));
        }
    }
    Ok(())
}

fn dns_label_error(s: &str) -> Option<String> {
    let ok = s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    (!ok).then(|| "must be a valid DNS label (lower-case alphanumerics and '-')".to_string())
}

fn dns_subdomain_error(s: &str) -> Option<String> {
    let ok = s.len() <= 253
        && s.split('.')
            .all(|l| dns_label_error(l).is_none() && !l.is_empty());
    (!ok).then(|| "must be a valid DNS subdomain".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: EventRateLimit
  path: /nonexistent/ignored.yaml
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
      enforce-version: v1.29
      warn: restricted
    exemptions:
      usernames: [ci-bot]
      runtimeClasses: [kata]
      namespaces: [kube-system, legacy]
"#;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn inline_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let c = load(&write(dir.path(), "admission.yaml", FULL)).unwrap();
        assert_eq!(c.defaults.enforce.to_string(), "baseline:v1.29");
        assert_eq!(c.defaults.audit.to_string(), "privileged:latest");
        assert_eq!(c.defaults.warn.to_string(), "restricted:latest");
        assert_eq!(c.exemptions.usernames, ["ci-bot"]);
        assert!(c.exemptions.namespace("legacy"));
        assert!(!c.exemptions.namespace("default"));
        assert!(!c.exemptions.namespace(""));
        assert!(c.exemptions.user("ci-bot"));
        assert!(!c.exemptions.user(""));
        assert!(c.exemptions.runtime_class(Some("kata")));
        assert!(!c.exemptions.runtime_class(Some("runc")));
        assert!(!c.exemptions.runtime_class(None));
    }

    #[test]
    fn configuration_in_a_file_relative_to_the_admission_file() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "psa.yaml",
            "apiVersion: pod-security.admission.config.k8s.io/v1beta1\nkind: PodSecurityConfiguration\ndefaults: {enforce: restricted}\n",
        );
        let admission = write(
            dir.path(),
            "admission.yaml",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: psa.yaml\n",
        );
        let c = load(&admission).unwrap();
        assert_eq!(c.defaults.enforce.to_string(), "restricted:latest");
        assert_eq!(c.exemptions, Exemptions::default());
    }

    #[test]
    fn no_pod_security_entry_is_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a.yaml",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins: []\n",
        );
        assert_eq!(load(&p).unwrap(), Config::default());
    }

    #[test]
    fn bad_files_are_refused_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let wrap = |body: &str| {
            format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n{body}"
            )
        };
        for (body, want) in [
            (
                "    defaults: {enforce: strict}\n",
                "defaults.enforce: Invalid value: \"strict\"",
            ),
            (
                "    defaults: {warn-version: \"1.29\"}\n",
                "defaults.warn-version: Invalid value: \"1.29\"",
            ),
            (
                "    exemptions: {namespaces: [Bad_Name]}\n",
                "exemptions.namespaces[0]: Invalid value: \"Bad_Name\"",
            ),
            (
                "    exemptions: {usernames: [a, a]}\n",
                "exemptions.usernames[1]: Duplicate value: \"a\"",
            ),
            (
                "    exemptions: {usernames: [\"\"]}\n",
                "exemptions.usernames[0]: Invalid value: \"\"",
            ),
            (
                "    defaults: {enforce: baseline, extra: 1}\n",
                "unknown field `extra`",
            ),
        ] {
            let p = write(dir.path(), "bad.yaml", &wrap(body));
            let e = load(&p).unwrap_err().to_string();
            assert!(e.contains(want), "{body}: {e}");
        }
        let p = write(dir.path(), "kind.yaml", "apiVersion: v1\nkind: ConfigMap\n");
        assert!(load(&p)
            .unwrap_err()
            .to_string()
            .contains("unknown apiVersion"));
        let e = load(&dir.path().join("missing.yaml")).unwrap_err();
        assert!(matches!(e, ConfigError::Read { .. }), "{e}");
        let p = write(
            dir.path(),
            "path.yaml",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: nope.yaml\n",
        );
        assert!(load(&p).unwrap_err().to_string().contains("nope.yaml"));
    }
}
