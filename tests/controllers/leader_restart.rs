//! A server restarted on its data dir after `kill -9` holds its leader-election Leases again
//! at once: its holder identity is kept in the data dir, so the new process renews the
//! Leases its predecessor held (same holder, same `acquireTime`, no transition) instead of
//! waiting out their 15 s, and its controllers work right away.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;

/// `holderIdentity acquireTime leaseTransitions` of Lease `kube-system/<name>`, once held.
fn holder(k: &Kubectl, name: &str) -> String {
    common::wait_for(
        &format!("Lease {name} held"),
        Duration::from_secs(60),
        || {
            let r = k.run(&[
                "get",
                "lease",
                "-n",
                "kube-system",
                name,
                "-o",
                "jsonpath={.spec.holderIdentity} {.spec.acquireTime} {.spec.leaseTransitions}",
            ]);
            (r.ok && !r.stdout.starts_with(' ')).then_some(r.stdout)
        },
    )
}

#[test]
fn a_killed_server_resumes_its_leases_as_the_same_holder() {
    let (mut server, k) = Kubectl::start_server(&[]);
    let before = ["kube-controller-manager", "kube-scheduler"].map(|l| holder(&k, l));
    let host = before[0].split('_').next().unwrap_or_default();
    assert!(!host.is_empty(), "{before:?}");
    assert_eq!(
        before[0].split(' ').next(),
        before[1].split(' ').next(),
        "one holder identity per server"
    );

    server.restart();
    // The new process has renewed (not taken over) both Leases.
    let renewed = |lease: &str| {
        k.ok(&[
            "get",
            "lease",
            "-n",
            "kube-system",
            lease,
            "-o",
            "jsonpath={.spec.renewTime}",
        ])
    };
    let renew_before = renewed("kube-controller-manager");
    common::wait_for(
        "the restarted server renewing its Lease",
        Duration::from_secs(30),
        || (renewed("kube-controller-manager") != renew_before).then_some(()),
    );
    let after = ["kube-controller-manager", "kube-scheduler"].map(|l| holder(&k, l));
    assert_eq!(after, before, "same holder, acquireTime and transitions");
    let log = server.log();
    let leading = log
        .lines()
        .filter(|l| l.contains("acquired lease; leading") && l.contains("kube-controller-manager"))
        .count();
    assert!(leading >= 2, "both processes led:\n{log}");

    // And the controllers work: a Deployment gets its ReplicaSet.
    k.ok(&[
        "create",
        "deployment",
        "after-restart",
        "--image=busybox:1.35",
    ]);
    common::wait_for(
        "the Deployment's ReplicaSet",
        Duration::from_secs(60),
        || {
            let r = k.run(&["get", "rs", "-l", "app=after-restart", "-o", "name"]);
            (r.ok && !r.stdout.trim().is_empty()).then_some(())
        },
    );
}
