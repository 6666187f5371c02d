//! kubectl get -w: ADDED, MODIFIED and DELETED events, as JSON events and as table rows.

use crate::common::kubectl::Watch;

use super::{header, table, Ctx};

pub fn events(c: &Ctx) {
    c.ok(&["create", "configmap", "watched", "--from-literal=v=1"]);
    c.ok(&["create", "configmap", "other", "--from-literal=v=1"]);
    let watch = Watch::start(
        c.k,
        &[
            "get",
            "configmaps",
            "-n",
            &c.ns,
            "--field-selector",
            "metadata.name=watched",
            "-w",
            "-o",
            "json",
            "--output-watch-events",
        ],
        &c.scratch.join("watch.json"),
    );
    // The initial ADDED proves the watch is established.
    watch.wait_for("\"type\":\"ADDED\"", 1);
    c.ok(&["label", "configmap", "watched", "step=two"]);
    watch.wait_for("\"type\":\"MODIFIED\"", 1);
    c.ok(&[
        "patch",
        "configmap",
        "other",
        "--type=merge",
        "-p",
        r#"{"data":{"v":"2"}}"#,
    ]);
    c.ok(&["delete", "configmap", "watched"]);
    watch.wait_for("\"type\":\"DELETED\"", 1);
    let text: String = watch
        .text()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    // Only the selected object, in order, and the label in the MODIFIED object.
    assert!(!text.contains("\"name\":\"other\""), "{text}");
    let added = text.find("\"type\":\"ADDED\"").unwrap();
    let modified = text.find("\"type\":\"MODIFIED\"").unwrap();
    let deleted = text.find("\"type\":\"DELETED\"").unwrap();
    assert!(added < modified && modified < deleted, "{text}");
    assert!(
        text[modified..deleted].contains("\"step\":\"two\""),
        "{text}"
    );
}

pub fn table_rows(c: &Ctx) {
    let watch = Watch::start(
        c.k,
        &["get", "cm", "-w", "-n", &c.ns, "--output-watch-events"],
        &c.scratch.join("watch.out"),
    );
    // An empty namespace: kubectl prints nothing until the first event, so create a first
    // object, then check the header and its row.
    c.ok(&["create", "configmap", "first", "--from-literal=a=b"]);
    watch.wait_until("the first row", |t| {
        table(t).iter().any(|r| r[..3] == ["ADDED", "first", "1"])
    });
    assert_eq!(header(&watch.text()), ["EVENT", "NAME", "DATA", "AGE"]);
    c.ok(&[
        "patch",
        "cm",
        "first",
        "--type=merge",
        "-p",
        r#"{"data":{"c":"d"}}"#,
    ]);
    watch.wait_until("the MODIFIED row", |t| {
        table(t)
            .iter()
            .any(|r| r[..3] == ["MODIFIED", "first", "2"])
    });
    c.ok(&["delete", "cm", "first"]);
    watch.wait_until("the DELETED row", |t| {
        table(t).iter().any(|r| r[..2] == ["DELETED", "first"])
    });
}
