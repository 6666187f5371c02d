//! The node IPAM range allocator's decisions, without I/O: which `/24` (or the configured
//! node mask) of `--cluster-cidr` a node without `spec.podCIDR` gets, given the CIDRs the
//! other nodes hold. The state is the nodes themselves, so a restart or a deleted node needs
//! nothing else: a deleted node's range is free as soon as it is gone.

use std::collections::BTreeSet;

use ipnet::IpNet;

/// Upstream's `--node-cidr-mask-size` for IPv4 clusters.
pub const DEFAULT_IPV4_MASK: u8 = 24;
/// Upstream's `--node-cidr-mask-size` for IPv6 clusters.
pub const DEFAULT_IPV6_MASK: u8 = 64;

/// Why no range could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the node mask /{mask} is not inside the cluster CIDR {cluster}")]
    MaskTooSmall { cluster: IpNet, mask: u8 },
    #[error("no remaining CIDRs in {0}")]
    Exhausted(IpNet),
}

/// The node mask for `cluster` (upstream's defaults per family).
pub fn default_mask(cluster: IpNet) -> u8 {
    match cluster {
        IpNet::V4(_) => DEFAULT_IPV4_MASK,
        IpNet::V6(_) => DEFAULT_IPV6_MASK,
    }
}

/// The lowest `/mask` subnet of `cluster` that none of `used` overlaps.
///
/// Guarantees: the result lies inside `cluster`, has prefix length `mask`, and overlaps no
/// CIDR in `used` (used CIDRs outside `cluster` or of other sizes are respected too).
///
/// One pass over the candidates and the used ranges, both in address order: O(used) for a
/// cluster whose lower ranges are taken, as at 5,000 nodes (a scan of every used range per
/// candidate was O(used²), seconds of CPU per node in a debug build, with no await).
pub fn next_free(cluster: IpNet, mask: u8, used: &BTreeSet<IpNet>) -> Result<IpNet, Error> {
    let cluster = cluster.trunc();
    if mask < cluster.prefix_len() || mask > cluster.max_prefix_len() {
        return Err(Error::MaskTooSmall { cluster, mask });
    }
    let subnets = cluster
        .subnets(mask)
        .map_err(|_| Error::MaskTooSmall { cluster, mask })?;
    let same_family = |u: &&IpNet| u.network().is_ipv4() == cluster.network().is_ipv4();
    let mut used: Vec<IpNet> = used.iter().filter(same_family).map(IpNet::trunc).collect();
    used.sort_by_key(IpNet::network);
    let mut used = used.into_iter().peekable();
    // The highest address covered by a used range that starts at or before the candidate's
    // last address: the candidate is taken exactly when that reaches its first address.
    let mut reach = None;
    for candidate in subnets {
        while let Some(u) = used.next_if(|u| u.network() <= candidate.broadcast()) {
            reach = reach.max(Some(u.broadcast()));
        }
        if reach.is_none_or(|r| r < candidate.network()) {
            return Ok(candidate);
        }
    }
    Err(Error::Exhausted(cluster))
}

/// The CIDRs in `pod_cidrs` strings that parse (a node's `spec.podCIDRs`, or `podCIDR`).
pub fn parse_all<'a>(pod_cidrs: impl IntoIterator<Item = &'a str>) -> BTreeSet<IpNet> {
    pod_cidrs
        .into_iter()
        .filter_map(|s| s.parse::<IpNet>().ok())
        .map(|n| n.trunc())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn lowest_free_range_skipping_the_used_ones() {
        let cluster = net("10.42.0.0/16");
        let used = parse_all(["10.42.0.0/24", "10.42.2.0/24", "bogus"]);
        assert_eq!(next_free(cluster, 24, &used), Ok(net("10.42.1.0/24")));
        assert_eq!(
            next_free(cluster, 24, &BTreeSet::new()),
            Ok(net("10.42.0.0/24"))
        );
        // A larger foreign range blocks every /24 it covers.
        let used = parse_all(["10.42.0.0/23"]);
        assert_eq!(next_free(cluster, 24, &used), Ok(net("10.42.2.0/24")));
    }

    /// The definition: no used range contains the candidate's first address or lies inside it.
    fn next_free_by_definition(cluster: IpNet, mask: u8, used: &BTreeSet<IpNet>) -> Option<IpNet> {
        cluster.subnets(mask).ok()?.find(|c| {
            !used
                .iter()
                .any(|u| u.contains(&c.network()) || c.contains(&u.network()))
        })
    }

    #[test]
    fn same_choice_as_the_definition_on_generated_sets() {
        let cluster = net("10.8.0.0/20");
        let mut seed = 7_u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % n
        };
        for _ in 0..300 {
            let mut used = BTreeSet::new();
            for _ in 0..next(20) {
                // Ranges of /18 to /28 around the cluster, some outside it, some of IPv6.
                let prefix = 18 + next(11) as u8;
                let addr = std::net::Ipv4Addr::from(0x0a08_0000 + (next(1 << 5) << 8) as u32);
                used.insert(IpNet::V4(ipnet::Ipv4Net::new(addr, prefix).unwrap()).trunc());
                if next(10) == 0 {
                    used.insert(net("fd00::/64"));
                }
            }
            let want = next_free_by_definition(cluster, 24, &used);
            assert_eq!(next_free(cluster, 24, &used).ok(), want, "used: {used:?}");
        }
        // Every range taken but the last one.
        let used: BTreeSet<IpNet> = cluster.subnets(24).unwrap().take(15).collect();
        assert_eq!(next_free(cluster, 24, &used), Ok(net("10.8.15.0/24")));
    }

    #[test]
    fn exhaustion_and_bad_masks() {
        let cluster = net("10.0.0.0/23");
        let used = parse_all(["10.0.0.0/24", "10.0.1.0/24"]);
        assert_eq!(
            next_free(cluster, 24, &used),
            Err(Error::Exhausted(cluster))
        );
        assert_eq!(
            next_free(net("10.0.0.0/24"), 16, &BTreeSet::new()),
            Err(Error::MaskTooSmall {
                cluster: net("10.0.0.0/24"),
                mask: 16
            })
        );
        assert_eq!(default_mask(net("fd00::/48")), 64);
        assert_eq!(
            next_free(net("fd00::/48"), 64, &parse_all(["fd00::/64"])),
            Ok(net("fd00:0:0:1::/64"))
        );
    }
}
