//! kube-apiserver's etcd key layout: `<prefix>/<namespace>/<name>` for namespaced resources,
//! `<prefix>/<name>` for cluster-scoped ones (`/registry/pods/default/x`,
//! `/registry/namespaces/x`, `/registry/deployments/default/x`).

use k3rs_apimachinery::catalog::Resource;

/// The key of one object.
pub fn object_key(r: &Resource, namespace: Option<&str>, name: &str) -> Vec<u8> {
    match (r.namespaced, namespace) {
        (true, Some(ns)) => format!("{}/{ns}/{name}", r.storage_prefix).into_bytes(),
        _ => format!("{}/{name}", r.storage_prefix).into_bytes(),
    }
}

/// The prefix (with trailing slash) holding every object of a list: one namespace's, or all.
pub fn list_prefix(r: &Resource, namespace: Option<&str>) -> Vec<u8> {
    match (r.namespaced, namespace) {
        (true, Some(ns)) => format!("{}/{ns}/", r.storage_prefix).into_bytes(),
        _ => format!("{}/", r.storage_prefix).into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::catalog::lookup;

    #[test]
    fn layout_matches_kube_apiserver() {
        let pods = lookup("", "v1", "pods").unwrap();
        assert_eq!(
            object_key(pods, Some("default"), "x"),
            b"/registry/pods/default/x"
        );
        assert_eq!(
            list_prefix(pods, Some("default")),
            b"/registry/pods/default/"
        );
        assert_eq!(list_prefix(pods, None), b"/registry/pods/");
        let ns = lookup("", "v1", "namespaces").unwrap();
        assert_eq!(object_key(ns, None, "x"), b"/registry/namespaces/x");
        let deploy = lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(
            object_key(deploy, Some("default"), "x"),
            b"/registry/deployments/default/x"
        );
        let svc = lookup("", "v1", "services").unwrap();
        assert_eq!(
            object_key(svc, Some("default"), "kubernetes"),
            b"/registry/services/specs/default/kubernetes"
        );
    }
}
