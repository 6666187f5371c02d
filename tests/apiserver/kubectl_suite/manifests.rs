//! Files: create/apply/replace -f with one document, several documents and a directory;
//! apply twice (unchanged) and with a changed field; diff; server-side dry run; invalid
//! objects (422 with field paths), conflicts (409) and unknown fields under Strict validation.

use super::{fixture, Ctx};

pub fn create_apply_replace_files(c: &Ctx) {
    // One document.
    let deployment = fixture("deployment.yaml");
    assert_eq!(
        c.ok(&["create", "-f", &deployment]),
        "deployment.apps/web created\n"
    );
    c.fails_with(&["create", "-f", &deployment], None, "AlreadyExists");

    // Several documents in one file, then a directory (YAML and JSON files).
    let multi = fixture("multi.yaml");
    assert_eq!(
        c.ok(&["create", "-f", &multi]),
        "configmap/multi-config created\nservice/multi-svc created\nsecret/multi-secret created\n"
    );
    assert_eq!(
        c.jsonpath("secret/multi-secret", "{.data.token}"),
        "czNjcmV0"
    );
    let dir = fixture("dir");
    assert_eq!(
        c.ok(&["apply", "-f", &dir]),
        "configmap/dir-a created\nserviceaccount/dir-b created\nconfigmap/dir-c created\n"
    );
    assert_eq!(
        c.ok(&["apply", "-f", &dir]),
        "configmap/dir-a unchanged\nserviceaccount/dir-b unchanged\nconfigmap/dir-c unchanged\n"
    );
    assert_eq!(
        c.ok(&["get", "cm,sa", "-l", "bundle=dir", "-o", "name"]),
        "configmap/dir-a\nconfigmap/dir-c\nserviceaccount/dir-b\n"
    );

    // replace -f puts the file's state back, for every document.
    c.ok(&[
        "patch",
        "cm",
        "multi-config",
        "--type=merge",
        "-p",
        r#"{"data":{"mode":"red"}}"#,
    ]);
    assert_eq!(
        c.ok(&["replace", "-f", &multi]),
        "configmap/multi-config replaced\nservice/multi-svc replaced\nsecret/multi-secret replaced\n"
    );
    assert_eq!(c.jsonpath("cm/multi-config", "{.data.mode}"), "blue");
    // The service keeps its allocated ClusterIP through replace.
    assert!(c
        .jsonpath("svc/multi-svc", "{.spec.clusterIP}")
        .starts_with("10.43."));

    // apply: created, unchanged, configured (client-side apply's strategic merge patch).
    let apply = |image: &str| {
        let text = std::fs::read_to_string(&deployment)
            .unwrap()
            .replace("name: web", "name: applied")
            .replace("nginx:1.27", image);
        c.ok_stdin(&["apply", "-f", "-"], &text)
    };
    assert_eq!(apply("nginx:1.27"), "deployment.apps/applied created\n");
    assert_eq!(apply("nginx:1.27"), "deployment.apps/applied unchanged\n");
    let generation = c.jsonpath("deploy/applied", "{.metadata.generation}");
    assert_eq!(generation, "1");
    assert_eq!(apply("nginx:1.28"), "deployment.apps/applied configured\n");
    assert_eq!(
        c.jsonpath(
            "deploy/applied",
            "{.metadata.generation} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}"
        ),
        "2 nginx:1.28 80"
    );
    let last = c.jsonpath(
        "deploy/applied",
        r"{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}",
    );
    assert!(last.contains("nginx:1.28"), "{last}");

    // apply over an object made by create adopts it (with a warning about the annotation).
    let out = c.run(&["apply", "-f", &deployment]);
    assert!(out.ok, "{out:?}");
    assert!(
        out.stdout.contains("deployment.apps/web configured"),
        "{out:?}"
    );
    assert!(
        out.stderr
            .contains("missing the kubectl.kubernetes.io/last-applied-configuration"),
        "{out:?}"
    );
}

pub fn invalid_objects_conflicts_strict(c: &Ctx) {
    // 422 with every field path.
    let invalid = c.fails_with(
        &["create", "-f", &fixture("invalid-deployment.yaml")],
        None,
        "The Deployment \"broken\" is invalid",
    );
    assert!(
        invalid.contains("spec.template.metadata.labels: Invalid value"),
        "{invalid}"
    );
    assert!(
        invalid.contains("spec.template.spec.containers[0].image: Required value"),
        "{invalid}"
    );
    c.fails_with(
        &["create", "configmap", "Bad_Name"],
        None,
        "metadata.name: Invalid value: \"Bad_Name\"",
    );
    let bad_label = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: l, labels: {\"a b\": c}}\n";
    c.fails_with(
        &["create", "-f", "-"],
        Some(bad_label),
        "metadata.labels: Invalid value: \"a b\"",
    );
    c.fails_with(
        &["create", "configmap", "x", "-n", "no-such-namespace"],
        None,
        "namespaces \"no-such-namespace\" not found",
    );

    // Strict field validation (kubectl's default): unknown fields are a 400, on create (POST)
    // and on apply to an existing object (PATCH).
    let unknown = fixture("unknown-field.yaml");
    c.fails_with(
        &["create", "-f", &unknown],
        None,
        "strict decoding error: unknown field \"bogus\"",
    );
    c.fails_with(&["apply", "-f", &unknown], None, "unknown field \"bogus\"");
    let deployment = std::fs::read_to_string(fixture("deployment.yaml")).unwrap();
    c.ok_stdin(&["apply", "-f", "-"], &deployment);
    let typo = deployment.replace("  replicas: 2", "  replicaz: 2");
    c.fails_with(
        &["apply", "-f", "-"],
        Some(&typo),
        "unknown field \"spec.replicaz\"",
    );
    // Warn (and Ignore) drop them; Warn says so.
    let out = c.run(&["create", "--validate=warn", "-f", &unknown]);
    assert!(out.ok, "{out:?}");
    assert!(
        out.stderr.contains("Warning: unknown field \"bogus\""),
        "{out:?}"
    );
    assert!(!c
        .ok(&["get", "cm", "strict", "-o", "json"])
        .contains("bogus"));
    c.ok(&["delete", "cm", "strict"]);
    c.ok(&["create", "--validate=false", "-f", &unknown]);
    assert!(!c
        .ok(&["get", "cm", "strict", "-o", "json"])
        .contains("bogus"));

    // 409: a replace carrying an old resourceVersion.
    c.ok(&["create", "configmap", "raced", "--from-literal=v=1"]);
    let stale = c.ok(&["get", "configmap", "raced", "-o", "json"]);
    let fresh = stale.replace("\"v\": \"1\"", "\"v\": \"2\"");
    assert_ne!(stale, fresh);
    c.ok_stdin(&["replace", "-f", "-"], &fresh);
    let conflict = stale.replace("\"v\": \"1\"", "\"v\": \"3\"");
    c.fails_with(
        &["replace", "-f", "-"],
        Some(&conflict),
        "the object has been modified; please apply your changes to the latest version and try again",
    );
    assert_eq!(c.jsonpath("cm/raced", "{.data.v}"), "2");
    // Creating what exists is a 409 too.
    c.fails_with(
        &["create", "configmap", "raced"],
        None,
        "configmaps \"raced\" already exists",
    );
    // A bad continue token is a 400 with kube's message.
    let url = format!(
        "/api/v1/namespaces/{}/configmaps?limit=1&continue=garbage",
        c.ns
    );
    c.fails_with(&["get", "--raw", &url], None, "continue key is not valid");
}

pub fn server_dry_run(c: &Ctx) {
    let out = c.ok(&[
        "create",
        "configmap",
        "dry",
        "--from-literal=a=b",
        "--dry-run=server",
        "-o",
        "json",
    ]);
    let obj: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(obj["metadata"]["name"], "dry");
    assert!(obj["metadata"]["uid"].is_string(), "{out}");
    c.fails_with(&["get", "cm", "dry"], None, "not found");
    let applied = c.ok(&[
        "apply",
        "-f",
        &fixture("deployment.yaml"),
        "--dry-run=server",
    ]);
    assert_eq!(applied, "deployment.apps/web created (server dry run)\n");
    c.fails_with(&["get", "deploy", "web"], None, "not found");
    // Server dry run still validates.
    c.fails_with(
        &[
            "create",
            "-f",
            &fixture("invalid-deployment.yaml"),
            "--dry-run=server",
        ],
        None,
        "is invalid",
    );

    c.ok(&["apply", "-f", &fixture("deployment.yaml")]);
    c.ok(&["scale", "deploy", "web", "--replicas=7", "--dry-run=server"]);
    c.ok(&["label", "deploy", "web", "dry=run", "--dry-run=server"]);
    c.ok(&["delete", "deploy", "web", "--dry-run=server"]);
    assert_eq!(
        c.jsonpath("deploy/web", "{.spec.replicas} {.metadata.labels.dry}"),
        "2 "
    );
}

pub fn diff(c: &Ctx) {
    let deployment = fixture("deployment.yaml");
    // A missing object: everything is new (exit code 1 means "differences").
    let out = c.run(&["diff", "-f", &deployment]);
    assert!(!out.ok && out.stdout.contains("+  name: web"), "{out:?}");
    c.ok(&["create", "-f", &deployment]);
    // Made by create, unchanged file: no difference (no `annotations: {}` either).
    let out = c.run(&["diff", "-f", &deployment]);
    assert!(out.ok && out.stdout.is_empty(), "{out:?}");
    c.ok(&["apply", "-f", &deployment]);
    let out = c.run(&["diff", "-f", &deployment]);
    assert!(out.ok && out.stdout.is_empty(), "{out:?}");
    let changed = std::fs::read_to_string(&deployment)
        .unwrap()
        .replace("nginx:1.27", "nginx:1.28");
    let out = c.run_stdin(&["diff", "-f", "-"], &changed);
    assert!(!out.ok, "{out:?}");
    assert!(out.stdout.contains("-      - image: nginx:1.27"), "{out:?}");
    assert!(out.stdout.contains("+      - image: nginx:1.28"), "{out:?}");
    // 2 already: apply added its last-applied annotation, and a Deployment's annotation
    // change bumps its generation (upstream's deploymentStrategy).
    assert!(
        out.stdout.contains("-  generation: 2\n+  generation: 3"),
        "{out:?}"
    );
    // Server-side: the image belongs to kubectl-create, so force the (dry-run) apply.
    let out = c.run_stdin(
        &["diff", "--server-side", "--force-conflicts", "-f", "-"],
        &changed,
    );
    assert!(
        !out.ok && out.stdout.contains("+      - image: nginx:1.28"),
        "{out:?}"
    );
    // diff changed nothing.
    assert_eq!(
        c.jsonpath("deploy/web", "{.spec.template.spec.containers[0].image}"),
        "nginx:1.27"
    );
}
