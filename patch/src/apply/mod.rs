//! Server-side apply (`application/apply-patch+yaml`) and the field tracking every write does.
//!
//! Each field manager owns a set of fields ([`fieldset::FieldSet`]), recorded in
//! `metadata.managedFields` with its operation (`Apply` or `Update`), API version and time.
//!
//! # Guarantees
//! - [`apply`] merges the applied configuration into the live object; it fails with
//!   [`Conflicts`] (409) when that changes a field another manager owns, unless `force`, which
//!   takes the field over. Fields the applier set before and no longer sets are removed from
//!   the object unless another manager owns them.
//! - [`track_update`] gives the writer of an update the fields it changed, taking them from
//!   other managers (updates never conflict), and drops removed fields from every manager.
//!
//! - Lists merge as structured-merge-diff merges them: live-only items keep their place,
//!   applied items come in the applied order. A map a removal leaves empty is removed too.
//!
//! # Deviations
//! - Field sets are computed from JSON, not Go structs: a new struct reached by an update is
//!   not itself recorded (no `.`), only its fields, and a new merging list is (upstream: only
//!   `omitempty` ones, e.g. `ports` but not `containers`).
//! - Fields a write does not own follow [`Scope`]: kube-apiserver takes them from each
//!   resource's strategy (its "reset fields"), here they are `status` or everything but
//!   `status` and `metadata`.

pub mod fieldset;
mod managed;
mod merge;
mod walk;

use serde_json::{json, Value};

pub use managed::Operation;

use super::{PatchError, PatchMeta};
use fieldset::{path_string, FieldSet};
use managed::Entry;
use walk::Walker;

/// Which fields of an object a write may own (kube-apiserver: the fields the resource's
/// strategy resets on that endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// A resource without a `/status` subresource: every field.
    #[default]
    Whole,
    /// The main endpoint of a resource with a `/status` subresource: `status` is not tracked.
    Main,
    /// The `/status` subresource: only `status` and `metadata` are tracked, and the entries
    /// say `subresource: status`.
    Status,
}

impl Scope {
    fn subresource(self) -> Option<&'static str> {
        match self {
            Scope::Status => Some("status"),
            Scope::Whole | Scope::Main => None,
        }
    }
}

/// One field owned by another manager that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager as kube-apiserver prints it: `"kubectl"` for an applier,
    /// `"kube-controller-manager" using apps/v1` for an updater.
    pub manager: String,
    /// The field, in structured-merge-diff notation (`.spec.replicas`).
    pub path: String,
}

/// The conflicts that failed an apply (409 Conflict, reason `Conflict`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflicts(pub Vec<Conflict>);

impl std::error::Error for Conflicts {}

impl std::fmt::Display for Conflicts {
    /// kube-apiserver's message: `Apply failed with 1 conflict: conflict with "m": .a.b`, or
    /// for several, the conflicts grouped per manager.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let [c] = self.0.as_slice() {
            return write!(
                f,
                "Apply failed with 1 conflict: conflict with {}: {}",
                c.manager, c.path
            );
        }
        let mut managers: Vec<&str> = self.0.iter().map(|c| c.manager.as_str()).collect();
        managers.sort_unstable();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            for c in self.0.iter().filter(|c| c.manager == m) {
                lines.push(format!("- {}", c.path));
            }
        }
        write!(
            f,
            "Apply failed with {} conflicts: {}",
            self.0.len(),
            lines.join("\n")
        )
    }
}

impl Conflicts {
    /// The `details.causes` of the Status: one `FieldManagerConflict` per field.
    pub fn causes(&self) -> Vec<Value> {
        self.0
            .iter()
            .map(|c| {
                json!({
                    "reason": "FieldManagerConflict",
                    "message": format!("conflict with {}", c.manager),
                    "field": c.path,
                })
            })
            .collect()
    }
}

/// Why an apply failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by other managers would change (409).
    #[error(transparent)]
    Conflict(#[from] Conflicts),
    /// The applied configuration is not acceptable (400).
    #[error("{0}")]
    BadRequest(String),
}

impl From<ApplyError> for PatchError {
    fn from(e: ApplyError) -> PatchError {
        match e {
            ApplyError::Conflict(c) => PatchError::Conflict(c),
            ApplyError::BadRequest(m) => PatchError::BadRequest(m),
        }
    }
}

/// Parses an apply patch body, YAML or JSON, into an object.
///
/// # Errors
/// [`PatchError::BadRequest`] when it is neither, or not an object.
pub fn parse_apply_body(body: &[u8]) -> Result<Value, PatchError> {
    let value: Value = serde_norway::from_slice(body)
        .map_err(|e| PatchError::BadRequest(format!("error decoding YAML: {e}")))?;
    if !value.is_object() {
        return Err(PatchError::BadRequest(
            "the apply patch must be a YAML or JSON object".to_string(),
        ));
    }
    Ok(value)
}

fn api_version(object: &Value) -> String {
    object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Server-side apply of `applied` by `manager` to `live` (`None`: the apply creates the
/// object). Returns the new object with its managedFields.
///
/// # Errors
/// [`ApplyError::Conflict`] when fields owned by other managers would change and `force` is
/// not set; [`ApplyError::BadRequest`] when `applied` is not an object or carries
/// managedFields entries.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    meta: &dyn PatchMeta,
    scope: Scope,
    now: &str,
) -> Result<Value, ApplyError> {
    if !applied.is_object() {
        return Err(ApplyError::BadRequest(
            "the applied configuration must be an object".to_string(),
        ));
    }
    let empty = |m: &Value| m.is_null() || m.as_array().is_some_and(Vec::is_empty);
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !empty(m))
    {
        return Err(ApplyError::BadRequest(
            "metadata.managedFields must be nil".to_string(),
        ));
    }
    let walker = Walker { meta, scope };
    let live_full = live.cloned().unwrap_or_else(|| json!({}));
    let mut entries = managed::read(&live_full);
    let live = managed::strip(&live_full);
    let version = api_version(applied);

    let merged = walker.merge(&live, applied);
    let changed = walker.compare(&live, &merged).changed;

    let me = |e: &Entry| e.is(manager, Operation::Apply, &version, scope.subresource());
    let mut conflicts = Vec::new();
    for e in entries.iter_mut().filter(|e| !me(e)) {
        let taken = e.fields.intersection(&changed);
        if taken.is_empty() {
            continue;
        }
        conflicts.extend(taken.paths().iter().map(|p| Conflict {
            manager: e.display(),
            path: path_string(p),
        }));
        e.fields = e.fields.difference(&taken);
    }
    if !conflicts.is_empty() && !force {
        conflicts.sort_by(|a, b| (&a.manager, &a.path).cmp(&(&b.manager, &b.path)));
        return Err(Conflicts(conflicts).into());
    }

    let applied_set = walker.field_set(applied);
    let (last_applied, last_time) = match entries.iter().position(me) {
        Some(i) => {
            let e = entries.remove(i);
            (e.fields, e.time)
        }
        None => (FieldSet::new(), None),
    };
    // An apply that changes neither the object nor the applier's fields is a no-op: the entry
    // keeps its time, so nothing is written (kube's managedFieldsUpdater does the same).
    let same_fields = last_time.is_some() && applied_set == last_applied;
    entries.push(Entry {
        manager: manager.to_string(),
        operation: Operation::Apply,
        api_version: version,
        time: Some(now.to_string()),
        subresource: scope.subresource().map(str::to_string),
        fields: applied_set,
    });

    // Fields the applier dropped from its configuration go unless someone still owns them.
    let keep = entries
        .iter()
        .fold(FieldSet::new(), |acc, e| acc.union(&e.fields));
    let mut result = merged;
    walker.prune(&mut result, &last_applied.difference(&keep), &keep);
    let diff = walker.compare(&live, &result);
    for e in &mut entries {
        e.fields = e.fields.difference(&diff.removed);
    }
    if same_fields && conflicts.is_empty() && diff.changed.is_empty() && diff.removed.is_empty() {
        // The applier's entry is the one just pushed with `now`.
        if let Some(e) = entries
            .iter_mut()
            .find(|e| e.manager == manager && e.operation == Operation::Apply)
        {
            e.time = last_time;
        }
    }
    managed::write(&mut result, entries);
    Ok(result)
}

/// Records an update (create, PUT, non-apply PATCH) by `manager` in `new`'s managedFields:
/// the manager gets the fields it added or changed, which other managers lose; removed fields
/// leave every manager.
///
/// The entries come from `old`, unless `new` brings other, non-empty managedFields (a client
/// may set them; `[{}]` resets them).
pub fn track_update(
    old: Option<&Value>,
    new: Value,
    manager: &str,
    operation: Operation,
    meta: &dyn PatchMeta,
    scope: Scope,
    now: &str,
) -> Value {
    let walker = Walker { meta, scope };
    let old_entries = old.map(managed::read).unwrap_or_default();
    let sent = new.pointer("/metadata/managedFields");
    let old_sent = old.and_then(|o| o.pointer("/metadata/managedFields"));
    let mut entries = match sent.and_then(Value::as_array) {
        Some(list) if !list.is_empty() && sent != old_sent => managed::read(&new),
        _ => old_entries,
    };
    let mut result = new;
    managed::strip_in_place(&mut result);
    let version = api_version(&result);
    // The comparison never enters `metadata.managedFields`: `old` is compared as it is, not
    // copied without them (the copy was a fifth of an update's field tracking).
    let empty = json!({});
    let cmp = walker.compare(old.unwrap_or(&empty), &result);

    let me = |e: &Entry| e.is(manager, operation, &version, scope.subresource());
    for e in entries.iter_mut().filter(|e| !me(e)) {
        e.fields = e.fields.difference(&cmp.changed).difference(&cmp.removed);
    }
    let previous = match entries.iter().position(me) {
        Some(i) => entries.remove(i).fields,
        None => FieldSet::new(),
    };
    entries.push(Entry {
        manager: manager.to_string(),
        operation,
        api_version: version,
        time: Some(now.to_string()),
        subresource: scope.subresource().map(str::to_string),
        fields: previous.difference(&cmp.removed).union(&cmp.changed),
    });
    managed::write(&mut result, entries);
    result
}

#[cfg(test)]
mod tests;
