//! The watch stream's protocol core, without I/O: which responses to send and which watchers
//! to start or stop, for each input. The shell ([`super`]) owns the store watchers, polls
//! them, fills response headers and sends.
//!
//! Follows etcd's `v3rpc/watch.go` (3.4 where 3.4 and 3.5 differ, as etcdctl 3.4 is the
//! reference): see the module docs of [`super`] for the guarantees.

use std::collections::BTreeMap;

use k3rs_storage as st;

use super::super::convert;
use super::fragment::fragments;
use k3rs_datastore::etcdpb as pb;

/// The watch ID of responses that are not about one watcher.
pub const INVALID_WATCH_ID: i64 = -1;
/// etcd's answer to a watch id in use.
pub const ERR_DUPLICATE_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";
/// etcd's answer to a watch over no keys.
pub const ERR_EMPTY_RANGE: &str = "mvcc: watcher range is empty";

/// The revision a response header carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderRevision {
    /// The store's current revision when sent.
    Current,
    /// This revision.
    At(i64),
}

/// What the shell does next, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send `resp` with a header at `revision`.
    Send {
        /// The response.
        resp: pb::WatchResponse,
        /// Its header revision.
        revision: HeaderRevision,
    },
    /// Start a store watcher; report the outcome with [`Session::started`].
    Start {
        /// The watch id.
        id: i64,
        /// What to watch.
        req: st::WatchRequest,
        /// The stream's options for it.
        opts: WatchOptions,
    },
    /// Drop the store watcher `id`.
    Stop {
        /// The watch id.
        id: i64,
    },
}

/// Per-watcher options that only matter to the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WatchOptions {
    /// Send progress notifications.
    pub progress_notify: bool,
    /// Split large responses into fragments.
    pub fragment: bool,
}

#[derive(Debug, Clone)]
struct Active {
    opts: WatchOptions,
    /// No event sent since the last progress tick (etcd's per-watcher progress flag).
    quiet: bool,
}

/// The state of one watch stream.
#[derive(Debug, Default)]
pub struct Session {
    active: BTreeMap<i64, Active>,
    /// IDs handed out and not yet started or refused.
    starting: BTreeMap<i64, WatchOptions>,
    next_id: i64,
    progress_pending: bool,
    fragment_limit: usize,
}

fn send(resp: pb::WatchResponse, revision: HeaderRevision) -> Action {
    Action::Send { resp, revision }
}

fn refused(reason: &str) -> Action {
    send(
        pb::WatchResponse {
            watch_id: INVALID_WATCH_ID,
            created: true,
            canceled: true,
            cancel_reason: reason.to_string(),
            ..Default::default()
        },
        HeaderRevision::Current,
    )
}

fn created(id: i64) -> Action {
    send(
        pb::WatchResponse {
            watch_id: id,
            created: true,
            ..Default::default()
        },
        HeaderRevision::Current,
    )
}

/// etcd cancels a watcher that needs compacted history with header revision 0.
fn compacted(id: i64, compact_revision: i64) -> Action {
    send(
        pb::WatchResponse {
            watch_id: id,
            canceled: true,
            compact_revision,
            ..Default::default()
        },
        HeaderRevision::At(0),
    )
}

/// Whether `[key, range_end)` is empty (etcd refuses such watches).
fn range_is_empty(key: &[u8], range_end: &[u8]) -> bool {
    !range_end.is_empty() && range_end != [0] && key >= range_end
}

impl Session {
    /// `fragment_limit`: responses of fragmenting watchers are split above this many bytes.
    pub fn new(fragment_limit: usize) -> Session {
        Session {
            fragment_limit,
            ..Default::default()
        }
    }

    /// Whether any watcher is active.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Whether a progress request waits for watchers to catch up.
    pub fn progress_pending(&self) -> bool {
        self.progress_pending
    }

    /// Whether any watcher asked for periodic progress notifications.
    pub fn wants_progress_ticks(&self) -> bool {
        self.active.values().any(|w| w.opts.progress_notify)
    }

    /// A create request. `compact_revision` is the store's (0 if never compacted).
    pub fn create(&mut self, c: &pb::WatchCreateRequest, compact_revision: i64) -> Vec<Action> {
        let req = convert::watch_request(c);
        if range_is_empty(&req.key, &req.range_end) {
            return vec![refused(ERR_EMPTY_RANGE)];
        }
        let id = if c.watch_id != 0 {
            if c.watch_id < 0 || self.in_use(c.watch_id) {
                return vec![refused(ERR_DUPLICATE_ID)];
            }
            c.watch_id
        } else {
            while self.in_use(self.next_id) {
                self.next_id += 1;
            }
            self.next_id += 1;
            self.next_id - 1
        };
        if c.start_revision < 0 {
            // etcd 3.4 registers the watcher, then cancels it as compacted (compact revision
            // -1 while nothing was ever compacted).
            let rev = if compact_revision > 0 {
                compact_revision
            } else {
                -1
            };
            return vec![created(id), compacted(id, rev)];
        }
        let opts = WatchOptions {
            progress_notify: c.progress_notify,
            fragment: c.fragment,
        };
        self.starting.insert(id, opts);
        vec![Action::Start { id, req, opts }]
    }

    fn in_use(&self, id: i64) -> bool {
        self.active.contains_key(&id) || self.starting.contains_key(&id)
    }

    /// The outcome of an [`Action::Start`].
    pub fn started(&mut self, id: i64, result: Result<(), st::RequestError>) -> Vec<Action> {
        let Some(opts) = self.starting.remove(&id) else {
            return Vec::new();
        };
        match result {
            Ok(()) => {
                self.active.insert(id, Active { opts, quiet: true });
                vec![created(id)]
            }
            Err(st::RequestError::Compacted { compact_revision }) => {
                vec![created(id), compacted(id, compact_revision)]
            }
            Err(other) => vec![refused(&other.to_string())],
        }
    }

    /// A cancel request; etcd answers nothing for an unknown ID.
    pub fn cancel(&mut self, id: i64) -> Vec<Action> {
        if self.active.remove(&id).is_none() {
            return Vec::new();
        }
        vec![
            Action::Stop { id },
            send(
                pb::WatchResponse {
                    watch_id: id,
                    canceled: true,
                    ..Default::default()
                },
                HeaderRevision::Current,
            ),
        ]
    }

    /// A batch of events of watcher `id`, with the store revision for its header.
    pub fn events(&mut self, id: i64, revision: i64, events: Vec<st::Event>) -> Vec<Action> {
        let Some(w) = self.active.get_mut(&id) else {
            return Vec::new();
        };
        if events.is_empty() {
            return Vec::new();
        }
        w.quiet = false;
        let resp = pb::WatchResponse {
            watch_id: id,
            events: events.into_iter().map(convert::event).collect(),
            ..Default::default()
        };
        let pieces = if w.opts.fragment {
            fragments(resp, self.fragment_limit)
        } else {
            vec![resp]
        };
        pieces
            .into_iter()
            .map(|r| send(r, HeaderRevision::At(revision)))
            .collect()
    }

    /// Watcher `id` fell behind a compaction: it is over.
    pub fn compacted(&mut self, id: i64, compact_revision: i64) -> Vec<Action> {
        if self.active.remove(&id).is_none() {
            return Vec::new();
        }
        vec![Action::Stop { id }, compacted(id, compact_revision)]
    }

    /// A `WatchProgressRequest`: answered by [`Session::progress_all`] once possible.
    pub fn request_progress(&mut self) {
        self.progress_pending = true;
    }

    /// Answers a pending progress request if every watcher is caught up. `progress` holds each
    /// active watcher's progress revision (`None` while it replays history).
    pub fn progress_all(&mut self, progress: &BTreeMap<i64, Option<i64>>) -> Vec<Action> {
        if !self.progress_pending {
            return Vec::new();
        }
        if self.active.is_empty() {
            self.progress_pending = false; // etcd sends nothing on a stream without watchers
            return Vec::new();
        }
        let mut revision = i64::MAX;
        for id in self.active.keys() {
            match progress.get(id).copied().flatten() {
                Some(r) => revision = revision.min(r),
                None => return Vec::new(),
            }
        }
        self.progress_pending = false;
        vec![send(
            pb::WatchResponse {
                watch_id: INVALID_WATCH_ID,
                ..Default::default()
            },
            HeaderRevision::At(revision),
        )]
    }

    /// The periodic progress tick: a notification for every `progress_notify` watcher that sent
    /// nothing since the previous tick and is caught up.
    pub fn progress_tick(&mut self, progress: &BTreeMap<i64, Option<i64>>) -> Vec<Action> {
        let mut out = Vec::new();
        for (id, w) in self.active.iter_mut() {
            if !w.opts.progress_notify {
                continue;
            }
            if w.quiet {
                if let Some(rev) = progress.get(id).copied().flatten() {
                    out.push(send(
                        pb::WatchResponse {
                            watch_id: *id,
                            ..Default::default()
                        },
                        HeaderRevision::At(rev),
                    ));
                }
            }
            w.quiet = true;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(key: &[u8]) -> pb::WatchCreateRequest {
        pb::WatchCreateRequest {
            key: key.to_vec(),
            ..Default::default()
        }
    }

    fn start_ok(s: &mut Session, c: pb::WatchCreateRequest) -> i64 {
        let actions = s.create(&c, 0);
        let [Action::Start { id, .. }] = actions.as_slice() else {
            panic!("{actions:?}")
        };
        let id = *id;
        assert_eq!(s.started(id, Ok(())), vec![created(id)]);
        id
    }

    fn put_event(rev: i64) -> st::Event {
        st::Event {
            kind: st::EventKind::Put,
            kv: st::KeyValue {
                key: b"k".to_vec(),
                mod_revision: rev,
                create_revision: rev,
                version: 1,
                ..Default::default()
            },
            prev_kv: None,
        }
    }

    #[test]
    fn ids_count_from_zero_and_skip_client_chosen_ones() {
        let mut s = Session::new(1 << 20);
        assert_eq!(start_ok(&mut s, create(b"a")), 0);
        assert_eq!(
            start_ok(
                &mut s,
                pb::WatchCreateRequest {
                    watch_id: 1,
                    ..create(b"a")
                }
            ),
            1
        );
        assert_eq!(start_ok(&mut s, create(b"a")), 2);
        assert_eq!(
            s.create(
                &pb::WatchCreateRequest {
                    watch_id: 2,
                    ..create(b"a")
                },
                0
            ),
            vec![refused(ERR_DUPLICATE_ID)]
        );
        assert_eq!(
            s.create(
                &pb::WatchCreateRequest {
                    watch_id: -3,
                    ..create(b"a")
                },
                0
            ),
            vec![refused(ERR_DUPLICATE_ID)]
        );
    }

    #[test]
    fn refusals_and_compacted_starts() {
        let mut s = Session::new(1 << 20);
        let empty = pb::WatchCreateRequest {
            range_end: b"a".to_vec(),
            ..create(b"b")
        };
        assert_eq!(s.create(&empty, 0), vec![refused(ERR_EMPTY_RANGE)]);

        let negative = pb::WatchCreateRequest {
            start_revision: -1,
            ..create(b"a")
        };
        assert_eq!(s.create(&negative, 0), vec![created(0), compacted(0, -1)]);
        assert_eq!(s.create(&negative, 9), vec![created(1), compacted(1, 9)]);

        let actions = s.create(
            &pb::WatchCreateRequest {
                start_revision: 3,
                ..create(b"a")
            },
            9,
        );
        assert!(matches!(actions.as_slice(), [Action::Start { id: 2, .. }]));
        let compacted_start = s.started(
            2,
            Err(st::RequestError::Compacted {
                compact_revision: 9,
            }),
        );
        assert_eq!(compacted_start, vec![created(2), compacted(2, 9)]);
        assert!(s.is_empty());
    }

    #[test]
    fn cancel_and_events() {
        let mut s = Session::new(1 << 20);
        let id = start_ok(&mut s, create(b"a"));
        let sent = s.events(id, 7, vec![put_event(7)]);
        let [Action::Send {
            resp,
            revision: HeaderRevision::At(7),
        }] = sent.as_slice()
        else {
            panic!("{sent:?}")
        };
        assert_eq!(
            (resp.watch_id, resp.events.len(), resp.fragment),
            (id, 1, false)
        );
        assert_eq!(s.cancel(5), vec![]);
        let canceled = s.cancel(id);
        assert_eq!(canceled[0], Action::Stop { id });
        assert!(
            s.events(id, 8, vec![put_event(8)]).is_empty(),
            "nothing after cancel"
        );
    }

    #[test]
    fn progress_request_waits_for_every_watcher() {
        let mut s = Session::new(1 << 20);
        s.request_progress();
        assert!(s.progress_all(&BTreeMap::new()).is_empty());
        assert!(
            !s.progress_pending(),
            "no watchers: nothing sent, request done"
        );

        let a = start_ok(&mut s, create(b"a"));
        let b = start_ok(&mut s, create(b"b"));
        s.request_progress();
        let replaying = BTreeMap::from([(a, Some(10)), (b, None)]);
        assert!(s.progress_all(&replaying).is_empty());
        assert!(s.progress_pending());
        let synced = BTreeMap::from([(a, Some(12)), (b, Some(11))]);
        let sent = s.progress_all(&synced);
        let [Action::Send {
            resp,
            revision: HeaderRevision::At(11),
        }] = sent.as_slice()
        else {
            panic!("{sent:?}")
        };
        assert_eq!(resp.watch_id, INVALID_WATCH_ID);
        assert!(!s.progress_pending());
        assert!(s.progress_all(&synced).is_empty(), "one answer per request");
    }

    #[test]
    fn ticks_notify_quiet_progress_watchers_only() {
        let mut s = Session::new(1 << 20);
        let notify = start_ok(
            &mut s,
            pb::WatchCreateRequest {
                progress_notify: true,
                ..create(b"a")
            },
        );
        let plain = start_ok(&mut s, create(b"b"));
        let progress = BTreeMap::from([(notify, Some(5)), (plain, Some(5))]);
        let first = s.progress_tick(&progress);
        assert_eq!(first.len(), 1);
        assert!(
            matches!(&first[0], Action::Send { resp, revision: HeaderRevision::At(5) } if resp.watch_id == notify)
        );
        // An event since the last tick elides the next notification.
        s.events(notify, 6, vec![put_event(6)]);
        assert!(s.progress_tick(&progress).is_empty());
        assert_eq!(s.progress_tick(&progress).len(), 1);
        // Not while replaying.
        assert!(s
            .progress_tick(&BTreeMap::from([(notify, None)]))
            .is_empty());
    }

    #[test]
    fn fragmenting_watchers_get_pieces() {
        let mut s = Session::new(200);
        let id = start_ok(
            &mut s,
            pb::WatchCreateRequest {
                fragment: true,
                ..create(b"a")
            },
        );
        let big = |rev| st::Event {
            kv: st::KeyValue {
                value: vec![1; 150],
                ..put_event(rev).kv
            },
            ..put_event(rev)
        };
        let sent = s.events(id, 9, vec![big(9), big(9), big(9)]);
        assert_eq!(sent.len(), 3);
        let flags: Vec<bool> = sent
            .iter()
            .map(|a| match a {
                Action::Send { resp, .. } => resp.fragment,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(flags, vec![true, true, false]);
    }
}
