// The same scenarios through both adapters, against a real ZooKeeper 3.8: each call
// must mean the same thing in `zk-recipes-blocking` and `zk-recipes-tokio` (issue 10).
// Written once, compiled per form (see `main.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zk::{CreateOptions, Error, HoldState, LockChange, Status};
use zk_recipes::proto::*;
use zk_recipes::recipe::lock::LostReason;
use zk_recipes::recipe::{Machine, OpId, Outbox, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes_testing::{expire_session, TestServer};

#[test]
fn contention_fencing_and_timeouts() {
    let server = server();
    run(contention_fencing_and_timeouts_on(&server, "/contention"));
}

#[form]
async fn contention_fencing_and_timeouts_on(server: &TestServer, dir: &str) {
    let cs = server.connect_string();
    let (a, b) = (connect(&cs).await, connect(&cs).await);
    let held = a.lock(dir).acquire().await.unwrap();
    assert!(b.lock(dir).try_acquire().await.unwrap().is_none(), "{NAME}");
    let t = Instant::now();
    assert!(b
        .lock(dir)
        .acquire_timeout(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1500),
        "{NAME}: acquire_timeout(300 ms) took {took:?}"
    );
    let first = held.fencing_token();
    held.release().await.unwrap();
    let g = b
        .lock(dir)
        .acquire_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("free now");
    assert!(g.fencing_token() > first, "{NAME}: fencing tokens rise");
    g.release().await.unwrap();
    assert!(
        a.get_children(dir).await.unwrap().is_empty(),
        "{NAME}: nothing left"
    );
}

/// Without the own-node watch a waiter reads the grant in its blocker and takes
/// over on the blocker's deletion alone: four sessions taking turns, each holder
/// alone, fencing tokens rising, every attempt served, nothing left behind.
#[test]
fn contenders_without_the_own_node_watch_take_turns() {
    let server = server();
    run(contenders_without_the_own_node_watch_take_turns_on(&server));
}

#[form]
async fn contenders_without_the_own_node_watch_take_turns_on(server: &TestServer) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    let cs = server.connect_string();
    let dir = "/unwatched";
    let busy = Arc::new(AtomicBool::new(false));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let c = connect(&cs).await;
        let (busy, tokens) = (busy.clone(), tokens.clone());
        tasks.push(spawn(move || async move {
            for _ in 0..20 {
                let g = c
                    .lock(dir)
                    .without_own_node_watch()
                    .acquire()
                    .await
                    .unwrap();
                assert!(!busy.swap(true, Ordering::SeqCst), "two holders");
                tokens.lock().unwrap().push(g.fencing_token());
                sleep(Duration::from_micros(300)).await;
                busy.store(false, Ordering::SeqCst);
                g.release().await.unwrap();
            }
            c
        }));
    }
    let mut clients = Vec::new();
    for t in tasks {
        clients.push(t.join().await);
    }
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 80, "{NAME}");
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "{NAME}: fencing tokens rise from one holder to the next"
    );
    assert!(
        clients[0].get_children(dir).await.unwrap().is_empty(),
        "{NAME}: nothing left"
    );
}

#[test]
fn acquire_waits_as_long_as_it_takes() {
    let server = server();
    run(acquire_waits_as_long_as_it_takes_on(&server));
}

#[form]
async fn acquire_waits_as_long_as_it_takes_on(server: &TestServer) {
    // Issue 10, defect 2: blocking `acquire()` gave up at the 30 s call timeout.
    // Here the call timeout is 1 s: the wait is longer.
    let cs = server.connect_string();
    let dir = "/waits";
    let (a, b) = (connect(&cs).await, connect(&cs).await);
    let held = a.lock(dir).acquire().await.unwrap();
    let waiter = spawn(move || async move {
        let t = Instant::now();
        let g = b.lock(dir).acquire().await;
        (g.map(|g| g.fencing_token()), t.elapsed())
    });
    sleep(Duration::from_millis(1500)).await;
    held.release().await.unwrap();
    let (token, waited) = waiter.join().await;
    assert!(token.is_ok(), "{NAME}: {token:?}");
    assert!(waited >= Duration::from_millis(1400), "{NAME}: {waited:?}");
}

#[test]
fn reentrancy_counts_per_handle_across_threads() {
    let server = server();
    run(reentrancy_counts_per_handle_across_threads_on(&server));
}

#[form]
async fn reentrancy_counts_per_handle_across_threads_on(server: &TestServer) {
    // Issue 10, defect 1: in the blocking adapter thread A's guard released thread
    // B's hold on a shared re-entrant handle, and a third session acquired.
    let cs = server.connect_string();
    let dir = "/reentrant";
    let owner = connect(&cs).await;
    let other = connect(&cs).await;
    let handle = Arc::new(owner.reentrant_lock(dir));
    let g1 = handle.acquire().await.unwrap();
    let token = g1.fencing_token();
    let g2 = spawn({
        let handle = handle.clone();
        move || async move { handle.acquire().await.unwrap() }
    })
    .join()
    .await;
    assert_eq!(g2.fencing_token(), token, "{NAME}: the same hold");
    assert_eq!(handle.depth().await, 2);
    // The first level goes (on a plain thread): the hold stays.
    std::thread::spawn(move || drop(g1)).join().unwrap();
    sleep(Duration::from_millis(200)).await;
    assert!(
        other.lock(dir).try_acquire().await.unwrap().is_none(),
        "{NAME}: released while a level is still held"
    );
    assert_eq!(handle.depth().await, 1);
    g2.release().await.unwrap();
    let g = other
        .lock(dir)
        .acquire_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("free after the last level");
    g.release().await.unwrap();
}

#[test]
fn a_lost_hold_is_reported_once() {
    let server = server();
    run(a_lost_hold_is_reported_once_on(&server));
}

#[form]
async fn a_lost_hold_is_reported_once_on(server: &TestServer) {
    // Issue 41 (found by the nemesis): once `Lost` was reported, `changed_timeout`
    // said `Lost` again at once on every call instead of "nothing changed" (`None`),
    // so draining the changes (`while let Some(c) = g.changed_timeout(..)`) never ended.
    let cs = server.connect_string();
    let dir = "/lost-once";
    let owner = connect(&cs).await;
    let operator = connect(&cs).await;
    let mut g = owner.lock(dir).acquire().await.unwrap();
    operator
        .delete(&format!("{dir}/{}", g.node()), None)
        .await
        .unwrap();
    assert_eq!(
        g.changed_timeout(Duration::from_secs(5)).await,
        Some(LockChange::Lost(LostReason::NodeDeleted)),
        "{NAME}"
    );
    assert_eq!(
        g.changed_timeout(Duration::from_millis(200)).await,
        None,
        "{NAME}: Lost is reported once"
    );
    assert_eq!(
        g.changed_timeout(Duration::ZERO).await,
        None,
        "{NAME}: and not again"
    );
    assert!(matches!(g.status(), HoldState::Lost(LostReason::NodeDeleted)));
    assert!(!g.is_held());
}

#[test]
fn reentry_on_a_lost_hold_fails() {
    let server = server();
    run(reentry_on_a_lost_hold_fails_on(&server));
}

#[form]
async fn reentry_on_a_lost_hold_fails_on(server: &TestServer) {
    // Issue 10, defect 1: re-entry on a hold already lost returned Ok.
    let cs = server.connect_string();
    let dir = "/lost";
    let owner = connect(&cs).await;
    let operator = connect(&cs).await;
    let handle = owner.reentrant_lock(dir);
    let mut g = handle.acquire().await.unwrap();
    operator
        .delete(&format!("{dir}/{}", g.node()), None)
        .await
        .unwrap();
    assert_eq!(
        g.changed_timeout(Duration::from_secs(5)).await,
        Some(LockChange::Lost(LostReason::NodeDeleted)),
        "{NAME}"
    );
    assert!(!g.is_held());
    // Someone else takes it; our re-entry must not claim it.
    let theirs = operator.lock(dir).acquire().await.unwrap();
    assert!(
        handle.acquire().await.is_err(),
        "{NAME}: re-entry on a lost hold"
    );
    drop(g);
    theirs.release().await.unwrap();
    // Every guard of the lost hold is gone: a new hold starts.
    let mut g = handle.acquire().await.unwrap();
    assert!(g.is_held());
    g.release().await.unwrap();
}

#[test]
fn a_guard_dropped_on_a_plain_thread_releases() {
    let server = server();
    run(a_guard_dropped_on_a_plain_thread_releases_on(&server));
}

#[form]
async fn a_guard_dropped_on_a_plain_thread_releases_on(server: &TestServer) {
    // Issue 10, defect 1: tokio's guard drop called `tokio::spawn` and panicked
    // outside a runtime.
    let cs = server.connect_string();
    let dir = "/drop";
    let a = connect(&cs).await;
    let g = a.lock(dir).acquire().await.unwrap();
    std::thread::spawn(move || drop(g)).join().unwrap();
    let b = connect(&cs).await;
    let g = b
        .lock(dir)
        .acquire_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("released by the drop");
    g.release().await.unwrap();
}

#[test]
fn a_revocation_asked_while_waiting_reaches_the_holder() {
    let server = server();
    run(a_revocation_asked_while_waiting_reaches_the_holder_on(
        &server,
    ));
}

#[form]
async fn a_revocation_asked_while_waiting_reaches_the_holder_on(server: &TestServer) {
    // Issue 9, defect 8: a revocation written while waiting was dropped.
    let cs = server.connect_string();
    let dir = "/revoke";
    let (a, b, c) = (connect(&cs).await, connect(&cs).await, connect(&cs).await);
    let held = a.lock(dir).revocable().acquire().await.unwrap();
    let waiter = spawn(move || async move { b.lock(dir).revocable().acquire().await.unwrap() });
    let deadline = Instant::now() + Duration::from_secs(5);
    let theirs = loop {
        let kids = c.get_children(dir).await.unwrap();
        if let Some(k) = kids.iter().find(|k| **k != held.node()) {
            break k.clone();
        }
        assert!(Instant::now() < deadline, "the waiter never queued");
        sleep(Duration::from_millis(20)).await;
    };
    c.revoke(&format!("{dir}/{theirs}"), None).await.unwrap();
    sleep(Duration::from_millis(200)).await;
    held.release().await.unwrap();
    let mut g = waiter.join().await;
    assert!(g.revocation_requested(), "{NAME}");
    assert_eq!(
        g.changed_timeout(Duration::from_secs(1)).await,
        Some(LockChange::RevocationRequested)
    );
    g.release().await.unwrap();
}

/// Issue 25, item 1: `close()` ends the client's lock holder (`Lost(SessionClosed)`)
/// and its waiter (an error) before closeSession is sent: when the other client's
/// waiter gets the lock, the closing client's guard already says it is lost.
/// 100 of 100 runs.
#[test]
fn a_closing_clients_holder_and_waiter_end_before_the_next_holder() {
    let server = server();
    run(a_closing_clients_holder_and_waiter_end_before_the_next_holder_on(&server));
}

#[form]
async fn a_closing_clients_holder_and_waiter_end_before_the_next_holder_on(server: &TestServer) {
    let n = NAME;
    let cs = server.connect_string();
    let w = connect(&cs).await;
    for run in 0..100 {
        let dir = format!("/closing-{run}");
        let (za, zb) = (connect(&cs).await, connect(&cs).await);
        let mut a = za.lock(&dir).acquire().await.unwrap();
        let waiter_a = spawn({
            let za = za.clone();
            let dir = dir.clone();
            move || async move { za.lock(&dir).acquire().await.map(|g| g.fencing_token()) }
        });
        let waiter_b = spawn({
            let zb = zb.clone();
            let dir = dir.clone();
            move || async move { zb.lock(&dir).acquire().await }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while w.get_children(&dir).await.map_or(0, |c| c.len()) < 3 {
            assert!(Instant::now() < deadline, "{n} run {run}: waiters queued");
            sleep(Duration::from_millis(1)).await;
        }
        let closing = spawn(move || async move { za.close().await });
        let mut b = waiter_b.join().await.unwrap();
        assert!(b.fencing_token() > a.fencing_token(), "{n} run {run}");
        // b holds: a must have been told already, and its waiter failed.
        assert!(!a.is_held(), "{n} run {run}: two holders after close()");
        assert_eq!(
            a.status(),
            HoldState::Lost(LostReason::SessionClosed),
            "{n} run {run}"
        );
        let waited = waiter_a.join().await;
        assert!(waited.is_err(), "{n} run {run}: {waited:?}");
        closing.join().await;
        assert!(b.is_held(), "{n} run {run}");
        b.release().await.unwrap();
        zb.close().await;
        w.delete(&dir, None).await.unwrap();
    }
    w.close().await;
}

/// Both adapters report the session's counters (the lock bench reads them).
#[test]
fn counters_count_what_the_session_sent() {
    let server = server();
    run(counters_count_what_the_session_sent_on(&server));
}

#[form]
async fn counters_count_what_the_session_sent_on(server: &TestServer) {
    let zk = connect(&server.connect_string()).await;
    let before = zk.counters().await.unwrap();
    zk.create_all("/counted/x", "x", &CreateOptions::default())
        .await
        .unwrap();
    assert!(zk.exists("/counted/x").await.unwrap().is_some());
    let after = zk.counters().await.unwrap();
    assert!(
        after.requests_sent >= before.requests_sent + 2,
        "{NAME}: {before:?} then {after:?}"
    );
    assert!(after.bytes_received > before.bytes_received, "{NAME}");
    zk.delete_all("/counted").await.unwrap();
    zk.close().await;
}

#[test]
fn expiry_is_lost_session_expired_and_the_client_goes_on() {
    let server = server();
    run(expiry_is_lost_session_expired_and_the_client_goes_on_on(
        &server,
    ));
}

#[form]
async fn expiry_is_lost_session_expired_and_the_client_goes_on_on(server: &TestServer) {
    // Issue 9, defect 8: the guard said Lost(SessionClosed). Issue 10: the client
    // starts a new session by itself and recipes can start again.
    let dir = "/expiry";
    let zk = connect(&server.connect_string()).await;
    let old = zk.session_id();
    let mut g = zk.lock(dir).acquire().await.unwrap();
    let statuses = spawn({
        let zk = zk.clone();
        move || async move {
            wait_status(&zk, Duration::from_secs(20), |s| {
                matches!(s, Status::Expired { renewing: true })
            })
            .await
        }
    });
    sleep(Duration::from_millis(100)).await;
    expire_session(server.addr(), old, &zk.session_password()).unwrap();
    // Suspended first (the connection was taken over), then Lost — for expiry.
    let lost = loop {
        match g.changed_timeout(Duration::from_secs(15)).await {
            Some(LockChange::Suspended) => continue,
            other => break other,
        }
    };
    assert_eq!(
        lost,
        Some(LockChange::Lost(LostReason::SessionExpired)),
        "{NAME}"
    );
    assert!(matches!(
        g.status(),
        HoldState::Lost(LostReason::SessionExpired)
    ));
    assert!(statuses.join().await.is_some(), "{NAME}: Expired seen");
    let now = wait_status(&zk, Duration::from_secs(15), |s| {
        matches!(s, Status::Connected { .. })
    })
    .await
    .unwrap_or_else(|| zk.status());
    assert!(
        matches!(now, Status::Connected { session_id, .. } if session_id != old),
        "{NAME}: {now:?}"
    );
    drop(g);
    let g = zk
        .lock(dir)
        .acquire_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a new lock on the new session");
    g.release().await.unwrap();
}

#[test]
fn paths_and_a_missing_chroot() {
    // Counts the requests the server received (`mntr`): a server of its own.
    let server = own_server();
    run(paths_and_a_missing_chroot_on(&server));
}

#[form]
async fn paths_and_a_missing_chroot_on(server: &TestServer) {
    let zk = connect(&server.connect_string()).await;
    let p = "/paths/a/b/c";
    assert_eq!(
        zk.create_all(p, "x", &CreateOptions::default())
            .await
            .unwrap(),
        p
    );
    assert_eq!(zk.get_data(p).await.unwrap().0, Bytes::from_static(b"x"));
    zk.delete_all("/paths/a").await.unwrap();
    assert!(zk.exists("/paths/a").await.unwrap().is_none());
    // Issue 9, defect 4: a missing chroot made the lock loop on parent creation.
    let chrooted = connect(&format!("{}/no-such-chroot/x", server.connect_string())).await;
    let before = server.mntr_value("zk_packets_received").unwrap();
    let t = Instant::now();
    let e = chrooted.lock("/locks/job").acquire().await.err();
    assert_eq!(e, Some(Error::ChrootMissing), "{NAME}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let sent = server.mntr_value("zk_packets_received").unwrap() - before;
    assert!(sent < 30, "{NAME}: {sent} requests for a missing chroot");
    assert_eq!(
        chrooted
            .create_all("/x/y", "", &CreateOptions::default())
            .await
            .err(),
        Some(Error::ChrootMissing)
    );
    chrooted.close().await;
}

#[test]
fn a_recipe_defined_outside_the_core_is_hosted() {
    let server = server();
    run(a_recipe_defined_outside_the_core_is_hosted_on(&server));
}

#[form]
async fn a_recipe_defined_outside_the_core_is_hosted_on(server: &TestServer) {
    let zk = connect(&server.connect_string()).await;
    zk.create_all("/touch/x", "", &CreateOptions::default())
        .await
        .unwrap();
    let (hold, mut events) = zk.host(Touch::new("/touch/t")).unwrap();
    hold.run(Touch::start).unwrap();
    let got = events
        .next_timeout(Duration::from_secs(5))
        .await
        .ok()
        .flatten();
    assert_eq!(got, Some(Ok(Bytes::from_static(b"touched"))), "{NAME}");
}

/// Issue 25, item 2: `connect` made while the server is down (a deployment that
/// starts clients and server together) keeps trying until the server is up, within
/// its connect timeout, instead of failing on the first refused connection.
#[test]
fn connect_waits_for_a_server_that_is_starting() {
    let mut server = own_server();
    let cs = server.connect_string();
    server.stop().unwrap();
    let started = Instant::now();
    let connecting = std::thread::spawn(move || run(async_connect_and_close(&cs)));
    std::thread::sleep(Duration::from_millis(1500));
    server.restart().unwrap();
    let r = connecting.join().unwrap();
    assert_eq!(r, Ok(()), "{NAME}: connect after {:?}", started.elapsed());
}

#[form]
async fn async_connect_and_close(cs: &str) -> Result<(), Error> {
    let options = options().connect_timeout(Duration::from_secs(30));
    let zk = zk::connect(cs, options).await?;
    zk.close().await;
    Ok(())
}

/// A recipe written outside the core crate: creates a node and reads it back.
struct Touch {
    path: String,
    outbox: Outbox<bool>,
    result: Option<Result<Bytes, Error>>,
    done: bool,
}

impl Touch {
    fn new(path: &str) -> Self {
        Touch {
            path: path.into(),
            outbox: Outbox::default(),
            result: None,
            done: false,
        }
    }

    fn start(&mut self, _now: zk_recipes::time::Instant) {
        let create = CreateRequest::new(
            &self.path,
            Bytes::from_static(b"touched"),
            Acl::open_unsafe(),
            CreateMode::Ephemeral,
        );
        self.outbox.send(false, Request::Create(create));
        self.outbox.send(
            true,
            Request::GetData(PathWatch {
                path: self.path.clone(),
                watch: false,
            }),
        );
    }
}

impl Machine for Touch {
    fn handle_reply(&mut self, _: zk_recipes::time::Instant, op: OpId, r: Result<Response, Error>) {
        match (self.outbox.take(op), r) {
            (Some(true), Ok(Response::Data { data, .. })) => self.result = Some(Ok(data)),
            (Some(_), Err(e)) => self.result = Some(Err(e)),
            _ => {}
        }
    }
    fn handle_watch(&mut self, _: zk_recipes::time::Instant, _: OpId, _: &WatchEvent) {}
    fn handle_session(&mut self, _: zk_recipes::time::Instant, change: SessionChange) {
        if matches!(change, SessionChange::Expired | SessionChange::Closed) {
            self.outbox.clear();
            self.result.get_or_insert(Err(Error::Closed));
        }
    }
    fn handle_timeout(&mut self, _: zk_recipes::time::Instant) {}
    fn handle_abandon(&mut self, _: zk_recipes::time::Instant) {
        self.done = true;
    }
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.outbox.poll()
    }
    fn poll_timeout(&self) -> Option<zk_recipes::time::Instant> {
        None
    }
    fn is_done(&self) -> bool {
        self.done && self.outbox.is_empty()
    }
}

impl Recipe for Touch {
    type Event = Result<Bytes, Error>;
    fn poll_event(&mut self) -> Option<Self::Event> {
        let r = self.result.take();
        if r.is_some() {
            self.done = true;
        }
        r
    }
}
