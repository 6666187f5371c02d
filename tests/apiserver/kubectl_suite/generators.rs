//! kubectl create's generators (protobuf bodies): namespace, configmap, secret (generic, TLS,
//! docker-registry), serviceaccount, deployment, service (clusterip, nodeport, headless).

use super::Ctx;

pub fn create_generators(c: &Ctx) {
    let ns = format!("{}-extra", c.ns);
    assert_eq!(
        c.ok(&["create", "namespace", &ns]),
        format!("namespace/{ns} created\n")
    );
    assert_eq!(
        c.k.ok(&[
            "get",
            "namespace",
            &ns,
            "-o",
            "jsonpath={.status.phase} {.metadata.labels}"
        ]),
        format!("Active {{\"kubernetes.io/metadata.name\":\"{ns}\"}}")
    );
    c.fails_with(&["create", "namespace", &ns], None, "AlreadyExists");

    c.ok(&[
        "create",
        "configmap",
        "cm1",
        "--from-literal=a=b",
        "--from-literal=c=d",
    ]);
    assert_eq!(c.jsonpath("cm/cm1", "{.data}"), r#"{"a":"b","c":"d"}"#);
    let file = c.scratch.join("settings.conf");
    std::fs::write(&file, "x=1\n").unwrap();
    let from_file = format!("--from-file={}", file.display());
    c.ok(&["create", "configmap", "cm2", &from_file]);
    assert_eq!(c.jsonpath("cm/cm2", "{.data.settings\\.conf}"), "x=1\n");

    c.ok(&["create", "secret", "generic", "s1", "--from-literal=x=y"]);
    assert_eq!(c.jsonpath("secret/s1", "{.type} {.data.x}"), "Opaque eQ==");
    c.ok(&[
        "create",
        "secret",
        "docker-registry",
        "pull",
        "--docker-server=r.example",
        "--docker-username=u",
        "--docker-password=p",
    ]);
    assert_eq!(
        c.jsonpath("secret/pull", "{.type}"),
        "kubernetes.io/dockerconfigjson"
    );

    c.ok(&["create", "serviceaccount", "robot"]);
    assert_eq!(
        c.ok(&["get", "sa", "robot", "-o", "name"]),
        "serviceaccount/robot\n"
    );

    c.ok(&[
        "create",
        "deployment",
        "gen",
        "--image=nginx:1.27",
        "--replicas=2",
        "--port=80",
    ]);
    assert_eq!(
        c.jsonpath(
            "deploy/gen",
            "{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.selector.matchLabels.app} {.spec.template.spec.containers[0].ports[0].containerPort}"
        ),
        "2 nginx:1.27 gen 80"
    );

    c.ok(&["create", "service", "clusterip", "gen", "--tcp=80:8080"]);
    let svc = c.jsonpath(
        "svc/gen",
        "{.spec.ports[0].targetPort} {.spec.selector.app} {.spec.type} {.spec.clusterIP}",
    );
    assert!(svc.starts_with("8080 gen ClusterIP 10.43."), "{svc}");
    c.ok(&[
        "create",
        "service",
        "clusterip",
        "headless",
        "--clusterip=None",
        "--tcp=80",
    ]);
    assert_eq!(c.jsonpath("svc/headless", "{.spec.clusterIP}"), "None");
    c.ok(&[
        "create",
        "service",
        "nodeport",
        "np",
        "--tcp=80:8080",
        "--node-port=30123",
    ]);
    assert_eq!(
        c.jsonpath("svc/np", "{.spec.type} {.spec.ports[0].nodePort}"),
        "NodePort 30123"
    );
    // The node port is taken now.
    c.fails_with(
        &[
            "create",
            "service",
            "nodeport",
            "np2",
            "--tcp=80:8080",
            "--node-port=30123",
        ],
        None,
        "provided port is already allocated",
    );
    c.ok(&["delete", "namespace", &ns, "--wait=false"]);
}
