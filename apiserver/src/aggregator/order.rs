//! The order of groups and versions in discovery, as kube-aggregator sorts its APIServices
//! (`helper.SortedByGroupAndVersion`): groups by their highest `groupPriorityMinimum`
//! (descending), then by name; a group's versions by `versionPriority` (descending), then in
//! kube's version order ([`compare_versions`]).

use std::cmp::Ordering;

/// One registered group/version with its priorities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub group: String,
    pub version: String,
    pub group_priority: i64,
    pub version_priority: i64,
}

/// A kube-like version (`v1`, `v2beta1`, `v1alpha3`): major, stability (GA 2, beta 1,
/// alpha 0) and minor.
fn kube_like(v: &str) -> Option<(u64, u8, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major: u64 = rest[..digits].parse().ok()?;
    let tail = &rest[digits..];
    let (stability, minor) = if tail.is_empty() {
        return Some((major, 2, 0));
    } else if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (0, m)
    } else {
        return None;
    };
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((major, stability, minor.parse().ok()?))
}

/// Kube's version order (`CompareKubeAwareVersionStrings`), `Less` meaning `a` comes first:
/// kube-like versions before the others; GA before beta before alpha; within those, the
/// higher major, then the higher minor first; the others by name.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (kube_like(a), kube_like(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The groups of `registered` with their versions, in discovery order.
pub fn sorted(registered: &[Registered]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, i64, Vec<&Registered>)> = Vec::new();
    for r in registered {
        match groups.iter_mut().find(|(g, _, _)| *g == r.group) {
            Some((_, priority, versions)) => {
                *priority = (*priority).max(r.group_priority);
                versions.push(r);
            }
            None => groups.push((r.group.clone(), r.group_priority, vec![r])),
        }
    }
    groups.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    groups
        .into_iter()
        .map(|(g, _, mut versions)| {
            versions.sort_by(|a, b| {
                b.version_priority
                    .cmp(&a.version_priority)
                    .then_with(|| compare_versions(&a.version, &b.version))
            });
            let mut names: Vec<String> = versions.iter().map(|r| r.version.clone()).collect();
            names.dedup();
            (g, names)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_version_order() {
        let mut vs = [
            "v1alpha1",
            "foo10",
            "v2",
            "v1beta2",
            "v11alpha2",
            "v1",
            "v12alpha1",
            "foo1",
            "v10beta3",
            "v3beta1",
            "v10",
            "v1beta1",
        ];
        vs.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            vs,
            [
                "v10",
                "v2",
                "v1",
                "v10beta3",
                "v3beta1",
                "v1beta2",
                "v1beta1",
                "v12alpha1",
                "v11alpha2",
                "v1alpha1",
                "foo1",
                "foo10"
            ]
        );
        assert_eq!(compare_versions("v1x", "v1"), Ordering::Greater);
        assert_eq!(compare_versions("v1beta", "v1"), Ordering::Greater);
    }

    fn reg(group: &str, version: &str, gp: i64, vp: i64) -> Registered {
        Registered {
            group: group.into(),
            version: version.into(),
            group_priority: gp,
            version_priority: vp,
        }
    }

    #[test]
    fn groups_by_priority_then_name_versions_by_priority_then_kube_order() {
        let registered = [
            reg("zeta.example.com", "v1", 1000, 15),
            reg("apps", "v1", 17800, 15),
            reg("alpha.example.com", "v1alpha1", 1000, 15),
            reg("alpha.example.com", "v1", 1000, 15),
            reg("alpha.example.com", "v2beta1", 1000, 15),
            // One high version priority wins over kube order; the group takes its
            // highest group priority.
            reg("wardle.example.com", "v1alpha1", 900, 20),
            reg("wardle.example.com", "v1beta1", 2000, 10),
        ];
        assert_eq!(
            sorted(&registered),
            [
                ("apps".to_string(), vec!["v1".to_string()]),
                (
                    "wardle.example.com".to_string(),
                    vec!["v1alpha1".to_string(), "v1beta1".to_string()]
                ),
                (
                    "alpha.example.com".to_string(),
                    vec!["v1".into(), "v2beta1".into(), "v1alpha1".into()]
                ),
                ("zeta.example.com".to_string(), vec!["v1".to_string()]),
            ]
        );
    }
}
