//! The test support itself, against a real ZooKeeper: start, talk with our codec, stop;
//! the nemesis's links (`nemesis`).

#[path = "real_server/nemesis.rs"]
mod nemesis;

use bytes::Bytes;
use zk_recipes::proto::*;
use zk_recipes_testing::{RawClient, TestServer};

#[test]
fn raw_codec_against_a_real_server() {
    let mut server = TestServer::start().expect("start ZooKeeper");
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");

    let mut c = RawClient::connect(server.addr(), 6000).unwrap();
    assert!(!c.session.is_expired());
    assert_ne!(c.session.session_id, 0);
    assert_eq!(c.session.timeout_ms, 6000);
    assert_eq!(c.session.passwd.len(), 16);

    let create = Request::Create(CreateRequest::new(
        "/raw",
        Bytes::from_static(b"hello"),
        Acl::open_unsafe(),
        CreateMode::Persistent,
    ));
    let (h, r) = c.call(&create).unwrap();
    assert_eq!(h.err, 0);
    assert_eq!(r, Some(Response::Path("/raw".into())));

    let (h, r) = c
        .call(&Request::GetData(PathWatch {
            path: "/raw".into(),
            watch: false,
        }))
        .unwrap();
    assert_eq!(h.err, 0);
    match r {
        Some(Response::Data { data, stat }) => {
            assert_eq!(&data[..], b"hello");
            assert_eq!(stat.data_length, 5);
            assert_eq!(stat.version, 0);
        }
        other => panic!("unexpected {other:?}"),
    }

    // Errors come back as codes, with no body.
    let (h, r) = c.call(&create).unwrap();
    assert_eq!(ErrorCode::from_i32(h.err), ErrorCode::NodeExists);
    assert_eq!(r, None);

    // Sequential suffixes and mntr counters.
    let seq = Request::Create(CreateRequest::new(
        "/raw/s-",
        Bytes::new(),
        Acl::open_unsafe(),
        CreateMode::EphemeralSequential,
    ));
    let (_, r) = c.call(&seq).unwrap();
    assert_eq!(r, Some(Response::Path("/raw/s-0000000000".into())));
    assert_eq!(server.mntr_value("zk_ephemerals_count").unwrap(), 1);

    // TTL nodes are enabled by the test support.
    let ttl = Request::CreateTtl(CreateTtlRequest {
        path: "/ttl".into(),
        data: Bytes::new(),
        acl: Acl::open_unsafe(),
        flags: CreateMode::PersistentWithTtl.to_i32(),
        ttl: 60_000,
    });
    assert_eq!(c.call(&ttl).unwrap().0.err, 0);

    let (h, _) = c.call(&Request::CloseSession).unwrap();
    assert_eq!(h.err, 0);
    server.stop().unwrap();
    assert!(
        server.four_letter("ruok").is_err(),
        "stopped server still answers"
    );
}

#[test]
fn restart_keeps_data_and_sessions() {
    let mut server = TestServer::start().unwrap();
    let mut c = RawClient::connect(server.addr(), 20000).unwrap();
    let eph = Request::Create(CreateRequest::new(
        "/e",
        Bytes::new(),
        Acl::open_unsafe(),
        CreateMode::Ephemeral,
    ));
    assert_eq!(c.call(&eph).unwrap().0.err, 0);
    let session = c.session.clone();
    drop(c);
    let port = server.addr().port();
    server.kill().unwrap();
    server.restart().unwrap();
    assert_eq!(server.addr().port(), port);
    let mut c = RawClient::handshake(
        server.addr(),
        ConnectRequest {
            timeout_ms: 20000,
            session_id: session.session_id,
            passwd: session.passwd.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        c.session.session_id, session.session_id,
        "session survives a restart within its timeout"
    );
    let (h, _) = c
        .call(&Request::Exists(PathWatch {
            path: "/e".into(),
            watch: false,
        }))
        .unwrap();
    assert_eq!(h.err, 0, "ephemeral still there");
}

#[test]
fn missing_jar_gives_an_install_hint() {
    // Runs in its own process env only for this check; other tests don't read it.
    let err = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--exact")
        .arg("missing_jar_child")
        .arg("--ignored")
        .arg("--nocapture")
        .env("ZOOKEEPER_JAR", "/nonexistent/zookeeper.jar")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&err.stdout);
    // A ZOOKEEPER_JAR naming no file is said as such (the install hint when nothing is
    // found at all is checked by jar.rs's unit tests, with the lookup's inputs given).
    assert!(
        out.contains("ZOOKEEPER_JAR=/nonexistent/zookeeper.jar names no file"),
        "{out}"
    );
}

#[test]
#[ignore = "run by missing_jar_gives_an_install_hint in a child process"]
fn missing_jar_child() {
    match TestServer::start() {
        Ok(_) => println!("started?!"),
        Err(e) => println!("{e}"),
    }
}

#[test]
fn three_server_ensemble_survives_losing_its_leader() {
    use std::time::Duration;
    use zk_recipes_testing::TestEnsemble;
    let mut ens = TestEnsemble::start().expect("start ensemble");
    assert_eq!(ens.connect_string().split(',').count(), 3);
    let leader = (0..3)
        .find(|&i| ens.mode(i).as_deref() == Some("leader"))
        .expect("a leader");
    let other = (leader + 1) % 3;
    let mut c = RawClient::connect(ens.addr(other), 6000).unwrap();
    let create = Request::Create(CreateRequest::new(
        "/ens",
        Bytes::new(),
        Acl::open_unsafe(),
        CreateMode::Persistent,
    ));
    assert_eq!(c.call(&create).unwrap().0.err, 0);
    drop(c);
    ens.kill(leader).unwrap();
    let rest: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    ens.wait_serving(&rest, Duration::from_secs(30)).unwrap();
    let mut c = RawClient::connect(ens.addr(rest[1]), 6000).unwrap();
    let (h, _) = c
        .call(&Request::Exists(PathWatch {
            path: "/ens".into(),
            watch: false,
        }))
        .unwrap();
    assert_eq!(h.err, 0, "data survives the leader");
    ens.restart(leader).unwrap();
    assert!(ens.mntr_value(leader, "zk_znode_count").unwrap() > 0);
}
