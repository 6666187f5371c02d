//! `--service-cidr` consistent everywhere, with `--node-external-ip` and `--resolv-conf`, on a
//! real node: `k3rs server` with its embedded agent and `--service-cidr 10.96.0.0/16` puts the
//! `kubernetes` Service at 10.96.0.1 and `kube-dns` at 10.96.0.10 (k3s's `--cluster-dns`
//! default, the tenth address), and its kubelet gives a `ClusterFirst` pod that nameserver
//! (not 10.43.0.10); a `dnsPolicy: Default` pod gets the servers and search list of the
//! `--resolv-conf` file; the Node reports the `--node-external-ip` as its ExternalIP. A joined
//! `k3rs agent` learns the server's cluster DNS address (`/v1-k3rs/agent-config`).
//!
//! As root, inside a network namespace the test makes, with the images of
//! `scripts/build-images.sh`.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::{NodeLab, FAST_STATUS};

const NODE: &str = "svcnet-1";

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: cluster-first}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: c
    image: docker.io/library/busybox:1.35
    command: [cat, /etc/resolv.conf]
---
apiVersion: v1
kind: Pod
metadata: {name: host-default}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  dnsPolicy: Default
  containers:
  - name: c
    image: docker.io/library/busybox:1.35
    command: [cat, /etc/resolv.conf]
"#;

#[test]
fn the_service_cidr_sets_the_cluster_dns_of_services_and_pods() {
    NodeLab::run("svcnet", scenario);
}

/// The resolv.conf pod `name` printed, once it has run.
fn printed_resolv_conf(server: &mut common::K3rs, k: &Kubectl, name: &str) -> String {
    common::wait_for(
        &format!("pod {name} to succeed"),
        Duration::from_secs(120),
        || {
            server.assert_running();
            let pod = json(k, &["get", "pod", name]);
            assert_ne!(pod["status"]["phase"], "Failed", "{pod}");
            (pod["status"]["phase"] == "Succeeded").then_some(())
        },
    );
    // The kubelet serves logs once its serving certificate is issued, which can come after
    // a short pod has already run (a joined agent's CSR waits for the signer).
    common::wait_for(
        &format!("the logs of pod {name}"),
        Duration::from_secs(60),
        || {
            let out = k.run(&["logs", name]);
            if !out.ok {
                assert!(
                    out.stderr.contains("unreachable"),
                    "kubectl logs {name}: {out:?}"
                );
            }
            out.ok.then_some(out.stdout)
        },
    )
}

fn scenario(lab: &NodeLab) {
    let resolv = tempfile::tempdir().unwrap();
    let resolv_conf = resolv.path().join("resolv.conf");
    std::fs::write(&resolv_conf, "search corp.example\nnameserver 192.0.2.53\n").unwrap();
    let resolv_conf = resolv_conf.display().to_string();
    let mut args = FAST_STATUS.to_vec();
    args.extend_from_slice(&[
        "--service-cidr",
        "10.96.0.0/16",
        "--node-external-ip",
        "203.0.113.5",
        "--resolv-conf",
        &resolv_conf,
    ]);
    let (mut server, k) = lab.start_server(NODE, "127.0.0.1", &args, &[]);

    let cluster_ip = |ns: &str, name: &str| {
        json(&k, &["get", "service", "-n", ns, name])["spec"]["clusterIP"].clone()
    };
    assert_eq!(cluster_ip("default", "kubernetes"), "10.96.0.1");
    assert_eq!(cluster_ip("kube-system", "kube-dns"), "10.96.0.10");

    let addresses = common::wait_for("the node registered", Duration::from_secs(120), || {
        server.assert_running();
        let node = k.run(&["get", "node", NODE, "-o", "json"]);
        let node: serde_json::Value = serde_json::from_str(&node.stdout).ok()?;
        node["status"]["addresses"].as_array().cloned()
    });
    assert!(
        addresses.contains(&serde_json::json!({"type": "ExternalIP", "address": "203.0.113.5"})),
        "{addresses:?}"
    );
    assert!(
        addresses.contains(&serde_json::json!({"type": "InternalIP", "address": "127.0.0.1"})),
        "{addresses:?}"
    );

    k.ok_stdin(&["apply", "-f", "-"], Some(PODS));
    let first = printed_resolv_conf(&mut server, &k, "cluster-first");
    assert!(first.contains("nameserver 10.96.0.10"), "{first}");
    assert!(!first.contains("10.43.0.10"), "{first}");
    assert!(
        first.contains("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{first}"
    );
    let host = printed_resolv_conf(&mut server, &k, "host-default");
    assert!(host.contains("nameserver 192.0.2.53"), "{host}");
    assert!(host.contains("search corp.example"), "{host}");
    assert!(!host.contains("10.96.0.10"), "{host}");
}

const AGENT_NODE: &str = "svcnet-agent";

/// A joined `k3rs agent` (no cluster-dns flag of its own) learns the server's cluster DNS
/// address: its `ClusterFirst` pod gets 10.96.0.10 from a server with
/// `--service-cidr 10.96.0.0/16`.
#[test]
fn a_joined_agent_takes_the_servers_cluster_dns() {
    NodeLab::run("svcnet-agent", |lab| {
        let (mut server, k) = Kubectl::start_server(&["--service-cidr", "10.96.0.0/16"]);
        let data = lab.agent_data_with_images();
        let mut agent = lab.start_agent(&server, AGENT_NODE, &data);
        let pod = PODS
            .split("---")
            .next()
            .unwrap()
            .replace("spec:\n", &format!("spec:\n  nodeName: {AGENT_NODE}\n"));
        k.ok_stdin(&["apply", "-f", "-"], Some(&pod));
        common::wait_for("the agent's pod to run", Duration::from_secs(180), || {
            agent.assert_running();
            let pod = json(&k, &["get", "pod", "cluster-first"]);
            (pod["status"]["phase"] == "Succeeded").then_some(())
        });
        let printed = printed_resolv_conf(&mut server, &k, "cluster-first");
        assert!(printed.contains("nameserver 10.96.0.10"), "{printed}");
    });
}
