//! Which form of `/openapi/v2` an `Accept` header asks for, as kube-openapi's handler decides:
//! the clauses by preference (quality, then specificity), each matched against JSON, then
//! the two protobuf media types; an empty header is `*/*`.

/// The protobuf media type kube-openapi answers with (for either spelling asked for).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// The spelling client-go's discovery client (kubectl, Helm) asks for; kube-openapi calls it
/// deprecated, and answers with [`PROTOBUF`] (Go's `mime` parser refuses the `@` in a
/// `Content-Type`).
pub const PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The form to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Protobuf,
}

impl Format {
    /// The `Content-Type` of the answer.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Protobuf => PROTOBUF,
        }
    }
}

const OFFERED: &[(&str, &str, Format)] = &[
    ("application", "json", Format::Json),
    (
        "application",
        "com.github.proto-openapi.spec.v2@v1.0+protobuf",
        Format::Protobuf,
    ),
    (
        "application",
        "com.github.proto-openapi.spec.v2.v1.0+protobuf",
        Format::Protobuf,
    ),
];

/// One media range of an `Accept` header.
struct Clause<'a> {
    kind: &'a str,
    sub: &'a str,
    q: f32,
}

fn clauses(accept: &str) -> Vec<Clause<'_>> {
    let mut out: Vec<Clause<'_>> = accept
        .split(',')
        .filter_map(|part| {
            let mut params = part.split(';');
            let range = params.next()?.trim();
            let (kind, sub) = range.split_once('/').unwrap_or((range, "*"));
            let q = params
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            (!kind.is_empty() && q > 0.0).then_some(Clause {
                kind: kind.trim(),
                sub: sub.trim(),
                q,
            })
        })
        .collect();
    let wild = |c: &Clause<'_>| u8::from(c.kind == "*") + u8::from(c.sub == "*");
    out.sort_by(|a, b| b.q.total_cmp(&a.q).then(wild(a).cmp(&wild(b))));
    out
}

/// The form for `accept` (`None` header = `*/*`); `None` when nothing offered is acceptable.
pub(crate) fn negotiate(accept: Option<&str>) -> Option<Format> {
    let accept = accept.filter(|a| !a.trim().is_empty()).unwrap_or("*/*");
    clauses(accept).iter().find_map(|c| {
        OFFERED
            .iter()
            .find(|(kind, sub, _)| {
                (c.kind == *kind || c.kind == "*") && (c.sub == *sub || c.sub == "*")
            })
            .map(|(_, _, f)| *f)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_of_real_clients() {
        assert_eq!(negotiate(Some(PROTOBUF)), Some(Format::Protobuf));
        assert_eq!(negotiate(Some(PROTOBUF_DEPRECATED)), Some(Format::Protobuf));
        assert_eq!(negotiate(None), Some(Format::Json));
        assert_eq!(negotiate(Some("")), Some(Format::Json));
        assert_eq!(negotiate(Some("*/*")), Some(Format::Json));
        // kubectl get --raw
        assert_eq!(negotiate(Some("application/json, */*")), Some(Format::Json));
        assert_eq!(negotiate(Some("application/*")), Some(Format::Json));
        assert_eq!(
            negotiate(Some(&format!("application/json;q=0.5, {PROTOBUF}"))),
            Some(Format::Protobuf)
        );
        assert_eq!(
            negotiate(Some(&format!("*/*, {PROTOBUF_DEPRECATED}"))),
            Some(Format::Protobuf),
            "the more specific clause first"
        );
        assert_eq!(negotiate(Some("text/plain")), None);
        assert_eq!(negotiate(Some("application/json;q=0")), None);
    }
}
