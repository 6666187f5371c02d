//! The Maintenance service: Status, Snapshot, Defragment, Alarm, MoveLeader.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;

use futures::Stream;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::error::{ApiResult, EtcdError};
use super::{Api, ETCD_VERSION};
use k3rs_datastore::etcdpb as pb;

/// Bytes per snapshot message.
pub const SNAPSHOT_CHUNK: usize = 64 * 1024;
/// Snapshot data is zero-padded to a multiple of this: etcdctl recognizes the sha256 trailer
/// by `size % 512 == 32` (bbolt's page alignment). Our snapshot format ends with its own
/// length-checked trailer, so readers ignore the padding.
pub const SNAPSHOT_ALIGN: u64 = 512;

/// etcd's `Maintenance` gRPC service over the local member.
#[derive(Debug, Clone)]
pub struct MaintenanceService {
    api: Api,
}

impl MaintenanceService {
    /// The service over `api`.
    pub fn new(api: Api) -> MaintenanceService {
        MaintenanceService { api }
    }

    fn status(&self) -> pb::StatusResponse {
        let node = self.api.node();
        let st = node.status();
        let store = node.store();
        let is_learner = node
            .members()
            .iter()
            .any(|m| m.id == st.member_id && m.is_learner);
        let mut errors = Vec::new();
        if st.leader.is_none() {
            errors.push(EtcdError::NoLeader.message());
        }
        pb::StatusResponse {
            header: self.api.current_header(),
            version: ETCD_VERSION.to_string(),
            db_size: i64::try_from(store.db_size()).unwrap_or(i64::MAX),
            leader: st.leader.unwrap_or(0),
            raft_index: st.commit_index,
            raft_term: st.term,
            raft_applied_index: st.applied_index,
            errors,
            db_size_in_use: i64::try_from(store.db_size_in_use()).unwrap_or(i64::MAX),
            is_learner,
            ..Default::default()
        }
    }

    /// A hash of every key at `revision` (0 = current): equal on members that agree. Unlike
    /// etcd's, it covers the latest version of each key, not every retained revision.
    async fn hash_kv(&self, revision: i64) -> ApiResult<pb::HashKvResponse> {
        let node = self.api.node().clone();
        let (hash_revision, hash) =
            tokio::task::spawn_blocking(move || -> ApiResult<(i64, u32)> {
                let store = node.store();
                let revision = if revision > 0 {
                    revision
                } else {
                    store.current_revision()
                };
                let all = k3rs_storage::RangeRequest {
                    key: vec![0],
                    range_end: vec![0],
                    revision,
                    ..Default::default()
                };
                let (_, resp) = store.range(&all)??;
                Ok((revision, kv_hash(&resp.kvs)))
            })
            .await
            .map_err(|e| EtcdError::Internal(format!("hash task: {e}")))??;
        Ok(pb::HashKvResponse {
            header: self.api.current_header(),
            hash,
            compact_revision: self.api.node().store().compact_revision(),
            hash_revision,
        })
    }

    async fn defragment(&self) -> ApiResult<pb::DefragmentResponse> {
        self.api.node().defragment().await?;
        Ok(pb::DefragmentResponse {
            header: self.api.current_header(),
        })
    }

    /// Exports the store into an unlinked scratch file; returns it rewound, with its size.
    async fn stage_snapshot(&self) -> ApiResult<(File, u64)> {
        let node = self.api.node().clone();
        let dir = self.api.config().scratch_dir.clone();
        tokio::task::spawn_blocking(move || -> ApiResult<(File, u64)> {
            let (mut file, path) = scratch_file(&dir)?;
            let _ = fs::remove_file(&path); // unlinked: nothing is left behind on a crash
            {
                let mut w = BufWriter::new(&mut file);
                node.store().export_snapshot(&mut w)?;
                w.flush().map_err(io_error)?;
            }
            let len = file.seek(SeekFrom::End(0)).map_err(io_error)?;
            let size = padded_len(len);
            file.set_len(size).map_err(io_error)?;
            file.seek(SeekFrom::Start(0)).map_err(io_error)?;
            Ok((file, size))
        })
        .await
        .map_err(|e| EtcdError::Internal(format!("snapshot task: {e}")))?
    }
}

/// The first 4 bytes of a sha256 over every key's fields, in key order.
fn kv_hash(kvs: &[k3rs_storage::KeyValue]) -> u32 {
    let mut h = Sha256::new();
    for kv in kvs {
        for n in [kv.create_revision, kv.mod_revision, kv.version, kv.lease] {
            h.update(n.to_be_bytes());
        }
        for bytes in [&kv.key, &kv.value] {
            h.update((bytes.len() as u64).to_be_bytes());
            h.update(bytes);
        }
    }
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// `len` rounded up to [`SNAPSHOT_ALIGN`].
pub fn padded_len(len: u64) -> u64 {
    len.div_ceil(SNAPSHOT_ALIGN) * SNAPSHOT_ALIGN
}

fn io_error(e: std::io::Error) -> EtcdError {
    EtcdError::Internal(format!("snapshot: {e}"))
}

fn scratch_file(dir: &Path) -> ApiResult<(File, PathBuf)> {
    fs::create_dir_all(dir).map_err(io_error)?;
    let path = dir.join(format!(
        "snapshot-{}.tmp",
        hex::encode(rand::random::<[u8; 8]>())
    ));
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io_error)?;
    Ok((file, path))
}

/// Streams `file` (`size` bytes) as etcd does: chunks with `remaining_bytes`, then one last
/// message holding the sha256 of everything sent (etcd's integrity trailer).
fn stream_snapshot(
    mut file: File,
    size: u64,
    header: Option<pb::ResponseHeader>,
    tx: mpsc::Sender<Result<pb::SnapshotResponse, Status>>,
) {
    let mut hasher = Sha256::new();
    let mut sent = 0u64;
    let mut buf = vec![0u8; SNAPSHOT_CHUNK];
    let mut first = true;
    while sent < size {
        let want = usize::try_from(size - sent)
            .unwrap_or(usize::MAX)
            .min(SNAPSHOT_CHUNK);
        if let Err(e) = file.read_exact(&mut buf[..want]) {
            let _ = tx.blocking_send(Err(Status::from(io_error(e))));
            return;
        }
        hasher.update(&buf[..want]);
        sent += want as u64;
        let msg = pb::SnapshotResponse {
            header: if first { header } else { None },
            remaining_bytes: size - sent,
            blob: buf[..want].to_vec(),
            version: ETCD_VERSION.to_string(),
        };
        first = false;
        if tx.blocking_send(Ok(msg)).is_err() {
            return;
        }
    }
    let trailer = pb::SnapshotResponse {
        header: if first { header } else { None },
        remaining_bytes: 0,
        blob: hasher.finalize().to_vec(),
        version: ETCD_VERSION.to_string(),
    };
    let _ = tx.blocking_send(Ok(trailer));
}

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<pb::SnapshotResponse, Status>> + Send>>;

#[tonic::async_trait]
impl pb::maintenance_server::Maintenance for MaintenanceService {
    async fn alarm(
        &self,
        request: Request<pb::AlarmRequest>,
    ) -> Result<Response<pb::AlarmResponse>, Status> {
        // No alarms are ever raised (space stays bounded by compaction + defragmentation), so
        // GET lists none and ACTIVATE/DEACTIVATE have nothing to change.
        let _ = request;
        Ok(Response::new(pb::AlarmResponse {
            header: self.api.current_header(),
            alarms: Vec::new(),
        }))
    }

    async fn status(
        &self,
        _: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        Ok(Response::new(MaintenanceService::status(self)))
    }

    async fn defragment(
        &self,
        _: Request<pb::DefragmentRequest>,
    ) -> Result<Response<pb::DefragmentResponse>, Status> {
        Ok(Response::new(MaintenanceService::defragment(self).await?))
    }

    async fn hash(
        &self,
        _: Request<pb::HashRequest>,
    ) -> Result<Response<pb::HashResponse>, Status> {
        Err(EtcdError::Unimplemented("k3rs: Hash is not supported").into())
    }

    async fn hash_kv(
        &self,
        request: Request<pb::HashKvRequest>,
    ) -> Result<Response<pb::HashKvResponse>, Status> {
        Ok(Response::new(
            MaintenanceService::hash_kv(self, request.into_inner().revision).await?,
        ))
    }

    type SnapshotStream = SnapshotStream;

    async fn snapshot(
        &self,
        _: Request<pb::SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        let header = self.api.current_header();
        let (file, size) = self.stage_snapshot().await?;
        let (tx, rx) = mpsc::channel(4);
        tokio::task::spawn_blocking(move || stream_snapshot(file, size, header, tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn move_leader(
        &self,
        request: Request<pb::MoveLeaderRequest>,
    ) -> Result<Response<pb::MoveLeaderResponse>, Status> {
        let st = self.api.node().status();
        // A single member is already the leader: moving leadership to itself is a no-op.
        if request.get_ref().target_id != st.member_id || st.leader != Some(st.member_id) {
            return Err(EtcdError::BadLeaderTransferee.into());
        }
        Ok(Response::new(pb::MoveLeaderResponse {
            header: self.api.current_header(),
        }))
    }

    async fn downgrade(
        &self,
        _: Request<pb::DowngradeRequest>,
    ) -> Result<Response<pb::DowngradeResponse>, Status> {
        Err(EtcdError::Unimplemented("k3rs: Downgrade is not supported").into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(size: usize) -> Vec<pb::SnapshotResponse> {
        let dir = tempfile::tempdir().unwrap();
        let (mut file, _path) = scratch_file(dir.path()).unwrap();
        let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).unwrap();
        file.seek(SeekFrom::Start(0)).unwrap();
        let (tx, mut rx) = mpsc::channel(1024);
        stream_snapshot(
            file,
            size as u64,
            Some(pb::ResponseHeader {
                revision: 7,
                ..Default::default()
            }),
            tx,
        );
        let mut out = Vec::new();
        while let Ok(m) = rx.try_recv() {
            out.push(m.unwrap());
        }
        out
    }

    #[test]
    fn snapshot_stream_chunks_then_sha256() {
        let size = SNAPSHOT_CHUNK * 2 + 10;
        let msgs = collect(size);
        assert_eq!(msgs.len(), 4);
        assert_eq!(msgs[0].header.as_ref().unwrap().revision, 7);
        let remaining: Vec<u64> = msgs.iter().map(|m| m.remaining_bytes).collect();
        assert_eq!(remaining, vec![(SNAPSHOT_CHUNK + 10) as u64, 10, 0, 0]);
        let data: Vec<u8> = msgs[..3].iter().flat_map(|m| m.blob.clone()).collect();
        assert_eq!(data.len(), size);
        assert_eq!(msgs[3].blob, Sha256::digest(&data).to_vec());
    }

    #[test]
    fn padding_makes_the_trailer_recognizable() {
        assert_eq!(padded_len(0), 0);
        assert_eq!(padded_len(1), 512);
        assert_eq!(padded_len(512), 512);
        assert_eq!(padded_len(671), 1024);
        assert_eq!((padded_len(671) + 32) % 512, 32);
    }

    #[test]
    fn kv_hash_covers_every_field() {
        let kv = k3rs_storage::KeyValue {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            mod_revision: 2,
            ..Default::default()
        };
        let base = kv_hash(std::slice::from_ref(&kv));
        assert_eq!(base, kv_hash(std::slice::from_ref(&kv)));
        assert_ne!(
            base,
            kv_hash(&[k3rs_storage::KeyValue {
                mod_revision: 3,
                ..kv.clone()
            }])
        );
        assert_ne!(
            base,
            kv_hash(&[k3rs_storage::KeyValue {
                value: b"w".to_vec(),
                ..kv.clone()
            }])
        );
        // Field boundaries matter: ("kv", "") differs from ("k", "v").
        assert_ne!(
            base,
            kv_hash(&[k3rs_storage::KeyValue {
                key: b"kv".to_vec(),
                value: Vec::new(),
                ..kv
            }])
        );
    }

    #[test]
    fn empty_snapshot_is_just_the_trailer() {
        let msgs = collect(0);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].blob, Sha256::digest(b"").to_vec());
    }
}
