//! Query parameters as kube-apiserver's parameter codec reads them.
//!
//! # Guarantees
//! - A single-valued parameter repeated in the query means its **first** value, everywhere
//!   (upstream converts `url.Values` to option structs with `Convert_Slice_string_To_*`, which
//!   take `values[0]`). Authorization, admission, audit and the handler all read this one
//!   value, so no stage can judge a request narrower than another serves it.
//! - Multi-valued parameters (`command`, `ports`, `dryRun`, `exclude`) keep every value, in
//!   order.

/// The decoded `name=value` pairs of a query string, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryParams {
    pairs: Vec<(String, String)>,
}

impl QueryParams {
    /// Decodes a raw query string (`application/x-www-form-urlencoded`: `+` is a space,
    /// `%XX` escapes; invalid UTF-8 is replaced, as Go's `url.ParseQuery` does).
    pub fn parse(raw: Option<&str>) -> QueryParams {
        QueryParams {
            pairs: form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
                .into_owned()
                .collect(),
        }
    }

    /// Builds params from pairs (tests and in-process callers).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> QueryParams {
        QueryParams {
            pairs: pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// The value of a single-valued parameter: its first occurrence.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the parameter is present at all (`?verbose`).
    pub fn contains(&self, name: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == name)
    }

    /// Every value of a multi-valued parameter, in order.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter as upstream converts one: absent, `0` or `false` (any case) is
    /// false; any other first value, the empty string included, is true.
    pub fn flag(&self, name: &str) -> bool {
        match self.get(name) {
            None => false,
            Some(v) => v != "0" && !v.eq_ignore_ascii_case("false"),
        }
    }

    /// The pairs, in order (for forwarding).
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_value_wins_for_single_valued_parameters() {
        let q = QueryParams::parse(Some(
            "fieldSelector=metadata.name%3Dallowed&fieldSelector=&limit=1&limit=500",
        ));
        assert_eq!(q.get("fieldSelector"), Some("metadata.name=allowed"));
        assert_eq!(q.get("limit"), Some("1"));
        assert_eq!(q.get("nope"), None);
        let q = QueryParams::parse(Some("fieldSelector=&fieldSelector=metadata.name%3Dx"));
        assert_eq!(q.get("fieldSelector"), Some(""));
    }

    #[test]
    fn multi_valued_parameters_keep_every_value() {
        let q = QueryParams::parse(Some("command=sh&container=c&command=-c&command=echo+hi"));
        assert_eq!(
            q.all("command").collect::<Vec<_>>(),
            ["sh", "-c", "echo hi"]
        );
        assert_eq!(q.pairs().len(), 4);
    }

    #[test]
    fn booleans_as_upstream_converts_them() {
        for (raw, want) in [
            ("watch=true", true),
            ("watch=1", true),
            ("watch=", true),
            ("watch", true),
            ("watch=yes", true),
            ("watch=0", false),
            ("watch=false", false),
            ("watch=FALSE", false),
            ("watch=false&watch=true", false),
            ("watch=true&watch=false", true),
            ("", false),
        ] {
            assert_eq!(QueryParams::parse(Some(raw)).flag("watch"), want, "{raw}");
        }
        assert!(QueryParams::parse(Some("verbose")).contains("verbose"));
    }

    #[test]
    fn garbage_is_decoded_not_rejected() {
        let q = QueryParams::parse(Some("a=%ff%fe&&=x&b=%zz&%3D=%3D"));
        assert_eq!(q.get("a"), Some("\u{fffd}\u{fffd}"));
        assert_eq!(q.get("b"), Some("%zz"));
        assert_eq!(q.get("="), Some("="));
        assert_eq!(q.get(""), Some("x"));
    }
}
