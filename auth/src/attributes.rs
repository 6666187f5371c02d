//! The authorization attributes of a request (kube-apiserver's `authorizer.Attributes`):
//! who asks, and what the [`RequestInfo`] says they ask for.

use std::sync::Arc;

use super::user::UserInfo;
use k3rs_apimachinery::request_info::RequestInfo;

/// What is being asked, by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// The authenticated (or impersonated) user making the request.
    pub user: Arc<UserInfo>,
    /// `get list watch create update patch delete deletecollection` (and `impersonate`,
    /// `bind`, `escalate`, `approve`, `sign`… when an authorizer asks on a request's behalf);
    /// the lowercase HTTP method for non-resource requests.
    pub verb: String,
    /// Whether this is a resource request (`/api`, `/apis`) rather than a non-resource path.
    pub resource_request: bool,
    /// The request path (non-resource requests are authorized on it).
    pub path: String,
    /// The object's namespace; empty for cluster-scoped objects and cluster-wide lists.
    pub namespace: String,
    /// The API group; empty for the core group.
    pub api_group: String,
    /// The API version of the request (e.g. `v1`).
    pub api_version: String,
    /// The resource's plural name (e.g. `pods`); empty for non-resource requests.
    pub resource: String,
    /// The subresource (e.g. `status`, `log`); empty when none.
    pub subresource: String,
    /// The object's name; empty for lists, watches and creates without one.
    pub name: String,
}

impl Attributes {
    /// The attributes of a parsed request.
    pub fn of(user: Arc<UserInfo>, info: &RequestInfo) -> Attributes {
        Attributes {
            user,
            verb: info.verb.clone(),
            resource_request: info.resource_request,
            path: info.path.clone(),
            namespace: info.namespace.clone(),
            api_group: info.api_group.clone(),
            api_version: info.api_version.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            name: info.name.clone(),
        }
    }

    /// The attributes of an HTTP request. `query` is the raw query string.
    pub fn of_request(
        user: Arc<UserInfo>,
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> Attributes {
        Attributes::of(user, &RequestInfo::parse(method, path, query))
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
}
