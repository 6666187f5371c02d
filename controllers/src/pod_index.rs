//! The pods of each controller of one kind and the orphans of each namespace (upstream's
//! `PodControllerUIDIndex` with its per-namespace orphan key), kept from a pod subscription's
//! events: a sync reads the pods it may own instead of every pod of the cluster, and its
//! expectations look a created or deleted pod up by UID instead of scanning the cache for it
//! (a scan per pending pod per sync was most of the ReplicaSet controller's time at 30,000
//! pods).
//!
//! # Guarantees
//! - [`PodIndex::apply`] takes a subscription's events in order; the index then shows what
//!   they left: every pod whose controller reference is of the index's kind, under that
//!   controller's UID, and every pod without a controller, under its namespace. Pods of other
//!   controllers are not held. A complete list (`Init` … `InitDone`) replaces the index at
//!   its end, as a reflector's store is replaced.
//! - Fed through `Informer::indexed`, a sync triggered by an event sees the index with that
//!   event applied (as the cache scan did before).

use std::collections::HashMap;
use std::sync::Arc;

use k3rs_apimachinery::informers::Indexer;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;

use crate::expectations::Seen;
use crate::ref_manager::controller_of;

/// Where a pod is filed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Group {
    /// Controlled by the controller with this UID, in this namespace (a reference to a
    /// controller of another namespace does not make it the owner).
    Controller(String, String),
    /// Without a controller, in this namespace.
    Orphans(String),
}

/// The indexed pods, by UID, and the groups they are filed in.
#[derive(Debug, Default)]
struct Maps {
    pods: HashMap<String, (Arc<Pod>, Group)>,
    /// The pods of each group by UID (held here too, so a sync reads its group without a
    /// lookup per pod).
    groups: HashMap<Group, HashMap<String, Arc<Pod>>>,
    /// `namespace/name` → UID, so a pod replaced under its name is not held twice.
    names: HashMap<String, String>,
}

impl Maps {
    fn remove(&mut self, uid: &str) {
        let Some((pod, group)) = self.pods.remove(uid) else {
            return;
        };
        if let Some(members) = self.groups.get_mut(&group) {
            members.remove(uid);
            if members.is_empty() {
                self.groups.remove(&group);
            }
        }
        let name = name_key(&pod);
        if self.names.get(&name).is_some_and(|u| u == uid) {
            self.names.remove(&name);
        }
    }

    fn insert(&mut self, uid: String, pod: Arc<Pod>, group: Group) {
        let name = name_key(&pod);
        if let Some(old) = self.names.insert(name, uid.clone()) {
            if old != uid {
                self.remove(&old);
            }
        }
        self.groups
            .entry(group.clone())
            .or_default()
            .insert(uid.clone(), pod.clone());
        self.pods.insert(uid, (pod, group));
    }
}

fn name_key(pod: &Pod) -> String {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    format!("{ns}/{name}")
}

/// The index of one controller kind's pods (see the module's guarantees).
#[derive(Debug)]
pub struct PodIndex {
    /// The `kind` of the controller references filed by UID (`ReplicaSet`, …).
    kind: &'static str,
    maps: Maps,
    /// The complete list being received.
    listing: Option<Maps>,
}

impl PodIndex {
    /// An empty index of the pods of controllers of `kind`.
    pub fn new(kind: &'static str) -> PodIndex {
        PodIndex {
            kind,
            maps: Maps::default(),
            listing: None,
        }
    }

    fn group(&self, pod: &Pod) -> Option<Group> {
        match controller_of(&pod.metadata) {
            Some(r) if r.kind == self.kind => Some(Group::Controller(
                r.uid.clone(),
                pod.metadata.namespace.clone().unwrap_or_default(),
            )),
            Some(_) => None,
            None => Some(Group::Orphans(
                pod.metadata.namespace.clone().unwrap_or_default(),
            )),
        }
    }

    /// The pods of namespace `ns` a controller with `uid` may own: those it controls and the
    /// orphans of `ns` (upstream's `FilterPodsByOwner`), in no particular order.
    pub fn candidates(&self, uid: &str, ns: &str) -> Vec<Arc<Pod>> {
        let groups = [
            Group::Controller(uid.to_string(), ns.to_string()),
            Group::Orphans(ns.to_string()),
        ];
        groups
            .iter()
            .filter_map(|g| self.maps.groups.get(g))
            .flat_map(HashMap::values)
            .cloned()
            .collect()
    }

    /// What the index shows of the pod with `uid` (for expectations; a pod that has since
    /// passed to another kind's controller reads as absent).
    pub fn seen(&self, uid: &str) -> Seen {
        match self.maps.pods.get(uid) {
            None => Seen::Absent,
            Some((p, _)) if p.metadata.deletion_timestamp.is_some() => Seen::Terminating,
            Some(_) => Seen::Present,
        }
    }

    /// The UID of the indexed pod `ns/name`.
    pub fn uid_of(&self, ns: &str, name: &str) -> Option<String> {
        self.maps.names.get(&format!("{ns}/{name}")).cloned()
    }
}

impl Indexer<Pod> for PodIndex {
    /// Applies one event; the pod it touches, if any (as the subscription's `touched` gives).
    fn apply(&mut self, event: Event<Arc<Pod>>) -> Option<Arc<Pod>> {
        match event {
            Event::Init => {
                self.listing = Some(Maps::default());
                None
            }
            Event::InitApply(pod) => {
                let group = self.group(&pod);
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let maps = self.listing.get_or_insert_with(Maps::default);
                if let Some(group) = group {
                    maps.insert(uid, pod.clone(), group);
                }
                Some(pod)
            }
            Event::InitDone => {
                if let Some(listed) = self.listing.take() {
                    self.maps = listed;
                }
                None
            }
            Event::Apply(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                self.maps.remove(&uid);
                if let Some(group) = self.group(&pod) {
                    self.maps.insert(uid, pod.clone(), group);
                }
                Some(pod)
            }
            Event::Delete(pod) => {
                self.maps
                    .remove(pod.metadata.uid.as_deref().unwrap_or_default());
                Some(pod)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str, uid: &str, controller: Option<(&str, &str)>) -> Arc<Pod> {
        let refs: Vec<serde_json::Value> = controller
            .map(|(kind, cuid)| {
                serde_json::json!({"apiVersion": "apps/v1", "kind": kind, "name": "c",
                    "uid": cuid, "controller": true})
            })
            .into_iter()
            .collect();
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"namespace": ns, "name": name, "uid": uid, "ownerReferences": refs},
            }))
            .unwrap(),
        )
    }

    fn names(pods: Vec<Arc<Pod>>) -> Vec<String> {
        let mut v: Vec<String> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        v.sort();
        v
    }

    fn listed(pods: Vec<Arc<Pod>>) -> PodIndex {
        let mut ix = PodIndex::new("ReplicaSet");
        ix.apply(Event::Init);
        for p in pods {
            ix.apply(Event::InitApply(p));
        }
        ix.apply(Event::InitDone);
        ix
    }

    #[test]
    fn candidates_are_the_controlled_pods_and_the_orphans_of_the_namespace() {
        let ix = listed(vec![
            pod("a", "mine-1", "u1", Some(("ReplicaSet", "rs"))),
            pod("a", "mine-2", "u2", Some(("ReplicaSet", "rs"))),
            pod("a", "orphan", "u3", None),
            pod("b", "orphan-b", "u4", None),
            pod("a", "other-rs", "u5", Some(("ReplicaSet", "rs2"))),
            pod("a", "job", "u6", Some(("Job", "rs"))),
            // Names this controller's UID but lives elsewhere: not its pod.
            pod("b", "forged", "u7", Some(("ReplicaSet", "rs"))),
        ]);
        assert_eq!(
            names(ix.candidates("rs", "a")),
            ["mine-1", "mine-2", "orphan"]
        );
        assert_eq!(names(ix.candidates("rs2", "a")), ["orphan", "other-rs"]);
        assert_eq!(names(ix.candidates("none", "b")), ["orphan-b"]);
        assert_eq!(ix.maps.pods.len(), 6, "the Job's pod is not held");
        assert_eq!(ix.seen("u6"), Seen::Absent);
        assert_eq!(ix.seen("u1"), Seen::Present);
        assert_eq!(ix.uid_of("a", "mine-2").as_deref(), Some("u2"));
    }

    #[test]
    fn changes_move_pods_between_groups() {
        let mut ix = listed(vec![pod("a", "p", "u1", None)]);
        // Adopted.
        let touched = ix.apply(Event::Apply(pod(
            "a",
            "p",
            "u1",
            Some(("ReplicaSet", "rs")),
        )));
        assert!(touched.is_some());
        assert_eq!(names(ix.candidates("rs", "a")), ["p"]);
        assert_eq!(names(ix.candidates("other", "a")), Vec::<String>::new());
        // Taken over by another kind's controller: no longer held.
        ix.apply(Event::Apply(pod("a", "p", "u1", Some(("Job", "j")))));
        assert!(ix.maps.pods.is_empty());
        // Released again, then terminating, then deleted.
        ix.apply(Event::Apply(pod("a", "p", "u1", None)));
        assert_eq!(names(ix.candidates("x", "a")), ["p"]);
        let mut dying = (*pod("a", "p", "u1", None)).clone();
        dying.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        ix.apply(Event::Apply(Arc::new(dying)));
        assert_eq!(ix.seen("u1"), Seen::Terminating);
        assert!(ix.apply(Event::Delete(pod("a", "p", "u1", None))).is_some());
        assert_eq!(ix.seen("u1"), Seen::Absent);
        assert!(ix.maps.pods.is_empty());
        assert_eq!(ix.uid_of("a", "p"), None);
    }

    #[test]
    fn a_pod_replaced_under_its_name_is_held_once() {
        let mut ix = listed(vec![pod("a", "p", "old", None)]);
        ix.apply(Event::Apply(pod("a", "p", "new", None)));
        assert_eq!(ix.maps.pods.len(), 1);
        assert_eq!(ix.seen("old"), Seen::Absent);
        assert_eq!(ix.uid_of("a", "p").as_deref(), Some("new"));
        // The old one's late deletion leaves the new one alone.
        ix.apply(Event::Delete(pod("a", "p", "old", None)));
        assert_eq!(ix.seen("new"), Seen::Present);
        assert_eq!(ix.uid_of("a", "p").as_deref(), Some("new"));
    }

    #[test]
    fn a_relist_replaces_the_index_at_its_end() {
        let mut ix = listed(vec![
            pod("a", "gone", "u1", None),
            pod("a", "kept", "u2", None),
        ]);
        ix.apply(Event::Init);
        ix.apply(Event::InitApply(pod("a", "kept", "u2", None)));
        ix.apply(Event::InitApply(pod("a", "new", "u3", None)));
        // Until the list is complete, readers see the index as it was.
        assert_eq!(names(ix.candidates("x", "a")), ["gone", "kept"]);
        ix.apply(Event::InitDone);
        assert_eq!(names(ix.candidates("x", "a")), ["kept", "new"]);
        assert_eq!(ix.seen("u1"), Seen::Absent);
    }
}
