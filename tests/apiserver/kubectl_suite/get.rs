//! kubectl get: every output format, label and field selectors, all namespaces, paging,
//! sorting, labels; and the server-side Tables with kube's columns.

use super::{fixture, header, table, Ctx};

pub fn outputs_and_selectors(c: &Ctx) {
    c.ok(&["apply", "-f", &fixture("multi.yaml"), "-f", &fixture("dir")]);
    c.ok(&["create", "configmap", "plain", "--from-literal=k=v"]);

    // -o name, json, yaml, jsonpath, custom-columns.
    assert_eq!(
        c.ok(&["get", "cm", "-o", "name"]),
        // kube-root-ca.crt: the root CA publisher's, in every namespace.
        "configmap/dir-a\nconfigmap/dir-c\nconfigmap/kube-root-ca.crt\nconfigmap/multi-config\nconfigmap/plain\n"
    );
    let json = c.json("cm/plain");
    assert_eq!(json["kind"], "ConfigMap");
    assert_eq!(json["apiVersion"], "v1");
    assert_eq!(json["data"]["k"], "v");
    assert_eq!(json["metadata"]["namespace"], c.ns.as_str());
    assert!(json["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| u.len() == 36));
    assert!(json["metadata"]["resourceVersion"]
        .as_str()
        .is_some_and(|r| r.parse::<u64>().is_ok()));
    let list: serde_json::Value =
        serde_json::from_str(&c.ok(&["get", "cm", "-o", "json"])).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(5)); // with kube-root-ca.crt
    let yaml = c.ok(&["get", "cm", "plain", "-o", "yaml"]);
    assert!(
        yaml.starts_with("apiVersion: v1\ndata:\n  k: v\nkind: ConfigMap\n"),
        "{yaml}"
    );
    assert_eq!(
        c.ok(&[
            "get",
            "cm",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.data.file}{\"\\n\"}{end}",
            "-l",
            "bundle=dir"
        ]),
        "dir-a=a\ndir-c=c\n"
    );
    let custom = c.ok(&[
        "get",
        "svc",
        "-o",
        "custom-columns=NAME:.metadata.name,PORT:.spec.ports[0].port,TARGET:.spec.ports[0].targetPort",
    ]);
    assert_eq!(
        table(&custom),
        [["NAME", "PORT", "TARGET"], ["multi-svc", "80", "8080"]]
    );

    // Label selectors: equality, set-based, existence, negation.
    let names = |args: &[&str]| {
        let mut a = vec!["get", "cm,secret,sa", "-o", "name"];
        a.extend_from_slice(args);
        c.ok(&a)
    };
    assert_eq!(
        names(&["-l", "bundle=multi"]),
        "configmap/multi-config\nsecret/multi-secret\n"
    );
    assert_eq!(
        names(&["-l", "bundle in (dir)"]),
        "configmap/dir-a\nconfigmap/dir-c\nserviceaccount/dir-b\n"
    );
    // Unlabelled: plain and what the controllers made (root CA, default account).
    assert_eq!(
        names(&["-l", "!bundle"]),
        "configmap/kube-root-ca.crt\nconfigmap/plain\nserviceaccount/default\n"
    );
    assert_eq!(
        c.ok(&["get", "cm", "-l", "bundle,bundle notin (dir)", "-o", "name"]),
        "configmap/multi-config\n"
    );
    c.fails_with(
        &["get", "cm", "-l", "a=(b"],
        None,
        "unable to parse requirement",
    );

    // Field selectors, one namespace and all of them.
    assert_eq!(
        c.ok(&[
            "get",
            "cm",
            "--field-selector",
            "metadata.name=plain",
            "-o",
            "name"
        ]),
        "configmap/plain\n"
    );
    assert_eq!(
        c.ok(&[
            "get",
            "cm",
            "--field-selector",
            "metadata.name!=plain,metadata.name!=dir-a",
            "-o",
            "name"
        ]),
        "configmap/dir-c\nconfigmap/kube-root-ca.crt\nconfigmap/multi-config\n"
    );
    let ns_filter = format!("metadata.namespace={}", c.ns);
    let all = c.ok(&[
        "get",
        "cm",
        "-A",
        "--field-selector",
        &ns_filter,
        "-l",
        "bundle=dir",
        "-o",
        "name",
    ]);
    assert_eq!(all, "configmap/dir-a\nconfigmap/dir-c\n");
    c.fails_with(
        &["get", "cm", "--field-selector", "spec.nodeName=x"],
        None,
        "field label not supported",
    );

    // -A prints a NAMESPACE column and finds objects of every namespace.
    let everywhere = c.ok(&["get", "svc", "-A"]);
    assert_eq!(header(&everywhere)[0], "NAMESPACE");
    let rows = table(&everywhere);
    assert!(
        rows.iter().any(|r| r[..2] == ["default", "kubernetes"]),
        "{everywhere}"
    );
    assert!(
        rows.iter().any(|r| r[0] == c.ns && r[1] == "multi-svc"),
        "{everywhere}"
    );

    // Paging: kubectl pages with --chunk-size.
    assert_eq!(
        c.ok(&["get", "cm", "--chunk-size=1", "-o", "name"]),
        "configmap/dir-a\nconfigmap/dir-c\nconfigmap/kube-root-ca.crt\nconfigmap/multi-config\nconfigmap/plain\n"
    );
}

pub fn tables(c: &Ctx) {
    c.ok(&[
        "apply",
        "-f",
        &fixture("pod.yaml"),
        "-f",
        &fixture("deployment.yaml"),
    ]);

    let pods = c.ok(&["get", "pods"]);
    assert_eq!(
        header(&pods),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    assert_eq!(table(&pods)[1][..4], ["p1", "0/1", "Pending", "0"]);
    let wide = c.ok(&["get", "pods", "-o", "wide"]);
    assert_eq!(
        header(&wide),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ]
    );
    let deploy = c.ok(&["get", "deploy", "-o", "wide"]);
    assert_eq!(
        header(&deploy),
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row = &table(&deploy)[1];
    assert_eq!(row[..4], ["web", "0/2", "0", "0"]);
    assert_eq!(row[5..], ["nginx", "nginx:1.27", "app=web"]);
    let scale = c.ok(&["get", "deploy", "web", "--subresource=scale"]);
    assert_eq!(header(&scale), ["NAME", "DESIRED", "AVAILABLE", "AGE"]);
    assert_eq!(table(&scale)[1][..3], ["web", "2", "0"]);
    let ns = c.ok(&["get", "ns", &c.ns]);
    assert_eq!(table(&ns)[0], ["NAME", "STATUS", "AGE"]);
    assert_eq!(table(&ns)[1][..2], [c.ns.as_str(), "Active"]);
    let svc = c.ok(&["get", "svc", "kubernetes", "-n", "default", "-o", "wide"]);
    assert_eq!(
        header(&svc),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ]
    );
    assert_eq!(
        table(&svc)[1][..5],
        ["kubernetes", "ClusterIP", "10.43.0.1", "<none>", "443/TCP"]
    );

    // --sort-by needs whole objects in the rows; --show-labels reads their metadata.
    c.ok(&["create", "configmap", "zz", "--from-literal=rank=1"]);
    c.ok(&[
        "create",
        "configmap",
        "aa",
        "--from-literal=rank=2",
        "--from-literal=x=y",
    ]);
    let sorted = c.ok(&["get", "cm", "--sort-by=.data.rank"]);
    assert_eq!(header(&sorted), ["NAME", "DATA", "AGE"]);
    let rows = table(&sorted);
    // kube-root-ca.crt has no rank: kubectl sorts it first.
    let names: Vec<&str> = rows[1..].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["kube-root-ca.crt", "zz", "aa"], "{sorted}");
    assert_eq!(rows[3][1], "2");
    let by_name = c.ok(&["get", "cm", "--sort-by=.metadata.name", "-o", "name"]);
    assert_eq!(
        by_name,
        "configmap/aa\nconfigmap/kube-root-ca.crt\nconfigmap/zz\n"
    );
    let labels = c.ok(&["get", "pods", "--show-labels"]);
    assert_eq!(header(&labels).last().map(String::as_str), Some("LABELS"));
    assert_eq!(
        table(&labels)[1].last().map(String::as_str),
        Some("tier=web")
    );
    let columns = c.ok(&["get", "deploy", "-L", "app"]);
    assert_eq!(header(&columns).last().map(String::as_str), Some("APP"));
    assert_eq!(table(&columns)[1].last().map(String::as_str), Some("web"));
    // get of several kinds at once, and get all.
    let both = c.ok(&["get", "deploy,pods", "-o", "name"]);
    assert_eq!(both, "deployment.apps/web\npod/p1\n");
    let all = c.ok(&["get", "all", "-o", "name"]);
    assert!(
        all.contains("pod/p1\n") && all.contains("deployment.apps/web\n"),
        "{all}"
    );
    c.fails_with(&["get", "pods", "nope"], None, "pods \"nope\" not found");
    c.fails_with(
        &["get", "nosuchkind"],
        None,
        "the server doesn't have a resource type \"nosuchkind\"",
    );
}
