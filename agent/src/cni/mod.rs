//! The CNI network the agent gives its pods: a `bridge` (`cni0`, the node's gateway, masquerading
//! outbound traffic, hairpin for pods reaching themselves through a Service) with `host-local`
//! IPAM on the node's pod CIDRs, chained with `portmap` for `hostPort`s. containerd adds the
//! loopback interface itself.
//!
//! The bridge does not masquerade per pod: [`masquerade`] puts one rule per node pod CIDR in
//! place instead (IPv4; a node with an IPv6 pod CIDR keeps the bridge's `ipMasq`).
//!
//! [`Config::render`] is pure; [`write`] puts the conflist where containerd's CRI plugin reads it
//! (its `cni.conf_dir`), atomically, so containerd never loads half a file.

pub mod masquerade;

use std::path::{Path, PathBuf};

use ipnet::IpNet;
use serde::Serialize;

/// The CNI spec version of the conflist: the newest the Debian 12 plugins (1.1.1) and
/// containerd 1.6 both support.
pub const CNI_VERSION: &str = "1.0.0";

/// The conflist's file name (containerd loads the alphabetically first file of its conf dir).
pub const CONFLIST_FILE: &str = "10-k3rs.conflist";

/// Why no conflist was made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("pod CIDR {0} is too small for a gateway and pods")]
    CidrTooSmall(IpNet),
    #[error("a node needs at least one pod CIDR")]
    NoPodCidr,
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the conflist depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The network's name (containerd reports it; host-local keys its store by it).
    pub name: String,
    /// The Linux bridge the pods' veths join.
    pub bridge: String,
    /// The node's `spec.podCIDRs` (one per IP family).
    pub pod_cidrs: Vec<IpNet>,
    /// host-local's allocation store (`<agent>/cni/networks`), so agents sharing a machine
    /// do not share it.
    pub ipam_data_dir: PathBuf,
    /// The bridge's and the pods' MTU (the overlay's, below the node interface's); `None`:
    /// the kernel's default.
    pub mtu: Option<u32>,
}

impl Config {
    /// The defaults: network `k3rs`, bridge `cni0`.
    pub fn new(pod_cidrs: Vec<IpNet>, agent_dir: &Path) -> Config {
        Config {
            name: "k3rs".to_string(),
            bridge: "cni0".to_string(),
            pod_cidrs,
            ipam_data_dir: agent_dir.join("cni/networks"),
            mtu: None,
        }
    }

    /// The conflist JSON, pretty-printed.
    pub fn render(&self) -> Result<String, Error> {
        if self.pod_cidrs.is_empty() {
            return Err(Error::NoPodCidr);
        }
        let mut ranges = Vec::new();
        let mut routes = Vec::new();
        for cidr in &self.pod_cidrs {
            let cidr = cidr.trunc();
            let max = match cidr {
                IpNet::V4(_) => 30,
                IpNet::V6(_) => 126,
            };
            if cidr.prefix_len() > max {
                return Err(Error::CidrTooSmall(cidr));
            }
            // The first address after the network's (IPv6 has no broadcast, and its
            // subnet-router anycast address is the network address itself).
            let gateway = match cidr {
                IpNet::V4(n) => {
                    std::net::IpAddr::from(std::net::Ipv4Addr::from(n.network().to_bits() + 1))
                }
                IpNet::V6(n) => {
                    std::net::IpAddr::from(std::net::Ipv6Addr::from(n.network().to_bits() + 1))
                }
            };
            ranges.push([Range {
                subnet: cidr.to_string(),
                gateway: gateway.to_string(),
            }]);
            routes.push(Route {
                dst: match cidr {
                    IpNet::V4(_) => "0.0.0.0/0",
                    IpNet::V6(_) => "::/0",
                },
            });
        }
        let conflist = Conflist {
            cni_version: CNI_VERSION,
            name: &self.name,
            plugins: (
                Bridge {
                    r#type: "bridge",
                    bridge: &self.bridge,
                    mtu: self.mtu,
                    is_gateway: true,
                    ip_masq: masquerade::bridge_masquerades(&self.pod_cidrs),
                    hairpin_mode: true,
                    ipam: HostLocal {
                        r#type: "host-local",
                        ranges,
                        routes,
                        data_dir: &self.ipam_data_dir,
                    },
                },
                Portmap {
                    r#type: "portmap",
                    capabilities: PortmapCapabilities {
                        port_mappings: true,
                    },
                    snat: true,
                },
            ),
        };
        Ok(serde_json::to_string_pretty(&conflist).expect("a JSON value serializes") + "\n")
    }
}

// The conflist's shape; fields serialize in declaration order (the order CNI docs use).

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Conflist<'a> {
    cni_version: &'static str,
    name: &'a str,
    plugins: (Bridge<'a>, Portmap),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Bridge<'a> {
    r#type: &'static str,
    bridge: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mtu: Option<u32>,
    is_gateway: bool,
    ip_masq: bool,
    hairpin_mode: bool,
    ipam: HostLocal<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HostLocal<'a> {
    r#type: &'static str,
    ranges: Vec<[Range; 1]>,
    routes: Vec<Route>,
    data_dir: &'a Path,
}

#[derive(Serialize)]
struct Range {
    subnet: String,
    gateway: String,
}

#[derive(Serialize)]
struct Route {
    dst: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PortmapCapabilities {
    port_mappings: bool,
}

#[derive(Serialize)]
struct Portmap {
    r#type: &'static str,
    capabilities: PortmapCapabilities,
    snat: bool,
}

/// Writes `config`'s conflist into `conf_dir` (creating it) as [`CONFLIST_FILE`], through a
/// temporary file and a rename. Returns the file's path.
pub fn write(config: &Config, conf_dir: &Path) -> Result<PathBuf, Error> {
    let text = config.render()?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Write { path, source }
    };
    std::fs::create_dir_all(conf_dir).map_err(io(conf_dir))?;
    let path = conf_dir.join(CONFLIST_FILE);
    // Not `*.conflist`: containerd ignores the temporary file while it is being written.
    let tmp = conf_dir.join(format!(".{CONFLIST_FILE}.tmp"));
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cidr(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn renders_the_exact_conflist() {
        let c = Config::new(
            vec![cidr("10.244.7.0/24")],
            Path::new("/var/lib/k3rs/agent"),
        );
        let expected = r#"{
  "cniVersion": "1.0.0",
  "name": "k3rs",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [
          [
            {
              "subnet": "10.244.7.0/24",
              "gateway": "10.244.7.1"
            }
          ]
        ],
        "routes": [
          {
            "dst": "0.0.0.0/0"
          }
        ],
        "dataDir": "/var/lib/k3rs/agent/cni/networks"
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      },
      "snat": true
    }
  ]
}
"#;
        assert_eq!(c.render().unwrap(), expected);
    }

    #[test]
    fn an_overlay_mtu_is_the_bridges() {
        let mut c = Config::new(vec![cidr("10.42.3.0/24")], Path::new("/a"));
        c.mtu = Some(1450);
        let v: serde_json::Value = serde_json::from_str(&c.render().unwrap()).unwrap();
        assert_eq!(v["plugins"][0]["mtu"], 1450);
    }

    #[test]
    fn dual_stack_gets_a_range_and_a_default_route_per_family() {
        let c = Config::new(
            vec![cidr("10.42.3.0/24"), cidr("fd00:42:0:3::/64")],
            Path::new("/a"),
        );
        let v: serde_json::Value = serde_json::from_str(&c.render().unwrap()).unwrap();
        let ipam = &v["plugins"][0]["ipam"];
        assert_eq!(
            ipam["ranges"],
            json!([
                [{ "subnet": "10.42.3.0/24", "gateway": "10.42.3.1" }],
                [{ "subnet": "fd00:42:0:3::/64", "gateway": "fd00:42:0:3::1" }],
            ])
        );
        assert_eq!(
            ipam["routes"],
            json!([{ "dst": "0.0.0.0/0" }, { "dst": "::/0" }])
        );
        // The agent's rules are IPv4 only: the bridge masquerades for IPv6 pods.
        assert_eq!(v["plugins"][0]["ipMasq"], json!(true));
    }

    #[test]
    fn host_bits_are_dropped_and_tiny_or_missing_cidrs_refused() {
        let c = Config::new(vec![cidr("10.244.7.9/24")], Path::new("/a"));
        assert!(c
            .render()
            .unwrap()
            .contains("\"subnet\": \"10.244.7.0/24\""));
        let c = Config::new(vec![cidr("10.0.0.4/31")], Path::new("/a"));
        assert!(matches!(c.render(), Err(Error::CidrTooSmall(_))));
        let c = Config::new(vec![], Path::new("/a"));
        assert!(matches!(c.render(), Err(Error::NoPodCidr)));
    }

    #[test]
    fn write_replaces_the_file_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("net.d");
        let c = Config::new(vec![cidr("10.244.7.0/24")], dir.path());
        let path = write(&c, &conf).unwrap();
        assert_eq!(path, conf.join(CONFLIST_FILE));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), c.render().unwrap());
        let names: Vec<_> = std::fs::read_dir(&conf)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![CONFLIST_FILE.to_string()]);
    }
}
