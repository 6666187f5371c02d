//! One sync of an autoscaler, decided without I/O: upstream's `reconcileAutoscaler` after the
//! target's scale has been read — a target at zero replicas is left alone (scaling disabled),
//! one outside `minReplicas`/`maxReplicas` is brought inside, otherwise the metrics'
//! highest recommendation goes through [`normalize`] — with the conditions, events and
//! status metrics it reports.

use std::time::Duration;

use serde_json::Value;

use super::normalize::{normalize, Behavior, Bounds, History};
use crate::EventType;

/// One metric's outcome.
pub type MetricOutcome = Result<ValidMetric, InvalidMetric>;

/// A metric that produced a recommendation.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidMetric {
    pub replicas: i32,
    /// How upstream names it in messages ("cpu resource utilization (percentage of request)").
    pub name: String,
    /// Its `status.currentMetrics` entry.
    pub status: Value,
}

/// A metric that could not be computed.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidMetric {
    /// The condition reason, e.g. `FailedGetResourceMetric`.
    pub reason: &'static str,
    pub error: String,
}

/// A condition to set: (type, status, reason, message).
pub type Condition = (&'static str, bool, String, String);

/// What the sync does.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The replica count to write to the target's scale, if it changes.
    pub rescale: Option<i32>,
    /// Why (the `SuccessfulRescale` event's reason text).
    pub rescale_reason: String,
    /// `status.desiredReplicas` (None: keep the old value — the metrics failed).
    pub desired: Option<i32>,
    pub conditions: Vec<Condition>,
    pub current_metrics: Option<Vec<Value>>,
    pub events: Vec<(EventType, &'static str, String)>,
}

/// Whether the metrics are needed for a target at `replicas` (they are not when it is
/// outside the bounds or scaling is disabled).
pub fn wants_metrics(replicas: i32, bounds: Bounds) -> bool {
    !(replicas == 0 && bounds.min != 0) && (bounds.min..=bounds.max).contains(&replicas)
}

fn cond(t: &'static str, status: bool, reason: &str, message: impl Into<String>) -> Condition {
    (t, status, reason.to_string(), message.into())
}

/// Decides the sync of a target whose scale says `replicas`; `metrics` are the outcomes of
/// `spec.metrics` in order (computed only when [`wants_metrics`]).
pub fn decide(
    replicas: i32,
    bounds: Bounds,
    behavior: Option<&Behavior>,
    metrics: Option<Vec<MetricOutcome>>,
    history: &mut History,
    now: Duration,
) -> Decision {
    let mut d = Decision {
        rescale: None,
        rescale_reason: String::new(),
        desired: Some(replicas),
        conditions: vec![cond(
            "AbleToScale",
            true,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
        )],
        current_metrics: None,
        events: Vec::new(),
    };
    let desired = if replicas == 0 && bounds.min != 0 {
        d.conditions.push(cond(
            "ScalingActive",
            false,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero",
        ));
        return d;
    } else if replicas > bounds.max {
        d.rescale_reason = "Current number of replicas above Spec.MaxReplicas".into();
        bounds.max
    } else if replicas < bounds.min {
        d.rescale_reason = "Current number of replicas below Spec.MinReplicas".into();
        bounds.min
    } else {
        let outcomes = metrics.unwrap_or_default();
        let mut best: Option<&ValidMetric> = None;
        let mut first_invalid: Option<&InvalidMetric> = None;
        let mut statuses = Vec::new();
        for o in &outcomes {
            match o {
                Ok(v) => {
                    statuses.push(v.status.clone());
                    if best.is_none_or(|b| v.replicas > b.replicas) {
                        best = Some(v);
                    }
                }
                Err(e) => {
                    // Upstream leaves a zero-valued entry for a metric it could not read.
                    statuses.push(serde_json::json!({"type": ""}));
                    d.events
                        .push((EventType::Warning, e.reason, e.error.clone()));
                    first_invalid.get_or_insert(e);
                }
            }
        }
        d.current_metrics = Some(statuses);
        let Some(best) = best else {
            let (reason, error) = match first_invalid {
                Some(e) => (e.reason, e.error.clone()),
                None => (
                    "InvalidMetricSourceType",
                    "no metrics to compute".to_string(),
                ),
            };
            d.conditions.push(cond(
                "ScalingActive",
                false,
                reason,
                format!("the HPA was unable to compute the replica count: {error}"),
            ));
            d.events.push((
                EventType::Warning,
                "FailedComputeMetricsReplicas",
                format!(
                    "invalid metrics ({} invalid out of {}), first error is: {error}",
                    outcomes.len(),
                    outcomes.len()
                ),
            ));
            d.desired = None;
            return d;
        };
        d.conditions.push(cond(
            "ScalingActive",
            true,
            "ValidMetricFound",
            format!(
                "the HPA was able to successfully calculate a replica count from {}",
                best.name
            ),
        ));
        if best.replicas > replicas {
            d.rescale_reason = format!("{} above target", best.name);
        } else if best.replicas < replicas {
            d.rescale_reason = "All metrics below target".into();
        }
        let n = normalize(history, behavior, bounds, replicas, best.replicas, now);
        d.conditions.push(cond(
            "AbleToScale",
            true,
            n.able_to_scale.0,
            n.able_to_scale.1,
        ));
        d.conditions.push(cond(
            "ScalingLimited",
            n.limited,
            n.limited_reason.0,
            n.limited_reason.1,
        ));
        n.replicas
    };
    d.desired = Some(desired);
    if desired != replicas {
        d.rescale = Some(desired);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const B: Bounds = Bounds { min: 2, max: 6 };

    fn valid(replicas: i32) -> MetricOutcome {
        Ok(ValidMetric {
            replicas,
            name: "cpu resource utilization (percentage of request)".into(),
            status: json!({"type": "Resource"}),
        })
    }

    fn invalid() -> MetricOutcome {
        Err(InvalidMetric {
            reason: "FailedGetResourceMetric",
            error: "failed to get cpu utilization: boom".into(),
        })
    }

    fn run(replicas: i32, metrics: Option<Vec<MetricOutcome>>) -> Decision {
        decide(
            replicas,
            B,
            None,
            metrics,
            &mut History::default(),
            Duration::ZERO,
        )
    }

    #[test]
    fn the_bounds_apply_without_metrics() {
        assert!(!wants_metrics(1, B) && !wants_metrics(7, B) && wants_metrics(4, B));
        let d = run(1, None);
        assert_eq!(d.rescale, Some(2));
        assert_eq!(
            d.rescale_reason,
            "Current number of replicas below Spec.MinReplicas"
        );
        let d = run(9, None);
        assert_eq!(d.rescale, Some(6));
        assert_eq!(
            d.rescale_reason,
            "Current number of replicas above Spec.MaxReplicas"
        );
        assert_eq!(d.current_metrics, None);
    }

    #[test]
    fn a_target_at_zero_is_not_scaled() {
        let d = run(0, None);
        assert_eq!((d.rescale, d.desired), (None, Some(0)));
        assert_eq!(
            d.conditions[1],
            cond(
                "ScalingActive",
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero"
            )
        );
        assert!(!wants_metrics(0, B));
        assert!(wants_metrics(0, Bounds { min: 0, max: 3 }));
    }

    #[test]
    fn failed_metrics_keep_the_count_and_say_why() {
        let d = run(3, Some(vec![invalid()]));
        assert_eq!((d.rescale, d.desired), (None, None));
        assert_eq!(d.current_metrics, Some(vec![json!({"type": ""})]));
        assert_eq!(
            d.conditions[1],
            cond(
                "ScalingActive",
                false,
                "FailedGetResourceMetric",
                "the HPA was unable to compute the replica count: failed to get cpu utilization: boom"
            )
        );
        assert_eq!(
            d.events,
            vec![
                (
                    EventType::Warning,
                    "FailedGetResourceMetric",
                    "failed to get cpu utilization: boom".to_string()
                ),
                (
                    EventType::Warning,
                    "FailedComputeMetricsReplicas",
                    "invalid metrics (1 invalid out of 1), first error is: failed to get cpu utilization: boom"
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn the_highest_valid_metric_wins_and_is_normalized() {
        let d = run(3, Some(vec![invalid(), valid(5), valid(4)]));
        assert_eq!(d.rescale, Some(5));
        assert_eq!(
            d.rescale_reason,
            "cpu resource utilization (percentage of request) above target"
        );
        assert_eq!(d.conditions[1].2, "ValidMetricFound");
        assert_eq!(
            d.conditions[3],
            cond(
                "ScalingLimited",
                false,
                "DesiredWithinRange",
                "the desired count is within the acceptable range"
            )
        );
        // Above the maximum: clamped, and ScalingLimited says so.
        let d = run(5, Some(vec![valid(9)]));
        assert_eq!(d.rescale, Some(6));
        assert_eq!(d.conditions[3].0, "ScalingLimited");
        assert!(d.conditions[3].1);
        assert_eq!(d.conditions[3].2, "TooManyReplicas");
        // Below target: down, with the classic stabilization empty at first.
        let d = run(5, Some(vec![valid(3)]));
        assert_eq!(
            (d.rescale, d.rescale_reason.as_str()),
            (Some(3), "All metrics below target")
        );
        // Nothing to change.
        let d = run(4, Some(vec![valid(4)]));
        assert_eq!((d.rescale, d.desired), (None, Some(4)));
    }
}
