//! `k3rs agent --hollow N`: simulated nodes register and stay Ready through their Leases, run
//! the pods bound to them (Running and Ready), finish graceful deletion, and stop heartbeating
//! when the agent stops.

use std::time::Duration;

use crate::common;
use crate::common::hollow::HollowAgent;
use crate::common::kubectl::Kubectl;
use crate::common::wait_for;

fn jsonpath(k: &Kubectl, args: &[&str], path: &str) -> String {
    let mut all: Vec<&str> = args.to_vec();
    let arg = format!("jsonpath={path}");
    all.extend(["-o", &arg]);
    k.ok(&all)
}

#[test]
fn hollow_nodes_register_run_pods_and_stop_heartbeating() {
    let (_server, k) = Kubectl::start_server(&[]);
    let mut agent = HollowAgent::start(
        &k.kubeconfig,
        3,
        "hn-",
        &[
            "--node-lease-renew-interval",
            "1s",
            "--max-requests-in-flight",
            "8",
        ],
    );

    // Three nodes, Ready, with the kubelet's labels, an InternalIP and a capacity.
    let names = ["hn-0", "hn-1", "hn-2"];
    wait_for("3 Ready hollow nodes", Duration::from_secs(60), || {
        agent.proc.assert_running();
        let out = k.run(&["get", "nodes", "--no-headers"]);
        let rows = common::kubectl::table(&out.stdout);
        let ready = names
            .iter()
            .all(|n| rows.iter().any(|r| r[0] == *n && r[1] == "Ready"));
        ready.then_some(())
    });
    assert_eq!(
        jsonpath(
            &k,
            &["get", "node", "hn-1"],
            "{.metadata.labels.kubernetes\\.io/hostname}"
        ),
        "hn-1"
    );
    assert_eq!(
        jsonpath(
            &k,
            &["get", "node", "hn-1"],
            "{.status.addresses[0].address}"
        ),
        "198.18.0.2"
    );
    assert_eq!(
        jsonpath(&k, &["get", "node", "hn-1"], "{.status.allocatable.pods}"),
        "110"
    );

    // Each node holds its Lease in kube-node-lease, owned by the Node.
    for n in names {
        let lease = |path: &str| {
            k.run(&[
                "get",
                "lease",
                "-n",
                "kube-node-lease",
                n,
                "-o",
                &format!("jsonpath={path}"),
            ])
        };
        wait_for(&format!("lease of {n}"), Duration::from_secs(30), || {
            lease("{.spec.holderIdentity}").ok.then_some(())
        });
        assert_eq!(lease("{.spec.holderIdentity}").stdout, n);
        assert_eq!(lease("{.spec.leaseDurationSeconds}").stdout, "4");
        assert_eq!(lease("{.metadata.ownerReferences[0].kind}").stdout, "Node");
    }

    // A pod the scheduler binds to hn-1 (its nodeSelector) runs and is Ready.
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                "spec": {"nodeSelector": {"kubernetes.io/hostname": "hn-1"},
                         "containers": [{"name": "c", "image": "nginx"}]}}"#,
        ),
    );
    wait_for("pod web Running and Ready", Duration::from_secs(30), || {
        let out = jsonpath(
            &k,
            &["get", "pod", "web"],
            "{.status.phase} {.status.conditions[?(@.type==\"Ready\")].status}",
        );
        (out == "Running True").then_some(())
    });
    assert_eq!(
        jsonpath(&k, &["get", "pod", "web"], "{.status.hostIP}"),
        "198.18.0.2"
    );
    // The node IPAM controller gave hn-1 a /24 of --cluster-cidr; its first pod gets the
    // range's .2 (as the host-local IPAM of a bridge CNI would).
    let cidr = jsonpath(&k, &["get", "node", "hn-1"], "{.spec.podCIDR}");
    let prefix = cidr
        .strip_prefix("10.42.")
        .and_then(|r| r.strip_suffix(".0/24"))
        .unwrap_or_else(|| panic!("hn-1's podCIDR {cidr:?} is not a /24 of 10.42.0.0/16"));
    let pod_ip = jsonpath(&k, &["get", "pod", "web"], "{.status.podIP}");
    assert_eq!(
        pod_ip,
        format!("10.42.{prefix}.2"),
        "the first pod address of hn-1's range {cidr}"
    );
    assert_eq!(
        jsonpath(
            &k,
            &["get", "pod", "web"],
            "{.status.containerStatuses[0].ready} {.status.containerStatuses[0].started}"
        ),
        "true true"
    );
    let table = k.ok(&["get", "pod", "web", "--no-headers"]);
    assert_eq!(&common::kubectl::table(&table)[0][1..3], ["1/1", "Running"]);

    // A hollow node's addresses are made up: the API server never dials them (its logs,
    // its proxy and the metrics scrape answer at once instead of sending packets off the
    // machine to 198.18.0.0/15).
    let hollow = "\"hn-1\" is a hollow node (k3rs agent --hollow): it has no kubelet API";
    k.fails_with(&["logs", "web"], None, hollow);
    k.fails_with(
        &["get", "--raw", "/api/v1/nodes/hn-1/proxy/healthz"],
        None,
        hollow,
    );

    // Graceful deletion completes: the kubelet deletes the pod once its containers stopped.
    k.ok(&["delete", "pod", "web", "--timeout=30s"]);
    let gone = k.run(&["get", "pod", "web"]);
    assert!(gone.stderr.contains("NotFound"), "{gone:?}");

    // SIGTERM: the agent exits cleanly and the Leases are no longer renewed.
    let renew = || {
        jsonpath(
            &k,
            &["get", "lease", "-n", "kube-node-lease", "hn-0"],
            "{.spec.renewTime}",
        )
    };
    let before = renew();
    wait_for("a lease renewal", Duration::from_secs(10), || {
        (renew() != before).then_some(())
    });
    let status = agent.proc.terminate(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "the agent should exit 0 on SIGTERM: {status:?}"
    );
    let last = renew();
    std::thread::sleep(Duration::from_secs(3)); // three renewal intervals
    assert_eq!(renew(), last, "no renewal after the agent stopped");
    // The nodes stay registered (as when a kubelet stops).
    let nodes = k.ok(&["get", "nodes", "-o", "name"]);
    assert!(
        names.iter().all(|n| nodes.contains(&format!("node/{n}"))),
        "{nodes}"
    );
}
