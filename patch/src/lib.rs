//! PATCH for the API server: RFC 6902 JSON patch, RFC 7386 merge patch, Kubernetes strategic
//! merge patch and server-side apply, as pure functions on `serde_json::Value`.
//!
//! The API server's PATCH handler parses the Content-Type with [`PatchType::from_content_type`],
//! then calls [`apply_patch`] with the live object; the [`PatchError`] variant tells it which
//! `Status` to answer with ([`PatchError::status_code`]).
//!
//! # Use
//! ```
//! use k3rs_patch::{apply::Scope, apply_patch, BuiltinPatchMeta, NoPatchMeta, PatchContext, PatchMeta, PatchType};
//! use serde_json::json;
//!
//! let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
//!                   "spec": {"replicas": 1}});
//! // Built-in kinds have merge keys; custom resources get `NoPatchMeta` (or a `SchemaPatchMeta`).
//! let builtin = BuiltinPatchMeta::for_kind("apps/v1", "Deployment");
//! let meta: &dyn PatchMeta = match &builtin {
//!     Some(m) => m,
//!     None => &NoPatchMeta,
//! };
//! let kind = PatchType::from_content_type("application/strategic-merge-patch+json").unwrap();
//! let ctx = PatchContext {
//!     meta,
//!     field_manager: Some("kubectl-patch"),
//!     force: false,
//!     scope: Scope::Main,
//!     now: "2024-01-01T00:00:00Z",
//! };
//! let patched = apply_patch(kind, &live, br#"{"spec":{"replicas":3}}"#, &ctx).unwrap();
//! assert_eq!(patched["spec"]["replicas"], 3);
//! assert_eq!(patched["metadata"]["managedFields"][0]["manager"], "kubectl-patch");
//! ```
//! Creates and updates (PUT) record their writer with [`apply::track_update`]; an apply
//! patch that creates the object goes through [`apply_patch`] with a `null` live object.
//! On error, answer with a Status of [`PatchError::status_code`] and [`PatchError::reason`]
//! (for conflicts, `details.causes` from [`apply::Conflicts::causes`]).
//!
//! # Guarantees
//! - No I/O, no clock: timestamps come in through [`PatchContext::now`].
//! - Every write through [`apply_patch`] with a field manager updates `metadata.managedFields`
//!   (operation `Apply` for apply patches, `Update` for the others), as kube-apiserver does.

pub mod apply;
pub mod json_patch;
pub mod merge_patch;
pub mod meta;
pub mod strategic;

use serde_json::Value;

pub use meta::{
    BuiltinPatchMeta, FieldMeta, ListKind, MapKind, NoPatchMeta, PatchMeta, SchemaPatchMeta,
};

/// The four patch media types kube-apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply; the body may be YAML or JSON).
    Apply,
}

/// Media types listed in the 415 message, in kube-apiserver's order.
const ACCEPTED: &str = "application/json-patch+json, application/merge-patch+json, \
                        application/strategic-merge-patch+json, application/apply-patch+yaml";

impl PatchType {
    /// Parses a Content-Type header value; parameters (`; charset=utf-8`) are ignored.
    ///
    /// # Errors
    /// [`PatchError::UnsupportedMediaType`] for any other media type.
    pub fn from_content_type(content_type: &str) -> Result<PatchType, PatchError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media.to_ascii_lowercase().as_str() {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::StrategicMerge),
            "application/apply-patch+yaml" => Ok(PatchType::Apply),
            _ => Err(PatchError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: {ACCEPTED}"
            ))),
        }
    }

    /// The media type string.
    pub fn media_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// What a patch needs besides the live object and the body.
#[derive(Clone, Copy)]
pub struct PatchContext<'a> {
    /// Schema of the object's kind: list merge keys and strategies. Kinds whose meta does not
    /// [support strategic merge](PatchMeta::supports_strategic_merge) (custom resources) answer
    /// a strategic merge patch with 415.
    pub meta: &'a dyn PatchMeta,
    /// `fieldManager` of the request; required for apply patches. When set, the result's
    /// `metadata.managedFields` is updated for it.
    pub field_manager: Option<&'a str>,
    /// `force` query parameter of an apply patch.
    pub force: bool,
    /// Which fields the write may own (main endpoint or `/status`).
    pub scope: apply::Scope,
    /// The request time, RFC 3339 (`2024-01-02T03:04:05Z`), stamped on managedFields entries.
    pub now: &'a str,
}

impl std::fmt::Debug for PatchContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PatchContext")
            .field("field_manager", &self.field_manager)
            .field("force", &self.force)
            .field("scope", &self.scope)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// Why a patch was refused; each variant maps to the Status kube-apiserver answers with.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// Malformed body or patch (400 BadRequest).
    #[error("{0}")]
    BadRequest(String),
    /// A JSON patch `test` operation failed (422 Invalid).
    #[error("{0}")]
    TestFailed(String),
    /// The patch is well formed but cannot be applied to this object (422 Invalid).
    #[error("{0}")]
    Invalid(String),
    /// A JSON patch with more operations than kube-apiserver accepts (413).
    #[error("{0}")]
    TooLarge(String),
    /// Server-side apply conflicts with other field managers (409 Conflict).
    #[error(transparent)]
    Conflict(#[from] apply::Conflicts),
    /// Unknown patch media type, or a strategic merge patch for a kind without the schema
    /// information (custom resources) (415 UnsupportedMediaType).
    #[error("{0}")]
    UnsupportedMediaType(String),
}

impl PatchError {
    /// The HTTP status code of the Kubernetes Status for this error.
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::BadRequest(_) => 400,
            PatchError::TestFailed(_) | PatchError::Invalid(_) => 422,
            PatchError::TooLarge(_) => 413,
            PatchError::Conflict(_) => 409,
            PatchError::UnsupportedMediaType(_) => 415,
        }
    }

    /// The Status `reason` for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            PatchError::BadRequest(_) => "BadRequest",
            PatchError::TestFailed(_) | PatchError::Invalid(_) => "Invalid",
            PatchError::TooLarge(_) => "RequestEntityTooLarge",
            PatchError::Conflict(_) => "Conflict",
            PatchError::UnsupportedMediaType(_) => "UnsupportedMediaType",
        }
    }
}

/// Applies a PATCH body of type `kind` to the live object and returns the new object.
///
/// `live` is the current object; for an apply patch it may be `null` when the apply creates
/// the object. With [`PatchContext::field_manager`] set, managedFields are updated.
///
/// # Errors
/// See [`PatchError`]; the body is never partially applied.
pub fn apply_patch(
    kind: PatchType,
    live: &Value,
    patch_body: &[u8],
    ctx: &PatchContext<'_>,
) -> Result<Value, PatchError> {
    let patched = match kind {
        PatchType::Json => json_patch::apply(live, patch_body)?,
        PatchType::Merge => merge_patch::apply(live, patch_body)?,
        PatchType::StrategicMerge => {
            if !ctx.meta.supports_strategic_merge() {
                return Err(PatchError::UnsupportedMediaType(
                    "the body of the request was in an unknown format - accepted media types include: \
                     application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                        .to_string(),
                ));
            }
            let patch: Value = serde_json::from_slice(patch_body)
                .map_err(|e| PatchError::BadRequest(e.to_string()))?;
            strategic::strategic_merge(live, &patch, ctx.meta)?
        }
        PatchType::Apply => {
            let manager = ctx.field_manager.ok_or_else(|| {
                PatchError::Invalid(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: \
                     is required for apply patch"
                        .to_string(),
                )
            })?;
            let applied = apply::parse_apply_body(patch_body)?;
            return Ok(apply::apply(
                (!live.is_null()).then_some(live),
                &applied,
                manager,
                ctx.force,
                ctx.meta,
                ctx.scope,
                ctx.now,
            )?);
        }
    };
    Ok(match ctx.field_manager {
        Some(manager) => apply::track_update(
            Some(live),
            patched,
            manager,
            apply::Operation::Update,
            ctx.meta,
            ctx.scope,
            ctx.now,
        ),
        None => patched,
    })
}

#[cfg(test)]
mod tests;
