//! A subscriber's changes narrowed to the part of each object a reader looks at (client-go's
//! `UpdateFunc` comparing the old and new object): an object passes when its projection is
//! new (first sight), differs from the last one passed, or when it is deleted. A controller
//! that reads only a node's readiness and address is then not woken by every status write of
//! every node, and re-reading all nodes per wake-up stops being O(nodes²) under load.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;

use super::Cached;

/// The last projection passed per object; a pure filter over a subscription's events.
pub struct ChangeFilter<K: Cached, P, F> {
    project: F,
    last: HashMap<ObjectRef<K>, P>,
    /// The objects of a complete list in progress (`Init` … `InitDone`).
    listing: Option<HashSet<ObjectRef<K>>>,
}

impl<K, P, F> ChangeFilter<K, P, F>
where
    K: Cached,
    P: PartialEq,
    F: FnMut(&K) -> P,
{
    /// A filter that remembers nothing yet.
    pub fn new(project: F) -> Self {
        ChangeFilter {
            project,
            last: HashMap::new(),
            listing: None,
        }
    }

    /// The object `event` touches, if the reader must hear of it.
    pub fn admit(&mut self, event: Event<Arc<K>>) -> Option<Arc<K>> {
        match event {
            Event::Init => {
                self.listing = Some(HashSet::new());
                None
            }
            Event::InitApply(o) => {
                let key = ObjectRef::from_obj(o.as_ref());
                if let Some(listed) = &mut self.listing {
                    listed.insert(key.clone());
                }
                self.changed(key, o)
            }
            Event::Apply(o) => self.changed(ObjectRef::from_obj(o.as_ref()), o),
            Event::Delete(o) => {
                self.last.remove(&ObjectRef::from_obj(o.as_ref()));
                Some(o)
            }
            Event::InitDone => {
                // The informer announces what a relist lacks as deletions first; forget any
                // entry it did not, so memory follows the cache.
                if let Some(listed) = self.listing.take() {
                    self.last.retain(|k, _| listed.contains(k));
                }
                None
            }
        }
    }

    fn changed(&mut self, key: ObjectRef<K>, o: Arc<K>) -> Option<Arc<K>> {
        let now = (self.project)(o.as_ref());
        match self.last.get(&key) {
            Some(before) if *before == now => None,
            _ => {
                self.last.insert(key, now);
                Some(o)
            }
        }
    }

    /// How many objects the filter remembers.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether the filter remembers no object.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn cm(name: &str, watched: &str, other: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            data: Some(
                [
                    ("watched".to_string(), watched.to_string()),
                    ("other".to_string(), other.to_string()),
                ]
                .into(),
            ),
            ..ConfigMap::default()
        })
    }

    fn watched(c: &ConfigMap) -> Option<String> {
        c.data.as_ref()?.get("watched").cloned()
    }

    type Filter = ChangeFilter<ConfigMap, Option<String>, fn(&ConfigMap) -> Option<String>>;

    /// The names `events` let through.
    fn passed(f: &mut Filter, events: Vec<Event<Arc<ConfigMap>>>) -> Vec<String> {
        events
            .into_iter()
            .filter_map(|e| f.admit(e))
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn passes_first_sight_changes_and_deletions_only() {
        let mut f: Filter = ChangeFilter::new(watched);
        let got = passed(
            &mut f,
            vec![
                Event::Apply(cm("a", "1", "x")),
                Event::Apply(cm("a", "1", "y")), // other part only: held back
                Event::Apply(cm("b", "1", "x")), // another object: first sight
                Event::Apply(cm("a", "2", "y")), // the watched part changed
                Event::Apply(cm("a", "2", "z")),
                Event::Delete(cm("a", "2", "z")),
                Event::Apply(cm("a", "2", "z")), // back after deletion: new again
            ],
        );
        assert_eq!(got, ["a", "b", "a", "a", "a"]);
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn a_relist_passes_only_what_changed_and_forgets_what_it_lacks() {
        let mut f: Filter = ChangeFilter::new(watched);
        let first = passed(
            &mut f,
            vec![
                Event::Init,
                Event::InitApply(cm("a", "1", "x")),
                Event::InitApply(cm("b", "1", "x")),
                Event::InitDone,
            ],
        );
        assert_eq!(first, ["a", "b"]);
        let relist = passed(
            &mut f,
            vec![
                Event::Init,
                Event::InitApply(cm("a", "1", "changed")),
                Event::InitApply(cm("c", "1", "x")),
                Event::InitDone,
            ],
        );
        assert_eq!(relist, ["c"], "a is unchanged where it is watched");
        assert_eq!(f.len(), 2, "b, absent from the relist, is forgotten");
        assert_eq!(passed(&mut f, vec![Event::Apply(cm("b", "1", "x"))]), ["b"]);
    }
}
