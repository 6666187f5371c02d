//! End to end over HTTPS: what a DELETE answers, for every built-in resource that can be
//! deleted and for a custom resource, against a table taken from upstream's registries: the
//! deleted object where the resource's registry sets `ReturnDeletedObject` (or has its own
//! Delete that returns it: namespaces, CRDs), else a `Status` Success naming it; the object
//! itself whenever the delete leaves it pending (finalizers); the list for a collection.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::client::runtime;
use crate::common::kube::{KubeClient, Kubeconfig};
use crate::common::kubectl::Kubectl;
use crate::kubectl_resources_b::csr_request;
use crate::served_objects::{collection, create_namespace, deletable, minimal};

const NS: &str = "deletes";

/// `(group, resource)` whose upstream registry answers a DELETE with the object:
/// `ReturnDeletedObject: true` in pkg/registry/{core/{pod,service,serviceaccount,
/// persistentvolume,persistentvolumeclaim,resourcequota,podtemplate},storage/{storageclass,
/// csidriver}}/storage, and the namespace and CRD registries' own Delete (the first delete
/// marks them terminating and answers with them).
const UPSTREAM_ANSWERS_THE_OBJECT: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "pods"),
    ("", "services"),
    ("", "serviceaccounts"),
    ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"),
    ("", "resourcequotas"),
    ("", "podtemplates"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "csidrivers"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
];

/// Checks a DELETE answer: `kind` of the object (same uid as created) or a Status Success
/// whose details name `(group, resource, name, uid)`.
fn check_answer(what: &str, answer: &Value, object_kind: Option<&str>, expect: [&str; 4]) {
    let [group, resource, name, uid] = expect;
    match object_kind {
        Some(kind) => {
            assert_eq!(answer["kind"], kind, "{what}: {answer}");
            assert_eq!(answer["metadata"]["name"], name, "{what}: {answer}");
            assert_eq!(answer["metadata"]["uid"], uid, "{what}: {answer}");
        }
        None => {
            assert_eq!(answer["kind"], "Status", "{what}: {answer}");
            assert_eq!(answer["status"], "Success", "{what}: {answer}");
            // `group` is omitted when empty, as Go's `omitempty` leaves it.
            let mut details = json!({"name": name, "kind": resource, "uid": uid});
            if !group.is_empty() {
                details["group"] = json!(group);
            }
            assert_eq!(answer["details"], details, "{what}: {answer}");
        }
    }
}

#[test]
fn delete_answers_as_upstreams_registries() {
    let (mut server, _k) = Kubectl::start_server(crate::common::k3rs::AS_BARE_API);
    let csr = csr_request("delete-answers");
    runtime().block_on(async {
        let c = KubeClient::connect(&Kubeconfig::read(&server.kubeconfig()).unwrap())
            .await
            .unwrap();
        create_namespace(&c, NS).await;

        let rows = deletable();
        assert!(rows.len() >= 40, "{}", rows.len());
        for r in rows {
            let name = match r.kind {
                "CustomResourceDefinition" => "widgets.example.com".to_string(),
                "APIService" => "v1.deleted.example.com".to_string(),
                "Namespace" => "deleted-namespace".to_string(),
                _ => format!("t-{}", r.singular),
            };
            let obj = minimal(r, &name, NS, &csr)
                .unwrap_or_else(|| panic!("no object for {} in served_objects", r.plural));
            let path = collection(r, NS);
            let created = c.ok("POST", &path, Some(&obj)).await.unwrap();
            let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
            if r.kind == "CustomResourceDefinition" {
                check_custom_resource(&c).await;
            }
            let (code, answer) = c
                .request("DELETE", &format!("{path}/{name}"), None)
                .await
                .unwrap();
            assert_eq!(code, 200, "{}: {answer}", r.plural);
            let returns_object = UPSTREAM_ANSWERS_THE_OBJECT.contains(&(r.group, r.plural));
            check_answer(
                r.plural,
                &answer,
                returns_object.then_some(r.kind),
                [r.group, r.plural, &name, &uid],
            );
            if r.plural == "pods" {
                // An unbound pod is deleted at once, but as upstream's pod strategy does it:
                // marked with a deletionTimestamp and a zero grace period first.
                assert!(
                    answer["metadata"]["deletionTimestamp"].is_string(),
                    "{answer}"
                );
                assert_eq!(
                    answer["metadata"]["deletionGracePeriodSeconds"], 0,
                    "{answer}"
                );
                let (code, _) = c
                    .request("GET", &format!("{path}/{name}"), None)
                    .await
                    .unwrap();
                assert_eq!(code, 404, "the unbound pod is still there");
            }
        }

        check_pending_and_dry_run(&c).await;
    });
    server.assert_running();
}

/// A custom resource answers with a Status (the custom resource registry does not return
/// deleted objects).
async fn check_custom_resource(c: &KubeClient) {
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
    let mut established = false;
    for _ in 0..200 {
        let v = c.ok("GET", crd, None).await.unwrap();
        let conditions = v["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if conditions
            .iter()
            .any(|x| x["type"] == "Established" && x["status"] == "True")
        {
            established = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(established, "the CRD never became Established");
    let path = format!("/apis/example.com/v1/namespaces/{NS}/widgets");
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    // Discovery of a new CRD takes a moment to reach the router.
    let mut created = None;
    for _ in 0..200 {
        match c.request("POST", &path, Some(&w)).await.unwrap() {
            (201, v) => {
                created = Some(v);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let created = created.expect("the custom resource was never created");
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let (code, answer) = c
        .request("DELETE", &format!("{path}/w"), None)
        .await
        .unwrap();
    assert_eq!(code, 200, "{answer}");
    check_answer(
        "widgets",
        &answer,
        None,
        ["example.com", "widgets", "w", uid],
    );
}

/// Finalizers keep an object: the answer is the object with its deletionTimestamp, whatever
/// the resource's registry answers once it is gone, and again on a second DELETE. A dry run
/// answers as the real delete would. A collection DELETE answers the list.
async fn check_pending_and_dry_run(c: &KubeClient) {
    let cms = format!("/api/v1/namespaces/{NS}/configmaps");
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    c.ok("POST", &cms, Some(&held)).await.unwrap();
    for attempt in ["first", "second"] {
        let answer = c.ok("DELETE", &format!("{cms}/held"), None).await.unwrap();
        assert_eq!(answer["kind"], "ConfigMap", "{attempt}: {answer}");
        assert!(
            answer["metadata"]["deletionTimestamp"].is_string(),
            "{attempt}: {answer}"
        );
    }

    let plain = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}});
    let created = c.ok("POST", &cms, Some(&plain)).await.unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let answer = c
        .ok("DELETE", &format!("{cms}/plain?dryRun=All"), None)
        .await
        .unwrap();
    check_answer("dry run", &answer, None, ["", "configmaps", "plain", uid]);
    c.ok("GET", &format!("{cms}/plain"), None).await.unwrap();

    let svcs = format!("/api/v1/namespaces/{NS}/services");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dry"},
        "spec": {"ports": [{"port": 80}]}});
    let created = c.ok("POST", &svcs, Some(&svc)).await.unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let answer = c
        .ok("DELETE", &format!("{svcs}/dry?dryRun=All"), None)
        .await
        .unwrap();
    check_answer(
        "dry run",
        &answer,
        Some("Service"),
        ["", "services", "dry", uid],
    );

    let list = c
        .ok(
            "DELETE",
            &format!("{cms}?fieldSelector=metadata.name%3Dplain"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(list["kind"], "ConfigMapList", "{list}");
    assert_eq!(list["items"][0]["metadata"]["name"], "plain", "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    let (code, _) = c
        .request("GET", &format!("{cms}/plain"), None)
        .await
        .unwrap();
    assert_eq!(code, 404);
}
