//! `k3rs etcd-snapshot save|ls|delete|prune`, run on a server machine. `save` asks the local
//! server's etcd API (Maintenance `Snapshot`) with the server's own etcd client certificate
//! from `<data-dir>/server/tls/etcd`; the others work on the snapshot directory alone.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{dir, file, retention, Error, Result};
use k3rs_datastore::etcdpb as pb;
use k3rs_datastore::EtcdTls;

/// Largest snapshot message accepted (the server sends 64 KiB chunks).
const MAX_MESSAGE: usize = 16 << 20;

/// How to reach the local server's etcd API.
#[derive(Debug, Clone)]
pub struct Local {
    /// `--data-dir` of the server.
    pub data_dir: PathBuf,
    /// `https://<etcd client address>:<port>`.
    pub endpoint: String,
}

impl Local {
    fn tls(&self) -> EtcdTls {
        let d = self.data_dir.join("server").join("tls").join("etcd");
        EtcdTls {
            ca_file: Some(d.join("server-ca.crt")),
            cert_file: Some(d.join("client.crt")),
            key_file: Some(d.join("client.key")),
        }
    }
}

/// Takes a snapshot through the local server into `dir` as `<base>-<node>-<now>`; returns
/// what k3s prints.
pub async fn save(local: &Local, dir: &Path, base: &str, node_name: &str) -> Result<String> {
    let unreachable = |e: &dyn std::fmt::Display| {
        Error::Take(format!(
            "the local server's etcd API at {}: {e}",
            local.endpoint
        ))
    };
    let channel =
        k3rs_datastore::etcd_channel(&local.endpoint, &local.tls()).map_err(|e| unreachable(&e))?;
    let mut client = pb::maintenance_client::MaintenanceClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE);
    let mut stream = client
        .snapshot(pb::SnapshotRequest {})
        .await
        .map_err(|e| unreachable(&e.message()))?
        .into_inner();
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let name = retention::snapshot_name(base, node_name, now);
    let handle = tokio::runtime::Handle::current();
    let (dir, node_name) = (dir.to_path_buf(), node_name.to_string());
    let (path, meta) = tokio::task::spawn_blocking(move || {
        file::save(&dir, &name, &node_name, now, |f| {
            handle.block_on(async {
                while let Some(msg) = stream
                    .message()
                    .await
                    .map_err(|e| Error::Take(e.message().to_string()))?
                {
                    f.write_all(&msg.blob)
                        .map_err(|e| Error::Take(format!("writing the snapshot: {e}")))?;
                }
                Ok(())
            })
        })
    })
    .await
    .map_err(|e| Error::Take(format!("snapshot task: {e}")))??;
    Ok(format!(
        "Saving etcd snapshot to {}\nSnapshot {} saved (revision {}, {} bytes).\n",
        path.display(),
        meta.name,
        meta.revision,
        meta.size
    ))
}

/// The `ls` table of `dir`.
pub fn ls(dir: &Path) -> Result<String> {
    let mut rows = Vec::new();
    for name in dir::list_names(dir)? {
        let path = dir.join(&name);
        let Ok(stat) = std::fs::metadata(&path) else {
            continue; // deleted meanwhile
        };
        let created = match file::read_metadata(&path) {
            Ok(Some(m)) => m.created,
            _ => stat
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs() as i64),
        };
        let abs = std::path::absolute(&path).unwrap_or(path);
        rows.push(retention::Listed {
            name,
            location: format!("file://{}", abs.display()),
            size: stat.len(),
            created,
        });
    }
    Ok(retention::table(&rows))
}

/// Deletes the named snapshots of `dir`; every name is tried, and the missing ones are an
/// error at the end.
pub fn delete(dir: &Path, names: &[String]) -> Result<String> {
    let mut out = String::new();
    let mut missing = Vec::new();
    for name in names {
        let base = Path::new(name).file_name().unwrap_or_default();
        let path = dir.join(base);
        if base.is_empty() || !path.is_file() {
            missing.push(name.clone());
            continue;
        }
        file::delete(&path)?;
        out.push_str(&format!("Snapshot {name} deleted.\n"));
    }
    if !missing.is_empty() {
        return Err(Error::NotFound(format!(
            "{out}no snapshot named {} in {}",
            missing.join(", "),
            dir.display()
        )));
    }
    Ok(out)
}

/// Keeps the newest `keep` snapshots of `<base>-<node>-` in `dir`.
pub fn prune(dir: &Path, base: &str, node_name: &str, keep: usize) -> Result<String> {
    let pruned = dir::prune(dir, base, node_name, keep)?;
    Ok(pruned
        .iter()
        .map(|n| format!("Snapshot {n} deleted.\n"))
        .collect())
}
