//! The structured merge of server-side apply (an applied configuration into the live object)
//! and the removal of fields an applier dropped from its configuration.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, PathElement};
use super::walk::{item_element, Walker};
use crate::{ListKind, MapKind};

impl Walker<'_> {
    /// `config` merged into `live`: struct and granular maps merge field by field, keyed lists
    /// and sets merge by item, everything else (atomic lists and maps, scalars) is replaced.
    /// A `null` in `config` removes the field.
    pub(crate) fn merge(&self, live: &Value, config: &Value) -> Value {
        self.merge_at(live, config, &mut Vec::new())
    }

    fn merge_at(&self, live: &Value, config: &Value, names: &mut Vec<String>) -> Value {
        match (live, config) {
            (Value::Object(l), Value::Object(c))
                if names.is_empty() || self.field(names).map != MapKind::Atomic =>
            {
                let mut out = l.clone();
                for (k, cv) in c {
                    if cv.is_null() {
                        out.remove(k);
                        continue;
                    }
                    names.push(k.clone());
                    let merged = match l.get(k) {
                        Some(lv) => self.merge_at(lv, cv, names),
                        None => without_nulls(cv),
                    };
                    names.pop();
                    out.insert(k.clone(), merged);
                }
                Value::Object(out)
            }
            (Value::Array(l), Value::Array(c)) if self.field(names).list != ListKind::Atomic => {
                Value::Array(self.merge_list(l, c, names))
            }
            _ => without_nulls(config),
        }
    }

    /// Merges list items by their path element. Live-only items keep their place; items of
    /// the configuration come in its order (structured-merge-diff's list merge).
    fn merge_list(&self, live: &[Value], config: &[Value], names: &mut Vec<String>) -> Vec<Value> {
        let meta = self.field(names);
        let elements = |items: &[Value]| -> Vec<PathElement> {
            items
                .iter()
                .enumerate()
                .map(|(i, v)| item_element(&meta, v, i))
                .collect()
        };
        let (lpe, rpe) = (elements(live), elements(config));
        let in_config: HashSet<&PathElement> = rpe.iter().collect();
        let in_live: HashSet<&PathElement> = lpe.iter().collect();
        let mut shared = rpe.iter().filter(|e| in_live.contains(e));
        let mut next_shared = shared.next();
        let mut done: HashSet<&PathElement> = HashSet::new();
        let live_item = |e: &PathElement| lpe.iter().rposition(|x| x == e).map(|i| &live[i]);
        let merge_item = |e: &PathElement, c: &Value, names: &mut Vec<String>| match live_item(e) {
            Some(l) if matches!(meta.list, ListKind::Map { .. }) => self.merge_at(l, c, names),
            _ => without_nulls(c),
        };

        let mut out = Vec::with_capacity(live.len().max(config.len()));
        let (mut li, mut ri) = (0, 0);
        while li < live.len() || ri < config.len() {
            if li < live.len() && ri < config.len() {
                if lpe[li] == rpe[ri] {
                    done.insert(&rpe[ri]);
                    out.push(merge_item(&rpe[ri], &config[ri], names));
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                // A shared item further down the configuration: it is placed when reached there.
                if in_config.contains(&lpe[li]) && next_shared.is_some_and(|s| *s != lpe[li]) {
                    li += 1;
                    continue;
                }
            }
            if li < live.len() {
                if !in_config.contains(&lpe[li]) {
                    out.push(live[li].clone());
                    li += 1;
                    continue;
                }
                if done.contains(&lpe[li]) {
                    li += 1;
                    continue;
                }
            }
            if ri < config.len() {
                let e = &rpe[ri];
                done.insert(e);
                out.push(merge_item(e, &config[ri], names));
                ri += 1;
                if next_shared == Some(e) {
                    next_shared = shared.next();
                }
            }
        }
        out
    }

    /// Removes from `object` every path of `remove` that `keep` holds nothing at or below.
    /// A map left empty by a removal goes too, unless `keep` owns it.
    pub(crate) fn prune(&self, object: &mut Value, remove: &FieldSet, keep: &FieldSet) {
        // Shallowest first; what lies below a removed path went with it.
        let mut paths = remove.paths();
        paths.sort_by_key(Vec::len);
        let mut removed: Vec<&[PathElement]> = Vec::new();
        for path in &paths {
            if keep.contains_prefix(path) || removed.iter().any(|r| path.starts_with(r)) {
                continue;
            }
            self.remove_path(object, path, 0, &mut Vec::new(), keep);
            removed.push(path);
        }
    }

    /// Removes `path[depth..]` below `value` (which sits at `path[..depth]`).
    fn remove_path(
        &self,
        value: &mut Value,
        path: &[PathElement],
        depth: usize,
        names: &mut Vec<String>,
        keep: &FieldSet,
    ) {
        let Some(first) = path.get(depth) else {
            return;
        };
        let last = depth + 1 == path.len();
        match (first, value) {
            (PathElement::Field(f), Value::Object(m)) => {
                if last {
                    m.remove(f);
                } else if let Some(child) = m.get_mut(f) {
                    names.push(f.clone());
                    self.remove_path(child, path, depth + 1, names, keep);
                    names.pop();
                    let emptied = child.as_object().is_some_and(Map::is_empty);
                    if emptied && !keep.contains(&path[..=depth]) {
                        m.remove(f);
                    }
                }
            }
            (element, Value::Array(items)) => {
                let meta = self.field(names);
                let found = items
                    .iter()
                    .enumerate()
                    .position(|(i, item)| item_element(&meta, item, i) == *element);
                if let Some(i) = found {
                    if last {
                        items.remove(i);
                    } else {
                        self.remove_path(&mut items[i], path, depth + 1, names, keep);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `v` without `null` map values (an applied `null` means "not set").
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}
