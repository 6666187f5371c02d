//! A protobuf `<Kind>List` built item by item: each item is encoded as it is read, so a list
//! holds its items' protobuf bytes (a few KiB a pod) and never their JSON or decoded objects
//! all at once.
//!
//! # Guarantees
//! - The bytes are exactly those [`super::encode`] makes of the whole list.
//!
//! # Assumptions
//! The list's metadata is the message's first field but is known only after the last item
//! (its `continue`), and the envelope states the message's length before it: so the body
//! can only be sent once the last item is encoded. Unlike JSON lists it is built whole,
//! though in its compact encoded form.

use axum::body::Bytes;
use serde_json::Value;

use super::encode;
use super::schema::{Field, Message, Schema};
use super::wire::Writer;
use super::{Error, MAGIC};

/// One list being encoded.
#[derive(Debug)]
pub struct ListFrames {
    api_version: String,
    kind: String,
    list: &'static Message,
    items: Writer,
}

fn field<'m>(msg: &'m Message, json: &str) -> Result<&'m Field, Error> {
    msg.fields
        .iter()
        .find(|f| f.json.as_deref() == Some(json))
        .ok_or_else(|| Error::Json(format!("{} has no {json} field", msg.name)))
}

impl ListFrames {
    /// A list of `kind` (e.g. `PodList`) in `api_version`; `None` when it has no protobuf
    /// form (custom resources).
    pub fn new(api_version: &str, kind: &str) -> Option<ListFrames> {
        let list = Schema::get().kind(api_version, kind)?;
        field(list, "items").ok()?;
        field(list, "metadata").ok()?;
        Some(ListFrames {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            list,
            items: Writer::default(),
        })
    }

    /// Encodes one item; an error means the list has no protobuf form (answer JSON).
    pub fn item(&mut self, obj: &Value) -> Result<(), Error> {
        let items = field(self.list, "items")?;
        encode::single(Schema::get(), self.list, items, obj, &mut self.items, 0)
    }

    /// The whole body, in three parts to send one after the other: the envelope up to the
    /// list's metadata (included), the items, and the envelope's end.
    pub fn finish(self, metadata: &Value) -> Result<[Bytes; 3], Error> {
        let schema = Schema::get();
        let mut meta = Writer::default();
        encode::single(
            schema,
            self.list,
            field(self.list, "metadata")?,
            metadata,
            &mut meta,
            0,
        )?;
        let mut type_meta = Writer::default();
        type_meta.put_bytes(1, self.api_version.as_bytes());
        type_meta.put_bytes(2, self.kind.as_bytes());
        let mut head = Writer {
            buf: MAGIC.to_vec(),
        };
        head.put_bytes(1, &type_meta.buf);
        head.put_len(2, meta.buf.len() + self.items.buf.len());
        head.buf.extend_from_slice(&meta.buf);
        let mut tail = Writer::default();
        tail.put_bytes(3, b"");
        tail.put_bytes(4, b"");
        Ok([
            Bytes::from(head.buf),
            Bytes::from(self.items.buf),
            Bytes::from(tail.buf),
        ])
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(i: usize) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p{i}"), "namespace": "d", "resourceVersion": "5",
                         "labels": {"a": "b"}, "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": "i",
                     "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Pending"}})
    }

    #[test]
    fn item_by_item_is_the_whole_list_encoded_at_once() {
        let metadatas = [
            json!({"resourceVersion": "9"}),
            json!({"resourceVersion": "9", "continue": "abc", "remainingItemCount": 3}),
        ];
        for n in [0, 1, 3, 200] {
            for metadata in &metadatas {
                let items: Vec<Value> = (0..n).map(pod).collect();
                let whole = json!({"apiVersion": "v1", "kind": "PodList",
                                   "metadata": metadata, "items": items});
                let mut frames = ListFrames::new("v1", "PodList").unwrap();
                for item in &items {
                    frames.item(item).unwrap();
                }
                let parts = frames.finish(metadata).unwrap();
                assert_eq!(parts.concat(), super::super::encode(&whole).unwrap(), "{n}");
            }
        }
    }

    #[test]
    fn what_has_no_protobuf_form_is_refused() {
        assert!(ListFrames::new("example.com/v1", "WidgetList").is_none());
        let mut frames = ListFrames::new("v1", "PodList").unwrap();
        let mut odd = pod(0);
        odd["spec"]["notAField"] = json!(1);
        assert!(frames.item(&odd).is_err());
    }
}
