//! Which PersistentVolume a claim may bind to (upstream's `findMatchingVolume` and
//! `checkVolumeSatisfyClaim`): pure functions over typed objects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::resources::value;
use crate::scheduling::{label_selector_matches, node_selector_term_matches};

/// The node a delayed-binding claim is to be bound for: its name and labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeRef {
    /// The node's name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// The claim's storage class name ("" when it has none).
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// The volume's storage class name ("" when it has none).
pub fn volume_class(volume: &PersistentVolume) -> &str {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// The claim's storage request in bytes (0 when it states none or an invalid one).
pub fn requested(claim: &PersistentVolumeClaim) -> i64 {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| value(&q.0))
        .unwrap_or(0)
}

/// The volume's capacity in bytes (0 when unreadable).
pub fn capacity(volume: &PersistentVolume) -> i64 {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| value(&q.0))
        .unwrap_or(0)
}

fn volume_mode(m: Option<&String>) -> &str {
    m.map(String::as_str).unwrap_or("Filesystem")
}

/// Whether the volume's node affinity admits `node` (a volume without one admits every node).
pub fn node_affinity_admits(volume: &PersistentVolume, node: &NodeRef) -> bool {
    let required = volume
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref());
    match required {
        None => true,
        Some(sel) => sel
            .node_selector_terms
            .iter()
            .any(|t| node_selector_term_matches(t, &node.labels, &node.name)),
    }
}

/// Why `volume` cannot satisfy `claim` (upstream's `checkVolumeSatisfyClaim` messages), or
/// `None` when it can: the size, storage class, volume mode and access modes.
pub fn unsatisfied(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Option<String> {
    let (vs, cs) = (volume.spec.as_ref()?, claim.spec.as_ref()?);
    if capacity(volume) < requested(claim) {
        return Some("requested PV is too small".into());
    }
    if volume_class(volume) != claim_class(claim) {
        return Some("storageClassName does not match".into());
    }
    if volume_mode(vs.volume_mode.as_ref()) != volume_mode(cs.volume_mode.as_ref()) {
        return Some("incompatible volumeMode".into());
    }
    let offered = vs.access_modes.as_deref().unwrap_or_default();
    let wanted = cs.access_modes.as_deref().unwrap_or_default();
    if !wanted.iter().all(|m| offered.contains(m)) {
        return Some("incompatible accessMode".into());
    }
    None
}

/// Whether the volume's claimRef names `claim` (by namespace and name, and by UID when the
/// ref has one).
pub fn refers_to(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.namespace == claim.metadata.namespace
        && r.name == claim.metadata.name
        && (r.uid.as_deref().is_none_or(str::is_empty) || r.uid == claim.metadata.uid)
}

/// The volume `claim` should bind to among `volumes`: one pre-bound to it (its claimRef names
/// the claim) if it satisfies the claim, else the smallest unclaimed volume that satisfies the
/// claim and its selector (and, for delayed binding, admits `node`). Volumes being deleted are
/// skipped.
pub fn find_match<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &'a [PersistentVolume],
    node: Option<&NodeRef>,
) -> Option<&'a PersistentVolume> {
    let selector = claim.spec.as_ref().and_then(|s| s.selector.as_ref());
    let mut best: Option<&PersistentVolume> = None;
    for v in volumes {
        if v.metadata.deletion_timestamp.is_some() || unsatisfied(v, claim).is_some() {
            continue;
        }
        if node.is_some_and(|n| !node_affinity_admits(v, n)) {
            continue;
        }
        if refers_to(v, claim) {
            return Some(v);
        }
        let claimed = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).is_some();
        let phase = v.status.as_ref().and_then(|s| s.phase.as_deref());
        if claimed || phase.is_some_and(|p| p != "Available" && p != "Pending") {
            continue;
        }
        let labels = v.metadata.labels.clone().unwrap_or_default();
        if selector.is_some_and(|s| !label_selector_matches(Some(s), &labels)) {
            continue;
        }
        if best.is_none_or(|b| capacity(v) < capacity(b)) {
            best = Some(v);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{pv, pvc};
    use super::*;
    use serde_json::json;

    fn names(v: Option<&PersistentVolume>) -> Option<&str> {
        v.and_then(|v| v.metadata.name.as_deref())
    }

    #[test]
    fn smallest_fitting_volume_wins() {
        let vols = [
            pv("big", "10Gi", json!({})),
            pv("small", "1Gi", json!({})),
            pv("fit", "2Gi", json!({})),
            pv("tiny", "500Mi", json!({})),
        ];
        assert_eq!(
            names(find_match(&pvc("c", "1500Mi", json!({})), &vols, None)),
            Some("fit")
        );
        assert_eq!(
            names(find_match(&pvc("c", "1Gi", json!({})), &vols, None)),
            Some("small")
        );
        assert_eq!(
            names(find_match(&pvc("c", "11Gi", json!({})), &vols, None)),
            None
        );
    }

    #[test]
    fn class_modes_selector_and_claimed_volumes_filter() {
        let vols = [
            pv("fast", "1Gi", json!({"spec": {"storageClassName": "fast"}})),
            pv(
                "rwx",
                "1Gi",
                json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
            ),
            pv(
                "taken",
                "1Gi",
                json!({"spec": {"claimRef": {"namespace": "ns", "name": "other", "uid": "u"}}}),
            ),
            pv(
                "labelled",
                "2Gi",
                json!({"metadata": {"labels": {"tier": "gold"}}}),
            ),
            pv("block", "1Gi", json!({"spec": {"volumeMode": "Block"}})),
            pv("released", "1Gi", json!({"status": {"phase": "Released"}})),
        ];
        let fast = pvc("c", "1Gi", json!({"spec": {"storageClassName": "fast"}}));
        assert_eq!(names(find_match(&fast, &vols, None)), Some("fast"));
        let rwx = pvc(
            "c",
            "1Gi",
            json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
        );
        assert_eq!(names(find_match(&rwx, &vols, None)), Some("rwx"));
        let gold = pvc(
            "c",
            "1Gi",
            json!({"spec": {"selector": {"matchLabels": {"tier": "gold"}}}}),
        );
        assert_eq!(names(find_match(&gold, &vols, None)), Some("labelled"));
        // No class: "labelled" (2Gi) is the only unclaimed Filesystem RWO volume without class.
        assert_eq!(
            names(find_match(&pvc("c", "1Gi", json!({})), &vols, None)),
            Some("labelled")
        );
    }

    #[test]
    fn pre_bound_volume_wins_over_a_smaller_one() {
        let vols = [
            pv("small", "1Gi", json!({})),
            pv(
                "mine",
                "5Gi",
                json!({"spec": {"claimRef": {"namespace": "ns", "name": "c"}}}),
            ),
        ];
        assert_eq!(
            names(find_match(&pvc("c", "1Gi", json!({})), &vols, None)),
            Some("mine")
        );
        // A ref with another claim's UID is not this claim's.
        let vols = [pv(
            "old",
            "5Gi",
            json!({"spec": {"claimRef": {"namespace": "ns", "name": "c", "uid": "gone"}}}),
        )];
        assert_eq!(
            names(find_match(&pvc("c", "1Gi", json!({})), &vols, None)),
            None
        );
    }

    #[test]
    fn node_affinity_for_delayed_binding() {
        let aff = json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}});
        let vols = [pv("local", "1Gi", aff)];
        let n1 = NodeRef {
            name: "n1".into(),
            labels: BTreeMap::from([("kubernetes.io/hostname".into(), "n1".into())]),
        };
        let n2 = NodeRef {
            name: "n2".into(),
            labels: BTreeMap::from([("kubernetes.io/hostname".into(), "n2".into())]),
        };
        let c = pvc("c", "1Gi", json!({}));
        assert_eq!(names(find_match(&c, &vols, Some(&n1))), Some("local"));
        assert_eq!(names(find_match(&c, &vols, Some(&n2))), None);
        assert_eq!(names(find_match(&c, &vols, None)), Some("local"));
    }

    #[test]
    fn unsatisfied_messages() {
        let c = pvc("c", "2Gi", json!({"spec": {"storageClassName": "x"}}));
        assert_eq!(
            unsatisfied(&pv("v", "1Gi", json!({})), &c).as_deref(),
            Some("requested PV is too small")
        );
        assert_eq!(
            unsatisfied(&pv("v", "2Gi", json!({})), &c).as_deref(),
            Some("storageClassName does not match")
        );
        let rwx = pv(
            "v",
            "2Gi",
            json!({"spec": {"storageClassName": "x", "accessModes": ["ReadWriteMany"]}}),
        );
        assert_eq!(
            unsatisfied(&rwx, &c).as_deref(),
            Some("incompatible accessMode")
        );
    }
}
