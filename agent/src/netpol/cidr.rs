//! An `ipBlock` as plain CIDRs: `cidr` minus its `except` list, so a peer needs no
//! sub-chain (iptables has no "in A but not in B" match without ipsets).

use ipnet::Ipv4Net;

/// The smallest list of CIDRs covering exactly the addresses of `cidr` that are in none of
/// `except`, in address order. An `except` outside `cidr` changes nothing; one covering it
/// leaves nothing.
pub fn subtract(cidr: Ipv4Net, except: &[Ipv4Net]) -> Vec<Ipv4Net> {
    let cidr = cidr.trunc();
    if except.iter().any(|e| e.contains(&cidr)) {
        return Vec::new();
    }
    if !except.iter().any(|e| cidr.contains(e)) {
        return vec![cidr];
    }
    // Some except lies strictly inside: split in halves (cidr is not a /32 here, since a /32
    // holding an except is covered by it).
    match cidr.subnets(cidr.prefix_len() + 1) {
        Ok(halves) => halves.flat_map(|h| subtract(h, except)).collect(),
        Err(_) => vec![cidr],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    fn nets(v: &[&str]) -> Vec<Ipv4Net> {
        v.iter().map(|s| net(s)).collect()
    }

    #[test]
    fn except_lists_are_subtracted() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("10.0.0.0/8", &[], &["10.0.0.0/8"]),
            ("10.0.0.0/8", &["192.168.0.0/16"], &["10.0.0.0/8"]),
            ("10.0.0.0/8", &["10.0.0.0/8"], &[]),
            ("10.1.0.0/16", &["10.0.0.0/8"], &[]),
            (
                "10.0.0.0/30",
                &["10.0.0.1/32"],
                &["10.0.0.0/32", "10.0.0.2/31"],
            ),
            (
                "10.0.0.0/24",
                &["10.0.0.0/26", "10.0.0.192/26"],
                &["10.0.0.64/26", "10.0.0.128/26"],
            ),
            ("10.0.0.5/24", &[], &["10.0.0.0/24"]),
            ("0.0.0.0/0", &["128.0.0.0/1", "64.0.0.0/2"], &["0.0.0.0/2"]),
        ];
        for (cidr, except, want) in cases {
            assert_eq!(
                subtract(net(cidr), &nets(except)),
                nets(want),
                "{cidr} except {except:?}"
            );
        }
    }

    #[test]
    fn a_single_address_hole_costs_one_cidr_per_prefix_bit() {
        let out = subtract(net("10.42.0.0/16"), &nets(&["10.42.1.7/32"]));
        assert_eq!(out.len(), 16);
        assert!(!out
            .iter()
            .any(|n| n.contains(&"10.42.1.7".parse::<std::net::Ipv4Addr>().unwrap())));
        assert!(out
            .iter()
            .any(|n| n.contains(&"10.42.1.6".parse::<std::net::Ipv4Addr>().unwrap())));
    }
}
