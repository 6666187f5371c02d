//! kube-controller-manager's `--controllers` list: which controllers run.
//!
//! Upstream's rule: an explicit `name` or `-name` in the list decides; otherwise `*` turns on
//! every controller that is on by default (all of ours are); without `*` the rest stay off.

/// A `--controllers` value that names only controllers the manager knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection(Vec<String>);

/// A `--controllers` value that names a controller the manager does not have.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--controllers: {0:?} is not in the list of known controllers ({1})")]
pub struct UnknownController(pub String, pub String);

impl Default for Selection {
    /// `*`: every controller.
    fn default() -> Selection {
        Selection(vec!["*".to_string()])
    }
}

impl Selection {
    /// Parses a comma-separated list, checking each name against `known`.
    pub fn parse(list: &str, known: &[&str]) -> Result<Selection, UnknownController> {
        let items: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        for item in &items {
            let name = item.strip_prefix('-').unwrap_or(item);
            if name != "*" && !known.contains(&name) {
                return Err(UnknownController(item.clone(), known.join(", ")));
            }
        }
        Ok(Selection(items))
    }

    /// Turns controller `name` off whatever the list says (k3s's `--disable` of a packaged
    /// component wins over `--controllers`).
    pub fn exclude(&mut self, name: &str) {
        self.0.insert(0, format!("-{name}"));
    }

    /// Whether controller `name` runs.
    pub fn enables(&self, name: &str) -> bool {
        for item in &self.0 {
            if item == name {
                return true;
            }
            if item.strip_prefix('-') == Some(name) {
                return false;
            }
        }
        self.0.iter().any(|i| i == "*")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &["serviceaccount", "resourcequota", "root-ca-cert-publisher"];

    #[test]
    fn exclude_wins_over_an_explicit_name() {
        let mut s = Selection::parse("serviceaccount,resourcequota", KNOWN).unwrap();
        s.exclude("serviceaccount");
        assert!(!s.enables("serviceaccount"));
        assert!(s.enables("resourcequota"));
        let mut all = Selection::default();
        all.exclude("resourcequota");
        assert!(!all.enables("resourcequota"));
        assert!(all.enables("root-ca-cert-publisher"));
    }

    #[test]
    fn star_enables_all_but_the_excluded() {
        let s = Selection::parse("*,-resourcequota", KNOWN).unwrap();
        assert!(s.enables("serviceaccount"));
        assert!(!s.enables("resourcequota"));
        assert!(Selection::default().enables("resourcequota"));
    }

    #[test]
    fn without_star_only_the_named_run() {
        let s = Selection::parse("serviceaccount", KNOWN).unwrap();
        assert!(s.enables("serviceaccount"));
        assert!(!s.enables("root-ca-cert-publisher"));
        assert!(!Selection::parse("", KNOWN)
            .unwrap()
            .enables("serviceaccount"));
    }

    #[test]
    fn explicit_names_win_over_star_wherever_they_stand() {
        let s = Selection::parse("-serviceaccount,*", KNOWN).unwrap();
        assert!(!s.enables("serviceaccount"));
        assert!(s.enables("resourcequota"));
    }

    #[test]
    fn unknown_names_are_refused() {
        let e = Selection::parse("*,-replicaset", KNOWN).unwrap_err();
        assert_eq!(e.0, "-replicaset");
        assert!(e
            .to_string()
            .contains("not in the list of known controllers"));
    }
}
