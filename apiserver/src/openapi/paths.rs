//! The `paths` of a group-version document: kube-apiserver's operations for each resource
//! (collection, item, all-namespaces list, legacy watch paths, subresources), each with
//! `x-kubernetes-action` and `x-kubernetes-group-version-kind`, its query parameters and
//! request/response bodies.

use serde_json::{json, Map, Value};

use k3rs_apimachinery::catalog::Resource;

const REF_PREFIX: &str = "#/components/schemas/";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";

/// The content types kube-apiserver accepts in a PATCH body.
pub const PATCH_CONTENT_TYPES: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// Where a kind's schema is, by definition name (`io.k8s.api.core.v1.Pod`).
pub type SchemaName<'a> = &'a dyn Fn(&str, &str, &str) -> Option<String>;

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("{REF_PREFIX}{name}") })
}

fn query(name: &str, kind: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": { "type": kind, "uniqueItems": true },
    })
}

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": { "type": "string", "uniqueItems": true },
    })
}

fn write_params(with_force: bool) -> Vec<Value> {
    let mut v = vec![
        query("dryRun", "string", "When present, indicates that modifications should not be persisted. Valid value: All."),
        query("fieldManager", "string", "A name associated with the actor or entity that is making these changes."),
        query("fieldValidation", "string", "How the server treats unknown and duplicate fields in the body: Ignore, Warn (the default) or Strict."),
    ];
    if with_force {
        v.push(query(
            "force",
            "boolean",
            "Force is going to \"force\" Apply requests: re-acquire conflicting fields owned by other managers.",
        ));
    }
    v
}

/// `dryRun`, `gracePeriodSeconds`, `propagationPolicy`.
fn delete_params() -> Vec<Value> {
    let mut v = write_params(false);
    v.truncate(1);
    v.push(query(
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted.",
    ));
    v.push(query(
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed: Orphan, Background or Foreground.",
    ));
    v
}

fn list_params(watch_only: bool) -> Vec<Value> {
    let mut v = vec![
        query(
            "allowWatchBookmarks",
            "boolean",
            "Requests watch events of type BOOKMARK.",
        ),
        query(
            "continue",
            "string",
            "The continue token of the previous page of a paged list.",
        ),
        query(
            "fieldSelector",
            "string",
            "Restricts the objects returned by their fields.",
        ),
        query(
            "labelSelector",
            "string",
            "Restricts the objects returned by their labels.",
        ),
        query(
            "limit",
            "integer",
            "The maximum number of objects a list returns; a continue token gives the rest.",
        ),
        query(
            "resourceVersion",
            "string",
            "Which version of the collection the list or watch starts from.",
        ),
        query(
            "resourceVersionMatch",
            "string",
            "How resourceVersion applies to a list: NotOlderThan or Exact.",
        ),
        query(
            "sendInitialEvents",
            "boolean",
            "Not supported by this server.",
        ),
        query(
            "timeoutSeconds",
            "integer",
            "Ends the list or watch call after this many seconds.",
        ),
    ];
    if !watch_only {
        v.push(query("watch", "boolean", "Watches for changes to the described resources and returns them as a stream of add, update, and remove notifications."));
    }
    v
}

fn content(schema: &Value, watch: bool) -> Value {
    let types: &[&str] = if watch {
        &[
            "application/json",
            "application/json;stream=watch",
            "application/vnd.kubernetes.protobuf",
            "application/vnd.kubernetes.protobuf;stream=watch",
            "application/yaml",
        ]
    } else {
        &[
            "application/json",
            "application/vnd.kubernetes.protobuf",
            "application/yaml",
        ]
    };
    types
        .iter()
        .map(|t| (t.to_string(), json!({ "schema": schema })))
        .collect::<Map<_, _>>()
        .into()
}

fn responses(codes: &[&str], schema: &Value, watch: bool) -> Value {
    let mut m = Map::new();
    for code in codes {
        let description = match *code {
            "201" => "Created",
            "202" => "Accepted",
            _ => "OK",
        };
        m.insert(
            code.to_string(),
            json!({ "description": description, "content": content(schema, watch) }),
        );
    }
    m.insert("401".into(), json!({ "description": "Unauthorized" }));
    m.into()
}

fn body(schema: &Value, types: &[&str]) -> Value {
    let content: Map<String, Value> = types
        .iter()
        .map(|t| (t.to_string(), json!({ "schema": schema })))
        .collect();
    json!({ "content": content, "required": true })
}

/// kube's `ToValidOperationID`: letters, `_` and (past the first character) digits kept, any
/// other character dropped and the letter after it upper-cased; the first letter upper-cased
/// when `capitalize_first` (`rbac.authorization` → `RbacAuthorization` or
/// `rbacAuthorization`).
pub fn to_valid_operation_id(s: &str, capitalize_first: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut capitalize = capitalize_first;
    for (i, c) in s.chars().enumerate() {
        if c.is_alphabetic() || c == '_' || (i != 0 && c.is_numeric()) {
            if capitalize {
                out.extend(c.to_uppercase());
                capitalize = false;
            } else {
                out.push(c);
            }
        } else {
            capitalize = true;
        }
    }
    out
}

/// The group as kube names it in operation ids and tags: `.k8s.io` trimmed, `core` for the
/// legacy group.
pub fn group_word(group: &str) -> &str {
    let group = group.strip_suffix(".k8s.io").unwrap_or(group);
    if group.is_empty() {
        "core"
    } else {
        group
    }
}

/// `Core`, `Apps`, `RbacAuthorization`, `Coordination` + `V1`: kube's operationId infix.
fn op_infix(group: &str, version: &str) -> String {
    format!(
        "{}{}",
        to_valid_operation_id(group_word(group), true),
        to_valid_operation_id(version, true)
    )
}

/// `core_v1`, `rbacAuthorization_v1`: kube's tag of a group-version's operations.
fn tag(group: &str, version: &str) -> String {
    format!(
        "{}_{}",
        to_valid_operation_id(group_word(group), false),
        to_valid_operation_id(version, false)
    )
}

struct Op<'a> {
    id: String,
    action: &'a str,
    gvk: Value,
    tag: &'a str,
    params: Vec<Value>,
    request: Option<Value>,
    responses: Value,
}

impl Op<'_> {
    fn render(self, description: &str) -> Value {
        let mut op = json!({
            "tags": [self.tag],
            "description": description,
            "operationId": self.id,
            "responses": self.responses,
            "x-kubernetes-action": self.action,
            "x-kubernetes-group-version-kind": self.gvk,
        });
        if !self.params.is_empty() {
            op["parameters"] = Value::Array(self.params);
        }
        if let Some(r) = self.request {
            op["requestBody"] = r;
        }
        op
    }
}

/// Every path of one resource, keyed by the path template.
pub fn resource_paths(r: &Resource, schema_name: SchemaName<'_>) -> Vec<(String, Value)> {
    let infix = op_infix(r.group, r.version);
    let tag = tag(r.group, r.version);
    let prefix = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    let ns_segment = if r.namespaced {
        "namespaces/{namespace}/"
    } else {
        ""
    };
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let kind = r.kind;
    let gvk = json!({ "group": r.group, "version": r.version, "kind": kind });
    let object = schema_name(r.group, r.version, kind)
        .map(|n| schema_ref(&n))
        .unwrap_or_else(|| json!({ "type": "object" }));
    let list = schema_name(r.group, r.version, kind)
        .map(|n| schema_ref(&format!("{n}List")))
        .unwrap_or_else(|| json!({ "type": "object" }));
    let status = schema_ref(STATUS);
    let event = schema_ref(WATCH_EVENT);
    let patch = schema_ref(PATCH);
    let pretty = query(
        "pretty",
        "string",
        "If 'true', then the output is pretty printed.",
    );
    let ns_param = path_param(
        "namespace",
        "object name and auth scope, such as for teams and projects",
    );
    let name_param = |what: &str| path_param("name", &format!("name of the {what}"));
    let scope_params = |with_name: Option<&str>| {
        let mut v = Vec::new();
        if let Some(what) = with_name {
            v.push(name_param(what));
        }
        if r.namespaced {
            v.push(ns_param.clone());
        }
        v.push(pretty.clone());
        Value::Array(v)
    };
    let op = |id: String, action: &'static str, params, request, responses| Op {
        id,
        action,
        gvk: gvk.clone(),
        tag: &tag,
        params,
        request,
        responses,
    };
    let mut out = Vec::new();

    // The collection: list, create, deletecollection.
    let mut collection = json!({ "parameters": scope_params(None) });
    let has = |verb: &str| r.verbs.contains(&verb);
    if has("list") {
        collection["get"] = op(
            format!("list{infix}{scope}{kind}"),
            "list",
            list_params(false),
            None,
            responses(&["200"], &list, true),
        )
        .render(&format!("list or watch objects of kind {kind}"));
    }
    if has("create") {
        collection["post"] = op(
            format!("create{infix}{scope}{kind}"),
            "post",
            write_params(false),
            Some(body(&object, &["*/*"])),
            responses(&["200", "201", "202"], &object, false),
        )
        .render(&format!("create a {kind}"));
    }
    if has("deletecollection") {
        let mut params = list_params(true);
        params.extend(delete_params());
        collection["delete"] = op(
            format!("deletecollection{infix}{scope}{kind}"),
            "deletecollection",
            params,
            Some(body(&schema_ref(DELETE_OPTIONS), &["*/*"])),
            responses(&["200"], &status, false),
        )
        .render(&format!("delete collection of {kind}"));
    }
    out.push((format!("{prefix}/{ns_segment}{}", r.plural), collection));

    // One object: read, replace, patch, delete.
    let mut item = json!({ "parameters": scope_params(Some(kind)) });
    if has("get") {
        item["get"] = op(
            format!("read{infix}{scope}{kind}"),
            "get",
            vec![],
            None,
            responses(&["200"], &object, false),
        )
        .render(&format!("read the specified {kind}"));
    }
    if has("update") {
        item["put"] = op(
            format!("replace{infix}{scope}{kind}"),
            "put",
            write_params(false),
            Some(body(&object, &["*/*"])),
            responses(&["200", "201"], &object, false),
        )
        .render(&format!("replace the specified {kind}"));
    }
    if has("patch") {
        item["patch"] = op(
            format!("patch{infix}{scope}{kind}"),
            "patch",
            write_params(true),
            Some(body(&patch, PATCH_CONTENT_TYPES)),
            responses(&["200", "201"], &object, false),
        )
        .render(&format!("partially update the specified {kind}"));
    }
    if has("delete") {
        let params = delete_params();
        item["delete"] = op(
            format!("delete{infix}{scope}{kind}"),
            "delete",
            params,
            Some(body(&schema_ref(DELETE_OPTIONS), &["*/*"])),
            responses(&["200", "202"], &object, false),
        )
        .render(&format!("delete a {kind}"));
    }
    out.push((format!("{prefix}/{ns_segment}{}/{{name}}", r.plural), item));

    if r.namespaced && has("list") {
        let mut all = json!({ "parameters": [pretty.clone()] });
        all["get"] = op(
            format!("list{infix}{kind}ForAllNamespaces"),
            "list",
            list_params(false),
            None,
            responses(&["200"], &list, true),
        )
        .render(&format!("list or watch objects of kind {kind}"));
        out.push((format!("{prefix}/{}", r.plural), all));
    }

    if has("watch") {
        let mut wl = json!({ "parameters": scope_params(None) });
        wl["get"] = op(format!("watch{infix}{scope}{kind}List"), "watchlist", list_params(false), None, responses(&["200"], &event, true))
            .render(&format!("watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead."));
        out.push((format!("{prefix}/watch/{ns_segment}{}", r.plural), wl));
        let mut w = json!({ "parameters": scope_params(Some(kind)) });
        w["get"] = op(format!("watch{infix}{scope}{kind}"), "watch", list_params(false), None, responses(&["200"], &event, true))
            .render(&format!("watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."));
        out.push((
            format!("{prefix}/watch/{ns_segment}{}/{{name}}", r.plural),
            w,
        ));
        if r.namespaced {
            let mut wa = json!({ "parameters": [pretty.clone()] });
            wa["get"] = op(format!("watch{infix}{kind}ListForAllNamespaces"), "watchlist", list_params(false), None, responses(&["200"], &event, true))
                .render(&format!("watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead."));
            out.push((format!("{prefix}/watch/{}", r.plural), wa));
        }
    }

    for s in r.subresources {
        let sub_kind = s.kind;
        let sub_gvk = json!({ "group": s.group, "version": s.version, "kind": sub_kind });
        let sub_schema = schema_name(s.group, s.version, sub_kind)
            .map(|n| schema_ref(&n))
            .unwrap_or_else(|| json!({ "type": "object" }));
        let title = {
            let mut c = s.name.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        };
        let sub_op = |verb: &str, action: &'static str, params, request, codes: &[&str]| Op {
            id: format!("{verb}{infix}{scope}{kind}{title}"),
            action,
            gvk: sub_gvk.clone(),
            tag: &tag,
            params,
            request,
            responses: responses(codes, &sub_schema, false),
        };
        let mut p = json!({ "parameters": scope_params(Some(kind)) });
        let verb_has = |v: &str| s.verbs.contains(&v);
        if verb_has("get") {
            p["get"] = sub_op("read", "get", vec![], None, &["200"])
                .render(&format!("read {} of the specified {kind}", s.name));
        }
        if verb_has("create") {
            p["post"] = sub_op(
                "create",
                "post",
                write_params(false),
                Some(body(&sub_schema, &["*/*"])),
                &["200", "201", "202"],
            )
            .render(&format!("create {} of a {kind}", s.name));
        }
        if verb_has("update") {
            p["put"] = sub_op(
                "replace",
                "put",
                write_params(false),
                Some(body(&sub_schema, &["*/*"])),
                &["200", "201"],
            )
            .render(&format!("replace {} of the specified {kind}", s.name));
        }
        if verb_has("patch") {
            p["patch"] = sub_op(
                "patch",
                "patch",
                write_params(true),
                Some(body(&patch, PATCH_CONTENT_TYPES)),
                &["200", "201"],
            )
            .render(&format!(
                "partially update {} of the specified {kind}",
                s.name
            ));
        }
        out.push((
            format!("{prefix}/{ns_segment}{}/{{name}}/{}", r.plural, s.name),
            p,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::catalog::lookup;

    fn names(_g: &str, _v: &str, k: &str) -> Option<String> {
        Some(format!("io.k8s.api.test.{k}"))
    }

    #[test]
    fn operation_ids_and_tags_follow_kube() {
        assert_eq!(op_infix("", "v1"), "CoreV1");
        assert_eq!(
            op_infix("rbac.authorization.k8s.io", "v1"),
            "RbacAuthorizationV1"
        );
        assert_eq!(op_infix("coordination.k8s.io", "v1"), "CoordinationV1");
        assert_eq!(
            tag("rbac.authorization.k8s.io", "v1"),
            "rbacAuthorization_v1"
        );
        assert_eq!(
            op_infix("cert-manager.io", "v1beta1"),
            "CertManagerIoV1beta1"
        );
        assert_eq!(
            tag("flowcontrol.apiserver.k8s.io", "v1"),
            "flowcontrolApiserver_v1"
        );
        assert_eq!(tag("", "v1"), "core_v1");
    }

    #[test]
    fn deployment_patch_declares_field_validation_and_patch_types() {
        let d = lookup("apps", "v1", "deployments").unwrap();
        let paths: Map<String, Value> = resource_paths(d, &names).into_iter().collect();
        let item = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        let patch = &item["patch"];
        assert_eq!(patch["operationId"], "patchAppsV1NamespacedDeployment");
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        let params = patch["parameters"].as_array().unwrap();
        assert!(params
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"));
        for t in PATCH_CONTENT_TYPES {
            assert!(patch["requestBody"]["content"].get(*t).is_some(), "{t}");
        }
        let scale = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
        assert_eq!(
            scale["get"]["x-kubernetes-group-version-kind"]["kind"],
            "Scale"
        );
        assert_eq!(
            scale["put"]["requestBody"]["content"]["*/*"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.test.Scale"
        );
        assert!(paths.contains_key("/apis/apps/v1/deployments"));
        assert!(paths.contains_key("/apis/apps/v1/watch/namespaces/{namespace}/deployments/{name}"));
        let list = &paths["/apis/apps/v1/namespaces/{namespace}/deployments"]["get"];
        assert_eq!(
            list["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.test.DeploymentList"
        );
    }

    #[test]
    fn cluster_scoped_paths_have_no_namespace() {
        let ns = lookup("", "v1", "namespaces").unwrap();
        let paths: Map<String, Value> = resource_paths(ns, &names).into_iter().collect();
        assert!(paths.contains_key("/api/v1/namespaces/{name}"));
        assert!(paths.contains_key("/api/v1/namespaces/{name}/status"));
        assert_eq!(
            paths["/api/v1/namespaces/{name}"]["get"]["operationId"],
            "readCoreV1Namespace"
        );
        // Namespaces have no deletecollection upstream either.
        assert!(paths["/api/v1/namespaces"].get("delete").is_none());
    }
}
