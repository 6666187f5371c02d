//! EndpointSlice (`discovery.k8s.io/v1`): port defaults (`name: ""`, `protocol: TCP`),
//! addressType, addresses by type, ports, and the immutable addressType.

use std::net::IpAddr;

use serde_json::{json, Value};

use super::{default_field, immutable};
use k3rs_apimachinery::catalog::NameRule;
use k3rs_apimachinery::status::Cause;
use k3rs_apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain, validate_name};

const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 100;

pub fn defaults(es: &mut Value) {
    for p in es["ports"].as_array_mut().into_iter().flatten() {
        default_field(p, "name", json!(""));
        default_field(p, "protocol", json!("TCP"));
    }
}

/// `ValidateNonSpecialIP`: endpoints may not point at unspecified, loopback or link-local
/// addresses.
fn special_ip(ip: IpAddr) -> Option<&'static str> {
    let link_local_mc = match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    };
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    };
    if ip.is_unspecified() {
        Some("may not be unspecified (0.0.0.0)")
    } else if ip.is_loopback() {
        Some("may not be in the loopback range (127.0.0.0/8, ::1/128)")
    } else if link_local {
        Some("may not be in the link-local range (169.254.0.0/16, fe80::/10)")
    } else if link_local_mc {
        Some("may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")
    } else {
        None
    }
}

fn validate_address(kind: &str, addr: &str, at: &str) -> Option<Cause> {
    let ip = addr.parse::<IpAddr>();
    let bad = |msg: &str| Some(Cause::invalid(at, addr, msg));
    match kind {
        "IPv4" => match ip {
            Ok(ip @ IpAddr::V4(_)) => special_ip(ip).and_then(bad),
            _ => bad("must be a valid IPv4 address"),
        },
        "IPv6" => match ip {
            Ok(ip @ IpAddr::V6(_)) => special_ip(ip).and_then(bad),
            _ => bad("must be a valid IPv6 address"),
        },
        "FQDN" if !(addr.contains('.') && is_dns1123_subdomain(addr)) => {
            bad("should be a domain with at least two segments separated by dots")
        }
        _ => None,
    }
}

pub fn validate(es: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let kind = es["addressType"].as_str().unwrap_or("");
    let endpoints = es["endpoints"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if endpoints.len() > MAX_ENDPOINTS {
        causes.push(too_many("endpoints", endpoints.len(), MAX_ENDPOINTS));
    }
    for (i, ep) in endpoints.iter().enumerate() {
        let at = format!("endpoints[{i}].addresses");
        let addrs = ep["addresses"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if addrs.is_empty() {
            causes.push(Cause::required(&at, "must contain at least 1 address"));
        } else if addrs.len() > MAX_ADDRESSES {
            causes.push(too_many(&at, addrs.len(), MAX_ADDRESSES));
        }
        for (j, a) in addrs.iter().enumerate() {
            let addr = a.as_str().unwrap_or("");
            causes.extend(validate_address(kind, addr, &format!("{at}[{j}]")));
        }
        if let Some(h) = ep["hostname"].as_str() {
            if !is_dns1123_label(h) {
                causes.extend(validate_name(
                    h,
                    NameRule::Label,
                    &format!("endpoints[{i}].hostname"),
                ));
            }
        }
    }
    match kind {
        "" => causes.push(Cause::required("addressType", "")),
        "IPv4" | "IPv6" | "FQDN" => {}
        other => causes.push(Cause::not_supported(
            "addressType",
            other,
            &["FQDN", "IPv4", "IPv6"],
        )),
    }
    let ports = es["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if ports.len() > MAX_PORTS {
        causes.push(too_many("ports", ports.len(), MAX_PORTS));
    }
    let mut names = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let name = p["name"].as_str().unwrap_or("");
        if !name.is_empty() && !is_dns1123_label(name) {
            causes.extend(validate_name(
                name,
                NameRule::Label,
                &format!("ports[{i}].name"),
            ));
        }
        if names.contains(&name) {
            causes.push(Cause::duplicate(format!("ports[{i}].name"), name));
        }
        names.push(name);
        match p["protocol"].as_str() {
            None => causes.push(Cause::required(format!("ports[{i}].protocol"), "")),
            Some("TCP" | "UDP" | "SCTP") => {}
            Some(other) => causes.push(Cause::not_supported(
                format!("ports[{i}].protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
    causes
}

fn too_many(field: &str, actual: usize, max: usize) -> Cause {
    Cause {
        reason: "FieldValueTooMany",
        field: field.to_string(),
        message: format!("Too many: {actual}: must have at most {max} items"),
    }
}

pub fn validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    immutable(new, old, "addressType")
}

#[cfg(test)]
mod tests {
    use super::super::fields;
    use super::*;

    #[test]
    fn port_defaults() {
        let mut es = json!({"addressType": "IPv4", "ports": [{"port": 80}]});
        defaults(&mut es);
        assert_eq!(
            es["ports"][0],
            json!({"port": 80, "name": "", "protocol": "TCP"})
        );
        assert!(validate(&es).is_empty());
    }

    #[test]
    fn addresses_by_type() {
        let es = json!({"addressType": "IPv4", "endpoints": [
            {"addresses": ["10.42.0.5", "fe80::1", "127.0.0.1"]}, {"addresses": []}]});
        let c = validate(&es);
        assert_eq!(
            fields(c.clone()),
            [
                "endpoints[0].addresses[1]",
                "endpoints[0].addresses[2]",
                "endpoints[1].addresses"
            ]
        );
        assert_eq!(
            c[0].message,
            "Invalid value: \"fe80::1\": must be a valid IPv4 address"
        );
        assert_eq!(
            c[1].message,
            "Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)"
        );
        let es = json!({"addressType": "Mac", "ports": [{"name": "a", "protocol": "TCP"}, {"name": "a", "protocol": "ICMP"}]});
        assert_eq!(
            fields(validate(&es)),
            ["addressType", "ports[1].name", "ports[1].protocol"]
        );
        assert_eq!(fields(validate(&json!({}))), ["addressType"]);
    }

    #[test]
    fn address_type_is_immutable() {
        let old = json!({"addressType": "IPv4"});
        assert_eq!(
            validate_update(&json!({"addressType": "IPv6"}), &old)[0].message,
            "Invalid value: \"IPv6\": field is immutable"
        );
    }
}
