//! A LIST read one item at a time: the store is read in pages of at most [`PAGE`] keys, all
//! at the revision the first page was read at, so a list of any length holds one page of
//! stored values and one decoded object at a time.
//!
//! # Guarantees
//! - The items, `continue` and `remainingItemCount` are exactly those of a single read of
//!   the whole range at that revision (the page size is invisible to the client).
//! - Every error a client can cause (bad continue token, compacted or future
//!   resourceVersion) is returned by [`ListPager::start`], before any item.
//!
//! # Errors
//! A later page can still fail (the store compacts past the list's revision while a slow
//! client reads, the store becomes unavailable, a value does not decode): [`ListPager::next_item`]
//! returns that error and the list cannot be finished.

use std::sync::Arc;

use serde_json::{json, Value};

use super::continue_token;
use super::decode_as;
use super::keys;
use super::list::{plan, ListOptions, EXPIRED_CONTINUE};
use super::Target;
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_datastore::{prefix_end, Datastore, Error as DsError, KeyValue, ListRequest};

/// Keys read from the store per page.
pub const PAGE: i64 = 500;

/// A list being read (see the module docs).
pub struct ListPager {
    ds: Arc<dyn Datastore>,
    resource: &'static Resource,
    opts: ListOptions,
    filtered: bool,
    prefix: Vec<u8>,
    end: Vec<u8>,
    page_size: i64,
    /// The list's revision (pinned by the first page).
    revision: i64,
    from_continue: bool,
    /// The current page, consumed from the front.
    page: std::vec::IntoIter<KeyValue>,
    /// Keys of the current page handed out so far.
    taken: i64,
    /// The current page's `count` (keys from its first key to the end of the range).
    count: i64,
    /// Whether the store has keys after the current page.
    more: bool,
    /// Where the next page starts.
    next_key: Vec<u8>,
    /// Where the list starts.
    start_key: Vec<u8>,
    /// Items handed out.
    emitted: i64,
    /// Set once the last item is out: `(continue key relative to the prefix, remaining)`.
    cut: Option<(Vec<u8>, Option<i64>)>,
    done: bool,
}

impl std::fmt::Debug for ListPager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListPager")
            .field("resource", &self.resource.plural)
            .field("revision", &self.revision)
            .field("emitted", &self.emitted)
            .finish_non_exhaustive()
    }
}

impl ListPager {
    /// Plans the list of `t` and reads its first page (pages of [`PAGE`] keys).
    pub async fn start(ds: Arc<dyn Datastore>, t: &Target, opts: ListOptions) -> ApiResult<Self> {
        Self::start_paged(ds, t, opts, PAGE).await
    }

    /// [`ListPager::start`] with pages of `page_size` keys (tests use small pages).
    pub async fn start_paged(
        ds: Arc<dyn Datastore>,
        t: &Target,
        opts: ListOptions,
        page_size: i64,
    ) -> ApiResult<Self> {
        let prefix = keys::list_prefix(t.resource, t.namespace.as_deref());
        let end = prefix_end(&prefix);
        let (start, revision, not_older_than) = plan(&opts)?;
        let next_key = match &start {
            Some(s) => [prefix.as_slice(), s.as_bytes()].concat(),
            None => prefix.clone(),
        };
        let filtered = !opts.labels.is_empty() || !opts.fields.is_empty();
        let mut pager = ListPager {
            ds,
            resource: t.resource,
            opts,
            filtered,
            prefix,
            end,
            page_size: page_size.max(1),
            revision,
            from_continue: start.is_some(),
            page: Vec::new().into_iter(),
            taken: 0,
            count: 0,
            more: true,
            start_key: next_key.clone(),
            next_key,
            emitted: 0,
            cut: None,
            done: false,
        };
        pager.fetch().await?;
        if let Some(min) = not_older_than {
            if pager.revision < min {
                return Err(ApiError::timeout(format!(
                    "Too large resource version: {min}, current: {}",
                    pager.revision
                )));
            }
        }
        Ok(pager)
    }

    /// The same list from its first item again, at the same revision.
    pub async fn rewound(mut self) -> ApiResult<Self> {
        self.next_key = self.start_key.clone();
        self.page = Vec::new().into_iter();
        self.more = true;
        self.emitted = 0;
        self.cut = None;
        self.done = false;
        self.fetch().await?;
        Ok(self)
    }

    /// The revision the list reads at.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// How many keys the next page asks for: an unfiltered list with a limit stops a page
    /// exactly at the limit, so the page's `count` gives `remainingItemCount`.
    fn want(&self) -> i64 {
        let left = self.opts.limit - self.emitted;
        if self.opts.limit > 0 && !self.filtered {
            left.clamp(1, self.page_size)
        } else {
            self.page_size
        }
    }

    async fn fetch(&mut self) -> ApiResult<()> {
        let revision = self.revision;
        let from_continue = self.from_continue;
        let resp = self
            .ds
            .list(ListRequest {
                key: self.next_key.clone(),
                range_end: self.end.clone(),
                limit: self.want(),
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
        if self.revision == 0 {
            self.revision = resp.revision;
        }
        self.more = resp.more;
        self.count = resp.count;
        self.taken = 0;
        if let Some(last) = resp.kvs.last() {
            self.next_key = [last.key.as_slice(), b"\0"].concat();
        }
        if resp.kvs.is_empty() {
            self.more = false;
        }
        self.page = resp.kvs.into_iter();
        Ok(())
    }

    /// The next item of the list, `None` after the last.
    pub async fn next_item(&mut self) -> ApiResult<Option<Value>> {
        loop {
            if self.done {
                return Ok(None);
            }
            let Some(kv) = self.page.next() else {
                if !self.more {
                    self.done = true;
                    return Ok(None);
                }
                self.fetch().await?;
                continue;
            };
            self.taken += 1;
            let obj = decode_as(self.resource, &kv)?;
            if self.filtered && !self.opts.matches(&obj) {
                continue;
            }
            self.emitted += 1;
            if self.opts.limit > 0 && self.emitted >= self.opts.limit {
                self.done = true;
                let after = !self.page.as_slice().is_empty() || self.more;
                if after {
                    let mut key = kv.key;
                    key.push(0);
                    let remaining = (!self.filtered).then_some(self.count - self.taken);
                    self.cut = Some((key, remaining));
                }
            }
            return Ok(Some(obj));
        }
    }

    /// The list's metadata once every item is out: `resourceVersion`, and `continue` with
    /// `remainingItemCount` (unfiltered lists only, when above 0) when the limit cut it.
    pub fn metadata(&self) -> Value {
        let mut metadata = json!({ "resourceVersion": self.revision.to_string() });
        if let Some((after, remaining)) = &self.cut {
            let rel = String::from_utf8_lossy(&after[self.prefix.len()..]).into_owned();
            metadata["continue"] = json!(continue_token::encode(self.revision, &rel));
            if let Some(n) = remaining.filter(|n| *n > 0) {
                metadata["remainingItemCount"] = json!(n);
            }
        }
        metadata
    }

    /// Every item left, then the metadata.
    pub async fn collect(mut self) -> ApiResult<(Vec<Value>, Value)> {
        let mut items = Vec::new();
        while let Some(obj) = self.next_item().await? {
            items.push(obj);
        }
        Ok((items, self.metadata()))
    }
}
