//! The agent's API client: from a kubeconfig file, or from a server URL and a bearer token.

use std::path::Path;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig cannot be read or parsed.
    #[error("reading kubeconfig {path}")]
    ReadKubeconfig {
        /// The file.
        path: String,
        /// What is wrong with it.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig's current context does not make a client configuration.
    #[error("using kubeconfig {path}")]
    UseKubeconfig {
        /// The file.
        path: String,
        /// What is wrong with it.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The server URL does not parse.
    #[error("invalid server URL {url}")]
    ServerUrl {
        /// The URL given.
        url: String,
        /// Why it does not parse.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// The client could not be built (TLS configuration).
    #[error("building the API client")]
    Build(#[source] kube::Error),
}

/// A client with the current context of the kubeconfig at `path`.
pub async fn from_kubeconfig(path: &Path, server: Option<&str>) -> Result<kube::Client, Error> {
    let shown = path.display().to_string();
    let kubeconfig =
        kube::config::Kubeconfig::read_from(path).map_err(|source| Error::ReadKubeconfig {
            path: shown.clone(),
            source,
        })?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|source| Error::UseKubeconfig {
            path: shown,
            source,
        })?;
    if let Some(url) = server {
        config.cluster_url = parse_url(url)?;
    }
    kube::Client::try_from(config).map_err(Error::Build)
}

/// A client for `server` that authenticates with the bearer `token`, trusting the CA bundle
/// `ca_pem` (or the system roots when `None`).
pub fn from_token(
    server: &str,
    token: &str,
    ca_pem: Option<Vec<u8>>,
) -> Result<kube::Client, Error> {
    let mut config = kube::Config::new(parse_url(server)?);
    config.auth_info.token = Some(token.to_string().into());
    if let Some(pem) = ca_pem {
        config.root_cert = Some(pem_certificates(&pem));
    }
    kube::Client::try_from(config).map_err(Error::Build)
}

fn parse_url(url: &str) -> Result<http::Uri, Error> {
    url.parse().map_err(|source| Error::ServerUrl {
        url: url.to_string(),
        source,
    })
}

/// The DER bodies of the `CERTIFICATE` blocks of a PEM bundle.
fn pem_certificates(pem: &[u8]) -> Vec<Vec<u8>> {
    use base64::Engine;
    let text = String::from_utf8_lossy(pem);
    let mut out = Vec::new();
    let mut body: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            body = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            if let Some(b) = body.take() {
                if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(b) {
                    out.push(der);
                }
            }
        } else if let Some(b) = body.as_mut() {
            b.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_bundles_give_their_certificates_in_order() {
        let pem = "-----BEGIN CERTIFICATE-----\nAAEC\nAw==\n-----END CERTIFICATE-----\n\
                   junk\n-----BEGIN CERTIFICATE-----\nBAU=\n-----END CERTIFICATE-----\n";
        assert_eq!(
            pem_certificates(pem.as_bytes()),
            vec![vec![0, 1, 2, 3], vec![4, 5]]
        );
    }
}
