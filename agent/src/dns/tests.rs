//! The zone's answers over a small cluster: exact records, codes and forwarding.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::answer::{answer, reverse_ip, Answer, Data, QType, Record};
use super::index::{self, Endpoint, Index, Port, ServiceKind};

const D: &str = "cluster.local";

fn svc(ns: &str, name: &str, spec: serde_json::Value) -> Service {
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
        .unwrap()
}

fn slice(
    ns: &str,
    svc: &str,
    endpoints: serde_json::Value,
    ports: serde_json::Value,
) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": format!("{svc}-x"),
            "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4", "endpoints": endpoints, "ports": ports,
    }))
    .unwrap()
}

fn cluster() -> Index {
    let services = [
        svc(
            "default",
            "kubernetes",
            json!({"clusterIP": "10.43.0.1", "clusterIPs": ["10.43.0.1"],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}),
        ),
        svc(
            "default",
            "web",
            json!({"clusterIP": "10.43.0.20",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}),
        ),
        svc(
            "default",
            "db",
            json!({"clusterIP": "None",
            "ports": [{"name": "pg", "port": 5432}]}),
        ),
        svc(
            "other",
            "ext",
            json!({"type": "ExternalName", "externalName": "Example.com."}),
        ),
    ];
    let slices = [
        slice(
            "default",
            "web",
            json!([{"addresses": ["10.42.0.5"], "conditions": {"ready": true}},
                   {"addresses": ["10.42.0.6"], "conditions": {"ready": false}}]),
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
        ),
        slice(
            "default",
            "db",
            json!([{"addresses": ["10.42.1.8"], "hostname": "db-1"},
                   {"addresses": ["10.42.1.7"], "hostname": "db-0"}]),
            json!([{"name": "pg", "port": 5432, "protocol": "TCP"}]),
        ),
        slice(
            "default",
            "gone",
            json!([{"addresses": ["10.42.9.9"]}]),
            json!([]),
        ),
    ];
    index::build(&services, &slices, 7)
}

fn a(name: &str, ip: &str) -> Record {
    Record {
        name: name.into(),
        data: Data::A(ip.parse().unwrap()),
    }
}

fn soa() -> Record {
    Record {
        name: "cluster.local.".into(),
        data: Data::Soa {
            mname: "ns.dns.cluster.local.".into(),
            rname: "hostmaster.cluster.local.".into(),
            serial: 7,
        },
    }
}

fn ok(answers: Vec<Record>, additionals: Vec<Record>) -> Answer {
    Answer::Zone {
        nxdomain: false,
        answers,
        additionals,
        soa: soa(),
    }
}

fn nxdomain() -> Answer {
    Answer::Zone {
        nxdomain: true,
        answers: vec![],
        additionals: vec![],
        soa: soa(),
    }
}

fn ask(name: &str, q: QType) -> Answer {
    answer(&cluster(), D, name, q)
}

#[test]
fn the_index_keeps_ready_endpoints_of_known_services() {
    let i = cluster();
    let web = &i.services[&("default".into(), "web".into())];
    assert_eq!(
        web.kind,
        ServiceKind::ClusterIp(vec!["10.43.0.20".parse().unwrap()])
    );
    let http = Port {
        name: "http".into(),
        protocol: "tcp".into(),
        port: 8080,
    };
    assert_eq!(
        web.endpoints,
        vec![Endpoint {
            name: "10-42-0-5".into(),
            ip: "10.42.0.5".parse().unwrap(),
            ports: vec![http]
        }]
    );
    let db = &i.services[&("default".into(), "db".into())];
    assert_eq!(db.kind, ServiceKind::Headless);
    let names: Vec<&str> = db.endpoints.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["db-0", "db-1"]);
    assert_eq!(
        i.services[&("other".into(), "ext".into())].kind,
        ServiceKind::ExternalName("example.com".into())
    );
    assert_eq!(
        i.namespaces.iter().collect::<Vec<_>>(),
        ["default", "other"]
    );
    let rev = |ip: &str| i.reverse.get(&ip.parse::<IpAddr>().unwrap()).cloned();
    assert_eq!(rev("10.43.0.20").as_deref(), Some("web.default"));
    assert_eq!(rev("10.42.1.7").as_deref(), Some("db-0.db.default"));
    assert_eq!(rev("10.42.0.5").as_deref(), Some("10-42-0-5.web.default"));
    assert_eq!(rev("10.42.0.6"), None, "not ready");
    assert_eq!(rev("10.42.9.9"), None, "slice of no service");
}

#[test]
fn a_cluster_ip_service_answers_its_cluster_ip() {
    let n = "web.default.svc.cluster.local.";
    assert_eq!(ask(n, QType::A), ok(vec![a(n, "10.43.0.20")], vec![]));
    assert_eq!(
        ask(n, QType::Aaaa),
        ok(vec![], vec![]),
        "no data, not NXDOMAIN"
    );
    let n = "kubernetes.default.svc.cluster.local";
    assert_eq!(
        ask(n, QType::A),
        ok(
            vec![a("kubernetes.default.svc.cluster.local.", "10.43.0.1")],
            vec![]
        )
    );
}

#[test]
fn names_match_in_any_case_and_answer_as_asked() {
    let n = "Web.DEFAULT.svc.Cluster.Local.";
    assert_eq!(ask(n, QType::A), ok(vec![a(n, "10.43.0.20")], vec![]));
}

#[test]
fn a_headless_service_answers_its_ready_endpoints() {
    let n = "db.default.svc.cluster.local.";
    assert_eq!(
        ask(n, QType::A),
        ok(vec![a(n, "10.42.1.7"), a(n, "10.42.1.8")], vec![])
    );
    let n = "db-1.db.default.svc.cluster.local.";
    assert_eq!(ask(n, QType::A), ok(vec![a(n, "10.42.1.8")], vec![]));
    let n = "10-42-0-5.web.default.svc.cluster.local.";
    assert_eq!(ask(n, QType::A), ok(vec![a(n, "10.42.0.5")], vec![]));
    assert_eq!(
        ask("db-2.db.default.svc.cluster.local.", QType::A),
        nxdomain()
    );
    assert_eq!(
        ask("10-42-0-6.web.default.svc.cluster.local.", QType::A),
        nxdomain()
    );
}

fn srv(name: &str, weight: u16, port: u16, target: &str) -> Record {
    Record {
        name: name.into(),
        data: Data::Srv {
            priority: 0,
            weight,
            port,
            target: target.into(),
        },
    }
}

#[test]
fn srv_for_a_named_port() {
    let n = "_http._tcp.web.default.svc.cluster.local.";
    let t = "web.default.svc.cluster.local.";
    assert_eq!(
        ask(n, QType::Srv),
        ok(vec![srv(n, 100, 80, t)], vec![a(t, "10.43.0.20")])
    );
    let n = "_pg._tcp.db.default.svc.cluster.local.";
    let (t0, t1) = (
        "db-0.db.default.svc.cluster.local.",
        "db-1.db.default.svc.cluster.local.",
    );
    assert_eq!(
        ask(n, QType::Srv),
        ok(
            vec![srv(n, 50, 5432, t0), srv(n, 50, 5432, t1)],
            vec![a(t0, "10.42.1.7"), a(t1, "10.42.1.8")]
        )
    );
    assert_eq!(ask(n, QType::A), ok(vec![], vec![]), "the name exists");
    assert_eq!(
        ask("_pg._udp.db.default.svc.cluster.local.", QType::Srv),
        nxdomain()
    );
    assert_eq!(
        ask("_x._tcp.web.default.svc.cluster.local.", QType::Srv),
        nxdomain()
    );
}

#[test]
fn srv_for_a_service_name_lists_every_port() {
    let n = "kubernetes.default.svc.cluster.local.";
    assert_eq!(
        ask(n, QType::Srv),
        ok(vec![srv(n, 100, 443, n)], vec![a(n, "10.43.0.1")])
    );
}

#[test]
fn an_external_name_is_a_cname() {
    let n = "ext.other.svc.cluster.local.";
    let cname = Record {
        name: n.into(),
        data: Data::Cname("example.com.".into()),
    };
    assert_eq!(ask(n, QType::A), ok(vec![cname], vec![]));
}

#[test]
fn pod_names_answer_their_ip() {
    let n = "10-42-0-9.default.pod.cluster.local.";
    assert_eq!(ask(n, QType::A), ok(vec![a(n, "10.42.0.9")], vec![]));
    assert_eq!(ask(n, QType::Aaaa), ok(vec![], vec![]));
    assert_eq!(
        ask("pod-a.default.pod.cluster.local.", QType::A),
        nxdomain()
    );
    assert_eq!(ask("10-42-0-9.pod.cluster.local.", QType::A), nxdomain());
}

#[test]
fn unknown_names_in_the_zone_do_not_exist() {
    assert_eq!(ask("nope.default.svc.cluster.local.", QType::A), nxdomain());
    assert_eq!(ask("nope.cluster.local.", QType::A), nxdomain());
    assert_eq!(
        ask(
            "web.default.svc.cluster.local.default.svc.cluster.local.",
            QType::A
        ),
        nxdomain()
    );
    assert_eq!(
        ask("a.b.web.default.svc.cluster.local.", QType::A),
        nxdomain()
    );
    assert_eq!(ask("nons.svc.cluster.local.", QType::A), nxdomain());
}

#[test]
fn the_zone_and_namespaces_exist_without_data() {
    assert_eq!(
        ask("default.svc.cluster.local.", QType::A),
        ok(vec![], vec![])
    );
    assert_eq!(ask("svc.cluster.local.", QType::A), ok(vec![], vec![]));
    assert_eq!(ask("cluster.local.", QType::A), ok(vec![], vec![]));
    assert_eq!(ask("cluster.local.", QType::Soa), ok(vec![soa()], vec![]));
    let ns = Record {
        name: "cluster.local.".into(),
        data: Data::Ns("ns.dns.cluster.local.".into()),
    };
    assert_eq!(ask("cluster.local.", QType::Ns), ok(vec![ns], vec![]));
}

fn ptr(name: &str, target: &str) -> Answer {
    ok(
        vec![Record {
            name: name.into(),
            data: Data::Ptr(target.into()),
        }],
        vec![],
    )
}

#[test]
fn ptr_names_cluster_and_endpoint_ips_and_forwards_the_rest() {
    let n = "20.0.43.10.in-addr.arpa.";
    assert_eq!(ask(n, QType::Ptr), ptr(n, "web.default.svc.cluster.local."));
    let n = "7.1.42.10.in-addr.arpa.";
    assert_eq!(
        ask(n, QType::Ptr),
        ptr(n, "db-0.db.default.svc.cluster.local.")
    );
    let n = "5.0.42.10.in-addr.arpa.";
    assert_eq!(
        ask(n, QType::Ptr),
        ptr(n, "10-42-0-5.web.default.svc.cluster.local.")
    );
    assert_eq!(ask("99.0.43.10.in-addr.arpa.", QType::Ptr), Answer::Forward);
    assert_eq!(ask("20.0.43.10.in-addr.arpa.", QType::A), Answer::Forward);
}

#[test]
fn reverse_names_parse_to_ips() {
    assert_eq!(
        reverse_ip("4.3.2.1.in-addr.arpa."),
        Some("1.2.3.4".parse().unwrap())
    );
    assert_eq!(reverse_ip("3.2.1.in-addr.arpa."), None);
    let v6 = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.";
    assert_eq!(reverse_ip(v6), Some("fd00::1".parse().unwrap()));
    assert_eq!(reverse_ip("example.com."), None);
}

#[test]
fn names_outside_the_zone_are_forwarded() {
    assert_eq!(ask("example.org.", QType::A), Answer::Forward);
    assert_eq!(ask("local.", QType::A), Answer::Forward);
    assert_eq!(ask("xcluster.local.", QType::A), Answer::Forward);
}
