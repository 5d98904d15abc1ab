//! The tokio adapter against a real ZooKeeper 3.8 (started by the test support).

use std::time::Duration;

use crate::{client, within};
use bytes::Bytes;
use zk_recipes::client::ops::digest_id;
use zk_recipes::proto::*;
use zk_recipes_testing::{RawClient, TestEnsemble, TestServer};
use zk_recipes_tokio::{connect, CreateOptions, Error, Options, Status};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_raw_operation() {
    let server = TestServer::start().unwrap();
    let zk = client(&server).await;
    assert!(
        matches!(zk.status(), Status::Connected { timeout, .. } if timeout == Duration::from_secs(6))
    );

    // create in every mode
    assert_eq!(
        zk.create("/a", "one", &CreateOptions::default())
            .await
            .unwrap(),
        "/a"
    );
    let (path, stat) = zk
        .create2("/a/b", Bytes::new(), &CreateOptions::default())
        .await
        .unwrap();
    assert_eq!((path.as_str(), stat.version), ("/a/b", 0));
    let seq = zk
        .create(
            "/a/s-",
            "x",
            &CreateOptions::mode(CreateMode::PersistentSequential),
        )
        .await
        .unwrap();
    assert_eq!(seq, "/a/s-0000000001");
    let eph = zk
        .create(
            "/a/e-",
            "x",
            &CreateOptions::mode(CreateMode::EphemeralSequential),
        )
        .await
        .unwrap();
    assert_eq!(eph, "/a/e-0000000002");
    let (c, cstat) = zk
        .create2(
            "/cont",
            Bytes::new(),
            &CreateOptions::mode(CreateMode::Container),
        )
        .await
        .unwrap();
    assert_eq!((c.as_str(), cstat.ephemeral_owner), ("/cont", 0));
    let ttl = CreateOptions::mode(CreateMode::PersistentWithTtl).ttl(Duration::from_secs(60));
    assert_eq!(zk.create("/ttl", "t", &ttl).await.unwrap(), "/ttl");
    assert_eq!(
        zk.create("/a", "dup", &CreateOptions::default()).await,
        Err(Error::Node {
            code: ErrorCode::NodeExists,
            path: "/a".into()
        })
    );
    assert_eq!(
        zk.create("/e", "", &CreateOptions::mode(CreateMode::Ephemeral))
            .await
            .unwrap(),
        "/e",
    );
    assert_eq!(
        zk.create("/e/child", "", &CreateOptions::default()).await,
        Err(Error::Node {
            code: ErrorCode::NoChildrenForEphemerals,
            path: "/e/child".into()
        })
    );

    // reads
    let (data, stat) = zk.get_data("/a").await.unwrap();
    assert_eq!((&data[..], stat.num_children), (&b"one"[..], 3));
    assert_eq!(zk.exists("/nope").await.unwrap(), None);
    assert_eq!(zk.exists("/a").await.unwrap().unwrap().czxid, stat.czxid);
    let mut kids = zk.get_children("/a").await.unwrap();
    kids.sort();
    assert_eq!(kids, ["b", "e-0000000002", "s-0000000001"]);
    let (kids2, parent) = zk.get_children2("/a").await.unwrap();
    assert_eq!((kids2.len(), parent.num_children), (3, 3));
    assert_eq!(zk.get_all_children_number("/a").await.unwrap(), 3);
    assert_eq!(zk.get_ephemerals("/").await.unwrap().len(), 2);
    assert_eq!(zk.sync("/a").await.unwrap(), "/a");
    assert_eq!(
        zk.get_data("/nope").await,
        Err(Error::Node {
            code: ErrorCode::NoNode,
            path: "/nope".into()
        })
    );
    // The message names the node (it used to read only the code).
    assert_eq!(
        zk.get_data("/nope").await.unwrap_err().to_string(),
        "ZooKeeper error on /nope: node does not exist (-101)"
    );

    // writes with versions
    let stat = zk.set_data("/a", "two", Some(0)).await.unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(
        zk.set_data("/a", "three", Some(0)).await,
        Err(Error::Node {
            code: ErrorCode::BadVersion,
            path: "/a".into()
        })
    );
    assert_eq!(
        zk.delete("/a/b", Some(5)).await,
        Err(Error::Node {
            code: ErrorCode::BadVersion,
            path: "/a/b".into()
        })
    );
    zk.delete("/a/b", Some(0)).await.unwrap();
    assert_eq!(
        zk.delete("/a", None).await,
        Err(Error::Node {
            code: ErrorCode::NotEmpty,
            path: "/a".into()
        })
    );

    // multi with a failing op: nothing applied, per-op results
    let results = zk
        .multi(vec![
            MultiOp::Create(CreateRequest::new(
                "/m1",
                Bytes::new(),
                Acl::open_unsafe(),
                CreateMode::Persistent,
            )),
            MultiOp::Check(CheckVersionRequest {
                path: "/a".into(),
                version: 42,
            }),
            MultiOp::Delete(DeleteRequest {
                path: "/a/s-0000000001".into(),
                version: -1,
            }),
        ])
        .await
        .unwrap();
    assert_eq!(
        results,
        vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::BadVersion),
            MultiResult::Error(ErrorCode::RuntimeInconsistency)
        ]
    );
    assert_eq!(first_error(&results), Some(ErrorCode::BadVersion));
    assert_eq!(zk.exists("/m1").await.unwrap(), None, "rolled back");
    let results = zk
        .multi(vec![
            MultiOp::Create(CreateRequest::new(
                "/m1",
                Bytes::new(),
                Acl::open_unsafe(),
                CreateMode::Persistent,
            )),
            MultiOp::SetData(SetDataRequest {
                path: "/m1".into(),
                data: Bytes::from_static(b"z"),
                version: 0,
            }),
            MultiOp::Check(CheckVersionRequest {
                path: "/m1".into(),
                version: 1,
            }),
        ])
        .await
        .unwrap();
    assert!(
        matches!(&results[..], [MultiResult::Create(p), MultiResult::SetData(s), MultiResult::Check] if p == "/m1" && s.version == 1)
    );
    let reads = zk
        .multi_read(vec![
            ReadOp::GetData(PathWatch {
                path: "/m1".into(),
                watch: false,
            }),
            ReadOp::GetData(PathWatch {
                path: "/nope".into(),
                watch: false,
            }),
            ReadOp::GetChildren(PathWatch {
                path: "/m1".into(),
                watch: false,
            }),
        ])
        .await
        .unwrap();
    assert!(matches!(&reads[0], MultiResult::GetData { data, .. } if &data[..] == b"z"));
    assert_eq!(reads[1], MultiResult::Error(ErrorCode::NoNode));
    assert_eq!(reads[2], MultiResult::GetChildren(vec![]));

    // ACLs and digest auth
    let (acl, _) = zk.get_acl("/a").await.unwrap();
    assert_eq!(acl, Acl::open_unsafe());
    let secret = vec![Acl::new(perms::ALL, "digest", &digest_id("alice", "pw"))];
    zk.create(
        "/secret",
        "s",
        &CreateOptions::default().acl(secret.clone()),
    )
    .await
    .unwrap();
    assert_eq!(
        zk.get_data("/secret").await,
        Err(Error::Node {
            code: ErrorCode::NoAuth,
            path: "/secret".into()
        })
    );
    assert_eq!(
        zk.set_data("/secret", "x", None).await,
        Err(Error::Node {
            code: ErrorCode::NoAuth,
            path: "/secret".into()
        })
    );
    zk.add_auth("digest", b"alice:pw").await.unwrap();
    assert_eq!(&zk.get_data("/secret").await.unwrap().0[..], b"s");
    let who = zk.who_am_i().await.unwrap();
    assert!(
        who.iter()
            .any(|c| c.auth_scheme == "digest" && c.user == "alice"),
        "{who:?}"
    );
    let stat = zk.set_acl("/a", Acl::read_unsafe(), Some(0)).await.unwrap();
    assert_eq!(stat.aversion, 1);
    assert_eq!(
        zk.create("/a/denied", "", &CreateOptions::default()).await,
        Err(Error::Node {
            code: ErrorCode::NoAuth,
            path: "/a/denied".into()
        })
    );
    assert_eq!(
        zk.create("/bad-acl", "", &CreateOptions::default().acl(vec![]))
            .await,
        Err(Error::Node {
            code: ErrorCode::InvalidAcl,
            path: "/bad-acl".into()
        })
    );
    zk.close().await;
    assert_eq!(zk.status(), Status::Closed);
    assert_eq!(zk.exists("/a").await, Err(Error::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_of_every_kind() {
    let server = TestServer::start().unwrap();
    let zk = client(&server).await;
    let other = client(&server).await;

    // exists on a missing node, then create: fires NodeCreated
    let (none, created) = zk.exists_watch("/w").await.unwrap();
    assert!(none.is_none());
    other
        .create("/w", "0", &CreateOptions::default())
        .await
        .unwrap();
    let ev = within("exists watch", created).await.unwrap();
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (EventType::NodeCreated, "/w")
    );

    // two registrants on the same path get the same notification
    let (_, w1) = zk.get_data_watch("/w").await.unwrap();
    let (_, w2) = zk.get_data_watch("/w").await.unwrap();
    let (_, children) = zk.get_children_watch("/w").await.unwrap();
    let mut persistent = zk.add_watch("/w", AddWatchMode::Persistent).await.unwrap();
    let mut recursive = zk
        .add_watch("/", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    other.set_data("/w", "1", None).await.unwrap();
    assert_eq!(
        within("w1", w1).await.unwrap().event_type,
        EventType::NodeDataChanged
    );
    assert_eq!(
        within("w2", w2).await.unwrap().event_type,
        EventType::NodeDataChanged
    );
    assert_eq!(
        within("persistent", persistent.next())
            .await
            .unwrap()
            .event_type,
        EventType::NodeDataChanged
    );
    assert_eq!(
        within("recursive", recursive.next()).await.unwrap().path,
        "/w"
    );

    other
        .create("/w/c", "", &CreateOptions::default())
        .await
        .unwrap();
    assert_eq!(
        within("child", children).await.unwrap().event_type,
        EventType::NodeChildrenChanged
    );
    assert_eq!(
        within("persistent child", persistent.next())
            .await
            .unwrap()
            .event_type,
        EventType::NodeChildrenChanged
    );
    let ev = within("recursive create", recursive.next()).await.unwrap();
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (EventType::NodeCreated, "/w/c")
    );

    // persistent watches stay; removing them ends the stream
    other.set_data("/w", "2", None).await.unwrap();
    assert_eq!(
        within("persistent again", persistent.next())
            .await
            .unwrap()
            .event_type,
        EventType::NodeDataChanged
    );
    assert_eq!(
        within("recursive again", recursive.next())
            .await
            .unwrap()
            .event_type,
        EventType::NodeDataChanged
    );
    zk.remove_watches("/w", WatcherType::Any).await.unwrap();
    let removed = within("removed event", persistent.next()).await.unwrap();
    assert_eq!(removed.event_type, EventType::PersistentWatchRemoved);
    assert_eq!(within("stream end", persistent.next()).await, None);

    // getData with a watch on a missing node sets none: the call fails, no watch left
    assert_eq!(
        zk.get_data_watch("/missing").await.err(),
        Some(Error::Node {
            code: ErrorCode::NoNode,
            path: "/missing".into()
        })
    );
    // a deleted node fires data and child watches once
    let (_, deleted) = zk.get_data_watch("/w/c").await.unwrap();
    other.delete("/w/c", None).await.unwrap();
    assert_eq!(
        within("deleted", deleted).await.unwrap().event_type,
        EventType::NodeDeleted
    );
    // a dropped watch future is harmless
    let (_, dropped) = zk.get_data_watch("/w").await.unwrap();
    drop(dropped);
    other.set_data("/w", "3", None).await.unwrap();
    assert!(zk.exists("/w").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_within_the_timeout_keeps_the_session_and_rearms_watches() {
    let mut server = TestServer::start().unwrap();
    let zk = connect(
        &server.connect_string(),
        Options::default().session_timeout(Duration::from_secs(20)),
    )
    .await
    .unwrap();
    let id = zk.session_id();
    zk.create("/eph", "", &CreateOptions::mode(CreateMode::Ephemeral))
        .await
        .unwrap();
    zk.create("/watched", "0", &CreateOptions::default())
        .await
        .unwrap();
    let (_, changed) = zk.get_data_watch("/watched").await.unwrap();
    let mut states = zk.status_stream();

    server.kill().unwrap();
    within("suspended", states.wait_for(|s| *s == Status::Suspended))
        .await
        .unwrap();
    // The change happens while we are disconnected (another client after the restart).
    server.restart().unwrap();
    {
        let mut raw = RawClient::connect(server.addr(), 6000).unwrap();
        let set = Request::SetData(SetDataRequest {
            path: "/watched".into(),
            data: Bytes::from_static(b"1"),
            version: -1,
        });
        assert_eq!(raw.call(&set).unwrap().0.err, 0);
    }
    within(
        "reconnected",
        states.wait_for(|s| matches!(s, Status::Connected { .. })),
    )
    .await
    .unwrap();
    assert_eq!(zk.session_id(), id, "same session");
    assert!(
        zk.exists("/eph").await.unwrap().is_some(),
        "ephemeral survived"
    );
    let ev = within("re-armed watch", changed).await.unwrap();
    assert_eq!(ev.event_type, EventType::NodeDataChanged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_is_reported_and_a_new_session_can_start() {
    let server = TestServer::start().unwrap();
    let zk = client(&server).await;
    zk.create("/gone", "", &CreateOptions::mode(CreateMode::Ephemeral))
        .await
        .unwrap();
    let mut states = zk.status_stream();
    // Another connection takes the session over and closes it. Our client fights back
    // (re-attaching closes the thief's connection), so try until the close lands.
    let id = zk.session_id();
    let passwd = Bytes::from(zk.session_password());
    let mut closed = false;
    for _ in 0..20 {
        let req = ConnectRequest {
            timeout_ms: 6000,
            session_id: id,
            passwd: passwd.clone(),
            ..Default::default()
        };
        if let Ok(mut thief) = RawClient::handshake(server.addr(), req) {
            if thief.session.is_expired() {
                closed = true;
                break;
            }
            assert_eq!(thief.session.session_id, id);
            let _ = thief.call(&Request::CloseSession);
        }
        if tokio::time::timeout(
            Duration::from_millis(500),
            states.wait_for(|s| matches!(*s, Status::Expired { .. })),
        )
        .await
        .is_ok()
        {
            closed = true;
            break;
        }
    }
    assert!(
        closed,
        "could not close the session from a second connection"
    );
    // The same client goes on with a new session by itself (as Curator and kazoo do).
    let renewed = within(
        "a new session",
        states.wait_for(|s| matches!(s, Status::Connected { .. })),
    )
    .await
    .unwrap();
    assert!(
        matches!(renewed, Status::Connected { session_id, .. } if session_id != id),
        "{renewed:?}"
    );
    assert_ne!(zk.session_id(), id);
    assert_eq!(
        zk.exists("/gone").await.unwrap(),
        None,
        "ephemeral went with the old session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_makes_the_client_give_the_session_up() {
    let server = TestServer::start().unwrap();
    let zk = connect(
        &server.connect_string(),
        Options::default()
            .session_timeout(Duration::from_secs(2))
            .renew_on_expiry(false),
    )
    .await
    .unwrap();
    let mut states = zk.status_stream();
    server.pause().unwrap();
    let pending = zk.get_data("/");
    let (result, _) = tokio::join!(pending, async {
        within(
            "expired estimate",
            states.wait_for(|s| matches!(*s, Status::Expired { .. })),
        )
        .await
        .unwrap();
    });
    server.resume().unwrap();
    assert_eq!(result, Err(Error::ConnectionLoss));
    assert_eq!(zk.status(), Status::Expired { renewing: false });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_never_reach_the_server() {
    let server = TestServer::start().unwrap();
    let zk = client(&server).await;
    zk.exists("/").await.unwrap();
    let before = server.mntr_value("zk_packets_received").unwrap();
    assert!(matches!(
        zk.create("/a//b", "", &CreateOptions::default()).await,
        Err(Error::InvalidPath { .. })
    ));
    assert!(matches!(
        zk.get_data("relative").await,
        Err(Error::InvalidPath { .. })
    ));
    assert!(matches!(
        zk.set_data("/x", vec![0u8; 2 << 20], None).await,
        Err(Error::TooLarge(_))
    ));
    let after = server.mntr_value("zk_packets_received").unwrap();
    assert!(
        after - before <= 2,
        "only the mntr probe itself and maybe a ping: {before} -> {after}"
    );
    zk.exists("/").await.unwrap();
}

/// A fake server: answers the handshake, then misbehaves on the first request.
async fn misbehaving_server(mode: &'static str) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await; // ConnectRequest
                let mut hello = bytes::BytesMut::new();
                encode_connect_response(
                    &mut hello,
                    &ConnectResponse {
                        timeout_ms: 6000,
                        session_id: 7,
                        passwd: Bytes::from_static(&[1; 16]),
                        ..Default::default()
                    },
                );
                let _ = s.write_all(&hello).await;
                let _ = s.read(&mut buf).await; // the request
                let _ = match mode {
                    "garbage" => s.write_all(b"\x00\x00\x00\x10this is not a reply!").await,
                    "half" => s.write_all(&[0, 0, 0, 90, 0, 0, 0, 1, 0]).await,
                    _ => s.write_all(&[0x7f, 0xff, 0xff, 0xff]).await,
                };
                tokio::time::sleep(Duration::from_millis(50)).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_server_is_connection_loss_not_a_hang() {
    for mode in ["garbage", "half", "huge"] {
        let addr = misbehaving_server(mode).await;
        let zk = connect(
            &addr.to_string(),
            Options::default().session_timeout(Duration::from_secs(6)),
        )
        .await
        .unwrap();
        let result = within(mode, zk.get_data("/x")).await;
        assert_eq!(result, Err(Error::ConnectionLoss), "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_failover_keeps_the_session() {
    let mut ensemble = TestEnsemble::start().unwrap();
    let zk = connect(
        &ensemble.connect_string(),
        Options::default().session_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    let id = zk.session_id();
    zk.create("/ens-eph", "", &CreateOptions::mode(CreateMode::Ephemeral))
        .await
        .unwrap();
    let sid = format!("sid=0x{id:x}");
    let on = (0..3)
        .find(|&i| {
            ensemble
                .four_letter(i, "cons")
                .unwrap_or_default()
                .contains(&sid)
        })
        .expect("our session is on one server");
    let mut states = zk.status_stream();
    ensemble.kill(on).unwrap();
    within("suspended", states.wait_for(|s| *s == Status::Suspended))
        .await
        .unwrap();
    within(
        "reconnected",
        states.wait_for(|s| matches!(s, Status::Connected { .. })),
    )
    .await
    .unwrap();
    assert_eq!(zk.session_id(), id);
    assert!(zk.exists("/ens-eph").await.unwrap().is_some());
    let now_on = (0..3).filter(|&i| i != on).find(|&i| {
        ensemble
            .four_letter(i, "cons")
            .unwrap_or_default()
            .contains(&sid)
    });
    assert!(now_on.is_some(), "moved to a surviving server");
}
