//! TLS for the HTTPS listener: the certificate is chosen per handshake by SNI from the current
//! routing table ([`SniResolver`]), else the self-signed default certificate
//! ([`default_certificate`]); ALPN offers `h2` and `http/1.1`; no client certificates.

use std::sync::Arc;

use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

use super::table::Table;

/// Why the HTTPS listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The default certificate could not be made.
    #[error("generating the default certificate")]
    Generate(#[source] rcgen::Error),
    /// The default certificate was refused by rustls.
    #[error("loading the default certificate")]
    Load(#[source] rustls::Error),
    /// The server configuration could not be built.
    #[error("tls configuration")]
    Config(#[source] k3rs_apimachinery::tls::TlsError),
}

/// The common name of the default certificate (what a client sees when no Ingress's TLS
/// Secret covers the name it asked for).
pub const DEFAULT_CN: &str = "K3RS INGRESS DEFAULT CERT";

/// A fresh self-signed certificate for [`DEFAULT_CN`] (made at each start, like traefik's).
pub fn default_certificate() -> Result<CertifiedKey, Error> {
    let key = rcgen::KeyPair::generate().map_err(Error::Generate)?;
    let mut params =
        rcgen::CertificateParams::new(Vec::<String>::new()).map_err(Error::Generate)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, DEFAULT_CN);
    let cert = params.self_signed(&key).map_err(Error::Generate)?;
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    CertifiedKey::from_der(
        vec![cert.der().clone()],
        der,
        &rustls::crypto::ring::default_provider(),
    )
    .map_err(Error::Load)
}

/// Picks the certificate for each handshake from the latest table.
#[derive(Debug)]
pub struct SniResolver {
    /// The current routing table (its certificates by host).
    pub table: watch::Receiver<Arc<Table>>,
    /// The certificate for names no Ingress covers.
    pub default: Arc<CertifiedKey>,
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        hello
            .server_name()
            .and_then(|name| self.table.borrow().cert(name))
            .or_else(|| Some(self.default.clone()))
    }
}

/// The listener's TLS configuration.
pub fn server_config(resolver: SniResolver) -> Result<rustls::ServerConfig, Error> {
    k3rs_apimachinery::tls::server_config_with_resolver(Arc::new(resolver)).map_err(Error::Config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_certificate_is_self_signed_for_its_name() {
        let c = default_certificate().unwrap();
        let (_, x509) = x509_parser::parse_x509_certificate(&c.cert[0]).unwrap();
        let cn = x509.subject().iter_common_name().next().unwrap();
        assert_eq!(cn.as_str().unwrap(), DEFAULT_CN);
        assert_eq!(x509.subject(), x509.issuer());
        c.keys_match().unwrap();
    }
}
