//! Matching a request's host and path against Ingress rules, as the Ingress API defines it.
//!
//! Guarantees:
//! - Hosts: an exact host matches that host only (case-insensitive); `*.example.com` matches
//!   exactly one more label (`a.example.com`, not `example.com` nor `a.b.example.com`); a
//!   rule without a host matches every host. A request meets the exact-host rules first, then
//!   the wildcard ones, then the host-less ones; the first group with a matching path wins.
//! - Paths: `Exact` is string equality; `Prefix` (and `ImplementationSpecific`, treated as
//!   `Prefix`) matches element-wise on `/`-separated elements, a trailing `/` ignored, so
//!   `/foo` matches `/foo`, `/foo/` and `/foo/bar`, never `/foobar`; `/` matches every path.
//! - Within a group the longest path wins; at equal length `Exact` beats `Prefix`; at a tie
//!   the route listed first (the older Ingress) wins.

/// How a rule's host matches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostMatch {
    /// `example.com` (lower case).
    Exact(String),
    /// `*.example.com`: the suffix `.example.com` (lower case), one label before it.
    Wildcard(String),
    /// No host: every host.
    Any,
}

impl HostMatch {
    /// The rule's `host` field.
    pub fn parse(host: Option<&str>) -> HostMatch {
        match host.map(str::to_ascii_lowercase) {
            None => HostMatch::Any,
            Some(h) if h.is_empty() => HostMatch::Any,
            Some(h) => match h.strip_prefix('*') {
                Some(suffix) => HostMatch::Wildcard(suffix.to_string()),
                None => HostMatch::Exact(h),
            },
        }
    }

    /// Whether `host` (lower case, no port) matches.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostMatch::Exact(h) => h == host,
            HostMatch::Wildcard(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|label| !label.is_empty() && !label.contains('.')),
            HostMatch::Any => true,
        }
    }

    /// The group a request tries in order: exact, wildcard, any.
    fn group(&self) -> u8 {
        match self {
            HostMatch::Exact(_) => 0,
            HostMatch::Wildcard(_) => 1,
            HostMatch::Any => 2,
        }
    }
}

/// How a rule's path matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMatch {
    /// The path exactly (case-sensitive).
    Exact(String),
    /// The path's non-empty `/`-separated elements.
    Prefix(Vec<String>),
}

fn elements(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect()
}

impl PathMatch {
    /// A path of type `path_type` (`Exact`, `Prefix`, `ImplementationSpecific`; none is
    /// `ImplementationSpecific`); a missing path is `/`.
    pub fn parse(path: Option<&str>, path_type: Option<&str>) -> PathMatch {
        let path = path.filter(|p| !p.is_empty()).unwrap_or("/");
        match path_type {
            Some("Exact") => PathMatch::Exact(path.to_string()),
            _ => PathMatch::Prefix(elements(path)),
        }
    }

    /// Whether the request path (without query) matches.
    pub fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Exact(p) => p == path,
            PathMatch::Prefix(want) => {
                let mut got = path.split('/').filter(|e| !e.is_empty());
                want.iter().all(|w| got.next() == Some(w.as_str()))
            }
        }
    }

    /// The precedence key: longer first, then Exact before Prefix.
    fn rank(&self) -> (usize, u8) {
        match self {
            PathMatch::Exact(p) => (p.len(), 1),
            // The length of the path as written without a trailing slash: `/foo/bar` is 8.
            PathMatch::Prefix(e) => (e.iter().map(|s| s.len() + 1).sum(), 0),
        }
    }
}

/// One path of one rule, pointing at `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route<T> {
    /// The rule's host.
    pub host: HostMatch,
    /// The path's match.
    pub path: PathMatch,
    /// Where matching requests go.
    pub target: T,
}

/// The route a request for `host` and `path` takes among `routes` (in listing order), if
/// any.
pub fn find<'a, T>(routes: &'a [Route<T>], host: &str, path: &str) -> Option<&'a Route<T>> {
    let host = host.to_ascii_lowercase();
    (0..3).find_map(|group| {
        let mut best: Option<&Route<T>> = None;
        for r in routes
            .iter()
            .filter(|r| r.host.group() == group && r.host.matches(&host) && r.path.matches(path))
        {
            if best.is_none_or(|b| r.path.rank() > b.path.rank()) {
                best = Some(r);
            }
        }
        best
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(
        host: Option<&str>,
        path: &str,
        path_type: &str,
        target: &'static str,
    ) -> Route<&'static str> {
        Route {
            host: HostMatch::parse(host),
            path: PathMatch::parse(Some(path), Some(path_type)),
            target,
        }
    }

    #[test]
    fn hosts_exact_wildcard_and_any() {
        let exact = HostMatch::parse(Some("Foo.Example.com"));
        assert!(exact.matches("foo.example.com"));
        assert!(!exact.matches("bar.example.com"));
        let wild = HostMatch::parse(Some("*.example.com"));
        for (host, want) in [
            ("a.example.com", true),
            ("example.com", false),
            (".example.com", false),
            ("a.b.example.com", false),
            ("aexample.com", false),
        ] {
            assert_eq!(wild.matches(host), want, "{host}");
        }
        assert!(HostMatch::parse(None).matches("anything"));
        assert_eq!(HostMatch::parse(Some("")), HostMatch::Any);
    }

    /// The examples table of the Ingress documentation ("Examples" under path types).
    #[test]
    fn paths_as_the_ingress_documentation_tabulates() {
        let cases: &[(&str, &str, &str, bool)] = &[
            ("Prefix", "/", "/", true),
            ("Prefix", "/", "/anything/at/all", true),
            ("Exact", "/foo", "/foo", true),
            ("Exact", "/foo", "/bar", false),
            ("Exact", "/foo", "/foo/", false),
            ("Exact", "/foo/", "/foo", false),
            ("Prefix", "/foo", "/foo", true),
            ("Prefix", "/foo", "/foo/", true),
            ("Prefix", "/foo/", "/foo", true),
            ("Prefix", "/foo/", "/foo/", true),
            ("Prefix", "/aaa/bb", "/aaa/bbb", false),
            ("Prefix", "/aaa/bbb", "/aaa/bbb", true),
            ("Prefix", "/aaa/bbb/", "/aaa/bbb", true),
            ("Prefix", "/aaa/bbb", "/aaa/bbb/", true),
            ("Prefix", "/aaa/bbb", "/aaa/bbb/ccc", true),
            ("Prefix", "/aaa/bbb", "/aaa/bbbxyz", false),
            ("ImplementationSpecific", "/aaa", "/aaa/ccc", true),
            ("ImplementationSpecific", "/aaa", "/aaaccc", false),
        ];
        for (kind, path, request, want) in cases {
            let m = PathMatch::parse(Some(path), Some(kind));
            assert_eq!(m.matches(request), *want, "{kind} {path} vs {request}");
        }
    }

    #[test]
    fn longest_path_wins_then_exact_then_first_listed() {
        let routes = [
            route(None, "/", "Prefix", "root"),
            route(None, "/aaa", "Prefix", "aaa"),
            route(None, "/aaa/bbb", "Prefix", "bbb"),
            route(None, "/aaa/bbb", "Exact", "bbb-exact"),
            route(None, "/ccc", "Prefix", "first"),
            route(None, "/ccc", "Prefix", "second"),
        ];
        let at = |p: &str| find(&routes, "h", p).map(|r| r.target);
        assert_eq!(at("/"), Some("root"));
        assert_eq!(at("/aaa/x"), Some("aaa"));
        assert_eq!(at("/aaa/bbb/c"), Some("bbb"));
        assert_eq!(at("/aaa/bbb"), Some("bbb-exact"));
        assert_eq!(at("/ccc"), Some("first"));
    }

    #[test]
    fn exact_hosts_before_wildcards_before_any() {
        let routes = [
            route(None, "/", "Prefix", "any"),
            route(Some("*.example.com"), "/", "Prefix", "wild"),
            route(Some("foo.example.com"), "/api", "Prefix", "foo-api"),
        ];
        let at = |h: &str, p: &str| find(&routes, h, p).map(|r| r.target);
        assert_eq!(at("foo.example.com", "/api/v1"), Some("foo-api"));
        // No path of the exact host matches: the wildcard's does.
        assert_eq!(at("FOO.example.com", "/"), Some("wild"));
        assert_eq!(at("bar.example.com", "/api"), Some("wild"));
        assert_eq!(at("other.org", "/api"), Some("any"));
        assert_eq!(find(&routes[1..], "other.org", "/"), None);
    }
}
