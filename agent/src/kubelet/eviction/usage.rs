//! Each pod's usage as the eviction manager ranks it (upstream reads the Summary API): the
//! runtime's container stats (memory working set, writable layer) by the kubelet's
//! `io.kubernetes.*` labels, plus the pod's container log files and its emptyDir volumes
//! measured on disk. [`from_container_stats`] is pure; [`measure`] walks the directories.

use std::collections::HashMap;
use std::path::Path;

use super::rank::{ContainerUsage, PodUsage};
use crate::cri::pb;
use crate::kubelet::plan::labels;

/// Bytes (allocated blocks) and inodes under `path`, not following symlinks; 0 when absent.
pub fn du(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return (0, 0);
    };
    let mut bytes = meta.blocks() * 512;
    let mut inodes = 1;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            let (b, i) = du(&entry.path());
            bytes += b;
            inodes += i;
        }
    }
    (bytes, inodes)
}

/// The pods' usage by UID from the runtime's container stats.
pub fn from_container_stats(stats: &[pb::ContainerStats]) -> HashMap<String, PodUsage> {
    let mut pods: HashMap<String, PodUsage> = HashMap::new();
    for s in stats {
        let Some(a) = &s.attributes else { continue };
        let (Some(uid), Some(name)) = (
            a.labels.get(labels::POD_UID),
            a.labels.get(labels::CONTAINER_NAME),
        ) else {
            continue;
        };
        let layer = s.writable_layer.as_ref();
        pods.entry(uid.clone())
            .or_default()
            .containers
            .push(ContainerUsage {
                name: name.clone(),
                memory: s
                    .memory
                    .as_ref()
                    .and_then(|m| m.working_set_bytes.as_ref())
                    .map(|v| v.value),
                rootfs_bytes: layer.and_then(|l| l.used_bytes.as_ref()).map(|v| v.value),
                rootfs_inodes: layer.and_then(|l| l.inodes_used.as_ref()).map(|v| v.value),
                logs_bytes: None,
            });
    }
    pods
}

/// Adds what is on disk to `usage` of the pod `uid` (`namespace`/`name`): its containers'
/// logs (`<pod logs dir>/<ns>_<name>_<uid>/<container>/`) and its emptyDir volumes
/// (`<pods dir>/<uid>/volumes/kubernetes.io~empty-dir`).
pub fn measure(
    usage: &mut PodUsage,
    pods_dir: &Path,
    pod_logs_dir: &Path,
    (namespace, name, uid): (&str, &str, &str),
) {
    let (bytes, inodes) = du(&pods_dir.join(uid).join("volumes/kubernetes.io~empty-dir"));
    usage.volumes_bytes = bytes;
    usage.volumes_inodes = inodes.saturating_sub(1);
    let logs = pod_logs_dir.join(format!("{namespace}_{name}_{uid}"));
    let mut log_inodes = 0;
    for c in &mut usage.containers {
        let (b, i) = du(&logs.join(&c.name));
        c.logs_bytes = Some(b);
        log_inodes += i;
    }
    usage.logs_inodes = log_inodes;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(uid: &str, name: &str, ws: u64, layer: Option<u64>) -> pb::ContainerStats {
        let labels = [(labels::POD_UID, uid), (labels::CONTAINER_NAME, name)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        pb::ContainerStats {
            attributes: Some(pb::ContainerAttributes {
                id: format!("{uid}-{name}"),
                labels,
                ..Default::default()
            }),
            cpu: None,
            memory: Some(pb::MemoryUsage {
                working_set_bytes: Some(pb::UInt64Value { value: ws }),
                ..Default::default()
            }),
            writable_layer: layer.map(|b| pb::FilesystemUsage {
                used_bytes: Some(pb::UInt64Value { value: b }),
                inodes_used: Some(pb::UInt64Value { value: 3 }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn container_stats_are_grouped_by_pod() {
        let mut foreign = stat("x", "y", 1, None);
        foreign.attributes.as_mut().unwrap().labels.clear();
        let pods = from_container_stats(&[
            stat("u1", "a", 10, Some(100)),
            stat("u1", "b", 20, None),
            stat("u2", "c", 5, Some(7)),
            foreign,
        ]);
        assert_eq!(pods.len(), 2);
        let u1 = &pods["u1"];
        assert_eq!(u1.memory(), 30);
        assert_eq!(u1.containers[0].rootfs_bytes, Some(100));
        assert_eq!(u1.containers[0].rootfs_inodes, Some(3));
        assert_eq!(u1.containers[1].rootfs_bytes, None);
    }

    #[test]
    fn logs_and_empty_dirs_are_measured_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let pods_dir = dir.path().join("pods");
        let logs_dir = dir.path().join("logs");
        let vol = pods_dir.join("u1/volumes/kubernetes.io~empty-dir/data");
        std::fs::create_dir_all(&vol).unwrap();
        std::fs::write(vol.join("f"), vec![1u8; 64 * 1024]).unwrap();
        let log = logs_dir.join("ns_p_u1/a");
        std::fs::create_dir_all(&log).unwrap();
        std::fs::write(log.join("0.log"), vec![1u8; 8192]).unwrap();
        let mut u = from_container_stats(&[stat("u1", "a", 0, Some(0))])
            .remove("u1")
            .unwrap();
        measure(&mut u, &pods_dir, &logs_dir, ("ns", "p", "u1"));
        assert!(u.volumes_bytes >= 64 * 1024, "{u:?}");
        assert_eq!(u.volumes_inodes, 2);
        assert!(u.containers[0].logs_bytes.unwrap() >= 8192, "{u:?}");
        assert_eq!(u.logs_inodes, 2);
    }
}
