//! POST: defaulting, admission, metadata stamping, generateName, defaulting, validation,
//! ClusterIP allocation, `Txn(If MOD==0 Then Put)`.

use serde_json::{json, Value};

use super::encode_as;

use super::keys;

use super::managed_fields;

use k3rs_apimachinery::generated_names;
use k3rs_apimachinery::meta;

use k3rs_apimachinery::validation;

use super::Registry;

use super::Target;

use super::WriteOptions;
use crate::admission::{Attributes, Operation};
use crate::resources::{strategy, typed};
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::{ApiError, ApiResult, Cause, Subject};
use k3rs_datastore::WriteOutcome;

/// Names tried for one generateName before giving up.
const GENERATE_ATTEMPTS: usize = 8;

impl Registry {
    /// Creates `obj` at `t` (a namespaced target carries the path's namespace). Returns the
    /// stored object with its resourceVersion (none under dry run).
    pub async fn create(&self, t: &Target, mut obj: Value, opts: WriteOptions) -> ApiResult<Value> {
        let r = t.resource;
        if crate::resources::custom::version_of(r).is_some_and(|cv| cv.terminating) {
            // kube-apiserver: MethodNotSupported while the CRD's resources are being deleted.
            return Err(ApiError {
                code: 405,
                reason: "MethodNotAllowed",
                message: format!(
                    "create is not supported on resources of kind \"{}.{}\"",
                    r.plural, r.group
                ),
                details: None,
            });
        }
        check_body(t, &obj)?;
        scope_namespace(t, &mut obj)?;
        // As kube-apiserver decodes (and so defaults) before admission: the plugins see a
        // defaulted object. Defaults run again after naming, for what the plugins left unset.
        strategy::apply_defaults(r, &mut obj);
        let mut admission = Attributes::of_write(Operation::Create, t, &opts);
        admission.name = meta::name(&obj).to_string();
        admission.object = Some(obj);
        self.admission.admit(&mut admission, self).await?;
        let obj = admission.object.take().unwrap_or_default();
        let generate_name = obj["metadata"]["generateName"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let given_name = meta::name(&obj).to_string();
        if given_name.is_empty() && generate_name.is_empty() {
            return Err(ApiError::invalid(
                t.kind_subject(""),
                vec![Cause::required(
                    "metadata.name",
                    "name or generateName is required",
                )],
            ));
        }
        let mut obj = obj;
        stamp_new(r, &mut obj);

        let _ip_guard = if r.group.is_empty() && r.kind == "Service" {
            let guard = self.ip_lock.lock().await;
            self.allocate_service(t, &mut obj, None).await?;
            Some(guard)
        } else {
            None
        };

        let mut body = obj;
        for _ in 0..GENERATE_ATTEMPTS {
            // A given name is tried once (every outcome below returns): the body itself.
            let (name, mut obj) = if given_name.is_empty() {
                (generated_names::generate(&generate_name), body.clone())
            } else {
                (given_name.clone(), std::mem::take(&mut body))
            };
            meta::metadata_mut(&mut obj).insert("name".into(), json!(name));
            // After naming: a Job's generated labels carry its name.
            strategy::prepare_for_create(r, &mut obj);
            if let (Some(u), ("certificates.k8s.io", "CertificateSigningRequest")) =
                (&opts.user, (r.group, r.kind))
            {
                // The requester is whoever authenticated, never what the body claims.
                strategy::csr::prepare_for_create(&mut obj, &strategy::csr::Requester::from(&**u));
            }
            strategy::apply_defaults(r, &mut obj);
            meta::drop_empty_collections(&mut obj);
            check(t, &obj, None)?;
            self.check_write(t, &obj, None, &opts).await?;
            let obj = self.validate_admission(&admission, &name, obj).await?;
            let mut obj = managed_fields::track(
                t,
                None,
                obj,
                opts.field_manager.as_deref(),
                &meta::now_rfc3339(),
            );
            if opts.dry_run {
                return Ok(obj);
            }
            let key = keys::object_key(r, t.namespace.as_deref(), &name);
            let lease = self.lease_for(r).await?;
            match self.ds.create(&key, encode_as(r, &obj)?, lease).await? {
                WriteOutcome::Done { revision } => {
                    meta::set_resource_version(&mut obj, revision);
                    return Ok(obj);
                }
                WriteOutcome::Conflict { .. } if given_name.is_empty() => continue,
                WriteOutcome::Conflict { .. } => {
                    return Err(ApiError::already_exists(Subject {
                        group: r.group,
                        kind: r.plural,
                        name: &name,
                    }))
                }
            }
        }
        Err(ApiError::already_exists(Subject {
            group: r.group,
            kind: r.plural,
            name: &generate_name,
        }))
    }

    /// The validating plugins on the object about to be stored as `name`.
    async fn validate_admission(&self, a: &Attributes, name: &str, obj: Value) -> ApiResult<Value> {
        let mut a = Attributes {
            name: name.to_string(),
            object: Some(obj),
            ..a.clone()
        };
        self.admission.validate(&a, self).await?;
        Ok(a.object.take().unwrap_or_default())
    }
}

/// Puts the path's namespace into the object (a different one in the body is a 400).
pub(super) fn scope_namespace(t: &Target, obj: &mut Value) -> ApiResult<()> {
    let m = meta::metadata_mut(obj);
    if t.resource.namespaced {
        let ns = t.namespace.as_deref().unwrap_or("");
        match m.get("namespace").and_then(Value::as_str) {
            Some(body) if !body.is_empty() && body != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            _ => {
                m.insert("namespace".into(), json!(ns));
            }
        }
    } else {
        m.remove("namespace");
    }
    Ok(())
}

/// What a create sets regardless of the body: uid, creationTimestamp, generation; and what it
/// clears: resourceVersion, deletion state, selfLink.
fn stamp_new(r: &Resource, obj: &mut Value) {
    let m = meta::metadata_mut(obj);
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        m.remove(k);
    }
    m.insert("uid".into(), json!(meta::new_uid()));
    m.insert("creationTimestamp".into(), json!(meta::now_rfc3339()));
    if r.has_spec {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
}

/// Structure, metadata and kind-specific validation of an object about to be written.
/// Decoding, as kube-apiserver does before any defaulting: the request body is an object whose
/// fields have the types of the resource (a `/scale` body is a Scale, checked by its handler).
pub(super) fn check_body(t: &Target, body: &Value) -> ApiResult<()> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be an object",
        ));
    }
    if t.subresource.as_deref() == Some("scale") {
        return Ok(());
    }
    typed::check_structure(t.resource, body).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// Validation of the object about to be stored (after defaulting and merging).
/// `old` is the stored object on updates (for CRD transition rules).
pub(super) fn check(t: &Target, obj: &Value, old: Option<&Value>) -> ApiResult<()> {
    let r = t.resource;
    let name = meta::name(obj);
    let mut causes = if name.is_empty() {
        vec![Cause::required(
            "metadata.name",
            "name or generateName is required",
        )]
    } else {
        validation::validate_name(name, r.name_rule, "metadata.name")
    };
    if let Some(prefix) = obj["metadata"]["generateName"]
        .as_str()
        .filter(|p| !p.is_empty())
    {
        causes.extend(validation::validate_generate_name(prefix, r.name_rule));
    }
    causes.extend(validation::validate_labels_and_annotations(obj));
    causes.extend(strategy::validate(r, obj));
    let rules = strategy::validate_custom_rules(r, obj, old, &causes);
    causes.extend(rules);
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(t.kind_subject(name), causes))
    }
}
