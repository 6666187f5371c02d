//! The node conditions the eviction manager reports (upstream's `nodeConditionsLastObservedAt`
//! and `nodeConditionsObservedSince`): a condition is set while one of its signals' thresholds
//! is met and stays set until none has been met for the pressure transition period
//! (`--kubelet-arg=eviction-pressure-transition-period`, 5m), so it does not flap. Pure.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::threshold::{Condition, Threshold};
use crate::kubelet::node_status::conditions::Pressure;

/// When each condition was last observed.
#[derive(Debug, Clone, Default)]
pub struct PressureState {
    last_observed: BTreeMap<Condition, Instant>,
}

impl PressureState {
    /// Records the thresholds met at `now` and returns the pressure to report.
    pub fn update(&mut self, met: &[Threshold], now: Instant, transition: Duration) -> Pressure {
        for t in met {
            self.last_observed.insert(t.signal.condition(), now);
        }
        self.last_observed
            .retain(|_, at| now.saturating_duration_since(*at) < transition || *at == now);
        Pressure {
            memory: self.last_observed.contains_key(&Condition::MemoryPressure),
            disk: self.last_observed.contains_key(&Condition::DiskPressure),
            pid: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::eviction::threshold::{Signal, ThresholdValue};

    fn t(signal: Signal) -> Threshold {
        Threshold {
            signal,
            value: ThresholdValue::Percentage(0.1),
        }
    }

    #[test]
    fn conditions_stay_for_the_transition_period() {
        let period = Duration::from_secs(300);
        let t0 = Instant::now();
        let mut s = PressureState::default();
        assert_eq!(s.update(&[], t0, period), Pressure::default());
        let disk = Pressure {
            disk: true,
            ..Pressure::default()
        };
        assert_eq!(s.update(&[t(Signal::ImageFsAvailable)], t0, period), disk);
        assert_eq!(s.update(&[], t0 + Duration::from_secs(299), period), disk);
        let both = s.update(
            &[t(Signal::MemoryAvailable)],
            t0 + Duration::from_secs(299),
            period,
        );
        assert_eq!(
            both,
            Pressure {
                memory: true,
                disk: true,
                pid: false
            }
        );
        assert_eq!(
            s.update(&[], t0 + Duration::from_secs(300), period),
            Pressure {
                memory: true,
                ..Pressure::default()
            }
        );
        assert_eq!(
            s.update(&[], t0 + Duration::from_secs(600), period),
            Pressure::default()
        );
        // A zero period reports exactly what is met now.
        assert_eq!(
            s.update(
                &[t(Signal::NodeFsInodesFree)],
                t0 + Duration::from_secs(601),
                Duration::ZERO
            ),
            disk
        );
        assert_eq!(
            s.update(&[], t0 + Duration::from_secs(602), Duration::ZERO),
            Pressure::default()
        );
    }
}
