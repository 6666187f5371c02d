//! What the VXLAN overlay of a node should look like, without I/O, and the changes that get
//! the kernel there. For every other node that published a VTEP (its flannel annotations,
//! [`super::annotations`]), as flannel's vxlan backend does:
//!
//! - a route `<their pod CIDR> via <its .0> dev flannel.1 onlink`,
//! - a permanent neighbour (ARP) entry `<their .0> lladdr <their VTEP MAC>` on `flannel.1`,
//! - a forwarding database entry `<their VTEP MAC> dst <their node address>` on `flannel.1`;
//!
//! and `flannel.1` itself has this node's pod CIDR's network address as a /32.
//!
//! Guarantees: only IPv4 pod CIDRs inside the cluster CIDR (when known) are ever routed,
//! never a zero-length prefix; a route to a destination this node wants is replaced (also one
//! another backend left), a route, neighbour or FDB entry whose key (destination, address,
//! MAC) no peer has any more is removed; the changes come in an order that never routes to a
//! neighbour not yet known ([`plan`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use ipnet::{IpNet, Ipv4Net};
use k8s_openapi::api::core::v1::Node;

use super::annotations;

/// The VXLAN device (flannel's name for VNI 1).
pub const DEVICE: &str = "flannel.1";

/// A link-layer (MAC) address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mac(pub [u8; 6]);

/// Why a MAC address did not parse.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a MAC address (six hex bytes separated by colons)")]
pub struct BadMac(String);

impl FromStr for Mac {
    type Err = BadMac;
    fn from_str(s: &str) -> Result<Mac, BadMac> {
        let bad = || BadMac(s.to_string());
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for b in &mut out {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 {
                return Err(bad());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Mac(out))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A route `dst via via dev <dev>` with the agent's protocol (desired ones are on [`DEVICE`],
/// `onlink`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Route {
    pub dst: Ipv4Net,
    pub via: Ipv4Addr,
    pub dev: String,
}

/// A permanent neighbour entry on [`DEVICE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Neighbour {
    pub ip: Ipv4Addr,
    pub mac: Mac,
}

/// A forwarding database entry on [`DEVICE`]: frames to `mac` go to the VTEP at `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fdb {
    pub mac: Mac,
    pub dst: Ipv4Addr,
}

/// The overlay's kernel state: what is there, or what should be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// `flannel.1`'s IPv4 addresses.
    pub addresses: BTreeSet<Ipv4Net>,
    /// The agent's routes (protocol 75), on any device.
    pub routes: BTreeSet<Route>,
    pub neighbours: BTreeSet<Neighbour>,
    pub fdb: BTreeSet<Fdb>,
}

/// One change, in the order [`plan`] lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    AddAddress(Ipv4Net),
    DeleteAddress(Ipv4Net),
    ReplaceFdb(Fdb),
    ReplaceNeighbour(Neighbour),
    ReplaceRoute(Route),
    DeleteRoute(Route),
    DeleteNeighbour(Neighbour),
    DeleteFdb(Fdb),
}

/// Another node's VTEP, as its Node publishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub node: String,
    pub pod_cidr: Ipv4Net,
    /// Where its VXLAN packets go: the `public-ip` annotation, else its first IPv4 InternalIP.
    pub public_ip: Ipv4Addr,
    pub vtep_mac: Mac,
}

/// The node's IPv4 pod CIDR (`spec.podCIDRs`, else `spec.podCIDR`).
pub fn pod_cidr_v4(node: &Node) -> Option<Ipv4Net> {
    let spec = node.spec.as_ref()?;
    let list: Vec<&String> = match &spec.pod_cidrs {
        Some(l) if !l.is_empty() => l.iter().collect(),
        _ => spec.pod_cidr.iter().collect(),
    };
    list.iter().find_map(|c| match c.parse::<IpNet>() {
        Ok(IpNet::V4(n)) => Some(n.trunc()),
        _ => None,
    })
}

fn internal_ipv4(node: &Node) -> Option<Ipv4Addr> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .filter(|a| a.type_ == "InternalIP")
        .find_map(|a| match a.address.parse() {
            Ok(IpAddr::V4(ip)) => Some(ip),
            _ => None,
        })
}

/// The node's VTEP, if it runs the vxlan backend and published one.
pub fn peer(node: &Node) -> Option<Peer> {
    let a = node.metadata.annotations.as_ref()?;
    if a.get(annotations::BACKEND_TYPE).map(String::as_str) != Some(annotations::VXLAN) {
        return None;
    }
    let data = annotations::parse_backend_data(a.get(annotations::BACKEND_DATA)?)?;
    let public_ip = a
        .get(annotations::PUBLIC_IP)
        .and_then(|ip| ip.parse().ok())
        .or_else(|| internal_ipv4(node))?;
    Some(Peer {
        node: node.metadata.name.clone()?,
        pod_cidr: pod_cidr_v4(node)?,
        public_ip,
        vtep_mac: data.vtep_mac.parse().ok()?,
    })
}

/// What node `me` (whose pod CIDR is `my_cidr`) should have for the other `nodes`.
pub fn desired<'a>(
    me: &str,
    my_cidr: Ipv4Net,
    nodes: impl IntoIterator<Item = &'a Node>,
    cluster_cidr: Option<&IpNet>,
) -> State {
    let mut out = State {
        addresses: [Ipv4Net::new(my_cidr.network(), 32).expect("32 is a valid prefix")].into(),
        ..State::default()
    };
    for node in nodes {
        if node.metadata.name.as_deref() == Some(me) {
            continue;
        }
        let Some(p) = peer(node) else { continue };
        let inside = cluster_cidr.is_none_or(|c| c.contains(&IpNet::V4(p.pod_cidr)));
        if p.pod_cidr.prefix_len() == 0 || !inside || p.pod_cidr == my_cidr {
            continue;
        }
        let gateway = p.pod_cidr.network();
        out.routes.insert(Route {
            dst: p.pod_cidr,
            via: gateway,
            dev: DEVICE.to_string(),
        });
        out.neighbours.insert(Neighbour {
            ip: gateway,
            mac: p.vtep_mac,
        });
        out.fdb.insert(Fdb {
            mac: p.vtep_mac,
            dst: p.public_ip,
        });
    }
    out
}

/// The entries of `desired` that `current` lacks (replaced), and those of `current` whose key
/// `desired` does not have (deleted).
fn diff<T: Clone + Ord, K: Ord>(
    desired: &BTreeSet<T>,
    current: &BTreeSet<T>,
    key: impl Fn(&T) -> K,
) -> (Vec<T>, Vec<T>) {
    let wanted: BTreeMap<K, &T> = desired.iter().map(|t| (key(t), t)).collect();
    let replace = desired.difference(current).cloned().collect();
    let delete = current
        .iter()
        .filter(|t| !wanted.contains_key(&key(t)))
        .cloned()
        .collect();
    (replace, delete)
}

/// The changes that turn `current` into `desired`: addresses, then FDB and neighbour entries
/// before the routes that need them; stale routes before the entries they used.
pub fn plan(desired: &State, current: &State) -> Vec<Action> {
    let (add_addr, del_addr) = diff(&desired.addresses, &current.addresses, |a| *a);
    let (put_fdb, del_fdb) = diff(&desired.fdb, &current.fdb, |f| f.mac);
    let (put_neigh, del_neigh) = diff(&desired.neighbours, &current.neighbours, |n| n.ip);
    let (put_route, del_route) = diff(&desired.routes, &current.routes, |r| r.dst);
    let mut out = Vec::new();
    out.extend(add_addr.into_iter().map(Action::AddAddress));
    out.extend(del_addr.into_iter().map(Action::DeleteAddress));
    out.extend(put_fdb.into_iter().map(Action::ReplaceFdb));
    out.extend(put_neigh.into_iter().map(Action::ReplaceNeighbour));
    out.extend(put_route.into_iter().map(Action::ReplaceRoute));
    out.extend(del_route.into_iter().map(Action::DeleteRoute));
    out.extend(del_neigh.into_iter().map(Action::DeleteNeighbour));
    out.extend(del_fdb.into_iter().map(Action::DeleteFdb));
    out
}

#[cfg(test)]
mod tests;
