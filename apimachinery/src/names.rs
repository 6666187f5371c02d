//! Object names as apimachinery's `util/validation` and `api/validation` check them:
//! `IsDNS1123Subdomain`, `IsDNS1123Label`, `IsDNS1035Label`, `IsValidPathSegmentName`, and
//! the prefix form used for `generateName` (`maskTrailingDash`).
//!
//! # Guarantees
//! - The answers and messages are upstream's, one message per failed rule, in upstream's
//!   order: a 300-character subdomain with an upper-case letter gets both the length and
//!   the pattern message.
//! - A subdomain is up to 253 characters of dot-separated labels; the labels inside it are
//!   not limited to 63 characters (only a name that *is* a label is).

use crate::catalog::NameRule;

/// `DNS1123LabelMaxLength` (also the DNS-1035 label's).
pub const LABEL_MAX_LENGTH: usize = 63;
/// `DNS1123SubdomainMaxLength`.
pub const SUBDOMAIN_MAX_LENGTH: usize = 253;

/// Upstream's message for a name that is no RFC 1123 label.
pub const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
/// Upstream's message for a name that is no RFC 1123 subdomain.
pub const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// Upstream's message for a name that is no DNS-1035 label.
pub const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const NO_DOTS_MSG: &str = "must not contain dots";

fn lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length.
fn matches_label_pattern(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && lower_alnum(b[0])
        && lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| lower_alnum(c) || c == b'-')
}

/// `<label>(\.<label>)*`, of any length.
fn matches_subdomain_pattern(s: &str) -> bool {
    s.split('.').all(matches_label_pattern)
}

fn max_len_error(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// `IsDNS1123Label`: what is wrong with `s` as an RFC 1123 label (empty when nothing).
pub fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX_LENGTH {
        errs.push(max_len_error(LABEL_MAX_LENGTH));
    }
    if !matches_label_pattern(s) {
        errs.push(if matches_subdomain_pattern(s) {
            NO_DOTS_MSG.to_string()
        } else {
            DNS1123_LABEL_MSG.to_string()
        });
    }
    errs
}

/// `IsDNS1123Subdomain`: what is wrong with `s` as an RFC 1123 subdomain.
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_subdomain_pattern(s) {
        errs.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    errs
}

/// `IsDNS1035Label`: what is wrong with `s` as an RFC 1035 label.
pub fn dns1035_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX_LENGTH {
        errs.push(max_len_error(LABEL_MAX_LENGTH));
    }
    if !(matches_label_pattern(s) && s.as_bytes()[0].is_ascii_lowercase()) {
        errs.push(DNS1035_LABEL_MSG.to_string());
    }
    errs
}

/// `IsValidPathSegmentName` (`prefix`: `IsValidPathSegmentPrefix`, which allows `.`/`..`).
pub fn path_segment_errors(s: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        if let Some(bad) = [".", ".."].into_iter().find(|b| s == *b) {
            return vec![format!("may not be '{bad}'")];
        }
    }
    ['/', '%']
        .into_iter()
        .filter(|c| s.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// Whether `s` is an RFC 1123 label (`IsDNS1123Label`: at most 63 characters).
pub fn is_dns1123_label(s: &str) -> bool {
    dns1123_label_errors(s).is_empty()
}

/// Whether `s` is an RFC 1123 subdomain (`IsDNS1123Subdomain`: at most 253 characters).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    dns1123_subdomain_errors(s).is_empty()
}

/// Whether `s` is a DNS-1035 label (`IsDNS1035Label`: an RFC 1123 label starting with a letter).
pub fn is_dns1035_label(s: &str) -> bool {
    dns1035_label_errors(s).is_empty()
}

/// upstream's `maskTrailingDash`, quirk included: a trailing dash drops the last *two*
/// characters and appends an `a`, so that a prefix such as `web-` validates.
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(_) if name.len() > 1 => format!("{}a", &name[..name.len() - 2]),
        _ => name.to_string(),
    }
}

/// What is wrong with `name` under `rule` (the resource's `ValidateNameFunc`); `prefix`
/// checks a `generateName`, to which a suffix will be appended.
pub fn name_errors(name: &str, rule: NameRule, prefix: bool) -> Vec<String> {
    if rule == NameRule::PathSegment {
        return path_segment_errors(name, prefix);
    }
    let name = if prefix {
        mask_trailing_dash(name)
    } else {
        name.to_string()
    };
    match rule {
        NameRule::Subdomain => dns1123_subdomain_errors(&name),
        NameRule::Label => dns1123_label_errors(&name),
        NameRule::Rfc1035Label => dns1035_label_errors(&name),
        NameRule::PathSegment => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's rules, restated as regular expressions over the whole name: a table of
    /// names of 1..=260 characters with and without dots, checked against them.
    fn upstream_subdomain(s: &str) -> bool {
        s.len() <= 253 && regex_lite_subdomain(s)
    }

    /// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`, by a small automaton
    /// independent of the implementation above (states: start of label, inside, after '-').
    fn regex_lite_subdomain(s: &str) -> bool {
        #[derive(PartialEq)]
        enum At {
            LabelStart,
            Alnum,
            Dash,
        }
        let mut at = At::LabelStart;
        for c in s.chars() {
            at = match (at, c) {
                (_, 'a'..='z' | '0'..='9') => At::Alnum,
                (At::Alnum | At::Dash, '-') => At::Dash,
                (At::Alnum, '.') => At::LabelStart,
                _ => return false,
            };
        }
        at == At::Alnum
    }

    fn upstream_label(s: &str) -> bool {
        s.len() <= 63 && !s.contains('.') && regex_lite_subdomain(s)
    }

    fn upstream_1035(s: &str) -> bool {
        upstream_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
    }

    /// Names of every length 1..=260: plain (`aaa…`), with dots every 70 characters (labels
    /// past 63), starting with a digit, ending with a dash, with an upper-case letter.
    fn table() -> Vec<String> {
        let mut names = Vec::new();
        for n in 1..=260 {
            names.push("a".repeat(n));
            names.push(
                (0..n)
                    .map(|i| if i % 70 == 69 && i + 1 < n { '.' } else { 'b' })
                    .collect(),
            );
            names.push(format!("1{}", "c".repeat(n - 1)));
            names.push(format!("{}-", "d".repeat(n - 1)));
            names.push(format!("{}X", "e".repeat(n - 1)));
        }
        names
    }

    #[test]
    fn every_length_against_upstreams_patterns() {
        for name in table() {
            assert_eq!(
                is_dns1123_subdomain(&name),
                upstream_subdomain(&name),
                "subdomain {} chars: {name}",
                name.len()
            );
            assert_eq!(
                is_dns1123_label(&name),
                upstream_label(&name),
                "label {name}"
            );
            assert_eq!(is_dns1035_label(&name), upstream_1035(&name), "1035 {name}");
        }
    }

    #[test]
    fn the_issue_s_cases() {
        // 64..=253 characters without dots: a subdomain, not a label.
        for n in [64, 100, 200, 253] {
            let name = "x".repeat(n);
            assert!(is_dns1123_subdomain(&name), "{n}");
            assert_eq!(
                dns1123_label_errors(&name),
                ["must be no more than 63 characters"]
            );
        }
        assert_eq!(
            dns1123_subdomain_errors(&"x".repeat(254)),
            ["must be no more than 253 characters"]
        );
        // A label of 100 characters inside a subdomain is fine.
        assert!(is_dns1123_subdomain(&format!(
            "{}.example.com",
            "a".repeat(100)
        )));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain("a.-b"));
        assert!(!is_dns1123_subdomain(".a"));
        assert!(!is_dns1123_subdomain(""));
    }

    #[test]
    fn messages_are_upstreams_and_each_failed_rule_has_one() {
        let long_and_bad = format!("{}X", "a".repeat(300));
        assert_eq!(
            dns1123_subdomain_errors(&long_and_bad),
            [
                "must be no more than 253 characters".to_string(),
                DNS1123_SUBDOMAIN_MSG.to_string()
            ]
        );
        assert_eq!(dns1123_label_errors("a.b"), [NO_DOTS_MSG]);
        assert_eq!(dns1123_label_errors("A"), [DNS1123_LABEL_MSG]);
        assert_eq!(dns1035_label_errors("1abc"), [DNS1035_LABEL_MSG]);
        assert_eq!(
            dns1035_label_errors(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
    }

    #[test]
    fn path_segment_names() {
        assert_eq!(path_segment_errors(".", false), ["may not be '.'"]);
        assert_eq!(path_segment_errors("..", false), ["may not be '..'"]);
        assert!(path_segment_errors("..", true).is_empty());
        assert_eq!(
            path_segment_errors("a/b%c", false),
            ["may not contain '/'", "may not contain '%'"]
        );
        // No length limit and any characters but '/' and '%'.
        assert!(path_segment_errors(&"R:x".repeat(200), false).is_empty());
        assert!(name_errors("system:controller:x", NameRule::PathSegment, false).is_empty());
    }

    #[test]
    fn prefixes_may_end_with_a_dash() {
        assert!(name_errors("web-", NameRule::Subdomain, true).is_empty());
        assert!(!name_errors("web-", NameRule::Subdomain, false).is_empty());
        assert!(name_errors("web-", NameRule::Rfc1035Label, true).is_empty());
        // The quirk: two characters go, so "a.-" masks to "aa" and passes.
        assert!(name_errors("a.-", NameRule::Subdomain, true).is_empty());
        // A lone dash is not masked.
        assert!(!name_errors("-", NameRule::Subdomain, true).is_empty());
        assert!(!name_errors("Web-", NameRule::Subdomain, true).is_empty());
    }
}
