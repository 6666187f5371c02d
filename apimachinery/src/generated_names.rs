//! Names the API server and the controllers make, truncated as upstream truncates them:
//! `generateName` (apiserver's `SimpleNameGenerator`), a controller's pods prefix
//! (`getPodsPrefix`), ControllerRevision names (`ControllerRevisionName`) and an indexed
//! Job's pod prefix (`podGenerateNameWithIndex`).
//!
//! # Guarantees
//! - A generated name is at most 63 characters: the `generateName` base is cut to 58
//!   and 5 random characters follow, so a 60-character Deployment's pods still get names.
//! - Names upstream does not truncate are not truncated here either: a ReplicaSet is
//!   `<deployment>-<hash>` and a CronJob's Job `<cronjob>-<minutes>` whatever their length
//!   (validation refuses them when too long, as kube-apiserver does).

use crate::catalog::NameRule;
use crate::meta;
use crate::names;

/// `names.MaxGeneratedNameLength`: 63 minus the 5 random characters.
pub const MAX_GENERATED_NAME_LENGTH: usize = 58;

/// The longest ControllerRevision prefix kept (`ControllerRevisionName`).
const MAX_REVISION_PREFIX_LENGTH: usize = 223;

/// `s` cut to at most `max` bytes (at a character boundary; names are ASCII once valid).
fn truncated(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The name a create with `generateName: base` gets: `base` cut to 58 characters, then 5
/// random characters.
pub fn generate(base: &str) -> String {
    format!(
        "{}{}",
        truncated(base, MAX_GENERATED_NAME_LENGTH),
        meta::random_suffix()
    )
}

/// `<controller>-`, the generateName of a controller's pods; the bare name when that is not
/// a valid pod name prefix (upstream's `getPodsPrefix`; with `maskTrailingDash`'s quirk, any
/// valid controller name keeps the dash).
pub fn pods_prefix(controller_name: &str) -> String {
    let prefix = format!("{controller_name}-");
    if names::name_errors(&prefix, NameRule::Subdomain, true).is_empty() {
        prefix
    } else {
        controller_name.to_string()
    }
}

/// `<prefix>-<hash>`, the prefix cut to 223 characters (`ControllerRevisionName`).
pub fn controller_revision_name(prefix: &str, hash: &str) -> String {
    format!("{}-{hash}", truncated(prefix, MAX_REVISION_PREFIX_LENGTH))
}

/// `<job>-<index>-`, the generateName of an indexed Job's pod; the job name is cut so the
/// whole fits 58 characters and the index survives (`podGenerateNameWithIndex`).
pub fn indexed_pod_prefix(job: &str, index: i64) -> String {
    let append = format!("-{index}-");
    let prefix = format!("{job}{append}");
    if prefix.len() <= MAX_GENERATED_NAME_LENGTH {
        return prefix;
    }
    format!(
        "{}{append}",
        truncated(job, MAX_GENERATED_NAME_LENGTH.saturating_sub(append.len()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_name_keeps_58_characters_of_the_base() {
        let short = generate("web-");
        assert!(short.starts_with("web-") && short.len() == 9, "{short}");
        let base = format!("{}-", "d".repeat(99));
        let long = generate(&base);
        assert_eq!(long.len(), 63);
        assert!(long.starts_with(&"d".repeat(58)), "{long}");
        assert!(names::is_dns1123_label(&long), "{long}");
        // Non-ASCII is cut at a character boundary, not in the middle (validation refuses it).
        assert!(generate(&"é".repeat(40)).len() <= 63);
    }

    #[test]
    fn pods_prefix_as_upstream() {
        assert_eq!(pods_prefix("web-5d8f7"), "web-5d8f7-");
        // maskTrailingDash drops two characters: a 254-character prefix still validates.
        let long = "r".repeat(253);
        assert_eq!(pods_prefix(&long), format!("{long}-"));
        // A prefix that is not a valid name start stays without the dash.
        assert_eq!(pods_prefix("Web"), "Web");
    }

    #[test]
    fn revision_names_cut_the_prefix_at_223() {
        assert_eq!(controller_revision_name("db", "6b8d"), "db-6b8d");
        let name = controller_revision_name(&"s".repeat(250), "6b8d");
        assert_eq!(name, format!("{}-6b8d", "s".repeat(223)));
    }

    #[test]
    fn indexed_pod_prefixes_keep_the_index() {
        assert_eq!(indexed_pod_prefix("pi", 3), "pi-3-");
        let p = indexed_pod_prefix(&"j".repeat(60), 12);
        assert_eq!(p, format!("{}-12-", "j".repeat(54)));
        assert_eq!(p.len(), MAX_GENERATED_NAME_LENGTH);
    }
}
