//! The collector's dependency graph (upstream's `GraphBuilder` and its `uidToNode`): every
//! watched object's ownership [`Item`], indexed by uid and by the owner uids its dependents
//! name, updated from informer events. Each change marks *dirty* only the objects whose
//! decision it can change, so a round decides for those instead of for every object:
//! - the object itself, when its ownership facts (uid, owners, deletion, finalizers) changed
//!   (a status-only update changes none and marks nothing);
//! - the objects naming it as an owner (their owner appeared, went, or started deleting);
//! - its owners (their `orphan`/`foregroundDeletion` finalizer waits on their dependents).
//!
//! [`Graph::mark_all`] (on a timer) makes the collector level-triggered again: a decision that
//! could not be made (an owner not yet verified, an action that failed) is retried then.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::plan::{self, Action, Item, ObjectKey, View};

/// The graph and the objects whose decisions are due.
#[derive(Debug, Default)]
pub struct Graph {
    items: HashMap<ObjectKey, Item>,
    by_uid: HashMap<String, ObjectKey>,
    /// Owner uid → the objects naming it (the owner may not be in the graph).
    dependents: HashMap<String, BTreeSet<ObjectKey>>,
    dirty: BTreeSet<ObjectKey>,
}

impl View for Graph {
    fn by_uid(&self, uid: &str) -> Option<&Item> {
        self.by_uid.get(uid).and_then(|k| self.items.get(k))
    }

    fn dependents(&self, uid: &str) -> Vec<&Item> {
        self.dependents
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|k| self.items.get(k))
            .collect()
    }
}

impl Graph {
    /// Adds or replaces the object at `item.key`.
    pub fn upsert(&mut self, item: Item) {
        if self.items.get(&item.key) == Some(&item) {
            return;
        }
        if let Some(old) = self.unlink(&item.key) {
            self.mark_around(&old);
        }
        self.by_uid.insert(item.uid.clone(), item.key.clone());
        for o in &item.owners {
            self.dependents
                .entry(o.uid.clone())
                .or_default()
                .insert(item.key.clone());
        }
        self.mark_around(&item);
        self.items.insert(item.key.clone(), item);
    }

    /// Removes the object at `key` (deleted, or gone from a relist).
    pub fn remove(&mut self, key: &ObjectKey) {
        if let Some(old) = self.unlink(key) {
            self.mark_around(&old);
            self.dirty.remove(key);
        }
    }

    /// Ends a relist of `resource`: its objects not in `seen` are removed.
    pub fn retain_listed(&mut self, resource: usize, seen: &HashSet<ObjectKey>) {
        let stale: Vec<ObjectKey> = self
            .items
            .keys()
            .filter(|k| k.resource == resource && !seen.contains(*k))
            .cloned()
            .collect();
        for key in stale {
            self.remove(&key);
        }
    }

    /// Marks every object dirty (the periodic full pass).
    pub fn mark_all(&mut self) {
        self.dirty = self.items.keys().cloned().collect();
    }

    /// Marks these objects dirty again (their decision failed or could not be made).
    pub fn mark(&mut self, keys: impl IntoIterator<Item = ObjectKey>) {
        self.dirty
            .extend(keys.into_iter().filter(|k| self.items.contains_key(k)));
    }

    /// Takes the objects whose decisions are due.
    pub fn take_dirty(&mut self) -> BTreeSet<ObjectKey> {
        std::mem::take(&mut self.dirty)
    }

    /// The owner uids that the objects at `keys` name and the graph does not hold: the shell
    /// verifies each with a live read (an informer may simply not have seen the owner yet)
    /// before [`Graph::decide`] takes those found gone.
    pub fn unseen_owners(&self, keys: &BTreeSet<ObjectKey>) -> BTreeSet<String> {
        keys.iter()
            .filter_map(|k| self.items.get(k))
            .flat_map(|i| i.owners.iter())
            .filter(|o| !self.by_uid.contains_key(&o.uid))
            .map(|o| o.uid.clone())
            .collect()
    }

    /// The actions the objects at `keys` call for ([`plan::decide`] over the graph).
    pub fn decide(&self, keys: &BTreeSet<ObjectKey>, absent: &BTreeSet<String>) -> Vec<Action> {
        plan::decide(self, keys.iter().filter_map(|k| self.items.get(k)), absent)
    }

    /// Takes the object at `key` out of the indexes; returns it.
    fn unlink(&mut self, key: &ObjectKey) -> Option<Item> {
        let old = self.items.remove(key)?;
        if self.by_uid.get(&old.uid) == Some(key) {
            self.by_uid.remove(&old.uid);
        }
        for o in &old.owners {
            if let Some(set) = self.dependents.get_mut(&o.uid) {
                set.remove(key);
                if set.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
        Some(old)
    }

    /// Marks `item`, its dependents and its owners dirty.
    fn mark_around(&mut self, item: &Item) {
        self.dirty.insert(item.key.clone());
        if let Some(deps) = self.dependents.get(&item.uid) {
            self.dirty.extend(deps.iter().cloned());
        }
        for o in &item.owners {
            if let Some(k) = self.by_uid.get(&o.uid) {
                self.dirty.insert(k.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::fixtures::{delete, deleting, item, key, unfinalize};
    use super::super::plan::{Policy, FOREGROUND, ORPHAN};
    use super::*;

    fn keys(names: &[&str]) -> BTreeSet<ObjectKey> {
        names.iter().map(|n| key(n)).collect()
    }

    fn uids(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| format!("u-{n}")).collect()
    }

    fn graph(items: &[Item]) -> Graph {
        let mut g = Graph::default();
        for i in items {
            g.upsert(i.clone());
        }
        g.take_dirty();
        g
    }

    #[test]
    fn an_unchanged_object_marks_nothing() {
        let mut g = graph(&[item("o", &[]), item("d", &[("o", false)])]);
        // A status update keeps every ownership fact: nothing to decide.
        g.upsert(item("d", &[("o", false)]));
        g.upsert(item("o", &[]));
        assert!(g.take_dirty().is_empty());
    }

    #[test]
    fn a_deleted_owner_marks_its_dependents_which_then_go() {
        let mut g = graph(&[
            item("o", &[]),
            item("a", &[("o", false)]),
            item("b", &[("o", true)]),
            item("c", &[]),
        ]);
        g.remove(&key("o"));
        let dirty = g.take_dirty();
        assert_eq!(dirty, keys(&["a", "b"]));
        assert_eq!(g.unseen_owners(&dirty), uids(&["o"]));
        assert_eq!(
            g.decide(&dirty, &uids(&["o"])),
            vec![
                delete("a", Policy::Background),
                delete("b", Policy::Background)
            ]
        );
    }

    #[test]
    fn a_dependent_leaving_marks_its_foreground_owner() {
        let o = deleting(item("o", &[]), &[FOREGROUND]);
        let mut g = graph(&[o, item("a", &[("o", true)])]);
        g.remove(&key("a"));
        let dirty = g.take_dirty();
        assert_eq!(dirty, keys(&["o"]));
        assert_eq!(
            g.decide(&dirty, &BTreeSet::new()),
            vec![unfinalize("o", FOREGROUND)]
        );
    }

    #[test]
    fn an_owner_starting_to_orphan_marks_itself_and_its_dependents() {
        let mut g = graph(&[item("o", &[]), item("a", &[("o", false)]), item("x", &[])]);
        g.upsert(deleting(item("o", &[]), &[ORPHAN]));
        assert_eq!(g.take_dirty(), keys(&["a", "o"]));
        // A relist that no longer holds `a`: its owner is marked again and may finish.
        g.retain_listed(0, &keys(&["o", "x"]).into_iter().collect());
        let dirty = g.take_dirty();
        assert_eq!(dirty, keys(&["o"]));
        assert_eq!(
            g.decide(&dirty, &BTreeSet::new()),
            vec![unfinalize("o", ORPHAN)]
        );
    }

    /// Deciding for every object of the graph gives exactly the snapshot planner's answer,
    /// over a family of graphs with owners present, gone, orphaning and in foreground.
    #[test]
    fn a_full_pass_matches_the_snapshot_plan() {
        let mut seen_kinds = BTreeSet::new();
        for seed in 0..200u32 {
            let mut items = Vec::new();
            for n in 0..12u32 {
                let r = seed.wrapping_mul(2_654_435_761).rotate_left(n) ^ n;
                let owners: Vec<(String, bool)> = (0..r % 3)
                    .map(|j| (format!("n{}", (r >> (4 + j)) % 14), (r >> j) & 1 == 1))
                    .collect();
                let owners: Vec<(&str, bool)> =
                    owners.iter().map(|(o, b)| (o.as_str(), *b)).collect();
                let mut i = item(&format!("n{n}"), &owners);
                match r % 5 {
                    0 => {
                        i.deleting = true;
                        i.finalizers = vec![FOREGROUND.into()];
                    }
                    1 => {
                        i.deleting = true;
                        i.finalizers = vec![ORPHAN.into()];
                    }
                    _ => {}
                }
                items.push(i);
            }
            let absent = uids(&["n12", "n13"]);
            let mut g = graph(&items);
            g.mark_all();
            let dirty = g.take_dirty();
            let actions = g.decide(&dirty, &absent);
            assert_eq!(actions, plan::plan(&items, &absent), "seed {seed}");
            assert_eq!(g.items.len(), items.len());
            seen_kinds.extend(actions.iter().map(|a| match a {
                Action::Delete { .. } => "delete",
                Action::RemoveOwnerRefs { .. } => "drop refs",
                Action::RemoveFinalizer { .. } => "finalizer",
            }));
        }
        // The family is rich enough to call for every kind of action.
        assert_eq!(seen_kinds.len(), 3, "{seen_kinds:?}");
    }
}
