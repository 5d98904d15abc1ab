//! What the lock's waiting protocol relies on, checked against a real ZooKeeper 3.8.0
//! with the bare codec (no session logic): a `SetWatches2` sent mid-session under a
//! normal xid arms watches on several paths in one request and fires at once for a
//! change after its zxid; a multi's notifications come in the order of its ops; a
//! children watch on a leaf fires on its deletion and not on a write to its data.

use bytes::Bytes;
use zk_recipes::proto::*;
use zk_recipes_testing::{RawClient, TestServer};

fn create(c: &mut RawClient, path: &str, mode: CreateMode) -> i64 {
    let (h, r) = c
        .call(&Request::Create2(CreateRequest::new(
            path,
            Bytes::new(),
            Acl::open_unsafe(),
            mode,
        )))
        .unwrap();
    assert_eq!(h.err, 0, "create {path}");
    match r {
        Some(Response::PathStat { stat, .. }) => stat.czxid,
        other => panic!("{other:?}"),
    }
}

fn set_watches(c: &mut RawClient, rel: i64, data: &[&str], child: &[&str]) -> Vec<(i32, String)> {
    let req = Request::SetWatches2(SetWatches2 {
        relative_zxid: rel,
        data_watches: data.iter().map(|p| String::from(*p)).collect(),
        child_watches: child.iter().map(|p| String::from(*p)).collect(),
        ..Default::default()
    });
    let xid = c.send(&req).unwrap();
    let (h, r) = c.recv_reply(OpCode::SetWatches2).unwrap();
    assert_eq!((h.xid, h.err), (xid, 0), "answered under its own xid");
    assert_eq!(r, Some(Response::Empty));
    // Anything fired at once came before the reply.
    events(c.take_events())
}

fn events(e: Vec<WatcherEvent>) -> Vec<(i32, String)> {
    e.into_iter().map(|e| (e.event_type, e.path)).collect()
}

fn next(c: &mut RawClient) -> (i32, String) {
    let e = c.next_event().unwrap();
    (e.event_type, e.path)
}

fn quiet(c: &mut RawClient) -> bool {
    c.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let quiet = c.next_event().is_err();
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    quiet
}

const DATA_CHANGED: i32 = 3;
const DELETED: i32 = 2;

#[test]
fn set_watches_mid_session_a_multis_order_and_a_leafs_children_watch() {
    let server = TestServer::start().unwrap();
    let mut a = RawClient::connect(server.addr(), 30_000).unwrap();
    let mut b = RawClient::connect(server.addr(), 30_000).unwrap();
    create(&mut a, "/f", CreateMode::Persistent);
    create(&mut a, "/f/c", CreateMode::Ephemeral);
    let d = create(&mut a, "/f/d", CreateMode::Ephemeral);

    // One request arms a children watch on /f/c and a data watch on /f/d; nothing
    // changed after /f/d's creation, so nothing fires.
    assert_eq!(set_watches(&mut a, d, &["/f/d"], &["/f/c"]), vec![]);
    // Another session writes /f/d and deletes /f/c in one multi: the data change comes
    // first, as the ops are ordered.
    let (h, _) = b
        .call(&Request::Multi(vec![
            MultiOp::SetData(SetDataRequest {
                path: "/f/d".into(),
                data: Bytes::from_static(b"x"),
                version: 0,
            }),
            MultiOp::Delete(DeleteRequest {
                path: "/f/c".into(),
                version: -1,
            }),
        ]))
        .unwrap();
    assert_eq!(h.err, 0);
    assert_eq!(next(&mut a), (DATA_CHANGED, "/f/d".into()));
    assert_eq!(next(&mut a), (DELETED, "/f/c".into()));

    // Relative to d's creation, /f/d has changed since and /f/c is gone: both fire at
    // once, before the reply (and are not armed).
    assert_eq!(
        set_watches(&mut a, d, &["/f/d"], &["/f/c"]),
        vec![(DATA_CHANGED, "/f/d".into()), (DELETED, "/f/c".into())]
    );

    // A children watch on a leaf: a write to its data leaves it armed; its deletion
    // fires it.
    let e = create(&mut a, "/f/e", CreateMode::Ephemeral);
    assert_eq!(set_watches(&mut a, e, &[], &["/f/e"]), vec![]);
    let (h, _) = b
        .call(&Request::SetData(SetDataRequest {
            path: "/f/e".into(),
            data: Bytes::from_static(b"y"),
            version: -1,
        }))
        .unwrap();
    assert_eq!(h.err, 0);
    assert!(quiet(&mut a), "a write to its data does not fire it");
    let (h, _) = b
        .call(&Request::Delete(DeleteRequest {
            path: "/f/e".into(),
            version: -1,
        }))
        .unwrap();
    assert_eq!(h.err, 0);
    assert_eq!(next(&mut a), (DELETED, "/f/e".into()));
}
