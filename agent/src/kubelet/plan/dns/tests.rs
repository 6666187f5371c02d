use super::*;
use crate::kubelet::plan::spec::tests::pod;
use serde_json::json;

const HOST_RESOLV: &str = "# generated\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n\
    search corp.example. lab.example .\noptions timeout:2 ndots:1\noptions attempts:3 timeout:1\n";

fn node() -> NodeDns {
    NodeDns {
        cluster_dns: vec!["10.43.0.10".parse().unwrap()],
        cluster_domain: "cluster.local".into(),
        host: Some(parse_resolv_conf(HOST_RESOLV)),
        node_ips: vec!["192.0.2.10".parse().unwrap()],
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn resolv_conf_parsing() {
    assert_eq!(
        parse_resolv_conf(HOST_RESOLV),
        DnsConfig {
            servers: strs(&["192.0.2.53", "192.0.2.54"]),
            searches: strs(&["corp.example", "lab.example"]),
            options: strs(&["timeout:1", "ndots:1", "attempts:3"]),
        }
    );
    assert_eq!(
        parse_resolv_conf("search a.example\nsearch b.example\nnameserver\n"),
        DnsConfig {
            searches: strs(&["b.example"]),
            ..Default::default()
        }
    );
}

#[test]
fn cluster_first_uses_the_cluster_dns_and_search_path() {
    let p = pod(json!({"metadata": {"namespace": "shop"}}));
    assert_eq!(
        pod_dns(&p, &node()),
        DnsConfig {
            servers: strs(&["10.43.0.10"]),
            searches: strs(&[
                "shop.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
                "lab.example"
            ]),
            options: strs(&["ndots:5"]),
        }
    );
}

#[test]
fn host_network_and_default_use_the_hosts_resolver() {
    let host = parse_resolv_conf(HOST_RESOLV);
    let hn = pod(json!({"spec": {"hostNetwork": true}}));
    assert_eq!(pod_dns(&hn, &node()), host);
    let default = pod(json!({"spec": {"dnsPolicy": "Default"}}));
    assert_eq!(pod_dns(&default, &node()), host);
    let with_host_net =
        pod(json!({"spec": {"hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet"}}));
    assert_eq!(
        pod_dns(&with_host_net, &node()).servers,
        strs(&["10.43.0.10"])
    );
    // No cluster DNS configured: ClusterFirst falls back to the host's.
    let mut no_cluster = node();
    no_cluster.cluster_dns.clear();
    assert_eq!(pod_dns(&pod(json!({})), &no_cluster), host);
    // No host resolv.conf either: the loopback resolver.
    no_cluster.host = None;
    assert_eq!(
        pod_dns(&pod(json!({})), &no_cluster),
        DnsConfig {
            servers: strs(&["127.0.0.1"]),
            searches: strs(&["."]),
            options: vec![],
        }
    );
}

#[test]
fn none_takes_only_the_pods_dns_config_and_config_merges() {
    let p = pod(json!({"spec": {"dnsPolicy": "None", "dnsConfig": {
        "nameservers": ["1.1.1.1"], "searches": ["my.dns.search"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}}}));
    assert_eq!(
        pod_dns(&p, &node()),
        DnsConfig {
            servers: strs(&["1.1.1.1"]),
            searches: strs(&["my.dns.search"]),
            options: strs(&["ndots:2", "edns0"]),
        }
    );
    let p = pod(json!({"spec": {"dnsConfig": {
        "nameservers": ["10.43.0.10", "1.1.1.1", "8.8.8.8", "9.9.9.9"],
        "searches": ["svc.cluster.local", "extra.example"],
        "options": [{"name": "ndots", "value": "1"}]}}}));
    assert_eq!(
        pod_dns(&p, &node()),
        DnsConfig {
            servers: strs(&["10.43.0.10", "1.1.1.1", "8.8.8.8"]),
            searches: strs(&[
                "default.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
                "lab.example",
                "extra.example"
            ]),
            options: strs(&["ndots:1"]),
        }
    );
}

#[test]
fn search_limits() {
    let long = "x".repeat(254);
    let many: Vec<String> = (0..40).map(|i| format!("d{i}.example")).collect();
    let mut searches = vec![long];
    searches.extend(many);
    let p = pod(json!({"spec": {"dnsPolicy": "None", "dnsConfig": {"searches": searches}}}));
    let c = pod_dns(&p, &node());
    // 32 kept, then the over-long one dropped.
    assert_eq!(c.searches.len(), 31);
    assert_eq!(c.searches[0], "d0.example");
    let wide: Vec<String> = (0..20)
        .map(|i| format!("{i:02}{}", "y".repeat(150)))
        .collect();
    let p = pod(json!({"spec": {"dnsPolicy": "None", "dnsConfig": {"searches": wide}}}));
    let c = pod_dns(&p, &node());
    // 152 characters each plus a space: 13 fit in 2048.
    assert_eq!(c.searches.len(), 13);
}

#[test]
fn hostnames() {
    assert_eq!(
        hostname_and_domain(&pod(json!({})), "cluster.local"),
        ("web".to_string(), None)
    );
    let p = pod(json!({"metadata": {"namespace": "db"},
        "spec": {"hostname": "db-0", "subdomain": "pg"}}));
    assert_eq!(
        hostname_and_domain(&p, "cluster.local"),
        (
            "db-0".to_string(),
            Some("pg.db.svc.cluster.local".to_string())
        )
    );
    let name = format!("{}-.-tail", "a".repeat(61));
    let p = pod(json!({"metadata": {"name": name}}));
    assert_eq!(hostname_and_domain(&p, "cluster.local").0, "a".repeat(61));
}
