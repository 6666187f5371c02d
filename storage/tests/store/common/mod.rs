//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

use k3rs_storage::*;

pub fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, store)
}

pub fn apply(s: &Store, cmd: Command) -> Output {
    s.apply_batch(&[cmd], b"meta").unwrap().pop().unwrap()
}

pub fn put(key: &str, value: &str) -> Command {
    Command::Put(put_req(key, value))
}

pub fn put_req(key: &str, value: &str) -> PutRequest {
    PutRequest {
        key: key.into(),
        value: value.into(),
        ..Default::default()
    }
}

pub fn del(key: &str, end: &str) -> Command {
    Command::DeleteRange(DeleteRangeRequest {
        key: key.into(),
        range_end: end.into(),
        prev_kv: false,
    })
}

pub fn get(s: &Store, key: &str) -> Option<KeyValue> {
    let req = RangeRequest {
        key: key.into(),
        ..Default::default()
    };
    s.range(&req).unwrap().unwrap().1.kvs.pop()
}

pub fn range(s: &Store, req: RangeRequest) -> Result<(i64, RangeResponse), RequestError> {
    s.range(&req).unwrap()
}

pub fn kv(key: &str, value: &str, create: i64, modr: i64, version: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: value.into(),
        create_revision: create,
        mod_revision: modr,
        version,
        lease: 0,
    }
}

/// The keys of a range response, as strings.
pub fn keys(r: &RangeResponse) -> Vec<String> {
    r.kvs
        .iter()
        .map(|kv| String::from_utf8(kv.key.clone()).unwrap())
        .collect()
}
