//! The routing table: the cluster's Ingresses, IngressClasses, Services, EndpointSlices and
//! TLS Secrets turned into routes, a default backend and certificates ([`build`]), without
//! I/O. The proxy reads one table per request; a new one replaces it whole.
//!
//! Guarantees:
//! - Only Ingresses of the built-in class count ([`ingress_class::is_ours`]); they are taken
//!   oldest first (creation time, then namespace/name), so at equal precedence the older
//!   Ingress's route wins, and the oldest `spec.defaultBackend` is the default backend (for
//!   requests no rule matches).
//! - A backend is a Service port in the Ingress's namespace, by number (`port.number` =
//!   the Service port's `port`) or by name; its targets are the ready endpoints of that port's
//!   EndpointSlices (ready unset counts as ready), ordered by address, taken in turn.
//! - A backend that cannot be served (Service or port missing, `ExternalName`, a `resource`
//!   backend, no ready endpoint) still routes, to [`Target::Unavailable`] (the proxy answers
//!   503 with the reason), and gives a [`Warning`] naming it.
//! - `spec.tls` gives each listed host the certificate of its Secret (`kubernetes.io/tls`
//!   data `tls.crt`/`tls.key`, key matching the certificate); a Secret missing or unusable
//!   gives a [`Warning`] and the host is served with the default certificate; one not yet
//!   read (`Input::unread`) is served the default certificate without a warning. The first
//!   (oldest) Ingress naming a host chooses its certificate.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use k3rs_apimachinery::ingress_class;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend, IngressClass};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::routes::{self, HostMatch, PathMatch, Route};
use super::secrets::SecretKey;
use crate::proxy::endpoints::{endpoints_for, PortOf};
use crate::proxy::service_port::Protocol;

/// What the table is built from.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// Every Ingress of the cluster (those of other classes are skipped).
    pub ingresses: &'a [Ingress],
    /// Every IngressClass (which Ingresses are served).
    pub classes: &'a [IngressClass],
    /// Every Service (the backends).
    pub services: &'a [Service],
    /// Every EndpointSlice (the backends' endpoints).
    pub slices: &'a [EndpointSlice],
    /// The TLS Secrets read (only those the Ingresses name; see [`super::secrets`]).
    pub secrets: &'a [Secret],
    /// Named TLS Secrets whose read has not been answered yet.
    pub unread: &'a BTreeSet<SecretKey>,
}

/// Where a backend's requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The ready endpoints (at least one), in address order.
    Endpoints(Vec<SocketAddr>),
    /// Nothing to send to: why (the 503 body).
    Unavailable(String),
}

/// One Ingress backend, resolved.
#[derive(Debug)]
pub struct Backend {
    /// `namespace/name` of the Ingress it came from.
    pub ingress: String,
    /// Where its requests go.
    pub target: Target,
    next: AtomicUsize,
}

impl Backend {
    fn new(ingress: String, target: Target) -> Backend {
        Backend {
            ingress,
            target,
            next: AtomicUsize::new(0),
        }
    }

    /// The next endpoint, round-robin; `None` if unavailable.
    pub fn pick(&self) -> Option<SocketAddr> {
        match &self.target {
            Target::Endpoints(eps) if !eps.is_empty() => {
                Some(eps[self.next.fetch_add(1, Ordering::Relaxed) % eps.len()])
            }
            _ => None,
        }
    }
}

/// Why part of an Ingress cannot be served as written (reported as a Warning Event on it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Warning {
    /// The Ingress's namespace.
    pub namespace: String,
    /// The Ingress's name.
    pub ingress: String,
    /// The Event's reason (`ServiceNotFound`, `SecretNotFound`, ...).
    pub reason: &'static str,
    /// What is wrong and what is served instead.
    pub message: String,
}

/// The routes, default backend and certificates of every Ingress served.
#[derive(Debug, Default)]
pub struct Table {
    /// Every rule's paths, in no particular order (see [`routes`] for the precedence).
    pub routes: Vec<Route<Arc<Backend>>>,
    /// Where requests no rule matches go (`None`: 404).
    pub default_backend: Option<Arc<Backend>>,
    /// The TLS hosts and their certificates, first naming wins.
    pub certs: Vec<(HostMatch, Arc<CertifiedKey>)>,
}

impl Table {
    /// The backend of a request for `host` (lower case, no port) and `path`; `None`: 404.
    pub fn backend(&self, host: &str, path: &str) -> Option<&Arc<Backend>> {
        routes::find(&self.routes, host, path)
            .map(|r| &r.target)
            .or(self.default_backend.as_ref())
    }

    /// The certificate for a TLS client asking for `server_name` (exact before wildcard).
    pub fn cert(&self, server_name: &str) -> Option<Arc<CertifiedKey>> {
        let name = server_name.to_ascii_lowercase();
        let of = |wild: bool| {
            self.certs
                .iter()
                .find(|(h, _)| matches!(h, HostMatch::Wildcard(_)) == wild && h.matches(&name))
                .map(|(_, c)| c.clone())
        };
        of(false).or_else(|| of(true))
    }
}

/// Builds the table and the warnings about what it could not serve.
pub fn build(input: &Input) -> (Table, Vec<Warning>) {
    let mut ingresses: Vec<&Ingress> = input
        .ingresses
        .iter()
        .filter(|i| ingress_class::is_ours(i, input.classes))
        .collect();
    ingresses.sort_by(|a, b| {
        let key = |i: &Ingress| {
            (
                i.metadata.creation_timestamp.clone().map(|t| t.0),
                i.metadata.namespace.clone(),
                i.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    let mut table = Table::default();
    let mut warnings = Vec::new();
    for ing in ingresses {
        let mut cx = Resolver {
            input,
            namespace: ing.metadata.namespace.as_deref().unwrap_or_default(),
            name: ing.metadata.name.as_deref().unwrap_or_default(),
            warnings: &mut warnings,
        };
        let Some(spec) = ing.spec.as_ref() else {
            continue;
        };
        if let Some(b) = &spec.default_backend {
            let backend = Arc::new(cx.backend(b));
            table.default_backend.get_or_insert(backend);
        }
        for rule in spec.rules.iter().flatten() {
            let host = HostMatch::parse(rule.host.as_deref());
            let paths = rule.http.iter().flat_map(|h| &h.paths);
            for p in paths {
                table.routes.push(Route {
                    host: host.clone(),
                    path: PathMatch::parse(p.path.as_deref(), Some(&p.path_type)),
                    target: Arc::new(cx.backend(&p.backend)),
                });
            }
        }
        for tls in spec.tls.iter().flatten() {
            let hosts: Vec<HostMatch> = tls
                .hosts
                .iter()
                .flatten()
                .map(|h| HostMatch::parse(Some(h)))
                .filter(|h| *h != HostMatch::Any && !table.certs.iter().any(|(c, _)| c == h))
                .collect();
            if hosts.is_empty() {
                continue;
            }
            if let Some(cert) = cx.certificate(tls.secret_name.as_deref()) {
                table
                    .certs
                    .extend(hosts.into_iter().map(|h| (h, cert.clone())));
            }
        }
    }
    (table, warnings)
}

/// Resolves one Ingress's backends and Secrets, noting warnings.
struct Resolver<'a, 'w> {
    input: &'a Input<'a>,
    namespace: &'a str,
    name: &'a str,
    warnings: &'w mut Vec<Warning>,
}

impl Resolver<'_, '_> {
    fn warn(&mut self, reason: &'static str, message: String) -> String {
        let w = Warning {
            namespace: self.namespace.to_string(),
            ingress: self.name.to_string(),
            reason,
            message: message.clone(),
        };
        if !self.warnings.contains(&w) {
            self.warnings.push(w);
        }
        message
    }

    fn backend(&mut self, b: &IngressBackend) -> Backend {
        let ingress = format!("{}/{}", self.namespace, self.name);
        Backend::new(ingress, self.target(b))
    }

    fn target(&mut self, b: &IngressBackend) -> Target {
        let Some(svc_ref) = &b.service else {
            let m = "resource backends are not supported; only Service backends".to_string();
            return Target::Unavailable(self.warn("UnsupportedBackend", m));
        };
        let ns = self.namespace;
        let Some(svc) = self.input.services.iter().find(|s| {
            s.metadata.namespace.as_deref() == Some(ns)
                && s.metadata.name.as_deref() == Some(&svc_ref.name)
        }) else {
            let m = format!("service {ns}/{} not found", svc_ref.name);
            return Target::Unavailable(self.warn("ServiceNotFound", m));
        };
        let spec = svc.spec.clone().unwrap_or_default();
        if spec.type_.as_deref() == Some("ExternalName") {
            let m = format!("service {ns}/{} is of type ExternalName", svc_ref.name);
            return Target::Unavailable(self.warn("UnsupportedBackend", m));
        }
        let wanted = svc_ref.port.as_ref();
        let port = spec.ports.iter().flatten().find(|p| match wanted {
            Some(w) => match (&w.name, w.number) {
                (Some(n), _) if !n.is_empty() => p.name.as_deref() == Some(n),
                (_, Some(num)) => p.port == num,
                _ => false,
            },
            None => false,
        });
        let Some(port) = port.filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP") else {
            let which = wanted
                .and_then(|w| w.name.clone().filter(|n| !n.is_empty()))
                .or_else(|| wanted.and_then(|w| w.number).map(|n| n.to_string()))
                .unwrap_or_else(|| "(none)".into());
            let m = format!("service {ns}/{} has no TCP port {which}", svc_ref.name);
            return Target::Unavailable(self.warn("ServicePortNotFound", m));
        };
        let key = PortOf {
            namespace: ns,
            service: &svc_ref.name,
            port_name: port.name.as_deref().unwrap_or(""),
            protocol: Protocol::Tcp,
        };
        let ready: Vec<SocketAddr> = endpoints_for(key, self.input.slices, "")
            .into_iter()
            .filter(|e| e.ready)
            .map(|e| SocketAddr::new(IpAddr::V4(e.ip), e.port))
            .collect();
        if ready.is_empty() {
            let m = format!(
                "service {ns}/{} port {} has no ready endpoints",
                svc_ref.name, port.port
            );
            return Target::Unavailable(self.warn("NoReadyEndpoints", m));
        }
        Target::Endpoints(ready)
    }

    fn certificate(&mut self, secret_name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let ns = self.namespace;
        let Some(name) = secret_name.filter(|n| !n.is_empty()) else {
            let m = "a spec.tls entry names no secret; serving the default certificate";
            self.warn("SecretNotFound", m.to_string());
            return None;
        };
        if self
            .input
            .unread
            .contains(&(ns.to_string(), name.to_string()))
        {
            return None;
        }
        let Some(secret) = self.input.secrets.iter().find(|s| {
            s.metadata.namespace.as_deref() == Some(ns) && s.metadata.name.as_deref() == Some(name)
        }) else {
            let m = format!("TLS secret {ns}/{name} not found; serving the default certificate");
            self.warn("SecretNotFound", m);
            return None;
        };
        match certified_key(secret) {
            Ok(key) => Some(Arc::new(key)),
            Err(why) => {
                let m = format!("TLS secret {ns}/{name}: {why}; serving the default certificate");
                self.warn("InvalidSecret", m);
                None
            }
        }
    }
}

/// The certificate chain and key of a `kubernetes.io/tls` Secret, checked to match.
pub fn certified_key(secret: &Secret) -> Result<CertifiedKey, String> {
    let data = |k: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|b| b.0.as_slice())
            .filter(|b| !b.is_empty())
            .ok_or_else(|| format!("no {k}"))
    };
    let chain = CertificateDer::pem_slice_iter(data("tls.crt")?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("tls.crt: {e}"))?;
    if chain.is_empty() {
        return Err("tls.crt holds no certificate".into());
    }
    let key =
        PrivateKeyDer::from_pem_slice(data("tls.key")?).map_err(|e| format!("tls.key: {e}"))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| e.to_string())
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
