//! The etcd v3 API end to end, in process: `run()` on a loopback port with a temporary data
//! dir, driven by the generated tonic clients over mutual TLS.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use k3rs_datastore::etcdpb as pb;
use k3rs_datastore::etcdpb::cluster_client::ClusterClient;
use k3rs_datastore::etcdpb::kv_client::KvClient;
use k3rs_datastore::etcdpb::lease_client::LeaseClient;
use k3rs_datastore::etcdpb::maintenance_client::MaintenanceClient;
use k3rs_datastore::etcdpb::watch_client::WatchClient;
use k3rs_server::{run, ServerConfig};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Streaming};

struct Server {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<k3rs_server::Result<()>>,
}

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

impl Server {
    async fn start() -> Server {
        Server::start_in(tempfile::tempdir().unwrap()).await
    }

    async fn start_in(dir: tempfile::TempDir) -> Server {
        Server::start_with(dir, |_| {}).await
    }

    async fn start_with(dir: tempfile::TempDir, tweak: impl FnOnce(&mut ServerConfig)) -> Server {
        let addr = free_addr();
        let mut cfg = ServerConfig::new(dir.path().to_path_buf(), addr);
        cfg.watch_progress_notify_interval = Duration::from_millis(300);
        // The HTTPS port (supervisor) is bound even without the API server: one per server,
        // not the shared default 6443, since these tests run servers in parallel.
        cfg.https_listen = free_addr();
        tweak(&mut cfg);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(cfg, shutdown.clone()));
        let server = Server {
            dir,
            addr,
            shutdown,
            task,
        };
        for _ in 0..200 {
            // The client certificate is written last (after its key), each file atomically.
            if server.tls_dir().join("client.crt").exists() {
                if let Ok(ch) = server.connect(true).await {
                    let mut kv = KvClient::new(ch);
                    if kv.range(range(b"health")).await.is_ok() {
                        return server;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("server did not come up");
    }

    fn tls_dir(&self) -> PathBuf {
        self.dir.path().join("server/tls/etcd")
    }

    async fn connect(&self, with_cert: bool) -> Result<Channel, tonic::transport::Error> {
        let read = |name: &str| std::fs::read(self.tls_dir().join(name)).unwrap();
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read("server-ca.crt")))
            .domain_name("localhost");
        if with_cert {
            tls = tls.identity(Identity::from_pem(read("client.crt"), read("client.key")));
        }
        Endpoint::from_shared(format!("https://{}", self.addr))
            .unwrap()
            .tls_config(tls)?
            .connect_timeout(Duration::from_secs(3))
            .connect()
            .await
    }

    async fn channel(&self) -> Channel {
        self.connect(true).await.unwrap()
    }

    async fn stop(self) -> tempfile::TempDir {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("server stops within the drain grace")
            .unwrap()
            .unwrap();
        self.dir
    }
}

fn range(key: &[u8]) -> pb::RangeRequest {
    pb::RangeRequest {
        key: key.to_vec(),
        ..Default::default()
    }
}

fn put(key: &[u8], value: &[u8]) -> pb::PutRequest {
    pb::PutRequest {
        key: key.to_vec(),
        value: value.to_vec(),
        ..Default::default()
    }
}

fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    *end.last_mut().unwrap() += 1;
    end
}

#[tokio::test]
async fn kv_put_range_txn_delete_and_errors() {
    let s = Server::start().await;
    let mut kv = KvClient::new(s.channel().await);

    let r1 = kv.put(put(b"/a/1", b"one")).await.unwrap().into_inner();
    let h = r1.header.unwrap();
    assert!(h.cluster_id != 0 && h.member_id != 0 && h.raft_term >= 1);
    let rev1 = h.revision;
    kv.put(put(b"/a/2", b"two")).await.unwrap();
    let prev = kv
        .put(pb::PutRequest {
            prev_kv: true,
            ..put(b"/a/1", b"uno")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(prev.prev_kv.unwrap().value, b"one");

    let all = kv
        .range(pb::RangeRequest {
            range_end: prefix_end(b"/a/"),
            ..range(b"/a/")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.count, 2);
    assert_eq!(all.kvs[0].value, b"uno");
    assert_eq!(all.kvs[0].version, 2);
    assert_eq!(all.kvs[0].create_revision, rev1);
    let limited = kv
        .range(pb::RangeRequest {
            range_end: prefix_end(b"/a/"),
            limit: 1,
            serializable: true,
            ..range(b"/a/")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (limited.kvs.len(), limited.more, limited.count),
        (1, true, 2)
    );
    let old = kv
        .range(pb::RangeRequest {
            revision: rev1,
            ..range(b"/a/1")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(old.kvs[0].value, b"one");

    // kube-apiserver's create: If MOD(key) == 0 Then Put Else Range.
    let create = |key: &[u8]| pb::TxnRequest {
        compare: vec![pb::Compare {
            result: pb::compare::CompareResult::Equal as i32,
            target: pb::compare::CompareTarget::Mod as i32,
            key: key.to_vec(),
            target_union: Some(pb::compare::TargetUnion::ModRevision(0)),
            range_end: Vec::new(),
        }],
        success: vec![pb::RequestOp {
            request: Some(pb::request_op::Request::RequestPut(put(key, b"new"))),
        }],
        failure: vec![pb::RequestOp {
            request: Some(pb::request_op::Request::RequestRange(range(key))),
        }],
    };
    let ok = kv.txn(create(b"/b")).await.unwrap().into_inner();
    assert!(ok.succeeded);
    let again = kv.txn(create(b"/b")).await.unwrap().into_inner();
    assert!(!again.succeeded);
    match &again.responses[0].response {
        Some(pb::response_op::Response::ResponseRange(r)) => assert_eq!(r.kvs[0].value, b"new"),
        other => panic!("unexpected {other:?}"),
    }

    let del = kv
        .delete_range(pb::DeleteRangeRequest {
            key: b"/a/".to_vec(),
            range_end: prefix_end(b"/a/"),
            prev_kv: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(del.deleted, 2);
    assert_eq!(del.prev_kvs.len(), 2);

    // Errors: etcd's codes and messages.
    let e = kv.range(range(b"")).await.unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::InvalidArgument, "etcdserver: key is not provided")
    );
    let e = kv
        .range(pb::RangeRequest {
            revision: 1_000_000,
            ..range(b"/a")
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::OutOfRange,
            "etcdserver: mvcc: required revision is a future revision"
        )
    );
    let e = kv
        .put(put(b"/big", &vec![b'x'; 1_600_000]))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::InvalidArgument, "etcdserver: request is too large")
    );
    let dup = pb::TxnRequest {
        success: vec![
            pb::RequestOp {
                request: Some(pb::request_op::Request::RequestPut(put(b"/d", b"1"))),
            },
            pb::RequestOp {
                request: Some(pb::request_op::Request::RequestPut(put(b"/d", b"2"))),
            },
        ],
        ..Default::default()
    };
    let e = kv.txn(dup).await.unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::InvalidArgument,
            "etcdserver: duplicate key given in txn request"
        )
    );
    let e = kv
        .put(pb::PutRequest {
            lease: 12345,
            ..put(b"/l", b"v")
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::NotFound, "etcdserver: requested lease not found")
    );
    let garbage = pb::RangeRequest {
        sort_order: 99,
        ..range(b"/a")
    };
    assert_eq!(
        kv.range(garbage).await.unwrap_err().code(),
        Code::InvalidArgument
    );

    // The server is still fine.
    kv.put(put(b"/after", b"ok")).await.unwrap();
    s.stop().await;
}

async fn next(stream: &mut Streaming<pb::WatchResponse>) -> pb::WatchResponse {
    tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("a watch response in time")
        .unwrap()
        .expect("stream open")
}

fn create_watch(c: pb::WatchCreateRequest) -> pb::WatchRequest {
    pb::WatchRequest {
        request_union: Some(pb::watch_request::RequestUnion::CreateRequest(c)),
    }
}

#[tokio::test]
async fn watch_streams() {
    let s = Server::start().await;
    let ch = s.channel().await;
    let mut kv = KvClient::new(ch.clone());
    let mut watch = WatchClient::new(ch);
    let (tx, rx) = mpsc::channel(16);
    let mut stream = watch
        .watch(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();

    let start = kv
        .put(put(b"/w/0", b"zero"))
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .revision;
    tx.send(create_watch(pb::WatchCreateRequest {
        key: b"/w/".to_vec(),
        range_end: prefix_end(b"/w/"),
        prev_kv: true,
        start_revision: start,
        ..Default::default()
    }))
    .await
    .unwrap();
    let created = next(&mut stream).await;
    assert!(created.created && !created.canceled);
    assert_eq!(created.watch_id, 0);
    assert!(created.header.unwrap().revision >= start);
    let history = next(&mut stream).await;
    assert_eq!(history.events.len(), 1);
    assert_eq!(history.events[0].kv.as_ref().unwrap().key, b"/w/0");

    // A second watcher (NOPUT) gets ID 1.
    tx.send(create_watch(pb::WatchCreateRequest {
        key: b"/w/".to_vec(),
        range_end: prefix_end(b"/w/"),
        filters: vec![pb::watch_create_request::FilterType::Noput as i32],
        ..Default::default()
    }))
    .await
    .unwrap();
    let created = next(&mut stream).await;
    assert_eq!((created.created, created.watch_id), (true, 1));

    kv.put(put(b"/w/0", b"zero!")).await.unwrap();
    let ev = next(&mut stream).await;
    assert_eq!(ev.watch_id, 0);
    assert_eq!(ev.events[0].prev_kv.as_ref().unwrap().value, b"zero");
    let del_rev = kv
        .delete_range(pb::DeleteRangeRequest {
            key: b"/w/0".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .revision;
    let mut got = vec![next(&mut stream).await, next(&mut stream).await];
    got.sort_by_key(|r| r.watch_id);
    for r in &got {
        assert_eq!(r.events.len(), 1);
        assert_eq!(
            r.events[0].r#type,
            k3rs_datastore::mvccpb::event::EventType::Delete as i32
        );
        assert_eq!(r.events[0].kv.as_ref().unwrap().mod_revision, del_rev);
    }

    // RequestProgress: watch_id -1, revision covers everything sent.
    tx.send(pb::WatchRequest {
        request_union: Some(pb::watch_request::RequestUnion::ProgressRequest(
            pb::WatchProgressRequest {},
        )),
    })
    .await
    .unwrap();
    let progress = next(&mut stream).await;
    assert_eq!(progress.watch_id, -1);
    assert!(progress.events.is_empty());
    assert!(progress.header.unwrap().revision >= del_rev);

    // Cancel.
    tx.send(pb::WatchRequest {
        request_union: Some(pb::watch_request::RequestUnion::CancelRequest(
            pb::WatchCancelRequest { watch_id: 1 },
        )),
    })
    .await
    .unwrap();
    let canceled = next(&mut stream).await;
    assert_eq!((canceled.watch_id, canceled.canceled), (1, true));

    // Compacted start: created, then canceled with compact_revision.
    let rev = kv
        .put(put(b"/x", b"1"))
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .revision;
    kv.put(put(b"/x", b"2")).await.unwrap();
    kv.compact(pb::CompactionRequest {
        revision: rev + 1,
        physical: true,
    })
    .await
    .unwrap();
    let e = kv
        .range(pb::RangeRequest {
            revision: rev,
            ..range(b"/x")
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::OutOfRange,
            "etcdserver: mvcc: required revision has been compacted"
        )
    );
    tx.send(create_watch(pb::WatchCreateRequest {
        key: b"/x".to_vec(),
        start_revision: rev,
        ..Default::default()
    }))
    .await
    .unwrap();
    let created = next(&mut stream).await;
    assert!(created.created && !created.canceled);
    let canceled = next(&mut stream).await;
    assert_eq!(canceled.watch_id, created.watch_id);
    assert!(canceled.canceled);
    assert_eq!(canceled.compact_revision, rev + 1);

    // Bad requests are refused on the stream, not by closing it.
    tx.send(create_watch(pb::WatchCreateRequest {
        key: b"/x".to_vec(),
        start_revision: -5,
        ..Default::default()
    }))
    .await
    .unwrap();
    let created = next(&mut stream).await;
    assert!(created.created && !created.canceled);
    let canceled = next(&mut stream).await;
    assert_eq!(
        (canceled.watch_id, canceled.canceled),
        (created.watch_id, true)
    );
    assert_eq!(canceled.compact_revision, rev + 1);
    tx.send(create_watch(pb::WatchCreateRequest {
        key: b"b".to_vec(),
        range_end: b"a".to_vec(),
        ..Default::default()
    }))
    .await
    .unwrap();
    assert_eq!(next(&mut stream).await.watch_id, -1);
    drop(tx);
    drop(stream);
    s.stop().await;
}

#[tokio::test]
async fn watch_progress_notify_and_fragments() {
    let s = Server::start().await;
    let ch = s.channel().await;
    let mut kv = KvClient::new(ch.clone());
    let mut watch = WatchClient::new(ch);
    let (tx, rx) = mpsc::channel(16);
    let mut stream = watch
        .watch(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();

    // Periodic progress (300 ms in these tests) for a quiet watcher.
    tx.send(create_watch(pb::WatchCreateRequest {
        key: b"/p".to_vec(),
        progress_notify: true,
        watch_id: 7,
        ..Default::default()
    }))
    .await
    .unwrap();
    let created = next(&mut stream).await;
    assert_eq!(created.watch_id, 7);
    let rev = kv
        .put(put(b"/other", b"x"))
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .revision;
    let mut progressed = false;
    for _ in 0..5 {
        let r = next(&mut stream).await;
        assert_eq!(r.watch_id, 7);
        assert!(r.events.is_empty());
        if r.header.unwrap().revision >= rev {
            progressed = true;
            break;
        }
    }
    assert!(
        progressed,
        "progress notification reaches the latest revision"
    );
    // The same ID again is refused.
    tx.send(create_watch(pb::WatchCreateRequest {
        key: b"/p".to_vec(),
        watch_id: 7,
        ..Default::default()
    }))
    .await
    .unwrap();
    loop {
        let r = next(&mut stream).await;
        if r.created {
            assert_eq!((r.watch_id, r.canceled), (-1, true));
            break;
        }
    }

    // One txn deleting 3 keys of 1 MB: with prev_kv its response exceeds the limit and is
    // fragmented for a watcher that allows it.
    tx.send(create_watch(pb::WatchCreateRequest {
        key: b"/f/".to_vec(),
        range_end: prefix_end(b"/f/"),
        fragment: true,
        prev_kv: true,
        watch_id: 8,
        ..Default::default()
    }))
    .await
    .unwrap();
    loop {
        let r = next(&mut stream).await;
        if r.watch_id == 8 && r.created {
            break;
        }
    }
    let value = vec![b'v'; 1_000_000];
    for i in 0..3u8 {
        kv.put(put(&[b'/', b'f', b'/', b'0' + i], &value))
            .await
            .unwrap();
    }
    let txn = pb::TxnRequest {
        success: (0..3u8)
            .map(|i| pb::RequestOp {
                request: Some(pb::request_op::Request::RequestDeleteRange(
                    pb::DeleteRangeRequest {
                        key: vec![b'/', b'f', b'/', b'0' + i],
                        prev_kv: false,
                        ..Default::default()
                    },
                )),
            })
            .collect(),
        ..Default::default()
    };
    kv.txn(txn).await.unwrap();
    // The three puts arrive one per response, then the deletes in fragments: every piece
    // but the last carries `fragment`.
    let mut responses = Vec::new();
    let mut events = 0;
    while events < 6 {
        let r = next(&mut stream).await;
        if r.watch_id != 8 {
            continue;
        }
        events += r.events.len();
        responses.push((r.events.len(), r.fragment));
    }
    assert_eq!(events, 6);
    assert_eq!(&responses[..3], &[(1, false), (1, false), (1, false)]);
    let deletes = &responses[3..];
    assert!(deletes.len() >= 2, "{responses:?}");
    for (i, (_, fragment)) in deletes.iter().enumerate() {
        assert_eq!(*fragment, i + 1 < deletes.len(), "{responses:?}");
    }
    drop(tx);
    s.stop().await;
}

#[tokio::test]
async fn leases() {
    let s = Server::start().await;
    let ch = s.channel().await;
    let mut kv = KvClient::new(ch.clone());
    let mut lease = LeaseClient::new(ch);

    let g = lease
        .lease_grant(pb::LeaseGrantRequest { ttl: 1, id: 0 })
        .await
        .unwrap()
        .into_inner();
    assert!(g.id != 0);
    assert_eq!(g.ttl, 2, "raised to the minimum TTL");
    let long = lease
        .lease_grant(pb::LeaseGrantRequest {
            ttl: 60,
            id: 0x1234,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((long.id, long.ttl), (0x1234, 60));
    let e = lease
        .lease_grant(pb::LeaseGrantRequest {
            ttl: 60,
            id: 0x1234,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::FailedPrecondition, "etcdserver: lease already exists")
    );

    kv.put(pb::PutRequest {
        lease: long.id,
        ..put(b"/leased", b"v")
    })
    .await
    .unwrap();
    let ttl = lease
        .lease_time_to_live(pb::LeaseTimeToLiveRequest {
            id: long.id,
            keys: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ttl.granted_ttl, 60);
    assert!(ttl.ttl > 0 && ttl.ttl <= 60);
    assert_eq!(ttl.keys, vec![b"/leased".to_vec()]);
    let missing = lease
        .lease_time_to_live(pb::LeaseTimeToLiveRequest {
            id: 999,
            keys: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(missing.ttl, -1);

    let list = lease
        .lease_leases(pb::LeaseLeasesRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut ids: Vec<i64> = list.leases.iter().map(|l| l.id).collect();
    ids.sort();
    let mut want = vec![g.id, long.id];
    want.sort();
    assert_eq!(ids, want);

    let (tx, rx) = mpsc::channel(4);
    let mut ka = lease
        .lease_keep_alive(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tx.send(pb::LeaseKeepAliveRequest { id: long.id })
        .await
        .unwrap();
    let r = ka.message().await.unwrap().unwrap();
    assert_eq!((r.id, r.ttl), (long.id, 60));
    tx.send(pb::LeaseKeepAliveRequest { id: 4242 })
        .await
        .unwrap();
    let r = ka.message().await.unwrap().unwrap();
    assert_eq!((r.id, r.ttl), (4242, 0));
    drop(tx);

    lease
        .lease_revoke(pb::LeaseRevokeRequest { id: long.id })
        .await
        .unwrap();
    assert!(kv
        .range(range(b"/leased"))
        .await
        .unwrap()
        .into_inner()
        .kvs
        .is_empty());
    let e = lease
        .lease_revoke(pb::LeaseRevokeRequest { id: long.id })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::NotFound, "etcdserver: requested lease not found")
    );

    // The short lease expires and takes its key along.
    let short = lease
        .lease_grant(pb::LeaseGrantRequest { ttl: 2, id: 0 })
        .await
        .unwrap()
        .into_inner();
    kv.put(pb::PutRequest {
        lease: short.id,
        ..put(b"/short", b"v")
    })
    .await
    .unwrap();
    let mut gone = false;
    for _ in 0..80 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if kv
            .range(range(b"/short"))
            .await
            .unwrap()
            .into_inner()
            .kvs
            .is_empty()
        {
            gone = true;
            break;
        }
    }
    assert!(gone, "key of an expired lease is deleted");
    s.stop().await;
}

#[tokio::test]
async fn maintenance_cluster_and_tls() {
    let s = Server::start().await;
    let ch = s.channel().await;
    let mut kv = KvClient::new(ch.clone());
    let mut m = MaintenanceClient::new(ch.clone());
    let mut cluster = ClusterClient::new(ch);
    for i in 0..50u32 {
        kv.put(put(format!("/m/{i}").as_bytes(), &[7; 1000]))
            .await
            .unwrap();
    }

    let st = m.status(pb::StatusRequest {}).await.unwrap().into_inner();
    assert!(st.version.as_str() >= "3.5.13", "{}", st.version);
    let member_id = st.header.unwrap().member_id;
    assert_eq!(st.leader, member_id);
    assert!(st.raft_index >= st.raft_applied_index.min(st.raft_index) && st.raft_applied_index > 0);
    assert!(st.db_size > 0 && st.db_size_in_use > 0);
    assert!(st.errors.is_empty());

    let members = cluster
        .member_list(pb::MemberListRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(members.members.len(), 1);
    assert_eq!(members.members[0].id, member_id);
    assert_eq!(
        members.members[0].client_ur_ls,
        vec![format!("https://{}", s.addr)]
    );
    let e = cluster
        .member_add(pb::MemberAddRequest::default())
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::InvalidArgument,
            "etcdserver: given member URLs are invalid"
        )
    );
    let e = cluster
        .member_remove(pb::MemberRemoveRequest { id: 42 })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::NotFound, "etcdserver: member not found")
    );
    let e = cluster
        .member_promote(pb::MemberPromoteRequest { id: member_id })
        .await
        .unwrap_err();
    assert_eq!(e.message(), "etcdserver: can only promote a learner member");

    let mut snap = m
        .snapshot(pb::SnapshotRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut msgs = Vec::new();
    while let Some(msg) = snap.message().await.unwrap() {
        msgs.push(msg);
    }
    let (trailer, data) = msgs.split_last().unwrap();
    let data: Vec<u8> = data.iter().flat_map(|m| m.blob.clone()).collect();
    assert_eq!(data.len() % 512, 0);
    assert!(data.len() > 50_000);
    assert_eq!(trailer.blob, Sha256::digest(&data).to_vec());
    assert_eq!(msgs[msgs.len() - 2].remaining_bytes, 0);

    m.defragment(pb::DefragmentRequest {}).await.unwrap();
    let alarms = m
        .alarm(pb::AlarmRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(alarms.alarms.is_empty());
    assert_eq!(
        kv.range(range(b"/m/1"))
            .await
            .unwrap()
            .into_inner()
            .kvs
            .len(),
        1
    );

    // `hasleader` with a leader present passes.
    let mut req = tonic::Request::new(range(b"/m/1"));
    req.metadata_mut()
        .insert("hasleader", "true".parse().unwrap());
    assert!(kv.range(req).await.is_ok());

    // A client without a certificate is refused.
    let refused = match s.connect(false).await {
        Err(_) => true,
        Ok(ch) => KvClient::new(ch).range(range(b"/m/1")).await.is_err(),
    };
    assert!(refused, "mTLS requires a client certificate");
    s.stop().await;
}

#[tokio::test]
async fn restart_keeps_data_and_pki() {
    let s = Server::start().await;
    let mut kv = KvClient::new(s.channel().await);
    let rev = kv
        .put(put(b"/keep", b"me"))
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .revision;
    let ca = std::fs::read(s.tls_dir().join("server-ca.crt")).unwrap();
    let token = std::fs::read_to_string(s.dir.path().join("server/token")).unwrap();
    let dir = s.stop().await;

    let s = Server::start_in(dir).await;
    assert_eq!(
        std::fs::read(s.tls_dir().join("server-ca.crt")).unwrap(),
        ca
    );
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join("server/token")).unwrap(),
        token
    );
    let mut kv = KvClient::new(s.channel().await);
    let got = kv.range(range(b"/keep")).await.unwrap().into_inner();
    assert_eq!(got.kvs[0].value, b"me");
    assert_eq!(got.kvs[0].mod_revision, rev);
    s.stop().await;
}

/// Many writers, several watchers on one stream, progress requests in between: every watcher
/// sees exactly the acknowledged writes of its range, in revision order, and no event comes
/// after a progress response with a revision at or below it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watch_under_concurrent_writes_is_ordered_complete_and_progress_safe() {
    const WRITERS: usize = 6;
    const PUTS: usize = 150;
    let s = Server::start().await;
    let ch = s.channel().await;
    let mut watch = WatchClient::new(ch.clone());
    let (tx, rx) = mpsc::channel(64);
    let mut stream = watch
        .watch(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    // Watcher 0: everything under /c/; 1: /c/0…/c/2 writers only; 2: all keys.
    let ranges: [(&[u8], Vec<u8>); 3] = [
        (b"/c/", prefix_end(b"/c/")),
        (b"/c/0", b"/c/3".to_vec()),
        (b"\0", vec![0]),
    ];
    for (key, end) in &ranges {
        tx.send(create_watch(pb::WatchCreateRequest {
            key: key.to_vec(),
            range_end: end.clone(),
            ..Default::default()
        }))
        .await
        .unwrap();
        assert!(next(&mut stream).await.created);
    }

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let mut kv = KvClient::new(ch.clone());
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0..PUTS {
                let key = format!("/c/{w}/{}", i % 7).into_bytes();
                let rev = kv
                    .put(put(&key, b"v"))
                    .await
                    .unwrap()
                    .into_inner()
                    .header
                    .unwrap()
                    .revision;
                acked.push((rev, key));
            }
            acked
        }));
    }
    let progress = tokio::spawn({
        let tx = tx.clone();
        async move {
            for _ in 0..20 {
                let req = pb::WatchRequest {
                    request_union: Some(pb::watch_request::RequestUnion::ProgressRequest(
                        pb::WatchProgressRequest {},
                    )),
                };
                if tx.send(req).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let mut acked: Vec<(i64, Vec<u8>)> = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    progress.await.unwrap();
    acked.sort();
    let want = |i: usize| -> Vec<(i64, Vec<u8>)> {
        let (key, end) = &ranges[i];
        acked
            .iter()
            .filter(|(_, k)| k.as_slice() >= *key && (end == &vec![0] || k < end))
            .cloned()
            .collect()
    };
    let wants: Vec<_> = (0..3).map(want).collect();

    let mut got: [Vec<(i64, Vec<u8>)>; 3] = Default::default();
    let mut progress_floor = 0i64;
    while (0..3).any(|i| got[i].len() < wants[i].len()) {
        let r = next(&mut stream).await;
        if r.watch_id == -1 {
            let rev = r.header.unwrap().revision;
            assert!(rev >= progress_floor, "progress went back in time");
            progress_floor = rev;
            continue;
        }
        let id = usize::try_from(r.watch_id).unwrap();
        for ev in r.events {
            let kv = ev.kv.unwrap();
            assert!(
                kv.mod_revision > progress_floor,
                "event at or below a progress revision"
            );
            got[id].push((kv.mod_revision, kv.key));
        }
    }
    for i in 0..3 {
        assert_eq!(got[i], wants[i], "watcher {i}");
    }
    drop(tx);
    s.stop().await;
}

#[tokio::test]
async fn automatic_compaction_keeps_the_retention_window() {
    let s = Server::start_with(tempfile::tempdir().unwrap(), |cfg| {
        cfg.auto_compaction_retention = Duration::from_secs(2);
    })
    .await;
    let mut kv = KvClient::new(s.channel().await);
    let first = kv
        .put(put(b"/ac", b"1"))
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .revision;
    kv.put(put(b"/ac", b"2")).await.unwrap();
    // Sampled every second; the revision seen 2 s earlier is compacted once 2 s have passed.
    let mut compacted = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        kv.put(put(b"/ac", b"more")).await.unwrap();
        if let Err(e) = kv
            .range(pb::RangeRequest {
                revision: first,
                ..range(b"/ac")
            })
            .await
        {
            assert_eq!(e.code(), Code::OutOfRange);
            compacted = true;
            break;
        }
    }
    assert!(compacted, "history older than the retention is compacted");
    // The latest value is always there.
    assert_eq!(
        kv.range(range(b"/ac")).await.unwrap().into_inner().kvs[0].value,
        b"more"
    );
    s.stop().await;
}
