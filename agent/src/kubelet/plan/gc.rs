//! Container garbage collection for a pod that lives on (upstream's container GC with its
//! defaults: minimum age 0, one dead container kept per container name): of each name's
//! containers that are not running, all but the newest are removed. The executor runs it
//! periodically (upstream: every minute); a deleted pod's containers and sandboxes go with
//! [`super::Action::FinishDeletion`].

use std::collections::BTreeSet;

use super::actions::Action;
use super::observed::{ContainerState, ObservedPod};

/// How many dead containers per container name are kept (`MaxPerPodContainer`).
pub const MAX_DEAD_PER_CONTAINER: usize = 1;

/// The dead containers to remove.
pub fn garbage(observed: &ObservedPod) -> Vec<Action> {
    let dead: Vec<_> = observed
        .containers_newest_first()
        .into_iter()
        .filter(|c| c.state != ContainerState::Running)
        .collect();
    let names: BTreeSet<&str> = dead.iter().map(|c| c.name.as_str()).collect();
    let mut out = vec![];
    for name in names {
        for c in dead
            .iter()
            .filter(|c| c.name == name)
            .skip(MAX_DEAD_PER_CONTAINER)
        {
            out.push(Action::RemoveContainer { id: c.id.clone() });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::lifecycle::tests::ctr;
    use ContainerState::*;

    #[test]
    fn keeps_the_newest_dead_container_of_each_name() {
        let o = ObservedPod {
            containers: vec![
                ctr("c", Exited, 1, 0, 1),
                ctr("c", Exited, 1, 1, 5),
                ctr("c", Exited, 1, 2, 9),
                ctr("c", Running, 0, 3, 13),
                ctr("i", Exited, 0, 0, 0),
                ctr("d", Running, 0, 0, 2),
            ],
            ..Default::default()
        };
        assert_eq!(
            garbage(&o),
            vec![
                Action::RemoveContainer { id: "c-1".into() },
                Action::RemoveContainer { id: "c-0".into() },
            ]
        );
        assert_eq!(garbage(&ObservedPod::default()), vec![]);
    }
}
