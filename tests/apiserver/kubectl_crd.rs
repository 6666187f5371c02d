//! End to end: CustomResourceDefinitions with the real `k3rs server` and the real `kubectl`.
//! A namespaced CRD with two versions, status and scale subresources, printer columns, a
//! short name, the `all` category, defaults and validation; custom resources created, read
//! through both versions, patched, scaled, listed with their columns, explained, rejected
//! with upstream field paths (422), pruned, rejected under Strict field validation; a
//! cluster-scoped CRD; deleting a CRD deleting its custom resources; junctors, list types,
//! int-or-string and formats enforced, and non-structural schemas refused.

use crate::common;
use crate::common::kubectl::{Kubectl, Watch};

const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: A widget for the k3rs end-to-end test.
        properties:
          spec:
            type: object
            description: What the widget should be.
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10, description: How big the widget is.}
              color: {type: string, enum: [red, blue], default: red}
              replicas: {type: integer, default: 1}
              name: {type: string, pattern: '^[a-z]+$'}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
"#;

const GADGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {plural: gadgets, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {mode: {type: string}}}
"#;

fn widget(name: &str, spec: &str) -> String {
    common::kubectl::example_object("Widget", name, spec)
}

fn jsonpath(k: &Kubectl, what: &[&str], path: &str) -> String {
    let arg = format!("jsonpath={path}");
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend(["-o", arg.as_str()]);
    k.ok(&args)
}

#[test]
fn custom_resources_with_kubectl() {
    let (_server, k) = Kubectl::start_server(&["--disable-agent"]);

    // The CRD: accepted, established, with its names and stored version in the status.
    k.ok_stdin(&["apply", "-f", "-"], Some(WIDGETS));
    k.crd_established("widgets.example.com");
    let crd = ["crd", "widgets.example.com"];
    assert_eq!(
        jsonpath(&k, &crd, "{.status.acceptedNames.shortNames[0]}"),
        "wd"
    );
    assert_eq!(jsonpath(&k, &crd, "{.status.storedVersions}"), "[\"v1\"]");
    assert_eq!(
        jsonpath(
            &k,
            &crd,
            "{.status.conditions[?(@.type==\"NamesAccepted\")].reason}"
        ),
        "NoConflicts"
    );

    // Discovery: the resource, its short name, category and subresources.
    let resources = k.ok(&["api-resources", "--api-group=example.com", "-o", "wide"]);
    let line = resources
        .lines()
        .find(|l| l.starts_with("widgets "))
        .unwrap_or_else(|| panic!("widgets not in api-resources:\n{resources}"));
    for word in ["wd", "example.com/v1", "true", "Widget", "all"] {
        assert!(
            line.split_whitespace().any(|w| w.contains(word)),
            "{word} in {line:?}"
        );
    }
    let group = k.ok(&["get", "--raw", "/apis/example.com"]);
    assert!(
        group.contains("\"preferredVersion\":{\"groupVersion\":\"example.com/v1\""),
        "{group}"
    );

    // Create with defaults and pruning (validation off: the unknown field is dropped).
    k.ok_stdin(
        &["apply", "--validate=false", "-f", "-"],
        Some(&widget("w1", "{size: 3, extra: dropped}")),
    );
    let w1 = ["widget", "w1"];
    assert_eq!(
        jsonpath(&k, &w1, "{.spec}"),
        "{\"color\":\"red\",\"replicas\":1,\"size\":3}"
    );
    assert_eq!(jsonpath(&k, &w1, "{.metadata.generation}"), "1");
    // Strict field validation (kubectl's default) rejects the unknown field.
    k.fails_with(
        &["create", "-f", "-"],
        Some(&widget("w2", "{size: 3, extra: x}")),
        "unknown field \"spec.extra\"",
    );
    // Schema validation: 422 with upstream field paths.
    let err = k.fails_with(
        &["create", "-f", "-"],
        Some(&widget("w3", "{size: 20, color: green, name: Bad}")),
        "is invalid",
    );
    for needle in [
        "spec.size: Invalid value: 20: spec.size in body should be less than or equal to 10",
        "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\"",
        "spec.name: Invalid value: \"Bad\": spec.name in body should match '^[a-z]+$'",
    ] {
        assert!(err.contains(needle), "{needle} in {err}");
    }
    k.fails_with(
        &["create", "-f", "-"],
        Some(&widget("w4", "{color: blue}")),
        "spec.size: Required value",
    );

    // Printer columns, short name, category `all`, the other version.
    let table = k.ok(&["get", "widgets"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "SIZE", "COLOR", "REPLICAS", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row[..4], ["w1", "3", "red", "1"], "{table}");
    assert!(k
        .ok(&["get", "wd", "-o", "name"])
        .contains("widget.example.com/w1"));
    assert!(k.ok(&["get", "all"]).contains("widget.example.com/w1"));
    assert_eq!(
        jsonpath(&k, &["widgets.v1beta1.example.com", "w1"], "{.apiVersion}"),
        "example.com/v1beta1"
    );

    // kubectl explain reads the OpenAPI v3 document built from the schema.
    let explain = k.ok(&["explain", "widgets.spec"]);
    assert!(explain.contains("What the widget should be."), "{explain}");
    assert!(explain.contains("How big the widget is."), "{explain}");
    assert!(
        explain
            .lines()
            .any(|l| l.contains("size") && l.contains("<integer>") && l.contains("-required-")),
        "{explain}"
    );

    // Patches: spec changes bump the generation; the main resource ignores .status and the
    // status subresource ignores everything else.
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":4},"status":{"replicas":9}}"#,
    ]);
    assert_eq!(
        jsonpath(
            &k,
            &w1,
            "{.spec.size}/{.status.replicas}/{.metadata.generation}"
        ),
        "4//2"
    );
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":2,"selector":"app=w"},"spec":{"size":9}}"#,
    ]);
    assert_eq!(
        jsonpath(
            &k,
            &w1,
            "{.spec.size}/{.status.replicas}/{.metadata.generation}"
        ),
        "4/2/2"
    );
    k.fails_with(
        &[
            "patch",
            "widget",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":0}}"#,
        ],
        None,
        "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
    );

    // Client-side apply of a changed custom resource (a merge patch: custom resources take no
    // strategic merge patch) and a watch seeing it.
    let dir = tempfile::tempdir().expect("tempdir");
    let watch = Watch::start(
        &k,
        &["get", "widgets", "-w", "-o", "name"],
        &dir.path().join("w"),
    );
    watch.wait_for("widget.example.com/w1", 1);
    let applied = k.ok_stdin(
        &["apply", "--validate=false", "-f", "-"],
        Some(&widget("w1", "{size: 5}")),
    );
    assert!(applied.contains("configured"), "{applied}");
    assert_eq!(
        jsonpath(&k, &w1, "{.spec.size}/{.metadata.generation}"),
        "5/3"
    );
    watch.wait_for("widget.example.com/w1", 2);
    k.fails_with(
        &[
            "patch",
            "widget",
            "w1",
            "--type=strategic",
            "-p",
            r#"{"spec":{"size":6}}"#,
        ],
        None,
        "the body of the request was in an unknown format",
    );
    drop(watch);

    // Scale subresource.
    k.ok(&["scale", "widget", "w1", "--replicas=3"]);
    assert_eq!(jsonpath(&k, &w1, "{.spec.replicas}"), "3");
    let scale = k.ok(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets/w1/scale",
    ]);
    let scale: serde_json::Value = serde_json::from_str(&scale).expect("scale json");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(
        scale["status"],
        serde_json::json!({"replicas": 2, "selector": "app=w"})
    );

    // A cluster-scoped CRD.
    k.ok_stdin(&["apply", "-f", "-"], Some(GADGETS));
    k.crd_established("gadgets.example.com");
    k.ok_stdin(
        &["create", "-f", "-"],
        Some(
            "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {mode: fast}\n",
        ),
    );
    assert_eq!(jsonpath(&k, &["gadget", "g1"], "{.spec.mode}"), "fast");
    let gadgets = k.ok(&["get", "gadgets"]);
    assert_eq!(
        gadgets
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["NAME", "AGE"]
    );
    assert!(!k
        .ok(&["get", "--raw", "/apis/example.com/v1/gadgets/g1"])
        .contains("\"namespace\""));

    // Deleting the CRD deletes its custom resources and stops serving them.
    k.ok(&[
        "delete",
        "crd",
        "widgets.example.com",
        "--wait=true",
        "--timeout=30s",
    ]);
    let gone = k.run(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets",
    ]);
    assert!(!gone.ok && gone.stderr.contains("NotFound"), "{gone:?}");
    k.ok_stdin(&["apply", "-f", "-"], Some(WIDGETS));
    k.crd_established("widgets.example.com");
    let after = k.run(&["get", "widgets", "-o", "name"]);
    assert!(after.ok, "{after:?}");
    assert_eq!(
        after.stdout.trim(),
        "",
        "custom resources survived their CRD"
    );
    assert!(k
        .ok(&["get", "gadgets", "-o", "name"])
        .contains("gadget.example.com/g1"));
}

/// Two API servers on one etcd: each learns the CRDs from the datastore (its own watch), not
/// from the memory of the server that took the create.
#[test]
fn every_server_learns_crds_from_the_datastore() {
    let etcd = common::Etcd::start();
    let url = etcd.endpoint().url;
    let (_a, ka) = Kubectl::start_server(&["--disable-agent", "--datastore-endpoint", &url]);
    let (_b, kb) = Kubectl::start_server(&["--disable-agent", "--datastore-endpoint", &url]);

    ka.ok_stdin(&["apply", "-f", "-"], Some(WIDGETS));
    kb.crd_established("widgets.example.com");
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    common::wait_for(
        "server b to serve widgets",
        std::time::Duration::from_secs(10),
        || kb.run(&["get", "--raw", path]).ok.then_some(()),
    );
    kb.ok_stdin(&["create", "-f", "-"], Some(&widget("w1", "{size: 2}")));
    assert_eq!(jsonpath(&ka, &["widget", "w1"], "{.spec.color}"), "red");

    kb.ok(&[
        "delete",
        "crd",
        "widgets.example.com",
        "--wait=true",
        "--timeout=30s",
    ]);
    common::wait_for(
        "server a to stop serving widgets",
        std::time::Duration::from_secs(10),
        || (!ka.run(&["get", "--raw", path]).ok).then_some(()),
    );
}

const RULES: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: rules.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: rules, kind: Rule}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              a: {type: string}
              b: {type: string}
              port: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
              count: {type: integer, format: int32}
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties: {name: {type: string}, number: {type: integer}}
            anyOf: [{required: [a]}, {required: [b]}]
            not: {required: [a], properties: {a: {enum: [bad]}}}
"#;

fn rule(name: &str, spec: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: Rule\nmetadata: {{name: {name}}}\nspec: {spec}\n")
}

/// Junctors, list types, int-or-string and formats on custom resources, and CRDs whose
/// schemas are not structural refused with upstream's paths and messages.
#[test]
fn structural_schema_rules_and_junctors() {
    let (_server, k) = Kubectl::start_server(&["--disable-agent"]);

    // A type inside a junctor branch is not structural.
    let bad = RULES
        .replace("rules.example.com", "bads.example.com")
        .replace("{plural: rules, kind: Rule}", "{plural: bads, kind: Bad}")
        .replace(
            "anyOf: [{required: [a]}, {required: [b]}]",
            "anyOf: [{type: object, required: [a]}, {required: [b]}]",
        )
        .replace(
            "x-kubernetes-list-map-keys: [name]",
            "x-kubernetes-list-map-keys: [name, ghost]",
        );
    let out = k.run_stdin(&["create", "-f", "-"], Some(&bad));
    assert!(!out.ok, "{out:?}");
    for want in [
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural",
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[ports].x-kubernetes-list-map-keys: Invalid value: []string{\"name\", \"ghost\"}: entries must all be names of item properties",
    ] {
        assert!(out.stderr.contains(want), "missing {want}\n{out:?}");
    }

    k.ok_stdin(&["create", "-f", "-"], Some(RULES));
    k.crd_established("rules.example.com");
    k.ok_stdin(
        &["create", "-f", "-"],
        Some(&rule(
            "ok",
            "{a: x, port: http, count: 7, tags: [p, q], ports: [{name: web, number: 80}, {name: dns, number: 53}]}",
        )),
    );
    k.ok_stdin(
        &["create", "-f", "-"],
        Some(&rule("ok2", "{b: other, port: 8080}")),
    );

    for (name, spec, wants) in [
        (
            "none",
            "{port: 1}",
            &[r#"<nil>: Invalid value: "": "spec" must validate at least one schema (anyOf)"#, "spec.a: Required value"][..],
        ),
        (
            "not",
            "{a: bad}",
            &[r#"<nil>: Invalid value: "": "spec" must not validate the schema (not)"#][..],
        ),
        (
            "dups",
            "{a: x, tags: [p, p, p], ports: [{name: web}, {name: web, number: 1}]}",
            &[
                r#"spec.tags[1]: Duplicate value: "p""#,
                r#"spec.ports[1]: Duplicate value: map[string]interface {}{"name":"web"}"#,
            ][..],
        ),
        (
            "types",
            "{a: x, port: true, count: 3000000000}",
            &[
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
                "spec.count: Invalid value: 3000000000: spec.count in body must be of type int32: 3000000000",
            ][..],
        ),
    ] {
        let out = k.run_stdin(&["create", "-f", "-"], Some(&rule(name, spec)));
        assert!(!out.ok, "{name}: {out:?}");
        assert!(
            out.stderr
                .contains(&format!("The Rule \"{name}\" is invalid")),
            "{name}: {out:?}"
        );
        for want in wants {
            assert!(out.stderr.contains(want), "{name}: missing {want}\n{out:?}");
        }
    }
    let names = k.ok(&["get", "rules", "-o", "name"]);
    assert_eq!(
        names.split_whitespace().collect::<Vec<_>>(),
        ["rule.example.com/ok", "rule.example.com/ok2"]
    );
}
