//! Server-side apply and update tracking.

use serde_json::{json, Value};

use super::*;
use crate::{BuiltinPatchMeta, NoPatchMeta};

const T0: &str = "2024-01-01T00:00:00Z";
const T1: &str = "2024-01-01T00:01:00Z";
const T2: &str = "2024-01-01T00:02:00Z";

fn meta() -> BuiltinPatchMeta {
    BuiltinPatchMeta::for_kind("apps/v1", "Deployment").unwrap()
}

fn config(replicas: i64, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "labels": {"app": "web"}},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "nginx", "image": image,
                                                          "ports": [{"containerPort": 80}]}]}}}})
}

/// An applied configuration that sets only `spec.replicas`.
fn replicas_only(replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web"}, "spec": {"replicas": replicas}})
}

fn run(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    apply(live, applied, manager, force, &meta(), Scope::Whole, now)
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap().to_string(),
                e["operation"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn fields_of<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    &obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == manager)
        .unwrap_or_else(|| panic!("no entry for {manager} in {obj}"))["fieldsV1"]
}

#[test]
fn apply_creates_with_managed_fields() {
    let out = run(None, &config(2, "nginx:1.14"), "kubectl", false, T0).unwrap();
    let mut expected = config(2, "nginx:1.14");
    expected["metadata"]["managedFields"] = json!([{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": T0,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}}}}}}}}
        }
    }]);
    assert_eq!(out, expected);
}

fn created_by_client_side_apply() -> Value {
    track_update(
        None,
        config(2, "nginx:1.14"),
        "kubectl-client-side-apply",
        Operation::Update,
        &meta(),
        Scope::Whole,
        T0,
    )
}

#[test]
fn update_tracks_every_field_of_a_create() {
    let live = created_by_client_side_apply();
    assert_eq!(
        live["metadata"]["managedFields"],
        json!([{
            "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "apps/v1",
            "time": T0, "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {"f:containers": {".": {}, "k:{\"name\":\"nginx\"}": {
                            ".": {}, "f:image": {}, "f:name": {},
                            "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                                ".": {}, "f:containerPort": {}}}}}}}}
            }
        }])
    );
}

#[test]
fn conflict_with_an_updater() {
    let live = created_by_client_side_apply();
    let applied = replicas_only(3);
    let err = run(Some(&live), &applied, "kubectl", false, T1).unwrap_err();
    let ApplyError::Conflict(conflicts) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    assert_eq!(
        conflicts.causes(),
        vec![json!({"reason": "FieldManagerConflict",
                    "message": "conflict with \"kubectl-client-side-apply\" using apps/v1",
                    "field": ".spec.replicas"})]
    );
    assert_eq!(PatchError::from(err).status_code(), 409);
}

#[test]
fn several_conflicts_are_grouped_by_manager() {
    let live = created_by_client_side_apply();
    let err = run(Some(&live), &config(3, "nginx:1.16"), "kubectl", false, T1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1:\n\
         - .spec.replicas\n\
         - .spec.template.spec.containers[name=\"nginx\"].image"
    );
}

#[test]
fn same_value_is_shared_ownership() {
    let live = created_by_client_side_apply();
    let applied = replicas_only(2);
    let out = run(Some(&live), &applied, "kubectl", false, T1).unwrap();
    assert_eq!(out["spec"], live["spec"]);
    assert_eq!(
        fields_of(&out, "kubectl"),
        &json!({"f:spec": {"f:replicas": {}}})
    );
    assert!(fields_of(&out, "kubectl-client-side-apply")["f:spec"]["f:replicas"].is_object());
    // Apply entries sort before Update entries.
    assert_eq!(
        managers(&out),
        vec![
            ("kubectl".to_string(), "Apply".to_string()),
            (
                "kubectl-client-side-apply".to_string(),
                "Update".to_string()
            )
        ]
    );
}

#[test]
fn force_takes_ownership() {
    let live = created_by_client_side_apply();
    let applied = replicas_only(3);
    let out = run(Some(&live), &applied, "kubectl", true, T1).unwrap();
    assert_eq!(out["spec"]["replicas"], json!(3));
    assert_eq!(
        fields_of(&out, "kubectl"),
        &json!({"f:spec": {"f:replicas": {}}})
    );
    let csa = fields_of(&out, "kubectl-client-side-apply");
    assert!(csa["f:spec"].get("f:replicas").is_none(), "{csa}");
    assert!(csa["f:spec"]["f:selector"].is_object());
    let times: Vec<&Value> = out["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["time"])
        .collect();
    assert_eq!(times, vec![&json!(T1), &json!(T0)]);
}

#[test]
fn fields_dropped_from_the_config_are_removed() {
    let mut first = config(2, "nginx");
    first["metadata"]["labels"] = json!({"app": "web", "tier": "front"});
    first["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "nginx", "image": "nginx"}, {"name": "sidecar", "image": "busybox"}]);
    let live = run(None, &first, "kubectl", false, T0).unwrap();

    let mut second = config(2, "nginx");
    second["spec"]["template"]["spec"]["containers"] = json!([{"name": "nginx", "image": "nginx"}]);
    let out = run(Some(&live), &second, "kubectl", false, T1).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "nginx", "image": "nginx"}])
    );
    assert_eq!(
        managers(&out),
        vec![("kubectl".to_string(), "Apply".to_string())]
    );
    assert_eq!(out["metadata"]["managedFields"][0]["time"], json!(T1));
}

#[test]
fn fields_another_manager_owns_are_kept() {
    let mut first = config(2, "nginx");
    first["metadata"]["labels"] = json!({"app": "web", "tier": "front"});
    let live = run(None, &first, "kubectl", false, T0).unwrap();
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "web", "labels": {"tier": "front"}}});
    let live = run(Some(&live), &other, "labeller", false, T1).unwrap();

    let out = run(Some(&live), &config(2, "nginx"), "kubectl", false, T2).unwrap();
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "web", "tier": "front"})
    );
    assert_eq!(
        fields_of(&out, "labeller"),
        &json!({"f:metadata": {"f:labels": {"f:tier": {}}}})
    );
}

#[test]
fn fields_set_by_updaters_survive_reapply() {
    let live = run(None, &config(2, "nginx"), "kubectl", false, T0).unwrap();
    let mut edited = live.clone();
    edited["spec"]["paused"] = json!(true);
    let live = track_update(
        Some(&live),
        edited.clone(),
        "kubectl-edit",
        Operation::Update,
        &meta(),
        Scope::Whole,
        T1,
    );
    assert_eq!(
        fields_of(&live, "kubectl-edit"),
        &json!({"f:spec": {"f:paused": {}}})
    );
    let out = run(Some(&live), &config(2, "nginx"), "kubectl", false, T2).unwrap();
    assert_eq!(out["spec"]["paused"], json!(true));
}

#[test]
fn an_update_takes_fields_from_the_applier() {
    let live = run(None, &config(2, "nginx"), "kubectl", false, T0).unwrap();
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(5);
    let live = track_update(
        Some(&live),
        scaled.clone(),
        "kube-controller-manager",
        Operation::Update,
        &meta(),
        Scope::Whole,
        T1,
    );
    assert!(fields_of(&live, "kubectl")["f:spec"]
        .get("f:replicas")
        .is_none());
    let err = run(Some(&live), &config(2, "nginx"), "kubectl", false, T2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kube-controller-manager\" using apps/v1: .spec.replicas"
    );
}

#[test]
fn update_removing_fields_drops_them_from_every_manager() {
    let live = run(None, &config(2, "nginx"), "kubectl", false, T0).unwrap();
    let mut edited = live.clone();
    edited["metadata"]["labels"] = json!({});
    edited["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("ports");
    let out = track_update(
        Some(&live),
        edited.clone(),
        "kubectl-edit",
        Operation::Update,
        &meta(),
        Scope::Whole,
        T1,
    );
    let kubectl = fields_of(&out, "kubectl");
    assert!(kubectl["f:metadata"].get("f:labels").is_none(), "{kubectl}");
    let container =
        &kubectl["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"];
    assert!(container.get("f:ports").is_none(), "{container}");
    // The editor owns the now empty labels map.
    assert_eq!(
        fields_of(&out, "kubectl-edit"),
        &json!({"f:metadata": {"f:labels": {}}})
    );
}

#[test]
fn managed_fields_sent_by_the_client_replace_the_live_ones() {
    let live = run(None, &config(2, "nginx"), "kubectl", false, T0).unwrap();
    let mut reset = live.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    reset["spec"]["replicas"] = json!(3);
    let out = track_update(
        Some(&live),
        reset.clone(),
        "editor",
        Operation::Update,
        &meta(),
        Scope::Whole,
        T1,
    );
    assert_eq!(
        managers(&out),
        vec![("editor".to_string(), "Update".to_string())]
    );
    assert_eq!(
        fields_of(&out, "editor"),
        &json!({"f:spec": {"f:replicas": {}}})
    );
}

#[test]
fn applied_config_with_managed_fields_is_refused() {
    let mut applied = config(1, "x");
    applied["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    let err = run(None, &applied, "kubectl", false, T0).unwrap_err();
    assert!(matches!(err, ApplyError::BadRequest(_)), "{err:?}");
    applied["metadata"]["managedFields"] = json!([]);
    let out = run(None, &applied, "kubectl", false, T0).unwrap();
    assert_eq!(
        managers(&out),
        vec![("kubectl".to_string(), "Apply".to_string())]
    );
}

#[test]
fn apply_merges_keyed_lists_and_sets() {
    let live = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["a"]},
        "spec": {"template": {"spec": {"containers": [
            {"name": "x", "image": "1"}, {"name": "y", "image": "2"}, {"name": "z", "image": "3"}]}}}});
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["b"]},
        "spec": {"template": {"spec": {"containers": [
            {"name": "z", "image": "3"}, {"name": "new", "image": "4"}, {"name": "x", "image": "1"}]}}}});
    let out = run(Some(&live), &applied, "kubectl", false, T0).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
    let names: Vec<&str> = out["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["y", "z", "new", "x"]);
    assert_eq!(
        fields_of(&out, "kubectl")["f:metadata"],
        json!({"f:finalizers": {"v:\"b\"": {}}})
    );
}

#[test]
fn yaml_and_json_apply_bodies() {
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  on: yes\n";
    assert_eq!(
        parse_apply_body(yaml).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"on": "yes"}})
    );
    let json_body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#;
    assert_eq!(
        parse_apply_body(json_body).unwrap()["metadata"]["name"],
        json!("c")
    );
    for bad in [&b"- a\n- b\n"[..], b"key: [unclosed", b"just a string"] {
        let err = parse_apply_body(bad).unwrap_err();
        assert_eq!(err.status_code(), 400, "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn status_writes_are_tracked_apart() {
    let pod_meta = BuiltinPatchMeta::for_kind("v1", "Pod").unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"nodeName": "n"}, "status": {"phase": "Pending"}});
    let created = track_update(
        None,
        pod.clone(),
        "kubectl-create",
        Operation::Update,
        &pod_meta,
        Scope::Main,
        T0,
    );
    assert_eq!(
        fields_of(&created, "kubectl-create"),
        &json!({"f:spec": {"f:nodeName": {}}})
    );

    let mut running = created.clone();
    running["status"] = json!({"phase": "Running", "podIP": "10.0.0.5"});
    running["spec"]["nodeName"] = json!("m");
    let out = track_update(
        Some(&created),
        running.clone(),
        "kubelet",
        Operation::Update,
        &pod_meta,
        Scope::Status,
        T1,
    );
    let kubelet = out["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kubelet")
        .unwrap();
    assert_eq!(kubelet["subresource"], json!("status"));
    assert_eq!(
        kubelet["fieldsV1"],
        json!({"f:status": {"f:phase": {}, "f:podIP": {}}})
    );
    assert_eq!(
        fields_of(&out, "kubectl-create"),
        &json!({"f:spec": {"f:nodeName": {}}})
    );

    let failed = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                        "status": {"phase": "Failed"}});
    let err = apply(
        Some(&out),
        &failed,
        "ctl",
        false,
        &pod_meta,
        Scope::Status,
        T2,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubelet\" with subresource \"status\" using v1: .status.phase"
    );
}

#[test]
fn custom_resource_lists_follow_the_schema() {
    let crd = crate::SchemaPatchMeta::custom_resource(json!({
        "type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["port"],
                      "items": {"type": "object"}}}}}}));
    let widget = |ports: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
               "spec": {"ports": ports}})
    };
    let live = apply(
        None,
        &widget(json!([{"port": 80, "target": 1}])),
        "a",
        false,
        &crd,
        Scope::Main,
        T0,
    )
    .unwrap();
    let live = apply(
        Some(&live),
        &widget(json!([{"port": 81, "target": 2}])),
        "b",
        false,
        &crd,
        Scope::Main,
        T1,
    )
    .unwrap();
    assert_eq!(
        live["spec"]["ports"],
        json!([{"port": 80, "target": 1}, {"port": 81, "target": 2}])
    );
    let err = apply(
        Some(&live),
        &widget(json!([{"port": 80, "target": 3}])),
        "b",
        false,
        &crd,
        Scope::Main,
        T2,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"a\": .spec.ports[port=80].target"
    );
}

#[test]
fn maps_emptied_by_removal_go_too() {
    let mut first = config(2, "nginx");
    first["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}});
    let live = run(None, &first, "kubectl", false, T0).unwrap();
    let mut second = config(2, "nginx");
    second["spec"]["strategy"] = json!({"type": "Recreate"});
    second["metadata"]["labels"] = json!({});
    let out = run(Some(&live), &second, "kubectl", false, T1).unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    // An applied empty map is the applier's own value and stays.
    assert_eq!(out["metadata"]["labels"], json!({}));
    let mut third = config(2, "nginx");
    third["metadata"].as_object_mut().unwrap().remove("labels");
    third["spec"]["strategy"] = json!({"type": "Recreate"});
    let out = run(Some(&out), &third, "kubectl", false, T2).unwrap();
    assert!(
        out["metadata"].get("labels").is_none(),
        "{}",
        out["metadata"]
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::strategic::tests_diff::arb_deployment;

    fn with_type(mut d: Value) -> Value {
        d["apiVersion"] = json!("apps/v1");
        d["kind"] = json!("Deployment");
        d
    }

    proptest! {
        /// Applying a configuration creates exactly it; applying it again changes nothing.
        #[test]
        fn apply_is_idempotent(config in arb_deployment()) {
            let config = with_type(config);
            let once = run(None, &config, "kubectl", false, T0).unwrap();
            prop_assert_eq!(managed::strip(&once), config.clone());
            let twice = run(Some(&once), &config, "kubectl", false, T0).unwrap();
            prop_assert_eq!(twice, once);
        }

        /// A sole applier's new configuration replaces its old one, removed fields included.
        #[test]
        fn sole_applier_gets_its_new_configuration(first in arb_deployment(), second in arb_deployment()) {
            let (first, second) = (with_type(first), with_type(second));
            let live = run(None, &first, "kubectl", false, T0).unwrap();
            let out = run(Some(&live), &second, "kubectl", false, T1).unwrap();
            prop_assert_eq!(managed::strip(&out), second);
        }

        /// An updater's writes are tracked so that the same update again is not a change.
        #[test]
        fn updates_track_what_changed(first in arb_deployment(), second in arb_deployment()) {
            let (first, second) = (with_type(first), with_type(second));
            let live = run(None, &first, "kubectl", false, T0).unwrap();
            let mut edited = second.clone();
            edited["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
            let out = track_update(Some(&live), edited.clone(), "editor", Operation::Update, &meta(), Scope::Whole, T1);
            prop_assert_eq!(managed::strip(&out), second);
            // Re-applying the first configuration conflicts exactly when the editor changed
            // something the applier had set.
            let editor_owns = out["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["manager"] == "editor");
            let again = run(Some(&out), &first, "kubectl", false, T2);
            if let Err(e) = &again {
                prop_assert!(editor_owns, "{}", e);
            }
        }

        /// An update's comparison reads the stored version with its managedFields as it
        /// reads it without them (so `track_update` does not copy it to strip them).
        #[test]
        fn managed_fields_do_not_change_a_comparison(first in arb_deployment(), second in arb_deployment()) {
            let (first, second) = (with_type(first), with_type(second));
            let live = run(None, &first, "kubectl", false, T0).unwrap();
            prop_assert!(live["metadata"]["managedFields"].is_array());
            let m = meta();
            for scope in [Scope::Whole, Scope::Main, Scope::Status] {
                let walker = walk::Walker { meta: &m, scope };
                let with = walker.compare(&live, &second);
                let without = walker.compare(&managed::strip(&live), &second);
                prop_assert_eq!(&with.changed, &without.changed);
                prop_assert_eq!(&with.removed, &without.removed);
            }
        }
    }
}

#[test]
fn metadata_of_only_managed_fields_is_compared_as_without_them() {
    let old = json!({"metadata": {"managedFields": [{"manager": "m", "operation": "Update",
        "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]}});
    let walker = walk::Walker {
        meta: &NoPatchMeta,
        scope: Scope::Whole,
    };
    // Against an empty metadata: not emptied, as the version without managedFields is not.
    let new = json!({"metadata": {}});
    assert!(walker.compare(&old, &new).changed.is_empty());
    assert!(walker
        .compare(&managed::strip(&old), &new)
        .changed
        .is_empty());
    // A metadata holding anything else still reads as emptied.
    let mut named = old.clone();
    named["metadata"]["labels"] = json!({"a": "b"});
    assert!(!walker.compare(&named, &new).changed.is_empty());
}

#[test]
fn reapplying_the_same_configuration_is_a_no_op() {
    let first = run(None, &config(2, "nginx:1"), "alice", false, T0).unwrap();
    let again = run(Some(&first), &config(2, "nginx:1"), "alice", false, T1).unwrap();
    assert_eq!(again, first, "same object, same managedFields time");
    // A change of value, or of the applied fields, is a new apply with a new time.
    let changed = run(Some(&first), &config(3, "nginx:1"), "alice", false, T1).unwrap();
    assert_eq!(changed["metadata"]["managedFields"][0]["time"], T1);
    let mut more = config(2, "nginx:1");
    more["spec"]["minReadySeconds"] = json!(0);
    let fewer_fields = run(Some(&first), &more, "alice", false, T2).unwrap();
    assert_eq!(fewer_fields["metadata"]["managedFields"][0]["time"], T2);
}
