//! LIST: selectors, paging with continue tokens at a pinned revision, and the
//! resourceVersion / resourceVersionMatch rules. The reading itself is [`ListPager`].

use serde_json::{json, Value};

use k3rs_apimachinery::selector::FieldSelector;

use super::continue_token;
use super::list_pager::ListPager;
use super::Registry;
use super::Target;
use k3rs_apimachinery::meta;
use k3rs_apimachinery::selector::LabelSelector;
use k3rs_apimachinery::status::{ApiError, ApiResult};

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

pub(super) const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Where a list starts and at which revision it reads (0 = latest).
pub(super) fn plan(opts: &ListOptions) -> ApiResult<(Option<String>, i64, Option<i64>)> {
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
    /// The `<Kind>List` for `t` (one namespace, or all when `t.namespace` is None), whole.
    pub async fn list(&self, t: &Target, opts: ListOptions) -> ApiResult<Value> {
        let (items, metadata) = self.list_pager(t, opts).await?.collect().await?;
        Ok(json!({
            "kind": format!("{}List", t.resource.kind),
            "apiVersion": t.resource.group_version(),
            "metadata": metadata,
            "items": items,
        }))
    }

    /// The list for `t` read item by item ([`ListPager`]): its first page is read, so a
    /// request error is returned here, before any item.
    pub async fn list_pager(&self, t: &Target, opts: ListOptions) -> ApiResult<ListPager> {
        ListPager::start(self.ds.clone(), t, opts).await
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
