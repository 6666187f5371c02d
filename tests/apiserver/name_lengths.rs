//! End to end over HTTPS: names of 52 to 254 characters (and one with a 100-character label
//! between dots) created as every built-in resource that can be created, accepted or refused
//! as kube-apiserver's per-resource name rules decide (`pkg/apis/*/validation`): a subdomain
//! (up to 253, any label length) for most, a DNS-1123 label for namespaces, a DNS-1035 label
//! for services, a path segment for core/v1 events, RBAC and CSRs, and the extra limits of
//! CSIDrivers (63), CronJobs (52) and Jobs (63, through their pods' `job-name` label).

use serde_json::Value;

use crate::common::client::runtime;
use crate::common::kube::{KubeClient, Kubeconfig};
use crate::common::kubectl::Kubectl;
use crate::kubectl_resources_b::csr_request;
use crate::served_objects::{collection, create_namespace, deletable, minimal};
use k3rs_apimachinery::catalog::Resource;

const NS: &str = "names";

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$` for the names below
/// (lower-case letters and dots only): no empty part between dots.
fn subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(|part| !part.is_empty())
}

/// Whether kube-apiserver creates `r` named `name` (the names here are lower-case letters
/// with at most a dot, so only lengths and dots decide).
fn upstream_accepts(r: &Resource, name: &str) -> bool {
    let len = name.len();
    match (r.group, r.kind) {
        // ValidateNamespaceName: a DNS-1123 label; ValidateServiceName: a DNS-1035 label.
        ("", "Namespace") | ("", "Service") => len <= 63 && !name.contains('.'),
        // Path segment names only: no length limit.
        ("", "Event")
        | ("certificates.k8s.io", "CertificateSigningRequest")
        | (
            "rbac.authorization.k8s.io",
            "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding",
        ) => true,
        // ValidateCSIDriverName: at most 63; validateCronJob: at most 52 (11 left for the
        // Job's `-<minutes>`); a Job's name is its pods' `job-name` label value (at most 63).
        ("storage.k8s.io", "CSIDriver") | ("batch", "Job") => len <= 63 && subdomain(name),
        ("batch", "CronJob") => len <= 52 && subdomain(name),
        _ => subdomain(name),
    }
}

/// The names tried: lengths around every limit, and a subdomain whose first label is longer
/// than a label may be on its own.
fn names() -> Vec<String> {
    let mut names: Vec<String> = [52, 53, 63, 64, 100, 253, 254]
        .into_iter()
        .map(|n| "n".repeat(n))
        .collect();
    names.push(format!("{}.example", "l".repeat(100)));
    names
}

#[test]
fn names_up_to_253_characters_as_upstream_accepts_them() {
    let (mut server, _k) = Kubectl::start_server(crate::common::k3rs::AS_BARE_API);
    let csr = csr_request("names");
    runtime().block_on(async {
        let c = KubeClient::connect(&Kubeconfig::read(&server.kubeconfig()).unwrap())
            .await
            .unwrap();
        create_namespace(&c, NS).await;
        let mut mismatches = Vec::new();
        let mut checked = 0;
        // CRD names are `<plural>.<group>` and APIService names `<version>.<group>`, rules
        // of their own (tested with CRDs and APIServices).
        for r in deletable()
            .into_iter()
            .filter(|r| !matches!(r.kind, "CustomResourceDefinition" | "APIService"))
        {
            for name in names() {
                let obj = minimal(r, &name, NS, &csr)
                    .unwrap_or_else(|| panic!("no object for {} in served_objects", r.plural));
                let path = collection(r, NS);
                let (code, answer) = c.request("POST", &path, Some(&obj)).await.unwrap();
                let want = upstream_accepts(r, &name);
                checked += 1;
                match (want, code) {
                    (true, 201) => {
                        assert_eq!(answer["metadata"]["name"], Value::from(name.as_str()));
                        // Deleted at once: core and events.k8s.io Events share a store.
                        c.ok("DELETE", &format!("{path}/{name}"), None)
                            .await
                            .unwrap();
                    }
                    (false, 422) => assert_eq!(answer["reason"], "Invalid", "{answer}"),
                    _ => mismatches.push(format!(
                        "{} named {} characters: upstream {}, k3rs {code} {}",
                        r.plural,
                        name.len(),
                        if want { "accepts" } else { "refuses" },
                        answer["message"]
                    )),
                }
            }
        }
        assert!(checked >= 300, "{checked}");
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    });
    server.assert_running();
}
