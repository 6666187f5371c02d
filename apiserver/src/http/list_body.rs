//! LIST responses encoded item by item into the response body (as kube-apiserver's
//! streaming collection encoding, KEP-5116), so a list of any length holds one page of the
//! store ([`ListPager`]) and about [`CHUNK`] bytes of JSON at a time, never the whole list.
//!
//! # Guarantees
//! - The bytes are exactly those of the whole `<Kind>List` value serialized at once
//!   (`serde_json`'s sorted keys: `apiVersion`, `items`, `kind`, `metadata`, so the
//!   metadata, whose `continue` is known only after the last item, comes last).
//! - The body is produced only as fast as the client reads it: a slow client holds one
//!   chunk and one page; a client that goes away drops the body and with it the reading.
//!
//! # Errors
//! Request errors are answered with a `Status` before the body starts ([`ListPager::start`]).
//! An error after that (a later page compacted away under a slow reader, the store
//! unavailable) aborts the body: the client sees a broken response (HTTP/2 stream reset,
//! HTTP/1.1 connection closed before the last chunk), never a short list that parses. This
//! is what kube-apiserver's streaming encoder does when it fails mid-body: its Status is
//! appended to bytes already sent, which no client can parse as the list.

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::protobuf::{self, ListFrames};
use crate::registry::ListPager;
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::ApiError;

/// Body bytes gathered before they are handed to the connection.
pub const CHUNK: usize = 64 * 1024;

/// Writes one `<Kind>List` as JSON, an item at a time (pure: no I/O).
#[derive(Debug)]
pub struct ListEncoder {
    buf: Vec<u8>,
    items: usize,
}

impl ListEncoder {
    /// Starts the list: `{"apiVersion":<api_version>,"items":[`.
    pub fn open(api_version: &str) -> serde_json::Result<ListEncoder> {
        let mut buf = br#"{"apiVersion":"#.to_vec();
        serde_json::to_writer(&mut buf, api_version)?;
        buf.extend_from_slice(br#","items":["#);
        Ok(ListEncoder { buf, items: 0 })
    }

    /// Appends one item.
    pub fn item(&mut self, obj: &Value) -> serde_json::Result<()> {
        if self.items > 0 {
            self.buf.push(b',');
        }
        self.items += 1;
        serde_json::to_writer(&mut self.buf, obj)
    }

    /// Ends the list: `],"kind":<kind>,"metadata":<metadata>}`.
    pub fn close(&mut self, kind: &str, metadata: &Value) -> serde_json::Result<()> {
        self.buf.extend_from_slice(br#"],"kind":"#);
        serde_json::to_writer(&mut self.buf, kind)?;
        self.buf.extend_from_slice(br#","metadata":"#);
        serde_json::to_writer(&mut self.buf, metadata)?;
        self.buf.push(b'}');
        Ok(())
    }

    /// Bytes written and not yet taken.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The bytes written since the last call.
    pub fn take(&mut self) -> Bytes {
        Bytes::from(std::mem::take(&mut self.buf))
    }
}

/// Why a streamed list stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// Reading a later page failed.
    #[error("listing failed after the response started: {} {}", .0.code, .0.message)]
    Read(ApiError),
    /// An item could not be serialized.
    #[error("encoding a list item: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The list being streamed.
struct Streamed {
    pager: ListPager,
    encoder: ListEncoder,
    resource: &'static Resource,
    finished: bool,
}

impl Streamed {
    /// Encodes items until a chunk is full or the list ends.
    async fn fill(&mut self) -> Result<Bytes, StreamError> {
        loop {
            match self.pager.next_item().await.map_err(StreamError::Read)? {
                Some(mut obj) => {
                    crate::crd::read::object(self.resource, &mut obj);
                    self.encoder.item(&obj)?;
                    if self.encoder.pending() >= CHUNK {
                        return Ok(self.encoder.take());
                    }
                }
                None => {
                    self.finished = true;
                    let kind = format!("{}List", self.resource.kind);
                    self.encoder.close(&kind, &self.pager.metadata())?;
                    return Ok(self.encoder.take());
                }
            }
        }
    }
}

/// A 200 whose body is the list `pager` reads, as `resource` serves it.
pub fn response(pager: ListPager, resource: &'static Resource) -> Response {
    let encoder = match ListEncoder::open(&resource.group_version()) {
        Ok(e) => e,
        Err(e) => return ApiError::internal(format!("encoding a list: {e}")).into_response(),
    };
    let state = Streamed {
        pager,
        encoder,
        resource,
        finished: false,
    };
    let chunks = futures::stream::unfold(state, |mut st| async move {
        if st.finished {
            return None;
        }
        let chunk = st.fill().await;
        if let Err(e) = &chunk {
            tracing::warn!(resource = st.resource.plural, error = %e, "list response aborted");
            st.finished = true;
        }
        Some((chunk, st))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(chunks))
        .unwrap_or_else(|_| ApiError::internal("building the list response").into_response())
}

/// The list `pager` reads in protobuf (a client that prefers it), built item by item
/// ([`ListFrames`]) and sent once whole, so a read error is still a `Status`. A list with an
/// item that has no protobuf form is answered in JSON, as upstream answers such objects.
pub async fn protobuf_response(mut pager: ListPager, resource: &'static Resource) -> Response {
    let kind = format!("{}List", resource.kind);
    let Some(mut frames) = ListFrames::new(&resource.group_version(), &kind) else {
        return response(pager, resource);
    };
    let mut encodable = true;
    loop {
        match pager.next_item().await {
            Ok(Some(obj)) => {
                if frames.item(&obj).is_err() {
                    encodable = false;
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => return e.into_response(),
        }
    }
    let parts = match encodable.then(|| frames.finish(&pager.metadata())) {
        Some(Ok(parts)) => parts,
        _ => {
            return match pager.rewound().await {
                Ok(pager) => response(pager, resource),
                Err(e) => e.into_response(),
            }
        }
    };
    let chunks = futures::stream::iter(parts.map(Ok::<_, std::convert::Infallible>));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, protobuf::MEDIA_TYPE)
        .body(Body::from_stream(chunks))
        .unwrap_or_else(|_| ApiError::internal("building the list response").into_response())
}

#[cfg(test)]
mod tests;
