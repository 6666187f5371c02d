//! The Maintenance service: Status, Snapshot, Defragment, Alarm, Hash, HashKV, MoveLeader.

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::pin::Pin;

use futures::Stream;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use k3rs_storage::{AlarmAction, AlarmMember, AlarmType, Command, CommandResponse, Output};

use super::error::{ApiResult, EtcdError};
use super::{Api, ETCD_VERSION};
use k3rs_datastore::etcdpb as pb;

/// Bytes per snapshot message.
pub const SNAPSHOT_CHUNK: usize = 64 * 1024;
/// Snapshot data is zero-padded to a multiple of this: etcdctl recognizes the sha256 trailer
/// by `size % 512 == 32` (bbolt's page alignment). A bbolt database is a whole number of
/// pages, so nothing is added to it.
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
        errors.extend(store.alarms(AlarmType::None).iter().map(alarm_status_text));
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

    /// etcd's `HashKV` (see `k3rs_storage::hash`): equal to etcd 3.4's for the same history.
    async fn hash_kv(&self, revision: i64) -> ApiResult<pb::HashKvResponse> {
        let node = self.api.node().clone();
        let at = tokio::task::spawn_blocking(move || node.store().hash_kv(revision))
            .await
            .map_err(|e| EtcdError::Internal(format!("hash task: {e}")))???;
        let hash_revision = if revision > 0 {
            revision
        } else {
            at.current_revision
        };
        Ok(pb::HashKvResponse {
            header: self.api.header(at.current_revision),
            hash: at.hash,
            compact_revision: at.compact_revision,
            hash_revision,
        })
    }

    /// etcd's `Hash`, over the buckets k3rs holds (see `k3rs_storage::hash`).
    async fn hash(&self) -> ApiResult<pb::HashResponse> {
        let node = self.api.node().clone();
        let (revision, hash) = tokio::task::spawn_blocking(move || node.store().hash())
            .await
            .map_err(|e| EtcdError::Internal(format!("hash task: {e}")))??;
        Ok(pb::HashResponse {
            header: self.api.header(revision),
            hash,
        })
    }

    /// etcd's `Alarm`: GET reads the replicated alarm list (linearizably), ACTIVATE and
    /// DEACTIVATE go through Raft. Like etcd 3.4's, the answer has no header.
    async fn alarm(&self, req: pb::AlarmRequest) -> ApiResult<pb::AlarmResponse> {
        use pb::alarm_request::AlarmAction as Action;
        let alarm = AlarmType::from_number(i64::from(req.alarm)).ok_or_else(|| {
            EtcdError::InvalidArgument(format!("unknown alarm type {}", req.alarm))
        })?;
        let action = match Action::try_from(req.action) {
            Ok(Action::Get) => {
                self.api.node().read_barrier().await?;
                return Ok(pb::AlarmResponse {
                    header: None,
                    alarms: alarm_members(&self.api.node().store().alarms(alarm)),
                });
            }
            Ok(Action::Activate) => AlarmAction::Activate,
            Ok(Action::Deactivate) => AlarmAction::Deactivate,
            Err(_) => {
                return Err(EtcdError::InvalidArgument(format!(
                    "unknown alarm action {}",
                    req.action
                )))
            }
        };
        let cmd = Command::Alarm {
            action,
            member_id: req.member_id,
            alarm,
        };
        let Output { result, .. } = self.api.node().write(cmd).await?;
        match result? {
            CommandResponse::Alarm { alarms } => {
                if action == AlarmAction::Activate && !alarms.is_empty() {
                    tracing::warn!(member = %format!("{:x}", req.member_id), ?alarm, "alarm raised");
                }
                Ok(pb::AlarmResponse {
                    header: None,
                    alarms: alarm_members(&alarms),
                })
            }
            other => Err(EtcdError::Internal(format!("alarm produced {other:?}"))),
        }
    }

    async fn defragment(&self) -> ApiResult<pb::DefragmentResponse> {
        self.api.node().defragment().await?;
        Ok(pb::DefragmentResponse {
            header: self.api.current_header(),
        })
    }

    /// Writes the store as an etcd backend database (bbolt, etcd's v3 layout; see
    /// [`crate::snapshot::etcd_format`]) into an unlinked scratch file; returns it rewound,
    /// with its size.
    async fn stage_snapshot(&self) -> ApiResult<(File, u64)> {
        let node = self.api.node().clone();
        let dir = self.api.config().scratch_dir.clone();
        tokio::task::spawn_blocking(move || -> ApiResult<(File, u64)> {
            let (mut file, path) = scratch_file(&dir)?;
            let _ = fs::remove_file(&path); // unlinked: nothing is left behind on a crash
            let applied = node.status().applied_index;
            crate::snapshot::etcd_format::write_db(node.store(), &mut file, applied).map_err(
                |e| match e {
                    crate::snapshot::etcd_format::FormatError::Store(e) => EtcdError::from(e),
                    e => EtcdError::Internal(format!("snapshot: {e}")),
                },
            )?;
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

/// The store's alarms as etcd's `AlarmMember`s.
fn alarm_members(alarms: &[AlarmMember]) -> Vec<pb::AlarmMember> {
    alarms
        .iter()
        .map(|m| pb::AlarmMember {
            member_id: m.member_id,
            alarm: i32::from(m.alarm.number()),
        })
        .collect()
}

/// How etcd's Status lists a raised alarm among its errors (the protobuf text form of
/// `AlarmMember`, as Go prints it).
pub fn alarm_status_text(m: &AlarmMember) -> String {
    let name = match m.alarm {
        AlarmType::None => "NONE",
        AlarmType::Nospace => "NOSPACE",
        AlarmType::Corrupt => "CORRUPT",
    };
    format!("memberID:{} alarm:{name} ", m.member_id)
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
        Ok(Response::new(
            MaintenanceService::alarm(self, request.into_inner()).await?,
        ))
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
        Ok(Response::new(MaintenanceService::hash(self).await?))
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
    use std::io::Write;

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
    fn alarms_in_status_as_etcd_prints_them() {
        let m = AlarmMember {
            member_id: 42,
            alarm: AlarmType::Nospace,
        };
        assert_eq!(alarm_status_text(&m), "memberID:42 alarm:NOSPACE ");
    }

    #[test]
    fn empty_snapshot_is_just_the_trailer() {
        let msgs = collect(0);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].blob, Sha256::digest(b"").to_vec());
    }
}
