//! The Node authorizer's graph: which pods are bound to which node and what they reference,
//! and which persistent volume is bound to which claim. In memory, fed by watches
//! ([`super::populator`]); questions are answered without I/O.
//!
//! # Guarantees
//! - An object is related to a node exactly when a pod bound to that node (`spec.nodeName`)
//!   references it in the object's namespace (secrets, configmaps, claims, the service
//!   account), or it is the persistent volume bound to such a claim, or the pod itself.
//! - Replacing a pod replaces all its edges; deleting it removes them.

use std::collections::{BTreeMap, BTreeSet};

use super::refs::PodRefs;

/// The kinds of objects a node may be related to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The pod itself (a kubelet reads and updates its own pods).
    Pod,
    /// A Secret a bound pod references.
    Secret,
    /// A ConfigMap a bound pod references.
    ConfigMap,
    /// A PersistentVolumeClaim a bound pod's volumes use.
    PersistentVolumeClaim,
    /// The PersistentVolume bound to such a claim.
    PersistentVolume,
    /// The ServiceAccount a bound pod runs as.
    ServiceAccount,
}

impl Kind {
    /// Upstream's vertex type names (used in messages).
    pub fn vertex_name(self) -> &'static str {
        match self {
            Kind::Pod => "pod",
            Kind::Secret => "secret",
            Kind::ConfigMap => "configmap",
            Kind::PersistentVolumeClaim => "pvc",
            Kind::PersistentVolume => "pv",
            Kind::ServiceAccount => "serviceAccount",
        }
    }
}

type Key = (String, String);

/// Pods per node, their references, and PV → claim bindings.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    pods: BTreeMap<Key, PodRefs>,
    by_node: BTreeMap<String, BTreeSet<Key>>,
    /// PV name → bound claim (namespace, name).
    pv_claims: BTreeMap<String, Key>,
}

impl Graph {
    /// Records pod `namespace/name` (`None`: not bound to a node, which removes it).
    pub fn set_pod(&mut self, namespace: &str, name: &str, refs: Option<PodRefs>) {
        self.delete_pod(namespace, name);
        let Some(refs) = refs else { return };
        let key = (namespace.to_string(), name.to_string());
        self.by_node
            .entry(refs.node.clone())
            .or_default()
            .insert(key.clone());
        self.pods.insert(key, refs);
    }

    /// Removes pod `namespace/name` and all its edges.
    pub fn delete_pod(&mut self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        if let Some(old) = self.pods.remove(&key) {
            if let Some(set) = self.by_node.get_mut(&old.node) {
                set.remove(&key);
                if set.is_empty() {
                    self.by_node.remove(&old.node);
                }
            }
        }
    }

    /// Records PV `name`'s claim (`None`: unbound).
    pub fn set_pv(&mut self, name: &str, claim: Option<(String, String)>) {
        match claim {
            Some(c) => {
                self.pv_claims.insert(name.to_string(), c);
            }
            None => {
                self.pv_claims.remove(name);
            }
        }
    }

    /// Forgets every pod (before a re-list).
    pub fn clear_pods(&mut self) {
        self.pods.clear();
        self.by_node.clear();
    }

    /// Forgets every PV (before a re-list).
    pub fn clear_pvs(&mut self) {
        self.pv_claims.clear();
    }

    /// Whether `kind` `namespace/name` is related to `node` (see the module guarantees).
    pub fn related(&self, node: &str, kind: Kind, namespace: &str, name: &str) -> bool {
        let Some(pods) = self.by_node.get(node) else {
            return false;
        };
        let mut on_node = pods.iter().filter_map(|k| self.pods.get(k).map(|r| (k, r)));
        match kind {
            Kind::Pod => pods.contains(&(namespace.to_string(), name.to_string())),
            Kind::PersistentVolume => self.pv_claims.get(name).is_some_and(|(cns, cname)| {
                on_node.any(|((ns, _), r)| ns == cns && r.pvcs.contains(cname))
            }),
            _ => on_node.any(|((ns, _), r)| {
                ns == namespace
                    && match kind {
                        Kind::Secret => r.secrets.contains(name),
                        Kind::ConfigMap => r.configmaps.contains(name),
                        Kind::PersistentVolumeClaim => r.pvcs.contains(name),
                        Kind::ServiceAccount => r.service_account == name,
                        Kind::Pod | Kind::PersistentVolume => false,
                    }
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(node: &str, secrets: &[&str], pvcs: &[&str]) -> Option<PodRefs> {
        Some(PodRefs {
            node: node.into(),
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
            configmaps: ["cm".to_string()].into(),
            pvcs: pvcs.iter().map(|s| s.to_string()).collect(),
            service_account: "sa".into(),
        })
    }

    #[test]
    fn relations_follow_pods_on_the_node() {
        let mut g = Graph::default();
        g.set_pod("a", "p1", refs("n1", &["s1"], &["data"]));
        g.set_pod("a", "p2", refs("n2", &["s2"], &[]));
        g.set_pv("pv1", Some(("a".into(), "data".into())));
        g.set_pv("pv2", Some(("b".into(), "data".into())));
        assert!(g.related("n1", Kind::Secret, "a", "s1"));
        assert!(!g.related("n1", Kind::Secret, "a", "s2"));
        assert!(g.related("n2", Kind::Secret, "a", "s2"));
        assert!(!g.related("n1", Kind::Secret, "b", "s1"), "other namespace");
        assert!(g.related("n1", Kind::ConfigMap, "a", "cm"));
        assert!(g.related("n1", Kind::ServiceAccount, "a", "sa"));
        assert!(g.related("n1", Kind::PersistentVolumeClaim, "a", "data"));
        assert!(!g.related("n2", Kind::PersistentVolumeClaim, "a", "data"));
        assert!(g.related("n1", Kind::PersistentVolume, "", "pv1"));
        assert!(!g.related("n1", Kind::PersistentVolume, "", "pv2"));
        assert!(g.related("n1", Kind::Pod, "a", "p1"));
        assert!(!g.related("n1", Kind::Pod, "a", "p2"));
        assert!(!g.related("n3", Kind::Secret, "a", "s1"), "unknown node");
    }

    #[test]
    fn replacing_and_deleting_pods_moves_edges() {
        let mut g = Graph::default();
        g.set_pod("a", "p1", refs("n1", &["s1"], &[]));
        g.set_pod("a", "p1", refs("n2", &["s3"], &[]));
        assert!(!g.related("n1", Kind::Secret, "a", "s1"));
        assert!(!g.related("n2", Kind::Secret, "a", "s1"));
        assert!(g.related("n2", Kind::Secret, "a", "s3"));
        g.set_pod("a", "p1", None);
        assert!(!g.related("n2", Kind::Secret, "a", "s3"));
        g.set_pod("a", "p1", refs("n1", &["s1"], &[]));
        g.delete_pod("a", "p1");
        assert!(!g.related("n1", Kind::Secret, "a", "s1"));
        g.set_pod("a", "p1", refs("n1", &["s1"], &[]));
        g.clear_pods();
        assert!(!g.related("n1", Kind::Secret, "a", "s1"));
    }
}
