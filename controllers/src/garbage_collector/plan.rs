//! The garbage collector's decisions, without I/O: given every object that has or may be an
//! owner (a snapshot of the informers) and the owners verified absent, what to delete, which
//! owner references to drop and which deletion finalizers to remove — upstream's
//! `attemptToDeleteItem`, `processDeletingDependentsItem` and `orphanDependents`.

#[cfg(test)]
use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet};

/// The finalizer a `propagationPolicy: Orphan` delete puts on the owner.
pub const ORPHAN: &str = "orphan";
/// The finalizer a `propagationPolicy: Foreground` delete puts on the owner.
pub const FOREGROUND: &str = "foregroundDeletion";

/// Where an object lives: the index of its resource (in the shell's resource table),
/// namespace ("" when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub resource: usize,
    pub namespace: String,
    pub name: String,
}

/// One `metadata.ownerReferences` entry, as far as the collector needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub block_owner_deletion: bool,
}

/// An object in the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub key: ObjectKey,
    pub uid: String,
    pub owners: Vec<OwnerRef>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    pub finalizers: Vec<String>,
}

impl Item {
    fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }

    /// Being deleted in the foreground: waits for its blocking dependents.
    fn deleting_dependents(&self) -> bool {
        self.deleting && self.has_finalizer(FOREGROUND)
    }
}

/// The propagation policy of a delete the collector issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Background,
    Foreground,
    Orphan,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Background => "Background",
            Policy::Foreground => "Foreground",
            Policy::Orphan => "Orphan",
        }
    }
}

/// One step for the shell. Every step carries the uid it was decided for, so that it acts
/// only on that incarnation of the object (a delete precondition, a patch guard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Delete the dependent: none of its owners exists any more (or all are being deleted in
    /// the foreground).
    Delete {
        key: ObjectKey,
        uid: String,
        policy: Policy,
    },
    /// Keep the object but drop the owner references to these owner uids (owners gone or
    /// orphaning it while another owner remains).
    RemoveOwnerRefs {
        key: ObjectKey,
        uid: String,
        owners: BTreeSet<String>,
    },
    /// Drop a deletion finalizer (`orphan` after orphaning, `foregroundDeletion` once no
    /// dependent blocks).
    RemoveFinalizer {
        key: ObjectKey,
        uid: String,
        finalizer: &'static str,
    },
}

/// The state of one owner from a dependent's point of view.
enum Owner {
    /// Exists and is not waiting for its dependents.
    Solid,
    /// Verified not to exist (or to be another incarnation).
    Dangling,
    /// Being deleted in the foreground.
    Waiting,
    /// Not seen and not verified absent: no decision yet.
    Unknown,
}

/// What [`decide`] reads of the graph around the items it decides for: objects by uid and
/// the dependents that reference a uid as an owner.
pub trait View {
    /// The object with this uid, if the graph has it.
    fn by_uid(&self, uid: &str) -> Option<&Item>;
    /// The objects naming `uid` among their owners.
    fn dependents(&self, uid: &str) -> Vec<&Item>;
}

/// A [`View`] of a whole snapshot (the reference the incremental graph is tested against).
#[cfg(test)]
struct Snapshot<'a> {
    by_uid: HashMap<&'a str, &'a Item>,
    dependents: HashMap<&'a str, Vec<&'a Item>>,
}

#[cfg(test)]
impl View for Snapshot<'_> {
    fn by_uid(&self, uid: &str) -> Option<&Item> {
        self.by_uid.get(uid).copied()
    }

    fn dependents(&self, uid: &str) -> Vec<&Item> {
        self.dependents.get(uid).cloned().unwrap_or_default()
    }
}

/// Every action the snapshot calls for, in a stable order: [`decide`] over all of `items`.
#[cfg(test)]
pub fn plan(items: &[Item], absent: &BTreeSet<String>) -> Vec<Action> {
    let mut view = Snapshot {
        by_uid: items.iter().map(|i| (i.uid.as_str(), i)).collect(),
        dependents: HashMap::new(),
    };
    for item in items {
        for o in &item.owners {
            view.dependents
                .entry(o.uid.as_str())
                .or_default()
                .push(item);
        }
    }
    decide(&view, items, absent)
}

/// The actions `items` call for, reading their owners and dependents through `view`, in a
/// stable order.
///
/// Guarantees: an object is never deleted while an owner is unknown or solid; an owner's
/// `foregroundDeletion` finalizer is removed only when no dependent referencing it with
/// `blockOwnerDeletion: true` is left; an owner's `orphan` finalizer only once no dependent
/// references it any more.
pub fn decide<'a>(
    view: &impl View,
    items: impl IntoIterator<Item = &'a Item>,
    absent: &BTreeSet<String>,
) -> Vec<Action> {
    let mut drops: BTreeMap<(ObjectKey, String), BTreeSet<String>> = BTreeMap::new();
    let mut actions = Vec::new();

    for item in items {
        // Owners being deleted with `orphan` release their dependents first.
        if item.deleting && item.has_finalizer(ORPHAN) {
            let deps = view.dependents(&item.uid);
            for d in &deps {
                drops
                    .entry((d.key.clone(), d.uid.clone()))
                    .or_default()
                    .insert(item.uid.clone());
            }
            if deps.is_empty() {
                actions.push(Action::RemoveFinalizer {
                    key: item.key.clone(),
                    uid: item.uid.clone(),
                    finalizer: ORPHAN,
                });
            }
        }
        if item.deleting_dependents() {
            let blocked = view.dependents(&item.uid).iter().any(|d| {
                d.owners
                    .iter()
                    .any(|o| o.uid == item.uid && o.block_owner_deletion)
            });
            if !blocked {
                actions.push(Action::RemoveFinalizer {
                    key: item.key.clone(),
                    uid: item.uid.clone(),
                    finalizer: FOREGROUND,
                });
            }
        }
        if item.owners.is_empty() || item.deleting {
            continue;
        }
        let states: Vec<(&OwnerRef, Owner)> = item
            .owners
            .iter()
            .map(|o| (o, owner_state(o, view, absent)))
            .collect();
        if states.iter().any(|(_, s)| matches!(s, Owner::Unknown)) {
            continue;
        }
        let gone: Vec<&str> = states
            .iter()
            .filter(|(_, s)| matches!(s, Owner::Dangling | Owner::Waiting))
            .map(|(o, _)| o.uid.as_str())
            .collect();
        let waiting = states.iter().any(|(_, s)| matches!(s, Owner::Waiting));
        if states.iter().any(|(_, s)| matches!(s, Owner::Solid)) {
            if !gone.is_empty() {
                drops
                    .entry((item.key.clone(), item.uid.clone()))
                    .or_default()
                    .extend(gone.into_iter().map(str::to_string));
            }
            continue;
        }
        let has_dependents = !view.dependents(&item.uid).is_empty();
        let policy = if waiting && has_dependents {
            Policy::Foreground
        } else if item.has_finalizer(ORPHAN) {
            Policy::Orphan
        } else if item.has_finalizer(FOREGROUND) {
            Policy::Foreground
        } else {
            Policy::Background
        };
        actions.push(Action::Delete {
            key: item.key.clone(),
            uid: item.uid.clone(),
            policy,
        });
    }
    let removals = drops
        .into_iter()
        .map(|((key, uid), owners)| Action::RemoveOwnerRefs { key, uid, owners });
    let mut all: Vec<Action> = removals.chain(actions).collect();
    all.sort_by(|a, b| key_of(a).cmp(key_of(b)));
    all
}

fn key_of(a: &Action) -> &ObjectKey {
    match a {
        Action::Delete { key, .. }
        | Action::RemoveOwnerRefs { key, .. }
        | Action::RemoveFinalizer { key, .. } => key,
    }
}

fn owner_state(o: &OwnerRef, view: &impl View, absent: &BTreeSet<String>) -> Owner {
    match view.by_uid(&o.uid) {
        Some(owner) if owner.deleting_dependents() => Owner::Waiting,
        Some(_) => Owner::Solid,
        None if absent.contains(&o.uid) => Owner::Dangling,
        None => Owner::Unknown,
    }
}

/// Builders for the collector's tests: objects `u-<name>`-identified in `default`.
#[cfg(test)]
pub(super) mod fixtures {
    use super::*;

    pub fn key(name: &str) -> ObjectKey {
        ObjectKey {
            resource: 0,
            namespace: "default".into(),
            name: name.into(),
        }
    }

    pub fn item(name: &str, owners: &[(&str, bool)]) -> Item {
        Item {
            key: key(name),
            uid: format!("u-{name}"),
            owners: owners
                .iter()
                .map(|(o, block)| OwnerRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    name: o.to_string(),
                    uid: format!("u-{o}"),
                    block_owner_deletion: *block,
                })
                .collect(),
            deleting: false,
            finalizers: vec![],
        }
    }

    pub fn deleting(mut i: Item, finalizers: &[&str]) -> Item {
        i.deleting = true;
        i.finalizers = finalizers.iter().map(|f| f.to_string()).collect();
        i
    }

    pub fn absent(uids: &[&str]) -> BTreeSet<String> {
        uids.iter().map(|u| u.to_string()).collect()
    }

    pub fn delete(name: &str, policy: Policy) -> Action {
        Action::Delete {
            key: key(name),
            uid: format!("u-{name}"),
            policy,
        }
    }

    pub fn unfinalize(name: &str, finalizer: &'static str) -> Action {
        Action::RemoveFinalizer {
            key: key(name),
            uid: format!("u-{name}"),
            finalizer,
        }
    }

    pub fn drop_refs(name: &str, owners: &[&str]) -> Action {
        Action::RemoveOwnerRefs {
            key: key(name),
            uid: format!("u-{name}"),
            owners: absent(owners),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn live_owner_keeps_its_dependents() {
        let items = vec![item("o", &[]), item("d", &[("o", false)])];
        assert_eq!(plan(&items, &absent(&[])), vec![]);
    }

    #[test]
    fn unverified_owner_means_no_decision() {
        let items = vec![item("d", &[("o", false)])];
        assert_eq!(plan(&items, &absent(&[])), vec![]);
    }

    #[test]
    fn dependents_of_a_gone_owner_are_deleted_in_the_background() {
        let items = vec![
            item("a", &[("o", false)]),
            item("b", &[("o", true)]),
            item("c", &[]),
        ];
        assert_eq!(
            plan(&items, &absent(&["u-o"])),
            vec![
                delete("a", Policy::Background),
                delete("b", Policy::Background)
            ]
        );
    }

    #[test]
    fn a_remaining_owner_keeps_the_dependent_and_the_dead_reference_goes() {
        let items = vec![item("p", &[]), item("d", &[("o", false), ("p", false)])];
        assert_eq!(
            plan(&items, &absent(&["u-o"])),
            vec![drop_refs("d", &["u-o"])]
        );
    }

    #[test]
    fn a_dependent_being_deleted_is_left_alone() {
        let items = vec![deleting(item("d", &[("o", false)]), &["x/hold"])];
        assert_eq!(plan(&items, &absent(&["u-o"])), vec![]);
    }

    #[test]
    fn the_dependents_own_finalizers_choose_the_policy() {
        let mut d = item("d", &[("o", false)]);
        d.finalizers = vec![ORPHAN.into()];
        assert_eq!(
            plan(&[d], &absent(&["u-o"])),
            vec![delete("d", Policy::Orphan)]
        );
    }

    #[test]
    fn foreground_owner_waits_for_blocking_dependents() {
        let items = vec![
            deleting(item("o", &[]), &[FOREGROUND]),
            item("a", &[("o", true)]),
            item("b", &[("o", false)]),
        ];
        assert_eq!(
            plan(&items, &absent(&[])),
            vec![
                delete("a", Policy::Background),
                delete("b", Policy::Background)
            ]
        );
        // `a` is terminating but still there: the owner still waits.
        let items = vec![
            deleting(item("o", &[]), &[FOREGROUND]),
            deleting(item("a", &[("o", true)]), &["x/hold"]),
        ];
        assert_eq!(plan(&items, &absent(&[])), vec![]);
        // Only non-blocking dependents left: the finalizer goes (they are still deleted).
        let items = vec![
            deleting(item("o", &[]), &[FOREGROUND]),
            item("b", &[("o", false)]),
        ];
        assert_eq!(
            plan(&items, &absent(&[])),
            vec![delete("b", Policy::Background), unfinalize("o", FOREGROUND)]
        );
    }

    #[test]
    fn foreground_cascades_through_dependents_that_have_dependents() {
        let items = vec![
            deleting(item("deploy", &[]), &[FOREGROUND]),
            item("rs", &[("deploy", true)]),
            item("pod", &[("rs", true)]),
        ];
        assert_eq!(
            plan(&items, &absent(&[])),
            vec![delete("rs", Policy::Foreground)]
        );
    }

    #[test]
    fn waiting_owner_reference_is_dropped_when_another_owner_remains() {
        let items = vec![
            deleting(item("o", &[]), &[FOREGROUND]),
            item("p", &[]),
            item("d", &[("o", true), ("p", false)]),
        ];
        assert_eq!(plan(&items, &absent(&[])), vec![drop_refs("d", &["u-o"])]);
    }

    #[test]
    fn orphaning_drops_the_references_then_the_finalizer() {
        let items = vec![
            deleting(item("o", &[]), &[ORPHAN]),
            item("a", &[("o", true)]),
            item("b", &[("o", false), ("p", false)]),
            item("p", &[]),
        ];
        assert_eq!(
            plan(&items, &absent(&[])),
            vec![drop_refs("a", &["u-o"]), drop_refs("b", &["u-o"])]
        );
        let items = vec![deleting(item("o", &[]), &[ORPHAN]), item("a", &[])];
        assert_eq!(plan(&items, &absent(&[])), vec![unfinalize("o", ORPHAN)]);
    }
}
