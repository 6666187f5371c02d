//! The Node authorizer's decision (upstream's `NodeAuthorizer.Authorize` with
//! `AuthorizeNodeWithSelectors` off), pure over the request attributes and the graph.
//!
//! # Guarantees
//! - Users that are not `system:node:<name>` in `system:nodes` get no opinion.
//! - Secrets, configmaps, claims, volumes and service-account tokens are allowed only when
//!   related to the node in the graph, and only by name (a list or watch only with a
//!   `metadata.name` field selector): a node never lists Secrets. The TLS Secrets of the
//!   built-in ingress controller's Ingresses are related to every node; leases only in `kube-node-lease` under the node's name
//!   (create is left to NodeRestriction); everything else only as the static node rules
//!   (upstream's `NodeRules()`) allow. The reason strings are upstream's.

use super::graph::{Graph, Kind};
use crate::authz::Decision;
use crate::Attributes;

/// One static node rule: these verbs on these `resource[/subresource]`s of `group`.
struct Rule {
    verbs: &'static [&'static str],
    group: &'static str,
    resources: &'static [&'static str],
}

const READ: &[&str] = &["get", "list", "watch"];

/// Upstream's `NodeRules()` (without the DRA and ClusterTrustBundle rules).
const NODE_RULES: &[Rule] = &[
    Rule {
        verbs: &["create"],
        group: "authentication.k8s.io",
        resources: &["tokenreviews"],
    },
    Rule {
        verbs: &["create"],
        group: "authorization.k8s.io",
        resources: &["subjectaccessreviews", "localsubjectaccessreviews"],
    },
    Rule {
        verbs: READ,
        group: "",
        resources: &["services"],
    },
    Rule {
        verbs: &["create", "get", "list", "watch"],
        group: "",
        resources: &["nodes"],
    },
    Rule {
        verbs: &["update", "patch"],
        group: "",
        resources: &["nodes/status", "nodes"],
    },
    Rule {
        verbs: &["create", "update", "patch"],
        group: "",
        resources: &["events"],
    },
    Rule {
        verbs: READ,
        group: "",
        resources: &["pods"],
    },
    Rule {
        verbs: &["create", "delete"],
        group: "",
        resources: &["pods"],
    },
    Rule {
        verbs: &["update", "patch"],
        group: "",
        resources: &["pods/status"],
    },
    Rule {
        verbs: &["create"],
        group: "",
        resources: &["pods/eviction"],
    },
    Rule {
        verbs: READ,
        group: "",
        resources: &["secrets", "configmaps"],
    },
    Rule {
        verbs: &["get"],
        group: "",
        resources: &["persistentvolumeclaims", "persistentvolumes"],
    },
    Rule {
        verbs: &["get"],
        group: "",
        resources: &["endpoints"],
    },
    Rule {
        verbs: &["create", "get", "list", "watch"],
        group: "certificates.k8s.io",
        resources: &["certificatesigningrequests"],
    },
    Rule {
        verbs: &["get", "create", "update", "patch", "delete"],
        group: "coordination.k8s.io",
        resources: &["leases"],
    },
    Rule {
        verbs: &["get"],
        group: "storage.k8s.io",
        resources: &["volumeattachments"],
    },
    Rule {
        verbs: &["create"],
        group: "",
        resources: &["serviceaccounts/token"],
    },
    Rule {
        verbs: &["get", "update", "patch"],
        group: "",
        resources: &["persistentvolumeclaims/status"],
    },
    Rule {
        verbs: READ,
        group: "storage.k8s.io",
        resources: &["csidrivers"],
    },
    Rule {
        verbs: &["get", "create", "update", "patch", "delete"],
        group: "storage.k8s.io",
        resources: &["csinodes"],
    },
    Rule {
        verbs: READ,
        group: "node.k8s.io",
        resources: &["runtimeclasses"],
    },
];

fn rules_allow(a: &Attributes) -> bool {
    let res = a.resource_with_subresource();
    a.resource_request
        && NODE_RULES.iter().any(|r| {
            r.group == a.api_group
                && r.verbs.contains(&a.verb.as_str())
                && r.resources.contains(&res.as_str())
        })
}

fn no(reason: impl Into<String>) -> Decision {
    Decision::NoOpinion(reason.into())
}

fn related(node: &str, kind: Kind, a: &Attributes, graph: &Graph) -> Decision {
    if a.name.is_empty() {
        return no("No Object name found");
    }
    if graph.related(node, kind, &a.namespace, &a.name) {
        Decision::Allow
    } else {
        no(format!(
            "no relationship found between node '{node}' and this object"
        ))
    }
}

fn read_namespaced(node: &str, kind: Kind, a: &Attributes, graph: &Graph) -> Decision {
    if !READ.contains(&a.verb.as_str()) {
        return no("can only read resources of this type");
    }
    if !a.subresource.is_empty() {
        return no("cannot read subresource");
    }
    if a.namespace.is_empty() {
        return no("can only read namespaced object of this type");
    }
    related(node, kind, a, graph)
}

fn get_only(node: &str, kind: Kind, a: &Attributes, graph: &Graph) -> Decision {
    if a.verb != "get" {
        return no("can only get individual resources of this type");
    }
    if !a.subresource.is_empty() {
        return no("cannot get subresource");
    }
    related(node, kind, a, graph)
}

fn lease(node: &str, a: &Attributes) -> Decision {
    if !["get", "create", "update", "patch", "delete"].contains(&a.verb.as_str()) {
        return no("can only get, create, update, patch, or delete a node lease");
    }
    if a.namespace != "kube-node-lease" {
        return no("can only access leases in the \"kube-node-lease\" system namespace");
    }
    if a.verb != "create" && a.name != node {
        return no("can only access node lease with the same name as the requesting node");
    }
    Decision::Allow
}

fn csinode(node: &str, a: &Attributes) -> Decision {
    if !["get", "create", "update", "patch", "delete"].contains(&a.verb.as_str()) {
        return no("can only get, create, update, patch, or delete a CSINode");
    }
    if !a.subresource.is_empty() {
        return no("cannot authorize CSINode subresources");
    }
    if a.verb != "create" && a.name != node {
        return no("can only access CSINode with the same name as the requesting node");
    }
    Decision::Allow
}

/// The Node authorizer's decision on `a`.
pub fn decide(a: &Attributes, graph: &Graph) -> Decision {
    let user = &a.user;
    if !user.in_group(crate::user::NODES_GROUP)
        || !user.username.starts_with(crate::user::NODE_USER_PREFIX)
    {
        return no("");
    }
    let Some(node) = user.node_name() else {
        return no(format!("unknown node for user {:?}", user.username));
    };
    if a.resource_request {
        match (a.api_group.as_str(), a.resource.as_str()) {
            ("", "secrets") => return read_namespaced(node, Kind::Secret, a, graph),
            ("", "configmaps") => return read_namespaced(node, Kind::ConfigMap, a, graph),
            ("", "persistentvolumeclaims") => {
                if a.subresource == "status" {
                    if !["update", "patch"].contains(&a.verb.as_str()) {
                        return no("can only get/update/patch this type");
                    }
                    return related(node, Kind::PersistentVolumeClaim, a, graph);
                }
                return get_only(node, Kind::PersistentVolumeClaim, a, graph);
            }
            ("", "persistentvolumes") => return get_only(node, Kind::PersistentVolume, a, graph),
            ("", "serviceaccounts") => {
                if a.verb != "create" || a.name.is_empty() {
                    return no("can only create tokens for individual service accounts");
                }
                if a.subresource != "token" {
                    return no("can only create token subresource of serviceaccount");
                }
                return related(node, Kind::ServiceAccount, a, graph);
            }
            ("coordination.k8s.io", "leases") => return lease(node, a),
            ("storage.k8s.io", "csinodes") => return csinode(node, a),
            _ => {}
        }
    }
    if rules_allow(a) {
        Decision::Allow
    } else {
        no("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::refs::PodRefs;
    use crate::UserInfo;
    use std::sync::Arc;

    fn node_user(name: &str) -> Arc<UserInfo> {
        Arc::new(UserInfo::authenticated(
            format!("system:node:{name}"),
            vec!["system:nodes".into()],
        ))
    }

    fn ask(user: Arc<UserInfo>, method: &str, path: &str, g: &Graph) -> Decision {
        decide(&Attributes::of_request(user, method, path, None), g)
    }

    fn graph() -> Graph {
        let mut g = Graph::default();
        let refs = PodRefs {
            node: "n1".into(),
            secrets: ["s1".to_string()].into(),
            configmaps: ["c1".to_string()].into(),
            pvcs: ["data".to_string()].into(),
            service_account: "default".into(),
        };
        g.set_pod("ns", "p1", Some(refs));
        g.set_pod(
            "ns",
            "p2",
            Some(PodRefs {
                node: "n2".into(),
                secrets: ["s2".to_string()].into(),
                ..PodRefs::default()
            }),
        );
        g.set_pv("pv1", Some(("ns".into(), "data".into())));
        g
    }

    #[test]
    fn non_nodes_get_no_opinion() {
        let g = graph();
        let alice = Arc::new(UserInfo::authenticated("alice", vec![]));
        assert_eq!(
            ask(alice, "GET", "/api/v1/namespaces/ns/secrets/s1", &g),
            Decision::NoOpinion(String::new())
        );
        let not_in_group = Arc::new(UserInfo::authenticated("system:node:n1", vec![]));
        assert_eq!(
            ask(not_in_group, "GET", "/api/v1/namespaces/ns/secrets/s1", &g),
            Decision::NoOpinion(String::new())
        );
        let nameless = Arc::new(UserInfo::authenticated(
            "system:node:",
            vec!["system:nodes".into()],
        ));
        assert_eq!(
            ask(nameless, "GET", "/api/v1/nodes", &g),
            Decision::NoOpinion("unknown node for user \"system:node:\"".into())
        );
    }

    #[test]
    fn secrets_and_configmaps_only_through_the_graph() {
        let g = graph();
        let n1 = node_user("n1");
        let get = |p: &str| ask(n1.clone(), "GET", p, &g);
        assert_eq!(get("/api/v1/namespaces/ns/secrets/s1"), Decision::Allow);
        assert_eq!(get("/api/v1/namespaces/ns/configmaps/c1"), Decision::Allow);
        assert_eq!(
            get("/api/v1/namespaces/ns/secrets/s2"),
            Decision::NoOpinion("no relationship found between node 'n1' and this object".into())
        );
        assert_eq!(
            get("/api/v1/namespaces/ns/secrets"),
            Decision::NoOpinion("No Object name found".into())
        );
        assert_eq!(
            get("/api/v1/secrets"),
            Decision::NoOpinion("can only read namespaced object of this type".into())
        );
        assert_eq!(
            ask(n1.clone(), "DELETE", "/api/v1/namespaces/ns/secrets/s1", &g),
            Decision::NoOpinion("can only read resources of this type".into())
        );
        let watch_one = decide(
            &Attributes::of_request(
                n1.clone(),
                "GET",
                "/api/v1/namespaces/ns/secrets",
                Some("watch=true&fieldSelector=metadata.name%3Ds1"),
            ),
            &g,
        );
        assert_eq!(watch_one, Decision::Allow);
    }

    #[test]
    fn volumes_and_tokens() {
        let g = graph();
        let n1 = node_user("n1");
        let n2 = node_user("n2");
        let pvc = "/api/v1/namespaces/ns/persistentvolumeclaims/data";
        assert_eq!(ask(n1.clone(), "GET", pvc, &g), Decision::Allow);
        assert!(matches!(
            ask(n2.clone(), "GET", pvc, &g),
            Decision::NoOpinion(_)
        ));
        assert_eq!(
            ask(n1.clone(), "GET", "/api/v1/persistentvolumes/pv1", &g),
            Decision::Allow
        );
        assert_eq!(
            ask(
                n1.clone(),
                "GET",
                "/api/v1/namespaces/ns/persistentvolumeclaims",
                &g
            ),
            Decision::NoOpinion("can only get individual resources of this type".into())
        );
        assert_eq!(
            ask(n1.clone(), "PATCH", &format!("{pvc}/status"), &g),
            Decision::Allow
        );
        let token = "/api/v1/namespaces/ns/serviceaccounts/default/token";
        assert_eq!(ask(n1.clone(), "POST", token, &g), Decision::Allow);
        assert!(matches!(ask(n2, "POST", token, &g), Decision::NoOpinion(_)));
        assert_eq!(
            ask(
                n1,
                "GET",
                "/api/v1/namespaces/ns/serviceaccounts/default",
                &g
            ),
            Decision::NoOpinion("can only create tokens for individual service accounts".into())
        );
    }

    #[test]
    fn leases_and_static_rules() {
        let g = graph();
        let n1 = node_user("n1");
        let a = |m: &str, p: &str| ask(n1.clone(), m, p, &g);
        let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
        assert_eq!(a("PUT", &format!("{leases}/n1")), Decision::Allow);
        assert_eq!(a("POST", leases), Decision::Allow);
        assert_eq!(
            a("PUT", &format!("{leases}/n2")),
            Decision::NoOpinion(
                "can only access node lease with the same name as the requesting node".into()
            )
        );
        assert_eq!(
            a(
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/default/leases/n1"
            ),
            Decision::NoOpinion(
                "can only access leases in the \"kube-node-lease\" system namespace".into()
            )
        );
        assert_eq!(a("GET", "/api/v1/nodes"), Decision::Allow);
        assert_eq!(a("PATCH", "/api/v1/nodes/n2/status"), Decision::Allow);
        assert_eq!(a("GET", "/api/v1/pods"), Decision::Allow);
        assert_eq!(
            a("PATCH", "/api/v1/namespaces/ns/pods/p1/status"),
            Decision::Allow
        );
        assert_eq!(a("POST", "/api/v1/namespaces/ns/events"), Decision::Allow);
        assert_eq!(a("GET", "/api/v1/namespaces/ns/services"), Decision::Allow);
        assert_eq!(
            a(
                "POST",
                "/apis/certificates.k8s.io/v1/certificatesigningrequests"
            ),
            Decision::Allow
        );
        assert_eq!(
            a("DELETE", "/api/v1/nodes/n1"),
            Decision::NoOpinion(String::new())
        );
        assert_eq!(
            a("GET", "/apis/apps/v1/deployments"),
            Decision::NoOpinion(String::new())
        );
        assert_eq!(
            a("PUT", "/api/v1/namespaces/ns/pods/p1"),
            Decision::NoOpinion(String::new())
        );
        assert_eq!(
            a("GET", "/healthz/etcd"),
            Decision::NoOpinion(String::new())
        );
    }

    #[test]
    fn ingress_tls_secrets_by_name_only() {
        let mut g = graph();
        g.set_ingress_class(
            "k3rs",
            Some(k3rs_apimachinery::ingress_class::ingress_class()),
        );
        g.set_ingress(
            "web",
            "site",
            Some(crate::node::refs::IngressRefs {
                class: None,
                secrets: ["site-tls".to_string()].into(),
            }),
        );
        let n3 = node_user("n3");
        let get =
            |p: &str, q: Option<&str>| decide(&Attributes::of_request(n3.clone(), "GET", p, q), &g);
        let secrets = "/api/v1/namespaces/web/secrets";
        assert_eq!(get(&format!("{secrets}/site-tls"), None), Decision::Allow);
        let by_name = "watch=true&fieldSelector=metadata.name%3Dsite-tls";
        assert_eq!(get(secrets, Some(by_name)), Decision::Allow);
        assert_eq!(
            get(secrets, None),
            Decision::NoOpinion("No Object name found".into())
        );
        assert_eq!(
            get(&format!("{secrets}/other"), None),
            Decision::NoOpinion("no relationship found between node 'n3' and this object".into())
        );
        assert!(matches!(
            get("/api/v1/namespaces/ns/secrets/site-tls", None),
            Decision::NoOpinion(_)
        ));
        assert!(matches!(
            ask(n3.clone(), "PUT", &format!("{secrets}/site-tls"), &g),
            Decision::NoOpinion(_)
        ));
    }
}
