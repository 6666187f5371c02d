//! How many replicas one `Resource` metric asks for: upstream's replica calculator
//! (`GetResourceReplicas` for an `Utilization` target, `GetRawResourceReplicas` for an
//! `AverageValue` one), pure.
//!
//! Pods being deleted or Failed are ignored; Pending pods and (for cpu) pods that are not yet
//! ready count as unready. A ratio within the 10 % tolerance keeps the current count. When pods
//! lack samples or are unready, the ratio is recomputed conservatively — missing pods assumed
//! at the target when scaling down and at zero when scaling up, unready pods at zero when
//! scaling up — and a recomputed ratio that flips direction keeps the current count.

use std::collections::BTreeMap;

/// `--horizontal-pod-autoscaler-tolerance`.
pub const TOLERANCE: f64 = 0.1;

/// How a pod of the target counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Being deleted or Failed: left out entirely.
    Ignored,
    /// Pending, or (cpu) not ready yet: its sample is not trusted.
    Unready,
    /// Counts with its sample (or as missing without one).
    Ready,
}

/// A pod of the scale target's selector.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSample {
    pub name: String,
    pub state: PodState,
    /// The resource's requests summed over the pod's containers, in milli-units; `Err` names
    /// the first container without a request.
    pub request_milli: Result<i64, super::metrics::MissingRequest>,
}

/// The metric's target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// `averageUtilization`: percent of the pods' requests.
    Utilization(i32),
    /// `averageValue`, in milli-units per pod.
    AverageValue(i64),
}

/// A metric's recommendation and what it saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    pub replicas: i32,
    /// Average utilization in percent of requests (Utilization targets only).
    pub utilization: Option<i32>,
    /// Average usage per pod with a sample, in milli-units.
    pub average_milli: i64,
}

/// Why no recommendation could be computed (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaError {
    /// The selector selects no pod.
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    /// No ready pod has a sample.
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoSamples,
    /// A pod's container states no request for the resource (utilization targets).
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        /// The resource.
        resource: String,
        /// The container.
        container: String,
        /// The pod.
        pod: String,
    },
    /// No sample belongs to a pod with requests.
    #[error("no metrics returned matched known pods")]
    NoMatchedPods,
}

/// The recommendation of a `Resource` metric for `resource` with target `target`, given the
/// target's pods, their usage samples (milli-units, by pod name) and the current (spec)
/// replica count. Errors carry upstream's messages.
pub fn resource_replicas(
    current: i32,
    resource: &str,
    target: Target,
    pods: &[PodSample],
    usage: &BTreeMap<String, i64>,
) -> Result<Recommendation, ReplicaError> {
    if pods.is_empty() {
        return Err(ReplicaError::NoPods);
    }
    let mut samples: BTreeMap<&str, i64> = BTreeMap::new();
    let (mut ready, mut unready, mut missing) = (0usize, Vec::new(), Vec::new());
    for pod in pods {
        match (pod.state, usage.get(&pod.name)) {
            (PodState::Ignored, _) => {}
            (PodState::Unready, _) => unready.push(pod.name.as_str()),
            (PodState::Ready, None) => missing.push(pod.name.as_str()),
            (PodState::Ready, Some(&v)) => {
                ready += 1;
                samples.insert(&pod.name, v);
            }
        }
    }
    if samples.is_empty() {
        return Err(ReplicaError::NoSamples);
    }
    let requests = match target {
        Target::Utilization(_) => Some(requests(pods, resource)?),
        Target::AverageValue(_) => None,
    };
    let measure = |s: &BTreeMap<&str, i64>| ratio(s, requests.as_ref(), target);
    let first = measure(&samples)?;
    let scale_up_with_unready = !unready.is_empty() && first.ratio > 1.0;
    let recommend = |replicas| Recommendation {
        replicas,
        utilization: first.utilization,
        average_milli: first.average_milli,
    };
    if !scale_up_with_unready && missing.is_empty() {
        if (1.0 - first.ratio).abs() <= TOLERANCE {
            return Ok(recommend(current));
        }
        return Ok(recommend((first.ratio * ready as f64).ceil() as i32));
    }
    if first.ratio < 1.0 {
        for pod in &missing {
            let fallback = match (target, &requests) {
                (Target::Utilization(t), Some(r)) => r[pod] * i64::from(t.max(100)) / 100,
                (Target::AverageValue(v), _) => v,
                (Target::Utilization(_), None) => 0,
            };
            samples.insert(pod, fallback);
        }
    } else if first.ratio > 1.0 {
        for pod in &missing {
            samples.insert(pod, 0);
        }
    }
    if scale_up_with_unready {
        for pod in &unready {
            samples.insert(pod, 0);
        }
    }
    let again = measure(&samples)?.ratio;
    if (1.0 - again).abs() <= TOLERANCE
        || (first.ratio < 1.0 && again > 1.0)
        || (first.ratio > 1.0 && again < 1.0)
    {
        return Ok(recommend(current));
    }
    let replicas = (again * samples.len() as f64).ceil() as i32;
    if (again < 1.0 && replicas > current) || (again > 1.0 && replicas < current) {
        return Ok(recommend(current));
    }
    Ok(recommend(replicas))
}

/// Each pod's requests for `resource` (ignored pods included, as upstream).
fn requests<'a>(
    pods: &'a [PodSample],
    resource: &str,
) -> Result<BTreeMap<&'a str, i64>, ReplicaError> {
    pods.iter()
        .map(|p| match &p.request_milli {
            Ok(r) => Ok((p.name.as_str(), *r)),
            Err(missing) => Err(ReplicaError::MissingRequest {
                resource: resource.to_string(),
                container: missing.container.clone(),
                pod: p.name.clone(),
            }),
        })
        .collect()
}

struct Ratio {
    ratio: f64,
    utilization: Option<i32>,
    average_milli: i64,
}

/// Usage over target: for utilization, total usage over total requests of the sampled pods
/// (truncated to whole percent first, as upstream); for an average value, the mean sample over
/// the target.
fn ratio(
    samples: &BTreeMap<&str, i64>,
    requests: Option<&BTreeMap<&str, i64>>,
    target: Target,
) -> Result<Ratio, ReplicaError> {
    match (target, requests) {
        (Target::Utilization(t), Some(requests)) => {
            let (mut used, mut requested) = (0i64, 0i64);
            for (pod, v) in samples {
                if let Some(r) = requests.get(pod) {
                    used += v;
                    requested += r;
                }
            }
            if requested == 0 {
                return Err(ReplicaError::NoMatchedPods);
            }
            let utilization = (used * 100 / requested) as i32;
            Ok(Ratio {
                ratio: f64::from(utilization) / f64::from(t),
                utilization: Some(utilization),
                average_milli: used / samples.len() as i64,
            })
        }
        (Target::AverageValue(v), _) => {
            let total: i64 = samples.values().sum();
            let average = total / samples.len() as i64;
            Ok(Ratio {
                ratio: total as f64 / samples.len() as f64 / v as f64,
                utilization: None,
                average_milli: average,
            })
        }
        (Target::Utilization(_), None) => Err(ReplicaError::NoMatchedPods),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, state: PodState, request: i64) -> PodSample {
        PodSample {
            name: name.into(),
            state,
            request_milli: Ok(request),
        }
    }

    fn usage(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    fn replicas(current: i32, target: Target, pods: &[PodSample], u: &[(&str, i64)]) -> i32 {
        resource_replicas(current, "cpu", target, pods, &usage(u))
            .unwrap()
            .replicas
    }

    #[test]
    fn utilization_scales_by_the_ratio_of_ready_pods() {
        let pods = [
            pod("a", PodState::Ready, 1000),
            pod("b", PodState::Ready, 1000),
            pod("c", PodState::Ready, 1000),
        ];
        // 300 % of 50 %: six times the pods.
        let r = resource_replicas(
            3,
            "cpu",
            Target::Utilization(50),
            &pods,
            &usage(&[("a", 3000), ("b", 3000), ("c", 3000)]),
        )
        .unwrap();
        assert_eq!(
            r,
            Recommendation {
                replicas: 18,
                utilization: Some(300),
                average_milli: 3000
            }
        );
        // 20 % of 50 %: ceil(0.4 * 3) = 2.
        let u = [("a", 200), ("b", 200), ("c", 200)];
        assert_eq!(replicas(3, Target::Utilization(50), &pods, &u), 2);
    }

    #[test]
    fn within_the_tolerance_the_count_stays() {
        let pods = [
            pod("a", PodState::Ready, 1000),
            pod("b", PodState::Ready, 1000),
        ];
        // 54 % of 50 % is a ratio of 1.08.
        let u = [("a", 540), ("b", 540)];
        assert_eq!(replicas(2, Target::Utilization(50), &pods, &u), 2);
        // 56 %: 1.12, outside: ceil(2.24) = 3.
        let u = [("a", 560), ("b", 560)];
        assert_eq!(replicas(2, Target::Utilization(50), &pods, &u), 3);
    }

    #[test]
    fn ignored_pods_do_not_count_and_missing_pods_are_assumed_conservatively() {
        // Scale down with a missing pod: it is assumed at 100 % of its request, so the
        // recommendation shrinks less.
        let pods = [
            pod("a", PodState::Ready, 1000),
            pod("b", PodState::Ready, 1000),
            pod("gone", PodState::Ignored, 1000),
            pod("new", PodState::Ready, 1000),
        ];
        let u = [("a", 100), ("b", 100), ("gone", 5000)];
        // First ratio 10 %/50 % = 0.2 → with "new" at 1000: (100+100+1000)/3000 = 40 % → 0.8,
        // ceil(0.8 * 3) = 3.
        assert_eq!(replicas(4, Target::Utilization(50), &pods, &u), 3);
        // Scale up with a missing pod: it is assumed idle.
        let u = [("a", 1500), ("b", 1500)];
        // 150 %/50 % = 3 → with "new" at 0: 100 %/50 % = 2 → ceil(2 * 3) = 6.
        assert_eq!(replicas(3, Target::Utilization(50), &pods, &u), 6);
    }

    #[test]
    fn unready_pods_are_zero_when_scaling_up_and_ignored_otherwise() {
        let pods = [
            pod("a", PodState::Ready, 1000),
            pod("b", PodState::Unready, 1000),
        ];
        // 100 %/50 % = 2 → with b at 0: 50 %/50 % = 1.0, within tolerance: stays.
        let u = [("a", 1000), ("b", 4000)];
        assert_eq!(replicas(2, Target::Utilization(50), &pods, &u), 2);
        // Scaling down: unready samples dropped, ceil(0.4 * 1) = 1.
        let u = [("a", 200), ("b", 4000)];
        assert_eq!(replicas(2, Target::Utilization(50), &pods, &u), 1);
    }

    #[test]
    fn a_recomputed_ratio_that_flips_direction_keeps_the_count() {
        // a: 60 %/50 % = 1.2 (up), missing b assumed 0 → 30 % → 0.6 (down): stays.
        let pods = [
            pod("a", PodState::Ready, 1000),
            pod("b", PodState::Ready, 1000),
        ];
        assert_eq!(
            replicas(2, Target::Utilization(50), &pods, &[("a", 600)]),
            2
        );
    }

    #[test]
    fn average_value_targets_use_the_mean_sample() {
        let pods = [pod("a", PodState::Ready, 0), pod("b", PodState::Ready, 0)];
        let r = resource_replicas(
            2,
            "memory",
            Target::AverageValue(100_000),
            &pods,
            &usage(&[("a", 300_000), ("b", 100_000)]),
        )
        .unwrap();
        // Mean 200k over 100k: ceil(2 * 2) = 4.
        assert_eq!(
            r,
            Recommendation {
                replicas: 4,
                utilization: None,
                average_milli: 200_000
            }
        );
    }

    #[test]
    fn errors_say_what_is_missing() {
        let e = |pods: &[PodSample], u: &[(&str, i64)]| {
            resource_replicas(1, "cpu", Target::Utilization(50), pods, &usage(u))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e(&[], &[]),
            "no pods returned by selector while calculating replica count"
        );
        assert_eq!(
            e(&[pod("a", PodState::Unready, 1)], &[("a", 1)]),
            "did not receive metrics for targeted pods (pods might be unready)"
        );
        let no_request = PodSample {
            name: "a".into(),
            state: PodState::Ready,
            request_milli: Err(super::super::metrics::MissingRequest {
                container: "web".into(),
            }),
        };
        assert_eq!(
            e(&[no_request], &[("a", 1)]),
            "missing request for cpu in container web of Pod a"
        );
    }
}
