//! How the eviction flags become the eviction manager's thresholds (upstream's
//! `ParseThresholdConfig`): the hard thresholds (`eviction-hard`, or upstream's defaults),
//! the soft ones (`eviction-soft`) each with its grace period (`eviction-soft-grace-period`,
//! `memory.available=1m30s,…`), every threshold of a signal with that signal's minimum
//! reclaim (`eviction-minimum-reclaim`, `memory.available=100Mi,nodefs.available=5%`), and an
//! `allocatableMemory.available` threshold for each hard `memory.available` one (the
//! kubelet's `--enforce-node-allocatable=pods` default). Pure.
//!
//! # Guarantees
//! - A soft threshold without a grace period is refused (as upstream); a grace period or
//!   minimum reclaim of a signal that has no soft threshold is accepted and unused.
//! - A grace period is a non-negative duration; a minimum reclaim a quantity ≥ 0 or a
//!   percentage > 0 % (and ≤ 100 %).

use std::time::Duration;

use k3rs_apimachinery::quantity::Quantity;

use super::threshold::{parse_eviction_hard, Signal, Threshold, ThresholdError, ThresholdValue};

/// `signal=value` pairs of a map flag, a later one of a signal winning.
fn pairs(text: &str) -> Result<Vec<(Signal, String, String)>, ThresholdError> {
    let mut out: Vec<(Signal, String, String)> = Vec::new();
    for statement in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = statement
            .split_once('=')
            .ok_or_else(|| ThresholdError::NotKeyValue(statement.to_string()))?;
        let (name, value) = (name.trim(), value.trim());
        let signal = Signal::parse(name)?;
        out.retain(|(s, _, _)| *s != signal);
        out.push((signal, name.to_string(), value.to_string()));
    }
    Ok(out)
}

/// Parses `eviction-soft-grace-period`: `signal=duration` pairs.
pub fn parse_grace_periods(text: &str) -> Result<Vec<(Signal, Duration)>, ThresholdError> {
    pairs(text)?
        .into_iter()
        .map(|(signal, name, value)| {
            k3rs_apimachinery::duration::parse(&value)
                .map(|d| (signal, d))
                .ok_or(ThresholdError::GracePeriod {
                    signal: name,
                    value,
                })
        })
        .collect()
}

/// Parses `eviction-minimum-reclaim`: `signal=quantity` or `signal=percentage` pairs.
pub fn parse_minimum_reclaims(text: &str) -> Result<Vec<(Signal, ThresholdValue)>, ThresholdError> {
    pairs(text)?
        .into_iter()
        .map(|(signal, name, value)| {
            let bad = || ThresholdError::MinReclaim {
                signal: name.clone(),
                value: value.clone(),
            };
            let parsed = match value.strip_suffix('%') {
                Some(p) => p
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|p| *p > 0.0 && *p <= 100.0)
                    .map(|p| ThresholdValue::Percentage(p / 100.0)),
                None => Quantity::parse(&value)
                    .filter(|q| !q.is_negative())
                    .map(|q| ThresholdValue::Quantity(q.value() as u64)),
            };
            parsed.map(|v| (signal, v)).ok_or_else(bad)
        })
        .collect()
}

/// The raw eviction flags, as given (`None`: not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvictionFlags {
    pub hard: Option<String>,
    pub soft: Option<String>,
    pub soft_grace_period: Option<String>,
    pub minimum_reclaim: Option<String>,
}

/// Which flag a refused value came from, with why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--kubelet-arg {key}: {error}")]
pub struct FlagError {
    pub key: &'static str,
    #[source]
    pub error: ThresholdError,
}

fn at(key: &'static str) -> impl Fn(ThresholdError) -> FlagError {
    move |error| FlagError { key, error }
}

/// Every threshold the flags set (upstream's `ParseThresholdConfig` with
/// `enforce-node-allocatable=pods`): hard, then soft, then the allocatable ones.
pub fn thresholds(flags: &EvictionFlags) -> Result<Vec<Threshold>, FlagError> {
    let hard = match &flags.hard {
        Some(h) => parse_eviction_hard(h).map_err(at("eviction-hard"))?,
        None => super::threshold::defaults(),
    };
    let soft = match &flags.soft {
        Some(s) => parse_eviction_hard(s).map_err(at("eviction-soft"))?,
        None => Vec::new(),
    };
    let grace = match &flags.soft_grace_period {
        Some(g) => parse_grace_periods(g).map_err(at("eviction-soft-grace-period"))?,
        None => Vec::new(),
    };
    let reclaim = match &flags.minimum_reclaim {
        Some(r) => parse_minimum_reclaims(r).map_err(at("eviction-minimum-reclaim"))?,
        None => Vec::new(),
    };
    let mut out = hard;
    for mut t in soft {
        let period = grace
            .iter()
            .find(|(s, _)| *s == t.signal)
            .map(|(_, d)| *d)
            .ok_or_else(|| FlagError {
                key: "eviction-soft",
                error: ThresholdError::SoftWithoutGracePeriod {
                    signal: t.signal.name().to_string(),
                },
            })?;
        t.grace_period = period;
        out.push(t);
    }
    for t in &mut out {
        t.min_reclaim = reclaim
            .iter()
            .find(|(s, _)| *s == t.signal)
            .map(|(_, v)| *v);
    }
    let allocatable: Vec<Threshold> = out
        .iter()
        .filter(|t| t.signal == Signal::MemoryAvailable && t.is_hard())
        .map(|t| Threshold {
            signal: Signal::AllocatableMemoryAvailable,
            ..*t
        })
        .collect();
    out.extend(allocatable);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: u64 = 1024 * 1024;

    fn flags(
        hard: Option<&str>,
        soft: Option<&str>,
        grace: Option<&str>,
        reclaim: Option<&str>,
    ) -> EvictionFlags {
        let s = |v: Option<&str>| v.map(str::to_string);
        EvictionFlags {
            hard: s(hard),
            soft: s(soft),
            soft_grace_period: s(grace),
            minimum_reclaim: s(reclaim),
        }
    }

    #[test]
    fn defaults_get_an_allocatable_memory_threshold() {
        let t = thresholds(&EvictionFlags::default()).unwrap();
        let mut expected = super::super::threshold::defaults();
        expected.push(Threshold::hard(
            Signal::AllocatableMemoryAvailable,
            ThresholdValue::Quantity(100 * MI),
        ));
        assert_eq!(t, expected);
    }

    #[test]
    fn soft_thresholds_take_their_grace_periods_and_reclaims_apply_to_every_threshold() {
        let t = thresholds(&flags(
            Some("memory.available<200Mi,pid.available<1000"),
            Some("memory.available<500Mi,nodefs.available<20%"),
            Some("memory.available=1m30s,nodefs.available=20s,imagefs.available=5m"),
            Some("memory.available=100Mi,nodefs.available=5%"),
        ))
        .unwrap();
        let reclaim = Some(ThresholdValue::Quantity(100 * MI));
        assert_eq!(
            t,
            vec![
                Threshold {
                    min_reclaim: reclaim,
                    ..Threshold::hard(Signal::MemoryAvailable, ThresholdValue::Quantity(200 * MI))
                },
                Threshold::hard(Signal::PidAvailable, ThresholdValue::Quantity(1000)),
                Threshold {
                    signal: Signal::MemoryAvailable,
                    value: ThresholdValue::Quantity(500 * MI),
                    grace_period: Duration::from_secs(90),
                    min_reclaim: reclaim,
                },
                Threshold {
                    signal: Signal::NodeFsAvailable,
                    value: ThresholdValue::Percentage(0.2),
                    grace_period: Duration::from_secs(20),
                    min_reclaim: Some(ThresholdValue::Percentage(0.05)),
                },
                // Only the hard memory threshold is copied for node allocatable.
                Threshold {
                    min_reclaim: reclaim,
                    ..Threshold::hard(
                        Signal::AllocatableMemoryAvailable,
                        ThresholdValue::Quantity(200 * MI)
                    )
                },
            ]
        );
        assert!(!t[2].is_hard() && t[0].is_hard());
    }

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        let err = |f: EvictionFlags| thresholds(&f).unwrap_err().to_string();
        assert_eq!(
            err(flags(None, Some("memory.available<1Gi"), None, None)),
            "--kubelet-arg eviction-soft: grace period must be specified for the soft eviction \
             threshold memory.available"
        );
        assert_eq!(
            err(flags(
                None,
                Some("memory.available<1Gi"),
                Some("nodefs.available=1m"),
                None
            )),
            "--kubelet-arg eviction-soft: grace period must be specified for the soft eviction \
             threshold memory.available"
        );
        assert_eq!(
            err(flags(None, None, Some("memory.available=-1s"), None)),
            "--kubelet-arg eviction-soft-grace-period: invalid eviction grace period specified \
             for memory.available: \"-1s\", must be a positive duration like 30s or 1m30s"
        );
        assert_eq!(
            err(flags(None, None, Some("memory.available"), None)),
            "--kubelet-arg eviction-soft-grace-period: \"memory.available\": expected SIGNAL=VALUE"
        );
        assert_eq!(
            err(flags(None, None, Some("swap.available=1m"), None)),
            "--kubelet-arg eviction-soft-grace-period: unsupported eviction signal \
             \"swap.available\" (k3rs supports: memory.available, allocatableMemory.available, \
             nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, \
             pid.available)"
        );
        for bad in [
            "nodefs.available=0%",
            "nodefs.available=-5Mi",
            "nodefs.available=lots",
            "nodefs.available=101%",
        ] {
            assert_eq!(
                err(flags(None, None, None, Some(bad))),
                format!(
                    "--kubelet-arg eviction-minimum-reclaim: eviction minimum reclaim \
                     nodefs.available: {:?} must be a quantity >= 0 or a percentage > 0%",
                    bad.split_once('=').unwrap().1
                )
            );
        }
        assert_eq!(
            err(flags(None, Some("memory.available>1Gi"), None, None)),
            "--kubelet-arg eviction-soft: \"memory.available>1Gi\": expected SIGNAL<VALUE (only \
             the < operator is supported)"
        );
        assert_eq!(
            parse_minimum_reclaims("memory.available=0").unwrap(),
            vec![(Signal::MemoryAvailable, ThresholdValue::Quantity(0))]
        );
    }
}
