//! `networking.k8s.io/v1`: Ingress (rules, paths, backends), IngressClass (controller,
//! parameters) and NetworkPolicy (policyTypes defaulting, peers, ports), with
//! kube-apiserver's field paths.

use serde_json::{json, Value};

use super::{default_field, immutable};
use k3rs_apimachinery::catalog::NameRule;
use k3rs_apimachinery::status::Cause;
use k3rs_apimachinery::validation::{is_dns1035_label, is_dns1123_subdomain, validate_name};

const PORT_RANGE_MSG: &str = "must be between 1 and 65535, inclusive";
const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];

/// An empty status on create (`IngressStatus{}`).
pub fn ingress_initial_status() -> Value {
    json!({ "loadBalancer": {} })
}

/// `IsValidPortName`: an IANA service name.
fn port_name_error(name: &str) -> Option<&'static str> {
    if name.len() > 15 {
        return Some("must be no more than 15 characters");
    }
    let b = name.as_bytes();
    if !b
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    {
        return Some("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !b.iter().any(u8::is_ascii_lowercase) {
        return Some("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        return Some("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Some("must not begin or end with a hyphen");
    }
    None
}

fn validate_backend(b: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let (resource, service) = (b["resource"].is_object(), b["service"].is_object());
    match (resource, service) {
        (true, true) => causes.push(Cause::invalid(
            path,
            "",
            "cannot set both resource and service backends",
        )),
        (true, false) => {
            let r = &b["resource"];
            for f in ["kind", "name"] {
                if r[f].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::required(format!("{path}.resource.{f}"), ""));
                }
            }
        }
        (false, true) => {
            let s = &b["service"];
            match s["name"].as_str().unwrap_or("") {
                "" => causes.push(Cause::required(format!("{path}.service.name"), "")),
                n if !is_dns1035_label(n) => causes.extend(validate_name(
                    n,
                    NameRule::Rfc1035Label,
                    &format!("{path}.service.name"),
                )),
                _ => {}
            }
            let name = s["port"]["name"].as_str().unwrap_or("");
            let number = s["port"]["number"].as_i64().unwrap_or(0);
            match (name.is_empty(), number != 0) {
                (false, true) => causes.push(Cause::invalid(
                    path,
                    "",
                    "cannot set both port name & port number",
                )),
                (false, false) => {
                    if let Some(msg) = port_name_error(name) {
                        causes.push(Cause::invalid(
                            format!("{path}.service.port.name"),
                            name,
                            msg,
                        ));
                    }
                }
                (true, true) => {
                    if !(1..=65535).contains(&number) {
                        causes.push(Cause::invalid(
                            format!("{path}.service.port.number"),
                            &number.to_string(),
                            PORT_RANGE_MSG,
                        ));
                    }
                }
                (true, false) => {
                    causes.push(Cause::required(path, "port name or number is required"))
                }
            }
        }
        (false, false) => causes.push(Cause::invalid(
            path,
            "",
            "resource or service backend is required",
        )),
    }
    causes
}

fn validate_path(p: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let path = p["path"].as_str().unwrap_or("");
    match p["pathType"].as_str() {
        None => {
            return vec![Cause::required(
                format!("{at}.pathType"),
                "pathType must be specified",
            )]
        }
        Some("Exact" | "Prefix") => {
            if !path.starts_with('/') {
                causes.push(Cause::invalid(
                    format!("{at}.path"),
                    path,
                    "must be an absolute path",
                ));
            }
            for seq in ["//", "/./", "/../", "%2f", "%2F"] {
                if path.contains(seq) {
                    causes.push(Cause::invalid(
                        format!("{at}.path"),
                        path,
                        &format!("must not contain '{seq}'"),
                    ));
                }
            }
            for suffix in ["/..", "/."] {
                if path.ends_with(suffix) {
                    causes.push(Cause::invalid(
                        format!("{at}.path"),
                        path,
                        &format!("cannot end with '{suffix}'"),
                    ));
                }
            }
        }
        Some("ImplementationSpecific") => {
            if !path.is_empty() && !path.starts_with('/') {
                causes.push(Cause::invalid(
                    format!("{at}.path"),
                    path,
                    "must be an absolute path",
                ));
            }
        }
        Some(other) => causes.push(Cause::not_supported(
            format!("{at}.pathType"),
            other,
            &["Exact", "ImplementationSpecific", "Prefix"],
        )),
    }
    causes.extend(validate_backend(&p["backend"], &format!("{at}.backend")));
    causes
}

fn validate_host(host: &str, at: &str) -> Vec<Cause> {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return vec![Cause::invalid(
            at,
            host,
            "must be a DNS name, not an IP address",
        )];
    }
    let plain = host.strip_prefix("*.").unwrap_or(host);
    if is_dns1123_subdomain(plain) {
        return Vec::new();
    }
    if host.contains('*') {
        return vec![Cause::invalid(
            at,
            host,
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        )];
    }
    validate_name(host, NameRule::Subdomain, at)
}

pub fn ingress_validate(ing: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &ing["spec"];
    let rules = spec["rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let default_backend = &spec["defaultBackend"];
    if rules.is_empty() && !default_backend.is_object() {
        causes.push(Cause::invalid(
            "spec",
            "[]",
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if default_backend.is_object() {
        causes.extend(validate_backend(default_backend, "spec.defaultBackend"));
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("spec.rules[{i}]");
        if let Some(host) = rule["host"].as_str().filter(|h| !h.is_empty()) {
            causes.extend(validate_host(host, &format!("{at}.host")));
        }
        if rule["http"].is_object() {
            let paths = rule["http"]["paths"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            if paths.is_empty() {
                causes.push(Cause::required(format!("{at}.http.paths"), ""));
            }
            for (j, p) in paths.iter().enumerate() {
                causes.extend(validate_path(p, &format!("{at}.http.paths[{j}]")));
            }
        }
    }
    if let Some(class) = spec["ingressClassName"].as_str() {
        causes.extend(validate_name(
            class,
            NameRule::Subdomain,
            "spec.ingressClassName",
        ));
    }
    causes
}

/// `spec.parameters.scope` defaults to `Cluster`.
pub fn ingressclass_defaults(ic: &mut Value) {
    if let Some(p) = ic["spec"].get_mut("parameters").filter(|p| p.is_object()) {
        default_field(p, "scope", json!("Cluster"));
    }
}

pub fn ingressclass_validate(ic: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &ic["spec"];
    match spec["controller"].as_str().unwrap_or("") {
        "" => causes.push(Cause::required("spec.controller", "")),
        c if c.len() > 250 => causes.push(Cause::too_long("spec.controller", 250)),
        c => {
            let (domain, rest) = c.split_once('/').unwrap_or((c, ""));
            if rest.is_empty() || !is_dns1123_subdomain(domain) {
                causes.push(Cause::invalid(
                    "spec.controller",
                    c,
                    "must be a domain-prefixed path (such as \"acme.io/foo\")",
                ));
            }
        }
    }
    let p = &spec["parameters"];
    if p.is_object() {
        for f in ["kind", "name"] {
            if p[f].as_str().is_none_or(str::is_empty) {
                causes.push(Cause::required(format!("spec.parameters.{f}"), ""));
            }
        }
        let ns = p["namespace"].as_str().unwrap_or("");
        match p["scope"].as_str().unwrap_or("") {
            "Cluster" if !ns.is_empty() => causes.push(Cause::forbidden(
                "spec.parameters.namespace",
                "`parameters.scope` is set to 'Cluster'",
            )),
            "Namespace" if ns.is_empty() => causes.push(Cause::required(
                "spec.parameters.namespace",
                "`parameters.scope` is set to 'Namespace'",
            )),
            "Cluster" | "Namespace" => {}
            other => causes.push(Cause::not_supported(
                "spec.parameters.scope",
                other,
                &["Cluster", "Namespace"],
            )),
        }
    }
    causes
}

pub fn ingressclass_validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    immutable(new, old, "spec.controller")
}

/// `policyTypes` from what the policy names (Ingress always, Egress with egress rules) and
/// `TCP` for ports without a protocol.
pub fn networkpolicy_defaults(np: &mut Value) {
    let Some(spec) = np.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if spec["policyTypes"].as_array().is_none_or(Vec::is_empty) {
        let mut types = vec![json!("Ingress")];
        if spec["egress"].as_array().is_some_and(|e| !e.is_empty()) {
            types.push(json!("Egress"));
        }
        spec["policyTypes"] = Value::Array(types);
    }
    for dir in ["ingress", "egress"] {
        for rule in spec[dir].as_array_mut().into_iter().flatten() {
            for port in rule["ports"].as_array_mut().into_iter().flatten() {
                default_field(port, "protocol", json!("TCP"));
            }
        }
    }
}

fn validate_np_port(p: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(proto) = p["protocol"].as_str() {
        if !PROTOCOLS.contains(&proto) {
            causes.push(Cause::not_supported(
                format!("{at}.protocol"),
                proto,
                &PROTOCOLS,
            ));
        }
    }
    let end = &p["endPort"];
    match &p["port"] {
        Value::Number(n) => {
            let port = n.as_i64().unwrap_or(0);
            if !(1..=65535).contains(&port) {
                causes.push(Cause::invalid(
                    format!("{at}.port"),
                    &port.to_string(),
                    PORT_RANGE_MSG,
                ));
            }
            if let Some(e) = end.as_i64() {
                if e < port {
                    causes.push(Cause::invalid(
                        format!("{at}.endPort"),
                        &e.to_string(),
                        "must be greater than or equal to `port`",
                    ));
                }
            }
        }
        Value::String(name) => {
            if end.is_number() {
                causes.push(Cause::invalid(
                    format!("{at}.endPort"),
                    &end.to_string(),
                    "may not be specified when `port` is non-numeric",
                ));
            }
            if let Some(msg) = port_name_error(name) {
                causes.push(Cause::invalid(format!("{at}.port"), name, msg));
            }
        }
        _ if end.is_number() => causes.push(Cause::invalid(
            format!("{at}.endPort"),
            &end.to_string(),
            "may not be specified when `port` is not specified",
        )),
        _ => {}
    }
    causes
}

fn validate_peer(peer: &Value, at: &str) -> Vec<Cause> {
    let has = |f: &str| peer[f].is_object();
    let peers = ["podSelector", "namespaceSelector", "ipBlock"]
        .iter()
        .filter(|f| has(f))
        .count();
    let mut causes = Vec::new();
    if peers == 0 {
        causes.push(Cause::required(at, "must specify a peer"));
    } else if peers > 1 && has("ipBlock") {
        causes.push(Cause::forbidden(
            at,
            "may not specify both ipBlock and another peer",
        ));
    }
    if has("ipBlock") {
        let cidr = peer["ipBlock"]["cidr"].as_str().unwrap_or("");
        if cidr.is_empty() {
            causes.push(Cause::required(format!("{at}.ipBlock.cidr"), ""));
        } else if cidr.parse::<ipnet::IpNet>().is_err() {
            causes.push(Cause::invalid(
                format!("{at}.ipBlock.cidr"),
                cidr,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ));
        }
    }
    causes
}

pub fn networkpolicy_validate(np: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &np["spec"];
    for (dir, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in spec[dir].as_array().into_iter().flatten().enumerate() {
            let at = format!("spec.{dir}[{i}]");
            for (j, p) in rule["ports"].as_array().into_iter().flatten().enumerate() {
                causes.extend(validate_np_port(p, &format!("{at}.ports[{j}]")));
            }
            for (j, p) in rule[peers].as_array().into_iter().flatten().enumerate() {
                causes.extend(validate_peer(p, &format!("{at}.{peers}[{j}]")));
            }
        }
    }
    let types = spec["policyTypes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if types.len() > 2 {
        causes.push(Cause::invalid(
            "spec.policyTypes",
            &Value::Array(types.to_vec()).to_string(),
            "may not specify more than two policyTypes",
        ));
    } else {
        for (i, t) in types.iter().enumerate() {
            let t = t.as_str().unwrap_or("");
            if t != "Ingress" && t != "Egress" {
                causes.push(Cause::not_supported(
                    format!("spec.policyTypes[{i}]"),
                    t,
                    &["Ingress", "Egress"],
                ));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::super::fields;
    use super::*;

    fn ingress(paths: Value) -> Value {
        json!({"spec": {"rules": [{"host": "app.example.com", "http": {"paths": paths}}]}})
    }

    #[test]
    fn valid_ingress() {
        let ing = ingress(json!([{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]));
        assert!(
            ingress_validate(&ing).is_empty(),
            "{:?}",
            ingress_validate(&ing)
        );
        assert!(ingress_validate(&json!({"spec": {"defaultBackend": {"service": {"name": "web", "port": {"name": "http"}}}}})).is_empty());
    }

    #[test]
    fn ingress_paths_and_backends() {
        let ing = ingress(json!([
            {"path": "api", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 70000}}}},
            {"path": "/", "backend": {}},
            {"path": "/", "pathType": "Regex", "backend": {"service": {"name": "web"}}},
        ]));
        assert_eq!(
            fields(ingress_validate(&ing)),
            [
                "spec.rules[0].http.paths[0].path",
                "spec.rules[0].http.paths[0].backend.service.port.number",
                "spec.rules[0].http.paths[1].pathType",
                "spec.rules[0].http.paths[2].pathType",
                "spec.rules[0].http.paths[2].backend",
            ]
        );
        let c = ingress_validate(&json!({"spec": {}}));
        assert_eq!(
            c[0].message,
            "Invalid value: \"[]\": either `defaultBackend` or `rules` must be specified"
        );
        let ip = json!({"spec": {"rules": [{"host": "10.0.0.1"}]}});
        assert_eq!(fields(ingress_validate(&ip)), ["spec.rules[0].host"]);
        let wild = json!({"spec": {"rules": [{"host": "*.example.com"}]}});
        assert!(ingress_validate(&wild).is_empty());
    }

    #[test]
    fn ingressclass() {
        let mut ic = json!({"spec": {"controller": "k8s.io/ingress-nginx",
            "parameters": {"kind": "Params", "name": "p"}}});
        ingressclass_defaults(&mut ic);
        assert_eq!(ic["spec"]["parameters"]["scope"], "Cluster");
        assert!(ingressclass_validate(&ic).is_empty());
        assert_eq!(
            fields(ingressclass_validate(
                &json!({"spec": {"controller": "nginx"}})
            )),
            ["spec.controller"]
        );
        assert_eq!(
            ingressclass_validate(&json!({"spec": {}}))[0].reason,
            "FieldValueRequired"
        );
        let mut new = ic.clone();
        new["spec"]["controller"] = json!("example.com/other");
        assert_eq!(
            fields(ingressclass_validate_update(&new, &ic)),
            ["spec.controller"]
        );
    }

    #[test]
    fn networkpolicy_defaults_are_upstreams() {
        let mut np = json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}});
        networkpolicy_defaults(&mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        let mut np = json!({"spec": {"podSelector": {}}});
        networkpolicy_defaults(&mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
        assert!(networkpolicy_validate(&np).is_empty());
    }

    #[test]
    fn networkpolicy_peers_and_ports() {
        let np = json!({"spec": {"podSelector": {}, "policyTypes": ["Sideways"],
            "ingress": [{"from": [{}, {"ipBlock": {"cidr": "10.0.0.0/33"}, "podSelector": {}}],
                "ports": [{"port": 0, "protocol": "ICMP"}, {"port": "http", "endPort": 90}]}]}});
        assert_eq!(
            fields(networkpolicy_validate(&np)),
            [
                "spec.ingress[0].ports[0].protocol",
                "spec.ingress[0].ports[0].port",
                "spec.ingress[0].ports[1].endPort",
                "spec.ingress[0].from[0]",
                "spec.ingress[0].from[1]",
                "spec.ingress[0].from[1].ipBlock.cidr",
                "spec.policyTypes[0]",
            ]
        );
    }
}
