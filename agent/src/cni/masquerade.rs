//! Pods' outbound traffic leaves with the node's address: a `K3RS-POD-MASQ` chain in `nat`,
//! jumped to from `POSTROUTING` for each IPv4 node pod CIDR, put in place by the agent before
//! the conflist is written, instead of the CNI bridge's `ipMasq` (as flannel does for k3s's
//! bridge).
//!
//! The bridge's `ipMasq` creates a chain and rules per pod at every sandbox creation and
//! removes them at every teardown: several `iptables` runs per pod, each waiting for the
//! node-wide xtables lock (which the service proxy and the NetworkPolicy enforcer hold while
//! they restore their rules). A burst of pods was serialized behind that lock. The chain here
//! masquerades the same packets: from the pod CIDR, not to the cluster's pods (the node's pod
//! CIDR when the cluster CIDR is not known), not multicast.
//!
//! IPv4 only (the agent's iptables are): a node with an IPv6 pod CIDR keeps the bridge's
//! per-pod masquerading ([`super::Config::render`]).

use ipnet::IpNet;

use crate::proxy::iptables::{Iptables, Result};

/// The chain holding the masquerading decision.
pub const CHAIN: &str = "K3RS-POD-MASQ";

/// The jump's comment.
pub const COMMENT: &str = "k3rs: pod traffic leaving the cluster takes the node address";

fn ipv4(c: &IpNet) -> bool {
    matches!(c, IpNet::V4(_))
}

/// The `iptables-restore --noflush` input that (re)writes [`CHAIN`]: back out for traffic to
/// `inside` and multicast, masquerade the rest.
pub fn chain_rules(inside: &IpNet) -> String {
    format!(
        "*nat\n:{CHAIN} - [0:0]\n-A {CHAIN} -d {} -j RETURN\n-A {CHAIN} -d 224.0.0.0/4 -j RETURN\n\
         -A {CHAIN} -j MASQUERADE\nCOMMIT\n",
        inside.trunc()
    )
}

/// The arguments of the `POSTROUTING` jump for `pod_cidr`.
pub fn jump_args(pod_cidr: &IpNet) -> Vec<String> {
    let source = pod_cidr.trunc().to_string();
    [
        "-s",
        &source,
        "-m",
        "comment",
        "--comment",
        COMMENT,
        "-j",
        CHAIN,
    ]
    .map(String::from)
    .to_vec()
}

/// Whether the bridge must masquerade per pod: some pod CIDR is IPv6.
pub fn bridge_masquerades(pod_cidrs: &[IpNet]) -> bool {
    pod_cidrs.iter().any(|c| !ipv4(c))
}

/// Writes [`CHAIN`] and the jump of every IPv4 pod CIDR (unless it is there); nothing without
/// an IPv4 pod CIDR.
pub async fn ensure<I: Iptables + ?Sized>(
    ipt: &I,
    pod_cidrs: &[IpNet],
    cluster_cidr: Option<&IpNet>,
) -> Result<()> {
    let v4: Vec<&IpNet> = pod_cidrs.iter().filter(|c| ipv4(c)).collect();
    let Some(first) = v4.first() else {
        return Ok(());
    };
    let inside = cluster_cidr.filter(|c| ipv4(c)).unwrap_or(first);
    ipt.restore(&chain_rules(inside)).await?;
    for cidr in v4 {
        ipt.ensure_rule("nat", "POSTROUTING", &jump_args(cidr))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::iptables::{Call, RecordingIptables};

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn jump(source: &str) -> Call {
        Call::EnsureRule(
            "nat".into(),
            "POSTROUTING".into(),
            [
                "-s",
                source,
                "-m",
                "comment",
                "--comment",
                COMMENT,
                "-j",
                CHAIN,
            ]
            .map(String::from)
            .to_vec(),
        )
    }

    #[tokio::test]
    async fn one_chain_sparing_the_cluster_and_a_jump_per_ipv4_pod_cidr() {
        let ipt = RecordingIptables::default();
        let cluster = net("10.42.0.0/16");
        ensure(
            &ipt,
            &[net("10.42.3.7/24"), net("fd00:42:0:3::/64")],
            Some(&cluster),
        )
        .await
        .unwrap();
        assert_eq!(
            ipt.take(),
            vec![
                Call::Restore(
                    "*nat\n:K3RS-POD-MASQ - [0:0]\n-A K3RS-POD-MASQ -d 10.42.0.0/16 -j RETURN\n\
                     -A K3RS-POD-MASQ -d 224.0.0.0/4 -j RETURN\n-A K3RS-POD-MASQ -j MASQUERADE\n\
                     COMMIT\n"
                        .into()
                ),
                jump("10.42.3.0/24"),
            ]
        );
    }

    #[tokio::test]
    async fn without_a_cluster_cidr_the_node_pod_cidr_is_spared() {
        let ipt = RecordingIptables::default();
        // An IPv6 cluster CIDR says nothing about IPv4 destinations.
        ensure(&ipt, &[net("10.244.7.0/24")], Some(&net("fd00::/48")))
            .await
            .unwrap();
        let calls = ipt.take();
        assert!(
            matches!(&calls[0], Call::Restore(r) if r.contains("-A K3RS-POD-MASQ -d 10.244.7.0/24 -j RETURN")),
            "{calls:?}"
        );
        assert_eq!(calls[1..], [jump("10.244.7.0/24")]);
        // IPv6 only: nothing (the bridge masquerades).
        ensure(&ipt, &[net("fd00:42::/64")], None).await.unwrap();
        assert_eq!(ipt.take(), vec![]);
    }

    #[test]
    fn only_ipv6_pod_cidrs_need_the_bridge() {
        assert!(!bridge_masquerades(&[net("10.42.3.0/24")]));
        assert!(bridge_masquerades(&[
            net("10.42.3.0/24"),
            net("fd00:42:0:3::/64")
        ]));
    }
}
