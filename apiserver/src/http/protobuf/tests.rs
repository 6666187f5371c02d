use serde_json::json;

use super::*;

/// A message built field by field, as a Go client's `Marshal` writes it.
#[derive(Default)]
struct Msg(Writer);

impl Msg {
    fn s(mut self, tag: u32, v: &str) -> Self {
        self.0.put_bytes(tag, v.as_bytes());
        self
    }
    fn b(mut self, tag: u32, v: &[u8]) -> Self {
        self.0.put_bytes(tag, v);
        self
    }
    fn i(mut self, tag: u32, v: i64) -> Self {
        self.0.put_varint(tag, v as u64);
        self
    }
    fn m(mut self, tag: u32, v: Msg) -> Self {
        self.0.put_bytes(tag, &v.0.buf);
        self
    }
    fn entry(self, tag: u32, k: &str, v: &str) -> Self {
        self.m(tag, Msg::default().s(1, k).s(2, v))
    }
    fn bytes(self) -> Vec<u8> {
        self.0.buf
    }
}

fn envelope(api_version: &str, kind: &str, raw: Msg) -> Vec<u8> {
    let tm = Msg::default().s(1, api_version).s(2, kind);
    let u = Msg::default().m(1, tm).b(2, &raw.bytes()).s(3, "").s(4, "");
    [MAGIC, u.bytes().as_slice()].concat()
}

/// ObjectMeta as Go writes it: every plain string, zero or not, and a zero creationTimestamp.
fn meta(name: &str) -> Msg {
    Msg::default()
        .s(1, name)
        .s(2, "")
        .s(3, "")
        .s(4, "")
        .s(5, "")
        .s(6, "")
        .i(7, 0)
        .m(8, Msg::default())
        .entry(11, "app", name)
}

#[test]
fn deployment_keeps_volumes_probes_and_security_context() {
    let probe = Msg::default()
        .m(
            1,
            // ProbeHandler (inline) → httpGet{path, port: IntOrString(8080)}
            Msg::default().m(
                2,
                Msg::default()
                    .s(1, "/healthz")
                    .m(2, Msg::default().i(1, 0).i(2, 8080).s(3, "")),
            ),
        )
        .i(2, 0)
        .i(3, 1)
        .i(4, 10);
    let container = Msg::default()
        .s(1, "web")
        .s(2, "nginx")
        .m(
            8,
            Msg::default().m(
                1,
                Msg::default().s(1, "cpu").m(2, Msg::default().s(1, "500m")),
            ),
        )
        .m(
            9,
            Msg::default().s(1, "data").i(2, 0).s(3, "/data").s(4, ""),
        )
        .m(10, probe)
        .s(13, "/dev/termination-log")
        .s(14, "IfNotPresent")
        .m(15, Msg::default().i(2, 0).i(4, 1000))
        .i(16, 0)
        .i(17, 0)
        .i(18, 0);
    let volume = Msg::default().s(1, "data").m(
        2,
        Msg::default().m(2, Msg::default().s(1, "").m(2, Msg::default().s(1, "1Gi"))),
    );
    let pod_spec = Msg::default()
        .m(1, volume)
        .m(2, container)
        .s(3, "Always")
        .s(10, "")
        .i(11, 0);
    let spec = Msg::default()
        .i(1, 3)
        .m(2, Msg::default().entry(1, "app", "web"))
        .m(3, Msg::default().m(1, meta("")).m(2, pod_spec))
        .m(4, Msg::default().s(1, "RollingUpdate"))
        .i(5, 0);
    let body = envelope(
        "apps/v1",
        "Deployment",
        Msg::default()
            .m(1, meta("web"))
            .m(2, spec)
            .m(3, Msg::default()),
    );
    let got = decode(&body).unwrap();
    assert_eq!(
        got,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "creationTimestamp": null, "labels": {"app": "web"}},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"creationTimestamp": null, "labels": {"app": ""}},
                    "spec": {
                        "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
                        "containers": [{
                            "name": "web", "image": "nginx",
                            "resources": {"limits": {"cpu": "500m"}},
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            "livenessProbe": {
                                "httpGet": {"path": "/healthz", "port": 8080},
                                "timeoutSeconds": 1, "periodSeconds": 10
                            },
                            "terminationMessagePath": "/dev/termination-log",
                            "imagePullPolicy": "IfNotPresent",
                            "securityContext": {"runAsUser": 1000, "privileged": false}
                        }],
                        "restartPolicy": "Always"
                    }
                },
                "strategy": {"type": "RollingUpdate"}
            },
            "status": {}
        })
    );
    // And back: the protobuf answer decodes to the same object.
    let encoded = encode(&got).expect("every key has a field");
    assert_eq!(decode(&encoded).unwrap(), got);
}

#[test]
fn secret_bytes_ingress_and_times() {
    let secret = envelope(
        "v1",
        "Secret",
        Msg::default()
            .m(1, meta("s"))
            .m(2, Msg::default().s(1, "k").b(2, b"\x00\x01v"))
            .s(3, "Opaque"),
    );
    let got = decode(&secret).unwrap();
    assert_eq!(got["data"], json!({"k": "AAF2"}));
    assert_eq!(got["type"], json!("Opaque"));

    let backend = Msg::default().m(
        4,
        Msg::default()
            .s(1, "svc")
            .m(2, Msg::default().s(1, "").i(2, 80)),
    );
    let rule = Msg::default().s(1, "foo.com").m(
        2,
        Msg::default().m(
            1,
            Msg::default().m(1, Msg::default().s(1, "/").m(2, backend).s(3, "Exact")),
        ),
    );
    let ingress = envelope(
        "networking.k8s.io/v1",
        "Ingress",
        Msg::default()
            .m(1, meta("ing"))
            .m(2, Msg::default().m(3, rule)),
    );
    let got = decode(&ingress).unwrap();
    assert_eq!(
        got["spec"],
        json!({"rules": [{"host": "foo.com", "http": {"paths": [
            {"path": "/", "pathType": "Exact",
             "backend": {"service": {"name": "svc", "port": {"number": 80}}}}
        ]}}]})
    );

    let created = Msg::default()
        .s(1, "e")
        .m(8, Msg::default().i(1, 1_700_000_000));
    let event = envelope(
        "events.k8s.io/v1",
        "Event",
        Msg::default()
            .m(1, created)
            .m(2, Msg::default().i(1, 1_700_000_000).i(2, 5_000_123)),
    );
    let got = decode(&event).unwrap();
    assert_eq!(
        got["metadata"]["creationTimestamp"],
        json!("2023-11-14T22:13:20Z")
    );
    assert_eq!(got["eventTime"], json!("2023-11-14T22:13:20.005000Z"));
    assert_eq!(decode(&encode(&got).unwrap()).unwrap(), got);
}

#[test]
fn unknown_fields_are_refused_not_dropped() {
    let cm = |extra: Msg| envelope("v1", "ConfigMap", extra.m(1, meta("cm")));
    let err = decode(&cm(Msg::default().s(99, "x"))).unwrap_err();
    assert_eq!(err.code, 415);
    assert!(
        err.message.contains("field 99 of api.core.v1.ConfigMap"),
        "{}",
        err.message
    );
    // Nested: an unknown field of ObjectMeta.
    let err = decode(&envelope(
        "v1",
        "ConfigMap",
        Msg::default().m(1, meta("cm").s(77, "x")),
    ))
    .unwrap_err();
    assert_eq!(err.code, 415);
    // A known field with the wrong wire type: malformed.
    let err = decode(&cm(Msg::default().i(2, 5))).unwrap_err();
    assert_eq!(err.code, 400);
    assert!(err.message.contains("wrong wire type"), "{}", err.message);
}

#[test]
fn garbage_and_unknown_kinds() {
    assert_eq!(decode(b"nope").unwrap_err().code, 400);
    assert_eq!(decode(b"k8s\0\x0a\x05ab").unwrap_err().code, 400);
    assert_eq!(
        decode(&envelope("example.com/v1", "Widget", Msg::default()))
            .unwrap_err()
            .code,
        415
    );
}

#[test]
fn encode_refuses_keys_without_fields() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
        "data": {"a": "b"}});
    assert!(encode(&cm).is_some());
    let mut odd = cm.clone();
    odd["surprise"] = json!(1);
    assert_eq!(encode(&odd), None);
    assert_eq!(
        encode(&json!({"apiVersion": "example.com/v1", "kind": "Widget"})),
        None
    );
}

#[test]
fn int_or_string_quantities_and_raw_extensions_round_trip() {
    let obj = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "svc", "creationTimestamp": "2023-11-14T22:13:20Z",
            "managedFields": [{"manager": "kubectl", "operation": "Update",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"ports": [{"port": 80, "targetPort": "http", "protocol": "TCP"},
                           {"port": 81, "targetPort": 8081}],
                 "clusterIP": "10.0.0.1"},
        "status": {"loadBalancer": {}}
    });
    let bytes = encode(&obj).unwrap();
    assert_eq!(decode(&bytes).unwrap(), obj);
    let revision = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "r", "creationTimestamp": null},
        "data": {"spec": {"x": [1, 2]}}, "revision": 2});
    assert_eq!(decode(&encode(&revision).unwrap()).unwrap(), revision);
}

#[test]
fn delete_options_under_any_group_and_lists_with_typed_items() {
    let body = envelope(
        "meta.k8s.io/v1",
        "DeleteOptions",
        Msg::default().i(1, 0).s(4, "Foreground").s(5, "All"),
    );
    assert_eq!(
        decode(&body).unwrap(),
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
            "gracePeriodSeconds": 0, "propagationPolicy": "Foreground", "dryRun": ["All"]})
    );
    // A list's items may carry apiVersion/kind in JSON; protobuf has no place for them.
    let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "7"},
        "items": [{"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "creationTimestamp": null}}]});
    let mut expected = list.clone();
    let item = expected["items"][0].as_object_mut().unwrap();
    item.remove("apiVersion");
    item.remove("kind");
    assert_eq!(decode(&encode(&list).unwrap()).unwrap(), expected);
    // Errors answer as meta/v1 Status.
    let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {},
        "status": "Failure", "message": "nope", "reason": "NotFound", "code": 404,
        "details": {"name": "x", "kind": "configmaps"}});
    assert_eq!(decode(&encode(&status).unwrap()).unwrap(), status);
}

proptest::proptest! {
    /// Arbitrary bytes as a Deployment (or a mutated real one) are decoded or refused with
    /// 400/415, never a panic.
    #[test]
    fn arbitrary_bodies_never_panic(raw in proptest::collection::vec(proptest::num::u8::ANY, 0..512),
                                    cut in 0usize..400) {
        let real = envelope("apps/v1", "Deployment", Msg::default().m(1, meta("web")));
        let mut mutated = real.clone();
        mutated.truncate(cut.max(4));
        mutated.extend(&raw);
        for body in [envelope("apps/v1", "Deployment", Msg(Writer { buf: raw.clone() })), mutated] {
            if let Err(e) = decode(&body) {
                proptest::prop_assert!(e.code == 400 || e.code == 415, "{}", e.message);
            }
        }
    }
}
