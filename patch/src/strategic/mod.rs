//! Kubernetes strategic merge patch (`application/strategic-merge-patch+json`), the semantics
//! of `k8s.io/apimachinery/pkg/util/strategicpatch` as kube-apiserver applies it (parallel
//! deletion lists merged, unmatched nulls ignored).
//!
//! - Maps merge recursively; `null` deletes a key.
//! - Lists whose field merges ([`PatchMeta`]) merge by their merge key (lists of objects) or as
//!   sets (lists of scalars, e.g. `finalizers`); all other lists are replaced.
//! - Directives: `$patch: replace | delete` in a map, `$patch: delete | replace` as a list item,
//!   `$setElementOrder/<list>`, `$retainKeys`, `$deleteFromPrimitiveList/<list>`.
//! - Order of merged lists: items named in the patch (or `$setElementOrder`) in that order,
//!   interleaved with the server-only items in their live order.
//!
//! # Deviations
//! Upstream copies a patch value whose key is missing from the live object as is, directives
//! and nulls included, and relies on decoding into Go structs to drop them; here such a value
//! is merged into an empty value so that no directive or null reaches storage (when that merge
//! fails, the value is taken as is, like upstream). Errors that upstream leaves untyped (and
//! kube-apiserver answers with 500) are 400 here.

mod diff;
mod list;

pub use diff::{create_three_way_merge_patch, create_two_way_merge_patch};

use serde_json::{Map, Value};

use super::{PatchError, PatchMeta};

pub(crate) const DIRECTIVE: &str = "$patch";
pub(crate) const RETAIN_KEYS: &str = "$retainKeys";
pub(crate) const SET_ELEMENT_ORDER: &str = "$setElementOrder";
pub(crate) const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// Why a strategic merge patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrategicMergeError {
    /// The patch is malformed (kube-apiserver: 400 BadRequest).
    #[error("{0}")]
    BadPatch(String),
    /// The patch does not fit the object (kube-apiserver: 422), e.g. lists of lists.
    #[error("{0}")]
    Invalid(String),
}

impl From<StrategicMergeError> for PatchError {
    fn from(e: StrategicMergeError) -> PatchError {
        match e {
            StrategicMergeError::BadPatch(m) => PatchError::BadRequest(m),
            StrategicMergeError::Invalid(m) => PatchError::Invalid(m),
        }
    }
}

pub(crate) type Result<T, E = StrategicMergeError> = std::result::Result<T, E>;

fn bad(msg: impl Into<String>) -> StrategicMergeError {
    StrategicMergeError::BadPatch(msg.into())
}

const BAD_JSON_DOC: &str = "invalid JSON document";
const BAD_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const BAD_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const BAD_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";

/// Applies the strategic merge patch `patch` to `original`.
///
/// # Errors
/// [`StrategicMergeError`]; `original` is left untouched.
pub fn strategic_merge(
    original: &Value,
    patch: &Value,
    meta: &dyn PatchMeta,
) -> Result<Value, StrategicMergeError> {
    let Value::Object(patch) = patch else {
        return Err(bad(BAD_JSON_DOC));
    };
    let original = match original {
        Value::Object(m) => Some(m.clone()),
        _ => None,
    };
    let merged = Merger { meta }.merge_map(&mut Vec::new(), original, patch.clone())?;
    Ok(Value::Object(merged))
}

pub(crate) struct Merger<'a> {
    pub(crate) meta: &'a dyn PatchMeta,
}

impl Merger<'_> {
    fn field(&self, path: &[String]) -> super::FieldMeta {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        self.meta.field(&path)
    }

    /// Merges `patch` into `original` (absent: an empty map) at `path`.
    pub(crate) fn merge_map(
        &self,
        path: &mut Vec<String>,
        original: Option<Map<String, Value>>,
        mut patch: Map<String, Value>,
    ) -> Result<Map<String, Value>> {
        if let Some(directive) = patch.remove(DIRECTIVE) {
            return match directive.as_str() {
                Some("replace") => self.merge_map(path, None, patch),
                Some("delete") => Ok(Map::new()),
                _ => Err(bad(format!(
                    "unknown patch type: {directive} in map: {}",
                    Value::Object(patch)
                ))),
            };
        }
        let mut original = original.unwrap_or_default();
        retain_keys(&mut original, &mut patch)?;
        self.set_element_order(path, &mut original, &mut patch)?;

        for (k, v) in patch {
            let (key, delete_list) = if k.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
                match k.split_once('/') {
                    Some((DELETE_FROM_PRIMITIVE_LIST, rest)) => (rest.to_string(), true),
                    _ => return Err(bad(BAD_PRIMITIVE_LIST)),
                }
            } else if k.starts_with('$') {
                // Not a field of any Kubernetes type; dropped like decoding into Go structs does.
                continue;
            } else {
                (k, false)
            };
            if v.is_null() {
                original.remove(&key);
                continue;
            }
            if delete_list && !v.is_array() {
                return Err(bad(BAD_PRIMITIVE_LIST));
            }
            path.push(key.clone());
            let outcome = self.merge_field(path, original.get_mut(&key), v, delete_list);
            path.pop();
            match outcome? {
                FieldOutcome::Keep => {}
                FieldOutcome::Set(value) => {
                    original.insert(key, value);
                }
            }
        }
        Ok(original)
    }

    fn merge_field(
        &self,
        path: &mut Vec<String>,
        original: Option<&mut Value>,
        patch: Value,
        delete_list: bool,
    ) -> Result<FieldOutcome> {
        let Some(original) = original else {
            if delete_list {
                return Ok(FieldOutcome::Keep);
            }
            return Ok(FieldOutcome::Set(self.new_value(path, patch)));
        };
        match (original, patch) {
            (Value::Object(o), Value::Object(p)) => {
                let merged = self.merge_map(path, Some(std::mem::take(o)), p)?;
                Ok(FieldOutcome::Set(Value::Object(merged)))
            }
            (Value::Array(o), Value::Array(p)) => {
                let meta = self.field(path);
                // A parallel deletion list deletes from any list of scalars.
                if meta.merges_list() || delete_list {
                    let o = std::mem::take(o);
                    let merged = self.merge_list(path, o, p, meta.merge_key(), delete_list)?;
                    Ok(FieldOutcome::Set(Value::Array(merged)))
                } else {
                    Ok(FieldOutcome::Set(self.new_value(path, Value::Array(p))))
                }
            }
            (_, p) if !delete_list => Ok(FieldOutcome::Set(self.new_value(path, p))),
            _ => Ok(FieldOutcome::Keep),
        }
    }

    /// A patch value for a field the live object does not have: the patch merged into
    /// nothing, so that its directives are applied and its nulls dropped.
    pub(crate) fn new_value(&self, path: &mut Vec<String>, patch: Value) -> Value {
        match patch {
            Value::Object(p) => match self.merge_map(path, None, p.clone()) {
                Ok(m) => Value::Object(m),
                Err(_) => Value::Object(p),
            },
            Value::Array(p) => {
                let meta = self.field(path);
                if !meta.merges_list() {
                    return Value::Array(p);
                }
                match self.merge_list(path, Vec::new(), p.clone(), meta.merge_key(), false) {
                    Ok(l) => Value::Array(l),
                    Err(_) => Value::Array(p),
                }
            }
            other => other,
        }
    }
}

enum FieldOutcome {
    Keep,
    Set(Value),
}

/// `$retainKeys`: keys of `original` not listed are cleared; every non-null patch key must be
/// listed.
fn retain_keys(original: &mut Map<String, Value>, patch: &mut Map<String, Value>) -> Result<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(bad(BAD_RETAIN_KEYS));
    };
    let listed = |k: &str| retain.iter().any(|r| r.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !listed(k) {
            return Err(bad(BAD_RETAIN_KEYS));
        }
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod tests_diff;
#[cfg(test)]
mod tests_lists;
#[cfg(test)]
mod tests_upstream;
