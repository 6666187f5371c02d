//! Pod IPs per hollow node, as host-local IPAM hands them out from the node's pod CIDR.
//!
//! Guarantees: an address is never given to two live pods of the same node; the network and
//! the first address (the bridge's gateway) and, for IPv4, the broadcast address are never
//! handed out; addresses seen on observed pods are reserved before new ones are chosen.

use std::collections::HashMap;
use std::net::IpAddr;

use ipnet::IpNet;

/// The addresses in use on every node, keyed by node name and then pod UID.
#[derive(Debug, Default)]
pub struct PodIps {
    nodes: HashMap<String, HashMap<String, IpAddr>>,
}

impl PodIps {
    /// Records that pod `uid` on `node` holds `ip` (seen in its status).
    pub fn reserve(&mut self, node: &str, uid: &str, ip: IpAddr) {
        self.nodes
            .entry(node.to_string())
            .or_default()
            .insert(uid.to_string(), ip);
    }

    /// The address pod `uid` holds on `node`, if any.
    pub fn get(&self, node: &str, uid: &str) -> Option<IpAddr> {
        self.nodes.get(node)?.get(uid).copied()
    }

    /// The address of pod `uid`: the one it holds, else the lowest free host address of
    /// `cidr`; `None` if the CIDR is exhausted.
    pub fn allocate(&mut self, node: &str, uid: &str, cidr: IpNet) -> Option<IpAddr> {
        if let Some(ip) = self.get(node, uid) {
            return Some(ip);
        }
        let used = self.nodes.entry(node.to_string()).or_default();
        let taken: std::collections::HashSet<IpAddr> = used.values().copied().collect();
        let ip = cidr
            .hosts()
            .filter(|ip| *ip != cidr.network())
            .skip(1) // the gateway
            .find(|ip| !taken.contains(ip))?;
        used.insert(uid.to_string(), ip);
        Some(ip)
    }

    /// Frees the address of pod `uid` on `node` (the pod is gone or terminal).
    pub fn release(&mut self, node: &str, uid: &str) {
        if let Some(pods) = self.nodes.get_mut(node) {
            pods.remove(uid);
            if pods.is_empty() {
                self.nodes.remove(node);
            }
        }
    }
}

/// The pod CIDR of the node with `index` when the node has no `spec.podCIDR` (no node IPAM
/// runs): the `index`-th /25 of 100.64.0.0/10 (126 pods per node, 32,768 nodes).
pub fn fallback_cidr(index: usize) -> IpNet {
    let base = u32::from(std::net::Ipv4Addr::new(100, 64, 0, 0));
    let net = base.wrapping_add(((index as u32) % 32_768) << 7);
    IpNet::V4(ipnet::Ipv4Net::new(net.into(), 25).expect("prefix 25 is valid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn hands_out_the_lowest_free_host_after_the_gateway() {
        let cidr: IpNet = "10.42.1.0/24".parse().unwrap();
        let mut ips = PodIps::default();
        assert_eq!(ips.allocate("n", "a", cidr), Some(ip("10.42.1.2")));
        assert_eq!(ips.allocate("n", "b", cidr), Some(ip("10.42.1.3")));
        assert_eq!(ips.allocate("n", "a", cidr), Some(ip("10.42.1.2")));
        ips.release("n", "a");
        assert_eq!(ips.allocate("n", "c", cidr), Some(ip("10.42.1.2")));
        // Another node has its own addresses.
        assert_eq!(ips.allocate("m", "d", cidr), Some(ip("10.42.1.2")));
    }

    #[test]
    fn observed_addresses_are_skipped() {
        let cidr: IpNet = "10.42.1.0/24".parse().unwrap();
        let mut ips = PodIps::default();
        ips.reserve("n", "old", ip("10.42.1.2"));
        assert_eq!(ips.allocate("n", "new", cidr), Some(ip("10.42.1.3")));
    }

    #[test]
    fn an_exhausted_cidr_gives_none() {
        let cidr: IpNet = "10.42.1.0/30".parse().unwrap(); // hosts .1 (gateway) and .2
        let mut ips = PodIps::default();
        assert_eq!(ips.allocate("n", "a", cidr), Some(ip("10.42.1.2")));
        assert_eq!(ips.allocate("n", "b", cidr), None);
    }

    #[test]
    fn fallback_cidrs_are_disjoint_slices_of_cgnat_space() {
        assert_eq!(fallback_cidr(0).to_string(), "100.64.0.0/25");
        assert_eq!(fallback_cidr(1).to_string(), "100.64.0.128/25");
        assert_eq!(fallback_cidr(513).to_string(), "100.65.0.128/25");
    }
}
