//! Exact-output tests of [`super::build`]. Chain hashes were computed independently
//! (`base32(sha256("ns/web:httptcp"))[:16]` = `HMALVVKA6APKJPPY`, and so on).

use super::*;
use serde_json::json;

const SVC: &str = "KUBE-SVC-HMALVVKA6APKJPPY";
const SVL: &str = "KUBE-SVL-HMALVVKA6APKJPPY";
const EXT: &str = "KUBE-EXT-HMALVVKA6APKJPPY";
const SEP1: &str = "KUBE-SEP-VYAF4HLGBXJBID2Z";
const SEP2: &str = "KUBE-SEP-QD6GZUMJT3HIZAKB";
const SEP3: &str = "KUBE-SEP-NZ2PDRQROWFXCRD6";
const NO_RULES: &[&str] = &[];

fn ctx() -> NodeContext {
    NodeContext {
        node_name: "n1".into(),
        cluster_cidr: Some("10.42.0.0/16".parse().unwrap()),
    }
}

fn service(spec: serde_json::Value) -> Service {
    let mut spec = spec;
    spec["clusterIP"] = json!("10.43.0.10");
    if spec.get("ports").is_none() {
        spec["ports"] = json!([{"name": "http", "port": 80}]);
    }
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": spec,
    }))
    .unwrap()
}

/// A slice for `ns/web` port `http` 8080 with endpoints `(last octet, ready, node)`.
fn slice(eps: &[(u8, bool, &str)]) -> EndpointSlice {
    let endpoints: Vec<serde_json::Value> = eps
        .iter()
        .map(|(last, ready, node)| {
            json!({"addresses": [format!("10.42.0.{last}")],
                   "conditions": {"ready": ready}, "nodeName": node})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "web-abc", "namespace": "ns",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }))
    .unwrap()
}

/// The full output with the given per-service lines spliced into the fixed frame.
fn expected<S: AsRef<str>>(filter_rules: &[&str], nat_chains: &[&str], nat_rules: &[S]) -> String {
    let mut out = String::from(
        "*filter\n\
         :KUBE-SERVICES - [0:0]\n\
         :KUBE-EXTERNAL-SERVICES - [0:0]\n\
         :KUBE-FORWARD - [0:0]\n\
         :KUBE-NODEPORTS - [0:0]\n",
    );
    for l in filter_rules {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(
        "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n\
         -A KUBE-FORWARD -m comment --comment \"kubernetes forwarding rules\" -m mark --mark 0x4000/0x4000 -j ACCEPT\n\
         -A KUBE-FORWARD -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n\
         COMMIT\n\
         *nat\n\
         :KUBE-SERVICES - [0:0]\n\
         :KUBE-NODEPORTS - [0:0]\n\
         :KUBE-POSTROUTING - [0:0]\n\
         :KUBE-MARK-MASQ - [0:0]\n",
    );
    for c in nat_chains {
        out.push_str(&format!(":{c} - [0:0]\n"));
    }
    out.push_str(
        "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n\
         -A KUBE-POSTROUTING -j MARK --xor-mark 0x4000\n\
         -A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully\n\
         -A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n",
    );
    for l in nat_rules {
        out.push_str(l.as_ref());
        out.push('\n');
    }
    out.push_str(
        "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS\n\
         COMMIT\n",
    );
    out
}

fn cluster_ip_to(chain: &str) -> String {
    format!("-A KUBE-SERVICES -m comment --comment \"ns/web:http cluster IP\" -m tcp -p tcp -d 10.43.0.10 --dport 80 -j {chain}")
}

fn masq_from_outside(chain: &str) -> String {
    format!("-A {chain} -m comment --comment \"ns/web:http cluster IP\" -m tcp -p tcp -d 10.43.0.10 --dport 80 ! -s 10.42.0.0/16 -j KUBE-MARK-MASQ")
}

fn node_port_to_ext() -> String {
    format!(
        "-A KUBE-NODEPORTS -m comment --comment ns/web:http -m tcp -p tcp --dport 30080 -j {EXT}"
    )
}

/// The endpoint chain of `10.42.0.<last>:8080` without affinity (two lines).
fn dnat(sep: &str, last: u8) -> String {
    format!(
        "-A {sep} -m comment --comment ns/web:http -s 10.42.0.{last} -j KUBE-MARK-MASQ\n\
         -A {sep} -m comment --comment ns/web:http -m tcp -p tcp -j DNAT --to-destination 10.42.0.{last}:8080"
    )
}

/// `KUBE-EXT-…` of external policy Local: pods and the node go to cluster endpoints.
fn ext_local_short_circuit() -> String {
    format!(
        "-A {EXT} -m comment --comment \"pod traffic for ns/web:http external destinations\" -s 10.42.0.0/16 -j {SVC}\n\
         -A {EXT} -m comment --comment \"masquerade LOCAL traffic for ns/web:http external destinations\" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ\n\
         -A {EXT} -m comment --comment \"route LOCAL traffic for ns/web:http external destinations\" -m addrtype --src-type LOCAL -j {SVC}"
    )
}

#[test]
fn probabilities_are_formatted_like_upstream() {
    assert_eq!(probability(3), "0.3333333333");
    assert_eq!(probability(2), "0.5000000000");
    assert_eq!(probability(7), "0.1428571429");
}

#[test]
fn no_services_give_the_fixed_chains_only() {
    let got = build(&[], &[], &ctx(), &[]);
    assert_eq!(got, expected(&[], &[], NO_RULES));
    assert_eq!(
        got.lines().next_back(),
        Some("COMMIT"),
        "the nat table is committed"
    );
}

#[test]
fn one_endpoint_is_chosen_without_statistic() {
    let got = build(
        &[service(json!({}))],
        &[slice(&[(1, true, "n2")])],
        &ctx(),
        &[],
    );
    let want = expected(
        &[],
        &[SVC, SEP1],
        &[
            cluster_ip_to(SVC),
            masq_from_outside(SVC),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.1:8080\" -j {SEP1}"),
            dnat(SEP1, 1),
        ],
    );
    assert_eq!(got, want);
}

#[test]
fn two_endpoints_split_one_half() {
    let got = build(
        &[service(json!({}))],
        &[slice(&[(2, true, "n1"), (1, true, "n2")])],
        &ctx(),
        &[],
    );
    let svc_rules: Vec<&str> = got
        .lines()
        .filter(|l| l.starts_with(&format!("-A {SVC} -m comment --comment \"ns/web:http ->")))
        .collect();
    assert_eq!(
        svc_rules,
        vec![
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.1:8080\" -m statistic --mode random --probability 0.5000000000 -j {SEP1}"),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.2:8080\" -j {SEP2}"),
        ]
    );
}

#[test]
fn three_endpoints_without_cluster_cidr_and_a_not_ready_one_left_out() {
    let ctx = NodeContext {
        node_name: "n1".into(),
        cluster_cidr: None,
    };
    let got = build(
        &[service(json!({}))],
        &[slice(&[
            (3, true, "n1"),
            (4, false, "n1"),
            (1, true, "n2"),
            (2, true, "n3"),
        ])],
        &ctx,
        &[],
    );
    let want = expected(
        &[],
        &[SVC, SEP1, SEP2, SEP3],
        &[
            cluster_ip_to(SVC),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.1:8080\" -m statistic --mode random --probability 0.3333333333 -j {SEP1}"),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.2:8080\" -m statistic --mode random --probability 0.5000000000 -j {SEP2}"),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.3:8080\" -j {SEP3}"),
            dnat(SEP1, 1),
            dnat(SEP2, 2),
            dnat(SEP3, 3),
        ],
    );
    assert_eq!(got, want);
}

#[test]
fn a_port_without_endpoints_is_rejected_in_filter() {
    let spec = json!({"type": "NodePort", "externalIPs": ["192.0.2.7"],
                      "ports": [{"name": "http", "port": 80, "nodePort": 30080}]});
    let got = build(&[service(spec)], &[slice(&[(1, false, "n1")])], &ctx(), &[]);
    let want = expected(
        &[
            "-A KUBE-SERVICES -m comment --comment \"ns/web:http has no endpoints\" -m tcp -p tcp -d 10.43.0.10 --dport 80 -j REJECT",
            "-A KUBE-EXTERNAL-SERVICES -m comment --comment \"ns/web:http has no endpoints\" -m tcp -p tcp -d 192.0.2.7 --dport 80 -j REJECT",
            "-A KUBE-EXTERNAL-SERVICES -m comment --comment \"ns/web:http has no endpoints\" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j REJECT",
        ],
        &[],
        NO_RULES,
    );
    assert_eq!(got, want);
}

#[test]
fn node_port_external_and_lb_ips_with_client_ip_affinity() {
    let mut svc = service(json!({
        "type": "LoadBalancer", "externalIPs": ["192.0.2.7"], "sessionAffinity": "ClientIP",
        "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 300}},
        "ports": [{"name": "http", "port": 80, "nodePort": 30080}]
    }));
    svc.status = Some(
        serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.9"}]}}))
            .unwrap(),
    );
    let got = build(
        &[svc],
        &[slice(&[(1, true, "n1"), (2, true, "n2")])],
        &ctx(),
        &[],
    );
    let want = expected(
        &[],
        &[EXT, SVC, SEP1, SEP2],
        &[
            cluster_ip_to(SVC),
            format!("-A KUBE-SERVICES -m comment --comment \"ns/web:http external IP\" -m tcp -p tcp -d 192.0.2.7 --dport 80 -j {EXT}"),
            format!("-A KUBE-SERVICES -m comment --comment \"ns/web:http loadbalancer IP\" -m tcp -p tcp -d 198.51.100.9 --dport 80 -j {EXT}"),
            node_port_to_ext(),
            masq_from_outside(SVC),
            format!("-A {EXT} -m comment --comment \"masquerade traffic for ns/web:http external destinations\" -j KUBE-MARK-MASQ"),
            format!("-A {EXT} -j {SVC}"),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.1:8080\" -m recent --name {SEP1} --rcheck --seconds 300 --reap -j {SEP1}"),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.2:8080\" -m recent --name {SEP2} --rcheck --seconds 300 --reap -j {SEP2}"),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.1:8080\" -m statistic --mode random --probability 0.5000000000 -j {SEP1}"),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.2:8080\" -j {SEP2}"),
            format!("-A {SEP1} -m comment --comment ns/web:http -s 10.42.0.1 -j KUBE-MARK-MASQ"),
            format!("-A {SEP1} -m comment --comment ns/web:http -m recent --name {SEP1} --set -m tcp -p tcp -j DNAT --to-destination 10.42.0.1:8080"),
            format!("-A {SEP2} -m comment --comment ns/web:http -s 10.42.0.2 -j KUBE-MARK-MASQ"),
            format!("-A {SEP2} -m comment --comment ns/web:http -m recent --name {SEP2} --set -m tcp -p tcp -j DNAT --to-destination 10.42.0.2:8080"),
        ],
    );
    assert_eq!(got, want);
}

#[test]
fn external_policy_local_short_circuits_pods_and_the_node() {
    let spec = json!({"type": "NodePort", "externalTrafficPolicy": "Local",
                      "ports": [{"name": "http", "port": 80, "nodePort": 30080}]});
    let got = build(
        &[service(spec)],
        &[slice(&[(1, true, "n1"), (2, true, "n2")])],
        &ctx(),
        &[],
    );
    let want = expected(
        &[],
        &[EXT, SVC, SVL, SEP1, SEP2],
        &[
            cluster_ip_to(SVC),
            node_port_to_ext(),
            masq_from_outside(SVC),
            ext_local_short_circuit(),
            format!("-A {EXT} -j {SVL}"),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.1:8080\" -m statistic --mode random --probability 0.5000000000 -j {SEP1}"),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.2:8080\" -j {SEP2}"),
            format!("-A {SVL} -m comment --comment \"ns/web:http -> 10.42.0.1:8080\" -j {SEP1}"),
            dnat(SEP1, 1),
            dnat(SEP2, 2),
        ],
    );
    assert_eq!(got, want);
}

#[test]
fn external_policy_local_without_local_endpoints_drops_external_traffic() {
    let spec = json!({"type": "NodePort", "externalTrafficPolicy": "Local",
                      "ports": [{"name": "http", "port": 80, "nodePort": 30080}]});
    let got = build(&[service(spec)], &[slice(&[(2, true, "n2")])], &ctx(), &[]);
    let want = expected(
        &["-A KUBE-EXTERNAL-SERVICES -m comment --comment \"ns/web:http has no local endpoints\" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j DROP"],
        &[EXT, SVC, SEP2],
        &[
            cluster_ip_to(SVC),
            node_port_to_ext(),
            masq_from_outside(SVC),
            ext_local_short_circuit(),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.2:8080\" -j {SEP2}"),
            dnat(SEP2, 2),
        ],
    );
    assert_eq!(got, want);
}

#[test]
fn internal_policy_local_uses_the_local_chain_or_drops() {
    let spec = json!({"internalTrafficPolicy": "Local"});
    let got = build(
        &[service(spec.clone())],
        &[slice(&[(1, true, "n1"), (2, true, "n2")])],
        &ctx(),
        &[],
    );
    let want = expected(
        &[],
        &[SVL, SEP1],
        &[
            cluster_ip_to(SVL),
            masq_from_outside(SVL),
            format!("-A {SVL} -m comment --comment \"ns/web:http -> 10.42.0.1:8080\" -j {SEP1}"),
            dnat(SEP1, 1),
        ],
    );
    assert_eq!(got, want);

    let remote_only = build(&[service(spec)], &[slice(&[(2, true, "n2")])], &ctx(), &[]);
    assert_eq!(
        remote_only,
        expected(
            &["-A KUBE-SERVICES -m comment --comment \"ns/web:http has no local endpoints\" -m tcp -p tcp -d 10.43.0.10 --dport 80 -j DROP"],
            &[],
            NO_RULES,
        )
    );
}

#[test]
fn udp_and_sctp_ports_use_their_protocol() {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "dns", "namespace": "ns"},
        "spec": {"clusterIP": "10.43.0.53", "ports": [{"port": 53, "protocol": "UDP"}]}
    }))
    .unwrap();
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "dns-x", "namespace": "ns",
                     "labels": {"kubernetes.io/service-name": "dns"}},
        "addressType": "IPv4",
        "ports": [{"port": 53, "protocol": "UDP"}],
        "endpoints": [{"addresses": ["10.42.0.5"]}],
    }))
    .unwrap();
    let got = build(&[svc], &[slice], &ctx(), &[]);
    let (svc, sep) = ("KUBE-SVC-I4VCVWGK2DXHSPPD", "KUBE-SEP-MKUWJG6XBOQTXB52");
    assert!(got.contains(&format!("-A KUBE-SERVICES -m comment --comment \"ns/dns cluster IP\" -m udp -p udp -d 10.43.0.53 --dport 53 -j {svc}\n")), "{got}");
    assert!(got.contains(&format!("-A {sep} -m comment --comment ns/dns -m udp -p udp -j DNAT --to-destination 10.42.0.5:53\n")), "{got}");

    let sctp: Service = serde_json::from_value(json!({
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"clusterIP": "10.43.0.54", "ports": [{"port": 9, "protocol": "SCTP"}]}
    }))
    .unwrap();
    let got = build(&[sctp], &[], &ctx(), &[]);
    assert!(got.contains("-A KUBE-SERVICES -m comment --comment \"ns/s has no endpoints\" -m sctp -p sctp -d 10.43.0.54 --dport 9 -j REJECT\n"), "{got}");
}

#[test]
fn stale_per_service_chains_are_flushed_and_deleted() {
    let existing = vec![
        "KUBE-SERVICES".to_string(),
        SVC.to_string(),
        "KUBE-SVC-GONEGONEGONEGONE".to_string(),
        "KUBE-SEP-GONEGONEGONEGONE".to_string(),
        "KUBE-EXT-GONEGONEGONEGONE".to_string(),
        "DOCKER".to_string(),
        "KUBE-KUBELET-CANARY".to_string(),
    ];
    let got = build(
        &[service(json!({}))],
        &[slice(&[(1, true, "n1")])],
        &ctx(),
        &existing,
    );
    let want = expected(
        &[],
        &[
            SVC,
            SEP1,
            "KUBE-EXT-GONEGONEGONEGONE",
            "KUBE-SEP-GONEGONEGONEGONE",
            "KUBE-SVC-GONEGONEGONEGONE",
        ],
        &[
            cluster_ip_to(SVC),
            masq_from_outside(SVC),
            format!("-A {SVC} -m comment --comment \"ns/web:http -> 10.42.0.1:8080\" -j {SEP1}"),
            dnat(SEP1, 1),
            "-X KUBE-EXT-GONEGONEGONEGONE".to_string(),
            "-X KUBE-SEP-GONEGONEGONEGONE".to_string(),
            "-X KUBE-SVC-GONEGONEGONEGONE".to_string(),
        ],
    );
    assert_eq!(got, want);
}

#[test]
fn ports_are_ordered_by_name_whatever_the_input_order() {
    let a = service(json!({"ports": [{"name": "b", "port": 81}, {"name": "a", "port": 80}]}));
    let got = build(std::slice::from_ref(&a), &[], &ctx(), &[]);
    let rejects: Vec<&str> = got.lines().filter(|l| l.ends_with("-j REJECT")).collect();
    assert_eq!(
        rejects,
        vec![
            "-A KUBE-SERVICES -m comment --comment \"ns/web:a has no endpoints\" -m tcp -p tcp -d 10.43.0.10 --dport 80 -j REJECT",
            "-A KUBE-SERVICES -m comment --comment \"ns/web:b has no endpoints\" -m tcp -p tcp -d 10.43.0.10 --dport 81 -j REJECT",
        ]
    );
}
