//! The node's routing table behind a trait: the real one through iproute2's `ip`, and a
//! recording fake for tests. Routes the agent installs carry the protocol number [`PROTO`],
//! which is how it finds its own routes again (and never touches anyone else's).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::FutureExt;
use ipnet::IpNet;

use super::plan::Route;
use crate::pod_network::ip::{self, args as s};

/// The route protocol of the agent's routes (`ip route … proto 75`).
pub const PROTO: &str = "75";

/// Why a routing call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Ip(#[from] ip::Error),
    #[error("parsing `ip -j route` output: {0}")]
    Parse(#[source] serde_json::Error),
    #[error("enabling IP forwarding ({0}): {1}")]
    Forwarding(&'static str, #[source] std::io::Error),
}

/// The routing table.
pub trait Routes: Send + Sync + 'static {
    /// The routes with protocol [`PROTO`] (both families).
    fn list(&self) -> BoxFuture<'_, Result<Vec<Route>, Error>>;
    /// Adds `route`, or replaces the one to the same destination.
    fn replace(&self, route: Route) -> BoxFuture<'_, Result<(), Error>>;
    fn delete(&self, route: Route) -> BoxFuture<'_, Result<(), Error>>;
    /// The subnets the node reaches directly (routes without a gateway, both families): a
    /// gateway outside them is not on a connected network.
    fn connected(&self) -> BoxFuture<'_, Result<Vec<IpNet>, Error>>;
    /// Turns on IPv4 and IPv6 forwarding, which routing pods between nodes needs (flannel
    /// does the same).
    fn enable_forwarding(&self) -> BoxFuture<'_, Result<(), Error>>;
}

/// The real table, through `ip`.
#[derive(Debug, Clone, Copy, Default)]
pub struct IpRoute;

async fn ip(args: &[String]) -> Result<Vec<u8>, Error> {
    Ok(ip::run("ip", args).await?)
}

/// The routes in `ip -j route show` output (entries without a gateway are skipped).
pub fn parse_routes(json: &[u8]) -> Result<Vec<Route>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Entry {
        dst: String,
        gateway: Option<String>,
    }
    if ip::is_empty(json) {
        return Ok(Vec::new());
    }
    let entries: Vec<Entry> = serde_json::from_slice(json)?;
    Ok(entries
        .into_iter()
        .filter_map(|e| {
            Some(Route {
                dst: e.dst.parse().ok()?,
                via: e.gateway?.parse().ok()?,
            })
        })
        .collect())
}

/// The directly connected destinations in `ip -j -<family> route show` output: unicast
/// routes without a gateway (IPv6 routes have no link scope to filter on). `default` without a
/// gateway (a point-to-point link) is the whole family.
pub fn parse_connected(json: &[u8], v4: bool) -> Result<Vec<IpNet>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Entry {
        dst: String,
        gateway: Option<String>,
        nexthops: Option<serde_json::Value>,
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    if ip::is_empty(json) {
        return Ok(Vec::new());
    }
    let entries: Vec<Entry> = serde_json::from_slice(json)?;
    Ok(entries
        .into_iter()
        .filter(|e| e.gateway.is_none() && e.nexthops.is_none())
        .filter(|e| e.kind.as_deref().is_none_or(|k| k == "unicast"))
        .filter_map(|e| match e.dst.as_str() {
            "default" if v4 => "0.0.0.0/0".parse().ok(),
            "default" => "::/0".parse().ok(),
            // A host route prints without its prefix length.
            dst => dst
                .parse()
                .ok()
                .or_else(|| dst.parse::<IpAddr>().ok().map(IpNet::from)),
        })
        .collect())
}

fn family(via: &IpAddr) -> &'static str {
    if via.is_ipv4() {
        "-4"
    } else {
        "-6"
    }
}

/// `ip route <verb> <dst> via <via> proto 75`.
async fn route_cmd(verb: &str, r: Route) -> Result<(), Error> {
    let (dst, via) = (r.dst.to_string(), r.via.to_string());
    let args = s(&[
        family(&r.via),
        "route",
        verb,
        &dst,
        "via",
        &via,
        "proto",
        PROTO,
    ]);
    ip(&args).await.map(|_| ())
}

impl Routes for IpRoute {
    fn list(&self) -> BoxFuture<'_, Result<Vec<Route>, Error>> {
        async {
            let mut out = Vec::new();
            for fam in ["-4", "-6"] {
                let json = match ip(&s(&[fam, "-j", "route", "show", "proto", PROTO])).await {
                    Ok(json) => json,
                    // A host with IPv6 disabled has no IPv6 table.
                    Err(_) if fam == "-6" => continue,
                    Err(e) => return Err(e),
                };
                out.extend(parse_routes(&json).map_err(Error::Parse)?);
            }
            Ok(out)
        }
        .boxed()
    }

    fn replace(&self, r: Route) -> BoxFuture<'_, Result<(), Error>> {
        route_cmd("replace", r).boxed()
    }

    fn delete(&self, r: Route) -> BoxFuture<'_, Result<(), Error>> {
        route_cmd("del", r).boxed()
    }

    fn connected(&self) -> BoxFuture<'_, Result<Vec<IpNet>, Error>> {
        async {
            let mut out = Vec::new();
            for (fam, v4) in [("-4", true), ("-6", false)] {
                let json = match ip(&s(&[fam, "-j", "route", "show"])).await {
                    Ok(json) => json,
                    Err(_) if !v4 => continue,
                    Err(e) => return Err(e),
                };
                out.extend(parse_connected(&json, v4).map_err(Error::Parse)?);
            }
            Ok(out)
        }
        .boxed()
    }

    fn enable_forwarding(&self) -> BoxFuture<'_, Result<(), Error>> {
        enable_forwarding().boxed()
    }
}

/// Turns on IPv4 and IPv6 forwarding (a host without IPv6 has no IPv6 switch).
pub async fn enable_forwarding() -> Result<(), Error> {
    for (i, path) in FORWARDING.iter().enumerate() {
        match tokio::fs::write(path, "1").await {
            Ok(()) => {}
            Err(e) if i > 0 && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::Forwarding(path, e)),
        }
    }
    Ok(())
}

const FORWARDING: &[&str] = &[
    "/proc/sys/net/ipv4/ip_forward",
    "/proc/sys/net/ipv6/conf/all/forwarding",
];

/// One call the fake saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Replace(Route),
    Delete(Route),
    EnableForwarding,
}

/// A table in memory that records every change.
#[derive(Debug, Clone, Default)]
pub struct FakeRoutes {
    pub table: Arc<Mutex<Vec<Route>>>,
    /// What [`Routes::connected`] answers.
    pub connected: Arc<Mutex<Vec<IpNet>>>,
    pub calls: Arc<Mutex<Vec<Call>>>,
}

impl Routes for FakeRoutes {
    fn list(&self) -> BoxFuture<'_, Result<Vec<Route>, Error>> {
        let t = self.table.lock().expect("table").clone();
        async move { Ok(t) }.boxed()
    }

    fn replace(&self, r: Route) -> BoxFuture<'_, Result<(), Error>> {
        let mut t = self.table.lock().expect("table");
        t.retain(|x| x.dst != r.dst);
        t.push(r);
        self.calls.lock().expect("calls").push(Call::Replace(r));
        async { Ok(()) }.boxed()
    }

    fn delete(&self, r: Route) -> BoxFuture<'_, Result<(), Error>> {
        self.table.lock().expect("table").retain(|x| *x != r);
        self.calls.lock().expect("calls").push(Call::Delete(r));
        async { Ok(()) }.boxed()
    }

    fn connected(&self) -> BoxFuture<'_, Result<Vec<IpNet>, Error>> {
        let c = self.connected.lock().expect("connected").clone();
        async move { Ok(c) }.boxed()
    }

    fn enable_forwarding(&self) -> BoxFuture<'_, Result<(), Error>> {
        self.calls
            .lock()
            .expect("calls")
            .push(Call::EnableForwarding);
        async { Ok(()) }.boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_json_routes_parse() {
        let json = br#"[{"dst":"10.42.1.0/24","gateway":"10.99.0.2","dev":"veth0","protocol":"75","flags":[]},
            {"dst":"10.42.7.0/24","dev":"cni0","protocol":"75","flags":[]}]"#;
        let want = vec![Route {
            dst: "10.42.1.0/24".parse().unwrap(),
            via: "10.99.0.2".parse().unwrap(),
        }];
        assert_eq!(parse_routes(json).unwrap(), want);
        assert_eq!(parse_routes(b"\n").unwrap(), Vec::new());
        assert!(parse_routes(b"{").is_err());
    }

    #[test]
    fn routes_without_a_gateway_are_the_connected_subnets() {
        let json =
            br#"[{"dst":"10.99.1.0/24","dev":"eth0","protocol":"kernel","prefsrc":"10.99.1.1"},
            {"dst":"169.254.1.1","dev":"eth1"},{"dst":"default","dev":"ppp0"},
            {"dst":"10.42.1.0/24","gateway":"10.99.1.2","dev":"eth0"},
            {"type":"blackhole","dst":"10.9.0.0/16"}]"#;
        let nets = |v: &[&str]| -> Vec<IpNet> { v.iter().map(|n| n.parse().unwrap()).collect() };
        assert_eq!(
            parse_connected(json, true).unwrap(),
            nets(&["10.99.1.0/24", "169.254.1.1/32", "0.0.0.0/0"])
        );
        assert_eq!(parse_connected(b"", false).unwrap(), Vec::new());
    }
}
