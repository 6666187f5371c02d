//! What one round of deleting a namespace's content found, and the status conditions
//! upstream's namespace controller reports for it (types, reasons and messages as upstream).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NamespaceCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The outcome of one round over every namespaced resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Group-versions whose discovery failed (`"<group/version>: <error>"`).
    pub discovery_failures: Vec<String>,
    /// Resources whose deletion failed (`"<resource>: <error>"`).
    pub content_failures: Vec<String>,
    /// Objects still there after the round, per group-resource (`pods`, `jobs.batch`).
    pub remaining: BTreeMap<String, usize>,
    /// Finalizers on the remaining objects, with how many objects carry each.
    pub finalizers: BTreeMap<String, usize>,
}

impl Outcome {
    /// Whether the namespace is empty and nothing failed: it may be finalized.
    pub fn done(&self) -> bool {
        self.discovery_failures.is_empty()
            && self.content_failures.is_empty()
            && self.remaining.is_empty()
    }

    /// The five deletion conditions, in upstream's order (without transition times).
    pub fn conditions(&self) -> Vec<NamespaceCondition> {
        let discovery = if self.discovery_failures.is_empty() {
            cond(
                "NamespaceDeletionDiscoveryFailure",
                false,
                "ResourcesDiscovered",
                "All resources successfully discovered".into(),
            )
        } else {
            cond(
                "NamespaceDeletionDiscoveryFailure",
                true,
                "DiscoveryFailed",
                format!(
                    "Discovery failed for some groups, {} failing: {}",
                    self.discovery_failures.len(),
                    self.discovery_failures.join(", ")
                ),
            )
        };
        let parsing = cond(
            "NamespaceDeletionGroupVersionParsingFailure",
            false,
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".into(),
        );
        let content = if self.content_failures.is_empty() {
            cond(
                "NamespaceDeletionContentFailure",
                false,
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization".into(),
            )
        } else {
            cond(
                "NamespaceDeletionContentFailure",
                true,
                "ContentDeletionFailed",
                format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    self.content_failures.len(),
                    self.content_failures.join(", ")
                ),
            )
        };
        let remaining = if self.remaining.is_empty() {
            cond(
                "NamespaceContentRemaining",
                false,
                "ContentRemoved",
                "All content successfully removed".into(),
            )
        } else {
            let what: Vec<String> = self
                .remaining
                .iter()
                .map(|(r, n)| format!("{r} has {n} resource instances"))
                .collect();
            cond(
                "NamespaceContentRemaining",
                true,
                "SomeResourcesRemain",
                format!("Some resources are remaining: {}", what.join(", ")),
            )
        };
        let finalizers = if self.finalizers.is_empty() {
            cond(
                "NamespaceFinalizersRemaining",
                false,
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished".into(),
            )
        } else {
            let what: Vec<String> = self
                .finalizers
                .iter()
                .map(|(f, n)| format!("{f} in {n} resource instances"))
                .collect();
            cond(
                "NamespaceFinalizersRemaining",
                true,
                "SomeFinalizersRemain",
                format!(
                    "Some content in the namespace has finalizers remaining: {}",
                    what.join(", ")
                ),
            )
        };
        vec![discovery, parsing, content, remaining, finalizers]
    }
}

fn cond(type_: &str, status: bool, reason: &str, message: String) -> NamespaceCondition {
    NamespaceCondition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: None,
    }
}

/// `new` with transition times: a condition whose status did not change keeps its old time,
/// the others get `now`. Conditions of other types in `old` are kept. `None` when nothing
/// changed (no status write needed).
pub fn merge(
    old: &[NamespaceCondition],
    new: Vec<NamespaceCondition>,
    now: Time,
) -> Option<Vec<NamespaceCondition>> {
    let mut out: Vec<NamespaceCondition> = old
        .iter()
        .filter(|o| !new.iter().any(|n| n.type_ == o.type_))
        .cloned()
        .collect();
    let mut changed = false;
    for mut n in new {
        match old.iter().find(|o| o.type_ == n.type_) {
            Some(o) if o.status == n.status => {
                n.last_transition_time = o.last_transition_time.clone();
                changed |= o.reason != n.reason || o.message != n.message;
            }
            _ => {
                n.last_transition_time = Some(now.clone());
                changed = true;
            }
        }
        out.push(n);
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn an_emptied_namespace_reports_all_clear() {
        let o = Outcome::default();
        assert!(o.done());
        let c = o.conditions();
        let summary: Vec<(&str, &str, &str)> = c
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "NamespaceDeletionDiscoveryFailure",
                    "False",
                    "ResourcesDiscovered"
                ),
                (
                    "NamespaceDeletionGroupVersionParsingFailure",
                    "False",
                    "ParsedGroupVersions"
                ),
                ("NamespaceDeletionContentFailure", "False", "ContentDeleted"),
                ("NamespaceContentRemaining", "False", "ContentRemoved"),
                (
                    "NamespaceFinalizersRemaining",
                    "False",
                    "ContentHasNoFinalizers"
                ),
            ]
        );
    }

    #[test]
    fn remaining_content_and_finalizers_are_counted_in_upstream_words() {
        let o = Outcome {
            remaining: [
                ("pods".to_string(), 2),
                ("widgets.example.com".to_string(), 1),
            ]
            .into_iter()
            .collect(),
            finalizers: [("example.com/keep".to_string(), 1)].into_iter().collect(),
            ..Outcome::default()
        };
        assert!(!o.done());
        let c = o.conditions();
        assert_eq!(c[3].status, "True");
        assert_eq!(
            c[3].message.as_deref(),
            Some("Some resources are remaining: pods has 2 resource instances, widgets.example.com has 1 resource instances")
        );
        assert_eq!(c[4].reason.as_deref(), Some("SomeFinalizersRemain"));
        assert_eq!(
            c[4].message.as_deref(),
            Some("Some content in the namespace has finalizers remaining: example.com/keep in 1 resource instances")
        );
    }

    #[test]
    fn failures_block_finalization() {
        let o = Outcome {
            content_failures: vec!["pods: boom".into()],
            ..Outcome::default()
        };
        assert!(!o.done());
        assert_eq!(
            o.conditions()[2].message.as_deref(),
            Some("Failed to delete all resource types, 1 remaining: pods: boom")
        );
    }

    #[test]
    fn merge_keeps_times_of_unchanged_statuses_and_reports_no_change() {
        let first = merge(&[], Outcome::default().conditions(), time(10)).unwrap();
        assert!(first
            .iter()
            .all(|c| c.last_transition_time == Some(time(10))));
        assert_eq!(
            merge(&first, Outcome::default().conditions(), time(20)),
            None
        );
        let busy = Outcome {
            remaining: [("pods".to_string(), 1)].into_iter().collect(),
            ..Outcome::default()
        };
        let second = merge(&first, busy.conditions(), time(30)).unwrap();
        assert_eq!(second[3].last_transition_time, Some(time(30)));
        assert_eq!(second[0].last_transition_time, Some(time(10)));
    }
}
