//! describe, label, annotate, patch (JSON, merge, strategic), edit with EDITOR set to a
//! script, scale and set image.

use super::{fixture, Ctx};

pub fn label_annotate_patch(c: &Ctx) {
    c.ok(&["create", "configmap", "cm1", "--from-literal=a=b"]);
    assert_eq!(
        c.ok(&["label", "configmap", "cm1", "color=blue"]),
        "configmap/cm1 labeled\n"
    );
    c.fails_with(
        &["label", "configmap", "cm1", "color=red"],
        None,
        "'color' already has a value (blue), and --overwrite is false",
    );
    c.ok(&["label", "configmap", "cm1", "color=red", "--overwrite"]);
    assert_eq!(
        c.ok(&["annotate", "configmap", "cm1", "note=hi"]),
        "configmap/cm1 annotated\n"
    );
    assert_eq!(
        c.ok(&["get", "configmaps", "-l", "color=red", "-o", "name"]),
        "configmap/cm1\n"
    );
    assert_eq!(
        c.jsonpath(
            "cm/cm1",
            "{.metadata.labels.color} {.metadata.annotations.note}"
        ),
        "red hi"
    );
    c.ok(&["label", "configmap", "cm1", "color-"]);
    c.ok(&["annotate", "configmap", "cm1", "note-"]);
    let meta = c.json("cm/cm1")["metadata"].clone();
    assert!(
        meta.get("labels").is_none() && meta.get("annotations").is_none(),
        "{meta}"
    );

    // Merge patch (null deletes), JSON patch (a failed test is 422), strategic merge patch.
    c.ok(&[
        "patch",
        "configmap",
        "cm1",
        "--type=merge",
        "-p",
        r#"{"data":{"m":"1","a":null}}"#,
    ]);
    c.ok(&[
        "patch",
        "configmap",
        "cm1",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"2"},{"op":"test","path":"/data/m","value":"1"}]"#,
    ]);
    let failed = c.fails_with(
        &[
            "patch",
            "configmap",
            "cm1",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/data/m","value":"zzz"}]"#,
        ],
        None,
        "is invalid",
    );
    assert!(failed.contains("/data/m"), "{failed}");
    c.fails_with(
        &[
            "patch",
            "configmap",
            "cm1",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/data/missing"}]"#,
        ],
        None,
        "",
    );
    assert_eq!(
        c.ok(&["get", "cm", "cm1", "-o", "jsonpath={.data}"]),
        r#"{"j":"2","m":"1"}"#
    );

    c.ok(&["apply", "-f", &fixture("deployment.yaml")]);
    // Strategic: containers merge by name, ports by containerPort, env by name.
    c.ok(&["patch", "deployment", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28","env":[{"name":"A","value":"1"}]}]}}}}"#]);
    c.ok(&[
        "patch",
        "deployment",
        "web",
        "--type=strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}"#,
    ]);
    assert_eq!(
        c.jsonpath("deploy/web", "{.spec.template.spec.containers[?(@.name==\"nginx\")].image} {.spec.template.spec.containers[?(@.name==\"nginx\")].ports[0].containerPort} {.spec.template.spec.containers[?(@.name==\"nginx\")].env[0].name}"),
        "nginx:1.28 80 A"
    );
    let names = c.jsonpath("deploy/web", "{.spec.template.spec.containers[*].name}");
    let mut names: Vec<&str> = names.split(' ').collect();
    names.sort_unstable();
    assert_eq!(names, ["nginx", "sidecar"]);
    // $patch: delete removes one container.
    c.ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}}}"#,
    ]);
    assert_eq!(
        c.jsonpath("deploy/web", "{.spec.template.spec.containers[*].name}"),
        "nginx"
    );
    // A merge patch replaces lists whole.
    c.ok(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"nginx:1.29"}]}}}}"#,
    ]);
    assert_eq!(
        c.jsonpath(
            "deploy/web",
            "{.spec.template.spec.containers[*].name} {.spec.template.spec.containers[0].ports}"
        ),
        "only "
    );
    // Patching a missing object is a 404; a patch making the object invalid is a 422.
    c.fails_with(
        &["patch", "cm", "nope", "-p", "{}"],
        None,
        "configmaps \"nope\" not found",
    );
    c.fails_with(
        &[
            "patch",
            "deployment",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":-1}}"#,
        ],
        None,
        "spec.replicas: Invalid value",
    );
}

pub fn edit_scale_set_image(c: &Ctx) {
    c.ok(&["apply", "-f", &fixture("deployment.yaml")]);
    assert_eq!(c.jsonpath("deploy/web", "{.metadata.generation}"), "1");

    // edit: the editor is a script that rewrites the image in the file kubectl hands it.
    let editor = c.scratch.join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/image: nginx:1.27/image: nginx:1.99/' \"$1\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let editor = editor.display().to_string();
    let out = c.k.run_env(
        &["-n", &c.ns, "edit", "deployment", "web"],
        None,
        &[("EDITOR", &editor), ("KUBE_EDITOR", &editor)],
    );
    assert!(out.ok, "{out:?}");
    assert_eq!(out.stdout, "deployment.apps/web edited\n");
    assert_eq!(
        c.jsonpath(
            "deploy/web",
            "{.spec.template.spec.containers[0].image} {.metadata.generation}"
        ),
        "nginx:1.99 2"
    );
    // An edit that changes nothing is reported as such; an invalid edit is refused.
    let noop = c.scratch.join("noop.sh");
    std::fs::write(&noop, "#!/bin/sh\ntrue\n").unwrap();
    std::fs::set_permissions(&noop, std::fs::Permissions::from_mode(0o755)).unwrap();
    let noop = noop.display().to_string();
    let out = c.k.run_env(
        &["-n", &c.ns, "edit", "deployment", "web"],
        None,
        &[("KUBE_EDITOR", &noop)],
    );
    assert!(
        out.ok && out.stderr.contains("Edit cancelled, no changes made."),
        "{out:?}"
    );

    // scale (the scale subresource), with a precondition.
    assert_eq!(
        c.ok(&["scale", "deploy", "web", "--replicas=4"]),
        "deployment.apps/web scaled\n"
    );
    assert_eq!(
        c.jsonpath("deploy/web", "{.spec.replicas} {.metadata.generation}"),
        "4 3"
    );
    c.fails_with(
        &[
            "scale",
            "deploy",
            "web",
            "--replicas=5",
            "--current-replicas=3",
        ],
        None,
        "Expected replicas to be 3, was 4",
    );
    assert_eq!(c.jsonpath("deploy/web", "{.spec.replicas}"), "4");
    let scale: serde_json::Value = serde_json::from_str(&c.ok(&[
        "get",
        "--raw",
        &format!("/apis/apps/v1/namespaces/{}/deployments/web/scale", c.ns),
    ]))
    .unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(scale["status"]["selector"], "app=web");

    // set image (a strategic merge patch).
    assert_eq!(
        c.ok(&["set", "image", "deployment/web", "nginx=nginx:1.30"]),
        "deployment.apps/web image updated\n"
    );
    assert_eq!(
        c.jsonpath(
            "deploy/web",
            "{.spec.template.spec.containers[0].image} {.metadata.generation}"
        ),
        "nginx:1.30 4"
    );
    c.fails_with(
        &["set", "image", "deployment/web", "nosuch=nginx"],
        None,
        "unable to find container named \"nosuch\"",
    );
}

pub fn describe(c: &Ctx) {
    c.ok(&[
        "apply",
        "-f",
        &fixture("deployment.yaml"),
        "-f",
        &fixture("pod.yaml"),
        "-f",
        &fixture("multi.yaml"),
    ]);
    let d = c.ok(&["describe", "deployment", "web"]);
    for line in [
        "Name:                   web",
        &format!("Namespace:              {}", c.ns),
        "Labels:                 app=web",
        "Selector:               app=web",
        "Replicas:               2 desired | 0 updated | 0 total | 0 available | 0 unavailable",
        "StrategyType:           RollingUpdate",
        "RollingUpdateStrategy:  25% max unavailable, 25% max surge",
        "    Image:         nginx:1.27",
        "    Port:          80/TCP",
    ] {
        assert!(d.contains(line), "{line:?} not in:\n{d}");
    }
    // Columns widen with the longest label ("Service Account:"): compare words.
    let p = c.ok(&["describe", "pod", "p1"]);
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    for line in [
        "Name: p1",
        "Service Account: default",
        "Status: Pending",
        "Image: nginx:1.27",
        "/var/run/secrets/kubernetes.io/serviceaccount from kube-api-access-",
        "ConfigMapName: kube-root-ca.crt",
        "QoS Class: BestEffort",
    ] {
        assert!(words(&p).contains(line), "{line:?} not in:\n{p}");
    }
    let cm = c.ok(&["describe", "cm", "multi-config"]);
    assert!(
        cm.contains("Labels:       bundle=multi") && cm.contains("mode:\n----\nblue"),
        "{cm}"
    );
    let svc = c.ok(&["describe", "svc", "multi-svc"]);
    for line in [
        "Type:                     ClusterIP",
        "Port:                     <unset>  80/TCP",
        "TargetPort:               8080/TCP",
    ] {
        assert!(svc.contains(line), "{line:?} not in:\n{svc}");
    }
    let ns = c.ok(&["describe", "namespace", &c.ns]);
    assert!(ns.contains("Status:       Active"), "{ns}");
    // describe of a whole kind, and by label.
    let all = c.ok(&["describe", "cm", "-l", "bundle=multi"]);
    assert!(all.contains("Name:         multi-config"), "{all}");
    c.fails_with(
        &["describe", "cm", "nope"],
        None,
        "configmaps \"nope\" not found",
    );
}
