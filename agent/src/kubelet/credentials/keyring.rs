//! Which credentials apply to an image, by upstream's rules (`credentialprovider/keyring.go`):
//! keys are `host[:port][/path]` (a scheme and a `/v1/` or `/v2/` prefix dropped), a key
//! matches an image whose repository has the same port, as many host labels each matching
//! the key's (glob: `*.example.com`), and a path starting with the key's; more specific keys
//! come first. Credentials for `index.docker.io` also serve Docker Hub images no key matched.

use std::collections::BTreeMap;

use super::Credential;

const DEFAULT_REGISTRY_KEY: &str = "index.docker.io";

/// Credentials by normalized key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    creds: BTreeMap<String, Vec<Credential>>,
}

/// A key as upstream's `BasicDockerKeyring.Add` stores it.
fn normalize_key(location: &str) -> String {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let (host, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let path = if path.starts_with("/v2/") || path.starts_with("/v1/") {
        &path[3..]
    } else {
        path
    };
    if path.is_empty() || path == "/" {
        host.to_string()
    } else {
        format!("{host}{path}")
    }
}

/// `(host labels, port, path)` of a schemeless URL.
fn split(url: &str) -> (Vec<&str>, &str, &str) {
    let (authority, path) = match url.find('/') {
        Some(i) => url.split_at(i),
        None => (url, ""),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (h.trim_start_matches('[').trim_end_matches(']'), p),
        _ => (authority, ""),
    };
    (host.split('.').collect(), port, path)
}

/// `filepath.Match` on one host label: `*` any run of characters, `?` one character.
pub(super) fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Whether credentials stored under `key` apply to `repository` (upstream's `URLsMatch`).
fn matches(key: &str, repository: &str) -> bool {
    let (key_host, key_port, key_path) = split(key);
    let (host, port, path) = split(repository);
    key_port == port
        && key_host.len() == host.len()
        && path.starts_with(key_path)
        && key_host.iter().zip(&host).all(|(k, h)| glob(k, h))
}

/// Whether `repository` is on Docker Hub by its name (no registry host in it).
fn is_default_registry(repository: &str) -> bool {
    match repository.split_once('/') {
        None => !repository.is_empty(),
        Some((first, _)) => {
            first == "docker.io" || first == "index.docker.io" || !first.contains(['.', ':'])
        }
    }
}

impl Keyring {
    /// Adds the credential of one Docker config key (`https://reg.example.com/v1/`,
    /// `reg.example.com:5000/team`, `*.example.com`).
    pub fn add(&mut self, location: &str, credential: Credential) {
        self.creds
            .entry(normalize_key(location))
            .or_default()
            .push(credential);
    }

    /// The credentials to try for `repository` (see [`repository`]), in order.
    pub fn lookup(&self, repository: &str) -> Vec<Credential> {
        let found: Vec<Credential> = self
            .creds
            .iter()
            .rev()
            .filter(|(key, _)| matches(key, repository))
            .flat_map(|(_, c)| c.iter().cloned())
            .collect();
        if !found.is_empty() {
            return found;
        }
        if is_default_registry(repository) {
            if let Some(c) = self.creds.get(DEFAULT_REGISTRY_KEY) {
                return c.clone();
            }
        }
        Vec::new()
    }
}

/// The repository an image reference names, fully qualified as the kubelet looks credentials
/// up (`busybox:1.35` → `docker.io/library/busybox`, `reg:5000/team/app@sha256:…` →
/// `reg:5000/team/app`).
pub fn repository(image: &str) -> String {
    let name = image.split_once('@').map_or(image, |(n, _)| n);
    let (domain, rest) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first != first.to_lowercase() =>
        {
            (first, rest)
        }
        _ => ("docker.io", name),
    };
    let rest = match rest.rsplit_once('/') {
        Some((dir, last)) => format!("{dir}/{}", last.split(':').next().unwrap_or(last)),
        None => rest.split(':').next().unwrap_or(rest).to_string(),
    };
    let domain = if domain == "index.docker.io" {
        "docker.io"
    } else {
        domain
    };
    if domain == "docker.io" && !rest.contains('/') {
        format!("docker.io/library/{rest}")
    } else {
        format!("{domain}/{rest}")
    }
}
