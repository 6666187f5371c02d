//! Cluster PKI: the CAs, the etcd serving/peer/client certificates, the service-account
//! signing key and the server token, kept
//! under `<data-dir>/server/tls/` and `<data-dir>/server/token` (the k3s layout).
//!
//! # Guarantees
//! - Created on first start, reused as they are on every later start (never regenerated).
//! - Private keys and the token are mode 0600 from the moment they exist (temp file + rename).
//! - CAs are valid for 10 years, leaves for 1 year. Keys are ECDSA P-256.
//!
//! # Errors
//! A certificate without its key (or the reverse) is an error, not a reason to regenerate:
//! replacing a CA would lock every existing client out.

pub mod ca;
pub mod check;
pub mod files;
mod renew;
pub mod rotate;
pub mod service_key;
pub mod token;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

pub use ca::{Usage, CA_YEARS, LEAF_YEARS};
pub use token::Token;

use ca::{ensure_leaf, load_or_create_ca, LeafSpec};

/// Failures while creating or loading the PKI.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("i/o on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// rcgen could not make a key or certificate (`what` names it).
    #[error("generating {what}: {source}")]
    Generate {
        /// What was being made.
        what: String,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// A key or certificate on disk does not parse.
    #[error("loading {path}: {source}")]
    Load {
        /// The file.
        path: PathBuf,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// A certificate without its key, or the reverse.
    #[error("{present} exists but {missing} does not; restore it or remove both")]
    Incomplete {
        /// The file that exists.
        present: PathBuf,
        /// Its missing partner.
        missing: PathBuf,
    },
}

/// What the generated certificates must cover.
#[derive(Debug, Clone, Default)]
pub struct PkiOptions {
    /// This machine's hostname, added to the serving certificates' SANs.
    pub hostname: String,
    /// Extra IPs for the etcd serving and peer certificates (e.g. the etcd listen address).
    pub etcd_ips: Vec<IpAddr>,
    /// Extra DNS names for the API server's serving certificate (`--tls-san` names, the
    /// `kubernetes.default.svc…` names).
    pub apiserver_dns_names: Vec<String>,
    /// Extra IPs for the API server's serving certificate (node IPs, the first service IP,
    /// `--tls-san` addresses).
    pub apiserver_ips: Vec<IpAddr>,
}

/// The common name of the aggregation layer's front-proxy client certificate (k3s's), the
/// API server's default `--requestheader-allowed-names`.
pub const AUTH_PROXY_NAME: &str = "system:auth-proxy";

/// A client certificate's spec: `common_name`, in `organization` (a group) if any.
fn client_leaf(common_name: &str, organization: Option<&str>) -> LeafSpec {
    LeafSpec {
        common_name: common_name.to_string(),
        organization: organization.map(str::to_string),
        dns_names: Vec::new(),
        ips: Vec::new(),
        usage: Usage::Client,
    }
}

/// The cluster PKI on disk, after [`Pki::ensure`].
#[derive(Debug, Clone)]
pub struct Pki {
    tls_dir: PathBuf,
    /// The server token (`K10<ca hash>::server:<secret>`), also in `<server dir>/token`.
    pub server_token: Token,
}

impl Pki {
    /// Creates whatever is missing under `server_dir` (`<data-dir>/server`) and loads the rest.
    pub fn ensure(server_dir: &Path, opts: &PkiOptions) -> Result<Pki, Error> {
        let tls = server_dir.join("tls");
        let etcd = tls.join("etcd");
        files::create_dir(&etcd)?;

        let server_ca = load_or_create_ca(&tls, "server-ca", "k3rs-server-ca")?;
        let client_ca = load_or_create_ca(&tls, "client-ca", "k3rs-client-ca")?;
        let request_header_ca =
            load_or_create_ca(&tls, "request-header-ca", "k3rs-request-header-ca")?;
        let etcd_server_ca = load_or_create_ca(&etcd, "server-ca", "etcd-server-ca")?;
        let etcd_peer_ca = load_or_create_ca(&etcd, "peer-ca", "etcd-peer-ca")?;

        let mut dns_names = vec!["localhost".to_string()];
        if !opts.hostname.is_empty() {
            dns_names.push(opts.hostname.clone());
        }
        let mut ips = vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ];
        ips.extend(
            opts.etcd_ips
                .iter()
                .copied()
                .filter(|ip| !ip.is_unspecified()),
        );
        let serving = |common_name: &str| LeafSpec {
            common_name: common_name.to_string(),
            organization: Some("etcd".to_string()),
            dns_names: dns_names.clone(),
            ips: ips.clone(),
            usage: Usage::ServerAndClient,
        };
        ensure_leaf(
            &etcd,
            "server-client",
            &serving("etcd-server"),
            &etcd_server_ca,
        )?;
        ensure_leaf(
            &etcd,
            "peer-server-client",
            &serving("etcd-peer"),
            &etcd_peer_ca,
        )?;
        let client = client_leaf("etcd-client", Some("etcd"));
        ensure_leaf(&etcd, "client", &client, &etcd_server_ca)?;

        let mut api_dns = dns_names.clone();
        api_dns.extend(opts.apiserver_dns_names.iter().cloned());
        let mut api_ips = ips.clone();
        api_ips.extend(opts.apiserver_ips.iter().copied());
        let api_serving = LeafSpec {
            common_name: "kube-apiserver".to_string(),
            organization: None,
            dns_names: api_dns,
            ips: api_ips,
            usage: Usage::Server,
        };
        ensure_leaf(&tls, "serving-kube-apiserver", &api_serving, &server_ca)?;
        let admin = client_leaf("system:admin", Some("system:masters"));
        ensure_leaf(&tls, "client-admin", &admin, &client_ca)?;
        // What the API server presents to kubelets (k3s's client-kube-apiserver).
        let apiserver_client = client_leaf("system:apiserver", Some("system:masters"));
        ensure_leaf(&tls, "client-kube-apiserver", &apiserver_client, &client_ca)?;
        // What the aggregation layer presents to extension API servers (k3s's
        // client-auth-proxy): they trust the request-header CA for the X-Remote-* headers.
        let auth_proxy = client_leaf(AUTH_PROXY_NAME, None);
        ensure_leaf(&tls, "client-auth-proxy", &auth_proxy, &request_header_ca)?;

        service_key::ensure(&tls)?;
        let server_token =
            token::ensure_server_token(&server_dir.join("token"), server_ca.cert_pem.as_bytes())?;
        Ok(Pki {
            tls_dir: tls,
            server_token,
        })
    }

    /// `<data-dir>/server/tls`.
    pub fn tls_dir(&self) -> &Path {
        &self.tls_dir
    }

    /// The CA that signs the etcd serving and client certificates (trust root for both sides).
    pub fn etcd_server_ca_cert(&self) -> PathBuf {
        self.tls_dir.join("etcd/server-ca.crt")
    }

    /// The etcd API's serving certificate and key.
    pub fn etcd_serving_cert(&self) -> (PathBuf, PathBuf) {
        (
            self.tls_dir.join("etcd/server-client.crt"),
            self.tls_dir.join("etcd/server-client.key"),
        )
    }

    /// The CA that signs the API server's serving certificate (served at `/cacerts`).
    pub fn server_ca_cert(&self) -> PathBuf {
        self.tls_dir.join("server-ca.crt")
    }

    /// The CA that signs client certificates the API server accepts.
    pub fn client_ca_cert(&self) -> PathBuf {
        self.tls_dir.join("client-ca.crt")
    }

    /// The API server's serving certificate and key.
    pub fn apiserver_serving_cert(&self) -> (PathBuf, PathBuf) {
        (
            self.tls_dir.join("serving-kube-apiserver.crt"),
            self.tls_dir.join("serving-kube-apiserver.key"),
        )
    }

    /// The service-account signing key (PKCS#8 PEM, shared by the cluster's servers).
    pub fn service_account_key(&self) -> PathBuf {
        self.tls_dir.join(service_key::FILE)
    }

    /// The admin client certificate (CN=system:admin, O=system:masters) and key.
    pub fn admin_client_cert(&self) -> (PathBuf, PathBuf) {
        (
            self.tls_dir.join("client-admin.crt"),
            self.tls_dir.join("client-admin.key"),
        )
    }

    /// The API server's client certificate towards kubelets (CN=system:apiserver,
    /// O=system:masters) and key.
    pub fn kubelet_client_cert(&self) -> (PathBuf, PathBuf) {
        (
            self.tls_dir.join("client-kube-apiserver.crt"),
            self.tls_dir.join("client-kube-apiserver.key"),
        )
    }

    /// The request-header CA: the API server believes `X-Remote-*` headers from clients it
    /// signed (`--requestheader-client-ca-file`'s default), extension API servers trust it
    /// to authenticate the aggregation layer.
    pub fn request_header_ca_cert(&self) -> PathBuf {
        self.tls_dir.join("request-header-ca.crt")
    }

    /// The aggregation layer's front-proxy client certificate (CN=[`AUTH_PROXY_NAME`], from
    /// the request-header CA) and key.
    pub fn auth_proxy_client_cert(&self) -> (PathBuf, PathBuf) {
        (
            self.tls_dir.join("client-auth-proxy.crt"),
            self.tls_dir.join("client-auth-proxy.key"),
        )
    }

    /// The client certificate and key for etcdctl and other local etcd clients.
    pub fn etcd_client_cert(&self) -> (PathBuf, PathBuf) {
        (
            self.tls_dir.join("etcd/client.crt"),
            self.tls_dir.join("etcd/client.key"),
        )
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod serving_tests;
