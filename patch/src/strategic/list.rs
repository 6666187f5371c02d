//! Strategic merge of lists: by merge key, as scalar sets, parallel deletion lists,
//! `$patch` list items, `$setElementOrder`, and the resulting order.

use serde_json::{Map, Value};

use super::{
    bad, Merger, Result, StrategicMergeError, BAD_SET_ELEMENT_ORDER, DIRECTIVE, SET_ELEMENT_ORDER,
};

/// Element kind of a list (all elements must have the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ElementKind {
    Object,
    Scalar,
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The common element kind of the lists; `None` when all are empty.
pub(super) fn element_kind(lists: &[&[Value]]) -> Result<Option<ElementKind>> {
    let mut first: Option<&Value> = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        if v.is_array() {
            return Err(StrategicMergeError::Invalid(
                "lists of lists are not supported".to_string(),
            ));
        }
        match first {
            None => first = Some(v),
            Some(f) if type_name(f) != type_name(v) => {
                return Err(bad(format!(
                    "list element types are not identical: {f} and {v}"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(first.map(|f| {
        if f.is_object() {
            ElementKind::Object
        } else {
            ElementKind::Scalar
        }
    }))
}

fn no_merge_key(item: &Value, key: &str) -> StrategicMergeError {
    bad(format!(
        "map: {item} does not contain declared merge key: {key}"
    ))
}

/// The merge key value of a list item.
pub(super) fn key_of<'v>(item: &'v Value, key: &str) -> Result<&'v Value> {
    match item {
        Value::Object(m) => m.get(key).ok_or_else(|| no_merge_key(item, key)),
        other => Err(bad(format!("expected a map, but received {other}"))),
    }
}

/// Whether two items are the same element of a list (same merge key value, or equal scalars).
fn same_item(a: &Value, b: &Value, key: Option<&str>) -> bool {
    match key {
        Some(key) => a.get(key).is_some() && a.get(key) == b.get(key),
        None => a == b,
    }
}

fn position(order: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    order.iter().position(|o| same_item(o, item, key))
}

impl Merger<'_> {
    /// Merges a patch list into an original list whose field merges (set or keyed).
    pub(crate) fn merge_list(
        &self,
        path: &mut Vec<String>,
        original: Vec<Value>,
        patch: Vec<Value>,
        merge_key: Option<&str>,
        delete_list: bool,
    ) -> Result<Vec<Value>> {
        let Some(kind) = element_kind(&[&original, &patch])? else {
            return Ok(original);
        };
        let (server_order, patch, merged, key) = match kind {
            ElementKind::Scalar => {
                if delete_list {
                    return Ok(original
                        .into_iter()
                        .filter(|v| !patch.contains(v))
                        .collect());
                }
                let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
                for v in original.iter().chain(patch.iter()) {
                    if !merged.contains(v) {
                        merged.push(v.clone());
                    }
                }
                (original, patch, merged, None)
            }
            ElementKind::Object => {
                let Some(key) = merge_key else {
                    return Err(bad(format!(
                        "cannot merge lists without merge key for {}",
                        path.join(".")
                    )));
                };
                let (original, patch) = self.special_elements(path, original, patch, key)?;
                let merged = self.merge_by_key(path, original.clone(), &patch, key)?;
                (original, patch, merged, Some(key))
            }
        };
        let (patch_items, server_only) = partition(merged, &patch, key)?;
        normalize_order(patch_items, server_only, &patch, &server_order, key)
    }

    /// Applies the `$patch` items of a keyed patch list: `delete` removes the live items with
    /// that key, `replace` makes the patch the whole list. Returns the original and the patch
    /// without directive items.
    fn special_elements(
        &self,
        path: &mut Vec<String>,
        mut original: Vec<Value>,
        patch: Vec<Value>,
        key: &str,
    ) -> Result<(Vec<Value>, Vec<Value>)> {
        let mut plain = Vec::with_capacity(patch.len());
        let mut replace = false;
        for item in patch {
            let Some(directive) = item.get(DIRECTIVE) else {
                plain.push(item);
                continue;
            };
            match directive.as_str() {
                Some("delete") => {
                    // element_kind made sure every live item is an object.
                    let value = key_of(&item, key)?;
                    original.retain(|o| o.get(key) != Some(value));
                }
                Some("replace") => replace = true,
                Some("merge") => {
                    return Err(bad("merging lists cannot yet be specified in the patch"))
                }
                _ => {
                    return Err(bad(format!(
                        "unknown patch type: {directive} in map: {item}"
                    )))
                }
            }
        }
        if replace {
            let items = plain
                .into_iter()
                .map(|item| self.new_value(path, item))
                .collect();
            return Ok((items, Vec::new()));
        }
        Ok((original, plain))
    }

    /// Merges each patch item into the live item with the same key, or appends it.
    fn merge_by_key(
        &self,
        path: &mut Vec<String>,
        mut original: Vec<Value>,
        patch: &[Value],
        key: &str,
    ) -> Result<Vec<Value>> {
        for item in patch {
            let value = key_of(item, key)?;
            let Value::Object(item_map) = item else {
                unreachable!("key_of accepted a non-object");
            };
            let mut found = None;
            for (i, o) in original.iter().enumerate() {
                let Value::Object(o) = o else {
                    return Err(bad(format!("value for key {i} is not a map.")));
                };
                if o.get(key) == Some(value) {
                    found = Some(i);
                    break;
                }
            }
            match found {
                Some(i) => {
                    let Value::Object(o) = std::mem::take(&mut original[i]) else {
                        unreachable!("checked above");
                    };
                    let merged = self.merge_map(path, Some(o), item_map.clone())?;
                    original[i] = Value::Object(merged);
                }
                None => original.push(self.new_value(path, item.clone())),
            }
        }
        Ok(original)
    }

    /// `$setElementOrder/<list>`: merges `<list>` (when patched) and orders the result by the
    /// directive, then by the live order for server-only items.
    pub(crate) fn set_element_order(
        &self,
        path: &mut Vec<String>,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
    ) -> Result<()> {
        let keys: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
            .cloned()
            .collect();
        for directive_key in keys {
            let Some(Value::Array(order)) = patch.remove(&directive_key) else {
                return Err(bad(BAD_SET_ELEMENT_ORDER));
            };
            let field = match directive_key.split_once('/') {
                Some((SET_ELEMENT_ORDER, field)) => field.to_string(),
                _ => return Err(bad(BAD_SET_ELEMENT_ORDER)),
            };
            let live = match original.get_mut(&field) {
                Some(Value::Array(l)) => Some(std::mem::take(l)),
                Some(other) => return Err(bad(format!("expected a list, but received {other}"))),
                None => None,
            };
            let patched = match patch.remove(&field) {
                Some(Value::Array(l)) => Some(l),
                Some(other) => return Err(bad(format!("expected a list, but received {other}"))),
                None => None,
            };
            path.push(field.clone());
            let result = self.ordered_list(path, live, patched, &order);
            path.pop();
            if let Some(list) = result? {
                original.insert(field, Value::Array(list));
            }
        }
        Ok(())
    }

    fn ordered_list(
        &self,
        path: &mut Vec<String>,
        live: Option<Vec<Value>>,
        patched: Option<Vec<Value>>,
        order: &[Value],
    ) -> Result<Option<Vec<Value>>> {
        let meta = self.field(path);
        let key = meta.merge_key();
        if let Some(p) = &patched {
            validate_against_order(p, order, key)?;
        }
        let server_order = live.clone().unwrap_or_default();
        let merged = match (live, patched) {
            (None, None) => return Ok(None),
            (Some(l), None) => l,
            (None, Some(p)) => match self.new_value(path, Value::Array(p)) {
                Value::Array(p) => p,
                _ => unreachable!("a list stays a list"),
            },
            (Some(l), Some(p)) if meta.merges_list() => self.merge_list(path, l, p, key, false)?,
            (Some(_), Some(p)) => match self.new_value(path, Value::Array(p)) {
                Value::Array(p) => p,
                _ => unreachable!("a list stays a list"),
            },
        };
        let key = key.filter(|_| merged.iter().all(Value::is_object));
        let (patch_items, server_only) = partition(merged, order, key)?;
        normalize_order(patch_items, server_only, order, &server_order, key).map(Some)
    }
}

/// The patch list must be in the relative order of `$setElementOrder` (`$patch: delete` items
/// aside) and contain no item it does not name.
fn validate_against_order(patch: &[Value], order: &[Value], key: Option<&str>) -> Result<()> {
    if patch.is_empty() || order.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = patch
        .iter()
        .filter(|v| key.is_none() || v.get(DIRECTIVE).and_then(Value::as_str) != Some("delete"))
        .collect();
    let (mut p, mut o) = (0, 0);
    while p < items.len() && o < order.len() {
        if items[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        let equal = match key {
            Some(key) => key_of(items[p], key)? == key_of(&order[o], key)?,
            None => items[p] == &order[o],
        };
        if equal {
            p += 1;
        }
        o += 1;
    }
    if p < items.len() {
        return Err(bad(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            Value::Array(patch.to_vec()),
            Value::Array(order.to_vec())
        )));
    }
    Ok(())
}

/// Splits merged items into those present in `by` and the others (server-only).
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    key: Option<&str>,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut present = Vec::with_capacity(merged.len());
    let mut server_only = Vec::with_capacity(merged.len());
    for item in merged {
        if let Some(key) = key {
            key_of(&item, key)?;
        }
        if position(by, &item, key).is_some() {
            present.push(item);
        } else {
            server_only.push(item);
        }
    }
    Ok((present, server_only))
}

/// Sorts patch items by the patch order and server-only items by the live order, then
/// interleaves them: a server-only item goes before a patch item when both are live and it
/// came first there; otherwise the patch item goes first.
fn normalize_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Result<Vec<Value>> {
    if let Some(key) = key {
        for item in patch_items.iter().chain(server_only.iter()) {
            key_of(item, key)?;
        }
    }
    let rank = |order: &[Value], item: &Value| position(order, item, key).unwrap_or(usize::MAX);
    patch_items.sort_by_key(|item| rank(patch_order, item));
    server_only.sort_by_key(|item| rank(server_order, item));

    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                match (
                    position(server_order, l, key),
                    position(server_order, r, key),
                ) {
                    (Some(li), Some(ri)) => li < ri,
                    _ => false,
                }
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}
