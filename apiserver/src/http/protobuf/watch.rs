//! Watch streams in protobuf (`application/vnd.kubernetes.protobuf;stream=watch`), as
//! kube-apiserver writes them for clients that list protobuf first: each event is a
//! `meta.v1.WatchEvent{type, object: RawExtension{raw}}` whose `raw` is the object's whole
//! protobuf encoding (`k8s\0` + `runtime.Unknown`), framed by its length as 4 bytes big-endian
//! (apimachinery's `LengthDelimitedFramer`).
//!
//! # Guarantees
//! - One frame per JSON event line, in order; a chunk of whole lines gives whole frames.
//! - An event whose object has no protobuf form (a field the table does not know) becomes an
//!   `ERROR` event carrying a 500 `Status`, as kube-apiserver reports an object it cannot
//!   encode, instead of a frame the client could not read. Custom resources never get here:
//!   the caller keeps their watches in JSON (CRDs have no protobuf form upstream either).

use axum::body::Body;
use axum::body::Bytes;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{json, Value};

use super::wire::Writer;

/// The Content-Type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// A watch answer in protobuf frames: a 200 JSON stream is re-framed event by event (lines
/// split across chunks are joined first); any other answer (an error `Status`) is encoded as
/// a protobuf object, like every other answer.
pub async fn respond(resp: Response) -> Response {
    let is_json_stream = resp.status() == StatusCode::OK
        && resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
    if !is_json_stream {
        return super::respond(resp).await;
    }
    let (mut parts, body) = resp.into_parts();
    let mut partial: Vec<u8> = Vec::new();
    let stream = body.into_data_stream().map(move |chunk| {
        chunk.map(|chunk| {
            partial.extend_from_slice(&chunk);
            let whole = partial
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1);
            let lines: Vec<u8> = partial.drain(..whole).collect();
            frames(&lines)
        })
    });
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(WATCH_MEDIA_TYPE),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from_stream(stream))
}

/// The frames of a chunk of JSON watch event lines.
pub fn frames(chunk: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(chunk.len());
    for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let event = frame(line);
        out.extend_from_slice(&(event.len() as u32).to_be_bytes());
        out.extend_from_slice(&event);
    }
    Bytes::from(out)
}

/// One `WatchEvent` message (without its length).
fn frame(line: &[u8]) -> Vec<u8> {
    let encoded = serde_json::from_slice::<Value>(line).ok().and_then(|ev| {
        let kind = ev.get("type")?.as_str()?.to_string();
        Some((kind, super::encode(ev.get("object")?)?))
    });
    let (kind, object) = encoded.unwrap_or_else(|| {
        let status = json!({
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": "unable to encode watch object in protobuf",
            "reason": "InternalError",
            "code": 500,
        });
        let object = super::encode(&status).expect("meta/v1 Status always has a protobuf form");
        ("ERROR".to_string(), object)
    });
    let mut raw = Writer::default();
    raw.put_bytes(1, &object);
    let mut event = Writer::default();
    event.put_bytes(1, kind.as_bytes());
    event.put_bytes(2, &raw.buf);
    event.buf
}

#[cfg(test)]
mod tests {
    use super::super::wire::{Reader, Value as Wire};
    use super::*;

    /// `(type, object as JSON)` of each frame.
    fn read(mut bytes: &[u8]) -> Vec<(String, Value)> {
        let mut events = Vec::new();
        while !bytes.is_empty() {
            let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
            let (event, rest) = bytes[4..].split_at(len);
            bytes = rest;
            let mut r = Reader::new(event);
            let (mut kind, mut object) = (String::new(), Value::Null);
            while let Some((tag, v)) = r.next_field().unwrap() {
                let Wire::Bytes(b) = v else {
                    panic!("field {tag}: {v:?}")
                };
                match tag {
                    1 => kind = String::from_utf8(b.to_vec()).unwrap(),
                    2 => {
                        let mut raw = Reader::new(b);
                        let Some((1, Wire::Bytes(obj))) = raw.next_field().unwrap() else {
                            panic!("no RawExtension.raw")
                        };
                        object = super::super::decode(obj).unwrap();
                    }
                    _ => panic!("field {tag}"),
                }
            }
            events.push((kind, object));
        }
        events
    }

    #[test]
    fn each_event_line_is_one_length_prefixed_watch_event() {
        let cm = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            // A zero creationTimestamp decodes as upstream's JSON has it: null.
            "metadata": {
                "creationTimestamp": null,
                "name": "a",
                "namespace": "default",
                "resourceVersion": "7",
            },
            "data": {"k": "v"},
        });
        let bookmark = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"creationTimestamp": null, "resourceVersion": "9"},
        });
        let chunk = format!(
            "{}\n{}\n",
            json!({"type": "ADDED", "object": cm}),
            json!({"type": "BOOKMARK", "object": bookmark})
        );
        let out = frames(chunk.as_bytes());
        assert_eq!(
            read(&out),
            vec![("ADDED".into(), cm), ("BOOKMARK".into(), bookmark)]
        );
    }

    #[test]
    fn an_object_without_a_protobuf_form_is_an_error_event() {
        let line = json!({
            "type": "MODIFIED",
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "bogus": 1},
        })
        .to_string();
        let events = read(&frames(line.as_bytes()));
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].0, "ERROR");
        assert_eq!(events[0].1["kind"], "Status");
        assert_eq!(events[0].1["code"], 500);
        assert_eq!(events[0].1["reason"], "InternalError");
    }
}
