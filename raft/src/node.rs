//! [`Node`]: one Raft member with its WAL, state machine and lease clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k3rs_storage::{Command, Output, Store};
use openraft::error::{CheckIsLeaderError, Fatal, InitializeError, RaftError};
use openraft::{Config, ServerState, SnapshotPolicy};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::forward::Forwarder;
use crate::lessor::{self, Lessor};
use crate::log_store::LogStore;
use crate::membership::{self, MembershipError};
use crate::network::PeerNetwork;
use crate::peer::{
    Bootstrap, ForwardRequest, ForwardResponse, ForwardResult, PeerConfig, RemoteError,
};
use crate::peer_server::{self, NodeSlot};
use crate::proposer::{remote_error, Proposer};
use crate::read_index::{self, StartupFloor};
use crate::snapshot::SnapshotDir;
use crate::stages::{Stage, Stages};
use crate::state_machine::{self, StateMachine};
use crate::types::{LogId, NodeInfo, Raft};
use crate::wal::{Wal, DEFAULT_SEGMENT_SIZE};
use crate::{Error, Member, NodeConfig, NodeId, Result, Status};

/// How long `Node::start` waits for this node to become leader and catch up.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest snapshot chunk per peer RPC: snapshots stream in pieces this size.
const SNAPSHOT_CHUNK_BYTES: u64 = 1 << 20;
/// Entries per AppendEntries (each may hold a proposal batch of up to 4 MiB).
const MAX_PAYLOAD_ENTRIES: u64 = 64;
/// Time to send one snapshot chunk, or to send the last one and install the snapshot.
const INSTALL_SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(60);
/// Log entries kept behind a snapshot, so a briefly lagging follower catches up from the log.
const LOGS_KEPT_AFTER_SNAPSHOT: u64 = 64;

/// A running Raft member. Share it in an `Arc`.
///
/// # Shutdown
/// [`Node::shutdown`] is the orderly way out. Without it (a dropped `Arc`, a cancelled task,
/// a crash) nothing is lost: an output is only returned after its entry is fdatasync'ed in the
/// WAL and applied, and a restart replays the WAL past the store's applied index. `shutdown`
/// itself is idempotent and safe to re-run if a previous call was cancelled half-way.
pub struct Node {
    cfg: NodeConfig,
    raft: Raft,
    store: Arc<Store>,
    lessor: Arc<Lessor>,
    committed: Arc<Mutex<Option<LogId>>>,
    proposer: Proposer,
    cancel: CancellationToken,
    /// The proposer, the lease expiry loop, the peer service, the membership loops.
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Sends to the leader what only the leader can do; `None` without peers.
    forwarder: Option<Forwarder>,
    /// Cancelled when this member learns it was removed from the cluster.
    removed: CancellationToken,
    /// The peer configuration, and where the peer service listens once started.
    peer: Option<PeerConfig>,
    peer_service: tokio::sync::Mutex<Option<std::net::SocketAddr>>,
    node_slot: NodeSlot,
    /// The log at startup: a leader restored in its term reads no earlier (see `read_index`).
    startup: StartupFloor,
    /// Leader changes seen (see `leader_changes`).
    leader_changes: Arc<std::sync::atomic::AtomicU64>,
    /// The WAL's `fdatasync` durations.
    wal_fsync: Arc<crate::wal::FsyncHistogram>,
    /// Durations of the state machine's batch commits to sled.
    backend_commit: Arc<crate::wal::FsyncHistogram>,
    /// Durations of the other stages of the write path.
    stages: Arc<Stages>,
    /// Held while a snapshot is being built; shutdown waits for it.
    snapshot_builds: Arc<tokio::sync::Mutex<()>>,
    /// Writes in flight and failed.
    proposals: Arc<crate::proposal_stats::ProposalStats>,
}

fn raft_config(cfg: &NodeConfig) -> Result<Config> {
    let ms = |d: Duration| d.as_millis() as u64;
    let heartbeat = ms(cfg.heartbeat_interval).max(1);
    // openraft 0.9 lets a follower campaign only after `election_timeout_max` (the leader
    // lease) *plus* its random timeout in [min, max) without hearing from the leader. So that
    // a leader's loss is acted on after [E, 1.2 E) like etcd's election timeout E (not
    // [3 E, 4 E) as with min = E, max = 2 E), max = 0.6 E and min = 0.4 E.
    let election = ms(cfg.election_timeout);
    let min = (election * 2 / 5).max(heartbeat + 1);
    let max = (election * 3 / 5).max(min + 1);
    Config {
        cluster_name: "k3rs".into(),
        heartbeat_interval: heartbeat,
        election_timeout_min: min,
        election_timeout_max: max,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.snapshot_entries.max(1)),
        max_in_snapshot_log_to_keep: LOGS_KEPT_AFTER_SNAPSHOT.min(cfg.snapshot_entries),
        snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
        max_payload_entries: MAX_PAYLOAD_ENTRIES,
        install_snapshot_timeout: ms(INSTALL_SNAPSHOT_TIMEOUT),
        // A follower further behind than this gets a snapshot instead of the log.
        replication_lag_threshold: cfg.snapshot_entries.max(1) * 2,
        ..Default::default()
    }
    .validate()
    .map_err(|e| Error::Fatal(format!("raft config: {e}")))
}

pub(crate) fn fatal(e: Fatal<NodeId>) -> Error {
    match e {
        Fatal::Stopped => Error::Stopped,
        Fatal::StorageError(e) => Error::StorageFailed(e.to_string()),
        other => Error::Fatal(other.to_string()),
    }
}

fn storage_fatal(e: impl std::fmt::Display) -> Error {
    Error::Fatal(e.to_string())
}

impl Node {
    /// Opens the WAL and state machine, starts Raft, initializes a single-member cluster on
    /// first start, and returns once this node is leader and has applied every entry in its
    /// WAL (bounded by 10 s; `Error::Timeout` after that). No peer service: a cluster of one.
    pub async fn start(cfg: NodeConfig) -> Result<Arc<Node>> {
        Self::open(cfg, None).await
    }

    /// Like [`start`](Self::start), and serves the peer service on `peer.listen`, so that
    /// other members can be added and reach this one.
    ///
    /// # Readiness
    /// A member that is the only voter returns once it leads (as `start`). Otherwise it
    /// returns once a leader is known and the local state caught up with it, or after 10 s
    /// with a warning (a restarted member of a cluster whose majority is still down must keep
    /// running so that the others can reach it); reads and writes answer `NoLeader` until
    /// then. A joining member ([`Bootstrap::Join`]) waits for the leader to contact it.
    pub async fn start_member(cfg: NodeConfig, peer: PeerConfig) -> Result<Arc<Node>> {
        Self::open(cfg, Some(peer)).await
    }

    async fn open(mut cfg: NodeConfig, peer: Option<PeerConfig>) -> Result<Arc<Node>> {
        std::fs::create_dir_all(&cfg.data_dir).map_err(storage_fatal)?;
        // The store first: its lock keeps a second process away from the data dir before the
        // WAL recovery below may cut a (live) tail.
        let store = Arc::new(Store::open(&cfg.data_dir.join("sm"))?);
        let wal =
            Wal::open(&cfg.data_dir.join("wal"), DEFAULT_SEGMENT_SIZE).map_err(storage_fatal)?;
        let snapshots =
            SnapshotDir::open(&cfg.data_dir.join("snapshots")).map_err(storage_fatal)?;
        // A store behind the newest snapshot (lost `sm/`, or unflushed batches lost after the
        // WAL covering them was purged) is first brought up to the snapshot; the WAL has the rest.
        state_machine::restore_if_behind(&store, &snapshots).map_err(storage_fatal)?;
        let (applied, _) = state_machine::applied_meta(&store).map_err(storage_fatal)?;
        if let (purged @ Some(_), _) = wal.log_state() {
            if applied < purged {
                return Err(Error::Fatal(format!(
                    "the state machine (applied {applied:?}) is behind the WAL's purged prefix \
                     ({purged:?}) and no snapshot covers the gap"
                )));
            }
        }

        let me = NodeInfo {
            name: cfg.name.clone(),
            peer_urls: cfg.peer_urls.clone(),
            client_urls: cfg.client_urls.clone(),
            auto_promote: false,
        };
        let bootstrap = peer
            .as_ref()
            .map_or(Bootstrap::NewCluster, |p| p.bootstrap.clone());
        if let Some(p) = &peer {
            let fresh = wal.log_state().1.is_none();
            cfg.node_id = member_id(&cfg, p, fresh).await?;
        }
        if bootstrap == Bootstrap::ClusterReset {
            crate::cluster_reset::reset(&wal, cfg.node_id, me.clone())
                .map_err(|e| Error::Fatal(e.to_string()))?;
        }

        let startup = StartupFloor {
            term: wal.read_vote().map_or(0, |v| v.leader_id().term),
            last_index: wal.log_state().1.map_or(0, |l| l.index),
        };
        let lessor = Arc::new(Lessor::new(cfg.election_timeout));
        let wal = Arc::new(wal);
        let wal_fsync = wal.fsync_stats();
        let stages = Arc::new(Stages::default());
        let log_store = LogStore::new(wal.clone(), stages.clone());
        let committed = log_store.committed_handle();
        let sm = StateMachine::new(store.clone(), lessor.clone(), snapshots, stages.clone())
            .map_err(storage_fatal)?;
        let backend_commit = sm.commit_stats();
        let snapshot_builds = sm.snapshot_builds();
        let config = Arc::new(raft_config(&cfg)?);
        // `told_removed`: a peer said we were removed; `removed`: Raft was stopped because of it.
        let told_removed = CancellationToken::new();
        let removed = CancellationToken::new();
        let network = PeerNetwork::new(
            peer.as_ref().and_then(|p| p.tls.clone()),
            told_removed.clone(),
        );
        let raft = Raft::new(cfg.node_id, config, network.clone(), log_store, sm)
            .await
            .map_err(fatal)?;

        if bootstrap == Bootstrap::NewCluster && !raft.is_initialized().await.map_err(fatal)? {
            match raft.initialize(BTreeMap::from([(cfg.node_id, me)])).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(RaftError::APIError(e)) => return Err(Error::Fatal(e.to_string())),
                Err(RaftError::Fatal(e)) => return Err(fatal(e)),
            }
        }

        let cancel = CancellationToken::new();
        let slot = NodeSlot::default();
        let mut tasks = Vec::new();
        let forwarder = peer.as_ref().map(|_| Forwarder {
            id: cfg.node_id,
            raft: raft.clone(),
            network,
        });
        let (proposer, proposer_task) = Proposer::spawn(
            raft.clone(),
            forwarder.clone(),
            stages.clone(),
            cancel.child_token(),
        );
        tasks.push(proposer_task);
        let leader_changes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        tasks.push(tokio::spawn(crate::leader_changes::run(
            raft.clone(),
            leader_changes.clone(),
            cancel.child_token(),
        )));
        tasks.push(tokio::spawn(bound_wal(
            raft.clone(),
            wal,
            store.clone(),
            cancel.child_token(),
        )));
        if peer.is_some() {
            tasks.push(tokio::spawn(membership::run_auto_promote(
                raft.clone(),
                cfg.node_id,
                cancel.child_token(),
            )));
        }
        let node = Arc::new(Node {
            raft: raft.clone(),
            store: store.clone(),
            lessor: lessor.clone(),
            committed,
            proposer: proposer.clone(),
            cancel,
            tasks: Mutex::new(tasks),
            forwarder,
            removed,
            peer: peer.clone(),
            peer_service: tokio::sync::Mutex::new(None),
            node_slot: slot.clone(),
            startup,
            cfg,
            leader_changes,
            wal_fsync,
            backend_commit,
            stages,
            snapshot_builds,
            proposals: Arc::default(),
        });
        let _ = slot.set(Arc::downgrade(&node));
        // A cluster of one needs no peer port until a member is added (like k3s, which opens
        // 2380 only with an HA datastore): several single servers can share a machine.
        let members = node
            .raft
            .metrics()
            .borrow()
            .membership_config
            .nodes()
            .count();
        let needs_peers = members > 1 || matches!(bootstrap, Bootstrap::Join { .. });
        if needs_peers {
            if let Err(e) = node.ensure_peer_service().await {
                let _ = node.shutdown().await;
                return Err(e);
            }
        }
        if peer.is_some() {
            let watch = tokio::spawn(watch_removal(
                raft.clone(),
                node.cfg.node_id,
                told_removed,
                node.removed.clone(),
                node.cancel.clone(),
            ));
            node.lock_tasks().push(watch);
        }
        if let Err(e) = node.wait_ready().await {
            if node.is_only_voter() || peer.is_none() {
                let _ = node.shutdown().await;
                return Err(e);
            }
            tracing::warn!(error = %e, "no leader yet; serving anyway and waiting for peers");
        }
        if peer.is_some() {
            let publish = tokio::spawn(publish_self(node.clone_weak(), node.cancel.child_token()));
            node.lock_tasks().push(publish);
        }
        // Every lease gets a fresh deadline on start (the expiry loop does it again on every
        // leader change); until now the clock only knew the grants the WAL replay applied.
        lessor.refresh_from(&store)?;
        let expiry = tokio::spawn(lessor::run_expiry_loop(
            node.cfg.node_id,
            raft,
            proposer,
            store,
            lessor,
            node.cancel.child_token(),
        ));
        node.lock_tasks().push(expiry);
        Ok(node)
    }

    /// `Stopped` once shutdown began or this member was removed (forwarding would otherwise
    /// still reach the leader); `StorageFailed` once Raft stopped on a storage failure.
    fn check_running(&self) -> Result<()> {
        if self.cancel.is_cancelled() {
            return Err(Error::Stopped);
        }
        match crate::failure::current(&self.raft) {
            Some(cause) => Err(Error::StorageFailed(cause)),
            None => Ok(()),
        }
    }

    /// Resolves once Raft stopped because the datastore's files failed (a WAL append or
    /// fdatasync, the vote, a store apply, a snapshot: ENOSPC, EIO, …), with the cause; never
    /// after [`shutdown`](Self::shutdown). From then on every request answers
    /// [`Error::StorageFailed`]: the caller stops the process (fail-stop), so that a service
    /// manager restarts it and clients go elsewhere, instead of keeping a member that accepts
    /// connections it can only fail. A restart recovers every acknowledged write (see
    /// [`Node`]'s shutdown notes).
    pub async fn failed(&self) -> String {
        crate::failure::wait(&self.raft).await
    }

    fn lock_tasks(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn clone_weak(self: &Arc<Self>) -> std::sync::Weak<Node> {
        Arc::downgrade(self)
    }

    /// Whether this member is the only voter (a cluster of one).
    fn is_only_voter(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        let voters: Vec<NodeId> = m.membership_config.membership().voter_ids().collect();
        voters == [self.cfg.node_id]
    }

    /// Waits until a leader is known (this node, if it is the only voter) and the state
    /// machine reflects everything committed before.
    async fn wait_ready(&self) -> Result<()> {
        let id = self.cfg.node_id;
        let only_voter = self.is_only_voter() || self.forwarder.is_none();
        let ready = async {
            self.raft
                .wait(None)
                .metrics(
                    |m| {
                        if only_voter {
                            m.state == ServerState::Leader && m.current_leader == Some(id)
                        } else {
                            m.current_leader.is_some()
                        }
                    },
                    "leader",
                )
                .await
                .map_err(|e| Error::Fatal(e.to_string()))?;
            // The WAL replay: entries past the store's applied index are committed by this
            // term's first entry and applied before the read barrier returns.
            self.read_barrier().await
        };
        tokio::time::timeout(START_TIMEOUT, ready)
            .await
            .map_err(|_| Error::Timeout)?
    }

    /// Proposes a command, waits until it is committed (fdatasync'ed in the WAL) and applied,
    /// and returns its output.
    ///
    /// On a follower the command is forwarded to the leader (in a batch with concurrent ones).
    ///
    /// # Errors
    /// `NoLeader` if no leader is known (within the forwarding timeout), `Timeout` if the
    /// leader did not answer a forwarded proposal (it may have been applied), `Stopped` after
    /// shutdown, `Fatal` if Raft stopped on a storage error.
    pub async fn write(&self, cmd: Command) -> Result<Output> {
        let _pending = self.proposals.track();
        let out = match self.check_running() {
            Ok(()) => self.proposer.propose(cmd).await,
            Err(e) => Err(e),
        };
        if out.is_err() {
            self.proposals.record_failure();
        }
        out
    }

    /// Linearizable read barrier: returns once the local state machine reflects every write
    /// committed before the call (ReadIndex via `ensure_linearizable`).
    ///
    /// Reading the store without it may be stale: openraft acknowledges a write once applied,
    /// but another caller's committed write may not be applied yet; `ensure_linearizable`
    /// confirms leadership and waits for the apply of everything committed so far.
    ///
    /// On a follower this is the ReadIndex protocol: the leader confirms its leadership with a
    /// quorum and returns its commit index, and the follower waits until it has applied that
    /// index. (openraft's `ensure_linearizable` works on the leader only; reading a follower's
    /// state machine without this barrier may be stale.)
    pub async fn read_barrier(&self) -> Result<()> {
        self.check_running()?;
        if let Some(f) = &self.forwarder {
            if !self.is_leader() {
                return self.read_barrier_via_leader(f).await;
            }
        }
        self.read_barrier_local().await
    }

    async fn read_barrier_via_leader(&self, f: &Forwarder) -> Result<()> {
        let index = match f.forward(&ForwardRequest::ReadIndex, true).await {
            Ok(ForwardResponse::ReadIndex(i)) => i,
            Ok(other) => {
                return Err(Error::Fatal(format!(
                    "unexpected read index answer: {other:?}"
                )))
            }
            // We became leader meanwhile.
            Err(RemoteError::NotLeader) if self.is_leader() => {
                return self.read_barrier_local().await
            }
            Err(e) => return Err(remote_error(e)),
        };
        self.wait_applied(index).await
    }

    async fn read_barrier_local(&self) -> Result<()> {
        let index = match self.leader_read_index().await {
            Ok(index) => index,
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_))) => {
                return Err(Error::NoLeader)
            }
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_))) => {
                return Err(Error::NoLeader)
            }
            Err(RaftError::Fatal(e)) => return Err(fatal(e)),
        };
        self.wait_applied(index).await
    }

    /// ReadIndex on the leader: confirms leadership with a quorum and returns the index the
    /// state machine must reach (openraft's `get_read_log_id`, raised to the startup log for
    /// a leader restored in its term, see `read_index`).
    async fn leader_read_index(
        &self,
    ) -> std::result::Result<u64, RaftError<NodeId, CheckIsLeaderError<NodeId, NodeInfo>>> {
        let (read, _) = self.raft.get_read_log_id().await?;
        let term = self.raft.metrics().borrow().current_term;
        Ok(read_index::read_index(read, term, self.startup))
    }

    /// Waits until the state machine has applied `index` (bounded by the forwarding timeout).
    async fn wait_applied(&self, index: u64) -> Result<()> {
        self.raft
            .wait(Some(crate::forward::FORWARD_TIMEOUT))
            .applied_index_at_least(Some(index), "read index")
            .await
            .map(|_| ())
            .map_err(|e| match e {
                openraft::metrics::WaitError::Timeout(..) => Error::Timeout,
                openraft::metrics::WaitError::ShuttingDown => Error::Stopped,
            })
    }

    /// Reclaims disk space: defragments the store, then rebuilds this member's Raft snapshot
    /// from the result, so history removed by compaction does not linger in the previous
    /// snapshot file (the new one replaces it).
    pub async fn defragment(&self) -> Result<()> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.defragment())
            .await
            .map_err(|e| Error::Fatal(format!("defragment task: {e}")))??;
        self.raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| Error::Fatal(format!("triggering a snapshot: {e}")))
    }

    /// The applied state, for reads after `read_barrier` and for watches.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// This member's status now (etcd's Maintenance.Status).
    pub fn status(&self) -> Status {
        let m = self.raft.metrics().borrow().clone();
        let commit_index = self
            .committed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map_or(0, |c| c.index);
        let applied_index = m.last_applied.map_or(0, |l| l.index);
        Status {
            member_id: self.cfg.node_id,
            leader: m.current_leader,
            term: m.current_term,
            commit_index: commit_index.max(applied_index),
            applied_index,
        }
    }

    /// Leader changes this member has seen since it started (etcd's
    /// `etcd_server_leader_changes_seen_total`).
    pub fn leader_changes_seen(&self) -> u64 {
        self.leader_changes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Durations of the WAL's `fdatasync` calls since start (etcd's
    /// `etcd_disk_wal_fsync_duration_seconds`).
    pub fn wal_fsync_histogram(&self) -> crate::FsyncSnapshot {
        self.wal_fsync.snapshot()
    }

    /// Durations of the state machine's batch commits since start (etcd's
    /// `etcd_disk_backend_commit_duration_seconds`, same buckets).
    pub fn backend_commit_histogram(&self) -> crate::FsyncSnapshot {
        self.backend_commit.snapshot()
    }

    /// Records a stage timed outside the node (the front end's [`Stage::Request`]).
    pub fn observe_stage(&self, stage: Stage, took: Duration) {
        self.stages.observe(stage, took);
    }

    /// The histogram of every stage of the write path since start, by name: the
    /// [`Stage`]s plus `wal_fsync` and `backend_commit`.
    pub fn stage_histograms(&self) -> Vec<(&'static str, crate::FsyncSnapshot)> {
        let mut all = self.stages.snapshot();
        all.push(("wal_fsync", self.wal_fsync.snapshot()));
        all.push(("backend_commit", self.backend_commit.snapshot()));
        all
    }

    /// Writes in flight on this member (etcd's `etcd_server_proposals_pending`).
    pub fn proposals_pending(&self) -> u64 {
        self.proposals.pending()
    }

    /// Writes that failed since start (etcd's `etcd_server_proposals_failed_total`).
    pub fn proposals_failed(&self) -> u64 {
        self.proposals.failed()
    }

    /// Whether this node is the leader right now (it may be deposed the next moment).
    pub fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.cfg.node_id)
    }

    /// The members of the current configuration (etcd's MemberList).
    pub fn members(&self) -> Vec<Member> {
        let m = self.raft.metrics().borrow().membership_config.clone();
        let voters: Vec<NodeId> = m.voter_ids().collect();
        m.nodes()
            .map(|(id, n)| Member {
                id: *id,
                name: n.name.clone(),
                peer_urls: n.peer_urls.clone(),
                client_urls: n.client_urls.clone(),
                is_learner: !voters.contains(id),
            })
            .collect()
    }

    /// Renews a lease's deadline (leader only). Returns the TTL in seconds, or None if unknown.
    ///
    /// On a follower the keep-alive is forwarded to the leader, which holds the deadlines.
    pub async fn lease_keep_alive(&self, id: i64) -> Result<Option<i64>> {
        self.check_running()?;
        if let Some(f) = &self.forwarder {
            if !self.is_leader() {
                match f.forward(&ForwardRequest::LeaseKeepAlive(id), true).await {
                    Ok(ForwardResponse::LeaseTtl(ttl)) => return Ok(ttl),
                    Ok(other) => {
                        return Err(Error::Fatal(format!(
                            "unexpected keep-alive answer: {other:?}"
                        )))
                    }
                    Err(RemoteError::NotLeader) if self.is_leader() => {}
                    Err(e) => return Err(remote_error(e)),
                }
            }
        }
        self.lease_keep_alive_local(id).await
    }

    async fn lease_keep_alive_local(&self, id: i64) -> Result<Option<i64>> {
        // Like etcd, first make sure every committed grant is applied, so a lease granted just
        // before is known.
        self.read_barrier().await?;
        match self.store.lease(id)? {
            None => {
                self.lessor.forget(id);
                Ok(None)
            }
            Some(lease) => Ok(Some(self.lessor.keep_alive(id, lease.ttl))),
        }
    }

    /// Seconds left before the lease expires, or None if unknown.
    pub fn lease_remaining(&self, id: i64) -> Option<i64> {
        self.lessor.remaining(id)
    }

    /// etcd's minimum lease TTL (`ceil(1.5 × election timeout)` in whole heartbeats, seconds);
    /// the front end clamps grants to it.
    pub fn min_lease_ttl(&self) -> i64 {
        lessor::min_lease_ttl(self.cfg.election_timeout, self.cfg.heartbeat_interval)
    }

    /// Stops the lease loop, the peer service and Raft, and flushes the state machine
    /// (`StorageFailed` without flushing once Raft stopped on a storage failure). Idempotent.
    pub async fn shutdown(&self) -> Result<()> {
        self.cancel.cancel();
        let tasks = std::mem::take(&mut *self.lock_tasks());
        for t in tasks {
            let _ = t.await;
        }
        self.raft
            .shutdown()
            .await
            .map_err(|e| Error::Fatal(format!("raft task: {e}")))?;
        // A snapshot build runs on a blocking thread that outlives Raft's tasks.
        drop(self.snapshot_builds.lock().await);
        if let Some(cause) = crate::failure::current(&self.raft) {
            // Nothing acknowledged depends on the store (the WAL has it), and flushing a
            // store on a failed disk can wait forever.
            self.store.poison();
            return Err(Error::StorageFailed(cause));
        }
        self.store.flush()?;
        Ok(())
    }
}

/// Membership (the etcd Cluster API) and what members ask each other.
impl Node {
    /// The address the peer service listens on (`None` without peers, or while this is a
    /// cluster of one that never had a member added).
    pub async fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        *self.peer_service.lock().await
    }

    /// Starts the peer service unless it runs already.
    async fn ensure_peer_service(&self) -> Result<std::net::SocketAddr> {
        let Some(p) = &self.peer else {
            return Err(Error::Fatal("this member has no peer configuration".into()));
        };
        let mut started = self.peer_service.lock().await;
        if let Some(addr) = *started {
            return Ok(addr);
        }
        let (addr, task) = peer_server::spawn(
            p.listen,
            p.tls.as_ref(),
            self.raft.clone(),
            self.node_slot.clone(),
            self.cancel.child_token(),
        )
        .await
        .map_err(|e| Error::Fatal(format!("peer service on {}: {e}", p.listen)))?;
        self.lock_tasks().push(task);
        *started = Some(addr);
        Ok(addr)
    }

    /// Resolves once this member learns it was removed from the cluster; Raft is stopped by
    /// then and every request answers `Stopped`. A removed member must not come back with its
    /// data dir: it rejoins with a fresh one.
    pub async fn removed(&self) {
        self.removed.cancelled().await
    }

    /// Whether this member was removed from the cluster.
    pub fn is_removed(&self) -> bool {
        self.removed.is_cancelled()
    }

    /// Adds a member as a learner (etcd `MemberAdd` with `isLearner`). Returns once the change
    /// is committed; the learner catches up (from the log or a snapshot) once it runs.
    pub async fn add_learner(&self, id: NodeId, node: NodeInfo) -> Result<(), MembershipError> {
        self.membership_change(ForwardRequest::AddMember {
            id,
            node,
            learner: true,
        })
        .await
    }

    /// Adds a voting member (etcd `MemberAdd`): it joins as a learner and the leader promotes
    /// it once it has caught up (see `membership`).
    pub async fn add_voter(&self, id: NodeId, node: NodeInfo) -> Result<(), MembershipError> {
        self.membership_change(ForwardRequest::AddMember {
            id,
            node,
            learner: false,
        })
        .await
    }

    /// Promotes a caught-up learner to voter (etcd `MemberPromote`).
    pub async fn promote(&self, id: NodeId) -> Result<(), MembershipError> {
        self.membership_change(ForwardRequest::PromoteMember(id))
            .await
    }

    /// Removes a member (etcd `MemberRemove`).
    pub async fn remove_member(&self, id: NodeId) -> Result<(), MembershipError> {
        self.membership_change(ForwardRequest::RemoveMember(id))
            .await
    }

    /// Replaces a member's peer URLs (etcd `MemberUpdate`).
    pub async fn update_member(
        &self,
        id: NodeId,
        peer_urls: Vec<String>,
    ) -> Result<(), MembershipError> {
        let Some(mut node) = self
            .raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&id)
            .cloned()
        else {
            return Err(MembershipError::MemberNotFound);
        };
        node.peer_urls = peer_urls;
        self.membership_change(ForwardRequest::UpdateMember { id, node })
            .await
    }

    async fn membership_change(&self, req: ForwardRequest) -> Result<(), MembershipError> {
        if self.check_running().is_err() {
            return Err(MembershipError::Stopped);
        }
        if self.is_leader() {
            return self.membership_local(req).await;
        }
        let Some(f) = &self.forwarder else {
            return Err(MembershipError::NoLeader);
        };
        match f.forward(&req, false).await {
            Ok(_) => Ok(()),
            Err(RemoteError::Membership(e)) => Err(e),
            Err(RemoteError::NotLeader) => Err(MembershipError::NoLeader),
            Err(RemoteError::Timeout) => Err(MembershipError::Timeout),
            Err(RemoteError::Stopped) => Err(MembershipError::Stopped),
            Err(RemoteError::Fatal(m)) => Err(MembershipError::Failed(m)),
        }
    }

    async fn membership_local(&self, req: ForwardRequest) -> Result<(), MembershipError> {
        let (raft, me) = (&self.raft, self.cfg.node_id);
        match req {
            ForwardRequest::AddMember { id, node, learner } => {
                // The new member will ask us for its ID and hear from us as leader.
                self.ensure_peer_service()
                    .await
                    .map_err(|e| MembershipError::Failed(e.to_string()))?;
                membership::add(raft, me, id, node, learner).await
            }
            ForwardRequest::PromoteMember(id) => membership::promote(raft, me, id).await,
            ForwardRequest::RemoveMember(id) => membership::remove(raft, me, id).await,
            ForwardRequest::UpdateMember { id, node } => {
                membership::update(raft, me, id, node).await
            }
            other => Err(MembershipError::Failed(format!(
                "not a membership change: {other:?}"
            ))),
        }
    }

    /// Answers a request another member forwarded; only the leader does (never forwards again),
    /// except for `Members`.
    pub(crate) async fn serve_forwarded(&self, req: ForwardRequest) -> ForwardResult {
        if let ForwardRequest::Members = req {
            let m = self.raft.metrics().borrow().membership_config.clone();
            let nodes = m.membership().nodes().map(|(i, n)| (*i, n.clone()));
            return Ok(ForwardResponse::Members(nodes.collect()));
        }
        if !self.is_leader() {
            return Err(RemoteError::NotLeader);
        }
        let local = |e: Error| match e {
            Error::NoLeader => RemoteError::NotLeader,
            Error::Stopped => RemoteError::Stopped,
            Error::Timeout => RemoteError::Timeout,
            other => RemoteError::Fatal(other.to_string()),
        };
        match req {
            ForwardRequest::Propose(cmds) => match self.raft.client_write(cmds).await {
                Ok(resp) => Ok(ForwardResponse::Outputs(resp.data)),
                Err(RaftError::APIError(openraft::error::ClientWriteError::ForwardToLeader(_))) => {
                    Err(RemoteError::NotLeader)
                }
                Err(e) => Err(RemoteError::Fatal(e.to_string())),
            },
            ForwardRequest::ReadIndex => match self.leader_read_index().await {
                Ok(index) => Ok(ForwardResponse::ReadIndex(index)),
                Err(RaftError::APIError(_)) => Err(RemoteError::NotLeader),
                Err(RaftError::Fatal(e)) => Err(local(fatal(e))),
            },
            ForwardRequest::LeaseKeepAlive(id) => self
                .lease_keep_alive_local(id)
                .await
                .map(ForwardResponse::LeaseTtl)
                .map_err(local),
            change => match self.membership_local(change).await {
                Ok(()) => Ok(ForwardResponse::Done),
                Err(MembershipError::NoLeader) => Err(RemoteError::NotLeader),
                Err(e) => Err(RemoteError::Membership(e)),
            },
        }
    }
}

/// The WAL may grow to the larger of this and the store's size before a snapshot is taken
/// (then it is purged down to about one segment). Two segments, so that a purge can free one.
const WAL_SNAPSHOT_MIN_BYTES: u64 = 2 * DEFAULT_SEGMENT_SIZE;
/// How often the WAL's size is checked, and the least time between two snapshots it asks for.
const WAL_CHECK_INTERVAL: Duration = Duration::from_secs(1);
const WAL_SNAPSHOT_SPACING: Duration = Duration::from_secs(10);

/// Keeps the WAL's disk use bounded by the store's: requests a snapshot (after which openraft
/// purges the WAL) whenever the WAL holds more than `max(WAL_SNAPSHOT_MIN_BYTES, store size)`.
/// The entry-count policy alone does not bound bytes (an entry is a batch of up to 4 MiB), and
/// a byte threshold proportional to the store keeps the snapshot cost per written byte constant.
/// Runs on every member: each purges its own WAL.
async fn bound_wal(raft: Raft, wal: Arc<Wal>, store: Arc<Store>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(WAL_CHECK_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        // On a blocking thread: a batch being committed holds the store for up to seconds, and
        // this read waiting for it blocked one of the runtime's two workers.
        let in_use = {
            let store = store.clone();
            match tokio::task::spawn_blocking(move || store.db_size_in_use()).await {
                Ok(bytes) => bytes,
                Err(_) => continue,
            }
        };
        let (wal_bytes, limit) = (wal.disk_bytes(), in_use.max(WAL_SNAPSHOT_MIN_BYTES));
        if wal_bytes <= limit || last.is_some_and(|t| t.elapsed() < WAL_SNAPSHOT_SPACING) {
            continue;
        }
        tracing::debug!(
            wal_bytes,
            limit,
            "WAL outgrew the store: requesting a snapshot"
        );
        last = Some(tokio::time::Instant::now());
        if let Err(e) = raft.trigger().snapshot().await {
            tracing::warn!(error = %e, "requesting a snapshot");
            return;
        }
    }
}

const MEMBER_ID_FILE: &str = "member-id";
/// How long a joining member keeps asking existing members for its ID.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// This member's ID: the one kept in `<data_dir>/member-id`; else, for a fresh member joining
/// with peers to ask, the ID the cluster lists for our peer URL (then kept); else the
/// configured one.
async fn member_id(cfg: &NodeConfig, peer: &PeerConfig, fresh: bool) -> Result<NodeId> {
    let path = cfg.data_dir.join(MEMBER_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(s) => {
            return s
                .trim()
                .parse()
                .map_err(|e| Error::Fatal(format!("{}: {e}", path.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::Fatal(format!("{}: {e}", path.display()))),
    }
    let Bootstrap::Join { peers } = &peer.bootstrap else {
        return Ok(cfg.node_id);
    };
    if peers.is_empty() || !fresh {
        return Ok(cfg.node_id);
    }
    let id = discover_member_id(peers, &cfg.peer_urls, peer.tls.clone()).await?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, id.to_string())
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| Error::Fatal(format!("{}: {e}", path.display())))?;
    tracing::info!(
        member_id = id,
        "joined as the member the cluster lists for our peer URL"
    );
    Ok(id)
}

/// Asks the members at `peers` for the membership until one lists a member with one of
/// `mine` as peer URL (etcd: the new member finds its ID by its peer URLs).
async fn discover_member_id(
    peers: &[String],
    mine: &[String],
    tls: Option<crate::peer::PeerTls>,
) -> Result<NodeId> {
    let network = PeerNetwork::new(tls, CancellationToken::new());
    let deadline = tokio::time::Instant::now() + DISCOVERY_TIMEOUT;
    let mut last_error = String::from("no answer");
    loop {
        for url in peers {
            let info = NodeInfo {
                peer_urls: vec![url.clone()],
                ..Default::default()
            };
            let client = network.client(0, &info);
            match client
                .forward(&ForwardRequest::Members, Duration::from_secs(2))
                .await
            {
                Ok(Ok(ForwardResponse::Members(members))) => {
                    let found = members
                        .iter()
                        .find(|(_, n)| n.peer_urls.iter().any(|u| mine.contains(u)));
                    match found {
                        Some((id, _)) => return Ok(*id),
                        None => {
                            last_error = format!(
                                "{url} lists no member with peer URL {mine:?}: add this server \
                                 first (etcdctl member add)"
                            )
                        }
                    }
                }
                Ok(other) => last_error = format!("{url}: {other:?}"),
                Err(e) => last_error = format!("{url}: {e}"),
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Fatal(format!(
                "joining: could not learn this member's ID: {last_error}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Stops this member when it was removed: it is no longer in the membership it applied (it
/// was in it before), or a peer said so (`told`, see `peer_server`). Cancels `stop` (the
/// proposer and the other loops of the node), shuts Raft down, then cancels `removed`.
async fn watch_removal(
    raft: Raft,
    me: NodeId,
    told: CancellationToken,
    removed: CancellationToken,
    stop: CancellationToken,
) {
    let mut metrics = raft.metrics();
    let mut was_member = false;
    loop {
        {
            let m = metrics.borrow_and_update();
            let member = m.membership_config.membership().get_node(&me).is_some();
            if member {
                was_member = true;
            } else if was_member {
                break;
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = told.cancelled() => break,
            changed = metrics.changed() => if changed.is_err() { return },
        }
    }
    tracing::error!(
        "this member was removed from the cluster: stopping Raft; rejoin with a fresh data dir"
    );
    stop.cancel();
    let _ = raft.shutdown().await;
    removed.cancel();
}

/// Makes this member's name and client URLs in the membership match its configuration (a
/// member added by etcd's MemberAdd is listed with its peer URLs only, as "unstarted", until
/// it publishes them), retrying until it succeeds.
async fn publish_self(node: std::sync::Weak<Node>, cancel: CancellationToken) {
    loop {
        {
            let Some(node) = node.upgrade() else { return };
            let me = node.cfg.node_id;
            let current = node
                .raft
                .metrics()
                .borrow()
                .membership_config
                .membership()
                .get_node(&me)
                .cloned();
            let wanted = NodeInfo {
                name: node.cfg.name.clone(),
                peer_urls: node.cfg.peer_urls.clone(),
                client_urls: node.cfg.client_urls.clone(),
                auto_promote: current.as_ref().is_some_and(|c| c.auto_promote),
            };
            match current {
                Some(c) if c == wanted => return,
                Some(_) => {
                    let req = ForwardRequest::UpdateMember {
                        id: me,
                        node: wanted,
                    };
                    match node.membership_change(req).await {
                        Ok(()) => {
                            tracing::info!("published this member's name and URLs");
                            return;
                        }
                        Err(e) => tracing::debug!(error = %e, "publishing member attributes"),
                    }
                }
                None => {}
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Stop the proposer and the expiry loop (they own Raft handles); Raft itself stops with
        // its last handle.
        self.cancel.cancel();
    }
}
