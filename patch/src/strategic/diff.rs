//! Computing strategic merge patches (what kubectl does client side): the two-way patch from
//! an original to a modified object (`kubectl edit`, `kubectl set`), and the three-way patch
//! of client-side `kubectl apply` (last-applied configuration, new configuration, live
//! object), with `$setElementOrder`, `$deleteFromPrimitiveList`, `$retainKeys` and
//! `$patch: delete` directives as upstream writes them.
//!
//! # Deviations
//! The three-way patch is always computed with overwrite (kubectl apply's default): no
//! conflict check between the patch and changes made by others.

use serde_json::{Map, Value};

use super::list::{element_kind, key_of, type_name, ElementKind};
use super::{
    bad, Merger, Result, DELETE_FROM_PRIMITIVE_LIST, DIRECTIVE, RETAIN_KEYS, SET_ELEMENT_ORDER,
};
use crate::PatchMeta;

#[derive(Debug, Clone, Copy, Default)]
struct DiffOptions {
    /// Leave out what `original` has and `modified` has not.
    ignore_deletions: bool,
    /// Leave out what is new or changed in `modified`.
    ignore_changes: bool,
    /// Write `$setElementOrder` lists.
    set_element_order: bool,
    /// Write `$retainKeys` (the map is a `retainKeys` field).
    build_retain_keys: bool,
}

/// The strategic merge patch that turns `original` (`null`: nothing) into `modified`.
///
/// # Errors
/// When either is not an object, or a merging list has items without their merge key.
pub fn create_two_way_merge_patch(
    original: &Value,
    modified: &Value,
    meta: &dyn PatchMeta,
) -> Result<Value> {
    let empty = Value::Object(Map::new());
    let original = if original.is_null() { &empty } else { original };
    let (Value::Object(o), Value::Object(m)) = (original, modified) else {
        return Err(bad(super::BAD_JSON_DOC));
    };
    let opts = DiffOptions {
        set_element_order: true,
        ..DiffOptions::default()
    };
    Ok(Value::Object(Merger { meta }.diff_maps(
        &mut Vec::new(),
        o,
        m,
        opts,
    )?))
}

/// Client-side apply's patch: the changes from `current` to `modified` (without deletions)
/// plus the deletions from `original` (the last-applied configuration; `null` when there is
/// none) to `modified`. Fields others set on `current` and that `original` never had stay.
///
/// # Errors
/// As [`create_two_way_merge_patch`].
pub fn create_three_way_merge_patch(
    original: &Value,
    modified: &Value,
    current: &Value,
    meta: &dyn PatchMeta,
) -> Result<Value> {
    let empty = Map::new();
    let object = |v: &'_ Value| -> Result<Map<String, Value>> {
        match v {
            Value::Object(m) => Ok(m.clone()),
            Value::Null => Ok(empty.clone()),
            _ => Err(bad(super::BAD_JSON_DOC)),
        }
    };
    let (original, modified, current) = (object(original)?, object(modified)?, object(current)?);
    let merger = Merger { meta };
    let delta = merger.diff_maps(
        &mut Vec::new(),
        &current,
        &modified,
        DiffOptions {
            ignore_deletions: true,
            set_element_order: true,
            ..DiffOptions::default()
        },
    )?;
    let deletions = merger.diff_maps(
        &mut Vec::new(),
        &original,
        &modified,
        DiffOptions {
            ignore_changes: true,
            set_element_order: true,
            ..DiffOptions::default()
        },
    )?;
    Ok(Value::Object(merger.union_patches(
        &mut Vec::new(),
        deletions,
        delta,
    )?))
}

/// `fmt.Sprintf("%v")` of a JSON scalar, which upstream sorts and compares list items by.
fn go_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".to_string(),
        other => other.to_string(),
    }
}

impl Merger<'_> {
    fn diff_maps(
        &self,
        path: &mut Vec<String>,
        original: &Map<String, Value>,
        modified: &Map<String, Value>,
        opts: DiffOptions,
    ) -> Result<Map<String, Value>> {
        let mut patch = Map::new();
        let mut retain: Vec<String> = Vec::new();
        for (k, mv) in modified {
            if opts.build_retain_keys && !mv.is_null() {
                retain.push(k.clone());
            }
            let Some(ov) = original.get(k) else {
                if !opts.ignore_changes {
                    patch.insert(k.clone(), mv.clone());
                }
                continue;
            };
            if type_name(ov) != type_name(mv) {
                if !opts.ignore_changes {
                    patch.insert(k.clone(), mv.clone());
                }
                continue;
            }
            path.push(k.clone());
            let outcome = self.diff_field(path, k, ov, mv, opts, &mut patch);
            path.pop();
            outcome?;
        }
        if !opts.ignore_deletions {
            for k in original.keys() {
                if !modified.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
        }
        let clears_fields = original
            .iter()
            .any(|(k, v)| !v.is_null() && !modified.contains_key(k));
        if !retain.is_empty() && (!patch.is_empty() || clears_fields) {
            retain.sort();
            patch.insert(
                RETAIN_KEYS.to_string(),
                Value::Array(retain.into_iter().map(Value::String).collect()),
            );
        }
        Ok(patch)
    }

    fn diff_field(
        &self,
        path: &mut Vec<String>,
        k: &str,
        ov: &Value,
        mv: &Value,
        opts: DiffOptions,
        patch: &mut Map<String, Value>,
    ) -> Result<()> {
        let meta = self.field(path);
        let nested = DiffOptions {
            build_retain_keys: meta.retain_keys,
            ..opts
        };
        match (ov, mv) {
            (Value::Object(o), Value::Object(m)) => {
                let p = self.diff_maps(path, o, m, nested)?;
                if !p.is_empty() {
                    patch.insert(k.to_string(), Value::Object(p));
                }
            }
            (Value::Array(o), Value::Array(m)) if meta.merges_list() => {
                let (add, delete, order) = self.diff_lists(path, o, m, meta.merge_key(), nested)?;
                if !add.is_empty() {
                    patch.insert(k.to_string(), Value::Array(add));
                }
                if !delete.is_empty() {
                    patch.insert(
                        format!("{DELETE_FROM_PRIMITIVE_LIST}/{k}"),
                        Value::Array(delete),
                    );
                }
                if !order.is_empty() {
                    patch.insert(format!("{SET_ELEMENT_ORDER}/{k}"), Value::Array(order));
                }
            }
            _ => {
                if !opts.ignore_changes && ov != mv {
                    patch.insert(k.to_string(), mv.clone());
                }
            }
        }
        Ok(())
    }

    /// The patch list, the parallel deletion list (scalars) and the `$setElementOrder` list.
    #[allow(clippy::type_complexity)]
    fn diff_lists(
        &self,
        path: &mut Vec<String>,
        original: &[Value],
        modified: &[Value],
        merge_key: Option<&str>,
        opts: DiffOptions,
    ) -> Result<(Vec<Value>, Vec<Value>, Vec<Value>)> {
        if original.is_empty() {
            if modified.is_empty() || opts.ignore_changes {
                return Ok((Vec::new(), Vec::new(), Vec::new()));
            }
            return Ok((modified.to_vec(), Vec::new(), Vec::new()));
        }
        match element_kind(&[original, modified])? {
            Some(ElementKind::Object) => {
                let key = merge_key.ok_or_else(|| {
                    bad(format!(
                        "cannot merge lists without merge key for {}",
                        path.join(".")
                    ))
                })?;
                let patch = self.diff_lists_of_maps(path, original, modified, key, opts)?;
                let order_same = original.len() == modified.len()
                    && original
                        .iter()
                        .zip(modified)
                        .all(|(o, m)| o.get(key) == m.get(key));
                let changed = !patch.is_empty();
                let order = if opts.set_element_order
                    && ((!opts.ignore_changes && (changed || !order_same))
                        || (!opts.ignore_deletions && changed))
                {
                    let mut order = Vec::with_capacity(modified.len());
                    for m in modified {
                        let mut item = Map::new();
                        item.insert(key.to_string(), key_of(m, key)?.clone());
                        order.push(Value::Object(item));
                    }
                    order
                } else {
                    Vec::new()
                };
                Ok((patch, Vec::new(), order))
            }
            _ => {
                let known = |list: &[Value], v: &Value| {
                    let s = go_string(v);
                    list.iter().any(|x| go_string(x) == s)
                };
                let add: Vec<Value> = if opts.ignore_changes {
                    Vec::new()
                } else {
                    modified
                        .iter()
                        .filter(|m| !known(original, m))
                        .cloned()
                        .collect()
                };
                let mut delete: Vec<Value> = Vec::new();
                if !opts.ignore_deletions {
                    let mut gone: Vec<&Value> =
                        original.iter().filter(|o| !known(modified, o)).collect();
                    gone.sort_by_key(|v| go_string(v));
                    for v in gone {
                        if !known(&delete, v) {
                            delete.push(v.clone());
                        }
                    }
                }
                let order = if opts.set_element_order
                    && ((!opts.ignore_deletions && !delete.is_empty())
                        || (!opts.ignore_changes && original != modified))
                {
                    modified.to_vec()
                } else {
                    Vec::new()
                };
                Ok((add, delete, order))
            }
        }
    }

    /// Changed and added items in `modified`'s order, then `$patch: delete` items for removed
    /// ones (in merge key order).
    fn diff_lists_of_maps(
        &self,
        path: &mut Vec<String>,
        original: &[Value],
        modified: &[Value],
        key: &str,
        opts: DiffOptions,
    ) -> Result<Vec<Value>> {
        let find = |list: &'_ [Value], v: &Value| -> Result<Option<usize>> {
            let s = go_string(v);
            for (i, item) in list.iter().enumerate() {
                if go_string(key_of(item, key)?) == s {
                    return Ok(Some(i));
                }
            }
            Ok(None)
        };
        let mut patch = Vec::new();
        for m in modified {
            let value = key_of(m, key)?;
            match find(original, value)? {
                Some(i) => {
                    let (Value::Object(o), Value::Object(mm)) = (&original[i], m) else {
                        unreachable!("key_of accepted only objects");
                    };
                    let mut p = self.diff_maps(path, o, mm, opts)?;
                    if !p.is_empty() {
                        p.insert(key.to_string(), value.clone());
                        patch.push(Value::Object(p));
                    }
                }
                None if !opts.ignore_changes => patch.push(m.clone()),
                None => {}
            }
        }
        if !opts.ignore_deletions {
            let mut gone = Vec::new();
            for o in original {
                let value = key_of(o, key)?;
                if find(modified, value)?.is_none() {
                    gone.push(value.clone());
                }
            }
            gone.sort_by_key(go_string);
            for value in gone {
                let mut item = Map::new();
                item.insert(key.to_string(), value);
                item.insert(DIRECTIVE.to_string(), Value::from("delete"));
                patch.push(Value::Object(item));
            }
        }
        Ok(patch)
    }

    /// Two patches as one (the deletions of a three-way patch and its changes): maps are
    /// joined recursively, keyed list items with the same key merged, other values taken from
    /// `later`.
    fn union_patches(
        &self,
        path: &mut Vec<String>,
        mut earlier: Map<String, Value>,
        later: Map<String, Value>,
    ) -> Result<Map<String, Value>> {
        for (k, lv) in later {
            let Some(ev) = earlier.remove(&k) else {
                earlier.insert(k, lv);
                continue;
            };
            let joined = match (ev, lv) {
                (Value::Object(e), Value::Object(l)) => {
                    path.push(k.clone());
                    let joined = self.union_patches(path, e, l);
                    path.pop();
                    Value::Object(joined?)
                }
                (Value::Array(e), Value::Array(l)) if !k.starts_with('$') => {
                    path.push(k.clone());
                    let joined = self.union_lists(path, e, l);
                    path.pop();
                    Value::Array(joined?)
                }
                (_, lv) => lv,
            };
            earlier.insert(k, joined);
        }
        // Joined keyed lists follow their `$setElementOrder`; deletions come last.
        let ordered: Vec<(String, Vec<Value>)> = earlier
            .iter()
            .filter_map(|(k, v)| {
                let field = k.strip_prefix(SET_ELEMENT_ORDER)?.strip_prefix('/')?;
                Some((field.to_string(), v.as_array()?.clone()))
            })
            .collect();
        for (field, order) in ordered {
            path.push(field.clone());
            let meta = self.field(path);
            path.pop();
            if let (Some(key), Some(Value::Array(list))) =
                (meta.merge_key(), earlier.get_mut(&field))
            {
                let rank = |item: &Value| {
                    order
                        .iter()
                        .position(|o| item.get(key).is_some() && o.get(key) == item.get(key))
                        .unwrap_or(usize::MAX)
                };
                list.sort_by_key(rank);
            }
        }
        Ok(earlier)
    }

    fn union_lists(
        &self,
        path: &mut Vec<String>,
        earlier: Vec<Value>,
        later: Vec<Value>,
    ) -> Result<Vec<Value>> {
        let meta = self.field(path);
        let Some(key) = meta.merge_key() else {
            return Ok(later);
        };
        let mut rest: Vec<Option<Value>> = earlier.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(rest.len() + later.len());
        for item in later {
            let matching = rest.iter().position(|e| {
                e.as_ref()
                    .is_some_and(|e| e.get(key).is_some() && e.get(key) == item.get(key))
            });
            match (matching.and_then(|i| rest[i].take()), item) {
                (Some(Value::Object(e)), Value::Object(l)) => {
                    out.push(Value::Object(self.union_patches(path, e, l)?));
                }
                (_, item) => out.push(item),
            }
        }
        out.extend(rest.into_iter().flatten());
        Ok(out)
    }
}
