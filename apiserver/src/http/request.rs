//! Resource request paths (kube-apiserver's `RequestInfo`) and query parameters.

use std::sync::Arc;

use k3rs_apimachinery::catalog::{self, Resource};
use k3rs_apimachinery::request_info::RequestInfo;
use k3rs_apimachinery::status::{ApiError, ApiResult};

/// A parsed `/api/v1/…` or `/apis/<group>/<version>/…` resource path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub resource: &'static Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The legacy `/watch/` prefix was used.
    pub legacy_watch: bool,
}

/// What a path under `/api` or `/apis` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiPath {
    /// `/api` or `/apis` (discovery roots).
    Root {
        legacy: bool,
    },
    /// `/apis/<group>`.
    Group {
        group: String,
    },
    /// `/api/v1` or `/apis/<group>/<version>`.
    GroupVersion {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
}

/// Subresources of namespaces that follow the name directly (`namespaces/x/status`).
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

fn decode_segment(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Parses `path` (without query). Unknown groups, versions and resources are 404s.
pub fn parse(path: &str) -> ApiResult<ApiPath> {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode_segment)
        .collect();
    let (group, version, rest) = match segs.first().map(String::as_str) {
        Some("api") => match segs.len() {
            1 => return Ok(ApiPath::Root { legacy: true }),
            _ if segs[1] != "v1" => return Err(ApiError::path_not_found()),
            2 => {
                return Ok(ApiPath::GroupVersion {
                    group: String::new(),
                    version: "v1".into(),
                })
            }
            _ => (String::new(), "v1".to_string(), &segs[2..]),
        },
        Some("apis") => match segs.len() {
            1 => return Ok(ApiPath::Root { legacy: false }),
            2 => {
                if catalog::groups().iter().any(|(g, _)| *g == segs[1]) {
                    return Ok(ApiPath::Group {
                        group: segs[1].clone(),
                    });
                }
                return Err(ApiError::path_not_found());
            }
            3 => {
                if catalog::in_group_version(&segs[1], &segs[2])
                    .next()
                    .is_none()
                {
                    return Err(ApiError::path_not_found());
                }
                return Ok(ApiPath::GroupVersion {
                    group: segs[1].clone(),
                    version: segs[2].clone(),
                });
            }
            _ => (segs[1].clone(), segs[2].clone(), &segs[3..]),
        },
        _ => return Err(ApiError::path_not_found()),
    };
    let (legacy_watch, rest) = match rest.first().map(String::as_str) {
        Some("watch") => (true, &rest[1..]),
        _ => (false, rest),
    };
    let (namespace, rest): (Option<String>, Vec<String>) = if rest.first().map(String::as_str)
        == Some("namespaces")
        && rest.len() > 2
        && !NAMESPACE_SUBRESOURCES.contains(&rest[2].as_str())
    {
        (Some(rest[1].clone()), rest[2..].to_vec())
    } else {
        (None, rest.to_vec())
    };
    let (plural, name, subresource) = match rest.as_slice() {
        [r] => (r, None, None),
        [r, n] => (r, Some(n.clone()), None),
        [r, n, s] => (r, Some(n.clone()), Some(s.clone())),
        _ => return Err(ApiError::path_not_found()),
    };
    let resource =
        catalog::lookup(&group, &version, plural).ok_or_else(ApiError::path_not_found)?;
    if let Some(s) = &subresource {
        if !resource.has_subresource(s) {
            return Err(ApiError::path_not_found());
        }
    }
    if namespace.is_some() && !resource.namespaced {
        return Err(ApiError::path_not_found());
    }
    // A namespaced resource's object paths need a namespace.
    if resource.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::path_not_found());
    }
    // The namespace of a namespace is itself.
    let namespace = if resource.plural == "namespaces" && resource.group.is_empty() {
        None
    } else {
        namespace
    };
    Ok(ApiPath::Resource(ResourcePath {
        resource,
        namespace,
        name,
        subresource,
        legacy_watch,
    }))
}

/// The request's [`RequestInfo`], parsed once by the router's outermost layer (parsed here
/// only for requests that did not pass the router, e.g. handlers called by unit tests).
pub fn info_of<B>(req: &axum::http::Request<B>) -> Arc<RequestInfo> {
    req.extensions()
        .get::<Arc<RequestInfo>>()
        .cloned()
        .unwrap_or_else(|| {
            Arc::new(RequestInfo::parse(
                req.method().as_str(),
                req.uri().path(),
                req.uri().query(),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path).unwrap() {
            ApiPath::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn resource_paths() {
        let r = res("/api/v1/namespaces/default/pods/x/status");
        assert_eq!(
            (
                r.resource.plural,
                r.namespace.as_deref(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("pods", Some("default"), Some("x"), Some("status"))
        );
        let r = res("/api/v1/pods");
        assert_eq!(
            (r.resource.plural, r.namespace, r.name),
            ("pods", None, None)
        );
        let r = res("/api/v1/namespaces/kube-system");
        assert_eq!(
            (r.resource.plural, r.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let r = res("/api/v1/namespaces/x/status");
        assert_eq!(
            (r.name.as_deref(), r.subresource.as_deref()),
            (Some("x"), Some("status"))
        );
        let r = res("/apis/apps/v1/namespaces/ns/deployments/d/scale");
        assert_eq!(r.subresource.as_deref(), Some("scale"));
        let r = res("/api/v1/watch/namespaces/default/configmaps");
        assert!(r.legacy_watch);
        assert_eq!(r.namespace.as_deref(), Some("default"));
        assert_eq!(res("/api/v1/nodes/n1").name.as_deref(), Some("n1"));
    }

    #[test]
    fn discovery_and_unknown_paths() {
        assert_eq!(parse("/api").unwrap(), ApiPath::Root { legacy: true });
        assert_eq!(parse("/apis").unwrap(), ApiPath::Root { legacy: false });
        assert!(matches!(
            parse("/apis/apps/v1").unwrap(),
            ApiPath::GroupVersion { .. }
        ));
        assert!(matches!(
            parse("/apis/apps").unwrap(),
            ApiPath::Group { .. }
        ));
        for p in [
            "/api/v2",
            "/apis/nope/v1",
            "/api/v1/nope",
            "/api/v1/namespaces/x/nodes",
            "/api/v1/pods/x",
            "/api/v1/namespaces/d/pods/x/nope",
            "/api/v1/namespaces/d/pods/x/status/y",
        ] {
            assert_eq!(parse(p).unwrap_err().code, 404, "{p}");
        }
    }
}
