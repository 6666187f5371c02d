//! The per-kind round trip the built-in resource suites share: a server with its API, and for
//! one kind a valid object created from YAML, its `kubectl get` Table, and an invalid object
//! whose 422 must name upstream's field paths.

use super::kubectl::{header, table, Kubectl};
use super::K3rs;

/// `k3rs server` with [`AS_BARE_API`](super::k3rs::AS_BARE_API)'s flags and kubectl pointed at
/// it, once the API answers. Without workload controllers the suites see the objects exactly as written
/// (an RC's `status.replicas` of 0, a StatefulSet with no pods).
pub fn start() -> (K3rs, Kubectl) {
    Kubectl::start_server(super::k3rs::AS_BARE_API)
}

/// One kind's round trip, as the suites describe it.
pub struct RoundTrip<'a> {
    /// What `kubectl get` takes (`statefulsets.apps`).
    pub resource: &'a str,
    pub name: &'a str,
    pub valid: &'a str,
    /// The header words of `kubectl get <resource> <name>`.
    pub header: &'a [&'a str],
    /// The first words of the object's row.
    pub cells: &'a [&'a str],
    pub invalid: &'a str,
    /// Field paths the 422 must name.
    pub fields: &'a [&'a str],
}

/// Creates the valid object, checks its Table, and checks the invalid one's 422.
pub fn round_trip(k: &Kubectl, c: &RoundTrip<'_>) {
    let created = k.ok_stdin(&["create", "-f", "-"], Some(c.valid));
    assert!(created.contains("created"), "{}: {created}", c.resource);
    let out = k.ok(&["get", c.resource, c.name]);
    assert_eq!(header(&out), c.header, "{}: {out}", c.resource);
    let row = &table(&out)[1];
    assert_eq!(row[..c.cells.len()], c.cells[..], "{}: {out}", c.resource);
    let err = k.fails_with(&["create", "-f", "-"], Some(c.invalid), "is invalid");
    for f in c.fields {
        assert!(
            err.contains(&format!("{f}: ")),
            "{}: expected field {f} in {err}",
            c.resource
        );
    }
}
