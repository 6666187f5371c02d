//! The binder's decisions (upstream's `syncClaim` and `syncVolume` of the
//! `persistentvolume-binder` controller), pure: from the claims, volumes, storage classes and
//! nodes it knows, what must change on one claim or one volume.
//!
//! # Guarantees
//! - A Pending claim binds to the volume [`find_match`] picks; both sides are written: the
//!   volume's `claimRef` and phase `Bound`, the claim's `volumeName`, its
//!   `pv.kubernetes.io/bind-completed` annotation, and its status (phase `Bound`, the volume's
//!   capacity and access modes). Bindings the controller made carry
//!   `pv.kubernetes.io/bound-by-controller`.
//! - A claim of a `WaitForFirstConsumer` class binds only once it has a
//!   `volume.kubernetes.io/selected-node`, to a volume whose node affinity admits that node.
//! - A claim that nothing fits is left for its class's provisioner (annotated with it), or
//!   stays Pending with upstream's event when it has no class.
//! - A volume whose claim is gone is `Released`; with reclaim policy `Delete` it is left to its
//!   provisioner (`pv.kubernetes.io/provisioned-by`), else it is `Failed` (no in-tree deleter).
//! - A bound claim whose volume is gone or bound elsewhere is `Lost`.

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use k3rs_apimachinery::volume::matching::{find_match, refers_to, unsatisfied, NodeRef};
use k3rs_apimachinery::volume::{
    class_of, delayed_binding, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_PROVISIONED_BY,
    ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER, NO_PROVISIONER,
};

/// A claim by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimKey {
    pub namespace: String,
    pub name: String,
}

impl ClaimKey {
    pub fn of(c: &PersistentVolumeClaim) -> ClaimKey {
        ClaimKey {
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            name: c.metadata.name.clone().unwrap_or_default(),
        }
    }
}

/// What an Event is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    Claim(ClaimKey),
    Volume(String),
}

/// One change the binder makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Set the volume's `claimRef` to the claim (name, namespace, UID), marked as bound by the
    /// controller.
    BindVolume { volume: String, claim: ClaimKey },
    /// Clear the volume's `claimRef` (the controller had bound it to a claim that went
    /// elsewhere).
    UnbindVolume { volume: String },
    /// Set the volume's status phase (with upstream's message for `Failed`).
    VolumePhase {
        volume: String,
        phase: &'static str,
        message: Option<String>,
    },
    /// Set the claim's `volumeName` and its bind-completed (and bound-by-controller)
    /// annotations.
    BindClaim {
        claim: ClaimKey,
        volume: String,
        by_controller: bool,
    },
    /// Set the claim's phase; for `Bound`, also the volume's capacity and access modes.
    ClaimPhase {
        claim: ClaimKey,
        phase: &'static str,
        volume: Option<String>,
    },
    /// Annotate the claim with the provisioner expected to create its volume.
    AnnotateProvisioner {
        claim: ClaimKey,
        provisioner: String,
    },
    Event {
        subject: Subject,
        warning: bool,
        reason: &'static str,
        message: String,
    },
}

/// The objects the binder decides on.
#[derive(Clone, Copy, Debug)]
pub struct World<'a> {
    pub claims: &'a [PersistentVolumeClaim],
    pub volumes: &'a [PersistentVolume],
    pub classes: &'a [StorageClass],
    pub nodes: &'a [Node],
}

fn ann<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn phase_of_claim(c: &PersistentVolumeClaim) -> &str {
    c.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn phase_of_volume(v: &PersistentVolume) -> &str {
    v.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn volume_name(v: &PersistentVolume) -> String {
    v.metadata.name.clone().unwrap_or_default()
}

/// The node a claim was selected for, with its labels when the node is known.
fn selected_node(claim: &PersistentVolumeClaim, nodes: &[Node]) -> Option<NodeRef> {
    let name = ann(&claim.metadata, ANN_SELECTED_NODE)?;
    let labels = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name))
        .and_then(|n| n.metadata.labels.clone())
        .unwrap_or_else(|| [("kubernetes.io/hostname".to_string(), name.to_string())].into());
    Some(NodeRef {
        name: name.to_string(),
        labels,
    })
}

fn event(
    subject: Subject,
    warning: bool,
    reason: &'static str,
    message: impl Into<String>,
) -> Action {
    Action::Event {
        subject,
        warning,
        reason,
        message: message.into(),
    }
}

/// Completes the binding of `claim` to `volume`: what is not yet written on either side.
fn bind(claim: &PersistentVolumeClaim, volume: &PersistentVolume, out: &mut Vec<Action>) {
    let key = ClaimKey::of(claim);
    let name = volume_name(volume);
    let ref_uid = volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .and_then(|r| r.uid.as_deref());
    if ref_uid.is_none_or(|u| u.is_empty() || Some(u) != claim.metadata.uid.as_deref()) {
        out.push(Action::BindVolume {
            volume: name.clone(),
            claim: key.clone(),
        });
    }
    if phase_of_volume(volume) != "Bound" {
        out.push(Action::VolumePhase {
            volume: name.clone(),
            phase: "Bound",
            message: None,
        });
    }
    let claim_volume = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref());
    if claim_volume != Some(name.as_str()) || ann(&claim.metadata, ANN_BIND_COMPLETED).is_none() {
        out.push(Action::BindClaim {
            claim: key.clone(),
            volume: name.clone(),
            by_controller: claim_volume.is_none_or(str::is_empty),
        });
    }
    if phase_of_claim(claim) != "Bound" {
        out.push(Action::ClaimPhase {
            claim: key,
            phase: "Bound",
            volume: Some(name),
        });
    }
}

/// What must change for one claim.
pub fn sync_claim(claim: &PersistentVolumeClaim, w: World<'_>) -> Vec<Action> {
    let mut out = Vec::new();
    let key = ClaimKey::of(claim);
    let subject = Subject::Claim(key.clone());
    let wanted = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .filter(|v| !v.is_empty());
    if ann(&claim.metadata, ANN_BIND_COMPLETED).is_some() {
        // Bound before: the volume must still be there and ours.
        let lost = |out: &mut Vec<Action>, msg: &str| {
            if phase_of_claim(claim) != "Lost" {
                out.push(Action::ClaimPhase {
                    claim: key.clone(),
                    phase: "Lost",
                    volume: None,
                });
                out.push(event(subject.clone(), true, "ClaimLost", msg));
            }
        };
        let Some(vname) = wanted else {
            lost(
                &mut out,
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
            );
            return out;
        };
        let Some(volume) = w
            .volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(&vname))
        else {
            lost(
                &mut out,
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            );
            return out;
        };
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if claim_ref.is_none() || refers_to(volume, claim) {
            bind(claim, volume, &mut out);
        } else {
            lost(
                &mut out,
                "Two claims are bound to the same volume, this one is bound incorrectly",
            );
        }
        return out;
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return out;
    }
    if let Some(vname) = wanted {
        // Pre-bound by the user to a named volume.
        let Some(volume) = w
            .volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(&vname))
        else {
            return out;
        };
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if claim_ref.is_some() && !refers_to(volume, claim) {
            out.push(event(
                subject,
                true,
                "FailedBinding",
                format!("volume \"{vname}\" already bound to a different claim."),
            ));
            return out;
        }
        if let Some(why) = unsatisfied(volume, claim) {
            out.push(event(
                subject,
                true,
                "VolumeMismatch",
                format!("Cannot bind to requested volume \"{vname}\": {why}"),
            ));
            return out;
        }
        bind(claim, volume, &mut out);
        return out;
    }
    let delayed = delayed_binding(claim, w.classes);
    let node = selected_node(claim, w.nodes);
    if delayed && node.is_none() {
        out.push(event(
            subject,
            false,
            "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding",
        ));
        return out;
    }
    if let Some(volume) = find_match(claim, w.volumes, node.as_ref().filter(|_| delayed)) {
        bind(claim, volume, &mut out);
        return out;
    }
    match class_of(claim, w.classes) {
        Some(class) if class.provisioner != NO_PROVISIONER => {
            if ann(&claim.metadata, ANN_STORAGE_PROVISIONER) != Some(class.provisioner.as_str()) {
                out.push(Action::AnnotateProvisioner {
                    claim: key,
                    provisioner: class.provisioner.clone(),
                });
            }
            out.push(event(subject, false, "ExternalProvisioning", format!(
                "Waiting for a volume to be created either by the external provisioner '{}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.",
                class.provisioner
            )));
        }
        Some(_) => {}
        None if k3rs_apimachinery::volume::matching::claim_class(claim).is_empty() => {
            out.push(event(
                subject,
                false,
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            ));
        }
        None => {
            let class = k3rs_apimachinery::volume::matching::claim_class(claim);
            out.push(event(
                subject,
                true,
                "ProvisioningFailed",
                format!("storageclass.storage.k8s.io \"{class}\" not found"),
            ));
        }
    }
    out
}

/// What must change for one volume.
pub fn sync_volume(volume: &PersistentVolume, w: World<'_>) -> Vec<Action> {
    let mut out = Vec::new();
    let name = volume_name(volume);
    let phase = phase_of_volume(volume);
    let set_phase = |out: &mut Vec<Action>, p: &'static str, message: Option<String>| {
        if phase != p {
            out.push(Action::VolumePhase {
                volume: name.clone(),
                phase: p,
                message,
            });
        }
    };
    let Some(claim_ref) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        set_phase(&mut out, "Available", None);
        return out;
    };
    let claim = w
        .claims
        .iter()
        .find(|c| c.metadata.namespace == claim_ref.namespace && c.metadata.name == claim_ref.name);
    let ref_uid = claim_ref.uid.as_deref().unwrap_or("");
    if ref_uid.is_empty() {
        // Pre-bound to a claim by name: it is the claim's to complete.
        set_phase(&mut out, "Available", None);
        return out;
    }
    let claim = claim.filter(|c| c.metadata.uid.as_deref() == Some(ref_uid));
    let Some(claim) = claim else {
        // The claim is gone: release, then reclaim.
        if phase == "Released" || phase == "Failed" {
            if phase == "Released" {
                reclaim(volume, &mut out);
            }
            return out;
        }
        set_phase(&mut out, "Released", None);
        reclaim(volume, &mut out);
        return out;
    };
    let claim_volume = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("");
    if claim_volume.is_empty() || claim_volume == name {
        // Bound, or mid-binding (the claim's side is completed by its own sync).
        if claim_volume == name {
            set_phase(&mut out, "Bound", None);
        }
        return out;
    }
    // The claim is bound to another volume.
    if ann(&volume.metadata, ANN_BOUND_BY_CONTROLLER).is_some() {
        out.push(Action::UnbindVolume {
            volume: name.clone(),
        });
    }
    set_phase(&mut out, "Available", None);
    out
}

/// A Released volume's reclaim policy: Retain keeps it, Delete is its provisioner's (or
/// fails without one), Recycle is not supported.
fn reclaim(volume: &PersistentVolume, out: &mut Vec<Action>) {
    let policy = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain");
    let name = volume_name(volume);
    let fail = |out: &mut Vec<Action>, reason: &'static str, msg: String| {
        out.push(Action::VolumePhase {
            volume: name.clone(),
            phase: "Failed",
            message: Some(msg.clone()),
        });
        out.push(event(Subject::Volume(name.clone()), true, reason, msg));
    };
    match policy {
        "Delete" if ann(&volume.metadata, ANN_PROVISIONED_BY).is_some() => {}
        "Delete" => fail(out, "VolumeFailedDelete", format!("error getting deleter volume plugin for volume \"{name}\": no deletable volume plugin matched")),
        "Recycle" => fail(out, "VolumeFailedRecycle", "No recycler plugin found for the volume!".to_string()),
        _ => {}
    }
}

#[cfg(test)]
#[path = "binder_tests.rs"]
mod tests;
