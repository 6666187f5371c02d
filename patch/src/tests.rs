//! The PATCH entry point: media types, error statuses, managedFields on every write.

use serde_json::{json, Value};

use super::*;

const NOW: &str = "2024-01-01T00:00:00Z";

fn deploy_meta() -> BuiltinPatchMeta {
    BuiltinPatchMeta::for_kind("apps/v1", "Deployment").unwrap()
}

fn live() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}})
}

fn ctx<'a>(meta: &'a dyn PatchMeta, manager: Option<&'a str>) -> PatchContext<'a> {
    PatchContext {
        meta,
        field_manager: manager,
        force: false,
        scope: apply::Scope::Whole,
        now: NOW,
    }
}

#[test]
fn content_types() {
    let cases = [
        ("application/json-patch+json", PatchType::Json),
        ("application/merge-patch+json", PatchType::Merge),
        (
            "application/strategic-merge-patch+json",
            PatchType::StrategicMerge,
        ),
        ("application/apply-patch+yaml", PatchType::Apply),
        (
            "application/merge-patch+json; charset=utf-8",
            PatchType::Merge,
        ),
        ("Application/JSON-Patch+JSON", PatchType::Json),
    ];
    for (ct, kind) in cases {
        assert_eq!(PatchType::from_content_type(ct).unwrap(), kind, "{ct}");
        assert_eq!(
            PatchType::from_content_type(kind.media_type()).unwrap(),
            kind
        );
    }
    for ct in [
        "application/json",
        "text/plain",
        "",
        "application/apply-patch+json",
    ] {
        let err = PatchType::from_content_type(ct).unwrap_err();
        assert_eq!(
            (err.status_code(), err.reason()),
            (415, "UnsupportedMediaType"),
            "{ct}"
        );
    }
}

#[test]
fn each_patch_type_through_the_entry_point() {
    let meta = deploy_meta();
    let c = ctx(&meta, None);
    let json_out = apply_patch(
        PatchType::Json,
        &live(),
        br#"[{"op":"replace","path":"/spec/replicas","value":2}]"#,
        &c,
    )
    .unwrap();
    assert_eq!(json_out["spec"]["replicas"], json!(2));

    let merge_out = apply_patch(
        PatchType::Merge,
        &live(),
        br#"{"spec":{"template":{"spec":{"containers":[{"name":"b"}]}}}}"#,
        &c,
    )
    .unwrap();
    assert_eq!(
        merge_out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "b"}])
    );

    let smp_out = apply_patch(
        PatchType::StrategicMerge,
        &live(),
        br#"{"spec":{"template":{"spec":{"containers":[{"name":"b"}]}}}}"#,
        &c,
    )
    .unwrap();
    assert_eq!(
        smp_out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "b"}, {"name": "a", "image": "x"}])
    );
    assert!(smp_out["metadata"].get("managedFields").is_none());
}

#[test]
fn strategic_merge_for_custom_resources_is_415() {
    let c = ctx(&NoPatchMeta, None);
    let err = apply_patch(PatchType::StrategicMerge, &live(), b"{}", &c).unwrap_err();
    assert_eq!(err.status_code(), 415);
    // The other types work.
    apply_patch(PatchType::Merge, &live(), b"{}", &c).unwrap();
}

#[test]
fn error_statuses() {
    let meta = deploy_meta();
    let c = ctx(&meta, None);
    let cases: [(PatchType, &[u8], u16); 5] = [
        (
            PatchType::Json,
            br#"[{"op":"test","path":"/spec/replicas","value":9}]"#,
            422,
        ),
        (
            PatchType::Json,
            br#"[{"op":"remove","path":"/spec/nope"}]"#,
            422,
        ),
        (PatchType::Json, b"{", 400),
        (PatchType::StrategicMerge, b"[1]", 400),
        (
            PatchType::StrategicMerge,
            br#"{"spec":{"template":{"spec":{"containers":[{"image":"y"}]}}}}"#,
            400,
        ),
    ];
    for (kind, body, code) in cases {
        let err = apply_patch(kind, &live(), body, &c).unwrap_err();
        assert_eq!(
            err.status_code(),
            code,
            "{kind:?} {}",
            String::from_utf8_lossy(body)
        );
    }
    let err = apply_patch(
        PatchType::Json,
        &live(),
        br#"[{"op":"test","path":"/spec/replicas","value":9}]"#,
        &c,
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::TestFailed(_)));
}

#[test]
fn apply_needs_a_field_manager() {
    let meta = deploy_meta();
    let err = apply_patch(PatchType::Apply, &live(), b"{}", &ctx(&meta, None)).unwrap_err();
    assert_eq!(err.status_code(), 422);
}

#[test]
fn apply_through_the_entry_point() {
    let meta = deploy_meta();
    let body =
        b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 4\n";
    let out = apply_patch(
        PatchType::Apply,
        &live(),
        body,
        &ctx(&meta, Some("kubectl")),
    )
    .unwrap();
    assert_eq!(out["spec"]["replicas"], json!(4));
    assert_eq!(
        out["metadata"]["managedFields"],
        json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": NOW,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}])
    );
    let created = apply_patch(
        PatchType::Apply,
        &Value::Null,
        body,
        &ctx(&meta, Some("kubectl")),
    )
    .unwrap();
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(created["metadata"]["name"], json!("web"));
    let err = apply_patch(
        PatchType::Apply,
        &live(),
        b"- not an object",
        &ctx(&meta, Some("kubectl")),
    )
    .unwrap_err();
    assert_eq!(err.status_code(), 400);
}

#[test]
fn apply_conflict_then_force() {
    let meta = deploy_meta();
    let scaled = apply_patch(
        PatchType::Merge,
        &live(),
        br#"{"spec":{"replicas":3}}"#,
        &ctx(&meta, Some("kubectl-scale")),
    )
    .unwrap();
    assert_eq!(
        scaled["metadata"]["managedFields"],
        json!([{"manager": "kubectl-scale", "operation": "Update", "apiVersion": "apps/v1",
                "time": NOW, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}])
    );
    let body = br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":5}}"#;
    let err = apply_patch(
        PatchType::Apply,
        &scaled,
        body,
        &ctx(&meta, Some("kubectl")),
    )
    .unwrap_err();
    assert_eq!(err.status_code(), 409);
    assert_eq!(err.reason(), "Conflict");
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-scale\" using apps/v1: .spec.replicas"
    );
    let forced = PatchContext {
        force: true,
        ..ctx(&meta, Some("kubectl"))
    };
    let out = apply_patch(PatchType::Apply, &scaled, body, &forced).unwrap();
    assert_eq!(out["spec"]["replicas"], json!(5));
    assert_eq!(
        out["metadata"]["managedFields"].as_array().unwrap().len(),
        1
    );
}
