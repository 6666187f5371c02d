//! The kernel's side of the overlay behind a trait: the real one through iproute2 (`ip` and
//! `bridge`, JSON output; no netlink crate: the agent already drives routes and iptables
//! through their command-line tools, and iproute2 is on every node), and a recording fake.
//! Routes carry the agent's protocol number ([`PROTO`]), shared with host-gw, so a node
//! switching backends finds and replaces the other's routes.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::FutureExt;
use ipnet::Ipv4Net;
use serde::Deserialize;

use super::device::{DeviceSpec, DeviceState};
use super::plan::{Action, Fdb, Mac, Neighbour, Route, State, DEVICE};
use crate::host_gw::routes::{self, PROTO};
use crate::pod_network::ip::{self, args};

/// Why a kernel call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Ip(#[from] ip::Error),
    #[error("parsing `{0}` output: {1}")]
    Parse(&'static str, #[source] serde_json::Error),
    #[error(transparent)]
    Forwarding(#[from] routes::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub mtu: u32,
}

/// The overlay's kernel objects.
pub trait Overlay: Send + Sync + 'static {
    /// The interface holding `ip`, if any.
    fn interface_of(&self, ip: Ipv4Addr) -> BoxFuture<'_, Result<Option<Interface>>>;
    /// [`DEVICE`] as it is, if it exists.
    fn device(&self) -> BoxFuture<'_, Result<Option<DeviceState>>>;
    /// Creates [`DEVICE`] as `spec` says, with its MTU, up.
    fn create_device(&self, spec: DeviceSpec) -> BoxFuture<'_, Result<()>>;
    /// Deletes [`DEVICE`] (its addresses, routes, neighbours and FDB entries go with it).
    fn delete_device(&self) -> BoxFuture<'_, Result<()>>;
    /// Sets [`DEVICE`]'s MTU and brings it up.
    fn adjust_device(&self, mtu: u32) -> BoxFuture<'_, Result<()>>;
    /// The device's addresses, neighbours and FDB entries and the agent's IPv4 routes.
    fn state(&self) -> BoxFuture<'_, Result<State>>;
    fn apply(&self, action: Action) -> BoxFuture<'_, Result<()>>;
    /// Turns on IP forwarding (pods' packets are routed through the node).
    fn enable_forwarding(&self) -> BoxFuture<'_, Result<()>>;
}

/// The iproute2 command that makes `action`: (`ip` or `bridge`, arguments).
pub fn command(action: &Action) -> (&'static str, Vec<String>) {
    let s = |v: &[&str]| args(v);
    match action {
        Action::AddAddress(a) => ("ip", s(&["addr", "add", &a.to_string(), "dev", DEVICE])),
        Action::DeleteAddress(a) => ("ip", s(&["addr", "del", &a.to_string(), "dev", DEVICE])),
        Action::ReplaceFdb(f) => (
            "bridge",
            s(&[
                "fdb",
                "replace",
                &f.mac.to_string(),
                "dev",
                DEVICE,
                "dst",
                &f.dst.to_string(),
                "self",
                "permanent",
            ]),
        ),
        Action::DeleteFdb(f) => (
            "bridge",
            s(&[
                "fdb",
                "del",
                &f.mac.to_string(),
                "dev",
                DEVICE,
                "dst",
                &f.dst.to_string(),
                "self",
            ]),
        ),
        Action::ReplaceNeighbour(n) => (
            "ip",
            s(&[
                "neigh",
                "replace",
                &n.ip.to_string(),
                "lladdr",
                &n.mac.to_string(),
                "dev",
                DEVICE,
                "nud",
                "permanent",
            ]),
        ),
        Action::DeleteNeighbour(n) => {
            ("ip", s(&["neigh", "del", &n.ip.to_string(), "dev", DEVICE]))
        }
        Action::ReplaceRoute(r) => (
            "ip",
            s(&[
                "-4",
                "route",
                "replace",
                &r.dst.to_string(),
                "via",
                &r.via.to_string(),
                "dev",
                &r.dev,
                "onlink",
                "proto",
                PROTO,
            ]),
        ),
        Action::DeleteRoute(r) => (
            "ip",
            s(&[
                "-4",
                "route",
                "del",
                &r.dst.to_string(),
                "via",
                &r.via.to_string(),
                "dev",
                &r.dev,
                "proto",
                PROTO,
            ]),
        ),
    }
}

#[derive(Deserialize)]
struct AddrInfo {
    family: String,
    local: String,
    prefixlen: u8,
}

#[derive(Deserialize)]
struct Link {
    ifname: String,
    mtu: u32,
    #[serde(default)]
    flags: Vec<String>,
    address: Option<String>,
    #[serde(default)]
    addr_info: Vec<AddrInfo>,
    linkinfo: Option<LinkInfo>,
}

#[derive(Deserialize)]
struct LinkInfo {
    info_kind: Option<String>,
    info_data: Option<VxlanData>,
}

#[derive(Deserialize)]
struct VxlanData {
    id: Option<u32>,
    port: Option<u16>,
    local: Option<String>,
    link: Option<String>,
    #[serde(default)]
    learning: bool,
}

fn parse<T: serde::de::DeserializeOwned + Default>(what: &'static str, json: &[u8]) -> Result<T> {
    if ip::is_empty(json) {
        return Ok(T::default());
    }
    serde_json::from_slice(json).map_err(|e| Error::Parse(what, e))
}

/// The interface holding `ip` in `ip -j -4 addr show` output.
pub fn parse_interface_of(json: &[u8], ip: Ipv4Addr) -> Result<Option<Interface>> {
    let links: Vec<Link> = parse("ip -j addr show", json)?;
    Ok(links
        .into_iter()
        .find(|l| l.addr_info.iter().any(|a| a.local == ip.to_string()))
        .map(|l| Interface {
            name: l.ifname,
            mtu: l.mtu,
        }))
}

/// The device in `ip -j -d link show <dev>` output.
pub fn parse_device(json: &[u8]) -> Result<Option<DeviceState>> {
    let links: Vec<Link> = parse("ip -j -d link show", json)?;
    Ok(links.into_iter().next().map(|l| {
        let vxlan = l
            .linkinfo
            .filter(|i| i.info_kind.as_deref() == Some("vxlan"))
            .and_then(|i| i.info_data);
        DeviceState {
            vni: vxlan.as_ref().and_then(|v| v.id),
            port: vxlan.as_ref().and_then(|v| v.port),
            local: vxlan
                .as_ref()
                .and_then(|v| v.local.as_deref()?.parse().ok()),
            link: vxlan.as_ref().and_then(|v| v.link.clone()),
            learning: vxlan.as_ref().is_some_and(|v| v.learning),
            mtu: l.mtu,
            up: l.flags.iter().any(|f| f == "UP"),
            mac: l
                .address
                .and_then(|a| a.parse().ok())
                .unwrap_or(Mac([0; 6])),
        }
    }))
}

/// The IPv4 addresses in `ip -j -4 addr show dev <dev>` output.
pub fn parse_addresses(json: &[u8]) -> Result<Vec<Ipv4Net>> {
    let links: Vec<Link> = parse("ip -j addr show", json)?;
    Ok(links
        .iter()
        .flat_map(|l| &l.addr_info)
        .filter(|a| a.family == "inet")
        .filter_map(|a| Ipv4Net::new(a.local.parse().ok()?, a.prefixlen).ok())
        .collect())
}

/// The routes with a gateway in `ip -j -4 route show proto 75` output.
pub fn parse_routes(json: &[u8]) -> Result<Vec<Route>> {
    #[derive(Deserialize)]
    struct Entry {
        dst: String,
        gateway: Option<String>,
        dev: Option<String>,
    }
    let entries: Vec<Entry> = parse("ip -j route show", json)?;
    Ok(entries
        .into_iter()
        .filter_map(|e| {
            let dst = e.dst.parse().ok().or_else(|| {
                let ip: Ipv4Addr = e.dst.parse().ok()?;
                Ipv4Net::new(ip, 32).ok()
            })?;
            Some(Route {
                dst,
                via: e.gateway?.parse().ok()?,
                dev: e.dev?,
            })
        })
        .collect())
}

/// The entries with a link-layer address in `ip -j -4 neigh show dev <dev> nud permanent`.
pub fn parse_neighbours(json: &[u8]) -> Result<Vec<Neighbour>> {
    #[derive(Deserialize)]
    struct Entry {
        dst: String,
        lladdr: Option<String>,
    }
    let entries: Vec<Entry> = parse("ip -j neigh show", json)?;
    Ok(entries
        .into_iter()
        .filter_map(|e| {
            Some(Neighbour {
                ip: e.dst.parse().ok()?,
                mac: e.lladdr?.parse().ok()?,
            })
        })
        .collect())
}

/// The entries with an IPv4 remote in `bridge -j fdb show dev <dev>` output.
pub fn parse_fdb(json: &[u8]) -> Result<Vec<Fdb>> {
    #[derive(Deserialize)]
    struct Entry {
        mac: String,
        dst: Option<String>,
    }
    let entries: Vec<Entry> = parse("bridge -j fdb show", json)?;
    Ok(entries
        .into_iter()
        .filter_map(|e| {
            let dst: IpAddr = e.dst?.parse().ok()?;
            let IpAddr::V4(dst) = dst else { return None };
            Some(Fdb {
                mac: e.mac.parse().ok()?,
                dst,
            })
        })
        .collect())
}

/// The real kernel, through iproute2.
#[derive(Debug, Clone, Copy, Default)]
pub struct IpOverlay;

async fn ip_json(v: &[&str]) -> Result<Vec<u8>> {
    Ok(ip::run("ip", &args(v)).await?)
}

impl Overlay for IpOverlay {
    fn interface_of(&self, addr: Ipv4Addr) -> BoxFuture<'_, Result<Option<Interface>>> {
        async move { parse_interface_of(&ip_json(&["-j", "-4", "addr", "show"]).await?, addr) }
            .boxed()
    }

    fn device(&self) -> BoxFuture<'_, Result<Option<DeviceState>>> {
        async {
            match ip::run("ip", &args(&["-j", "-d", "link", "show", "dev", DEVICE])).await {
                Ok(json) => parse_device(&json),
                Err(ip::Error::Failed(_, msg)) if msg.contains("does not exist") => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
        .boxed()
    }

    fn create_device(&self, d: DeviceSpec) -> BoxFuture<'_, Result<()>> {
        async move {
            let (vni, local, port) = (d.vni.to_string(), d.local.to_string(), d.port.to_string());
            ip_json(&[
                "link",
                "add",
                DEVICE,
                "type",
                "vxlan",
                "id",
                &vni,
                "local",
                &local,
                "dev",
                &d.link,
                "dstport",
                &port,
                "nolearning",
            ])
            .await?;
            self.adjust_device(d.mtu).await
        }
        .boxed()
    }

    fn delete_device(&self) -> BoxFuture<'_, Result<()>> {
        async { ip_json(&["link", "del", DEVICE]).await.map(|_| ()) }.boxed()
    }

    fn adjust_device(&self, mtu: u32) -> BoxFuture<'_, Result<()>> {
        async move {
            let mtu = mtu.to_string();
            ip_json(&["link", "set", DEVICE, "mtu", &mtu, "up"])
                .await
                .map(|_| ())
        }
        .boxed()
    }

    fn state(&self) -> BoxFuture<'_, Result<State>> {
        async {
            let addrs = ip_json(&["-j", "-4", "addr", "show", "dev", DEVICE]).await?;
            let routes = ip_json(&["-j", "-4", "route", "show", "proto", PROTO]).await?;
            let neigh = ip_json(&[
                "-j",
                "-4",
                "neigh",
                "show",
                "dev",
                DEVICE,
                "nud",
                "permanent",
            ])
            .await?;
            let fdb = ip::run("bridge", &args(&["-j", "fdb", "show", "dev", DEVICE])).await?;
            Ok(State {
                addresses: parse_addresses(&addrs)?.into_iter().collect(),
                routes: parse_routes(&routes)?.into_iter().collect(),
                neighbours: parse_neighbours(&neigh)?.into_iter().collect(),
                fdb: parse_fdb(&fdb)?.into_iter().collect(),
            })
        }
        .boxed()
    }

    fn apply(&self, action: Action) -> BoxFuture<'_, Result<()>> {
        async move {
            let (program, argv) = command(&action);
            ip::run(program, &argv)
                .await
                .map(|_| ())
                .map_err(Into::into)
        }
        .boxed()
    }

    fn enable_forwarding(&self) -> BoxFuture<'_, Result<()>> {
        async { Ok(routes::enable_forwarding().await?) }.boxed()
    }
}

/// One call the fake saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    CreateDevice(DeviceSpec),
    DeleteDevice,
    AdjustDevice(u32),
    Apply(Action),
    EnableForwarding,
}

/// A kernel in memory that records every change.
#[derive(Debug, Clone, Default)]
pub struct FakeOverlay {
    pub interfaces: Arc<Mutex<Vec<(Ipv4Addr, Interface)>>>,
    pub device: Arc<Mutex<Option<DeviceState>>>,
    pub state: Arc<Mutex<State>>,
    pub calls: Arc<Mutex<Vec<Call>>>,
}

impl FakeOverlay {
    fn record(&self, call: Call) {
        self.calls.lock().expect("calls").push(call);
    }

    /// The calls so far, cleared.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().expect("calls"))
    }
}

impl Overlay for FakeOverlay {
    fn interface_of(&self, ip: Ipv4Addr) -> BoxFuture<'_, Result<Option<Interface>>> {
        let found = self
            .interfaces
            .lock()
            .expect("interfaces")
            .iter()
            .find(|(a, _)| *a == ip)
            .map(|(_, i)| i.clone());
        async move { Ok(found) }.boxed()
    }

    fn device(&self) -> BoxFuture<'_, Result<Option<DeviceState>>> {
        let d = self.device.lock().expect("device").clone();
        async move { Ok(d) }.boxed()
    }

    fn create_device(&self, spec: DeviceSpec) -> BoxFuture<'_, Result<()>> {
        *self.device.lock().expect("device") = Some(DeviceState {
            vni: Some(spec.vni),
            port: Some(spec.port),
            local: Some(spec.local),
            link: Some(spec.link.clone()),
            learning: false,
            mtu: spec.mtu,
            up: true,
            mac: Mac([2, 0, 0, 0, 0, 1]),
        });
        self.record(Call::CreateDevice(spec));
        async { Ok(()) }.boxed()
    }

    fn delete_device(&self) -> BoxFuture<'_, Result<()>> {
        *self.device.lock().expect("device") = None;
        let mut state = self.state.lock().expect("state");
        state.addresses.clear();
        state.neighbours.clear();
        state.fdb.clear();
        state.routes.retain(|r| r.dev != DEVICE);
        drop(state);
        self.record(Call::DeleteDevice);
        async { Ok(()) }.boxed()
    }

    fn adjust_device(&self, mtu: u32) -> BoxFuture<'_, Result<()>> {
        if let Some(d) = self.device.lock().expect("device").as_mut() {
            d.mtu = mtu;
            d.up = true;
        }
        self.record(Call::AdjustDevice(mtu));
        async { Ok(()) }.boxed()
    }

    fn state(&self) -> BoxFuture<'_, Result<State>> {
        let s = self.state.lock().expect("state").clone();
        async move { Ok(s) }.boxed()
    }

    fn apply(&self, action: Action) -> BoxFuture<'_, Result<()>> {
        let mut s = self.state.lock().expect("state");
        match &action {
            Action::AddAddress(a) => {
                s.addresses.insert(*a);
            }
            Action::DeleteAddress(a) => {
                s.addresses.remove(a);
            }
            Action::ReplaceFdb(f) => {
                s.fdb.retain(|x| x.mac != f.mac);
                s.fdb.insert(*f);
            }
            Action::DeleteFdb(f) => {
                s.fdb.remove(f);
            }
            Action::ReplaceNeighbour(n) => {
                s.neighbours.retain(|x| x.ip != n.ip);
                s.neighbours.insert(*n);
            }
            Action::DeleteNeighbour(n) => {
                s.neighbours.remove(n);
            }
            Action::ReplaceRoute(r) => {
                s.routes.retain(|x| x.dst != r.dst);
                s.routes.insert(r.clone());
            }
            Action::DeleteRoute(r) => {
                s.routes.remove(r);
            }
        }
        drop(s);
        self.record(Call::Apply(action));
        async { Ok(()) }.boxed()
    }

    fn enable_forwarding(&self) -> BoxFuture<'_, Result<()>> {
        self.record(Call::EnableForwarding);
        async { Ok(()) }.boxed()
    }
}

#[cfg(test)]
mod tests;
