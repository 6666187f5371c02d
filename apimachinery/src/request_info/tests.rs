use super::*;

fn at(method: &str, path: &str, query: Option<&str>) -> RequestInfo {
    RequestInfo::parse(method, path, query)
}

fn view(i: &RequestInfo) -> (&str, &str, &str, &str, &str) {
    (
        i.verb.as_str(),
        i.namespace.as_str(),
        i.resource.as_str(),
        i.name.as_str(),
        i.subresource.as_str(),
    )
}

#[test]
fn resource_requests() {
    let a = at("GET", "/api/v1/namespaces/default/pods", None);
    assert!(a.resource_request);
    assert_eq!(view(&a), ("list", "default", "pods", "", ""));
    let a = at("GET", "/api/v1/namespaces/default/pods/p1/log", None);
    assert_eq!(view(&a), ("get", "default", "pods", "p1", "log"));
    let a = at("POST", "/apis/apps/v1/namespaces/ns/deployments", None);
    assert_eq!(
        (
            a.verb.as_str(),
            a.api_group.as_str(),
            a.api_version.as_str()
        ),
        ("create", "apps", "v1")
    );
    assert_eq!(
        at("DELETE", "/api/v1/namespaces/ns/pods", None).verb,
        "deletecollection"
    );
    let a = at("GET", "/api/v1/pods", Some("watch=true"));
    assert_eq!(view(&a), ("watch", "", "pods", "", ""));
    let a = at("GET", "/api/v1/watch/namespaces/x/pods", None);
    assert_eq!(view(&a), ("watch", "x", "pods", "", ""));
    let a = at("GET", "/api/v1/watch/namespaces/x/pods/p", None);
    assert_eq!(view(&a), ("watch", "x", "pods", "p", ""));
}

#[test]
fn namespace_objects_are_in_their_own_namespace() {
    let a = at("GET", "/api/v1/namespaces/kube-system", None);
    assert_eq!(
        view(&a),
        ("get", "kube-system", "namespaces", "kube-system", "")
    );
    let a = at("PUT", "/api/v1/namespaces/x/finalize", None);
    assert_eq!(view(&a), ("update", "x", "namespaces", "x", "finalize"));
    let a = at("GET", "/api/v1/namespaces", None);
    assert_eq!(view(&a), ("list", "", "namespaces", "", ""));
}

#[test]
fn non_resource_requests() {
    for (m, p) in [
        ("GET", "/api"),
        ("GET", "/apis/apps"),
        ("GET", "/apis/apps/v1"),
        ("GET", "/healthz"),
        ("POST", "/openapi/v3"),
    ] {
        let a = at(m, p, Some("watch=true&fieldSelector=metadata.name%3Dx"));
        assert!(!a.resource_request, "{p}");
        assert_eq!(
            (a.verb.as_str(), a.name.as_str()),
            (m.to_ascii_lowercase().as_str(), "")
        );
        assert_eq!(a.path, p);
    }
}

#[test]
fn field_selector_on_name_names_the_request() {
    for q in [
        "fieldSelector=metadata.name%3Dcm&watch=1",
        "fieldSelector=metadata.name%3D%3Dcm&watch=true",
        "watch=&fieldSelector=metadata.namespace%3Dd%2Cmetadata.name%3Dcm",
    ] {
        let a = at("GET", "/api/v1/namespaces/d/configmaps", Some(q));
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "cm"), "{q}");
    }
}

/// The escalation of issue 21: a second, empty `fieldSelector` made the handler serve every
/// object while authorization judged the request as narrowed to `allowed`. Whatever the
/// repetition, authorization reads the value the handler reads.
#[test]
fn repeated_parameters_mean_their_first_value_as_in_the_handler() {
    let cases = [
        (
            "fieldSelector=metadata.name%3Dallowed&fieldSelector=",
            "allowed",
        ),
        ("fieldSelector=&fieldSelector=metadata.name%3Dallowed", ""),
        (
            "fieldSelector=metadata.name%3Dallowed&fieldSelector=metadata.name%3Dother",
            "allowed",
        ),
        ("fieldSelector=metadata.name!%3Dallowed", ""),
        ("fieldSelector=metadata.name%3Da%2Fb", ""),
        ("fieldSelector=metadata.name%3D..", ""),
        ("fieldSelector=metadata.name%3Da%25", ""),
        ("fieldSelector=metadata.namex%3Dallowed", ""),
        ("fieldselector=metadata.name%3Dallowed", ""),
        (
            "fieldSelector=garbage&fieldSelector=metadata.name%3Dallowed",
            "",
        ),
    ];
    for (q, name) in cases {
        let a = at("GET", "/api/v1/namespaces/x/secrets", Some(q));
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", name), "{q}");
        let served = a.query.get("fieldSelector").unwrap_or_default();
        if !name.is_empty() {
            assert_eq!(
                field::exact_match(served, "metadata.name").as_deref(),
                Some(name),
                "{q}"
            );
        }
    }
    // `watch` too: the first value decides, as in the handler.
    let a = at("GET", "/api/v1/secrets", Some("watch=false&watch=true"));
    assert_eq!(a.verb, "list");
    let a = at("GET", "/api/v1/secrets", Some("watch=true&watch=false"));
    assert_eq!(a.verb, "watch");
}

#[test]
fn a_named_path_is_never_renamed_by_a_selector() {
    let a = at(
        "GET",
        "/api/v1/namespaces/x/secrets/mine",
        Some("fieldSelector=metadata.name%3Dother"),
    );
    assert_eq!((a.verb.as_str(), a.name.as_str()), ("get", "mine"));
    let a = at(
        "DELETE",
        "/api/v1/namespaces/x/secrets",
        Some("fieldSelector=metadata.name%3Dallowed"),
    );
    assert_eq!((a.verb.as_str(), a.name.as_str()), ("deletecollection", ""));
}
