//! Pod-to-pod traffic between nodes keeps its source address (Kubernetes' network model, and
//! what NetworkPolicy peers are matched on): the CNI bridge masquerades everything its pods
//! send off the node, so one rule at the top of `nat POSTROUTING` returns early for packets
//! from the cluster CIDR to the cluster CIDR, as flannel's own rules do. Packets the service
//! proxy marked for masquerading (hairpin) are left to it.

use ipnet::IpNet;

use crate::proxy::iptables::{Iptables, Result};
use crate::proxy::rules::MASQ_MARK;

/// The arguments of the exemption for `cluster_cidr`.
pub fn rule_args(cluster_cidr: &IpNet) -> Vec<String> {
    let cidr = cluster_cidr.trunc().to_string();
    let mark = format!("{MASQ_MARK}/{MASQ_MARK}");
    [
        "-s",
        &cidr,
        "-d",
        &cidr,
        "-m",
        "mark",
        "!",
        "--mark",
        &mark,
        "-m",
        "comment",
        "--comment",
        "k3rs: pod-to-pod traffic keeps its source address",
        "-j",
        "RETURN",
    ]
    .map(String::from)
    .to_vec()
}

/// Inserts the exemption at the top of `nat POSTROUTING` unless it is there.
pub async fn ensure<I: Iptables + ?Sized>(ipt: &I, cluster_cidr: &IpNet) -> Result<()> {
    ipt.ensure_rule("nat", "POSTROUTING", &rule_args(cluster_cidr))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::iptables::{Call, RecordingIptables};

    #[tokio::test]
    async fn the_exemption_is_one_rule_on_the_whole_cluster_cidr() {
        let ipt = RecordingIptables::default();
        ensure(&ipt, &"10.42.3.0/16".parse().unwrap())
            .await
            .unwrap();
        let want: Vec<String> = "-s 10.42.0.0/16 -d 10.42.0.0/16 -m mark ! --mark 0x4000/0x4000"
            .split(' ')
            .map(String::from)
            .chain(
                [
                    "-m",
                    "comment",
                    "--comment",
                    "k3rs: pod-to-pod traffic keeps its source address",
                    "-j",
                    "RETURN",
                ]
                .map(String::from),
            )
            .collect();
        assert_eq!(
            ipt.take(),
            vec![Call::EnsureRule("nat".into(), "POSTROUTING".into(), want)]
        );
    }
}
