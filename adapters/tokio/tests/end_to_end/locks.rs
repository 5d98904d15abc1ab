//! The lock family through the tokio adapter against a real ZooKeeper 3.8.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::{client, within};
use bytes::Bytes;
use zk_recipes::proto::ConnectRequest;
use zk_recipes::proto::Request;
use zk_recipes_testing::{RawClient, TestServer};
use zk_recipes_tokio::{connect, LockChange, LostReason, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_across_sessions_is_exclusive_and_fenced() {
    let server = TestServer::start().unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let zk = client(&server).await;
        let inside = inside.clone();
        let tokens = tokens.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let guard = zk.lock("/app/locks/work").acquire().await.unwrap();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                tokens.lock().unwrap().push(guard.fencing_token());
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        within("contention", t).await.unwrap();
    }
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 20);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens rise in grant order: {tokens:?}"
    );
    let zk = client(&server).await;
    assert!(
        zk.get_children("/app/locks/work").await.unwrap().is_empty(),
        "nothing left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_timeouts_and_dropped_waiters_leave_no_node() {
    let server = TestServer::start().unwrap();
    let a = client(&server).await;
    let b = client(&server).await;
    let held = a.lock("/l").acquire().await.unwrap();
    assert!(b.lock("/l").try_acquire().await.unwrap().is_none());
    assert!(b
        .lock("/l")
        .acquire_timeout(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    // A waiting acquire that is dropped removes its node.
    let waiting = tokio::spawn({
        let b = b.clone();
        async move { b.lock("/l").acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        a.get_children("/l").await.unwrap().len(),
        2,
        "holder and waiter"
    );
    waiting.abort();
    let _ = waiting.await;
    within("cleanup", async {
        while a.get_children("/l").await.unwrap().len() != 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let kids = a.get_children("/l").await.unwrap();
    assert_eq!(kids, vec![held.node().to_string()]);
    assert!(
        held.node().starts_with("_c_") && held.node().contains("-lock-"),
        "Curator's name format: {}",
        held.node()
    );
    // Dropping the guard releases.
    drop(held);
    let g = within("handover", b.lock("/l").acquire()).await.unwrap();
    g.release().await.unwrap();
    assert!(a.get_children("/l").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_expiry_hands_the_lock_on() {
    let server = TestServer::start().unwrap();
    let a = client(&server).await;
    let b = client(&server).await;
    let mut held = a.lock("/exp").acquire().await.unwrap();
    let next = tokio::spawn({
        let b = b.clone();
        async move { b.lock("/exp").acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // End a's session from outside.
    let req = ConnectRequest {
        timeout_ms: 6000,
        session_id: a.session_id(),
        passwd: Bytes::from(a.session_password()),
        ..Default::default()
    };
    for _ in 0..20 {
        if let Ok(mut thief) = RawClient::handshake(server.addr(), req.clone()) {
            let _ = thief.call(&Request::CloseSession);
        }
        if b.exists(&format!("/exp/{}", held.node()))
            .await
            .unwrap()
            .is_none()
        {
            break;
        }
    }
    let change = within("lost", held.changed()).await;
    assert!(
        matches!(
            change,
            LockChange::Lost(LostReason::SessionExpired) | LockChange::Suspended
        ),
        "{change:?}"
    );
    let guard = within("next holder", next).await.unwrap().unwrap();
    assert!(guard.fencing_token() > held.fencing_token());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_writers_exclude() {
    let server = TestServer::start().unwrap();
    let a = client(&server).await;
    let b = client(&server).await;
    let r1 = a.read_lock("/rw").acquire().await.unwrap();
    let r2 = within("second reader", b.read_lock("/rw").acquire())
        .await
        .unwrap();
    assert!(
        b.write_lock("/rw").try_acquire().await.unwrap().is_none(),
        "readers hold"
    );
    let writer = tokio::spawn({
        let b = b.clone();
        async move { b.write_lock("/rw").acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A reader arriving after a waiting writer queues behind it.
    assert!(a.read_lock("/rw").try_acquire().await.unwrap().is_none());
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    let w = within("writer", writer).await.unwrap().unwrap();
    assert!(w.node().contains("__WRIT__"));
    assert!(
        a.read_lock("/rw").try_acquire().await.unwrap().is_none(),
        "the writer excludes readers"
    );
    w.release().await.unwrap();
    assert!(a.read_lock("/rw").try_acquire().await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_is_asked_then_forced() {
    let server = TestServer::start().unwrap();
    let a = client(&server).await;
    let b = client(&server).await;
    let mut held = a.lock("/rev").revocable().acquire().await.unwrap();
    let node = format!("/rev/{}", held.node());
    b.revoke(&node, None).await.unwrap();
    assert_eq!(
        within("revocation", held.changed()).await,
        LockChange::RevocationRequested
    );
    b.revoke(&node, Some(Duration::from_millis(100)))
        .await
        .unwrap();
    assert_eq!(
        within("forced", held.changed()).await,
        LockChange::Lost(LostReason::NodeDeleted)
    );
    assert!(b.lock("/rev").try_acquire().await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_reentrant_acquire_leaves_no_hold_behind() {
    let server = TestServer::start().unwrap();
    let a = client(&server).await;
    let b = client(&server).await;
    let held = b.lock("/re-cancel").acquire().await.unwrap();
    let m = a.reentrant_lock("/re-cancel");
    // The caller gives up while it waits (a timeout, a select!): the future is dropped.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), m.acquire())
            .await
            .is_err(),
        "b holds: the acquire waits"
    );
    held.release().await.unwrap();
    // Nobody holds now: the dropped attempt must not have taken the lock unseen.
    let g = within(
        "b again",
        b.lock("/re-cancel").acquire_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap();
    assert!(
        g.is_some(),
        "the cancelled attempt took the lock with no guard"
    );
    assert_eq!(m.depth().await, 0);
    assert_eq!(a.get_children("/re-cancel").await.unwrap().len(), 1);
    g.unwrap().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_is_explicit() {
    let server = TestServer::start().unwrap();
    let a = client(&server).await;
    let b = client(&server).await;
    let m = a.reentrant_lock("/re");
    let outer = m.acquire().await.unwrap();
    let inner = m.acquire().await.unwrap();
    assert_eq!(m.depth().await, 2);
    assert_eq!(outer.fencing_token(), inner.fencing_token());
    assert_eq!(
        a.get_children("/re").await.unwrap().len(),
        1,
        "one node for both levels"
    );
    drop(inner);
    assert!(
        b.lock("/re").try_acquire().await.unwrap().is_none(),
        "still held by the outer level"
    );
    drop(outer);
    let g = within("after the last level", b.lock("/re").acquire())
        .await
        .unwrap();
    g.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_holder_server_killed_mid_hold() {
    use zk_recipes_testing::TestEnsemble;
    let mut ensemble = TestEnsemble::start().unwrap();
    let opts = || Options::default().session_timeout(Duration::from_secs(10));
    let holder = connect(&ensemble.connect_string(), opts()).await.unwrap();
    let other = connect(&ensemble.connect_string(), opts()).await.unwrap();
    let mut guard = holder.lock("/ens/lock").acquire().await.unwrap();
    let token = guard.fencing_token();
    let sid = format!("sid=0x{:x}", holder.session_id());
    let on = (0..3)
        .find(|&i| {
            ensemble
                .four_letter(i, "cons")
                .unwrap_or_default()
                .contains(&sid)
        })
        .expect("holder's server");
    ensemble.kill(on).unwrap();
    assert_eq!(
        within("suspended", guard.changed()).await,
        LockChange::Suspended
    );
    assert_eq!(
        within("reconnected", guard.changed()).await,
        LockChange::Reconnected
    );
    assert_eq!(guard.fencing_token(), token, "same hold, same token");
    assert!(
        other
            .lock("/ens/lock")
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "still exclusive"
    );
    guard.release().await.unwrap();
    let next = within("next", other.lock("/ens/lock").acquire())
        .await
        .unwrap();
    assert!(next.fencing_token() > token);
}
