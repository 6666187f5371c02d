use super::*;
use serde_json::{json, Value};

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn ingress(name: &str, created: &str, spec: Value) -> Ingress {
    obj(json!({
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created, "uid": name},
        "spec": spec,
    }))
}

fn backend(service: &str, port: Value) -> Value {
    json!({"service": {"name": service, "port": port}})
}

fn path(p: &str, kind: &str, b: Value) -> Value {
    json!({"path": p, "pathType": kind, "backend": b})
}

fn service(name: &str, ports: Value) -> Service {
    obj(json!({"metadata": {"name": name, "namespace": "ns"},
               "spec": {"clusterIP": "10.43.0.9", "ports": ports}}))
}

fn slice(service: &str, port_name: &str, port: i32, eps: &[(&str, Option<bool>)]) -> EndpointSlice {
    let endpoints: Vec<Value> = eps
        .iter()
        .map(|(ip, ready)| json!({"addresses": [ip], "conditions": {"ready": ready}}))
        .collect();
    obj(json!({
        "metadata": {"name": format!("{service}-x"), "namespace": "ns",
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": endpoints,
    }))
}

fn tls_secret(name: &str, host: &str) -> Secret {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![host.to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    obj(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, cert.pem()),
            "tls.key": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, key.serialize_pem()),
        },
    }))
}

struct World {
    ingresses: Vec<Ingress>,
    classes: Vec<IngressClass>,
    services: Vec<Service>,
    slices: Vec<EndpointSlice>,
    secrets: Vec<Secret>,
    unread: BTreeSet<SecretKey>,
}

impl World {
    fn build(&self) -> (Table, Vec<Warning>) {
        build(&Input {
            ingresses: &self.ingresses,
            classes: &self.classes,
            services: &self.services,
            slices: &self.slices,
            secrets: &self.secrets,
            unread: &self.unread,
        })
    }
}

fn addrs(list: &[&str]) -> Target {
    Target::Endpoints(list.iter().map(|a| a.parse().unwrap()).collect())
}

fn world() -> World {
    World {
        ingresses: vec![
            ingress(
                "web",
                "2024-01-01T00:00:00Z",
                json!({
                    "rules": [
                        {"host": "a.example.com", "http": {"paths": [
                            path("/", "Prefix", backend("app-a", json!({"number": 80}))),
                            path("/api", "Prefix", backend("app-b", json!({"name": "http"}))),
                        ]}},
                        {"host": "*.example.com", "http": {"paths": [
                            path("/", "ImplementationSpecific", backend("app-b", json!({"number": 8080}))),
                        ]}},
                        {"http": {"paths": [
                            path("/missing", "Exact", backend("gone", json!({"number": 80}))),
                            path("/noport", "Exact", backend("app-a", json!({"number": 81}))),
                            path("/empty", "Exact", backend("idle", json!({"number": 80}))),
                        ]}},
                    ],
                    "tls": [{"hosts": ["a.example.com"], "secretName": "a-tls"},
                            {"hosts": ["*.example.com"], "secretName": "no-such-secret"}],
                }),
            ),
            ingress(
                "fallback",
                "2024-01-02T00:00:00Z",
                json!({"defaultBackend": backend("app-a", json!({"number": 80}))}),
            ),
            // Another class: ignored, although it is older and names the same host.
            ingress(
                "other",
                "2023-01-01T00:00:00Z",
                json!({"ingressClassName": "nginx", "rules": [{"host": "a.example.com",
                    "http": {"paths": [path("/", "Prefix", backend("app-b", json!({"number": 8080})))]}}]}),
            ),
        ],
        classes: vec![ingress_class::ingress_class()],
        services: vec![
            service("app-a", json!([{"port": 80, "targetPort": 8000}])),
            service(
                "app-b",
                json!([{"name": "http", "port": 8080, "targetPort": 9000}]),
            ),
            service("idle", json!([{"port": 80}])),
        ],
        slices: vec![
            slice(
                "app-a",
                "",
                8000,
                &[
                    ("10.42.0.12", None),
                    ("10.42.0.11", Some(true)),
                    ("10.42.0.13", Some(false)),
                ],
            ),
            slice("app-b", "http", 9000, &[("10.42.0.21", Some(true))]),
            slice("idle", "", 80, &[("10.42.0.31", Some(false))]),
        ],
        secrets: vec![tls_secret("a-tls", "a.example.com")],
        unread: BTreeSet::new(),
    }
}

#[test]
fn requests_route_by_host_and_path_to_ready_endpoints() {
    let (table, _) = world().build();
    let a = addrs(&["10.42.0.11:8000", "10.42.0.12:8000"]);
    let b = addrs(&["10.42.0.21:9000"]);
    let cases: &[(&str, &str, Option<Target>)] = &[
        ("a.example.com", "/", Some(a.clone())),
        ("a.example.com", "/index.html", Some(a.clone())),
        ("a.example.com", "/api", Some(b.clone())),
        ("a.example.com", "/api/v1", Some(b.clone())),
        ("a.example.com", "/apix", Some(a.clone())),
        ("b.example.com", "/anything", Some(b.clone())),
        ("x.b.example.com", "/", Some(a.clone())), // default backend
        (
            "other.org",
            "/missing",
            Some(Target::Unavailable("service ns/gone not found".into())),
        ),
        ("other.org", "/missing/x", Some(a.clone())), // Exact: default backend
        (
            "other.org",
            "/noport",
            Some(Target::Unavailable(
                "service ns/app-a has no TCP port 81".into(),
            )),
        ),
        (
            "other.org",
            "/empty",
            Some(Target::Unavailable(
                "service ns/idle port 80 has no ready endpoints".into(),
            )),
        ),
    ];
    for (host, p, want) in cases {
        let got = table.backend(host, p).map(|b| b.target.clone());
        assert_eq!(&got, want, "{host}{p}");
    }
    assert!(table.routes.iter().all(|r| r.target.ingress == "ns/web"));
}

#[test]
fn without_a_default_backend_unmatched_requests_find_nothing() {
    let mut w = world();
    w.ingresses
        .retain(|i| i.metadata.name.as_deref() != Some("fallback"));
    let (table, _) = w.build();
    assert!(table.backend("x.b.example.com", "/").is_none());
    assert!(table.backend("other.org", "/").is_none());
}

#[test]
fn endpoints_are_taken_in_turn() {
    let (table, _) = world().build();
    let b = table.backend("a.example.com", "/").unwrap();
    let picks: Vec<String> = (0..4).map(|_| b.pick().unwrap().to_string()).collect();
    assert_eq!(
        picks,
        [
            "10.42.0.11:8000",
            "10.42.0.12:8000",
            "10.42.0.11:8000",
            "10.42.0.12:8000"
        ]
    );
    assert_eq!(table.backend("other.org", "/missing").unwrap().pick(), None);
}

#[test]
fn what_cannot_be_served_is_warned_about_once_per_cause() {
    let (_, warnings) = world().build();
    let got: Vec<(&str, &str, &str)> = warnings
        .iter()
        .map(|w| (w.ingress.as_str(), w.reason, w.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("web", "ServiceNotFound", "service ns/gone not found"),
            (
                "web",
                "ServicePortNotFound",
                "service ns/app-a has no TCP port 81"
            ),
            (
                "web",
                "NoReadyEndpoints",
                "service ns/idle port 80 has no ready endpoints"
            ),
            (
                "web",
                "SecretNotFound",
                "TLS secret ns/no-such-secret not found; serving the default certificate"
            ),
        ]
    );
}

#[test]
fn certificates_by_sni_exact_then_wildcard() {
    let mut w = world();
    w.secrets
        .push(tls_secret("no-such-secret", "*.example.com"));
    let (table, warnings) = w.build();
    assert!(
        warnings.iter().all(|w| w.reason != "SecretNotFound"),
        "{warnings:?}"
    );
    let a = table.cert("A.example.com").unwrap();
    let wild = table.cert("b.example.com").unwrap();
    assert!(!Arc::ptr_eq(&a, &wild));
    assert!(table.cert("a.b.example.com").is_none());
    assert!(table.cert("other.org").is_none());
}

#[test]
fn unusable_secrets_are_warned_about() {
    let mut w = world();
    let mut bad = tls_secret("a-tls", "a.example.com");
    // Another certificate's key: does not match.
    let other = tls_secret("x", "x");
    bad.data
        .as_mut()
        .unwrap()
        .insert("tls.key".into(), other.data.unwrap()["tls.key"].clone());
    w.secrets = vec![bad];
    let (table, warnings) = w.build();
    assert!(table.cert("a.example.com").is_none());
    let invalid: Vec<_> = warnings
        .iter()
        .filter(|w| w.reason == "InvalidSecret")
        .collect();
    assert_eq!(invalid.len(), 1, "{warnings:?}");
    assert!(
        invalid[0].message.starts_with("TLS secret ns/a-tls: "),
        "{invalid:?}"
    );
}

#[test]
fn ingresses_of_other_classes_or_with_no_default_class_are_ignored() {
    let mut w = world();
    w.classes.clear();
    let (table, warnings) = w.build();
    assert!(table.routes.is_empty() && table.default_backend.is_none());
    assert!(warnings.is_empty());
}

#[test]
fn a_secret_not_yet_read_gets_the_default_certificate_without_a_warning() {
    let mut w = world();
    w.secrets.clear();
    w.unread.insert(("ns".into(), "a-tls".into()));
    let (table, warnings) = w.build();
    assert!(table.cert("a.example.com").is_none());
    assert!(
        warnings.iter().all(|w| !w.message.contains("a-tls")),
        "{warnings:?}"
    );
}
