//! What one StatefulSet sync does (upstream's `StatefulSetControl.UpdateStatefulSet`), on
//! pod summaries: replace failed pods, create missing ordinals, delete ordinals past the
//! replica count (highest first), and roll pods onto the update revision from the highest
//! ordinal down to the partition. OrderedReady does one step at a time and only while every
//! lower pod is Running and Ready; Parallel does every create and delete at once.

use k8s_openapi::api::apps::v1::StatefulSetStatus;

/// One pod of the set as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub ordinal: i32,
    pub revision: String,
    /// Running with the Ready condition True.
    pub running_ready: bool,
    /// Ready for minReadySeconds.
    pub available: bool,
    pub terminating: bool,
    /// Succeeded or Failed: replaced.
    pub finished: bool,
}

/// The set's spec, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub replicas: i32,
    /// `spec.ordinals.start`.
    pub start: i32,
    pub parallel: bool,
    /// `Some(partition)` for RollingUpdate, `None` for OnDelete.
    pub rolling_partition: Option<i32>,
}

/// Which revision a created pod gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    Current,
    Update,
}

/// One action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Create { ordinal: i32, revision: Revision },
    Delete { name: String },
}

/// The steps of one sync, in order.
pub fn plan(spec: &Spec, members: &[Member], update_revision: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let end = spec.start + spec.replicas.max(0);
    let in_range = |o: i32| o >= spec.start && o < end;
    let find = |o: i32| members.iter().find(|m| m.ordinal == o);
    let ordered = !spec.parallel;

    for ordinal in spec.start..end {
        match find(ordinal) {
            None => {
                let revision = match spec.rolling_partition {
                    Some(p) if ordinal < spec.start + p => Revision::Current,
                    _ => Revision::Update,
                };
                steps.push(Step::Create { ordinal, revision });
                if ordered {
                    return steps;
                }
            }
            Some(m) if m.finished && !m.terminating => {
                steps.push(Step::Delete {
                    name: m.name.clone(),
                });
                if ordered {
                    return steps;
                }
            }
            Some(m) if ordered && (m.terminating || !m.running_ready) => return steps,
            Some(_) => {}
        }
    }

    let mut condemned: Vec<&Member> = members.iter().filter(|m| !in_range(m.ordinal)).collect();
    condemned.sort_by_key(|m| std::cmp::Reverse(m.ordinal));
    for m in condemned {
        if m.terminating {
            if ordered {
                return steps;
            }
            continue;
        }
        steps.push(Step::Delete {
            name: m.name.clone(),
        });
        if ordered {
            return steps;
        }
    }
    if !steps.is_empty() {
        return steps;
    }

    let Some(partition) = spec.rolling_partition else {
        return steps;
    };
    for ordinal in (spec.start + partition.max(0)..end).rev() {
        let Some(m) = find(ordinal) else { return steps };
        if m.revision != update_revision && !m.terminating {
            steps.push(Step::Delete {
                name: m.name.clone(),
            });
            return steps;
        }
        if !m.running_ready || m.terminating {
            return steps;
        }
    }
    steps
}

/// The status the members add up to; `current`/`update` are the revision names. The current
/// revision becomes the update revision once every pod is updated and ready.
pub fn status(
    old: &StatefulSetStatus,
    generation: Option<i64>,
    rolling: bool,
    members: &[Member],
    current: &str,
    update: &str,
) -> StatefulSetStatus {
    let count = |f: &dyn Fn(&Member) -> bool| {
        i32::try_from(members.iter().filter(|m| f(m)).count()).unwrap_or(i32::MAX)
    };
    let nonzero = |v: i32| (v != 0).then_some(v);
    let replicas = count(&|_| true);
    let ready = count(&|m| m.running_ready);
    let updated = count(&|m| m.revision == update);
    let mut st = StatefulSetStatus {
        observed_generation: generation,
        replicas,
        ready_replicas: nonzero(ready),
        available_replicas: Some(count(&|m| m.available)),
        current_replicas: nonzero(count(&|m| m.revision == current)),
        updated_replicas: nonzero(updated),
        current_revision: Some(current.to_string()),
        update_revision: Some(update.to_string()),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
    };
    if rolling && updated == replicas && ready == replicas {
        st.current_replicas = nonzero(updated);
        st.current_revision = Some(update.to_string());
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(ordinal: i32, rev: &str, ready: bool) -> Member {
        Member {
            name: format!("web-{ordinal}"),
            ordinal,
            revision: rev.into(),
            running_ready: ready,
            available: ready,
            terminating: false,
            finished: false,
        }
    }

    fn spec(replicas: i32, parallel: bool, partition: Option<i32>) -> Spec {
        Spec {
            replicas,
            start: 0,
            parallel,
            rolling_partition: partition,
        }
    }

    fn create(ordinal: i32) -> Step {
        Step::Create {
            ordinal,
            revision: Revision::Update,
        }
    }

    fn delete(name: &str) -> Step {
        Step::Delete { name: name.into() }
    }

    #[test]
    fn ordered_ready_creates_one_at_a_time_after_the_lower_ones_are_ready() {
        let s = spec(3, false, Some(0));
        assert_eq!(plan(&s, &[], "r1"), [create(0)]);
        assert_eq!(plan(&s, &[m(0, "r1", false)], "r1"), []);
        assert_eq!(plan(&s, &[m(0, "r1", true)], "r1"), [create(1)]);
        assert_eq!(
            plan(&s, &[m(0, "r1", true), m(1, "r1", true)], "r1"),
            [create(2)]
        );
    }

    #[test]
    fn ordered_ready_deletes_the_highest_ordinal_first() {
        let s = spec(1, false, Some(0));
        let all = [m(0, "r1", true), m(1, "r1", true), m(2, "r1", true)];
        assert_eq!(plan(&s, &all, "r1"), [delete("web-2")]);
        let mut terminating = all.clone();
        terminating[2].terminating = true;
        assert_eq!(plan(&s, &terminating, "r1"), []);
        assert_eq!(plan(&s, &all[..2], "r1"), [delete("web-1")]);
    }

    #[test]
    fn parallel_creates_and_deletes_at_once() {
        assert_eq!(
            plan(&spec(3, true, Some(0)), &[], "r1"),
            [create(0), create(1), create(2)]
        );
        let all = [m(0, "r1", false), m(1, "r1", true), m(2, "r1", true)];
        assert_eq!(
            plan(&spec(0, true, Some(0)), &all, "r1"),
            [delete("web-2"), delete("web-1"), delete("web-0")]
        );
    }

    #[test]
    fn rolling_update_goes_down_to_the_partition_one_pod_at_a_time() {
        let s = spec(3, false, Some(1));
        let all = [m(0, "r1", true), m(1, "r1", true), m(2, "r1", true)];
        assert_eq!(plan(&s, &all, "r2"), [delete("web-2")]);
        let all = [m(0, "r1", true), m(1, "r1", true), m(2, "r2", false)];
        assert_eq!(plan(&s, &all, "r2"), []);
        let all = [m(0, "r1", true), m(1, "r1", true), m(2, "r2", true)];
        assert_eq!(plan(&s, &all, "r2"), [delete("web-1")]);
        let all = [m(0, "r1", true), m(1, "r2", true), m(2, "r2", true)];
        assert_eq!(plan(&s, &all, "r2"), []);
        // A pod below the partition is recreated at the current revision.
        let s = spec(3, false, Some(1));
        assert_eq!(
            plan(&s, &[], "r2"),
            [Step::Create {
                ordinal: 0,
                revision: Revision::Current
            }]
        );
        // OnDelete never deletes for an update.
        let all = [m(0, "r1", true)];
        assert_eq!(plan(&spec(1, false, None), &all, "r2"), []);
    }

    #[test]
    fn failed_pods_are_replaced() {
        let mut failed = m(0, "r1", false);
        failed.finished = true;
        assert_eq!(
            plan(&spec(1, false, Some(0)), &[failed], "r1"),
            [delete("web-0")]
        );
    }

    #[test]
    fn status_counts_and_completes_the_rollout() {
        let all = [m(0, "r2", true), m(1, "r1", true)];
        let st = status(
            &StatefulSetStatus::default(),
            Some(4),
            true,
            &all,
            "r1",
            "r2",
        );
        assert_eq!(
            (
                st.replicas,
                st.ready_replicas,
                st.current_replicas,
                st.updated_replicas
            ),
            (2, Some(2), Some(1), Some(1))
        );
        assert_eq!(st.current_revision.as_deref(), Some("r1"));
        let all = [m(0, "r2", true), m(1, "r2", true)];
        let st = status(
            &StatefulSetStatus::default(),
            Some(4),
            true,
            &all,
            "r1",
            "r2",
        );
        assert_eq!(st.current_revision.as_deref(), Some("r2"));
        assert_eq!(st.current_replicas, Some(2));
        assert_eq!(st.observed_generation, Some(4));
    }
}
