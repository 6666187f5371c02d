//! LIST: selectors, paging with continue tokens at a pinned revision, and the
//! resourceVersion / resourceVersionMatch rules.

use serde_json::{json, Value};

use k3rs_apimachinery::selector::FieldSelector;

use super::continue_token;
use super::decode_as;
use super::keys;
use super::Registry;
use super::Target;
use k3rs_apimachinery::meta;
use k3rs_apimachinery::selector::LabelSelector;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_datastore::{prefix_end, Error as DsError, ListRequest};

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RvMatch {
    /// Not given: `resourceVersion` means "not older than" (or, `0`, any).
    #[default]
    Unset,
    /// `NotOlderThan`.
    NotOlderThan,
    /// `Exact`: the list at exactly `resourceVersion`.
    Exact,
}

/// A list request's options (already parsed and validated as syntax).
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// 0 = no limit.
    pub limit: i64,
    /// `continue`: the token of the previous page.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub rv_match: RvMatch,
}

impl ListOptions {
    /// Whether `obj` passes both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(&meta::labels(obj)) && self.fields.matches(obj)
    }
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Where a list starts and at which revision it reads (0 = latest).
fn plan(opts: &ListOptions) -> ApiResult<(Option<String>, i64, Option<i64>)> {
    let rv = opts.resource_version.as_deref().filter(|s| !s.is_empty());
    if opts.rv_match != RvMatch::Unset && rv.is_none() {
        return Err(ApiError::bad_request(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    if let Some(token) = opts.continue_token.as_deref().filter(|s| !s.is_empty()) {
        if rv.is_some_and(|v| v != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (rev, start) = continue_token::decode(token)?;
        return Ok((Some(start), rev, None));
    }
    let Some(rv) = rv else {
        return Ok((None, 0, None));
    };
    let n: i64 = rv
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?;
    if n < 0 {
        return Err(ApiError::bad_request(format!(
            "invalid resource version {rv:?}"
        )));
    }
    match opts.rv_match {
        RvMatch::Exact if n == 0 => Err(ApiError::bad_request(
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        )),
        RvMatch::Exact => Ok((None, n, None)),
        // kube-apiserver's legacy rule: a paged list at a given version reads exactly it.
        RvMatch::Unset if opts.limit > 0 && n > 0 => Ok((None, n, None)),
        _ => Ok((None, 0, Some(n))),
    }
}

impl Registry {
    /// The `<Kind>List` for `t` (one namespace, or all when `t.namespace` is None).
    pub async fn list(&self, t: &Target, opts: ListOptions) -> ApiResult<Value> {
        let r = t.resource;
        let prefix = keys::list_prefix(r, t.namespace.as_deref());
        let end = prefix_end(&prefix);
        let (start, mut revision, not_older_than) = plan(&opts)?;
        let from_continue = start.is_some();
        let mut key = match &start {
            Some(s) => [prefix.as_slice(), s.as_bytes()].concat(),
            None => prefix.clone(),
        };
        let filtered = !opts.labels.is_empty() || !opts.fields.is_empty();
        let mut items = Vec::new();
        let mut next: Option<Vec<u8>> = None;
        let mut remaining: Option<i64> = None;
        loop {
            let want = if opts.limit > 0 { opts.limit } else { 0 };
            let resp = self
                .ds
                .list(ListRequest {
                    key: key.clone(),
                    range_end: end.clone(),
                    limit: want,
                    revision,
                })
                .await
                .map_err(|e| match e {
                    DsError::Compacted { .. } if from_continue => ApiError::expired(EXPIRED_CONTINUE),
                    DsError::Compacted { .. } => ApiError::expired(format!(
                        "The resourceVersion for the provided list is too old. (requested {revision})"
                    )),
                    other => other.into(),
                })?;
            if revision == 0 {
                revision = resp.revision;
                if let Some(min) = not_older_than {
                    if revision < min {
                        return Err(ApiError::timeout(format!(
                            "Too large resource version: {min}, current: {revision}"
                        )));
                    }
                }
            }
            let page_len = resp.kvs.len();
            let mut cut_at: Option<usize> = None;
            for (i, kv) in resp.kvs.iter().enumerate() {
                let obj = decode_as(t.resource, kv)?;
                if !filtered || opts.matches(&obj) {
                    items.push(obj);
                }
                if opts.limit > 0
                    && items.len() as i64 >= opts.limit
                    && (i + 1 < page_len || resp.more)
                {
                    cut_at = Some(i);
                    break;
                }
            }
            if let Some(i) = cut_at {
                let mut after = resp.kvs[i].key.clone();
                after.push(0);
                if !filtered && i + 1 == page_len {
                    remaining = Some(resp.count - page_len as i64);
                }
                next = Some(after);
                break;
            }
            if !resp.more {
                break;
            }
            let Some(last) = resp.kvs.last() else { break };
            key = [last.key.as_slice(), b"\0"].concat();
        }
        let mut metadata = json!({ "resourceVersion": revision.to_string() });
        if let Some(after) = next {
            let rel = String::from_utf8_lossy(&after[prefix.len()..]).into_owned();
            metadata["continue"] = json!(continue_token::encode(revision, &rel));
            if let Some(n) = remaining.filter(|n| *n > 0) {
                metadata["remainingItemCount"] = json!(n);
            }
        }
        Ok(json!({
            "kind": format!("{}List", r.kind),
            "apiVersion": r.group_version(),
            "metadata": metadata,
            "items": items,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(rv: Option<&str>, m: RvMatch, limit: i64) -> ListOptions {
        ListOptions {
            resource_version: rv.map(str::to_string),
            rv_match: m,
            limit,
            ..Default::default()
        }
    }

    #[test]
    fn resource_version_rules() {
        assert_eq!(
            plan(&opts(None, RvMatch::Unset, 0)).unwrap(),
            (None, 0, None)
        );
        assert_eq!(
            plan(&opts(Some("0"), RvMatch::Unset, 0)).unwrap(),
            (None, 0, Some(0))
        );
        assert_eq!(
            plan(&opts(Some("7"), RvMatch::Unset, 0)).unwrap(),
            (None, 0, Some(7))
        );
        assert_eq!(
            plan(&opts(Some("7"), RvMatch::Unset, 5)).unwrap(),
            (None, 7, None)
        );
        assert_eq!(
            plan(&opts(Some("7"), RvMatch::Exact, 0)).unwrap(),
            (None, 7, None)
        );
        assert_eq!(
            plan(&opts(Some("7"), RvMatch::NotOlderThan, 5)).unwrap(),
            (None, 0, Some(7))
        );
        assert_eq!(
            plan(&opts(Some("0"), RvMatch::Exact, 0)).unwrap_err().code,
            400
        );
        assert_eq!(plan(&opts(None, RvMatch::Exact, 0)).unwrap_err().code, 400);
        assert_eq!(
            plan(&opts(Some("x"), RvMatch::Unset, 0)).unwrap_err().code,
            400
        );
        let mut c = opts(Some("5"), RvMatch::Unset, 1);
        c.continue_token = Some(continue_token::encode(3, "a\0"));
        assert_eq!(plan(&c).unwrap_err().code, 400);
        c.resource_version = None;
        assert_eq!(plan(&c).unwrap(), (Some("a\0".to_string()), 3, None));
    }
}
