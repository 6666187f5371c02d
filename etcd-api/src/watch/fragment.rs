//! Splitting large watch responses (etcd's `sendFragments`).

use prost::Message;

use k3rs_datastore::etcdpb as pb;

/// Splits a response larger than `limit` bytes that holds at least two events into pieces
/// below the limit (a piece holds at least one event); all but the last carry `fragment`.
pub fn fragments(resp: pb::WatchResponse, limit: usize) -> Vec<pb::WatchResponse> {
    if resp.encoded_len() < limit || resp.events.len() < 2 {
        return vec![resp];
    }
    let mut template = resp;
    let events = std::mem::take(&mut template.events);
    template.fragment = true;
    let base = template.encoded_len();
    let mut out = Vec::new();
    let mut cur = template.clone();
    let mut size = base;
    for ev in events {
        let ev_len = prost::encoding::message::encoded_len(11, &ev);
        if !cur.events.is_empty() && size + ev_len >= limit {
            out.push(std::mem::replace(&mut cur, template.clone()));
            size = base;
        }
        size += ev_len;
        cur.events.push(ev);
    }
    cur.fragment = false;
    out.push(cur);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_datastore::mvccpb;

    fn ev(size: usize) -> mvccpb::Event {
        mvccpb::Event {
            r#type: 0,
            kv: Some(mvccpb::KeyValue {
                key: b"k".to_vec(),
                value: vec![7; size],
                ..Default::default()
            }),
            prev_kv: None,
        }
    }

    fn resp(events: Vec<mvccpb::Event>) -> pb::WatchResponse {
        pb::WatchResponse {
            header: Some(pb::ResponseHeader {
                revision: 9,
                ..Default::default()
            }),
            watch_id: 3,
            events,
            ..Default::default()
        }
    }

    #[test]
    fn small_or_single_event_responses_are_not_split() {
        assert_eq!(fragments(resp(vec![ev(10), ev(10)]), 1000).len(), 1);
        let one = fragments(resp(vec![ev(5000)]), 1000);
        assert_eq!(one.len(), 1);
        assert!(!one[0].fragment);
    }

    #[test]
    fn large_responses_split_in_order_with_fragment_flags() {
        let events: Vec<_> = (0..10).map(|_| ev(300)).collect();
        let pieces = fragments(resp(events.clone()), 1000);
        assert!(pieces.len() > 1);
        for (i, p) in pieces.iter().enumerate() {
            assert_eq!(p.fragment, i + 1 < pieces.len());
            assert_eq!(p.watch_id, 3);
            assert_eq!(p.header.as_ref().unwrap().revision, 9);
            assert!(!p.events.is_empty());
            assert!(p.encoded_len() < 1000 || p.events.len() == 1);
        }
        let rejoined: Vec<_> = pieces.into_iter().flat_map(|p| p.events).collect();
        assert_eq!(rejoined, events);
    }
}
