//! Where a service-backed APIService's requests go: the Service's port, then an address of
//! its Endpoints with that port (kube-aggregator's endpoint routing, which also reaches
//! extension servers outside the pod network), and why not when there is none, in the words
//! of kube-aggregator's `Available` condition.

use serde_json::Value;

use super::backend::ServiceRef;
use crate::registry::{Registry, Target};
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::status::ApiError;

/// An extension server's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub host: String,
    pub port: u16,
}

/// Why a Service cannot be reached, with the `Available` condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreachable {
    #[error("service/{name} in {namespace:?} is not present")]
    ServiceNotFound { namespace: String, name: String },
    #[error("service/{name} in {namespace:?} cannot be read: {message}")]
    ServiceAccessError {
        namespace: String,
        name: String,
        message: String,
    },
    #[error("service/{name} in {namespace:?} is not listening on port {port}")]
    ServicePortError {
        namespace: String,
        name: String,
        port: u16,
    },
    #[error("cannot find endpoints for service/{name} in {namespace:?}")]
    EndpointsNotFound { namespace: String, name: String },
    #[error("endpoints for service/{name} in {namespace:?} have no addresses with port name {port_name:?}")]
    MissingEndpoints {
        namespace: String,
        name: String,
        port_name: String,
    },
}

impl Unreachable {
    /// The condition reason (kube-aggregator's).
    pub fn reason(&self) -> &'static str {
        match self {
            Unreachable::ServiceNotFound { .. } => "ServiceNotFound",
            Unreachable::ServiceAccessError { .. } => "ServiceAccessError",
            Unreachable::ServicePortError { .. } => "ServicePortError",
            Unreachable::EndpointsNotFound { .. } => "EndpointsNotFound",
            Unreachable::MissingEndpoints { .. } => "MissingEndpoints",
        }
    }
}

/// The address for `svc` from its Service object and its Endpoints (`None`: none stored).
/// An `ExternalName` Service resolves to its name.
pub fn address(
    svc: &ServiceRef,
    service: &Value,
    endpoints: Option<&Value>,
) -> Result<Address, Unreachable> {
    let (namespace, name) = (svc.namespace.clone(), svc.name.clone());
    let spec = &service["spec"];
    if spec["type"] == "ExternalName" {
        return Ok(Address {
            host: spec["externalName"].as_str().unwrap_or("").to_string(),
            port: svc.port,
        });
    }
    let port = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(u64::from(svc.port)))
        .ok_or_else(|| Unreachable::ServicePortError {
            namespace: namespace.clone(),
            name: name.clone(),
            port: svc.port,
        })?;
    let port_name = port["name"].as_str().unwrap_or("").to_string();
    let missing = || Unreachable::MissingEndpoints {
        namespace: namespace.clone(),
        name: name.clone(),
        port_name: port_name.clone(),
    };
    let endpoints = endpoints.ok_or_else(|| Unreachable::EndpointsNotFound {
        namespace: namespace.clone(),
        name: name.clone(),
    })?;
    for subset in endpoints["subsets"].as_array().into_iter().flatten() {
        let Some(port) = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or("") == port_name)
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        if let Some(ip) = subset["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|a| a["ip"].as_str())
        {
            return Ok(Address {
                host: ip.to_string(),
                port,
            });
        }
    }
    Err(missing())
}

/// Reads `svc`'s Service and Endpoints and resolves them ([`address`]).
pub async fn lookup(reg: &Registry, svc: &ServiceRef) -> Result<Address, Unreachable> {
    let read = |plural: &'static str| {
        let t = catalog::lookup("", "v1", plural).map(|resource| Target {
            resource,
            namespace: Some(svc.namespace.clone()),
            name: Some(svc.name.clone()),
            subresource: None,
        });
        async move {
            match t {
                Some(t) => reg.get(&t).await.map(Some).or_else(not_found_is_none),
                None => Ok(None),
            }
        }
    };
    let access = |e: ApiError| Unreachable::ServiceAccessError {
        namespace: svc.namespace.clone(),
        name: svc.name.clone(),
        message: e.message,
    };
    let service =
        read("services")
            .await
            .map_err(access)?
            .ok_or_else(|| Unreachable::ServiceNotFound {
                namespace: svc.namespace.clone(),
                name: svc.name.clone(),
            })?;
    let endpoints = read("endpoints").await.map_err(access)?;
    address(svc, &service, endpoints.as_ref())
}

fn not_found_is_none(e: ApiError) -> Result<Option<Value>, ApiError> {
    if e.code == 404 {
        Ok(None)
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc() -> ServiceRef {
        ServiceRef {
            namespace: "wardle".into(),
            name: "api".into(),
            port: 443,
        }
    }

    #[test]
    fn resolves_the_endpoint_of_the_service_port() {
        let service =
            json!({"spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}});
        let endpoints = json!({"subsets": [
            {"addresses": [{"ip": "10.0.0.9"}], "ports": [{"name": "metrics", "port": 9090}]},
            {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 8443}]}]});
        assert_eq!(
            address(&svc(), &service, Some(&endpoints)),
            Ok(Address {
                host: "127.0.0.1".into(),
                port: 8443
            })
        );
    }

    #[test]
    fn says_why_not() {
        let service = json!({"spec": {"ports": [{"port": 80}]}});
        let e = address(&svc(), &service, None).unwrap_err();
        assert_eq!(e.reason(), "ServicePortError");
        assert_eq!(
            e.to_string(),
            "service/api in \"wardle\" is not listening on port 443"
        );
        let service = json!({"spec": {"ports": [{"port": 443}]}});
        let e = address(&svc(), &service, None).unwrap_err();
        assert_eq!(
            (e.reason(), e.to_string()),
            (
                "EndpointsNotFound",
                "cannot find endpoints for service/api in \"wardle\"".into()
            )
        );
        let empty = json!({"subsets": [{"notReadyAddresses": [{"ip": "10.0.0.9"}], "ports": [{"port": 8443}]}]});
        let e = address(&svc(), &service, Some(&empty)).unwrap_err();
        assert_eq!(e.reason(), "MissingEndpoints");
    }

    #[test]
    fn external_names() {
        let service = json!({"spec": {"type": "ExternalName", "externalName": "api.example.com"}});
        assert_eq!(
            address(&svc(), &service, None).unwrap().host,
            "api.example.com"
        );
    }
}
