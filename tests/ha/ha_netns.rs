//! End-to-end: three real `k3rs server` processes, each in its own network namespace made by
//! the test (joined by a bridge in a hub namespace the test also made; nothing is routed out
//! of the machine), form one cluster: the second and third join the first by token
//! (`--server https://10.213.0.11:6443 --token …`, `--node-ip` their namespace address). `etcdctl member list`, run from the hub namespace
//! against every member, shows three started voters with their namespace addresses; a write
//! on one member is read linearizably on the others; a member cut off the bridge cannot
//! serve a linearizable read, and serves again once reconnected.

use std::time::Duration;

use crate::common::etcdctl::{etcdctl_with_timeout, members, started_voters};
use crate::common::netns::Lab;
use crate::common::ns_cluster::NsCluster;
use crate::common::{etcdctl, wait_for};

#[test]
fn three_servers_in_their_own_namespaces_form_one_cluster() {
    let lab = Lab::new(3);
    lab.in_hub(|| {
        let mut cluster = NsCluster::start(&lab, 3);
        let eps = cluster.endpoints();
        for ep in &eps {
            wait_for("three started voters", Duration::from_secs(30), || {
                started_voters(ep, 3)
            });
            let mut urls: Vec<String> = members(ep).unwrap().into_iter().map(|m| m.1).collect();
            urls.sort();
            let want: Vec<String> = (1..=3)
                .map(|i| format!("https://{}:2380", lab.addr(i)))
                .collect();
            assert_eq!(urls, want, "peer URLs are the namespace addresses");
        }

        etcdctl(&eps[2], &["put", "k", "from-s3"], None).expect_ok("put on s3");
        for ep in &eps {
            let out = etcdctl(ep, &["get", "k", "--print-value-only"], None).expect_ok("get");
            assert_eq!(out.stdout.trim(), "from-s3");
        }

        // Cut s1 off: it cannot confirm leadership with a majority, so a linearizable read
        // through it fails (ambiguous for etcdctl: it times out); the other two still serve.
        lab.isolate(1);
        assert!(!lab.is_connected(1));
        let out = etcdctl_with_timeout(&eps[0], &["get", "k"], None, Duration::from_secs(10));
        assert!(!out.success(), "s1 is unreachable: {out:?}");
        // If s1 led, a put forwarded to it just before the cut is ambiguous and times out (as
        // etcd's "request timed out" while the leader changes); a client retries, and the
        // retry goes to the leader s2 and s3 elect.
        wait_for("a put on s2 to succeed", Duration::from_secs(30), || {
            etcdctl_with_timeout(
                &eps[1],
                &["put", "k", "during-partition"],
                None,
                Duration::from_secs(8),
            )
            .success()
            .then_some(())
        });
        lab.heal(1);
        wait_for(
            "s1 to serve the newer value",
            Duration::from_secs(30),
            || {
                let out = etcdctl_with_timeout(
                    &eps[0],
                    &["get", "k", "--print-value-only"],
                    None,
                    Duration::from_secs(5),
                );
                (out.success() && out.stdout.trim() == "during-partition").then_some(())
            },
        );
        for s in &mut cluster.servers {
            s.assert_running();
        }
    });
}
