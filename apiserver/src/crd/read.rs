//! How a stored custom resource reads through one served version: with conversion strategy
//! `None` only `apiVersion` changes; the version's schema defaults are applied on read too
//! (as kube-apiserver does when decoding from storage), so objects stored before a default
//! was added show it.

use axum::body::Bytes;
use serde_json::{json, Value};

use crate::resources::custom;
use k3rs_apimachinery::catalog::Resource;

/// Presents one object read at `r` (a no-op for built-in resources).
pub fn object(r: &Resource, obj: &mut Value) {
    let Some(cv) = custom::version_of(r) else {
        return;
    };
    if !obj.is_object() {
        return;
    }
    obj["apiVersion"] = json!(r.group_version());
    if let Some(s) = &cv.schema {
        super::schema::default::apply(s, obj);
    }
}

/// Presents the objects of watch events (JSON lines); other lines pass unchanged.
pub fn watch_lines(r: &Resource, chunk: Bytes) -> Bytes {
    if custom::version_of(r).is_none() {
        return chunk;
    }
    let mut out = Vec::with_capacity(chunk.len());
    for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Value>(line) {
            Ok(mut ev) if ev["object"]["metadata"].is_object() => {
                object(r, &mut ev["object"]);
                out.extend_from_slice(ev.to_string().as_bytes());
            }
            _ => out.extend_from_slice(line),
        }
        out.push(b'\n');
    }
    Bytes::from(out)
}
