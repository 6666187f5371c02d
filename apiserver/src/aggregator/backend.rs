//! What the aggregation layer needs of one APIService: its group/version and, for a
//! service-backed one, where and how to reach the extension API server.

use serde_json::Value;

/// `spec.service` of an APIService.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
    /// The Service port (443 by default).
    pub port: u16,
}

impl ServiceRef {
    /// The name the extension server's certificate must carry (kube-aggregator's).
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

/// A registered APIService, as the proxy and discovery use it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiService {
    /// `<version>.<group>`.
    pub name: String,
    pub group: String,
    pub version: String,
    /// `None`: served by this API server itself (`Local`).
    pub service: Option<ServiceRef>,
    /// `spec.caBundle`, decoded (PEM); empty: the system roots.
    pub ca_bundle: Vec<u8>,
    pub insecure_skip_tls_verify: bool,
    pub group_priority_minimum: i64,
    pub version_priority: i64,
}

impl ApiService {
    /// The APIService in `obj`; `None` when it has no version (not a usable registration).
    pub fn parse(obj: &Value) -> Option<ApiService> {
        use base64::Engine;
        let spec = &obj["spec"];
        let text = |v: &Value| v.as_str().unwrap_or("").to_string();
        let version = text(&spec["version"]);
        if version.is_empty() {
            return None;
        }
        let svc = &spec["service"];
        let service = svc.is_object().then(|| ServiceRef {
            namespace: text(&svc["namespace"]),
            name: text(&svc["name"]),
            port: svc["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
        });
        let ca_bundle = spec["caBundle"]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .unwrap_or_default();
        Some(ApiService {
            name: text(&obj["metadata"]["name"]),
            group: text(&spec["group"]),
            version,
            service,
            ca_bundle,
            insecure_skip_tls_verify: spec["insecureSkipTLSVerify"].as_bool().unwrap_or(false),
            group_priority_minimum: spec["groupPriorityMinimum"].as_i64().unwrap_or(0),
            version_priority: spec["versionPriority"].as_i64().unwrap_or(0),
        })
    }
}

/// A service-backed APIService with what its last availability check found.
#[derive(Debug, Clone, PartialEq)]
pub struct Backend {
    pub api_service: ApiService,
    pub service: ServiceRef,
    /// Whether the last check passed.
    pub available: bool,
    /// The extension server's `APIResourceList` from the last check that passed.
    pub resources: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_service_backed_and_local() {
        let obj = json!({"metadata": {"name": "v1alpha1.wardle.example.com"},
            "spec": {"group": "wardle.example.com", "version": "v1alpha1",
            "service": {"namespace": "wardle", "name": "api"}, "caBundle": "cGVt",
            "groupPriorityMinimum": 1000, "versionPriority": 15}});
        let a = ApiService::parse(&obj).unwrap();
        let svc = a.service.clone().unwrap();
        assert_eq!(svc.port, 443);
        assert_eq!(svc.server_name(), "api.wardle.svc");
        assert_eq!(a.ca_bundle, b"pem");
        assert_eq!((a.group_priority_minimum, a.version_priority), (1000, 15));
        let local =
            json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps", "version": "v1"}});
        assert_eq!(ApiService::parse(&local).unwrap().service, None);
        assert!(ApiService::parse(&json!({"spec": {}})).is_none());
    }
}
