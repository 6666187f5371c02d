//! End-to-end: the `servicelb` controller of a real `k3rs server` gives Services of type
//! LoadBalancer `status.loadBalancer.ingress` = the InternalIPs of the Ready nodes (two
//! hollow nodes of a real `k3rs agent --hollow 2`), as `kubectl get service` shows in
//! EXTERNAL-IP; a node labelled `node.kubernetes.io/exclude-from-external-load-balancers`
//! leaves every load balancer; a Service with another `loadBalancerClass` is left alone.

use std::time::Duration;

use crate::common::hollow::HollowAgent;
use crate::common::kubectl::{json, table, Kubectl};
use crate::common::wait_for;

fn ingress_ips(k: &Kubectl, name: &str) -> Vec<String> {
    let svc = json(k, &["get", "service", name]);
    svc["status"]["loadBalancer"]["ingress"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["ip"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn wait_ingress(k: &Kubectl, name: &str, want: &[&str]) {
    wait_for(
        &format!("{name}'s ingress to be {want:?}"),
        Duration::from_secs(30),
        || (ingress_ips(k, name) == want).then_some(()),
    );
}

#[test]
fn load_balancer_services_get_the_ready_nodes_addresses() {
    let (_server, k) = Kubectl::start_server(&[]);
    let mut agent = HollowAgent::start(&k.kubeconfig, 2, "lb-", &[]);
    wait_for("two Ready nodes", Duration::from_secs(60), || {
        agent.proc.assert_running();
        let rows = table(&k.run(&["get", "nodes", "--no-headers"]).stdout);
        (rows.iter().filter(|r| r[1] == "Ready").count() == 2).then_some(())
    });

    k.ok(&["create", "service", "loadbalancer", "web", "--tcp=80:8080"]);
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            &serde_json::json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "other", "namespace": "default"},
                "spec": {"type": "LoadBalancer", "loadBalancerClass": "example.com/lb",
                         "ports": [{"port": 80}]}
            })
            .to_string(),
        ),
    );
    wait_ingress(&k, "web", &["198.18.0.1", "198.18.0.2"]);
    let svc = json(&k, &["get", "service", "web"]);
    assert_eq!(
        svc["status"]["loadBalancer"]["ingress"][0]["ipMode"], "VIP",
        "{svc}"
    );
    let rows = table(&k.ok(&["get", "service", "web", "--no-headers"]));
    assert_eq!(rows[0][3], "198.18.0.1,198.18.0.2", "{rows:?}");

    k.ok(&[
        "label",
        "node",
        "lb-1",
        "node.kubernetes.io/exclude-from-external-load-balancers=",
    ]);
    wait_ingress(&k, "web", &["198.18.0.1"]);
    assert!(
        ingress_ips(&k, "other").is_empty(),
        "another class's Service got an ingress"
    );
    agent.proc.assert_running();
}

/// `--disable servicelb,coredns` (k3s's flag): LoadBalancer Services stay pending, no
/// `kube-dns` Service is created and no node is listed as a DNS endpoint; `traefik`, which
/// k3rs does not ship, only warns.
#[test]
fn disabled_packaged_components_do_not_run() {
    let (server, k) =
        Kubectl::start_server(&["--disable", "servicelb,traefik", "--disable=coredns"]);
    let mut agent = HollowAgent::start(&k.kubeconfig, 1, "off-", &[]);
    wait_for("a Ready node", Duration::from_secs(60), || {
        agent.proc.assert_running();
        let rows = table(&k.run(&["get", "nodes", "--no-headers"]).stdout);
        (rows.iter().filter(|r| r[1] == "Ready").count() == 1).then_some(())
    });
    k.ok(&["create", "service", "loadbalancer", "web", "--tcp=80:8080"]);
    // A Deployment getting its ReplicaSet shows the controller manager leads and runs
    // before the absence of servicelb's work is judged.
    k.ok(&["create", "deployment", "d", "--image=busybox"]);
    wait_for(
        "the Deployment's ReplicaSet",
        Duration::from_secs(30),
        || {
            (!k.ok(&["get", "replicasets", "-l", "app=d", "-o", "name"])
                .is_empty())
            .then_some(())
        },
    );
    std::thread::sleep(Duration::from_secs(5));
    assert!(ingress_ips(&k, "web").is_empty(), "servicelb ran");
    let rows = table(&k.ok(&["get", "service", "web", "--no-headers"]));
    assert_eq!(rows[0][3], "<pending>", "{rows:?}");
    let dns = k.run(&["get", "service", "kube-dns", "-n", "kube-system"]);
    assert!(!dns.ok && dns.stderr.contains("NotFound"), "{dns:?}");
    let slices = k.ok(&["get", "endpointslices", "-n", "kube-system", "-o", "name"]);
    assert!(!slices.contains("kube-dns"), "{slices}");
    assert!(
        server
            .log()
            .contains("--disable traefik: k3rs does not ship traefik; nothing to disable"),
        "no warning for traefik"
    );
    agent.proc.assert_running();
}
