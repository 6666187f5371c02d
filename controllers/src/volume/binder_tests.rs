use super::*;
use crate::volume::local_path::storage_class;
use k3rs_apimachinery::volume::fixtures::{pv, pvc};
use serde_json::json;

fn key(name: &str) -> ClaimKey {
    ClaimKey {
        namespace: "ns".into(),
        name: name.into(),
    }
}

fn world<'a>(
    claims: &'a [PersistentVolumeClaim],
    volumes: &'a [PersistentVolume],
    classes: &'a [StorageClass],
) -> World<'a> {
    World {
        claims,
        volumes,
        classes,
        nodes: &[],
    }
}

fn full_binding(claim: &str, volume: &str) -> Vec<Action> {
    vec![
        Action::BindVolume {
            volume: volume.into(),
            claim: key(claim),
        },
        Action::VolumePhase {
            volume: volume.into(),
            phase: "Bound",
            message: None,
        },
        Action::BindClaim {
            claim: key(claim),
            volume: volume.into(),
            by_controller: true,
        },
        Action::ClaimPhase {
            claim: key(claim),
            phase: "Bound",
            volume: Some(volume.into()),
        },
    ]
}

#[test]
fn a_pending_claim_binds_both_sides() {
    let claims = [pvc("c", "1Gi", json!({}))];
    let volumes = [pv("big", "5Gi", json!({})), pv("v", "1Gi", json!({}))];
    let w = world(&claims, &volumes, &[]);
    assert_eq!(sync_claim(&claims[0], w), full_binding("c", "v"));
    // The unused volume is already Available: nothing for it.
    assert_eq!(sync_volume(&volumes[0], w), vec![]);
}

#[test]
fn a_half_done_binding_is_completed() {
    // The volume side was written, the claim's was not.
    let claims = [pvc("c", "1Gi", json!({}))];
    let volumes = [pv(
        "v",
        "1Gi",
        json!({"spec": {"claimRef": {"namespace": "ns", "name": "c", "uid": "uid-c"}}, "status": {"phase": "Bound"}}),
    )];
    assert_eq!(
        sync_claim(&claims[0], world(&claims, &volumes, &[])),
        full_binding("c", "v")[2..].to_vec()
    );
}

#[test]
fn no_volume_and_no_class() {
    let claims = [pvc("c", "1Gi", json!({}))];
    assert_eq!(
        sync_claim(&claims[0], world(&claims, &[], &[])),
        vec![Action::Event {
            subject: Subject::Claim(key("c")),
            warning: false,
            reason: "FailedBinding",
            message: "no persistent volumes available for this claim and no storage class is set"
                .into(),
        }]
    );
}

#[test]
fn wait_for_first_consumer_then_provision_on_the_selected_node() {
    let classes = [storage_class()];
    let waiting = pvc(
        "c",
        "1Gi",
        json!({"spec": {"storageClassName": "local-path"}}),
    );
    assert_eq!(
        sync_claim(&waiting, world(&[], &[], &classes)),
        vec![Action::Event {
            subject: Subject::Claim(key("c")),
            warning: false,
            reason: "WaitForFirstConsumer",
            message: "waiting for first consumer to be created before binding".into(),
        }]
    );
    let selected = pvc(
        "c",
        "1Gi",
        json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "n1"}}, "spec": {"storageClassName": "local-path"}}),
    );
    let actions = sync_claim(&selected, world(&[], &[], &classes));
    assert_eq!(
        actions[0],
        Action::AnnotateProvisioner {
            claim: key("c"),
            provisioner: "rancher.io/local-path".into()
        }
    );
    assert!(
        matches!(&actions[1], Action::Event { reason: "ExternalProvisioning", message, .. }
        if message.starts_with("Waiting for a volume to be created either by the external provisioner 'rancher.io/local-path'"))
    );
    // A local volume on another node does not do; one on n1 does.
    let aff = |n: &str| {
        json!({"spec": {"storageClassName": "local-path", "nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [n]}]}]}}}})
    };
    let volumes = [pv("on-n2", "1Gi", aff("n2")), pv("on-n1", "1Gi", aff("n1"))];
    let actions = sync_claim(&selected, world(&[], &volumes, &classes));
    assert_eq!(actions, full_binding("c", "on-n1"));
}

#[test]
fn user_pre_bound_claim() {
    let claim = pvc("c", "1Gi", json!({"spec": {"volumeName": "v"}}));
    let free = [pv("v", "1Gi", json!({}))];
    let mut want = full_binding("c", "v");
    want[2] = Action::BindClaim {
        claim: key("c"),
        volume: "v".into(),
        by_controller: false,
    };
    assert_eq!(sync_claim(&claim, world(&[], &free, &[])), want);
    let taken = [pv(
        "v",
        "1Gi",
        json!({"spec": {"claimRef": {"namespace": "ns", "name": "other", "uid": "u"}}}),
    )];
    assert_eq!(
        sync_claim(&claim, world(&[], &taken, &[])),
        vec![Action::Event {
            subject: Subject::Claim(key("c")),
            warning: true,
            reason: "FailedBinding",
            message: "volume \"v\" already bound to a different claim.".into(),
        }]
    );
    let small = [pv("v", "500Mi", json!({}))];
    assert_eq!(
        sync_claim(&claim, world(&[], &small, &[])),
        vec![Action::Event {
            subject: Subject::Claim(key("c")),
            warning: true,
            reason: "VolumeMismatch",
            message: "Cannot bind to requested volume \"v\": requested PV is too small".into(),
        }]
    );
}

#[test]
fn bound_claim_loses_its_volume() {
    let claim = pvc(
        "c",
        "1Gi",
        json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": "v"}, "status": {"phase": "Bound"}}),
    );
    assert_eq!(
        sync_claim(&claim, world(&[], &[], &[])),
        vec![
            Action::ClaimPhase {
                claim: key("c"),
                phase: "Lost",
                volume: None
            },
            Action::Event {
                subject: Subject::Claim(key("c")),
                warning: true,
                reason: "ClaimLost",
                message: "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
                    .into(),
            }
        ]
    );
}

#[test]
fn volume_phases_and_reclaim() {
    let released = |policy: &str, extra: serde_json::Value| {
        let mut v = json!({"spec": {"persistentVolumeReclaimPolicy": policy,
            "claimRef": {"namespace": "ns", "name": "gone", "uid": "u"}}, "status": {"phase": "Bound"}});
        k3rs_apimachinery::volume::fixtures::merge(&mut v, extra);
        pv("v", "1Gi", v)
    };
    let release = Action::VolumePhase {
        volume: "v".into(),
        phase: "Released",
        message: None,
    };
    // Retain: Released and kept.
    let v = released("Retain", json!({}));
    assert_eq!(sync_volume(&v, world(&[], &[], &[])), vec![release.clone()]);
    // Delete by a provisioner: Released, left to it.
    let v = released(
        "Delete",
        json!({"metadata": {"annotations": {ANN_PROVISIONED_BY: "rancher.io/local-path"}}}),
    );
    assert_eq!(sync_volume(&v, world(&[], &[], &[])), vec![release.clone()]);
    // Delete without one: Failed, as upstream without a deleter plugin.
    let v = released("Delete", json!({}));
    let msg =
        "error getting deleter volume plugin for volume \"v\": no deletable volume plugin matched";
    assert_eq!(
        sync_volume(&v, world(&[], &[], &[])),
        vec![
            release,
            Action::VolumePhase {
                volume: "v".into(),
                phase: "Failed",
                message: Some(msg.into())
            },
            Action::Event {
                subject: Subject::Volume("v".into()),
                warning: true,
                reason: "VolumeFailedDelete",
                message: msg.into()
            },
        ]
    );
    // Unclaimed and Pending: Available.
    let v = pv("v", "1Gi", json!({"status": {"phase": "Pending"}}));
    assert_eq!(
        sync_volume(&v, world(&[], &[], &[])),
        vec![Action::VolumePhase {
            volume: "v".into(),
            phase: "Available",
            message: None
        }]
    );
    // A claim that went to another volume frees the one the controller had bound.
    let claims = [pvc("c", "1Gi", json!({"spec": {"volumeName": "other"}}))];
    let v = pv(
        "v",
        "1Gi",
        json!({"metadata": {"annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}},
               "spec": {"claimRef": {"namespace": "ns", "name": "c", "uid": "uid-c"}}, "status": {"phase": "Bound"}}),
    );
    assert_eq!(
        sync_volume(&v, world(&claims, &[], &[])),
        vec![
            Action::UnbindVolume { volume: "v".into() },
            Action::VolumePhase {
                volume: "v".into(),
                phase: "Available",
                message: None
            }
        ]
    );
}
