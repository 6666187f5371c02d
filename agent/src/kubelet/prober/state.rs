//! The decision core of one probe worker (upstream's `worker.doProbe`), without I/O: given what
//! the pod's status says of the container, whether to probe now, and what the results store
//! holds after a probe's outcome.
//!
//! # Guarantees (upstream's semantics)
//! - A new container ID drops the old ID's result and starts over (readiness: not ready until
//!   the first success; liveness: alive; startup: not started) and lifts a hold.
//! - A container that is not running is not ready (its result becomes `Failure`); the worker
//!   ends once it terminated in a pod that never restarts, or once the pod is terminal.
//! - While the pod is being deleted, liveness and startup report `Success` and the worker ends.
//! - Nothing is probed before `initialDelaySeconds` since the container started; liveness and
//!   readiness wait for the startup probe to pass, and the startup probe stops once it passed.
//! - A result is stored only after `successThreshold` equal successes or `failureThreshold`
//!   equal failures in a row; an error (no outcome) changes nothing.
//! - After a liveness or startup failure is stored, the worker holds (probes nothing) until the
//!   container is replaced.

use k8s_openapi::api::core::v1::Probe;
use k8s_openapi::jiff::Timestamp;

use crate::kubelet::plan::ProbeResult;

/// Which of a container's probes a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

impl ProbeKind {
    /// How upstream names the probe in events (`Liveness probe failed: …`).
    pub fn label(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Startup => "Startup",
        }
    }

    pub const ALL: [ProbeKind; 3] = [
        ProbeKind::Liveness,
        ProbeKind::Readiness,
        ProbeKind::Startup,
    ];
}

/// A probe's timing and thresholds, with the API's defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub initial_delay_secs: i64,
    pub period_secs: u64,
    pub timeout_secs: u64,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

impl Settings {
    /// The API's defaults: period 10 s, timeout 1 s, thresholds 1 and 3 (values below 1 count
    /// as 1; liveness and startup always use a success threshold of 1).
    pub fn of(p: &Probe, kind: ProbeKind) -> Settings {
        let at_least_one = |v: Option<i32>, default: i32| v.unwrap_or(default).max(1);
        let success = match kind {
            ProbeKind::Readiness => at_least_one(p.success_threshold, 1),
            _ => 1,
        };
        Settings {
            initial_delay_secs: p.initial_delay_seconds.unwrap_or(0).max(0) as i64,
            period_secs: at_least_one(p.period_seconds, 10) as u64,
            timeout_secs: at_least_one(p.timeout_seconds, 1) as u64,
            success_threshold: success as u32,
            failure_threshold: at_least_one(p.failure_threshold, 3) as u32,
        }
    }
}

/// What the pod's latest status says of the probed container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerView {
    /// The runtime's container ID (without the `containerd://` prefix).
    pub id: String,
    /// When it started, if it runs.
    pub running_since: Option<Timestamp>,
    /// It terminated (rather than waits).
    pub terminated: bool,
    /// `containerStatuses[].started`.
    pub started: bool,
}

/// What the pod says around the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodFacts {
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// The phase is `Succeeded` or `Failed`.
    pub terminal: bool,
    /// `restartPolicy: Never`.
    pub restart_never: bool,
}

/// A change to the results store, keyed by container ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    Set(String, ProbeResult),
    /// Forget the ID's result (the initial value: no entry).
    Remove(String),
}

/// What the worker does before its next tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run the probe now.
    Probe,
    /// Nothing to probe this tick.
    Wait,
    /// The worker is done.
    Stop,
}

/// One worker's memory between ticks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Worker {
    pub container_id: Option<String>,
    last: Option<ProbeResult>,
    run: u32,
    on_hold: bool,
}

impl Worker {
    /// Decides whether to probe now; `updates` to apply to the results store first.
    pub fn before_probe(
        &mut self,
        kind: ProbeKind,
        settings: &Settings,
        pod: PodFacts,
        container: Option<&ContainerView>,
        now: Timestamp,
    ) -> (Next, Vec<Update>) {
        let mut updates = Vec::new();
        if pod.terminal {
            return (Next::Stop, updates);
        }
        let Some(c) = container.filter(|c| !c.id.is_empty()) else {
            return (Next::Wait, updates);
        };
        if self.container_id.as_deref() != Some(c.id.as_str()) {
            if let Some(old) = self.container_id.replace(c.id.clone()) {
                updates.push(Update::Remove(old));
            }
            self.on_hold = false;
            self.last = None;
            self.run = 0;
        }
        if self.on_hold {
            return (Next::Wait, updates);
        }
        let Some(since) = c.running_since else {
            updates.push(Update::Set(c.id.clone(), ProbeResult::Failure));
            let next = if c.terminated && pod.restart_never {
                Next::Stop
            } else {
                Next::Wait
            };
            return (next, updates);
        };
        if pod.deleting && kind != ProbeKind::Readiness {
            updates.push(Update::Set(c.id.clone(), ProbeResult::Success));
            return (Next::Stop, updates);
        }
        if now.duration_since(since).as_secs() < settings.initial_delay_secs {
            return (Next::Wait, updates);
        }
        let gated = if c.started {
            kind == ProbeKind::Startup
        } else {
            kind != ProbeKind::Startup
        };
        if gated {
            return (Next::Wait, updates);
        }
        (Next::Probe, updates)
    }

    /// Counts a probe's outcome (`None`: the probe errored) and says what to store, if anything.
    pub fn after_probe(
        &mut self,
        kind: ProbeKind,
        settings: &Settings,
        outcome: Option<ProbeResult>,
    ) -> Option<Update> {
        let result = outcome?;
        let id = self.container_id.clone()?;
        if self.last == Some(result) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(result);
            self.run = 1;
        }
        let threshold = match result {
            ProbeResult::Success => settings.success_threshold,
            ProbeResult::Failure => settings.failure_threshold,
        };
        if self.run < threshold {
            return None;
        }
        if result == ProbeResult::Failure && kind != ProbeKind::Readiness {
            self.on_hold = true;
            self.run = 0;
        }
        Some(Update::Set(id, result))
    }
}

#[cfg(test)]
mod tests;
