//! The blocking adapter against a real ZooKeeper 3.8.

use std::time::Duration;

use crate::client;
use bytes::Bytes;
use zk_recipes::client::ops::digest_id;
use zk_recipes::proto::*;
use zk_recipes_blocking::{connect, CreateOptions, Error, Options, Status};
use zk_recipes_testing::TestServer;

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn every_raw_operation() {
    let server = TestServer::start().unwrap();
    let zk = client(&server);
    assert_eq!(
        zk.create("/a", "one", &CreateOptions::default()).unwrap(),
        "/a"
    );
    assert_eq!(
        zk.create2("/a/b", Bytes::new(), &CreateOptions::default())
            .unwrap()
            .0,
        "/a/b"
    );
    assert_eq!(
        zk.create(
            "/a/s-",
            "",
            &CreateOptions::mode(CreateMode::PersistentSequential)
        )
        .unwrap(),
        "/a/s-0000000001"
    );
    assert_eq!(
        zk.create("/a/e", "", &CreateOptions::mode(CreateMode::Ephemeral))
            .unwrap(),
        "/a/e"
    );
    assert_eq!(
        zk.create("/c", "", &CreateOptions::mode(CreateMode::Container))
            .unwrap(),
        "/c"
    );
    let ttl =
        CreateOptions::mode(CreateMode::PersistentSequentialWithTtl).ttl(Duration::from_secs(30));
    let t = zk.create("/t-", "", &ttl).unwrap();
    assert!(t.starts_with("/t-") && t.len() == 13, "{t}");
    assert_eq!(
        zk.get_data("/none").unwrap_err().to_string(),
        "ZooKeeper error on /none: node does not exist (-101)"
    );
    assert_eq!(zk.exists("/none").unwrap(), None);
    let (data, stat) = zk.get_data("/a").unwrap();
    assert_eq!((&data[..], stat.num_children), (&b"one"[..], 3));
    assert_eq!(zk.set_data("/a", "two", Some(0)).unwrap().version, 1);
    assert_eq!(
        zk.set_data("/a", "x", Some(0)),
        Err(Error::Node {
            code: ErrorCode::BadVersion,
            path: "/a".into()
        })
    );
    assert_eq!(zk.get_children("/a").unwrap().len(), 3);
    assert_eq!(zk.get_children2("/a").unwrap().1.num_children, 3);
    assert!(zk.get_all_children_number("/").unwrap() >= 6);
    assert_eq!(zk.get_ephemerals("/a").unwrap(), vec!["/a/e".to_string()]);
    assert_eq!(zk.sync("/a").unwrap(), "/a");
    zk.delete("/a/b", None).unwrap();
    let failed = zk
        .multi(vec![
            MultiOp::Delete(DeleteRequest {
                path: "/a/s-0000000001".into(),
                version: -1,
            }),
            MultiOp::Delete(DeleteRequest {
                path: "/missing".into(),
                version: -1,
            }),
        ])
        .unwrap();
    assert_eq!(
        failed,
        vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::NoNode)
        ]
    );
    assert!(
        zk.exists("/a/s-0000000001").unwrap().is_some(),
        "multi rolled back"
    );
    let reads = zk
        .multi_read(vec![ReadOp::GetChildren(PathWatch {
            path: "/a".into(),
            watch: false,
        })])
        .unwrap();
    assert!(matches!(&reads[0], MultiResult::GetChildren(c) if c.len() == 2));
    zk.create(
        "/private",
        "p",
        &CreateOptions::default().acl(vec![Acl::new(
            perms::ALL,
            "digest",
            &digest_id("bob", "pw"),
        )]),
    )
    .unwrap();
    assert_eq!(
        zk.get_data("/private"),
        Err(Error::Node {
            code: ErrorCode::NoAuth,
            path: "/private".into()
        })
    );
    zk.add_auth("digest", b"bob:pw").unwrap();
    assert_eq!(&zk.get_data("/private").unwrap().0[..], b"p");
    assert!(zk.who_am_i().unwrap().iter().any(|c| c.user == "bob"));
    assert_eq!(zk.get_acl("/private").unwrap().0[0].id.scheme, "digest");
    zk.set_acl("/private", Acl::open_unsafe(), None).unwrap();
    assert!(matches!(zk.exists("bad"), Err(Error::InvalidPath { .. })));
    zk.close();
    assert_eq!(zk.status(), Status::Closed);
    assert_eq!(zk.exists("/a"), Err(Error::Closed));
}

#[test]
fn watches_arrive_on_channels() {
    let server = TestServer::start().unwrap();
    let zk = client(&server);
    let other = client(&server);
    let (_, created) = zk.exists_watch("/w").unwrap();
    let mut stream = zk.add_watch("/w", AddWatchMode::Persistent).unwrap();
    other.create("/w", "", &CreateOptions::default()).unwrap();
    assert_eq!(
        created.wait_timeout(WAIT).unwrap().event_type,
        EventType::NodeCreated
    );
    assert_eq!(
        stream.next_timeout(WAIT).unwrap().event_type,
        EventType::NodeCreated
    );
    let (_, kids) = zk.get_children_watch("/w").unwrap();
    let (_, d1) = zk.get_data_watch("/w").unwrap();
    let (_, d2) = zk.get_data_watch("/w").unwrap();
    other.create("/w/x", "", &CreateOptions::default()).unwrap();
    other.set_data("/w", "1", None).unwrap();
    assert_eq!(
        kids.wait_timeout(WAIT).unwrap().event_type,
        EventType::NodeChildrenChanged
    );
    assert_eq!(
        d1.wait_timeout(WAIT).unwrap().event_type,
        EventType::NodeDataChanged
    );
    assert_eq!(
        d2.wait_timeout(WAIT).unwrap().event_type,
        EventType::NodeDataChanged
    );
    assert_eq!(
        stream.next_timeout(WAIT).unwrap().event_type,
        EventType::NodeChildrenChanged
    );
    assert_eq!(
        stream.next_timeout(WAIT).unwrap().event_type,
        EventType::NodeDataChanged
    );
    let mut deep = zk
        .add_watch("/", AddWatchMode::PersistentRecursive)
        .unwrap();
    other.delete("/w/x", None).unwrap();
    let ev = deep.next_timeout(WAIT).unwrap();
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (EventType::NodeDeleted, "/w/x")
    );
}

#[test]
fn calls_time_out_and_restarts_are_survived() {
    let mut server = TestServer::start().unwrap();
    let zk = connect(
        &server.connect_string(),
        Options::default().session_timeout(Duration::from_secs(20)),
    )
    .unwrap();
    let id = zk.session_id();
    zk.create("/eph", "", &CreateOptions::mode(CreateMode::Ephemeral))
        .unwrap();
    server.pause().unwrap();
    let quick = zk.with_call_timeout(Duration::from_millis(300));
    assert_eq!(quick.exists("/eph"), Err(Error::Timeout));
    server.resume().unwrap();
    server.kill().unwrap();
    assert_eq!(
        zk.wait_status(WAIT, |s| s == Status::Suspended),
        Some(Status::Suspended)
    );
    server.restart().unwrap();
    assert!(matches!(
        zk.wait_status(WAIT, |s| matches!(s, Status::Connected { .. })),
        Some(Status::Connected { .. })
    ));
    assert_eq!(zk.session_id(), id);
    assert!(zk.exists("/eph").unwrap().is_some());
}
