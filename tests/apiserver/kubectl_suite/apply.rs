//! Server-side apply: created/applied, a conflict (409) with another manager, force-conflicts,
//! and the `Update` managedFields entries that create, edit, label and patch record, so that
//! an apply after `kubectl create` conflicts exactly as against kube-apiserver.

use serde_json::Value;

use super::{fixture, Ctx};

fn deployment(name: &str, replicas: u32, image: &str) -> String {
    std::fs::read_to_string(fixture("deployment.yaml"))
        .unwrap()
        .replace("name: web", &format!("name: {name}"))
        .replace("replicas: 2", &format!("replicas: {replicas}"))
        .replace("nginx:1.27", image)
}

/// `(manager, operation)` of each managedFields entry.
fn managers(c: &Ctx, what: &str) -> Vec<(String, String)> {
    with_managed_fields(c, what)["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").to_string(),
                        e["operation"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One object as JSON, managedFields included (kubectl hides them by default).
fn with_managed_fields(c: &Ctx, what: &str) -> Value {
    serde_json::from_str(&c.ok(&["get", what, "-o", "json", "--show-managed-fields"])).unwrap()
}

fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no managedFields entry of {manager}: {obj}"))
}

pub fn server_side_apply(c: &Ctx) {
    let ssa = |manager: &str, text: &str, extra: &[&str]| {
        let fm = format!("--field-manager={manager}");
        let mut args = vec!["apply", "--server-side", fm.as_str(), "-f", "-"];
        args.extend_from_slice(extra);
        c.run_stdin(&args, text)
    };
    let out = ssa("alice", &deployment("ssa", 2, "nginx:1.27"), &[]);
    assert!(out.ok, "{out:?}");
    assert_eq!(out.stdout, "deployment.apps/ssa serverside-applied\n");
    assert_eq!(
        managers(c, "deploy/ssa"),
        [("alice".to_string(), "Apply".to_string())]
    );
    let obj = with_managed_fields(c, "deploy/ssa");
    let fields = &entry(&obj, "alice")["fieldsV1"];
    assert!(fields["f:spec"]["f:replicas"].is_object(), "{fields}");
    assert!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
            ["f:image"]
            .is_object(),
        "{fields}"
    );
    // Applying the same again changes nothing.
    let rv = c.jsonpath("deploy/ssa", "{.metadata.resourceVersion}");
    assert!(ssa("alice", &deployment("ssa", 2, "nginx:1.27"), &[]).ok);
    assert_eq!(c.jsonpath("deploy/ssa", "{.metadata.resourceVersion}"), rv);

    // Another manager changing alice's field: 409 with the field, unless forced.
    let out = ssa("bob", &deployment("ssa", 3, "nginx:1.27"), &[]);
    assert!(!out.ok, "{out:?}");
    assert!(
        out.stderr
            .contains("Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"),
        "{out:?}"
    );
    assert_eq!(c.jsonpath("deploy/ssa", "{.spec.replicas}"), "2");
    // The same value is shared ownership, not a conflict.
    assert!(ssa("bob", &deployment("ssa", 2, "nginx:1.27"), &[]).ok);
    let out = ssa(
        "bob",
        &deployment("ssa", 3, "nginx:1.27"),
        &["--force-conflicts"],
    );
    assert!(out.ok, "{out:?}");
    assert_eq!(c.jsonpath("deploy/ssa", "{.spec.replicas}"), "3");
    let obj = with_managed_fields(c, "deploy/ssa");
    assert!(
        entry(&obj, "alice")["fieldsV1"]["f:spec"]["f:replicas"].is_null(),
        "{obj}"
    );
    assert!(
        entry(&obj, "bob")["fieldsV1"]["f:spec"]["f:replicas"].is_object(),
        "{obj}"
    );

    // A field alice stops applying goes away when nobody else owns it.
    let with_label = deployment("ssa", 3, "nginx:1.27").replace(
        "labels: {app: web}\nspec",
        "labels: {app: web, team: a}\nspec",
    );
    assert!(ssa("alice", &with_label, &[]).ok);
    assert_eq!(c.jsonpath("deploy/ssa", "{.metadata.labels.team}"), "a");
    assert!(ssa("alice", &deployment("ssa", 3, "nginx:1.27"), &[]).ok);
    assert_eq!(c.jsonpath("deploy/ssa", "{.metadata.labels.team}"), "");

    // Server-side apply of a whole directory.
    let out = c.ok(&["apply", "--server-side", "-f", &fixture("dir")]);
    assert_eq!(
        out,
        "configmap/dir-a serverside-applied\nserviceaccount/dir-b serverside-applied\nconfigmap/dir-c serverside-applied\n"
    );
}

pub fn managed_fields_of_updates(c: &Ctx) {
    // kubectl create records an Update entry, defaulted fields included.
    c.ok_stdin(&["create", "-f", "-"], &deployment("made", 2, "nginx:1.27"));
    let obj = with_managed_fields(c, "deploy/made");
    let created = entry(&obj, "kubectl-create");
    assert_eq!(created["operation"], "Update");
    assert_eq!(created["apiVersion"], "apps/v1");
    let spec = &created["fieldsV1"]["f:spec"];
    assert!(spec["f:replicas"].is_object(), "{created}");
    assert!(spec["f:revisionHistoryLimit"].is_object(), "{created}");

    // Applying the same values shares the fields; changing one conflicts with the creator.
    let out = c.run_stdin(
        &["apply", "--server-side", "-f", "-"],
        &deployment("made", 2, "nginx:1.27"),
    );
    assert!(out.ok, "{out:?}");
    let out = c.run_stdin(
        &["apply", "--server-side", "-f", "-"],
        &deployment("made", 5, "nginx:1.27"),
    );
    assert!(!out.ok, "{out:?}");
    assert!(
        out.stderr.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using apps/v1: .spec.replicas"
        ),
        "{out:?}"
    );
    let out = c.run_stdin(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        &deployment("made", 5, "nginx:1.27"),
    );
    assert!(out.ok, "{out:?}");
    assert_eq!(c.jsonpath("deploy/made", "{.spec.replicas}"), "5");

    // Each kubectl verb is its own manager: label, annotate, patch, edit, set.
    c.ok(&["label", "deploy", "made", "stage=test"]);
    c.ok(&["annotate", "deploy", "made", "note=x"]);
    c.ok(&[
        "patch",
        "deploy",
        "made",
        "-p",
        r#"{"spec":{"minReadySeconds":3}}"#,
    ]);
    c.ok(&["set", "image", "deploy/made", "nginx=nginx:1.29"]);
    let got = managers(c, "deploy/made");
    for m in [
        "kubectl-create",
        "kubectl",
        "kubectl-label",
        "kubectl-annotate",
        "kubectl-patch",
        "kubectl-set",
    ] {
        assert!(got.iter().any(|(n, _)| n == m), "{m} missing from {got:?}");
    }
    let obj = with_managed_fields(c, "deploy/made");
    assert!(
        entry(&obj, "kubectl-label")["fieldsV1"]["f:metadata"]["f:labels"]["f:stage"].is_object()
    );
    // The image moved from the applier to kubectl-set.
    let containers = |m: &str| {
        entry(&obj, m)["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
            ["k:{\"name\":\"nginx\"}"]["f:image"]
            .clone()
    };
    assert!(containers("kubectl-set").is_object(), "{obj}");
    assert!(containers("kubectl").is_null(), "{obj}");

    // A client-side apply records kubectl-client-side-apply; the fieldManager parameter wins
    // over the User-Agent.
    c.ok(&["create", "configmap", "cm", "--from-literal=a=b"]);
    c.ok(&[
        "patch",
        "cm",
        "cm",
        "--field-manager=robot",
        "--type=merge",
        "-p",
        r#"{"data":{"c":"d"}}"#,
    ]);
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied}\ndata: {a: b}\n";
    c.ok_stdin(&["apply", "-f", "-"], text);
    assert!(managers(c, "cm/cm").contains(&("robot".into(), "Update".into())));
    assert_eq!(
        managers(c, "cm/applied"),
        [(
            "kubectl-client-side-apply".to_string(),
            "Update".to_string()
        )]
    );
}
