//! Which objects a controller owns (upstream's `ControllerRefManager`): children that carry
//! its controller reference and match its selector are its own; orphans that match are adopted;
//! its children that stopped matching are released.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{json, Value};

/// What the controller does with one candidate child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Already its own and matching.
    Own,
    /// An orphan that matches: add the controller reference.
    Adopt,
    /// Its own but no longer matching: remove the controller reference.
    Release,
    /// Someone else's, or not a match.
    Ignore,
}

/// The controller reference of `meta` (the owner reference with `controller: true`).
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// Upstream's `ClaimObject` decision for `child` by the controller with `owner_uid`
/// (`owner_deleting`: it has a deletionTimestamp) given whether its selector `matches`.
pub fn claim(owner_uid: &str, owner_deleting: bool, child: &ObjectMeta, matches: bool) -> Claim {
    match controller_of(child) {
        Some(r) if r.uid != owner_uid => Claim::Ignore,
        Some(_) if matches => Claim::Own,
        Some(_) if owner_deleting => Claim::Ignore,
        Some(_) => Claim::Release,
        None if owner_deleting || !matches || child.deletion_timestamp.is_some() => Claim::Ignore,
        None => Claim::Adopt,
    }
}

/// The controller reference a controller puts on its children (`blockOwnerDeletion` so the
/// garbage collector's foreground deletion waits for them).
pub fn controller_ref(api_version: &str, kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// JSON merge patch that adds `owner` as controller of `child` (guarded by the child's uid and
/// resourceVersion: a changed child gets a 409 and is looked at again).
pub fn adopt_patch(child: &ObjectMeta, owner: &OwnerReference) -> Value {
    let mut refs = child.owner_references.clone().unwrap_or_default();
    refs.push(owner.clone());
    guarded_refs_patch(child, &refs)
}

/// JSON merge patch that removes the owner with `owner_uid` from `child`'s references.
pub fn release_patch(child: &ObjectMeta, owner_uid: &str) -> Value {
    let refs: Vec<OwnerReference> = child
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.uid != owner_uid)
        .cloned()
        .collect();
    guarded_refs_patch(child, &refs)
}

fn guarded_refs_patch(child: &ObjectMeta, refs: &[OwnerReference]) -> Value {
    json!({"metadata": {
        "uid": child.uid,
        "resourceVersion": child.resource_version,
        "ownerReferences": if refs.is_empty() { Value::Null } else { json!(refs) },
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(controller_uid: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some("p".into()),
            uid: Some("pod-uid".into()),
            resource_version: Some("7".into()),
            owner_references: controller_uid.map(|u| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "rs".into(),
                    uid: u.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn claim_follows_upstream() {
        assert_eq!(claim("me", false, &meta(Some("me")), true), Claim::Own);
        assert_eq!(claim("me", false, &meta(Some("me")), false), Claim::Release);
        assert_eq!(claim("me", true, &meta(Some("me")), false), Claim::Ignore);
        assert_eq!(
            claim("me", false, &meta(Some("other")), true),
            Claim::Ignore
        );
        assert_eq!(claim("me", false, &meta(None), true), Claim::Adopt);
        assert_eq!(claim("me", false, &meta(None), false), Claim::Ignore);
        assert_eq!(claim("me", true, &meta(None), true), Claim::Ignore);
        let mut dying = meta(None);
        dying.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert_eq!(claim("me", false, &dying, true), Claim::Ignore);
    }

    #[test]
    fn patches_add_and_remove_the_controller_reference() {
        let owner = ObjectMeta {
            name: Some("web".into()),
            uid: Some("me".into()),
            ..ObjectMeta::default()
        };
        let r = controller_ref("apps/v1", "ReplicaSet", &owner);
        assert_eq!(
            adopt_patch(&meta(None), &r),
            json!({"metadata": {"uid": "pod-uid", "resourceVersion": "7", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "me",
                 "controller": true, "blockOwnerDeletion": true}]}})
        );
        assert_eq!(
            release_patch(&meta(Some("me")), "me"),
            json!({"metadata": {"uid": "pod-uid", "resourceVersion": "7", "ownerReferences": null}})
        );
    }
}
