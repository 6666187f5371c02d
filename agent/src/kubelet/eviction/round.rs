//! What one eviction round decides from the observations (upstream's `synchronize` up to the
//! ranking), as a state machine: [`RoundState::step`] takes the thresholds, the observations
//! and the time and returns the pressure to report and the thresholds to reclaim for. Pure.
//!
//! # Guarantees
//! - A threshold counts as met while its signal's available amount is below it, and a
//!   threshold that drove eviction last round stays met until its minimum reclaim is also
//!   available (`eviction-minimum-reclaim`).
//! - Node conditions follow every met threshold at once (soft ones before their grace period
//!   is over, as upstream), held for the transition period ([`super::pressure`]).
//! - A threshold is reclaimed for only once it has been met without a break for its grace
//!   period (zero for hard thresholds); a break resets its clock.
//! - The thresholds to reclaim for come memory first (`memory.available`,
//!   `allocatableMemory.available`), the others in their configured order
//!   (`byEvictionPriority`).
//! - An evicted pod's grace period ([`pod_grace_period`]) is 1 s for a hard threshold
//!   (upstream's `immediateEvictionGracePeriodSeconds`) and, for a soft one, the pod's
//!   `terminationGracePeriodSeconds` (30 s when unset) capped by `eviction-max-pod-grace-period`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::pressure::PressureState;
use super::signals::{thresholds_met, Observations};
use super::threshold::Threshold;
use crate::kubelet::node_status::conditions::Pressure;

/// Upstream's `immediateEvictionGracePeriodSeconds`.
pub const HARD_EVICTION_GRACE: Duration = Duration::from_secs(1);

/// What the eviction manager remembers between rounds.
#[derive(Debug, Clone, Default)]
pub struct RoundState {
    /// The thresholds that drove eviction last round (grace periods over).
    met: Vec<Threshold>,
    /// When each threshold met now was first met.
    first_observed: Vec<(Threshold, Instant)>,
    conditions: PressureState,
}

/// A round's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// The pressure the node reports.
    pub pressure: Pressure,
    /// The thresholds to reclaim for, in eviction priority (empty: nothing to do).
    pub reclaim: Vec<Threshold>,
}

/// Memory first, the others in their configured order (upstream's `byEvictionPriority`).
pub fn by_eviction_priority(met: &mut [Threshold]) {
    met.sort_by_key(|t| !t.signal.is_memory());
}

impl RoundState {
    /// One round at `now` for `observations` of the node.
    pub fn step(
        &mut self,
        thresholds: &[Threshold],
        observations: &Observations,
        now: Instant,
        transition: Duration,
    ) -> Round {
        let mut met = thresholds_met(thresholds, observations, false);
        for t in thresholds_met(&self.met, observations, true) {
            if !met.contains(&t) {
                met.push(t);
            }
        }
        self.first_observed = met
            .iter()
            .map(|t| {
                let at = self
                    .first_observed
                    .iter()
                    .find(|(f, _)| f == t)
                    .map_or(now, |(_, at)| *at);
                (*t, at)
            })
            .collect();
        let pressure = self.conditions.update(&met, now, transition);
        let mut reclaim: Vec<Threshold> = self
            .first_observed
            .iter()
            .filter(|(t, at)| now.saturating_duration_since(*at) >= t.grace_period)
            .map(|(t, _)| *t)
            .collect();
        self.met = reclaim.clone();
        by_eviction_priority(&mut reclaim);
        Round { pressure, reclaim }
    }
}

/// The grace period of a pod evicted for `threshold`.
pub fn pod_grace_period(threshold: &Threshold, pod: &Pod, max_pod_grace: Duration) -> Duration {
    if threshold.is_hard() {
        return HARD_EVICTION_GRACE;
    }
    let own = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30)
        .max(0) as u64;
    Duration::from_secs(own).min(max_pod_grace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::eviction::threshold::{Signal, ThresholdValue};
    use serde_json::json;

    const MI: u64 = 1024 * 1024;

    fn soft(signal: Signal, value: u64, grace: u64) -> Threshold {
        Threshold {
            grace_period: Duration::from_secs(grace),
            ..Threshold::hard(signal, ThresholdValue::Quantity(value))
        }
    }

    fn observe(memory: u64, pids: u64) -> Observations {
        let mut o = Observations::default();
        o.insert(Signal::MemoryAvailable, memory, 1000 * MI);
        o.insert(Signal::PidAvailable, pids, 10_000);
        o
    }

    fn signals(r: &Round) -> Vec<Signal> {
        r.reclaim.iter().map(|t| t.signal).collect()
    }

    #[test]
    fn a_soft_threshold_is_reclaimed_for_only_after_its_grace_period_without_a_break() {
        let t = [soft(Signal::MemoryAvailable, 200 * MI, 30)];
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let period = Duration::from_secs(60);
        let mut s = RoundState::default();
        let memory = Pressure {
            memory: true,
            ..Pressure::default()
        };
        // (second, available MiB, pressure reported, reclaiming)
        let steps = [
            (0, 500, Pressure::default(), false),
            (10, 150, memory, false),
            (39, 150, memory, false),
            (40, 150, memory, true),
            (50, 150, memory, true),
            // A break resets the clock (the condition stays for the transition period).
            (60, 250, memory, false),
            (70, 150, memory, false),
            (99, 150, memory, false),
            (100, 150, memory, true),
            (200, 500, Pressure::default(), false),
        ];
        for (second, available, pressure, reclaiming) in steps {
            let r = s.step(&t, &observe(available * MI, 5000), at(second), period);
            assert_eq!(r.pressure, pressure, "at {second}s");
            assert_eq!(!r.reclaim.is_empty(), reclaiming, "at {second}s");
        }
    }

    #[test]
    fn a_threshold_that_drove_eviction_holds_until_its_minimum_reclaim_is_available() {
        let hard = Threshold {
            min_reclaim: Some(ThresholdValue::Quantity(100 * MI)),
            ..Threshold::hard(Signal::MemoryAvailable, ThresholdValue::Quantity(200 * MI))
        };
        let t0 = Instant::now();
        let mut s = RoundState::default();
        let step = |s: &mut RoundState, available: u64, sec: u64| {
            s.step(
                &[hard],
                &observe(available * MI, 5000),
                t0 + Duration::from_secs(sec),
                Duration::ZERO,
            )
        };
        // Above the threshold plus the reclaim, but never met: nothing.
        assert!(step(&mut s, 250, 0).reclaim.is_empty());
        assert_eq!(signals(&step(&mut s, 150, 10)), [Signal::MemoryAvailable]);
        // 250 MiB is past the threshold but not past threshold + reclaim: still reclaiming.
        let r = step(&mut s, 250, 20);
        assert_eq!(signals(&r), [Signal::MemoryAvailable]);
        assert!(r.pressure.memory);
        let r = step(&mut s, 300, 30);
        assert!(r.reclaim.is_empty() && !r.pressure.memory, "{r:?}");
        // Once resolved, 250 MiB is fine again.
        assert!(step(&mut s, 250, 40).reclaim.is_empty());
    }

    #[test]
    fn memory_comes_first_and_pid_pressure_is_reported() {
        let t = [
            Threshold::hard(Signal::PidAvailable, ThresholdValue::Quantity(1000)),
            Threshold::hard(Signal::NodeFsAvailable, ThresholdValue::Percentage(0.1)),
            Threshold::hard(
                Signal::AllocatableMemoryAvailable,
                ThresholdValue::Quantity(100 * MI),
            ),
            Threshold::hard(Signal::MemoryAvailable, ThresholdValue::Quantity(100 * MI)),
        ];
        let mut o = observe(50 * MI, 10);
        o.insert(Signal::NodeFsAvailable, 5, 100);
        o.insert(Signal::AllocatableMemoryAvailable, MI, 300 * MI);
        let r = RoundState::default().step(&t, &o, Instant::now(), Duration::ZERO);
        assert_eq!(
            signals(&r),
            [
                Signal::AllocatableMemoryAvailable,
                Signal::MemoryAvailable,
                Signal::PidAvailable,
                Signal::NodeFsAvailable
            ]
        );
        assert_eq!(
            r.pressure,
            Pressure {
                memory: true,
                disk: true,
                pid: true
            }
        );
        let pids_only =
            RoundState::default().step(&t[..1], &observe(0, 999), Instant::now(), Duration::ZERO);
        assert_eq!(
            pids_only.pressure,
            Pressure {
                pid: true,
                ..Pressure::default()
            }
        );
    }

    #[test]
    fn evicted_pods_get_one_second_or_their_grace_capped_by_the_maximum() {
        let pod = |grace: Option<i64>| -> Pod {
            serde_json::from_value(json!({"spec": {"containers": [],
                "terminationGracePeriodSeconds": grace}}))
            .unwrap()
        };
        let hard = Threshold::hard(Signal::MemoryAvailable, ThresholdValue::Quantity(1));
        let soft = soft(Signal::MemoryAvailable, 1, 60);
        let secs = Duration::from_secs;
        // (threshold, pod grace, max pod grace, expected)
        let cases = [
            (hard, Some(60), 0, 1),
            (hard, None, 600, 1),
            (soft, Some(60), 20, 20),
            (soft, Some(10), 20, 10),
            (soft, None, 600, 30),
            (soft, Some(60), 0, 0),
            (soft, Some(-5), 20, 0),
        ];
        for (t, grace, max, expected) in cases {
            assert_eq!(
                pod_grace_period(&t, &pod(grace), secs(max)),
                secs(expected),
                "{t:?} {grace:?} {max}"
            );
        }
    }
}
