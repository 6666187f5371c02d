//! What a request asks for, parsed once (kube-apiserver's `RequestInfo`).
//!
//! The router's outermost layer parses every request into one [`RequestInfo`] and puts it in
//! the request's extensions; authentication, authorization, admission, audit and the handler
//! all read that value instead of parsing the URI again.
//!
//! # Guarantees
//! - Derived from method, path and query alone: a request is authorized before the server
//!   looks up whether its resource exists.
//! - A list or watch is narrowed to one name only when its field selector, read exactly as
//!   the handler reads it, requires `metadata.name` to equal that name; the handler then
//!   serves no object of another name.
//! - Repeated single-valued parameters mean their first value in every stage
//!   ([`QueryParams`]).

mod query;

pub use query::QueryParams;

use crate::selector::field;

/// A request's method, path, query and the authorization view of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The HTTP method as sent (`GET`, `POST`, …).
    pub method: String,
    /// The request path, still percent-encoded.
    pub path: String,
    /// The decoded query parameters.
    pub query: QueryParams,
    /// A request under `/api/v1/…` or `/apis/<group>/<version>/…` naming a resource.
    pub resource_request: bool,
    /// `get list watch create update patch delete deletecollection`, or the lowercase HTTP
    /// method for non-resource requests and unknown methods.
    pub verb: String,
    /// The namespace (`""` for cluster scope).
    pub namespace: String,
    /// The API group (`""` for core).
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource (`""` for none).
    pub subresource: String,
    /// The object's name: from the path, or from a field selector that pins one name.
    pub name: String,
}

impl RequestInfo {
    /// Parses a request. `query` is the raw query string.
    pub fn parse(method: &str, path: &str, query: Option<&str>) -> RequestInfo {
        let mut info = RequestInfo {
            method: method.to_string(),
            path: path.to_string(),
            query: QueryParams::parse(query),
            resource_request: false,
            verb: method.to_ascii_lowercase(),
            namespace: String::new(),
            api_group: String::new(),
            api_version: String::new(),
            resource: String::new(),
            subresource: String::new(),
            name: String::new(),
        };
        info.parse_resource();
        info
    }

    fn parse_resource(&mut self) {
        let segs: Vec<String> = self
            .path
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
                self.api_version = segs[1].clone();
                &segs[2..]
            }
            Some("apis") if segs.len() >= 4 => {
                self.api_group = segs[1].clone();
                self.api_version = segs[2].clone();
                &segs[3..]
            }
            _ => return,
        };
        self.resource_request = true;
        let mut parts: &[String] = rest;
        let mut legacy_watch = false;
        if parts.first().is_some_and(|p| p == "watch") {
            legacy_watch = true;
            parts = &parts[1..];
        }
        if parts.first().is_some_and(|p| p == "namespaces") && parts.len() > 1 {
            self.namespace = parts[1].clone();
            // `namespaces/<ns>/<resource>…`; but `namespaces/<ns>` and its own subresources
            // (`status`, `finalize`) are about the namespace object itself.
            if parts.len() > 2 && !matches!(parts[2].as_str(), "status" | "finalize") {
                parts = &parts[2..];
            }
        }
        self.resource = parts.first().cloned().unwrap_or_default();
        self.name = parts.get(1).cloned().unwrap_or_default();
        self.subresource = parts.get(2).cloned().unwrap_or_default();
        let named = !self.name.is_empty();
        let watch = legacy_watch || self.query.flag("watch");
        let verb = match self.method.as_str() {
            "GET" | "HEAD" if watch => "watch",
            "GET" | "HEAD" if named => "get",
            "GET" | "HEAD" => "list",
            "POST" => "create",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" if named => "delete",
            "DELETE" => "deletecollection",
            _ => return,
        };
        self.verb = verb.to_string();
        // A list or watch narrowed to one name by its field selector is authorized as that
        // name (so resourceNames rules cover `kubectl get x/<n> -w`), as upstream does.
        if matches!(verb, "list" | "watch") && !named {
            if let Some(name) = self
                .query
                .get("fieldSelector")
                .and_then(|fs| field::exact_match(fs, "metadata.name"))
                .filter(|n| is_valid_path_segment_name(n))
            {
                self.name = name;
            }
        }
    }

    /// Whether the query asks for a watch (`?watch=…`, or the legacy `/watch/` prefix).
    pub fn is_watch(&self) -> bool {
        self.verb == "watch"
    }
}

/// Upstream's `path.IsValidPathSegmentName`: a name that can stand as one path segment.
fn is_valid_path_segment_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%'])
}

#[cfg(test)]
mod tests;
