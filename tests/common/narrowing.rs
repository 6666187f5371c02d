//! Requests that try to be authorized as narrower than the handler serves them: a list or
//! watch narrowed to one name by its field selector, with the selector repeated, reordered,
//! encoded, doubled (`==`), combined with other terms, and the `watch` flag repeated.

use super::kubectl::Kubectl;

/// The query strings tried against `<collection>?<query>`: `{n}` is the allowed name,
/// `{o}` another existing object's name.
const QUERIES: &[&str] = &[
    "fieldSelector=metadata.name%3D{n}",
    "fieldSelector=metadata.name%3D%3D{n}",
    "fieldSelector=metadata.name%3D{n}&fieldSelector=",
    "fieldSelector=&fieldSelector=metadata.name%3D{n}",
    "fieldSelector=metadata.name%3D{n}&fieldSelector=metadata.name%3D{o}",
    "fieldSelector=metadata.name%3D{o}&fieldSelector=metadata.name%3D{n}",
    "fieldSelector=metadata.name%3D{n}&fieldSelector=metadata.name!%3D{n}",
    "fieldSelector=metadata.name%3D{n}%2Cmetadata.name!%3D{o}",
    "fieldSelector=metadata.name!%3D{o}%2Cmetadata.name%3D{n}",
    "fieldSelector=metadata.name%3D{n}%2Cmetadata.name%3D{o}",
    "field%53elector=metadata.name%3D{n}&fieldSelector=",
    "fieldSelector=metadata.name%3D{n}&field%53elector=",
    "fieldSelector=metadata.name%3D{n}+",
    "fieldSelector=metadata.name%3D{n};fieldSelector=",
    "fieldSelector=metadata.name%3D{n}&limit=1&limit=500&continue=",
    "fieldSelector=metadata.name!%3D{n}",
    "fieldSelector=metadata.namespace%3Dx",
    "fieldselector=metadata.name%3D{n}",
    "fieldSelector=metadata.name%3D{n}&watch=false&watch=true&timeoutSeconds=1",
    "fieldSelector=metadata.name%3D{n}&watch=1&watch=0&timeoutSeconds=1",
    "watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3D{n}&fieldSelector=",
    "watch=&timeoutSeconds=1&fieldSelector=&fieldSelector=metadata.name%3D{n}",
];

/// The names in a list body, or in the objects of a stream of watch events.
fn names(body: &str) -> Vec<String> {
    let name = |o: &serde_json::Value| o["metadata"]["name"].as_str().unwrap_or("?").to_string();
    if let Ok(list) = serde_json::from_str::<serde_json::Value>(body) {
        if let Some(items) = list["items"].as_array() {
            return items.iter().map(name).collect();
        }
    }
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let ev: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            name(&ev["object"])
        })
        .collect()
}

/// Runs every query against `collection` as `user`: each answer is a 403, or holds objects
/// named `allowed` only. Returns how many queries were answered (not forbidden), so callers
/// can check that the plain narrowed forms do work.
pub fn assert_never_wider(user: &Kubectl, collection: &str, allowed: &str, other: &str) -> usize {
    let mut answered = 0;
    for q in QUERIES {
        let q = q.replace("{n}", allowed).replace("{o}", other);
        let path = format!("{collection}?{q}");
        let out = user.run(&["get", "--raw", &path]);
        if !out.ok {
            assert!(
                out.stderr.contains("Forbidden") || out.stderr.contains("BadRequest"),
                "{path}: {out:?}"
            );
            continue;
        }
        answered += 1;
        let got = names(&out.stdout);
        assert!(
            got.iter().all(|n| n == allowed),
            "{path} served {got:?} to a user granted only {allowed:?}"
        );
    }
    answered
}
