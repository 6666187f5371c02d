//! The answer to one question, without I/O: CoreDNS's `kubernetes` plugin as k3s configures
//! it (`pods insecure`, TTL 5, reverse zones fall through), over an [`Index`].
//!
//! Names under the cluster zone (`cluster.local`):
//! - `<svc>.<ns>.svc`: the cluster IPs (A/AAAA), a headless Service's ready endpoint IPs, an
//!   ExternalName's CNAME; SRV: one record per port, targets the Service name (or, headless,
//!   each endpoint's name), with the addresses as additional records.
//! - `<endpoint>.<svc>.<ns>.svc`: the endpoint with that hostname (or dashed IP).
//! - `_<port>._<proto>.<svc>.<ns>.svc`: SRV for the named port.
//! - `<a-b-c-d>.<ns>.pod`: A `a.b.c.d`, unchecked (`pods insecure`).
//! - The zone apex answers SOA and NS; `svc`, `pod` and `<ns>.svc` of a namespace with
//!   Services exist without data (NOERROR, SOA in authority); anything else is NXDOMAIN.
//!
//! PTR for a cluster IP or endpoint IP answers its name; other reverse names, and every name
//! outside the zone, are forwarded upstream.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::index::{Index, Port, ServiceEntry, ServiceKind};

/// The TTL of every record (CoreDNS's default).
pub const TTL: u32 = 5;

/// The question's type, as far as the zone answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QType {
    /// `A`.
    A,
    /// `AAAA`.
    Aaaa,
    /// `CNAME`.
    Cname,
    /// `SRV`.
    Srv,
    /// `PTR`.
    Ptr,
    /// `SOA`.
    Soa,
    /// `NS`.
    Ns,
    /// `ANY`.
    Any,
    /// Anything else (answered with no data where the name exists).
    Other,
}

/// Record data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    /// An IPv4 address.
    A(Ipv4Addr),
    /// An IPv6 address.
    Aaaa(Ipv6Addr),
    /// A fully qualified target (trailing dot).
    Cname(String),
    /// A fully qualified name (trailing dot).
    Ptr(String),
    /// The zone's name server, fully qualified.
    Ns(String),
    /// A service port.
    Srv {
        /// Lower is preferred.
        priority: u16,
        /// The share among records of one priority.
        weight: u16,
        /// The port.
        port: u16,
        /// The fully qualified host.
        target: String,
    },
    /// The zone's start of authority.
    Soa {
        /// The primary name server.
        mname: String,
        /// The responsible mailbox, as a name.
        rname: String,
        /// The zone's version ([`crate::dns::index::Index::serial`]).
        serial: u32,
    },
}

/// One resource record; `name` fully qualified (trailing dot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The owner name.
    pub name: String,
    /// The type and its data.
    pub data: Data,
}

/// What to reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// An authoritative answer from the zone; `nxdomain` or no `answers` put the SOA in the
    /// authority section.
    Zone {
        /// The name does not exist in the zone.
        nxdomain: bool,
        /// The answer section.
        answers: Vec<Record>,
        /// The additional section (the targets' addresses of SRV answers).
        additionals: Vec<Record>,
        /// The zone's SOA record.
        soa: Record,
    },
    /// Not the zone's: ask the upstream resolvers.
    Forward,
}

fn fqdn(s: &str) -> String {
    format!("{}.", s.trim_end_matches('.'))
}

fn ip_record(name: &str, ip: IpAddr) -> Record {
    Record {
        name: fqdn(name),
        data: match ip {
            IpAddr::V4(v4) => Data::A(v4),
            IpAddr::V6(v6) => Data::Aaaa(v6),
        },
    }
}

fn wants(q: QType, ip: &IpAddr) -> bool {
    match q {
        QType::A => ip.is_ipv4(),
        QType::Aaaa => ip.is_ipv6(),
        QType::Any => true,
        _ => false,
    }
}

/// The IP a reverse name (`4.3.2.1.in-addr.arpa`, nibbles `.ip6.arpa`) stands for.
pub fn reverse_ip(name: &str) -> Option<IpAddr> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if let Some(rest) = name.strip_suffix(".in-addr.arpa") {
        let octets: Vec<u8> = rest
            .split('.')
            .rev()
            .map(|o| o.parse().ok())
            .collect::<Option<_>>()?;
        let octets: [u8; 4] = octets.try_into().ok()?;
        return Some(IpAddr::V4(Ipv4Addr::from(octets)));
    }
    let rest = name.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<u8> = rest
        .split('.')
        .rev()
        .map(|n| u8::from_str_radix(n, 16).ok().filter(|_| n.len() == 1))
        .collect::<Option<_>>()?;
    if nibbles.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, pair) in nibbles.chunks(2).enumerate() {
        bytes[i] = pair[0] << 4 | pair[1];
    }
    Some(IpAddr::V6(Ipv6Addr::from(bytes)))
}

/// `10-1-2-3` → `10.1.2.3`; an IPv6 address with `-` for `:`.
fn undashed(label: &str) -> Option<IpAddr> {
    if let Ok(v4) = label.replace('-', ".").parse::<Ipv4Addr>() {
        return Some(IpAddr::V4(v4));
    }
    label
        .replace('-', ":")
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

struct Zone<'a> {
    index: &'a Index,
    /// The zone, lower case, no trailing dot.
    domain: &'a str,
    /// The question's name as asked, fully qualified.
    qname: String,
    qtype: QType,
}

impl Zone<'_> {
    fn soa(&self) -> Record {
        Record {
            name: fqdn(self.domain),
            data: Data::Soa {
                mname: fqdn(&format!("ns.dns.{}", self.domain)),
                rname: fqdn(&format!("hostmaster.{}", self.domain)),
                serial: self.index.serial,
            },
        }
    }

    fn reply(&self, answers: Vec<Record>, additionals: Vec<Record>) -> Answer {
        Answer::Zone {
            nxdomain: false,
            answers,
            additionals,
            soa: self.soa(),
        }
    }

    fn nodata(&self) -> Answer {
        self.reply(Vec::new(), Vec::new())
    }

    fn nxdomain(&self) -> Answer {
        Answer::Zone {
            nxdomain: true,
            answers: Vec::new(),
            additionals: Vec::new(),
            soa: self.soa(),
        }
    }

    fn svc_name(&self, svc: &str, ns: &str) -> String {
        fqdn(&format!("{svc}.{ns}.svc.{}", self.domain))
    }

    fn apex(&self) -> Answer {
        match self.qtype {
            QType::Soa => self.reply(vec![self.soa()], Vec::new()),
            QType::Ns => {
                let ns = Record {
                    name: fqdn(self.domain),
                    data: Data::Ns(fqdn(&format!("ns.dns.{}", self.domain))),
                };
                self.reply(vec![ns], Vec::new())
            }
            _ => self.nodata(),
        }
    }

    fn service(&self, ns: &str, svc: &str, entry: &ServiceEntry) -> Answer {
        let name = self.qname.as_str();
        if let ServiceKind::ExternalName(target) = &entry.kind {
            let cname = Record {
                name: name.to_string(),
                data: Data::Cname(fqdn(target)),
            };
            return self.reply(vec![cname], Vec::new());
        }
        if self.qtype == QType::Srv {
            let ports: Vec<&Port> = match &entry.kind {
                ServiceKind::Headless => Vec::new(),
                _ => entry.ports.iter().collect(),
            };
            return self.srv(ns, svc, entry, |_| true, &ports);
        }
        let ips: Vec<IpAddr> = match &entry.kind {
            ServiceKind::ClusterIp(ips) => ips.clone(),
            _ => entry.endpoints.iter().map(|e| e.ip).collect(),
        };
        let answers = ips
            .into_iter()
            .filter(|ip| wants(self.qtype, ip))
            .map(|ip| ip_record(name, ip))
            .collect();
        self.reply(answers, Vec::new())
    }

    /// SRV records for the ports `matches` selects: of the Service (`cluster_ports`, target
    /// the Service) or, headless, of each endpoint (target the endpoint).
    fn srv(
        &self,
        ns: &str,
        svc: &str,
        entry: &ServiceEntry,
        matches: impl Fn(&Port) -> bool,
        cluster_ports: &[&Port],
    ) -> Answer {
        let mut targets: Vec<(u16, String, Vec<IpAddr>)> = Vec::new();
        match &entry.kind {
            ServiceKind::ClusterIp(ips) => {
                for p in cluster_ports.iter().filter(|p| matches(p)) {
                    targets.push((p.port, self.svc_name(svc, ns), ips.clone()));
                }
            }
            _ => {
                for ep in &entry.endpoints {
                    for p in ep.ports.iter().filter(|p| matches(p)) {
                        let target = fqdn(&format!("{}.{svc}.{ns}.svc.{}", ep.name, self.domain));
                        targets.push((p.port, target, vec![ep.ip]));
                    }
                }
            }
        }
        // CoreDNS splits a weight of 100 evenly between records of equal priority.
        let weight = u16::try_from(100 / targets.len().max(1)).unwrap_or(100);
        let mut answers = Vec::new();
        let mut additionals: Vec<Record> = Vec::new();
        for (port, target, ips) in targets {
            answers.push(Record {
                name: self.qname.clone(),
                data: Data::Srv {
                    priority: 0,
                    weight,
                    port,
                    target: target.clone(),
                },
            });
            for ip in ips {
                let r = ip_record(&target, ip);
                if !additionals.contains(&r) {
                    additionals.push(r);
                }
            }
        }
        self.reply(answers, additionals)
    }

    fn under_svc(&self, labels: &[&str]) -> Answer {
        let lookup =
            |svc: &str, ns: &str| self.index.services.get(&(ns.to_string(), svc.to_string()));
        match labels {
            [] => self.nodata(),
            [ns] if self.index.namespaces.contains(*ns) => self.nodata(),
            [svc, ns] => match lookup(svc, ns) {
                Some(entry) => self.service(ns, svc, entry),
                None => self.nxdomain(),
            },
            [port, proto, svc, ns] if port.starts_with('_') && proto.starts_with('_') => {
                let Some(entry) = lookup(svc, ns) else {
                    return self.nxdomain();
                };
                let (port, proto) = (&port[1..], &proto[1..]);
                let matches = |p: &Port| p.name == port && p.protocol == proto;
                let ports: Vec<&Port> = entry.ports.iter().collect();
                let any = match &entry.kind {
                    ServiceKind::ClusterIp(_) => ports.iter().any(|p| matches(p)),
                    _ => entry.endpoints.iter().any(|e| e.ports.iter().any(matches)),
                };
                if !any {
                    return self.nxdomain();
                }
                if self.qtype != QType::Srv {
                    return self.nodata();
                }
                self.srv(ns, svc, entry, matches, &ports)
            }
            [endpoint, svc, ns] => {
                let found = lookup(svc, ns)
                    .map(|e| e.endpoints.iter().filter(|e| e.name == *endpoint))
                    .into_iter()
                    .flatten()
                    .map(|e| e.ip)
                    .collect::<Vec<_>>();
                if found.is_empty() {
                    return self.nxdomain();
                }
                let answers = found
                    .into_iter()
                    .filter(|ip| wants(self.qtype, ip))
                    .map(|ip| ip_record(&self.qname, ip))
                    .collect();
                self.reply(answers, Vec::new())
            }
            _ => self.nxdomain(),
        }
    }

    fn under_pod(&self, labels: &[&str]) -> Answer {
        match labels {
            [] => self.nodata(),
            [ip, _ns] => match undashed(ip) {
                Some(ip) => {
                    let answers = [ip]
                        .into_iter()
                        .filter(|ip| wants(self.qtype, ip))
                        .map(|ip| ip_record(&self.qname, ip))
                        .collect();
                    self.reply(answers, Vec::new())
                }
                None => self.nxdomain(),
            },
            _ => self.nxdomain(),
        }
    }
}

/// The answer to `qname` (as asked, any case) of type `qtype` for the zone `domain`
/// (`cluster.local`) holding `index`.
pub fn answer(index: &Index, domain: &str, qname: &str, qtype: QType) -> Answer {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let lower = qname.trim_end_matches('.').to_ascii_lowercase();
    let zone = Zone {
        index,
        domain: &domain,
        qname: fqdn(qname),
        qtype,
    };
    if let Some(ip) = reverse_ip(&lower) {
        return match index.reverse.get(&ip).filter(|_| qtype == QType::Ptr) {
            Some(name) => {
                let ptr = Record {
                    name: zone.qname.clone(),
                    data: Data::Ptr(fqdn(&format!("{name}.svc.{domain}"))),
                };
                zone.reply(vec![ptr], Vec::new())
            }
            None => Answer::Forward,
        };
    }
    let prefix = if lower == domain {
        ""
    } else if let Some(p) = lower.strip_suffix(&format!(".{domain}")) {
        p
    } else {
        return Answer::Forward;
    };
    // Labels from the zone outwards: `svc`/`pod` first.
    let mut labels: Vec<&str> = prefix.split('.').filter(|l| !l.is_empty()).collect();
    labels.reverse();
    match labels.split_first() {
        None => zone.apex(),
        Some((&"svc", rest)) => {
            let mut rest = rest.to_vec();
            rest.reverse();
            zone.under_svc(&rest)
        }
        Some((&"pod", rest)) => {
            let mut rest = rest.to_vec();
            rest.reverse();
            zone.under_pod(&rest)
        }
        Some(_) => zone.nxdomain(),
    }
}
