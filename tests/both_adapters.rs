//! The same scenarios through both adapters, against a real ZooKeeper 3.8: each call
//! must mean the same thing in `zk-recipes-blocking` and `zk-recipes-tokio` (issue 10).
//! Every test runs its scenario once per adapter on one server.
// A test (or example) is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use support::Zk;
use zk_recipes::client::{Error, Status};
use zk_recipes::proto::*;
use zk_recipes::recipe::lock::{HoldState, LockChange, LostReason};
use zk_recipes::recipe::{OpId, Outbox, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes_testing::{expire_session, TestServer};

type B = zk_recipes_blocking::Client;
type T = zk_recipes_tokio::Client;

fn server() -> TestServer {
    TestServer::start().expect("a real ZooKeeper")
}

macro_rules! both {
    ($name:ident) => {
        #[test]
        fn $name() {
            let server = server();
            scenarios::$name::<B>(&server, "/blocking");
            scenarios::$name::<T>(&server, "/tokio");
        }
    };
}

both!(contention_fencing_and_timeouts);
both!(contenders_without_the_own_node_watch_take_turns);
both!(acquire_waits_as_long_as_it_takes);
both!(reentrancy_counts_per_handle_across_threads);
both!(reentry_on_a_lost_hold_fails);
both!(a_guard_dropped_on_a_plain_thread_releases);
both!(a_revocation_asked_while_waiting_reaches_the_holder);
both!(expiry_is_lost_session_expired_and_the_client_goes_on);
both!(a_closing_clients_holder_and_waiter_end_before_the_next_holder);
both!(paths_and_a_missing_chroot);
both!(counters_count_what_the_session_sent);
both!(a_recipe_defined_outside_the_core_is_hosted);

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

impl Recipe for Touch {
    type Event = Result<Bytes, Error>;
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
    fn poll_event(&mut self) -> Option<Self::Event> {
        let r = self.result.take();
        if r.is_some() {
            self.done = true;
        }
        r
    }
    fn poll_timeout(&self) -> Option<zk_recipes::time::Instant> {
        None
    }
    fn is_done(&self) -> bool {
        self.done && self.outbox.is_empty()
    }
}

mod scenarios {
    use super::*;

    fn connect<Z: Zk>(server: &TestServer) -> Z {
        Z::connect(&server.connect_string()).unwrap_or_else(|e| panic!("{}: {e}", Z::NAME))
    }

    pub fn contention_fencing_and_timeouts<Z: Zk>(server: &TestServer, root: &str) {
        let dir = format!("{root}/contention");
        let (a, b) = (connect::<Z>(server), connect::<Z>(server));
        let held = a.lock(&dir, false).unwrap();
        assert!(b.try_lock(&dir).unwrap().is_none(), "{}", Z::NAME);
        let t = Instant::now();
        assert!(b
            .lock_timeout(&dir, Duration::from_millis(300))
            .unwrap()
            .is_none());
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_millis(1500),
            "{}: acquire_timeout(300 ms) took {took:?}",
            Z::NAME
        );
        let first = held.token();
        held.release().unwrap();
        let g = b
            .lock_timeout(&dir, Duration::from_secs(5))
            .unwrap()
            .expect("free now");
        assert!(g.token() > first, "{}: fencing tokens rise", Z::NAME);
        g.release().unwrap();
        assert!(
            a.get_children(&dir).unwrap().is_empty(),
            "{}: nothing left",
            Z::NAME
        );
    }

    /// Without the own-node watch a waiter reads the grant in its blocker and takes
    /// over on the blocker's deletion alone: four sessions taking turns, each holder
    /// alone, fencing tokens rising, every attempt served, nothing left behind.
    pub fn contenders_without_the_own_node_watch_take_turns<Z: Zk>(
        server: &TestServer,
        root: &str,
    ) {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Mutex;
        let dir = format!("{root}/unwatched");
        let busy = Arc::new(AtomicBool::new(false));
        let tokens = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = connect::<Z>(server);
                let (dir, busy, tokens) = (dir.clone(), busy.clone(), tokens.clone());
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        let g = c.lock_unwatched(&dir).unwrap();
                        assert!(!busy.swap(true, Ordering::SeqCst), "two holders");
                        tokens.lock().unwrap().push(g.token());
                        std::thread::sleep(Duration::from_micros(300));
                        busy.store(false, Ordering::SeqCst);
                        g.release().unwrap();
                    }
                    c
                })
            })
            .collect();
        let clients: Vec<Z> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let tokens = tokens.lock().unwrap();
        assert_eq!(tokens.len(), 80, "{}", Z::NAME);
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "{}: fencing tokens rise from one holder to the next",
            Z::NAME
        );
        assert!(
            clients[0].get_children(&dir).unwrap().is_empty(),
            "{}: nothing left",
            Z::NAME
        );
    }

    pub fn acquire_waits_as_long_as_it_takes<Z: Zk>(server: &TestServer, root: &str) {
        // Issue 10, defect 2: blocking `acquire()` gave up at the 30 s call timeout.
        // Here the blocking client's call timeout is 1 s: the wait is longer.
        let dir = format!("{root}/waits");
        let (a, b) = (connect::<Z>(server), connect::<Z>(server));
        let held = a.lock(&dir, false).unwrap();
        let waiter = std::thread::spawn({
            let dir = dir.clone();
            move || {
                let t = Instant::now();
                let g = b.lock(&dir, false);
                (g.map(|g| g.token()), t.elapsed())
            }
        });
        std::thread::sleep(Duration::from_millis(1500));
        held.release().unwrap();
        let (token, waited) = waiter.join().unwrap();
        assert!(token.is_ok(), "{}: {token:?}", Z::NAME);
        assert!(
            waited >= Duration::from_millis(1400),
            "{}: {waited:?}",
            Z::NAME
        );
    }

    pub fn reentrancy_counts_per_handle_across_threads<Z: Zk>(server: &TestServer, root: &str) {
        // Issue 10, defect 1: in the blocking adapter thread A's guard released thread
        // B's hold on a shared re-entrant handle, and a third session acquired.
        let dir = format!("{root}/reentrant");
        let owner = connect::<Z>(server);
        let other = connect::<Z>(server);
        let handle: Arc<Box<dyn support::Reentrant>> = Arc::new(owner.reentrant(&dir));
        let g1 = handle.acquire().unwrap();
        let token = g1.token();
        let g2 = std::thread::spawn({
            let handle = handle.clone();
            move || handle.acquire().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(g2.token(), token, "{}: the same hold", Z::NAME);
        assert_eq!(handle.depth(), 2);
        // The first level goes (on another thread): the hold stays.
        std::thread::spawn(move || drop(g1)).join().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            other.try_lock(&dir).unwrap().is_none(),
            "{}: released while a level is still held",
            Z::NAME
        );
        assert_eq!(handle.depth(), 1);
        g2.release().unwrap();
        let g = other
            .lock_timeout(&dir, Duration::from_secs(5))
            .unwrap()
            .expect("free after the last level");
        g.release().unwrap();
    }

    pub fn reentry_on_a_lost_hold_fails<Z: Zk>(server: &TestServer, root: &str) {
        // Issue 10, defect 1: re-entry on a hold already lost returned Ok.
        let dir = format!("{root}/lost");
        let owner = connect::<Z>(server);
        let operator = connect::<Z>(server);
        let handle = owner.reentrant(&dir);
        let mut g = handle.acquire().unwrap();
        operator.delete(&format!("{dir}/{}", g.node())).unwrap();
        assert_eq!(
            g.changed(Duration::from_secs(5)),
            Some(LockChange::Lost(LostReason::NodeDeleted)),
            "{}",
            Z::NAME
        );
        assert!(!g.is_held());
        // Someone else takes it; our re-entry must not claim it.
        let theirs = operator.lock(&dir, false).unwrap();
        assert!(
            handle.acquire().is_err(),
            "{}: re-entry on a lost hold",
            Z::NAME
        );
        drop(g);
        theirs.release().unwrap();
        // Every guard of the lost hold is gone: a new hold starts.
        let mut g = handle.acquire().unwrap();
        assert!(g.is_held());
        g.release().unwrap();
    }

    pub fn a_guard_dropped_on_a_plain_thread_releases<Z: Zk>(server: &TestServer, root: &str) {
        // Issue 10, defect 1: tokio's guard drop called `tokio::spawn` and panicked
        // outside a runtime.
        let dir = format!("{root}/drop");
        let a = connect::<Z>(server);
        let g = a.lock(&dir, false).unwrap();
        std::thread::spawn(move || drop(g)).join().unwrap();
        let b = connect::<Z>(server);
        let g = b
            .lock_timeout(&dir, Duration::from_secs(5))
            .unwrap()
            .expect("released by the drop");
        g.release().unwrap();
    }

    pub fn a_revocation_asked_while_waiting_reaches_the_holder<Z: Zk>(
        server: &TestServer,
        root: &str,
    ) {
        // Issue 9, defect 8: a revocation written while waiting was dropped.
        let dir = format!("{root}/revoke");
        let (a, b, c) = (
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
        );
        let held = a.lock(&dir, true).unwrap();
        let waiter = std::thread::spawn({
            let dir = dir.clone();
            move || b.lock(&dir, true).unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        let theirs = loop {
            let kids = c.get_children(&dir).unwrap();
            if let Some(k) = kids.iter().find(|k| **k != held.node()) {
                break k.clone();
            }
            assert!(Instant::now() < deadline, "the waiter never queued");
            std::thread::sleep(Duration::from_millis(20));
        };
        c.revoke(&format!("{dir}/{theirs}"), None).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        held.release().unwrap();
        let mut g = waiter.join().unwrap();
        assert!(g.revocation_requested(), "{}", Z::NAME);
        assert_eq!(
            g.changed(Duration::from_secs(1)),
            Some(LockChange::RevocationRequested)
        );
        g.release().unwrap();
    }

    /// Issue 25, item 1: `close()` ends the client's lock holder (`Lost(SessionClosed)`)
    /// and its waiter (an error) before closeSession is sent: when the other client's
    /// waiter gets the lock, the closing client's guard already says it is lost.
    /// 100 of 100 runs.
    pub fn a_closing_clients_holder_and_waiter_end_before_the_next_holder<Z: Zk>(
        server: &TestServer,
        root: &str,
    ) {
        let n = Z::NAME;
        let w = connect::<Z>(server);
        for run in 0..100 {
            let dir = format!("{root}/closing-{run}");
            let (za, zb) = (connect::<Z>(server), connect::<Z>(server));
            let mut a = za.lock(&dir, false).unwrap();
            let waiter_a = std::thread::spawn({
                let za = za.clone();
                let dir = dir.clone();
                move || za.lock(&dir, false).map(|g| g.token())
            });
            let waiter_b = std::thread::spawn({
                let zb = zb.clone();
                let dir = dir.clone();
                move || zb.lock(&dir, false)
            });
            let deadline = Instant::now() + Duration::from_secs(10);
            while w.get_children(&dir).map_or(0, |c| c.len()) < 3 {
                assert!(Instant::now() < deadline, "{n} run {run}: waiters queued");
                std::thread::sleep(Duration::from_millis(1));
            }
            let closing = std::thread::spawn(move || za.close());
            let mut b = waiter_b.join().unwrap().unwrap();
            assert!(b.token() > a.token(), "{n} run {run}");
            // b holds: a must have been told already, and its waiter failed.
            assert!(!a.is_held(), "{n} run {run}: two holders after close()");
            assert_eq!(
                a.status(),
                HoldState::Lost(LostReason::SessionClosed),
                "{n} run {run}"
            );
            let waited = waiter_a.join().unwrap();
            assert!(waited.is_err(), "{n} run {run}: {waited:?}");
            closing.join().unwrap();
            assert!(b.is_held(), "{n} run {run}");
            b.release().unwrap();
            zb.close();
            w.delete(&dir).unwrap();
        }
        w.close();
    }

    /// Both adapters report the session's counters (the lock bench reads them).
    pub fn counters_count_what_the_session_sent<Z: Zk>(server: &TestServer, root: &str) {
        let zk = connect::<Z>(server);
        let before = zk.counters().unwrap();
        zk.create_all(&format!("{root}/counted"), "x").unwrap();
        assert!(zk.exists(&format!("{root}/counted")).unwrap());
        let after = zk.counters().unwrap();
        assert!(
            after.requests_sent >= before.requests_sent + 2,
            "{}: {before:?} then {after:?}",
            Z::NAME
        );
        assert!(after.bytes_received > before.bytes_received, "{}", Z::NAME);
        zk.delete_all(root).unwrap();
        zk.close();
    }

    pub fn expiry_is_lost_session_expired_and_the_client_goes_on<Z: Zk>(
        server: &TestServer,
        root: &str,
    ) {
        // Issue 9, defect 8: the guard said Lost(SessionClosed). Issue 10: the client
        // starts a new session by itself and recipes can start again.
        let dir = format!("{root}/expiry");
        let zk = connect::<Z>(server);
        let old = zk.session_id();
        let mut g = zk.lock(&dir, false).unwrap();
        let statuses = std::thread::spawn({
            let zk = zk.clone();
            move || {
                zk.wait_status(Duration::from_secs(20), |s| {
                    matches!(s, Status::Expired { renewing: true })
                })
            }
        });
        std::thread::sleep(Duration::from_millis(100));
        expire_session(server.addr(), old, &zk.session_password()).unwrap();
        // Suspended first (the connection was taken over), then Lost — for expiry.
        let lost = loop {
            match g.changed(Duration::from_secs(15)) {
                Some(LockChange::Suspended) => continue,
                other => break other,
            }
        };
        assert_eq!(
            lost,
            Some(LockChange::Lost(LostReason::SessionExpired)),
            "{}",
            Z::NAME
        );
        assert!(matches!(
            g.status(),
            HoldState::Lost(LostReason::SessionExpired)
        ));
        assert!(
            statuses.join().unwrap().is_some(),
            "{}: Expired seen",
            Z::NAME
        );
        let now = zk
            .wait_status(Duration::from_secs(15), |s| {
                matches!(s, Status::Connected { .. })
            })
            .or_else(|| Some(zk.status()))
            .unwrap();
        assert!(
            matches!(now, Status::Connected { session_id, .. } if session_id != old),
            "{}: {now:?}",
            Z::NAME
        );
        drop(g);
        let g = zk
            .lock_timeout(&dir, Duration::from_secs(5))
            .unwrap()
            .expect("a new lock on the new session");
        g.release().unwrap();
    }

    pub fn paths_and_a_missing_chroot<Z: Zk>(server: &TestServer, root: &str) {
        let zk = connect::<Z>(server);
        let p = format!("{root}/a/b/c");
        assert_eq!(zk.create_all(&p, "x").unwrap(), p);
        assert_eq!(zk.get_data(&p).unwrap(), Bytes::from_static(b"x"));
        zk.delete_all(&format!("{root}/a")).unwrap();
        assert!(!zk.exists(&format!("{root}/a")).unwrap());
        // Issue 9, defect 4: a missing chroot made the lock loop on parent creation.
        let chrooted = Z::connect(&format!(
            "{}/no-such-chroot{}",
            server.connect_string(),
            root
        ))
        .unwrap();
        let before = server.mntr_value("zk_packets_received").unwrap();
        let t = Instant::now();
        let e = chrooted.lock("/locks/job", false).err();
        assert_eq!(e, Some(Error::ChrootMissing), "{}", Z::NAME);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        let sent = server.mntr_value("zk_packets_received").unwrap() - before;
        assert!(
            sent < 30,
            "{}: {sent} requests for a missing chroot",
            Z::NAME
        );
        assert_eq!(
            chrooted.create_all("/x/y", "").err(),
            Some(Error::ChrootMissing)
        );
        chrooted.close();
    }

    pub fn a_recipe_defined_outside_the_core_is_hosted<Z: Zk>(server: &TestServer, root: &str) {
        let zk = connect::<Z>(server);
        zk.create_all(&format!("{root}/touch/x"), "").unwrap();
        let got = zk.host_first_event(
            Touch::new(&format!("{root}/touch/t")),
            Touch::start,
            Duration::from_secs(5),
        );
        assert_eq!(got, Some(Ok(Bytes::from_static(b"touched"))), "{}", Z::NAME);
    }
}

/// Issue 25, item 2: `connect` made while the server is down (a deployment that
/// starts clients and server together) keeps trying until the server is up, within
/// its connect timeout, instead of failing on the first refused connection.
#[test]
fn connect_waits_for_a_server_that_is_starting() {
    let mut server = server();
    let cs = server.connect_string();
    for name in ["blocking", "tokio"] {
        server.stop().unwrap();
        let started = Instant::now();
        let connecting =
            std::thread::spawn({
                let cs = cs.clone();
                move || {
                    let within = Duration::from_secs(30);
                    let session = Duration::from_secs(6);
                    match name {
                        "blocking" => B::connect_within(&cs, session, true, within, false)
                            .map(|z| Zk::close(&z)),
                        _ => T::connect_within(&cs, session, true, within, false)
                            .map(|z| Zk::close(&z)),
                    }
                }
            });
        std::thread::sleep(Duration::from_millis(1500));
        server.restart().unwrap();
        let r = connecting.join().unwrap();
        assert_eq!(r, Ok(()), "{name}: connect after {:?}", started.elapsed());
    }
}
