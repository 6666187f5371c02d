//! managedFields for the writes that are not server-side apply (create, update, non-apply
//! patch): kube-apiserver records an `Update` entry for the request's field manager, so that a
//! later `kubectl apply --server-side` conflicts with what `kubectl create` or `kubectl edit`
//! set, exactly as upstream.
//!
//! # Guarantees
//! - The manager is the request's `?fieldManager=`, else the User-Agent up to its first `/`
//!   (kube-apiserver's `prefixFromUserAgent`), at most 128 bytes.
//! - Fields are computed on the object as stored (after defaulting), as kube-apiserver does
//!   after decoding: defaulted fields belong to the creator.

use serde_json::Value;

use super::Target;
use k3rs_patch::apply::{track_update, Operation, Scope};
use k3rs_patch::{BuiltinPatchMeta, NoPatchMeta, PatchMeta};

/// kube-apiserver's limit on a field manager's length.
const MAX_MANAGER_LEN: usize = 128;

/// The field manager of a request: `fieldManager` if given, else the User-Agent's prefix.
pub fn manager_of(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let prefix = user_agent.unwrap_or("").split('/').next().unwrap_or("");
    let mut end = prefix.len().min(MAX_MANAGER_LEN);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    prefix[..end].to_string()
}

/// Which fields a write to `t` may own (the resource's reset fields).
pub(super) fn scope_of(t: &Target) -> Scope {
    match t.subresource.as_deref() {
        Some("status") => Scope::Status,
        _ if t.resource.has_status => Scope::Main,
        _ => Scope::Whole,
    }
}

/// `new` with an `Update` entry for `manager` (no change without a manager).
pub(super) fn track(
    t: &Target,
    old: Option<&Value>,
    new: Value,
    manager: Option<&str>,
    now: &str,
) -> Value {
    let Some(manager) = manager else {
        return new;
    };
    let r = t.resource;
    let builtin = BuiltinPatchMeta::for_kind(&r.group_version(), r.kind);
    let meta: &dyn PatchMeta = match &builtin {
        Some(m) => m,
        None => &NoPatchMeta,
    };
    track_update(old, new, manager, Operation::Update, meta, scope_of(t), now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_parameter_wins_over_the_user_agent() {
        let ua = Some("kubectl/v1.32.0 (linux/amd64) kubernetes/70d3cc9");
        assert_eq!(manager_of(Some("kubectl-create"), ua), "kubectl-create");
        assert_eq!(manager_of(None, ua), "kubectl");
        assert_eq!(manager_of(Some(""), ua), "kubectl");
        assert_eq!(
            manager_of(None, Some("OpenAPI-Generator/31.0.0/python")),
            "OpenAPI-Generator"
        );
        assert_eq!(manager_of(None, None), "");
        assert_eq!(manager_of(None, Some(&"é".repeat(100))).len(), 128);
    }
}
