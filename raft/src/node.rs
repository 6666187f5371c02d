//! [`Node`]: one Raft member with its WAL, state machine and lease clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k3rs_storage::{Command, Output, Store};
use openraft::error::{CheckIsLeaderError, Fatal, InitializeError, RaftError};
use openraft::{Config, ServerState, SnapshotPolicy};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::lessor::{self, Lessor};
use crate::log_store::LogStore;
use crate::network::NoPeers;
use crate::proposer::Proposer;
use crate::snapshot::SnapshotDir;
use crate::state_machine::{self, StateMachine};
use crate::types::{LogId, NodeInfo, Raft};
use crate::wal::{Wal, DEFAULT_SEGMENT_SIZE};
use crate::{Error, Member, NodeConfig, NodeId, Result, Status};

/// How long `Node::start` waits for this node to become leader and catch up.
const START_TIMEOUT: Duration = Duration::from_secs(10);
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
    /// The proposer and the lease expiry loop.
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

fn raft_config(cfg: &NodeConfig) -> Result<Config> {
    let ms = |d: Duration| d.as_millis() as u64;
    let election = ms(cfg.election_timeout).max(2);
    Config {
        cluster_name: "k3rs".into(),
        heartbeat_interval: ms(cfg.heartbeat_interval).max(1),
        election_timeout_min: election,
        election_timeout_max: election * 2,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.snapshot_entries.max(1)),
        max_in_snapshot_log_to_keep: LOGS_KEPT_AFTER_SNAPSHOT.min(cfg.snapshot_entries),
        ..Default::default()
    }
    .validate()
    .map_err(|e| Error::Fatal(format!("raft config: {e}")))
}

fn fatal(e: Fatal<NodeId>) -> Error {
    match e {
        Fatal::Stopped => Error::Stopped,
        other => Error::Fatal(other.to_string()),
    }
}

fn storage_fatal(e: impl std::fmt::Display) -> Error {
    Error::Fatal(e.to_string())
}

impl Node {
    /// Opens the WAL and state machine, starts Raft, initializes a single-member cluster on
    /// first start, and returns once this node is leader and has applied every entry in its
    /// WAL (bounded by 10 s; `Error::Timeout` after that).
    pub async fn start(cfg: NodeConfig) -> Result<Arc<Node>> {
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

        let lessor = Arc::new(Lessor::new(cfg.election_timeout));
        let log_store = LogStore::new(Arc::new(wal));
        let committed = log_store.committed_handle();
        let sm =
            StateMachine::new(store.clone(), lessor.clone(), snapshots).map_err(storage_fatal)?;
        let config = Arc::new(raft_config(&cfg)?);
        let raft = Raft::new(cfg.node_id, config, NoPeers, log_store, sm)
            .await
            .map_err(fatal)?;

        if !raft.is_initialized().await.map_err(fatal)? {
            let me = NodeInfo {
                name: cfg.name.clone(),
                peer_urls: cfg.peer_urls.clone(),
                client_urls: cfg.client_urls.clone(),
            };
            match raft.initialize(BTreeMap::from([(cfg.node_id, me)])).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(RaftError::APIError(e)) => return Err(Error::Fatal(e.to_string())),
                Err(RaftError::Fatal(e)) => return Err(fatal(e)),
            }
        }

        let cancel = CancellationToken::new();
        let (proposer, proposer_task) = Proposer::spawn(raft.clone(), cancel.child_token());
        let node = Arc::new(Node {
            raft: raft.clone(),
            store: store.clone(),
            lessor: lessor.clone(),
            committed,
            proposer: proposer.clone(),
            cancel,
            tasks: Mutex::new(vec![proposer_task]),
            cfg,
        });
        if let Err(e) = node.wait_ready().await {
            let _ = node.shutdown().await;
            return Err(e);
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
        node.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(expiry);
        Ok(node)
    }

    /// Waits until this node leads and its state machine reflects its whole log.
    async fn wait_ready(&self) -> Result<()> {
        let id = self.cfg.node_id;
        let ready = async {
            self.raft
                .wait(None)
                .metrics(
                    |m| m.state == ServerState::Leader && m.current_leader == Some(id),
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
    /// # Errors
    /// `NoLeader` if this node is not the leader (forwarding comes with HA), `Stopped` after
    /// shutdown, `Fatal` if Raft stopped on a storage error.
    pub async fn write(&self, cmd: Command) -> Result<Output> {
        self.proposer.propose(cmd).await
    }

    /// Linearizable read barrier: returns once the local state machine reflects every write
    /// committed before the call (ReadIndex via `ensure_linearizable`).
    ///
    /// Reading the store without it may be stale: openraft acknowledges a write once applied,
    /// but another caller's committed write may not be applied yet; `ensure_linearizable`
    /// confirms leadership and waits for the apply of everything committed so far.
    pub async fn read_barrier(&self) -> Result<()> {
        match self.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_))) => {
                Err(Error::NoLeader)
            }
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_))) => {
                Err(Error::NoLeader)
            }
            Err(RaftError::Fatal(e)) => Err(fatal(e)),
        }
    }

    /// The applied state, for reads after `read_barrier` and for watches.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

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

    /// Whether this node is the leader right now (it may be deposed the next moment).
    pub fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.cfg.node_id)
    }

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
    pub async fn lease_keep_alive(&self, id: i64) -> Result<Option<i64>> {
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

    /// Stops the lease loop and Raft, and flushes the state machine. Idempotent.
    pub async fn shutdown(&self) -> Result<()> {
        self.cancel.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for t in tasks {
            let _ = t.await;
        }
        self.raft
            .shutdown()
            .await
            .map_err(|e| Error::Fatal(format!("raft task: {e}")))?;
        self.store.flush()?;
        Ok(())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Stop the proposer and the expiry loop (they own Raft handles); Raft itself stops with
        // its last handle.
        self.cancel.cancel();
    }
}
