//! Batches the commands of concurrent clients into one log entry (group commit at the
//! proposal level).
//!
//! Every entry costs the Raft core an append, a replication round and an apply, and a
//! follower's core waits for each append's fdatasync before it takes the next, so a proposal
//! per command would cap throughput near one command per fsync. The proposer takes the first waiting command, waits for a free in-flight slot (at most
//! [`MAX_IN_FLIGHT`] proposals are in Raft at once), then takes every command queued meanwhile
//! (up to [`MAX_BATCH_COMMANDS`] / [`MAX_BATCH_BYTES`]) into one proposal. With one client this
//! adds no delay; with many, a batch forms while the previous one is being synced.
//!
//! A command that finds the proposer idle (nothing queued, nothing in Raft) is proposed from
//! its caller's task as a batch of one, skipping the hops through the batching task and a
//! spawned proposal task: three task wake-ups of a one-client put.
//!
//! On a follower the batch is forwarded whole to the leader (see `forward`), which proposes it
//! as one entry and returns its outputs.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k3rs_storage::{Command, Output};
use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::forward::Forwarder;
use crate::peer::{ForwardRequest, ForwardResponse, RemoteError};
use crate::stages::{Stage, Stages};
use crate::types::Raft;
use crate::{Error, NodeId, Result};

/// Proposals in Raft at once: one being synced, one being built.
pub const MAX_IN_FLIGHT: usize = 2;
pub const MAX_BATCH_COMMANDS: usize = 1024;
/// Soft limit on the encoded size of a batch (one command may overshoot it).
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// Largest single command: a batch (at most `MAX_BATCH_BYTES` plus one command) must fit in
/// one WAL record.
pub const MAX_COMMAND_BYTES: usize = 32 << 20;
const QUEUE: usize = 4096;
/// How long a stopping proposer waits for its proposals in Raft to be answered.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

struct Pending {
    cmd: Command,
    /// When the command was handed to the proposer.
    queued: Instant,
    /// Encoded size of `cmd`.
    bytes: usize,
    reply: oneshot::Sender<Result<Output>>,
}

/// Handle for proposing commands. Cheap to clone.
#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::Sender<Pending>,
    batcher: Arc<Batcher>,
}

/// Encoded size of a command, without allocating.
fn encoded_len(cmd: &Command) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    rmp_serde::encode::write(&mut c, cmd).expect("commands always serialize");
    c.0
}

/// Maps a failed proposal to the error every command in it gets.
fn write_error(e: &RaftError<NodeId, ClientWriteError<NodeId, crate::types::NodeInfo>>) -> Error {
    match e {
        // The leader changed between our check and the proposal.
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => Error::NoLeader,
        RaftError::APIError(e @ ClientWriteError::ChangeMembershipError(_)) => {
            Error::Fatal(e.to_string())
        }
        RaftError::Fatal(e) => crate::node::fatal(e.clone()),
    }
}

impl Proposer {
    /// Starts the batching task; it stops on `cancel` or when every handle is dropped.
    /// `forwarder` sends batches to the leader when this node is not the leader (`None`: a
    /// member without peers, which answers `NoLeader` instead).
    /// The time commands wait in it and their batches' Raft writes go into `stages`.
    pub fn spawn(
        raft: Raft,
        forwarder: Option<Forwarder>,
        stages: Arc<Stages>,
        cancel: CancellationToken,
    ) -> (Proposer, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let batcher = Arc::new(Batcher {
            raft,
            forwarder,
            stages,
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            cancel,
        });
        let task = tokio::spawn(run(batcher.clone(), rx));
        (Proposer { tx, batcher }, task)
    }

    /// Proposes `cmd` and waits until it is committed and applied.
    ///
    /// # Errors
    /// A command larger than [`MAX_COMMAND_BYTES`] is refused with `Fatal` without being
    /// proposed (the front end enforces etcd's much smaller request limit first).
    pub async fn propose(&self, cmd: Command) -> Result<Output> {
        let bytes = encoded_len(&cmd);
        if bytes > MAX_COMMAND_BYTES {
            return Err(Error::Fatal(format!(
                "command of {bytes} bytes is too large"
            )));
        }
        if let Some(slot) = self.direct_slot() {
            return self.batcher.propose_one(cmd, slot).await;
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Pending {
                cmd,
                queued: Instant::now(),
                bytes,
                reply,
            })
            .await
            .map_err(|_| Error::Stopped)?;
        rx.await.map_err(|_| Error::Stopped)?
    }

    /// A slot for proposing from the caller's task, if the proposer is idle: nothing queued,
    /// nothing in Raft. Under load everything goes through the batching task, whose batches
    /// a one-command proposal holding a slot for a whole sync would only shrink.
    fn direct_slot(&self) -> Option<OwnedSemaphorePermit> {
        let idle = self.tx.capacity() == self.tx.max_capacity()
            && self.batcher.slots.available_permits() == MAX_IN_FLIGHT;
        if !idle || self.batcher.cancel.is_cancelled() {
            return None;
        }
        self.batcher.slots.clone().try_acquire_owned().ok()
    }
}

/// What proposals are made with, by the batching task and by callers proposing directly.
struct Batcher {
    raft: Raft,
    forwarder: Option<Forwarder>,
    stages: Arc<Stages>,
    /// The in-flight slots ([`MAX_IN_FLIGHT`]).
    slots: Arc<Semaphore>,
    cancel: CancellationToken,
}

impl Batcher {
    /// Proposes one command as its own batch, holding `slot` until it is answered (or the
    /// caller gives up: a dropped write frees its slot while its entry may still be in Raft,
    /// as a batch's never does; the next proposals then only overlap it).
    async fn propose_one(&self, cmd: Command, slot: OwnedSemaphorePermit) -> Result<Output> {
        self.stages.observe(Stage::ProposalQueue, Duration::ZERO);
        let mut outputs = self
            .propose_observed(vec![cmd], Instant::now(), slot)
            .await?;
        // One output: `propose_observed` checked the count.
        outputs
            .pop()
            .ok_or_else(|| Error::Fatal("no output for a command".to_owned()))
    }

    /// Proposes `cmds` (taken from their queue at `taken`), records the Raft write, frees
    /// `slot` and checks that every command got exactly one output.
    async fn propose_observed(
        &self,
        cmds: Vec<Command>,
        taken: Instant,
        slot: OwnedSemaphorePermit,
    ) -> Result<Vec<Output>> {
        let sent = cmds.len();
        let res = propose_batch(&self.raft, self.forwarder.as_ref(), cmds).await;
        self.stages.observe(Stage::RaftWrite, taken.elapsed());
        drop(slot);
        let outputs = res?;
        if outputs.len() != sent {
            return Err(Error::Fatal(format!(
                "{} outputs for {sent} commands",
                outputs.len()
            )));
        }
        Ok(outputs)
    }
}

async fn run(batcher: Arc<Batcher>, rx: mpsc::Receiver<Pending>) {
    let mut in_flight = JoinSet::new();
    batch_loop(&batcher, rx, &mut in_flight).await;
    // Let the proposals already in Raft answer their clients (a stopping Raft answers them
    // with `Stopped`); abort whatever is still stuck after the grace period.
    let drain = async { while in_flight.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(DRAIN_GRACE, drain).await;
}

/// Maps a failed forward to the error every command in it gets.
pub(crate) fn remote_error(e: RemoteError) -> Error {
    match e {
        RemoteError::NotLeader => Error::NoLeader,
        RemoteError::Stopped => Error::Stopped,
        RemoteError::Timeout => Error::Timeout,
        RemoteError::Fatal(m) => Error::Fatal(m),
        RemoteError::Membership(m) => Error::Fatal(m.to_string()),
    }
}

/// Proposes `cmds` here if this node leads, else forwards them to the leader.
async fn propose_batch(
    raft: &Raft,
    forwarder: Option<&Forwarder>,
    cmds: Vec<Command>,
) -> Result<Vec<Output>> {
    let leads = |f: &Forwarder| raft.metrics().borrow().current_leader == Some(f.id);
    let Some(f) = forwarder.filter(|f| !leads(f)) else {
        return propose_here(raft, cmds).await;
    };
    let req = ForwardRequest::Propose(cmds);
    match f.forward(&req, false).await {
        Ok(ForwardResponse::Outputs(out)) => Ok(out),
        Ok(other) => Err(Error::Fatal(format!(
            "unexpected answer to a proposal: {other:?}"
        ))),
        // This node won an election while the batch waited for a leader: the batch was not
        // carried out anywhere (`forward` retries only what certainly was not), so it is
        // proposed here instead of failing with "no leader".
        Err(RemoteError::NotLeader) if leads(f) => {
            let ForwardRequest::Propose(cmds) = req else {
                unreachable!("built above")
            };
            propose_here(raft, cmds).await
        }
        Err(e) => Err(remote_error(e)),
    }
}

async fn propose_here(raft: &Raft, cmds: Vec<Command>) -> Result<Vec<Output>> {
    match raft.client_write(cmds).await {
        Ok(resp) => Ok(resp.data),
        Err(e) => Err(write_error(&e)),
    }
}

async fn batch_loop(
    batcher: &Arc<Batcher>,
    mut rx: mpsc::Receiver<Pending>,
    in_flight: &mut JoinSet<()>,
) {
    loop {
        let first = tokio::select! {
            _ = batcher.cancel.cancelled() => return,
            p = rx.recv() => match p { Some(p) => p, None => return },
        };
        let Ok(slot) = batcher.slots.clone().acquire_owned().await else {
            return;
        };
        while in_flight.try_join_next().is_some() {}
        let mut bytes = first.bytes;
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_COMMANDS && bytes < MAX_BATCH_BYTES {
            let Ok(p) = rx.try_recv() else { break };
            bytes += p.bytes;
            batch.push(p);
        }
        let taken = Instant::now();
        for p in &batch {
            let waited = taken.saturating_duration_since(p.queued);
            batcher.stages.observe(Stage::ProposalQueue, waited);
        }
        let (cmds, replies): (Vec<Command>, Vec<_>) =
            batch.into_iter().map(|p| (p.cmd, p.reply)).unzip();
        let batcher = batcher.clone();
        in_flight.spawn(async move {
            match batcher.propose_observed(cmds, taken, slot).await {
                Ok(outputs) => {
                    for (reply, out) in replies.into_iter().zip(outputs) {
                        let _ = reply.send(Ok(out));
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(Err(clone_error(&e)));
                    }
                }
            }
        });
    }
}

/// `Error` is not `Clone` (it holds the store's error); every command of a failed batch gets
/// the same answer.
fn clone_error(e: &Error) -> Error {
    match e {
        Error::NoLeader => Error::NoLeader,
        Error::Stopped => Error::Stopped,
        Error::Timeout => Error::Timeout,
        Error::StorageFailed(cause) => Error::StorageFailed(cause.clone()),
        other => Error::Fatal(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use k3rs_storage::PutRequest;

    use super::*;

    #[test]
    fn encoded_len_is_exact() {
        let cmd = Command::Put(PutRequest {
            key: b"k".to_vec(),
            value: vec![1; 300],
            ..Default::default()
        });
        assert_eq!(encoded_len(&cmd), cmd.encode().len());
    }
}
