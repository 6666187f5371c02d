//! The `pod-template-hash` that names a Deployment's ReplicaSets (`<deployment>-<hash>`) and
//! labels their pods (upstream's `controller.ComputeHash`): FNV-32a over the pod template,
//! then the collision count as 8 little-endian bytes, printed in decimal and safe-encoded into
//! the consonant-and-digit alphabet (`rand.SafeEncodeString`), so names look as upstream's.
//!
//! Upstream hashes go-spew's dump of the Go struct; this hashes the template's canonical JSON
//! (sorted keys), so the hash of a template differs from upstream's value, but it is stable
//! and changes exactly when the template does.

use k8s_openapi::api::core::v1::PodTemplateSpec;

/// The label (on ReplicaSets, their selectors and pods) that carries the hash.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `rand.SafeEncodeString`: every byte mapped into an alphabet without vowels.
pub fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// FNV-32a of `data`.
pub fn fnv32a_str(data: &[u8]) -> u32 {
    fnv32a(data, 0x811c_9dc5)
}

fn fnv32a(data: &[u8], mut h: u32) -> u32 {
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The hash of `template` with `collision_count` (the Deployment's `status.collisionCount`).
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    // serde_json maps are ordered (BTreeMap): the JSON is canonical.
    let json = serde_json::to_value(template)
        .map(|v| v.to_string())
        .unwrap_or_default();
    let mut h = fnv32a(json.as_bytes(), 0x811c_9dc5);
    if let Some(c) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(c as u32).to_le_bytes());
        h = fnv32a(&bytes, h);
    }
    safe_encode(&h.to_string())
}

/// The template without the hash label (upstream's `EqualIgnoreHash` compares these).
pub fn without_hash(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut t = template.clone();
    if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    if let Some(m) = t.metadata.as_mut() {
        if m.labels.as_ref().is_some_and(|l| l.is_empty()) {
            m.labels = None;
        }
    }
    t
}

/// Equal templates, ignoring the hash label.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    serde_json::to_value(without_hash(a)).ok() == serde_json::to_value(without_hash(b)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": image}]}
        }))
        .unwrap()
    }

    #[test]
    fn safe_encoding_is_upstreams() {
        // rand.SafeEncodeString("1234567890") in Go.
        assert_eq!(safe_encode("1234567890"), "56789bcdf4");
        assert_eq!(fnv32a(b"", 0x811c_9dc5), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a", 0x811c_9dc5), 0xe40c_292c);
    }

    #[test]
    fn hash_follows_the_template_and_the_collision_count() {
        let a = compute_hash(&template("nginx:1"), None);
        assert_eq!(a, compute_hash(&template("nginx:1"), None));
        assert_ne!(a, compute_hash(&template("nginx:2"), None));
        assert_ne!(a, compute_hash(&template("nginx:1"), Some(1)));
        assert!(
            a.len() <= 10 && a.bytes().all(|b| ALPHANUMS.contains(&b)),
            "{a}"
        );
    }

    #[test]
    fn equality_ignores_the_hash_label() {
        let mut hashed = template("nginx:1");
        hashed
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(POD_TEMPLATE_HASH.into(), "abc".into());
        assert!(equal_ignore_hash(&hashed, &template("nginx:1")));
        assert!(!equal_ignore_hash(&hashed, &template("nginx:2")));
    }
}
