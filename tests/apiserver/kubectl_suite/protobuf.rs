//! Protobuf bodies stored exactly as their JSON twins: each of kubectl's `create` generators
//! sends its object as protobuf; the same generator with `--dry-run=client -o json` piped
//! into `kubectl create -f -` sends it as JSON. Both stored objects are compared field by
//! field (names, namespaces, uids and server-set metadata normalized). A protobuf body with
//! a field number the server does not know is refused with 415, and nothing is stored.

use bytes::Bytes;
use serde_json::Value;

use super::Ctx;
use crate::common::client::runtime;
use crate::common::kube::{KubeClient, Kubeconfig};

/// `(resource to get, kubectl create arguments)`; `NAME` is replaced by the object's name.
const GENERATORS: &[(&str, &[&str])] = &[
    (
        "configmap",
        &[
            "configmap",
            "NAME",
            "--from-literal=a=b",
            "--from-literal=empty=",
        ],
    ),
    (
        "secret",
        &[
            "secret",
            "generic",
            "NAME",
            "--from-literal=x=y",
            "--type=Opaque",
        ],
    ),
    (
        "secret",
        &[
            "secret",
            "docker-registry",
            "NAME",
            "--docker-server=r.example",
            "--docker-username=u",
            "--docker-password=p",
        ],
    ),
    ("serviceaccount", &["serviceaccount", "NAME"]),
    (
        "deployment",
        &[
            "deployment",
            "NAME",
            "--image=nginx:1.27",
            "--replicas=0",
            "--port=80",
        ],
    ),
    (
        "job",
        &[
            "job",
            "NAME",
            "--image=busybox:1.36",
            "--",
            "sh",
            "-c",
            "exit 0",
        ],
    ),
    (
        "cronjob",
        &[
            "cronjob",
            "NAME",
            "--image=busybox:1.36",
            "--schedule=*/5 * * * *",
            "--restart=OnFailure",
            "--",
            "date",
        ],
    ),
    (
        "service",
        &["service", "clusterip", "NAME", "--tcp=80:8080", "--tcp=443"],
    ),
    (
        "service",
        &["service", "clusterip", "NAME", "--clusterip=None"],
    ),
    (
        "service",
        &[
            "service",
            "externalname",
            "NAME",
            "--external-name=db.example",
        ],
    ),
    (
        "role",
        &[
            "role",
            "NAME",
            "--verb=get,list",
            "--resource=pods,deployments.apps",
            "--resource-name=one",
        ],
    ),
    (
        "rolebinding",
        &[
            "rolebinding",
            "NAME",
            "--role=reader",
            "--user=alice",
            "--group=devs",
            "--serviceaccount=default:robot",
        ],
    ),
    (
        "clusterrole",
        &[
            "clusterrole",
            "NAME",
            "--verb=get",
            "--non-resource-url=/healthz",
        ],
    ),
    (
        "clusterrole",
        &["clusterrole", "NAME", "--aggregation-rule=team=a"],
    ),
    (
        "clusterrolebinding",
        &[
            "clusterrolebinding",
            "NAME",
            "--clusterrole=view",
            "--group=g",
        ],
    ),
    (
        "ingress",
        &[
            "ingress",
            "NAME",
            "--class=default",
            "--rule=foo.com/bar=svc1:8080,tls=my-cert",
            "--rule=/path*=svc2:http",
            "--default-backend=defsvc:80",
            "--annotation=a=b",
        ],
    ),
    (
        "priorityclass",
        &[
            "priorityclass",
            "NAME",
            "--value=1000",
            "--description=twins",
            "--preemption-policy=Never",
        ],
    ),
    (
        "resourcequota",
        &["quota", "NAME", "--hard=cpu=1,memory=1G,pods=2"],
    ),
    (
        "poddisruptionbudget",
        &[
            "poddisruptionbudget",
            "NAME",
            "--selector=app=x",
            "--min-available=50%",
        ],
    ),
    ("namespace", &["namespace", "NAME"]),
];

/// The two stored objects of one generator, made comparable: the object's own name,
/// namespace and uid become placeholders; server-set metadata and status are dropped.
fn normalized(obj: &Value, namespace: &str) -> Value {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let uid = obj["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut v = obj.clone();
    let meta = v["metadata"].as_object_mut().expect("metadata");
    for k in ["resourceVersion", "creationTimestamp", "uid", "generation"] {
        meta.remove(k);
    }
    if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
        for e in entries {
            e.as_object_mut().map(|e| e.remove("time"));
        }
    }
    if let Some(Value::Object(annotations)) = meta.get_mut("annotations") {
        annotations.remove("deployment.kubernetes.io/revision");
    }
    v.as_object_mut().map(|o| o.remove("status"));
    // Allocated per Service.
    if let Some(spec) = v["spec"].as_object_mut() {
        if spec.get("clusterIP").is_some_and(|ip| ip != "None") {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
    }
    let text = v
        .to_string()
        .replace(&uid, "UID")
        .replace(&format!("\"{name}\""), "\"NAME\"")
        .replace(&format!("{name}-"), "NAME-")
        .replace(namespace, "NS");
    serde_json::from_str(&text).unwrap()
}

pub fn stored_like_json(c: &Ctx) {
    let json_ns = format!("{}-json", c.ns);
    c.ok(&["create", "namespace", &json_ns]);
    for (i, (resource, args)) in GENERATORS.iter().enumerate() {
        let cluster_scoped = matches!(
            *resource,
            "clusterrole" | "clusterrolebinding" | "priorityclass" | "namespace"
        );
        let (pb_name, js_name) = if cluster_scoped {
            (format!("{}-pb{i}", c.ns), format!("{}-js{i}", c.ns))
        } else {
            (format!("twin{i}"), format!("twin{i}"))
        };
        let with = |name: &str| -> Vec<String> {
            args.iter()
                .map(|a| {
                    if *a == "NAME" {
                        name.to_string()
                    } else {
                        a.to_string()
                    }
                })
                .collect()
        };
        // Protobuf: kubectl's typed client.
        let mut pb: Vec<String> = vec!["-n".into(), c.ns.clone(), "create".into()];
        pb.extend(with(&pb_name));
        c.k.ok(&pb.iter().map(String::as_str).collect::<Vec<_>>());
        // JSON: the same generator, printed, then created from the file.
        // (Flags before the generator's own: job and cronjob end with `-- command`.)
        let mut dry: Vec<String> = ["-n", &json_ns, "create", "--dry-run=client", "-o", "json"]
            .map(String::from)
            .to_vec();
        dry.extend(with(&js_name));
        let printed = c.k.ok(&dry.iter().map(String::as_str).collect::<Vec<_>>());
        c.k.ok_stdin(&["-n", &json_ns, "create", "-f", "-"], Some(&printed));

        let get = |ns: &str, name: &str| -> Value {
            let out = c.k.ok(&["-n", ns, "get", resource, name, "-o", "json"]);
            serde_json::from_str(&out).unwrap()
        };
        // Controllers may still be adding their parts (finalizers, labels) to the younger
        // twin: compare until equal, for a bounded time.
        let mut tries = 0;
        loop {
            let from_pb = normalized(&get(&c.ns, &pb_name), &c.ns);
            let from_js = normalized(&get(&json_ns, &js_name), &json_ns);
            if from_pb == from_js {
                break;
            }
            tries += 1;
            assert!(
                tries < 20,
                "kubectl create {args:?}: the protobuf body is stored unlike its JSON twin\n\
                 protobuf: {from_pb:#}\njson:     {from_js:#}"
            );
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        if cluster_scoped {
            c.k.ok(&["delete", resource, &pb_name, &js_name, "--wait=false"]);
        }
    }
    c.ok(&["delete", "namespace", &json_ns, "--wait=false"]);
}

/// A ConfigMap as client-go writes it, with an extra field `tag` after the known ones.
fn configmap_body(name: &str, extra_tag: Option<u8>) -> Vec<u8> {
    fn field(tag: u8, bytes: &[u8]) -> Vec<u8> {
        assert!(tag < 16 && bytes.len() < 128);
        [vec![(tag << 3) | 2, bytes.len() as u8], bytes.to_vec()].concat()
    }
    let meta = field(1, name.as_bytes());
    let entry = [field(1, b"k"), field(2, b"v")].concat();
    let mut cm = [field(1, &meta), field(2, &entry)].concat();
    if let Some(tag) = extra_tag {
        cm.extend(field(tag, b"surprise"));
    }
    let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
    let unknown = [field(1, &type_meta), field(2, &cm)].concat();
    [b"k8s\0".to_vec(), unknown].concat()
}

pub fn unknown_fields_refused(c: &Ctx) {
    let path = format!("/api/v1/namespaces/{}/configmaps", c.ns);
    let rt = runtime();
    rt.block_on(async {
        let client = KubeClient::connect(&Kubeconfig::read(&c.k.kubeconfig).unwrap())
            .await
            .unwrap();
        let post = |body: Vec<u8>| {
            client.raw(
                "POST",
                &path,
                "application/vnd.kubernetes.protobuf",
                Some(Bytes::from(body)),
            )
        };
        let (code, body) = post(configmap_body("odd", Some(9))).await.unwrap();
        let text = String::from_utf8_lossy(&body);
        assert_eq!(code, 415, "{text}");
        assert!(
            text.contains("protobuf field 9 of api.core.v1.ConfigMap is not known"),
            "{text}"
        );
        let (code, body) = post(configmap_body("plain", None)).await.unwrap();
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    });
    c.fails_with(&["get", "configmap", "odd"], None, "NotFound");
    assert_eq!(c.jsonpath("configmap/plain", "{.data.k}"), "v");
}
