//! The pods of each controller and the orphans of each namespace (upstream's
//! `PodControllerUIDIndex` with its per-namespace orphan key), one index for the whole process
//! kept by the shared pod informer ([`watched`]): a sync reads the pods it may own instead of
//! every pod of the cluster, and expectations look a created or deleted pod up by UID instead
//! of scanning the cache for it (a scan per pending pod per sync was most of the ReplicaSet
//! controller's time at 30,000 pods).
//!
//! # Guarantees
//! - The index shows what the informer's events left: every pod with a controller reference
//!   under that controller's UID (whatever its kind) and namespace, every pod without one
//!   under its namespace. A complete list (`Init` … `InitDone`) replaces the index at its
//!   end, as a reflector's store is replaced.
//! - The informer applies each change to the index before any subscriber hears of it, so a
//!   sync a pod event triggers sees the index with that event applied.

use std::collections::HashMap;
use std::sync::Arc;

use k3rs_apimachinery::informers::{Indexer, Shared, SharedInformerFactory};
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

impl Group {
    fn of(pod: &Pod) -> Group {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        match controller_of(&pod.metadata) {
            Some(r) => Group::Controller(r.uid.clone(), ns),
            None => Group::Orphans(ns),
        }
    }
}

/// The indexed pods: the group of each (by UID), each group's pods, and the UID under each
/// name.
#[derive(Debug, Default)]
struct Maps {
    filed: HashMap<String, Group>,
    groups: HashMap<Group, HashMap<String, Arc<Pod>>>,
    /// `namespace/name` → UID, so a pod replaced under its name is not held twice.
    names: HashMap<String, String>,
}

impl Maps {
    fn pod(&self, uid: &str) -> Option<&Arc<Pod>> {
        self.groups.get(self.filed.get(uid)?)?.get(uid)
    }

    fn remove(&mut self, uid: &str) {
        let Some(group) = self.filed.remove(uid) else {
            return;
        };
        let Some(members) = self.groups.get_mut(&group) else {
            return;
        };
        let pod = members.remove(uid);
        if members.is_empty() {
            self.groups.remove(&group);
        }
        if let Some(pod) = pod {
            let name = name_key(&pod);
            if self.names.get(&name).is_some_and(|u| u == uid) {
                self.names.remove(&name);
            }
        }
    }

    fn insert(&mut self, pod: Arc<Pod>) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        self.remove(&uid);
        if let Some(old) = self.names.insert(name_key(&pod), uid.clone()) {
            if old != uid {
                self.remove(&old);
            }
        }
        let group = Group::of(&pod);
        self.groups
            .entry(group.clone())
            .or_default()
            .insert(uid.clone(), pod);
        self.filed.insert(uid, group);
    }
}

fn name_key(pod: &Pod) -> String {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    format!("{ns}/{name}")
}

/// The process's pod index (see the module's guarantees).
#[derive(Debug, Default)]
pub struct PodIndex {
    maps: Maps,
    /// The complete list being received.
    listing: Option<Maps>,
}

/// The shared pod index once the informer's first list is in it, and the stream of the pods
/// each change touches (subscribed first, so no change after the list is missed): what a
/// controller of pods reads and what triggers it (`crate::watched`, for the pod index).
pub async fn watched(
    informers: &SharedInformerFactory,
) -> (
    Shared<PodIndex>,
    impl futures::Stream<Item = Arc<Pod>> + Send + 'static,
) {
    let informer = informers.informer::<Pod>();
    let touched = informer.touched();
    (informer.index::<PodIndex>().await, touched)
}

impl PodIndex {
    fn group(&self, group: &Group) -> impl Iterator<Item = &Arc<Pod>> {
        self.maps
            .groups
            .get(group)
            .into_iter()
            .flat_map(HashMap::values)
    }

    /// The pods of namespace `ns` the controller with `uid` controls, in no particular order.
    pub fn controlled_by(&self, uid: &str, ns: &str) -> Vec<Arc<Pod>> {
        let group = Group::Controller(uid.to_string(), ns.to_string());
        self.group(&group).cloned().collect()
    }

    /// The pods of namespace `ns` a controller with `uid` may own: those it controls and the
    /// orphans of `ns` (upstream's `FilterPodsByOwner`), in no particular order.
    pub fn candidates(&self, uid: &str, ns: &str) -> Vec<Arc<Pod>> {
        let own = Group::Controller(uid.to_string(), ns.to_string());
        let orphans = Group::Orphans(ns.to_string());
        self.group(&own)
            .chain(self.group(&orphans))
            .cloned()
            .collect()
    }

    /// What the index shows of the pod with `uid` (for expectations).
    pub fn seen(&self, uid: &str) -> Seen {
        match self.maps.pod(uid) {
            None => Seen::Absent,
            Some(p) if p.metadata.deletion_timestamp.is_some() => Seen::Terminating,
            Some(_) => Seen::Present,
        }
    }

    /// The UID of the indexed pod `ns/name`.
    pub fn uid_of(&self, ns: &str, name: &str) -> Option<String> {
        self.maps.names.get(&format!("{ns}/{name}")).cloned()
    }
}

impl Indexer<Pod> for PodIndex {
    fn apply(&mut self, event: Event<Arc<Pod>>) {
        match event {
            Event::Init => self.listing = Some(Maps::default()),
            Event::InitApply(pod) => self.listing.get_or_insert_with(Maps::default).insert(pod),
            Event::InitDone => {
                if let Some(listed) = self.listing.take() {
                    self.maps = listed;
                }
            }
            Event::Apply(pod) => self.maps.insert(pod),
            Event::Delete(pod) => {
                self.maps
                    .remove(pod.metadata.uid.as_deref().unwrap_or_default());
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
        let mut ix = PodIndex::default();
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
            pod("a", "job", "u6", Some(("Job", "j"))),
            // Names this controller's UID but lives elsewhere: not its pod.
            pod("b", "forged", "u7", Some(("ReplicaSet", "rs"))),
        ]);
        assert_eq!(
            names(ix.candidates("rs", "a")),
            ["mine-1", "mine-2", "orphan"]
        );
        assert_eq!(names(ix.candidates("rs2", "a")), ["orphan", "other-rs"]);
        assert_eq!(names(ix.candidates("none", "b")), ["orphan-b"]);
        assert_eq!(names(ix.controlled_by("j", "a")), ["job"], "any kind");
        assert_eq!(names(ix.controlled_by("rs", "a")), ["mine-1", "mine-2"]);
        assert_eq!(names(ix.controlled_by("rs", "b")), ["forged"]);
        assert_eq!(ix.maps.filed.len(), 7);
        assert_eq!(ix.seen("u6"), Seen::Present);
        assert_eq!(ix.seen("u9"), Seen::Absent);
        assert_eq!(ix.seen("u1"), Seen::Present);
        assert_eq!(ix.uid_of("a", "mine-2").as_deref(), Some("u2"));
    }

    #[test]
    fn changes_move_pods_between_groups() {
        let mut ix = listed(vec![pod("a", "p", "u1", None)]);
        // Adopted.
        ix.apply(Event::Apply(pod(
            "a",
            "p",
            "u1",
            Some(("ReplicaSet", "rs")),
        )));
        assert_eq!(names(ix.candidates("rs", "a")), ["p"]);
        assert_eq!(names(ix.candidates("other", "a")), Vec::<String>::new());
        // Handed over to another controller (of another kind).
        ix.apply(Event::Apply(pod("a", "p", "u1", Some(("Job", "j")))));
        assert_eq!(names(ix.candidates("rs", "a")), Vec::<String>::new());
        assert_eq!(names(ix.controlled_by("j", "a")), ["p"]);
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
        ix.apply(Event::Delete(pod("a", "p", "u1", None)));
        assert_eq!(ix.seen("u1"), Seen::Absent);
        assert!(ix.maps.filed.is_empty());
        assert!(ix.maps.groups.is_empty(), "no empty group is kept");
        assert_eq!(ix.uid_of("a", "p"), None);
    }

    #[test]
    fn a_pod_replaced_under_its_name_is_held_once() {
        let mut ix = listed(vec![pod("a", "p", "old", None)]);
        ix.apply(Event::Apply(pod("a", "p", "new", None)));
        assert_eq!(ix.maps.filed.len(), 1);
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
