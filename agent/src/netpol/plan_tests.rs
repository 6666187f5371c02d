//! The planner against a table of policies: the exact rules each local pod gets.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::{json, Value};

use super::plan::{plan, render, Input, Plan, Warning, TOP};

const NODE: &str = "n1";

/// A running pod `ns/name` with label `pod=<name>` on `node` at `ip`; `extra` is merged into
/// its spec.
fn pod(ns: &str, name: &str, node: &str, ip: &str, extra: Value) -> Pod {
    let mut spec = json!({
        "nodeName": node,
        "containers": [{"name": "c", "image": "i", "ports": [
            {"name": "http", "containerPort": 8080},
            {"name": "dns", "containerPort": 5353, "protocol": "UDP"}
        ]}]
    });
    if let (Some(s), Value::Object(e)) = (spec.as_object_mut(), extra) {
        s.extend(e);
    }
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "uid": format!("{ns}-{name}"),
                     "labels": {"pod": name}},
        "spec": spec,
        "status": {"phase": "Running", "podIP": ip}
    }))
    .unwrap()
}

fn namespace(name: &str, team: &str) -> Namespace {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": team}}})).unwrap()
}

fn policy(ns: &str, name: &str, spec: Value) -> NetworkPolicy {
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
        .unwrap()
}

/// x/a (10.0.0.1) and x/b (10.0.0.2) here; y/a (10.0.1.1) on another node; x/h on the host
/// network here; x/pending without an address.
fn pods() -> Vec<Pod> {
    vec![
        pod("x", "a", NODE, "10.0.0.1", json!({})),
        pod("x", "b", NODE, "10.0.0.2", json!({})),
        pod("y", "a", "n2", "10.0.1.1", json!({})),
        pod("x", "h", NODE, "192.168.0.1", json!({"hostNetwork": true})),
        {
            let mut p = pod("x", "pending", NODE, "10.0.0.9", json!({}));
            p.status.as_mut().unwrap().pod_ip = None;
            p
        },
    ]
}

fn namespaces() -> Vec<Namespace> {
    vec![namespace("x", "blue"), namespace("y", "red")]
}

fn run(policies: &[NetworkPolicy], sctp: bool) -> Plan {
    plan(&Input {
        node_name: NODE,
        policies,
        pods: &pods(),
        namespaces: &namespaces(),
        sctp,
    })
}

/// The rules of the chain TOP sends `who` ("x/a ingress") to, or `None` when it sends it
/// nowhere.
fn chain_of(p: &Plan, who: &str) -> Option<Vec<String>> {
    let top = &p.chains[0];
    assert_eq!(top.name, TOP);
    let jump = top
        .rules
        .iter()
        .find(|r| r.contains(&format!("--comment \"{who}\" ")))?;
    let target = jump.rsplit(' ').next().unwrap();
    let chain = p
        .chains
        .iter()
        .find(|c| c.name == target)
        .expect("jumped-to chain");
    Some(chain.rules.clone())
}

fn allow(policy: &str, rest: &str) -> String {
    format!("-m comment --comment \"{policy}\" {rest}-j RETURN")
}

fn drop(who: &str) -> String {
    format!("-m comment --comment \"{who}: no policy allows\" -j DROP")
}

struct Case {
    name: &'static str,
    policies: Vec<NetworkPolicy>,
    sctp: bool,
    /// (who, its chain's rules; `None`: not isolated).
    want: Vec<(&'static str, Option<Vec<String>>)>,
    warnings: Vec<&'static str>,
}

fn case(name: &'static str, policies: Vec<NetworkPolicy>) -> Case {
    Case {
        name,
        policies,
        sctp: false,
        want: Vec::new(),
        warnings: Vec::new(),
    }
}

impl Case {
    fn want(mut self, who: &'static str, rules: Option<Vec<String>>) -> Case {
        self.want.push((who, rules));
        self
    }
}

fn cases() -> Vec<Case> {
    let p = policy;
    vec![
        case("no policy isolates nothing", vec![])
            .want("x/a ingress", None)
            .want("x/a egress", None),
        case(
            "default deny ingress selects every pod of its namespace only",
            vec![p("x", "deny", json!({"podSelector": {}}))],
        )
        .want("x/a ingress", Some(vec![drop("x/a ingress")]))
        .want("x/b ingress", Some(vec![drop("x/b ingress")]))
        .want("x/a egress", None),
        case(
            "a spec without podSelector is the empty selector",
            vec![p("x", "deny", json!({}))],
        )
        .want("x/b ingress", Some(vec![drop("x/b ingress")])),
        case(
            "podSelector peer in the policy's namespace, TCP port",
            vec![p(
                "x",
                "web",
                json!({"podSelector": {"matchLabels": {"pod": "a"}},
                       "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}],
                                    "ports": [{"port": 80}]}]}),
            )],
        )
        .want(
            "x/a ingress",
            Some(vec![
                allow("x/web", "-s 10.0.0.2/32 -p tcp -m tcp --dport 80 "),
                drop("x/a ingress"),
            ]),
        )
        .want("x/b ingress", None),
        case(
            "namespaceSelector alone: every pod of the matching namespaces, any port",
            vec![p(
                "x",
                "from-red",
                json!({"podSelector": {"matchLabels": {"pod": "a"}},
                       "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "red"}}}]}]}),
            )],
        )
        .want(
            "x/a ingress",
            Some(vec![allow("x/from-red", "-s 10.0.1.1/32 "), drop("x/a ingress")]),
        ),
        case(
            "namespaceSelector and podSelector in one peer must both match",
            vec![p(
                "x",
                "both",
                json!({"podSelector": {"matchLabels": {"pod": "a"}},
                       "ingress": [{"from": [{
                           "namespaceSelector": {"matchExpressions": [
                               {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["x", "y"]}]},
                           "podSelector": {"matchLabels": {"pod": "b"}}}]}]}),
            )],
        )
        .want(
            "x/a ingress",
            Some(vec![allow("x/both", "-s 10.0.0.2/32 "), drop("x/a ingress")]),
        ),
        case(
            "ipBlock with except, UDP port range",
            vec![p(
                "x",
                "block",
                json!({"podSelector": {"matchLabels": {"pod": "b"}},
                       "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/30", "except": ["10.0.0.1/32"]}}],
                                    "ports": [{"protocol": "UDP", "port": 80, "endPort": 81}]}]}),
            )],
        )
        .want(
            "x/b ingress",
            Some(vec![
                allow("x/block", "-s 10.0.0.0/32 -p udp -m udp --dport 80:81 "),
                allow("x/block", "-s 10.0.0.2/31 -p udp -m udp --dport 80:81 "),
                drop("x/b ingress"),
            ]),
        ),
        case(
            "ingress named port is the local pod's; protocol only",
            vec![p(
                "x",
                "named",
                json!({"podSelector": {"matchLabels": {"pod": "a"}},
                       "ingress": [{"ports": [{"port": "http"}, {"port": "dns", "protocol": "UDP"},
                                              {"port": "dns"}, {"protocol": "UDP"}]}]}),
            )],
        )
        .want(
            "x/a ingress",
            Some(vec![
                allow("x/named", "-p tcp -m tcp --dport 8080 "),
                allow("x/named", "-p udp -m udp --dport 5353 "),
                allow("x/named", "-p udp "),
                drop("x/a ingress"),
            ]),
        ),
        case(
            "egress rules imply the Egress type; named port resolved on each peer pod",
            vec![p(
                "x",
                "out",
                json!({"podSelector": {"matchLabels": {"pod": "a"}},
                       "egress": [{"to": [{"ipBlock": {"cidr": "10.0.1.0/24"}}],
                                   "ports": [{"port": "http"}]},
                                  {"ports": [{"protocol": "UDP", "port": 53}]}]}),
            )],
        )
        .want(
            "x/a egress",
            Some(vec![
                allow("x/out", "-d 10.0.1.1/32 -p tcp -m tcp --dport 8080 "),
                allow("x/out", "-p udp -m udp --dport 53 "),
                drop("x/a egress"),
            ]),
        )
        .want(
            "x/a ingress",
            Some(vec![drop("x/a ingress")]),
        ),
        case(
            "policyTypes Egress only: ingress stays open",
            vec![p(
                "x",
                "egress-deny",
                json!({"podSelector": {}, "policyTypes": ["Egress"]}),
            )],
        )
        .want("x/b egress", Some(vec![drop("x/b egress")]))
        .want("x/b ingress", None),
        case(
            "policies add up; an empty rule allows all",
            vec![
                p("x", "a1", json!({"podSelector": {"matchLabels": {"pod": "a"}},
                                    "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 81}]}]})),
                p("x", "a2", json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{}]})),
            ],
        )
        .want(
            "x/a ingress",
            Some(vec![
                allow("x/a1", "-s 10.0.0.1/32 -p tcp -m tcp --dport 81 "),
                allow("x/a1", "-s 10.0.0.2/32 -p tcp -m tcp --dport 81 "),
                allow("x/a2", ""),
                drop("x/a ingress"),
            ]),
        ),
        Case {
            sctp: false,
            warnings: vec!["x/sctp UnsupportedProtocol"],
            ..case(
                "SCTP without kernel support stays denied and warns",
                vec![p(
                    "x",
                    "sctp",
                    json!({"podSelector": {"matchLabels": {"pod": "a"}},
                           "ingress": [{"ports": [{"protocol": "SCTP", "port": 80}]}]}),
                )],
            )
            .want("x/a ingress", Some(vec![drop("x/a ingress")]))
        },
        Case {
            sctp: true,
            ..case(
                "SCTP with kernel support",
                vec![p(
                    "x",
                    "sctp",
                    json!({"podSelector": {"matchLabels": {"pod": "a"}},
                           "ingress": [{"ports": [{"protocol": "SCTP", "port": 80}]}]}),
                )],
            )
            .want(
                "x/a ingress",
                Some(vec![
                    allow("x/sctp", "-p sctp -m sctp --dport 80 "),
                    drop("x/a ingress"),
                ]),
            )
        },
        Case {
            warnings: vec!["x/bad InvalidIPBlock"],
            ..case(
                "an ipBlock that does not parse allows nothing",
                vec![p(
                    "x",
                    "bad",
                    json!({"podSelector": {"matchLabels": {"pod": "a"}},
                           "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}),
                )],
            )
            .want("x/a ingress", Some(vec![drop("x/a ingress")]))
        },
        case(
            "hostNetwork pods are neither isolated nor peers; pods elsewhere are not isolated here",
            vec![
                p("x", "all", json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "h"}}}]}]})),
                p("y", "all", json!({"podSelector": {}})),
            ],
        )
        .want("x/h ingress", None)
        .want("y/a ingress", None)
        .want("x/pending ingress", None)
        .want("x/a ingress", Some(vec![drop("x/a ingress")])),
    ]
}

#[test]
fn the_table() {
    for c in cases() {
        let p = run(&c.policies, c.sctp);
        for (who, want) in &c.want {
            assert_eq!(&chain_of(&p, who), want, "{}: {who}", c.name);
        }
        let warnings: Vec<String> = p
            .warnings
            .iter()
            .map(|w: &Warning| format!("{}/{} {}", w.namespace, w.policy, w.reason))
            .collect();
        assert_eq!(warnings, c.warnings, "{}", c.name);
    }
}

#[test]
fn the_top_chain_checks_new_connections_egress_first() {
    let p = run(
        &[policy(
            "x",
            "deny",
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        )],
        false,
    );
    let top = &p.chains[0].rules;
    assert_eq!(
        top[0],
        "-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"
    );
    let short: Vec<String> = top[1..]
        .iter()
        .map(|r| r.split(" -j ").next().unwrap().to_string())
        .collect();
    assert_eq!(
        short,
        [
            "-s 10.0.0.1/32 -m comment --comment \"x/a egress\"",
            "-d 10.0.0.1/32 -m comment --comment \"x/a ingress\"",
            "-s 10.0.0.2/32 -m comment --comment \"x/b egress\"",
            "-d 10.0.0.2/32 -m comment --comment \"x/b ingress\"",
        ]
    );
    assert!(top[1..].iter().all(|r| r.contains(" -j KUBE-NP-")));
    assert!(
        p.chains.iter().all(|c| c.name.len() <= 28),
        "iptables' name limit"
    );
}

#[test]
fn rendering_declares_every_chain_and_removes_stale_ones() {
    let p = run(
        &[policy(
            "x",
            "deny",
            json!({"podSelector": {"matchLabels": {"pod": "b"}}}),
        )],
        false,
    );
    let chain = &p.chains[1].name;
    let out = render(
        &p,
        &["KUBE-NP-I-STALESTALESTALE".to_string(), chain.clone()],
    );
    assert_eq!(
        out,
        format!(
            "*filter\n:KUBE-NWPLCY - [0:0]\n:{chain} - [0:0]\n:KUBE-NP-I-STALESTALESTALE - [0:0]\n\
             -A KUBE-NWPLCY -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN\n\
             -A KUBE-NWPLCY -d 10.0.0.2/32 -m comment --comment \"x/b ingress\" -j {chain}\n\
             -A {chain} -m comment --comment \"x/b ingress: no policy allows\" -j DROP\n\
             -X KUBE-NP-I-STALESTALESTALE\nCOMMIT\n"
        )
    );
}
