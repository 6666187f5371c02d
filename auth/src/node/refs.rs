//! What a pod or persistent volume references, as the Node authorizer's graph records it
//! (upstream's `VisitPodSecretNames` / `VisitPodConfigmapNames` and the PV's claim).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, PersistentVolume, Pod, Volume};

/// The objects a pod bound to a node lets that node read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRefs {
    /// `spec.nodeName` (pods without one are not in the graph).
    pub node: String,
    /// Secrets the pod references (volumes, env, envFrom, imagePullSecrets), by name.
    pub secrets: BTreeSet<String>,
    /// ConfigMaps the pod references (volumes, env, envFrom), by name.
    pub configmaps: BTreeSet<String>,
    /// PersistentVolumeClaims the pod's volumes reference, by name.
    pub pvcs: BTreeSet<String>,
    /// `spec.serviceAccountName` (empty: none).
    pub service_account: String,
}

/// The references of `pod` in its namespace; `None` for pods not bound to a node.
pub fn pod_refs(pod: &Pod) -> Option<PodRefs> {
    let spec = pod.spec.as_ref()?;
    let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
    let mut r = PodRefs {
        node,
        service_account: spec.service_account_name.clone().unwrap_or_default(),
        ..PodRefs::default()
    };
    for s in spec.image_pull_secrets.iter().flatten() {
        r.secrets.insert(s.name.clone());
    }
    let ephemeral = spec.ephemeral_containers.iter().flatten().map(|c| {
        // Same env/envFrom fields as a container.
        (c.env.as_ref(), c.env_from.as_ref())
    });
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(|c: &Container| (c.env.as_ref(), c.env_from.as_ref()))
        .chain(ephemeral);
    for (env, env_from) in containers {
        for e in env.into_iter().flatten() {
            let Some(from) = &e.value_from else { continue };
            if let Some(k) = &from.secret_key_ref {
                r.secrets.insert(k.name.clone());
            }
            if let Some(k) = &from.config_map_key_ref {
                r.configmaps.insert(k.name.clone());
            }
        }
        for f in env_from.into_iter().flatten() {
            if let Some(s) = &f.secret_ref {
                r.secrets.insert(s.name.clone());
            }
            if let Some(c) = &f.config_map_ref {
                r.configmaps.insert(c.name.clone());
            }
        }
    }
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    for v in spec.volumes.iter().flatten() {
        volume_refs(&pod_name, v, &mut r);
    }
    r.secrets.retain(|s| !s.is_empty());
    r.configmaps.retain(|c| !c.is_empty());
    r.pvcs.retain(|p| !p.is_empty());
    Some(r)
}

fn volume_refs(pod_name: &str, v: &Volume, r: &mut PodRefs) {
    if let Some(s) = &v.secret {
        r.secrets.extend(s.secret_name.clone());
    }
    if let Some(c) = &v.config_map {
        r.configmaps.insert(c.name.clone());
    }
    for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
        if let Some(s) = &src.secret {
            r.secrets.insert(s.name.clone());
        }
        if let Some(c) = &src.config_map {
            r.configmaps.insert(c.name.clone());
        }
    }
    let secret_refs = [
        v.cephfs.as_ref().and_then(|x| x.secret_ref.as_ref()),
        v.cinder.as_ref().and_then(|x| x.secret_ref.as_ref()),
        v.flex_volume.as_ref().and_then(|x| x.secret_ref.as_ref()),
        v.iscsi.as_ref().and_then(|x| x.secret_ref.as_ref()),
        v.rbd.as_ref().and_then(|x| x.secret_ref.as_ref()),
        v.csi
            .as_ref()
            .and_then(|x| x.node_publish_secret_ref.as_ref()),
    ];
    r.secrets
        .extend(secret_refs.into_iter().flatten().map(|s| s.name.clone()));
    if let Some(s) = v.scale_io.as_ref() {
        r.secrets.insert(s.secret_ref.name.clone());
    }
    if let Some(s) = v.storageos.as_ref().and_then(|x| x.secret_ref.as_ref()) {
        r.secrets.insert(s.name.clone());
    }
    if let Some(a) = &v.azure_file {
        r.secrets.insert(a.secret_name.clone());
    }
    if let Some(c) = &v.persistent_volume_claim {
        r.pvcs.insert(c.claim_name.clone());
    }
    if v.ephemeral.is_some() {
        // The claim a generic ephemeral volume gets: `<pod>-<volume>`.
        r.pvcs.insert(format!("{pod_name}-{}", v.name));
    }
}

/// A persistent volume's bound claim `(namespace, name)`, if any.
pub fn pv_claim(pv: &PersistentVolume) -> Option<(String, String)> {
    let c = pv.spec.as_ref()?.claim_ref.as_ref()?;
    Some((c.namespace.clone()?, c.name.clone()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_kind_of_reference() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "nodeName": "n1",
                "serviceAccountName": "web-sa",
                "imagePullSecrets": [{"name": "pull"}],
                "containers": [{"name": "c", "env": [
                    {"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
                    {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}},
                    {"name": "C", "value": "plain"}],
                    "envFrom": [{"secretRef": {"name": "envfrom-secret"}}, {"configMapRef": {"name": "envfrom-cm"}}]}],
                "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-secret"}}]}],
                "volumes": [
                    {"name": "s", "secret": {"secretName": "vol-secret"}},
                    {"name": "c", "configMap": {"name": "vol-cm"}},
                    {"name": "p", "projected": {"sources": [{"secret": {"name": "proj-secret"}},
                        {"configMap": {"name": "proj-cm"}}]}},
                    {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "csi", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "csi-secret"}}}
                ]
            }
        }))
        .unwrap();
        let r = pod_refs(&pod).unwrap();
        assert_eq!(r.node, "n1");
        assert_eq!(r.service_account, "web-sa");
        assert_eq!(
            r.secrets,
            set(&[
                "csi-secret",
                "env-secret",
                "envfrom-secret",
                "init-secret",
                "proj-secret",
                "pull",
                "vol-secret"
            ])
        );
        assert_eq!(
            r.configmaps,
            set(&["env-cm", "envfrom-cm", "proj-cm", "vol-cm"])
        );
        assert_eq!(r.pvcs, set(&["data", "web-scratch"]));
    }

    #[test]
    fn unbound_pods_are_not_in_the_graph() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}))
        .unwrap();
        assert_eq!(pod_refs(&pod), None);
    }

    #[test]
    fn pv_claims() {
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": "pv1"},
            "spec": {"claimRef": {"namespace": "default", "name": "data"}}}))
        .unwrap();
        assert_eq!(pv_claim(&pv), Some(("default".into(), "data".into())));
    }
}
