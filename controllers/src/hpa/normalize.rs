//! From the metrics' recommendation to the replica count the autoscaler sets: upstream's
//! stabilization and rate limits, pure. Without `spec.behavior`, the classic rules: the
//! highest recommendation of the last five minutes wins (downscale stabilization) and a step
//! may at most double the count (or reach 4); with `spec.behavior`, each direction's
//! stabilization window and its `Pods`/`Percent` policies over their periods, chosen by
//! `selectPolicy`. Both clamp to `minReplicas`/`maxReplicas`.
//!
//! [`History`] holds an autoscaler's past recommendations and scale events; times are
//! durations since an arbitrary epoch, so tests pass them explicitly.

use std::time::Duration;

/// `--horizontal-pod-autoscaler-downscale-stabilization`.
pub const DOWNSCALE_STABILIZATION: Duration = Duration::from_secs(300);

/// One direction of `spec.behavior` (defaulted by the API server).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    pub stabilization_window: Duration,
    pub select: Select,
    pub policies: Vec<Policy>,
}

/// `selectPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    Max,
    Min,
    Disabled,
}

/// One scaling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// `Pods` (true) or `Percent`.
    pub pods: bool,
    pub value: i32,
    pub period: Duration,
}

/// `spec.behavior`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Behavior {
    pub up: Rules,
    pub down: Rules,
}

/// An autoscaler's memory between syncs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// (when, recommendation before stabilization).
    recommendations: Vec<(Duration, i32)>,
    /// (when, replicas added).
    ups: Vec<(Duration, i32)>,
    /// (when, replicas removed).
    downs: Vec<(Duration, i32)>,
}

/// A condition the normalization sets: (reason, message).
pub type Reason = (&'static str, &'static str);

/// What normalization decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Normalized {
    pub replicas: i32,
    /// `AbleToScale` (status True): why the stabilized count is what it is.
    pub able_to_scale: Reason,
    /// `ScalingLimited`: whether the rate/bounds changed the stabilized count, and why.
    pub limited: bool,
    pub limited_reason: Reason,
}

const READY: Reason = ("ReadyForNewScale", "recommended size matches current size");
const DOWN_STABILIZED: Reason = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const UP_STABILIZED: Reason = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const WITHIN: Reason = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const TOO_FEW: Reason = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);
const TOO_MANY: Reason = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const UP_LIMIT: Reason = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const DOWN_LIMIT: Reason = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);

/// The bounds of the autoscaler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub min: i32,
    pub max: i32,
}

impl History {
    /// Remembers `desired` at `now`, reusing a slot older than `keep`.
    fn record(&mut self, now: Duration, desired: i32, keep: Duration) {
        match self
            .recommendations
            .iter_mut()
            .find(|(t, _)| now.saturating_sub(*t) > keep)
        {
            Some(slot) => *slot = (now, desired),
            None => self.recommendations.push((now, desired)),
        }
    }

    /// Records a change of the target from `from` to `to` replicas at `now` (only kept with a
    /// behavior, whose policies look back at them).
    pub fn scaled(&mut self, behavior: Option<&Behavior>, now: Duration, from: i32, to: i32) {
        let Some(b) = behavior else { return };
        let (events, rules, change) = if to > from {
            (&mut self.ups, &b.up, to - from)
        } else if to < from {
            (&mut self.downs, &b.down, from - to)
        } else {
            return;
        };
        let longest = rules
            .policies
            .iter()
            .map(|p| p.period)
            .max()
            .unwrap_or_default();
        events.retain(|(t, _)| now.saturating_sub(*t) <= longest);
        events.push((now, change));
    }
}

/// The replicas to set for recommendation `desired` with `current` replicas now.
pub fn normalize(
    history: &mut History,
    behavior: Option<&Behavior>,
    bounds: Bounds,
    current: i32,
    desired: i32,
    now: Duration,
) -> Normalized {
    match behavior {
        None => classic(history, bounds, current, desired, now),
        Some(b) => with_behavior(history, b, bounds, current, desired, now),
    }
}

fn classic(
    history: &mut History,
    bounds: Bounds,
    current: i32,
    desired: i32,
    now: Duration,
) -> Normalized {
    let highest = history
        .recommendations
        .iter()
        .filter(|(t, _)| now.saturating_sub(*t) <= DOWNSCALE_STABILIZATION)
        .map(|(_, r)| *r)
        .fold(desired, i32::max);
    history.record(now, desired, DOWNSCALE_STABILIZATION);
    let able_to_scale = if highest != desired {
        DOWN_STABILIZED
    } else {
        READY
    };
    let up_limit = (2 * current).max(4);
    let (ceiling, ceiling_reason) = if bounds.max < up_limit {
        (bounds.max, TOO_MANY)
    } else {
        (up_limit, UP_LIMIT)
    };
    let (replicas, limited_reason) = if highest < bounds.min {
        (bounds.min, TOO_FEW)
    } else if highest > ceiling {
        (ceiling, ceiling_reason)
    } else {
        (highest, WITHIN)
    };
    Normalized {
        replicas,
        able_to_scale,
        limited: replicas < highest,
        limited_reason,
    }
}

fn with_behavior(
    history: &mut History,
    b: &Behavior,
    bounds: Bounds,
    current: i32,
    desired: i32,
    now: Duration,
) -> Normalized {
    let (mut up_rec, mut down_rec) = (desired, desired);
    for &(t, r) in &history.recommendations {
        let age = now.saturating_sub(t);
        if age < b.up.stabilization_window {
            up_rec = up_rec.min(r);
        }
        if age < b.down.stabilization_window {
            down_rec = down_rec.max(r);
        }
    }
    let stabilized = current.max(up_rec).min(down_rec);
    let keep = b.up.stabilization_window.max(b.down.stabilization_window);
    history.record(now, desired, keep);
    let able_to_scale = if stabilized == desired {
        READY
    } else if desired >= current {
        UP_STABILIZED
    } else {
        DOWN_STABILIZED
    };
    let (replicas, limited_reason) = rate_limited(history, b, bounds, current, stabilized, now);
    Normalized {
        replicas,
        able_to_scale,
        limited: replicas != stabilized,
        limited_reason,
    }
}

fn rate_limited(
    history: &History,
    b: &Behavior,
    bounds: Bounds,
    current: i32,
    desired: i32,
    now: Duration,
) -> (i32, Reason) {
    let changed = |events: &[(Duration, i32)], period: Duration| -> i32 {
        events
            .iter()
            .filter(|(t, _)| now.saturating_sub(*t) < period)
            .map(|(_, c)| c)
            .sum()
    };
    let period_start =
        |p: &Policy| current - changed(&history.ups, p.period) + changed(&history.downs, p.period);
    if desired > current {
        let proposals = b.up.policies.iter().map(|p| {
            let start = period_start(p);
            if p.pods {
                start + p.value
            } else {
                (f64::from(start) * (1.0 + f64::from(p.value) / 100.0)).ceil() as i32
            }
        });
        let limit = match b.up.select {
            Select::Disabled => current,
            Select::Min => proposals.min().unwrap_or(i32::MAX),
            Select::Max => proposals.max().unwrap_or(i32::MIN),
        }
        .max(current);
        let (ceiling, reason) = if bounds.max > limit {
            (limit, UP_LIMIT)
        } else {
            (bounds.max, TOO_MANY)
        };
        if desired > ceiling {
            return (ceiling, reason);
        }
    } else if desired < current {
        let proposals = b.down.policies.iter().map(|p| {
            let start = period_start(p);
            if p.pods {
                start - p.value
            } else {
                (f64::from(start) * (1.0 - f64::from(p.value) / 100.0)) as i32
            }
        });
        // Scaling down, the smallest change ("Min") is the highest count.
        let limit = match b.down.select {
            Select::Disabled => current,
            Select::Min => proposals.max().unwrap_or(i32::MIN),
            Select::Max => proposals.min().unwrap_or(i32::MAX),
        }
        .min(current);
        let (floor, reason) = if bounds.min < limit {
            (limit, DOWN_LIMIT)
        } else {
            (bounds.min, TOO_FEW)
        };
        if desired < floor {
            return (floor, reason);
        }
    }
    (desired, WITHIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Bounds = Bounds { min: 1, max: 10 };

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn defaults() -> Behavior {
        Behavior {
            up: Rules {
                stabilization_window: s(0),
                select: Select::Max,
                policies: vec![
                    Policy {
                        pods: true,
                        value: 4,
                        period: s(15),
                    },
                    Policy {
                        pods: false,
                        value: 100,
                        period: s(15),
                    },
                ],
            },
            down: Rules {
                stabilization_window: s(300),
                select: Select::Max,
                policies: vec![Policy {
                    pods: false,
                    value: 100,
                    period: s(15),
                }],
            },
        }
    }

    #[test]
    fn classic_rules_double_at_most_and_respect_the_bounds() {
        let mut h = History::default();
        let n = normalize(&mut h, None, B, 2, 9, s(0));
        assert_eq!(
            (n.replicas, n.limited, n.limited_reason),
            (4, true, UP_LIMIT)
        );
        assert_eq!(n.able_to_scale, READY);
        let n = normalize(&mut h, None, Bounds { min: 1, max: 5 }, 4, 9, s(15));
        assert_eq!((n.replicas, n.limited_reason), (5, TOO_MANY));
        let n = normalize(
            &mut History::default(),
            None,
            Bounds { min: 3, max: 5 },
            4,
            1,
            s(0),
        );
        // Raised to the minimum: not "limited" (the count grew).
        assert_eq!(
            (n.replicas, n.limited, n.limited_reason),
            (3, false, TOO_FEW)
        );
    }

    #[test]
    fn classic_rules_hold_the_highest_recommendation_for_five_minutes() {
        let mut h = History::default();
        normalize(&mut h, None, B, 6, 6, s(0));
        let n = normalize(&mut h, None, B, 6, 2, s(60));
        assert_eq!((n.replicas, n.able_to_scale), (6, DOWN_STABILIZED));
        // After 300 s the 6 has aged out; the 2 of t=60 is still the highest.
        let n = normalize(&mut h, None, B, 6, 2, s(301));
        assert_eq!((n.replicas, n.able_to_scale), (2, READY));
    }

    #[test]
    fn default_behavior_scales_up_by_the_larger_policy() {
        let b = defaults();
        let mut h = History::default();
        // From 2: Pods gives 6, Percent gives 4; Max → 6.
        let n = normalize(&mut h, Some(&b), B, 2, 9, s(0));
        assert_eq!(
            (n.replicas, n.limited, n.limited_reason),
            (6, true, UP_LIMIT)
        );
        h.scaled(Some(&b), s(0), 2, 6);
        // Within the same 15 s the period starts at 2 again: no further step.
        let n = normalize(&mut h, Some(&b), B, 6, 9, s(10));
        assert_eq!(n.replicas, 6);
        // After the period: from 6, Percent allows 12, capped by max 10.
        let n = normalize(&mut h, Some(&b), B, 6, 12, s(20));
        assert_eq!((n.replicas, n.limited_reason), (10, TOO_MANY));
    }

    #[test]
    fn behavior_scale_down_waits_for_the_window_and_follows_its_policies() {
        let mut b = defaults();
        let mut h = History::default();
        normalize(&mut h, Some(&b), B, 8, 8, s(0));
        let n = normalize(&mut h, Some(&b), B, 8, 2, s(30));
        assert_eq!((n.replicas, n.able_to_scale), (8, DOWN_STABILIZED));
        b.down.stabilization_window = s(0);
        b.down.policies = vec![Policy {
            pods: true,
            value: 1,
            period: s(60),
        }];
        let n = normalize(&mut h, Some(&b), B, 8, 2, s(40));
        assert_eq!(
            (n.replicas, n.limited, n.limited_reason),
            (7, true, DOWN_LIMIT)
        );
        h.scaled(Some(&b), s(40), 8, 7);
        let n = normalize(&mut h, Some(&b), B, 7, 2, s(50));
        assert_eq!(n.replicas, 7, "one pod per minute");
        b.down.select = Select::Disabled;
        let n = normalize(&mut History::default(), Some(&b), B, 7, 2, s(0));
        assert_eq!(n.replicas, 7);
    }

    #[test]
    fn behavior_scale_up_window_takes_the_lowest_recent_recommendation() {
        let mut b = defaults();
        b.up.stabilization_window = s(60);
        let mut h = History::default();
        normalize(&mut h, Some(&b), B, 2, 3, s(0));
        let n = normalize(&mut h, Some(&b), B, 2, 8, s(30));
        assert_eq!((n.replicas, n.able_to_scale), (3, UP_STABILIZED));
    }
}
