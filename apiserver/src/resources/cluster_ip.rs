//! ClusterIP allocation from `--service-cidr`: pure choice of the lowest free address.
//! The network address, the first address (the `kubernetes` service's) and, for IPv4, the
//! broadcast address are never handed out by allocation, nor the tenth address (the
//! `kube-dns` service's, k3s's `--cluster-dns` 10.43.0.10), which the server takes itself.

use std::collections::HashSet;
use std::net::IpAddr;

use ipnet::IpNet;

/// The `kubernetes` service's address: the first host of the CIDR (10.43.0.1 for 10.43.0.0/16).
pub fn first_ip(cidr: &IpNet) -> Option<IpAddr> {
    cidr.hosts().next()
}

/// The cluster DNS address: the tenth host of the CIDR (10.43.0.10 for 10.43.0.0/16).
pub fn cluster_dns_ip(cidr: &IpNet) -> Option<IpAddr> {
    cidr.hosts().nth(9)
}

/// The lowest free address (after the first, other than the cluster DNS one) not in `used`.
pub fn next_free(cidr: &IpNet, used: &HashSet<IpAddr>) -> Option<IpAddr> {
    let dns = cluster_dns_ip(cidr);
    cidr.hosts()
        .skip(1)
        .find(|ip| !used.contains(ip) && Some(*ip) != dns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_lowest_free_after_the_first() {
        let cidr: IpNet = "10.43.0.0/16".parse().unwrap();
        assert_eq!(first_ip(&cidr), Some("10.43.0.1".parse().unwrap()));
        let mut used = HashSet::new();
        assert_eq!(next_free(&cidr, &used), Some("10.43.0.2".parse().unwrap()));
        used.insert("10.43.0.2".parse().unwrap());
        assert_eq!(next_free(&cidr, &used), Some("10.43.0.3".parse().unwrap()));
        let tiny: IpNet = "10.0.0.0/30".parse().unwrap();
        let full: HashSet<IpAddr> = ["10.0.0.2".parse().unwrap()].into();
        assert_eq!(next_free(&tiny, &full), None);
    }

    #[test]
    fn the_cluster_dns_address_is_never_allocated() {
        let cidr: IpNet = "10.43.0.0/16".parse().unwrap();
        assert_eq!(cluster_dns_ip(&cidr), Some("10.43.0.10".parse().unwrap()));
        let used: HashSet<IpAddr> = (1..=9)
            .map(|i| format!("10.43.0.{i}").parse().unwrap())
            .collect();
        assert_eq!(next_free(&cidr, &used), Some("10.43.0.11".parse().unwrap()));
        let tiny: IpNet = "10.0.0.0/30".parse().unwrap();
        assert_eq!(cluster_dns_ip(&tiny), None);
    }
}
