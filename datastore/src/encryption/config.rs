//! The encryption configuration file, `<data-dir>/server/cred/encryption-config.json`, in
//! kube-apiserver's `EncryptionConfiguration` (apiserver.config.k8s.io/v1) form: one entry for
//! `secrets` with an `aesgcm` provider (its keys, newest first) and `identity`.

use std::path::Path;

use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{json, Value};

use super::transformer::{Key, TransformError, Transformer};

/// The file's name under the cred dir.
pub const FILE: &str = "encryption-config.json";

/// What the file says.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// `(name, 32-byte secret)`, the write key first.
    pub keys: Vec<(String, Vec<u8>)>,
    /// `aesgcm` before `identity`: writes are encrypted.
    pub encrypt: bool,
}

impl std::fmt::Debug for Config {
    /// Names only: the secrets stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("keys", &self.key_names())
            .field("encrypt", &self.encrypt)
            .finish()
    }
}

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file (named) could not be read.
    #[error("reading {0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// The file (named) is invalid (why).
    #[error("{0}: {1}")]
    Invalid(String, String),
    /// A key is unusable.
    #[error(transparent)]
    Key(#[from] TransformError),
}

impl Config {
    /// A configuration with one fresh random key, encrypting.
    pub fn generate(name: &str) -> Config {
        Config {
            keys: vec![(name.to_string(), random_secret())],
            encrypt: true,
        }
    }

    /// The key names, the write key first.
    pub fn key_names(&self) -> Vec<&str> {
        self.keys.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The transformer this configuration describes.
    pub fn transformer(&self) -> Result<Transformer, TransformError> {
        let keys = self
            .keys
            .iter()
            .map(|(n, s)| Key::new(n, s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Transformer::new(keys, self.encrypt))
    }

    /// The file's JSON.
    pub fn to_json(&self) -> Value {
        let b64 = base64::engine::general_purpose::STANDARD;
        let keys: Vec<Value> = self
            .keys
            .iter()
            .map(|(n, s)| json!({"name": n, "secret": b64.encode(s)}))
            .collect();
        let aesgcm = json!({"aesgcm": {"keys": keys}});
        let identity = json!({"identity": {}});
        let providers = if self.encrypt {
            vec![aesgcm, identity]
        } else {
            vec![identity, aesgcm]
        };
        json!({
            "kind": "EncryptionConfiguration",
            "apiVersion": "apiserver.config.k8s.io/v1",
            "resources": [{"resources": ["secrets"], "providers": providers}],
        })
    }

    /// Parses the file's JSON (`what` names it in errors).
    pub fn from_json(what: &str, v: &Value) -> Result<Config, ConfigError> {
        let bad = |why: &str| ConfigError::Invalid(what.to_string(), why.to_string());
        let entry = v["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| {
                r["resources"]
                    .as_array()
                    .is_some_and(|rs| rs.iter().any(|x| x == "secrets"))
            })
            .ok_or_else(|| bad("no resources entry for secrets"))?;
        let providers = entry["providers"]
            .as_array()
            .ok_or_else(|| bad("no providers"))?;
        let mut keys = Vec::new();
        let mut encrypt = None;
        let b64 = base64::engine::general_purpose::STANDARD;
        for p in providers {
            if let Some(gcm) = p.get("aesgcm") {
                encrypt.get_or_insert(true);
                for k in gcm["keys"].as_array().into_iter().flatten() {
                    let name = k["name"]
                        .as_str()
                        .ok_or_else(|| bad("a key without a name"))?;
                    let secret = k["secret"]
                        .as_str()
                        .and_then(|s| b64.decode(s).ok())
                        .ok_or_else(|| bad(&format!("key {name:?}: secret is not base64")))?;
                    keys.push((name.to_string(), secret));
                }
            } else if p.get("identity").is_some() {
                encrypt.get_or_insert(false);
            } else {
                return Err(bad("only the aesgcm and identity providers are supported"));
            }
        }
        let config = Config {
            keys,
            encrypt: encrypt.unwrap_or(false),
        };
        config.transformer()?;
        Ok(config)
    }

    /// Reads `path`; `None` when it does not exist.
    pub fn load(path: &Path) -> Result<Option<Config>, ConfigError> {
        let shown = path.display().to_string();
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ConfigError::Io(shown, e)),
        };
        let v: Value = serde_json::from_slice(&text)
            .map_err(|e| ConfigError::Invalid(shown.clone(), e.to_string()))?;
        Config::from_json(&shown, &v).map(Some)
    }

    /// Writes `path` (mode 0600) through a temporary file, so a crash leaves the old or the
    /// new file.
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let shown = path.display().to_string();
        let io = |e| ConfigError::Io(shown.clone(), e);
        let tmp = path.with_extension("json.tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        let body = serde_json::to_vec_pretty(&self.to_json()).expect("JSON serializes");
        f.write_all(&body).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}

/// 32 random bytes.
pub fn random_secret() -> Vec<u8> {
    let mut s = vec![0u8; 32];
    SystemRandom::new()
        .fill(&mut s)
        .expect("the system's random source works");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_in_upstream_form() {
        let c = Config {
            keys: vec![("new".into(), vec![2; 32]), ("old".into(), vec![1; 32])],
            encrypt: true,
        };
        let v = c.to_json();
        assert_eq!(v["kind"], "EncryptionConfiguration");
        assert_eq!(v["resources"][0]["resources"], json!(["secrets"]));
        assert_eq!(
            v["resources"][0]["providers"][0]["aesgcm"]["keys"][0]["name"],
            "new"
        );
        assert_eq!(v["resources"][0]["providers"][1], json!({"identity": {}}));
        assert_eq!(Config::from_json("f", &v).unwrap(), c);
        let plain = Config {
            encrypt: false,
            ..c
        };
        assert_eq!(Config::from_json("f", &plain.to_json()).unwrap(), plain);
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let no_secrets = json!({"resources": [{"resources": ["configmaps"], "providers": []}]});
        assert!(Config::from_json("f", &no_secrets)
            .unwrap_err()
            .to_string()
            .contains("no resources entry for secrets"));
        let kms = json!({"resources": [{"resources": ["secrets"], "providers": [{"kms": {}}]}]});
        assert!(Config::from_json("f", &kms)
            .unwrap_err()
            .to_string()
            .contains("only the aesgcm and identity providers"));
        let short = json!({"resources": [{"resources": ["secrets"], "providers": [
            {"aesgcm": {"keys": [{"name": "k", "secret": "AAAA"}]}}]}]});
        assert!(matches!(
            Config::from_json("f", &short).unwrap_err(),
            ConfigError::Key(TransformError::KeyLength(_, 3))
        ));
    }

    #[test]
    fn save_then_load_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        assert!(Config::load(&path).unwrap().is_none());
        let c = Config::generate("k1");
        c.save(&path).unwrap();
        assert_eq!(Config::load(&path).unwrap(), Some(c));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
