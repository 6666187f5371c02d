//! Eviction thresholds (upstream's `evictionapi.Threshold` and `parseThresholdStatements`):
//! `--kubelet-arg=eviction-hard=memory.available<100Mi,nodefs.available<10%` (and
//! `eviction-soft`, same syntax), each a signal, the `<` operator and a quantity or a
//! percentage of the resource's capacity. How soft thresholds, grace periods and minimum
//! reclaims are put together is [`super::config`]. Pure.
//!
//! # Guarantees
//! - Without the flag the hard thresholds are upstream's defaults ([`defaults`]); the flag
//!   replaces them all, as the kubelet's flag does (a signal left out has no threshold).
//! - `0` and `0%` disable a signal; a negative value, a percentage above 100 %, an unknown
//!   signal or another operator is refused, never ignored.
//! - A threshold with a zero grace period is a hard one (upstream's `isHardEvictionThreshold`).

use std::time::Duration;

use k3rs_apimachinery::quantity::Quantity;

/// What the eviction manager observes (upstream's eviction signals k3rs supports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    /// Memory not in the node's working set (`memory.available`).
    MemoryAvailable,
    /// Node allocatable memory not in the pods' working set (`allocatableMemory.available`,
    /// the `kubepods` cgroup's), added for every hard `memory.available` threshold as the
    /// kubelet does with `--enforce-node-allocatable=pods` (its default).
    AllocatableMemoryAvailable,
    /// Free bytes of the kubelet's filesystem, the data dir's (`nodefs.available`).
    NodeFsAvailable,
    /// Free inodes of that filesystem (`nodefs.inodesFree`).
    NodeFsInodesFree,
    /// Free bytes of the runtime's image filesystem (`imagefs.available`).
    ImageFsAvailable,
    /// Free inodes of the image filesystem (`imagefs.inodesFree`).
    ImageFsInodesFree,
    /// Process IDs left (`pid.available`): the kernel's task limit less the tasks running.
    PidAvailable,
}

/// The signals k3rs understands, by their upstream names.
pub const SIGNALS: &[(&str, Signal)] = &[
    ("memory.available", Signal::MemoryAvailable),
    (
        "allocatableMemory.available",
        Signal::AllocatableMemoryAvailable,
    ),
    ("nodefs.available", Signal::NodeFsAvailable),
    ("nodefs.inodesFree", Signal::NodeFsInodesFree),
    ("imagefs.available", Signal::ImageFsAvailable),
    ("imagefs.inodesFree", Signal::ImageFsInodesFree),
    ("pid.available", Signal::PidAvailable),
];

/// The node condition a signal's pressure sets.
#[allow(clippy::enum_variant_names)] // upstream's condition names
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Condition {
    MemoryPressure,
    DiskPressure,
    PidPressure,
}

impl Signal {
    /// The upstream name (`memory.available`).
    pub fn name(self) -> &'static str {
        SIGNALS
            .iter()
            .find(|(_, s)| *s == self)
            .map_or("", |(n, _)| n)
    }

    /// The signal named `name` (upstream's spelling).
    pub fn parse(name: &str) -> Result<Signal, ThresholdError> {
        SIGNALS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
            .ok_or_else(|| ThresholdError::UnsupportedSignal {
                signal: name.to_string(),
            })
    }

    /// Whether the signal is about memory (reclaimed first, ranked by memory use).
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable
        )
    }

    /// The resource a pod is evicted to reclaim (upstream's `signalToResource`).
    pub fn resource(self) -> &'static str {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => "memory",
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
            Signal::PidAvailable => "pids",
        }
    }

    /// The node condition the signal's pressure sets (upstream's `signalToNodeCondition`).
    pub fn condition(self) -> Condition {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => {
                Condition::MemoryPressure
            }
            Signal::PidAvailable => Condition::PidPressure,
            _ => Condition::DiskPressure,
        }
    }
}

/// How much must stay available.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    /// An amount (bytes, inodes or process IDs).
    Quantity(u64),
    /// A fraction (0‥1] of the capacity.
    Percentage(f64),
}

impl ThresholdValue {
    /// The amount for a resource of `capacity` (upstream's `GetThresholdQuantity`: a
    /// percentage of the capacity, truncated).
    pub fn quantity(self, capacity: u64) -> u64 {
        match self {
            ThresholdValue::Quantity(q) => q,
            ThresholdValue::Percentage(p) => (capacity as f64 * p) as u64,
        }
    }
}

/// An eviction threshold: pressure when `signal`'s available amount is below `value`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
    /// How long the threshold must be met before pods are evicted for it (zero: a hard
    /// threshold, evicting at once).
    pub grace_period: Duration,
    /// Once met, the threshold stays met until this much more than `value` is available
    /// (`eviction-minimum-reclaim`).
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    /// A hard threshold without minimum reclaim.
    pub fn hard(signal: Signal, value: ThresholdValue) -> Threshold {
        Threshold {
            signal,
            value,
            grace_period: Duration::ZERO,
            min_reclaim: None,
        }
    }

    /// Whether pods are evicted as soon as it is met (upstream's `isHardEvictionThreshold`).
    pub fn is_hard(&self) -> bool {
        self.grace_period.is_zero()
    }
}

/// A refused eviction setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    /// Not `signal<value`.
    #[error("{0:?}: expected SIGNAL<VALUE (only the < operator is supported)")]
    Syntax(String),
    /// Not `signal=value`.
    #[error("{0:?}: expected SIGNAL=VALUE")]
    NotKeyValue(String),
    /// A signal k3rs does not observe.
    #[error("unsupported eviction signal {signal:?} (k3rs supports: {})",
        SIGNALS.iter().map(|s| s.0).collect::<Vec<_>>().join(", "))]
    UnsupportedSignal { signal: String },
    /// Neither a quantity nor a percentage.
    #[error("eviction threshold {signal}: {value:?} is neither a quantity nor a percentage")]
    Value { signal: String, value: String },
    /// A negative quantity or percentage.
    #[error("eviction threshold {signal} must be positive: {value}")]
    Negative { signal: String, value: String },
    /// A percentage above 100 %.
    #[error("eviction percentage threshold {signal} must be <= 100%: {value}")]
    OverHundred { signal: String, value: String },
    /// A grace period that is not a non-negative duration.
    #[error(
        "invalid eviction grace period specified for {signal}: {value:?}, must be a positive \
         duration like 30s or 1m30s"
    )]
    GracePeriod { signal: String, value: String },
    /// A soft threshold without its grace period (upstream's `ParseThresholdConfig`).
    #[error("grace period must be specified for the soft eviction threshold {signal}")]
    SoftWithoutGracePeriod { signal: String },
    /// A minimum reclaim that is neither a positive percentage nor a non-negative quantity.
    #[error(
        "eviction minimum reclaim {signal}: {value:?} must be a quantity >= 0 or a percentage > 0%"
    )]
    MinReclaim { signal: String, value: String },
}

/// Upstream's default hard thresholds: `memory.available<100Mi`, `nodefs.available<10%`,
/// `nodefs.inodesFree<5%`, `imagefs.available<15%`.
pub fn defaults() -> Vec<Threshold> {
    vec![
        Threshold::hard(
            Signal::MemoryAvailable,
            ThresholdValue::Quantity(100 * 1024 * 1024),
        ),
        Threshold::hard(Signal::NodeFsAvailable, ThresholdValue::Percentage(0.10)),
        Threshold::hard(Signal::NodeFsInodesFree, ThresholdValue::Percentage(0.05)),
        Threshold::hard(Signal::ImageFsAvailable, ThresholdValue::Percentage(0.15)),
    ]
}

/// Parses an `eviction-hard` (or `eviction-soft`) value: comma-separated `signal<value`s (a
/// later one of a signal wins); disabled signals (`0`, `0%`) are left out. The thresholds
/// are hard ones; [`super::config`] gives soft ones their grace periods.
pub fn parse_eviction_hard(text: &str) -> Result<Vec<Threshold>, ThresholdError> {
    let mut out: Vec<Threshold> = Vec::new();
    for statement in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = statement
            .split_once('<')
            .ok_or_else(|| ThresholdError::Syntax(statement.to_string()))?;
        let (name, value) = (name.trim(), value.trim());
        let signal = Signal::parse(name)?;
        out.retain(|t| t.signal != signal);
        if let Some(v) = parse_value(name, value)? {
            out.push(Threshold::hard(signal, v));
        }
    }
    Ok(out)
}

/// A threshold's value; `None`: disabled (zero).
pub(super) fn parse_value(
    signal: &str,
    value: &str,
) -> Result<Option<ThresholdValue>, ThresholdError> {
    let bad = || ThresholdError::Value {
        signal: signal.to_string(),
        value: value.to_string(),
    };
    if let Some(p) = value.strip_suffix('%') {
        let p: f64 = p.trim().parse().map_err(|_| bad())?;
        if !p.is_finite() {
            return Err(bad());
        }
        if p < 0.0 {
            return Err(ThresholdError::Negative {
                signal: signal.to_string(),
                value: value.to_string(),
            });
        }
        if p > 100.0 {
            return Err(ThresholdError::OverHundred {
                signal: signal.to_string(),
                value: value.to_string(),
            });
        }
        return Ok((p > 0.0).then_some(ThresholdValue::Percentage(p / 100.0)));
    }
    let q = Quantity::parse(value).ok_or_else(bad)?;
    if q.is_negative() {
        return Err(ThresholdError::Negative {
            signal: signal.to_string(),
            value: value.to_string(),
        });
    }
    Ok((!q.is_zero()).then(|| ThresholdValue::Quantity(q.value() as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_percentages_parse() {
        let t = parse_eviction_hard(
            "memory.available<200Mi, nodefs.available<5%,imagefs.inodesFree<1000",
        )
        .unwrap();
        assert_eq!(
            t,
            vec![
                Threshold::hard(
                    Signal::MemoryAvailable,
                    ThresholdValue::Quantity(200 * 1024 * 1024)
                ),
                Threshold::hard(Signal::NodeFsAvailable, ThresholdValue::Percentage(0.05)),
                Threshold::hard(Signal::ImageFsInodesFree, ThresholdValue::Quantity(1000)),
            ]
        );
        assert_eq!(t[1].value.quantity(1000), 50);
        assert_eq!(
            parse_eviction_hard("nodefs.available<10%,nodefs.available<1Gi").unwrap(),
            vec![Threshold::hard(
                Signal::NodeFsAvailable,
                ThresholdValue::Quantity(1 << 30)
            )]
        );
    }

    #[test]
    fn zero_disables_a_signal() {
        assert_eq!(
            parse_eviction_hard("memory.available<0%,nodefs.available<0").unwrap(),
            vec![]
        );
        assert_eq!(
            parse_eviction_hard("nodefs.available<10%,nodefs.available<0%").unwrap(),
            vec![]
        );
    }

    #[test]
    fn bad_statements_are_refused() {
        let err = |s: &str| parse_eviction_hard(s).unwrap_err().to_string();
        assert_eq!(
            err("memory.available>100Mi"),
            "\"memory.available>100Mi\": expected SIGNAL<VALUE (only the < operator is supported)"
        );
        assert_eq!(
            err("containerfs.available<10%"),
            "unsupported eviction signal \"containerfs.available\" (k3rs supports: memory.available, \
             allocatableMemory.available, nodefs.available, nodefs.inodesFree, \
             imagefs.available, imagefs.inodesFree, pid.available)"
        );
        assert_eq!(
            err("nodefs.available<-1%"),
            "eviction threshold nodefs.available must be positive: -1%"
        );
        assert_eq!(
            err("nodefs.available<101%"),
            "eviction percentage threshold nodefs.available must be <= 100%: 101%"
        );
        assert_eq!(
            err("memory.available<-5Mi"),
            "eviction threshold memory.available must be positive: -5Mi"
        );
        assert_eq!(
            err("memory.available<lots"),
            "eviction threshold memory.available: \"lots\" is neither a quantity nor a percentage"
        );
    }

    #[test]
    fn signals_map_to_resources_and_conditions() {
        assert_eq!(Signal::NodeFsAvailable.name(), "nodefs.available");
        assert_eq!(Signal::ImageFsAvailable.resource(), "ephemeral-storage");
        assert_eq!(Signal::NodeFsInodesFree.resource(), "inodes");
        assert_eq!(
            Signal::MemoryAvailable.condition(),
            Condition::MemoryPressure
        );
        assert_eq!(
            Signal::ImageFsInodesFree.condition(),
            Condition::DiskPressure
        );
        assert_eq!(defaults().len(), 4);
    }
}
