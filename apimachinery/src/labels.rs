//! The node labels a kubelet sets on its own Node (upstream's `kubeletapis.IsKubeletLabel`):
//! the kubelet refuses other `kubernetes.io`/`k8s.io` labels in `--node-labels`, and the
//! NodeRestriction admission plugin refuses them from a node.

/// Labels a kubelet may set itself.
pub const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];
/// The label an agent that answers cluster DNS sets on its Node, valued with the port it
/// answers on; the server's `kube-dns` endpoints are the Ready nodes that carry it.
pub const CLUSTER_DNS_PORT_LABEL: &str = "k3rs.io/cluster-dns-port";
/// The annotation `k3rs agent --hollow` puts on the Nodes it simulates: they have no kubelet
/// API (their addresses are made up), so the API server never dials them.
pub const HOLLOW_NODE_ANNOTATION: &str = "k3rs.io/hollow-node";

/// Label domains (and their subdomains) a kubelet may set labels in.
pub const KUBELET_LABEL_DOMAINS: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// The prefix (domain) of a label key, `""` without one.
pub fn label_domain(label: &str) -> &str {
    label.split_once('/').map_or("", |(ns, _)| ns)
}

/// Whether `ns` is `domain` or one of its subdomains.
pub fn in_domain(ns: &str, domain: &str) -> bool {
    ns == domain || ns.ends_with(&format!(".{domain}"))
}

/// Whether `label` is in the `kubernetes.io` or `k8s.io` domains but not one a kubelet may set.
pub fn restricted_for_kubelet(label: &str) -> bool {
    let ns = label_domain(label);
    let kubernetes = in_domain(ns, "kubernetes.io") || in_domain(ns, "k8s.io");
    let kubelet =
        KUBELET_LABELS.contains(&label) || KUBELET_LABEL_DOMAINS.iter().any(|d| in_domain(ns, d));
    kubernetes && !kubelet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_labels() {
        assert!(!restricted_for_kubelet("kubernetes.io/hostname"));
        assert!(!restricted_for_kubelet("node.kubernetes.io/pool"));
        assert!(!restricted_for_kubelet("a.kubelet.kubernetes.io/x"));
        assert!(!restricted_for_kubelet("example.com/x"));
        assert!(!restricted_for_kubelet("plain"));
        assert!(restricted_for_kubelet("node-role.kubernetes.io/master"));
        assert!(restricted_for_kubelet("x.k8s.io/y"));
    }
}
