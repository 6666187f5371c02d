//! The authorization attributes of a request (kube-apiserver's `RequestInfo` +
//! `authorizer.Attributes`), derived from method, path and query alone: requests are
//! authorized before the server looks up whether the resource exists.

use std::sync::Arc;

use super::user::UserInfo;

/// What is being asked, by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub user: Arc<UserInfo>,
    /// `get list watch create update patch delete deletecollection` (and `impersonate`,
    /// `bind`, `escalate`, `approve`, `sign`… when an authorizer asks on a request's behalf);
    /// the lowercase HTTP method for non-resource requests.
    pub verb: String,
    pub resource_request: bool,
    /// The request path (non-resource requests are authorized on it).
    pub path: String,
    pub namespace: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
}

impl Attributes {
    /// The attributes of an HTTP request. `query` is the raw query string.
    pub fn of_request(
        user: Arc<UserInfo>,
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> Attributes {
        let mut a = Attributes {
            user,
            verb: method.to_ascii_lowercase(),
            resource_request: false,
            path: path.to_string(),
            namespace: String::new(),
            api_group: String::new(),
            api_version: String::new(),
            resource: String::new(),
            subresource: String::new(),
            name: String::new(),
        };
        let segs: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        // /api/v1/<rest> or /apis/<group>/<version>/<rest>; shorter paths are discovery
        // (non-resource requests).
        let rest = match segs.first().map(String::as_str) {
            Some("api") if segs.len() >= 3 => {
                a.api_version = segs[1].clone();
                &segs[2..]
            }
            Some("apis") if segs.len() >= 4 => {
                a.api_group = segs[1].clone();
                a.api_version = segs[2].clone();
                &segs[3..]
            }
            _ => {
                a.api_version.clear();
                a.api_group.clear();
                return a;
            }
        };
        a.resource_request = true;
        let params: Vec<(String, String)> = query
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let mut parts: &[String] = rest;
        let mut legacy_watch = false;
        if parts.first().is_some_and(|p| p == "watch") {
            legacy_watch = true;
            parts = &parts[1..];
        }
        if parts.first().is_some_and(|p| p == "namespaces") && parts.len() > 1 {
            a.namespace = parts[1].clone();
            // `namespaces/<ns>/<resource>…`; but `namespaces/<ns>` and its own subresources
            // (`status`, `finalize`) are about the namespace object itself.
            if parts.len() > 2 && !matches!(parts[2].as_str(), "status" | "finalize") {
                parts = &parts[2..];
            }
        }
        a.resource = parts.first().cloned().unwrap_or_default();
        a.name = parts.get(1).cloned().unwrap_or_default();
        a.subresource = parts.get(2).cloned().unwrap_or_default();
        let named = !a.name.is_empty();
        let watch = legacy_watch || matches!(param("watch"), Some("true" | "1"));
        a.verb = match method {
            "GET" | "HEAD" if watch => "watch",
            "GET" | "HEAD" if named => "get",
            "GET" | "HEAD" => "list",
            "POST" => "create",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" if named => "delete",
            "DELETE" => "deletecollection",
            other => {
                return Attributes {
                    verb: other.to_ascii_lowercase(),
                    ..a
                }
            }
        }
        .to_string();
        // A list or watch narrowed to one name by `fieldSelector=metadata.name=<n>` is
        // authorized as that name (so resourceNames rules cover `kubectl get x/<n> -w`).
        if matches!(a.verb.as_str(), "list" | "watch") && !named {
            if let Some(fs) = param("fieldSelector") {
                if let Some(n) = fs.strip_prefix("metadata.name=") {
                    if !n.contains(',') {
                        a.name = n.to_string();
                    }
                }
            }
        }
        a
    }

    /// The second check a `GET` to `pods/exec`, `pods/attach` or `pods/portforward` needs:
    /// the same request as `create` (upstream's `AuthorizePodWebsocketUpgradeCreatePermission`,
    /// on by default since 1.35): a WebSocket upgrade starts the session with a `GET`, and
    /// starting one must take the permission a SPDY `POST` takes.
    pub fn websocket_create_check(&self, method: &str) -> Option<Attributes> {
        let streaming = self.resource_request
            && self.api_group.is_empty()
            && self.resource == "pods"
            && matches!(self.subresource.as_str(), "exec" | "attach" | "portforward");
        (streaming && method.eq_ignore_ascii_case("GET")).then(|| Attributes {
            verb: "create".into(),
            ..self.clone()
        })
    }

    /// `pods/log`-style resource for messages (resource plus subresource).
    pub fn resource_with_subresource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(method: &str, path: &str, query: Option<&str>) -> Attributes {
        Attributes::of_request(Arc::new(UserInfo::anonymous()), method, path, query)
    }

    #[test]
    fn resource_requests() {
        let a = at("GET", "/api/v1/namespaces/default/pods", None);
        assert!(a.resource_request);
        assert_eq!(
            (
                a.verb.as_str(),
                a.namespace.as_str(),
                a.resource.as_str(),
                a.name.as_str()
            ),
            ("list", "default", "pods", "")
        );
        let a = at("GET", "/api/v1/namespaces/default/pods/p1/log", None);
        assert_eq!(
            (a.verb.as_str(), a.name.as_str(), a.subresource.as_str()),
            ("get", "p1", "log")
        );
        assert_eq!(a.resource_with_subresource(), "pods/log");
        let a = at("POST", "/apis/apps/v1/namespaces/ns/deployments", None);
        assert_eq!(
            (
                a.verb.as_str(),
                a.api_group.as_str(),
                a.api_version.as_str()
            ),
            ("create", "apps", "v1")
        );
        let a = at("DELETE", "/api/v1/namespaces/ns/pods", None);
        assert_eq!(a.verb, "deletecollection");
        let a = at("GET", "/api/v1/pods", Some("watch=true"));
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("watch", ""));
        let a = at("GET", "/api/v1/watch/namespaces/x/pods", None);
        assert_eq!(
            (a.verb.as_str(), a.namespace.as_str(), a.resource.as_str()),
            ("watch", "x", "pods")
        );
    }

    #[test]
    fn streaming_gets_are_also_checked_as_create() {
        for sub in ["exec", "attach", "portforward"] {
            let path = format!("/api/v1/namespaces/n/pods/p/{sub}");
            let a = at("GET", &path, Some("command=ls"));
            assert_eq!(a.verb, "get");
            let c = a.websocket_create_check("GET").unwrap();
            assert_eq!(
                (
                    c.verb.as_str(),
                    c.resource.as_str(),
                    c.subresource.as_str(),
                    c.name.as_str()
                ),
                ("create", "pods", sub, "p")
            );
            assert!(at("POST", &path, None)
                .websocket_create_check("POST")
                .is_none());
        }
        for path in [
            "/api/v1/namespaces/n/pods/p/log",
            "/api/v1/namespaces/n/pods/p",
        ] {
            assert!(at("GET", path, None)
                .websocket_create_check("GET")
                .is_none());
        }
    }

    #[test]
    fn namespace_objects_are_in_their_own_namespace() {
        let a = at("GET", "/api/v1/namespaces/kube-system", None);
        assert_eq!(
            (
                a.verb.as_str(),
                a.namespace.as_str(),
                a.resource.as_str(),
                a.name.as_str()
            ),
            ("get", "kube-system", "namespaces", "kube-system")
        );
        let a = at("PUT", "/api/v1/namespaces/x/finalize", None);
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.subresource.as_str()),
            ("namespaces", "x", "finalize")
        );
        let a = at("GET", "/api/v1/namespaces", None);
        assert_eq!(
            (a.verb.as_str(), a.namespace.as_str(), a.resource.as_str()),
            ("list", "", "namespaces")
        );
    }

    #[test]
    fn field_selector_on_name_names_the_request() {
        let a = at(
            "GET",
            "/api/v1/namespaces/d/configmaps",
            Some("fieldSelector=metadata.name%3Dcm&watch=1"),
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "cm"));
    }

    #[test]
    fn non_resource_requests() {
        for (m, p) in [
            ("GET", "/api"),
            ("GET", "/apis/apps"),
            ("GET", "/apis/apps/v1"),
            ("GET", "/healthz"),
            ("POST", "/openapi/v3"),
        ] {
            let a = at(m, p, None);
            assert!(!a.resource_request, "{p}");
            assert_eq!(a.verb, m.to_ascii_lowercase());
            assert_eq!(a.path, p);
        }
    }
}
