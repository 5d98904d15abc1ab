//! Leader election against a real ZooKeeper 3.8, every scenario once per adapter
//! (`zk-recipes-blocking` and `zk-recipes-tokio`), issue 11: one leader among many, the
//! next one elected after a close, an expiry, a resignation or a deleted node; the
//! acknowledgement and its guard against deposed leaders; the `lead()` helper; a leader
//! whose server dies in a three-server ensemble; nothing left behind.
// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use crate::support_election;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support_election::{Cand, Obs, Run, Work, Zk};
use zk_recipes::client::{Error, Status};
use zk_recipes::recipe::election::observer::{ObserverEvent, Participant};
use zk_recipes::recipe::election::{ElectionEvent, Leadership};
use zk_recipes::recipe::lock::LostReason;
use zk_recipes_testing::{expire_session, TestEnsemble, TestServer};

type B = zk_recipes_blocking::Client;
type T = zk_recipes_tokio::Client;

const LONG: Duration = Duration::from_secs(15);

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

both!(three_candidates_one_leader_the_observer_agrees);
both!(leader_session_closed_the_next_leads_with_a_higher_token);
both!(leader_session_expired_the_next_leads_and_the_old_one_rejoins_at_the_back);
both!(resign_and_requeue_hand_leadership_over);
both!(acknowledgement_guarded_against_deposed_leaders_and_withdrawn_by_them);
both!(lead_stops_the_work_when_deposed_and_requeue_hands_over);
both!(nothing_left_after_close_resign_or_drop);
both!(a_closing_clients_leader_ends_before_another_is_elected);
both!(without_rejoin_an_expired_candidacy_ends);

#[test]
fn without_rejoin_a_deleted_candidacy_ends() {
    let server = server();
    scenarios::without_rejoin_a_deleted_candidacy_ends::<B>(&server, "/blocking");
    scenarios::without_rejoin_a_deleted_candidacy_ends::<T>(&server, "/tokio");
}

#[test]
fn join_returns_once_the_node_exists() {
    let server = server();
    scenarios::join_returns_once_the_node_exists::<B>(&server, "/blocking");
    scenarios::join_returns_once_the_node_exists::<T>(&server, "/tokio");
}

#[test]
fn ensemble_leader_server_killed_never_two_leaders() {
    let mut ensemble = TestEnsemble::start().expect("a three-server ensemble");
    scenarios::ensemble_leader_server_killed::<B>(&mut ensemble, "/blocking");
    scenarios::ensemble_leader_server_killed::<T>(&mut ensemble, "/tokio");
}

/// Polls `cond` every 10 ms for at most `within`.
fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ids(parts: &[Participant]) -> Vec<&str> {
    parts.iter().map(|p| p.id.as_str()).collect()
}

/// Waits until the observer lists exactly `want` (in order); panics with what it saw.
fn participants_are(name: &str, obs: &dyn Obs, want: &[&str]) -> Vec<Participant> {
    let mut last = Vec::new();
    let ok = eventually(LONG, || {
        last = obs.participants().unwrap();
        ids(&last) == want
    });
    assert!(ok, "{name}: participants {:?}, want {want:?}", ids(&last));
    last
}

/// Waits until the observer's leader is `id`; returns it.
fn leader_is(name: &str, obs: &dyn Obs, id: &str) -> Participant {
    let mut last = None;
    let ok = eventually(LONG, || {
        last = obs.leader().unwrap();
        last.as_ref().is_some_and(|p| p.id == id)
    });
    assert!(ok, "{name}: observer's leader {last:?}, want {id}");
    last.unwrap()
}

/// Events until one `stop` accepts (or nothing for `LONG`); all of them.
fn events_until(c: &mut dyn Cand, stop: impl Fn(&ElectionEvent) -> bool) -> Vec<ElectionEvent> {
    let mut seen = Vec::new();
    while let Some(e) = c.changed(LONG) {
        let done = stop(&e);
        seen.push(e);
        if done {
            break;
        }
    }
    seen
}

/// `_c_<uuid>-latch-<10 digits>`: Curator's protected `LeaderLatch` node.
fn is_latch_node(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("_c_") else {
        return false;
    };
    let (uuid, tail) = rest.split_at(36.min(rest.len()));
    let groups: Vec<&str> = uuid.split('-').collect();
    let uuid_ok = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()));
    let seq = tail.strip_prefix("-latch-").unwrap_or("");
    uuid_ok && seq.len() == 10 && seq.chars().all(|c| c.is_ascii_digit())
}

/// Waits until `dir` has `count` candidates.
fn queued<Z: Zk>(zk: &Z, dir: &str, count: usize) {
    let mut kids = Vec::new();
    assert!(
        eventually(LONG, || {
            kids = zk.get_children(dir).unwrap_or_default();
            kids.len() == count
        }),
        "{}: {kids:?} in {dir}, want {count}",
        Z::NAME
    );
}

fn no_nodes_left<Z: Zk>(zk: &Z, dir: &str) {
    let mut kids = Vec::new();
    assert!(
        eventually(LONG, || {
            kids = zk.get_children(dir).unwrap_or_default();
            kids.is_empty()
        }),
        "{}: candidates left in {dir}: {kids:?}",
        Z::NAME
    );
    // The acknowledgement directory is a container the server removes once empty.
    let ack = format!("{dir}-leader");
    assert!(
        eventually(LONG, || zk
            .get_children(&ack)
            .unwrap_or_default()
            .is_empty()),
        "{}: acknowledgement left in {ack}",
        Z::NAME
    );
}

mod scenarios {
    use super::*;

    fn connect<Z: Zk>(server: &TestServer) -> Z {
        Z::connect(&server.connect_string()).unwrap_or_else(|e| panic!("{}: {e}", Z::NAME))
    }

    fn elected(name: &str, c: &mut dyn Cand) -> i64 {
        match c.wait_elected(LONG) {
            Ok(Some(t)) => t,
            other => panic!("{name}: not elected: {other:?}"),
        }
    }

    pub fn three_candidates_one_leader_the_observer_agrees<Z: Zk>(server: &TestServer, root: &str) {
        let n = Z::NAME;
        let dir = format!("{root}/three");
        let (za, zb, zc, w) = (
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
        );
        let mut obs = w.observer(&dir).unwrap();
        let mut a = za.candidate(&dir, "a").unwrap();
        let t = elected(n, &mut *a);
        let mut b = zb.candidate(&dir, "b").unwrap();
        let mut c = zc.candidate(&dir, "c").unwrap();
        assert_eq!(b.wait_elected(Duration::from_millis(300)), Ok(None), "{n}");
        assert_eq!(c.wait_elected(Duration::from_millis(10)), Ok(None), "{n}");
        assert!(a.is_leader() && !b.is_leader() && !c.is_leader(), "{n}");
        assert_eq!(a.leadership(), Leadership::Leading, "{n}");
        assert_eq!(b.leadership(), Leadership::Follower, "{n}");
        assert_eq!(a.fencing_token(), Some(t), "{n}");
        assert_eq!(b.fencing_token(), None, "{n}");
        assert!(
            matches!(
                a.changed(Duration::from_secs(1)),
                Some(ElectionEvent::Joined { .. })
            ),
            "{n}: in line first"
        );
        assert!(
            matches!(a.changed(Duration::from_secs(1)), Some(ElectionEvent::Elected { fencing_token, .. }) if fencing_token == t),
            "{n}"
        );

        let seen = obs.wait_for(LONG, &|e| matches!(e, ObserverEvent::Leader(Some(_))));
        let Some(ObserverEvent::Leader(Some(leader))) = seen else {
            panic!("{n}: {seen:?}")
        };
        assert_eq!((leader.id.as_str(), leader.fencing_token), ("a", t), "{n}");
        let parts = participants_are(n, &*obs, &["a", "b", "c"]);
        // The nodes are Curator's, and the observer's order is the servers' sequence order.
        let mut kids = w.get_children(&dir).unwrap();
        assert!(kids.iter().all(|k| is_latch_node(k)), "{n}: {kids:?}");
        kids.sort_by_key(|k| k.rsplit("-latch-").next().unwrap().to_string());
        assert_eq!(
            kids,
            parts.iter().map(|p| p.node.clone()).collect::<Vec<_>>(),
            "{n}"
        );
        assert_eq!(parts[0].node, leader.node, "{n}");
        assert!(
            parts[1].fencing_token > t && parts[2].fencing_token > parts[1].fencing_token,
            "{n}"
        );
        // Each node holds its participant id.
        for p in &parts {
            assert_eq!(
                w.get_data(&format!("{dir}/{}", p.node)).unwrap().as_ref(),
                p.id.as_bytes(),
                "{n}"
            );
        }
        for cand in [a, b, c] {
            cand.close().unwrap();
        }
        no_nodes_left(&w, &dir);
        for z in [za, zb, zc, w] {
            z.close();
        }
    }

    /// Issue 25, item 1: `close()` ends the leadership of the client's candidates
    /// before closeSession is sent, so no other candidate can be elected while the
    /// closing one still reports that it leads. 100 of 100 runs (it failed about half
    /// of them when the candidate heard of the close only from the server).
    pub fn a_closing_clients_leader_ends_before_another_is_elected<Z: Zk>(
        server: &TestServer,
        root: &str,
    ) {
        let n = Z::NAME;
        let w = connect::<Z>(server);
        for run in 0..100 {
            let dir = format!("{root}/closing-{run}");
            let (za, zb) = (connect::<Z>(server), connect::<Z>(server));
            let mut a = za.candidate(&dir, "a").unwrap();
            let t1 = elected(n, &mut *a);
            let mut b = zb.candidate(&dir, "b").unwrap();
            let closing = std::thread::spawn(move || za.close());
            let t2 = elected(n, &mut *b);
            assert!(t2 > t1, "{n} run {run}");
            // b leads: a must have ended already (its final event came first).
            assert!(!a.is_leader(), "{n} run {run}: two leaders after close()");
            let seen = events_until(&mut *a, ElectionEvent::is_final);
            assert!(
                seen.iter().any(|e| matches!(
                    e,
                    ElectionEvent::Lost {
                        reason: LostReason::SessionClosed,
                        ..
                    }
                )),
                "{n} run {run}: {seen:?}"
            );
            closing.join().unwrap();
            b.close().unwrap();
            zb.close();
            w.delete(&dir).unwrap();
        }
        w.close();
    }

    pub fn leader_session_closed_the_next_leads_with_a_higher_token<Z: Zk>(
        server: &TestServer,
        root: &str,
    ) {
        let n = Z::NAME;
        let dir = format!("{root}/closed");
        let (za, zb, zc, w) = (
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
        );
        let mut obs = w.observer(&dir).unwrap();
        let mut a = za.candidate(&dir, "a").unwrap();
        let t1 = elected(n, &mut *a);
        let mut b = zb.candidate(&dir, "b").unwrap();
        let mut c = zc.candidate(&dir, "c").unwrap();
        participants_are(n, &*obs, &["a", "b", "c"]);

        za.close();
        let t2 = elected(n, &mut *b);
        assert!(t2 > t1, "{n}: {t2} after {t1}");
        assert!(!c.is_leader(), "{n}: two leaders");
        assert_eq!(c.wait_elected(Duration::from_millis(300)), Ok(None), "{n}");
        // The closed one was told, and its candidate ended.
        let seen = events_until(&mut *a, ElectionEvent::is_final);
        assert!(
            seen.iter().any(|e| matches!(e, ElectionEvent::Lost { .. })),
            "{n}: {seen:?}"
        );
        assert_eq!(seen.last(), Some(&ElectionEvent::Closed), "{n}: {seen:?}");
        assert!(!a.is_leader(), "{n}");
        assert_eq!(a.leadership(), Leadership::Ended, "{n}");
        assert!(a.wait_elected(Duration::from_secs(1)).is_err(), "{n}");

        let seen = obs.wait_for(
            LONG,
            &|e| matches!(e, ObserverEvent::Leader(Some(p)) if p.id == "b"),
        );
        assert!(
            matches!(seen, Some(ObserverEvent::Leader(Some(ref p))) if p.fencing_token == t2),
            "{n}: {seen:?}"
        );
        participants_are(n, &*obs, &["b", "c"]);
        a.close().unwrap();
        b.close().unwrap();
        let t3 = elected(n, &mut *c);
        assert!(t3 > t2, "{n}");
        c.close().unwrap();
        no_nodes_left(&w, &dir);
        for z in [zb, zc, w] {
            z.close();
        }
    }

    pub fn leader_session_expired_the_next_leads_and_the_old_one_rejoins_at_the_back<Z: Zk>(
        server: &TestServer,
        root: &str,
    ) {
        let n = Z::NAME;
        let dir = format!("{root}/expired");
        let (za, zb, zc, w) = (
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
        );
        let obs = w.observer(&dir).unwrap();
        let mut a = za.candidate(&dir, "a").unwrap();
        let t1 = elected(n, &mut *a);
        assert!(matches!(
            a.changed(Duration::from_secs(1)),
            Some(ElectionEvent::Joined { .. })
        ));
        assert!(matches!(
            a.changed(Duration::from_secs(1)),
            Some(ElectionEvent::Elected { .. })
        ));
        let mut b = zb.candidate(&dir, "b").unwrap();
        let mut c = zc.candidate(&dir, "c").unwrap();
        participants_are(n, &*obs, &["a", "b", "c"]);

        let old = za.session_id();
        expire_session(server.addr(), old, &za.session_password()).unwrap();
        // Suspended (the connection was taken over) maybe, then Lost(SessionExpired).
        let seen = events_until(&mut *a, |e| !matches!(e, ElectionEvent::Suspended));
        assert_eq!(
            seen.last(),
            Some(&ElectionEvent::Lost {
                reason: LostReason::SessionExpired
            }),
            "{n}: {seen:?}"
        );
        assert!(!a.is_leader(), "{n}");
        let t2 = elected(n, &mut *b);
        assert!(t2 > t1, "{n}");
        assert!(!c.is_leader(), "{n}");

        // The client renews its session; the candidate stands again, at the back.
        let now = za
            .wait_status(LONG, |s| matches!(s, Status::Connected { .. }))
            .unwrap_or_else(|| za.status());
        assert!(
            matches!(now, Status::Connected { session_id, .. } if session_id != old),
            "{n}: {now:?}"
        );
        let parts = participants_are(n, &*obs, &["b", "c", "a"]);
        assert!(parts[2].fencing_token > t2, "{n}: a new node");
        assert_eq!(a.leadership(), Leadership::Follower, "{n}");
        assert_eq!(a.wait_elected(Duration::from_millis(200)), Ok(None), "{n}");

        // It leads again when its turn comes.
        b.close().unwrap();
        let t3 = elected(n, &mut *c);
        c.close().unwrap();
        let t4 = elected(n, &mut *a);
        assert!(t4 > t3 && t3 > t2, "{n}");
        a.close().unwrap();
        no_nodes_left(&w, &dir);
        for z in [za, zb, zc, w] {
            z.close();
        }
    }

    pub fn resign_and_requeue_hand_leadership_over<Z: Zk>(server: &TestServer, root: &str) {
        let n = Z::NAME;
        let dir = format!("{root}/resign");
        let (za, zb, w) = (
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
        );
        let obs = w.observer(&dir).unwrap();
        let mut a = za.candidate(&dir, "a").unwrap();
        let t1 = elected(n, &mut *a);
        let mut b = zb.candidate(&dir, "b").unwrap();
        participants_are(n, &*obs, &["a", "b"]);

        // Requeue: a steps back behind b.
        a.requeue().unwrap();
        assert!(!a.is_leader(), "{n}");
        let t2 = elected(n, &mut *b);
        assert!(t2 > t1, "{n}");
        participants_are(n, &*obs, &["b", "a"]);
        let seen = events_until(&mut *a, |e| *e == ElectionEvent::Resigned);
        assert_eq!(seen.last(), Some(&ElectionEvent::Resigned), "{n}: {seen:?}");
        assert_eq!(a.wait_elected(Duration::from_millis(200)), Ok(None), "{n}");

        // Resign: b leaves the line; a leads; b is no candidate until it joins again.
        b.resign().unwrap();
        assert!(!b.is_leader(), "{n}");
        let t3 = elected(n, &mut *a);
        assert!(t3 > t2, "{n}");
        participants_are(n, &*obs, &["a"]);
        assert_eq!(b.leadership(), Leadership::Follower, "{n}");
        assert_eq!(b.wait_elected(Duration::from_millis(300)), Ok(None), "{n}");
        b.join().unwrap();
        participants_are(n, &*obs, &["a", "b"]);
        assert!(!b.is_leader(), "{n}");
        // Resigning twice is harmless.
        a.resign().unwrap();
        a.resign().unwrap();
        let t4 = elected(n, &mut *b);
        assert!(t4 > t3, "{n}");
        participants_are(n, &*obs, &["b"]);
        a.close().unwrap();
        b.close().unwrap();
        no_nodes_left(&w, &dir);
        for z in [za, zb, w] {
            z.close();
        }
    }

    pub fn acknowledgement_guarded_against_deposed_leaders_and_withdrawn_by_them<Z: Zk>(
        server: &TestServer,
        root: &str,
    ) {
        let n = Z::NAME;
        let dir = format!("{root}/ack");
        let ack = format!("{dir}-leader");
        let (za, zb, w) = (
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
        );
        let mut obs = w.observer(&dir).unwrap();
        let mut a = za.candidate(&dir, "a").unwrap();
        let t1 = elected(n, &mut *a);
        let mut b = zb.candidate(&dir, "b").unwrap();
        assert_eq!(b.acknowledge(), Err(Error::NotLeader), "{n}: a follower");
        assert_eq!(a.acknowledge(), Ok(t1), "{n}");
        let seen = obs.wait_for(LONG, &|e| matches!(e, ObserverEvent::Acknowledged(_)));
        assert!(
            matches!(seen, Some(ObserverEvent::Acknowledged(ref p)) if p.id == "a" && p.fencing_token == t1),
            "{n}: {seen:?}"
        );
        assert_eq!(obs.acknowledged().unwrap().map(|p| p.id), Some("a".into()));
        assert_eq!(w.get_data(&format!("{ack}/{t1}")).unwrap().as_ref(), b"a");
        // Acknowledging again is idempotent.
        assert_eq!(a.acknowledge(), Ok(t1), "{n}");

        // An operator deletes the leader's node: it is deposed, cannot acknowledge, and
        // withdraws its acknowledgement (its name is its leadership's alone).
        let leader = leader_is(n, &*obs, "a");
        w.delete(&format!("{dir}/{}", leader.node)).unwrap();
        let seen = events_until(&mut *a, |e| matches!(e, ElectionEvent::Lost { .. }));
        assert_eq!(
            seen.last(),
            Some(&ElectionEvent::Lost {
                reason: LostReason::NodeDeleted
            }),
            "{n}: {seen:?}"
        );
        assert!(!a.is_leader(), "{n}");
        assert_eq!(a.acknowledge(), Err(Error::NotLeader), "{n}: deposed");
        let t2 = elected(n, &mut *b);
        assert!(t2 > t1, "{n}");
        leader_is(n, &*obs, "b");
        assert!(
            eventually(LONG, || !w.exists(&format!("{ack}/{t1}")).unwrap()),
            "{n}: the deposed leader withdraws its acknowledgement"
        );
        assert_eq!(
            obs.acknowledged().unwrap(),
            None,
            "{n}: b has not acknowledged"
        );
        // a stood again, at the back.
        participants_are(n, &*obs, &["b", "a"]);

        // The new leader acknowledges.
        assert_eq!(b.acknowledge(), Ok(t2), "{n}");
        assert_eq!(w.get_data(&format!("{ack}/{t2}")).unwrap().as_ref(), b"b");
        let seen = obs.wait_for(
            LONG,
            &|e| matches!(e, ObserverEvent::Acknowledged(p) if p.id == "b"),
        );
        assert!(seen.is_some(), "{n}: observer saw b acknowledge");
        assert_eq!(obs.acknowledged().unwrap().map(|p| p.id), Some("b".into()));

        // A leader that resigns withdraws its acknowledgement; the next one writes its own.
        b.resign().unwrap();
        assert!(
            w.get_children(&ack).unwrap().is_empty(),
            "{n}: withdrawn with the resignation"
        );
        let t3 = elected(n, &mut *a);
        assert_eq!(a.acknowledge(), Ok(t3), "{n}");
        assert_eq!(w.get_data(&format!("{ack}/{t3}")).unwrap().as_ref(), b"a");
        a.close().unwrap();
        b.close().unwrap();
        no_nodes_left(&w, &dir);
        for z in [za, zb, w] {
            z.close();
        }
    }

    fn work(name: &'static str, log: &Arc<Mutex<Vec<Run>>>) -> Work {
        Work {
            name,
            log: log.clone(),
            finish: Arc::new(AtomicBool::new(false)),
        }
    }

    fn logged(log: &Arc<Mutex<Vec<Run>>>, what: impl Fn(&Run) -> bool) -> Option<Run> {
        let mut found = None;
        eventually(LONG, || {
            found = log.lock().unwrap().iter().find(|r| what(r)).cloned();
            found.is_some()
        });
        found
    }

    pub fn lead_stops_the_work_when_deposed_and_requeue_hands_over<Z: Zk>(
        server: &TestServer,
        root: &str,
    ) {
        let n = Z::NAME;
        let dir = format!("{root}/lead");
        let (za, zb, w) = (
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
        );
        let obs = w.observer(&dir).unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (wa, wb) = (work("a", &log), work("b", &log));
        let spawn_lead = |mut c: Box<dyn Cand>, wk: Work| {
            std::thread::spawn(move || {
                let r = c.lead(true, wk);
                (r, c)
            })
        };
        let ta = spawn_lead(za.candidate(&dir, "a").unwrap(), wa.clone());
        let Some(Run::Started(_, t1)) = logged(&log, |r| matches!(r, Run::Started("a", _))) else {
            panic!("{n}: a never led: {:?}", log.lock().unwrap())
        };
        let tb = spawn_lead(zb.candidate(&dir, "b").unwrap(), wb.clone());
        participants_are(n, &*obs, &["a", "b"]);

        // The leader's node is deleted: its work is stopped, b leads, a queues again.
        let leader = leader_is(n, &*obs, "a");
        w.delete(&format!("{dir}/{}", leader.node)).unwrap();
        assert_eq!(
            logged(&log, |r| matches!(r, Run::Stopped("a", _))),
            Some(Run::Stopped("a", t1)),
            "{n}: {:?}",
            log.lock().unwrap()
        );
        let Some(Run::Started(_, t2)) = logged(&log, |r| matches!(r, Run::Started("b", _))) else {
            panic!("{n}: b never led: {:?}", log.lock().unwrap())
        };
        assert!(t2 > t1, "{n}");
        participants_are(n, &*obs, &["b", "a"]);

        // b's work finishes: with requeue b stands again behind a, and a leads.
        wb.finish.store(true, Ordering::SeqCst);
        let Some(Run::Started(_, t3)) =
            logged(&log, |r| matches!(r, Run::Started("a", t) if *t > t2))
        else {
            panic!("{n}: a never led again: {:?}", log.lock().unwrap())
        };
        assert!(t3 > t2, "{n}");
        participants_are(n, &*obs, &["a", "b"]);
        // b may start before a's work sees it was deposed: a deleted node gives no timing
        // guarantee (only a suspension does), so those two are in either order.
        let mut runs = log.lock().unwrap().clone();
        if runs.get(1) == Some(&Run::Started("b", t2)) {
            runs.swap(1, 2);
        }
        assert_eq!(
            runs,
            [
                Run::Started("a", t1),
                Run::Stopped("a", t1),
                Run::Started("b", t2),
                Run::Finished("b", t2),
                Run::Started("a", t3)
            ],
            "{n}"
        );

        // The sessions close: lead() returns (an error: the candidacy ended).
        // (The follower first, so that it does not lead in between.)
        zb.close();
        za.close();
        let (ra, _) = ta.join().unwrap();
        let (rb, _) = tb.join().unwrap();
        assert!(ra.is_err() && rb.is_err(), "{n}: {ra:?} {rb:?}");
        assert_eq!(
            log.lock().unwrap().last(),
            Some(&Run::Stopped("a", t3)),
            "{n}"
        );

        // Without requeue, lead() resigns and returns once the work is done.
        let zc = connect::<Z>(server);
        let mut c = zc.candidate(&dir, "c").unwrap();
        let wc = work("c", &log);
        wc.finish.store(true, Ordering::SeqCst);
        assert_eq!(c.lead(false, wc), Ok(()), "{n}");
        assert!(matches!(
            log.lock().unwrap().last(),
            Some(Run::Finished("c", _))
        ));
        assert!(!c.is_leader(), "{n}");
        assert!(w.get_children(&dir).unwrap().is_empty(), "{n}: resigned");
        c.close().unwrap();
        no_nodes_left(&w, &dir);
        zc.close();
        w.close();
    }

    pub fn without_rejoin_an_expired_candidacy_ends<Z: Zk>(server: &TestServer, root: &str) {
        let n = Z::NAME;
        let dir = format!("{root}/norejoin-expired");
        let (za, w) = (connect::<Z>(server), connect::<Z>(server));
        let mut a = za.candidate_without_rejoin(&dir, "a").unwrap();
        elected(n, &mut *a);
        expire_session(server.addr(), za.session_id(), &za.session_password()).unwrap();
        let seen = events_until(&mut *a, ElectionEvent::is_final);
        assert!(
            seen.contains(&ElectionEvent::Lost {
                reason: LostReason::SessionExpired
            }),
            "{n}: {seen:?}"
        );
        assert!(seen.last().is_some_and(|e| e.is_final()), "{n}: {seen:?}");
        assert_eq!(a.leadership(), Leadership::Ended, "{n}");
        assert!(a.wait_elected(Duration::from_secs(1)).is_err(), "{n}");
        // The client's new session does not stand again.
        za.wait_status(LONG, |s| matches!(s, Status::Connected { .. }));
        std::thread::sleep(Duration::from_millis(300));
        assert!(w.get_children(&dir).unwrap().is_empty(), "{n}");
        assert!(a.close().is_ok(), "{n}");
        za.close();
        w.close();
    }

    pub fn without_rejoin_a_deleted_candidacy_ends<Z: Zk>(server: &TestServer, root: &str) {
        // ElectionBuilder::without_rejoin: "Do not stand again by ourselves when a
        // candidacy ends (session expired, node deleted): the candidate then ends with it."
        let n = Z::NAME;
        let dir = format!("{root}/norejoin-deleted");
        let (za, w) = (connect::<Z>(server), connect::<Z>(server));
        let mut a = za.candidate_without_rejoin(&dir, "a").unwrap();
        elected(n, &mut *a);
        let kids = w.get_children(&dir).unwrap();
        w.delete(&format!("{dir}/{}", kids[0])).unwrap();
        let seen = events_until(&mut *a, |e| e.is_final());
        assert!(
            seen.contains(&ElectionEvent::Lost {
                reason: LostReason::NodeDeleted
            }),
            "{n}: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
        assert!(w.get_children(&dir).unwrap().is_empty(), "{n}: stood again");
        assert!(seen.last().is_some_and(|e| e.is_final()), "{n}: {seen:?}");
        assert_eq!(a.leadership(), Leadership::Ended, "{n}");
        assert!(a.wait_elected(Duration::from_secs(1)).is_err(), "{n}");
        assert!(a.close().is_ok(), "{n}");
        za.close();
        w.close();
    }

    pub fn join_returns_once_the_node_exists<Z: Zk>(server: &TestServer, root: &str) {
        // The builder's docs: "Stands for election: our node is created and the
        // candidate waits in line." Seen: join() returns once the create is queued, so
        // another session may list the directory without our node, and `b.join()`
        // then `c.join()` (two sessions) may queue c before b.
        let n = Z::NAME;
        let dir = format!("{root}/join");
        let (z, w) = (connect::<Z>(server), connect::<Z>(server));
        let mut missing = 0;
        for _ in 0..20 {
            let c = z.candidate(&dir, "x").unwrap();
            if w.get_children(&dir).unwrap_or_default().len() != 1 {
                missing += 1;
            }
            c.close().unwrap();
        }
        assert_eq!(
            missing, 0,
            "{n}: {missing} of 20 joins returned before the node existed"
        );
        z.close();
        w.close();
    }

    pub fn nothing_left_after_close_resign_or_drop<Z: Zk>(server: &TestServer, root: &str) {
        let n = Z::NAME;
        let dir = format!("{root}/clean");
        let (za, zb, zc, w) = (
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
            connect::<Z>(server),
        );
        let before = server.mntr_value("zk_ephemerals_count").unwrap();
        let mut a = za.candidate(&dir, "a").unwrap();
        let t = elected(n, &mut *a);
        assert_eq!(a.acknowledge(), Ok(t), "{n}");
        let b = zb.candidate(&dir, "b").unwrap();
        let c = zc.candidate(&dir, "c").unwrap();
        let mut d = zc.candidate_without_rejoin(&dir, "d").unwrap();
        queued(&w, &dir, 4);
        // Dropped without close: withdrawn all the same.
        drop(c);
        assert!(
            eventually(LONG, || w.get_children(&dir).unwrap().len() == 3),
            "{n}: a dropped candidate's node stays"
        );
        d.resign().unwrap();
        d.close().unwrap();
        assert_eq!(w.get_children(&dir).unwrap().len(), 2, "{n}");
        // The acknowledged leader closes: its node and acknowledgement go.
        a.close().unwrap();
        assert!(
            w.get_children(&format!("{dir}-leader")).unwrap().is_empty(),
            "{n}"
        );
        assert_eq!(w.get_children(&dir).unwrap().len(), 1, "{n}");
        b.close().unwrap();
        no_nodes_left(&w, &dir);
        assert!(
            eventually(LONG, || server.mntr_value("zk_ephemerals_count").unwrap()
                == before),
            "{n}: ephemerals left"
        );
        // Closing a candidate whose session is gone returns at once.
        let mut e = zb.candidate(&dir, "e").unwrap();
        elected(n, &mut *e);
        zb.close();
        let t0 = Instant::now();
        assert!(e.close().is_ok(), "{n}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{n}");
        no_nodes_left(&w, &dir);
        for z in [za, zc, w] {
            z.close();
        }
    }

    pub fn ensemble_leader_server_killed<Z: Zk>(ensemble: &mut TestEnsemble, root: &str) {
        let n = Z::NAME;
        let dir = format!("{root}/ensemble");
        let cs = ensemble.connect_string();
        let connect = || Z::connect_with(&cs, Duration::from_secs(10), true).unwrap();
        let (za, zb, zc) = (connect(), connect(), connect());
        let mut a = za.candidate(&dir, "a").unwrap();
        let t1 = elected(n, &mut *a);
        assert!(matches!(
            a.changed(Duration::from_secs(1)),
            Some(ElectionEvent::Joined { .. })
        ));
        assert!(matches!(
            a.changed(Duration::from_secs(1)),
            Some(ElectionEvent::Elected { .. })
        ));
        let cands: Vec<Arc<Mutex<Box<dyn Cand>>>> = vec![
            Arc::new(Mutex::new(a)),
            Arc::new(Mutex::new(zb.candidate(&dir, "b").unwrap())),
            Arc::new(Mutex::new(zc.candidate(&dir, "c").unwrap())),
        ];

        // The checker: all candidates' is_leader() every millisecond.
        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicUsize::new(0));
        let checker = std::thread::spawn({
            let (cands, stop, most) = (cands.clone(), stop.clone(), most.clone());
            move || {
                let mut rounds = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let mut held: Vec<_> = cands.iter().map(|c| c.lock().unwrap()).collect();
                    let leaders = held
                        .iter_mut()
                        .map(|c| c.is_leader())
                        .filter(|l| *l)
                        .count();
                    drop(held);
                    most.fetch_max(leaders, Ordering::SeqCst);
                    rounds += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                rounds
            }
        });

        let session = za.session_id();
        let sid = format!("sid=0x{session:x}");
        let on = (0..3)
            .find(|&i| {
                ensemble
                    .four_letter(i, "cons")
                    .unwrap_or_default()
                    .contains(&sid)
            })
            .expect("the leader's server");
        ensemble.kill(on).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            let e = cands[0].lock().unwrap().changed(Duration::from_millis(20));
            if let Some(e) = e {
                let done = matches!(e, ElectionEvent::Reconnected | ElectionEvent::Lost { .. });
                seen.push(e);
                if done {
                    break;
                }
            }
        }
        eprintln!("{n}: server {on} killed; the leader saw {seen:?}");
        match seen.as_slice() {
            [ElectionEvent::Suspended, ElectionEvent::Reconnected] => {
                assert!(cands[0].lock().unwrap().is_leader(), "{n}");
                assert_eq!(
                    cands[0].lock().unwrap().fencing_token(),
                    Some(t1),
                    "{n}: same leadership"
                );
                assert_eq!(za.session_id(), session, "{n}: same session");
            }
            [.., ElectionEvent::Lost { .. }] => {
                // Someone else leads, with a higher token.
                let next = cands[1..]
                    .iter()
                    .find_map(|c| c.lock().unwrap().wait_elected(LONG).ok().flatten());
                assert!(next.is_some_and(|t| t > t1), "{n}: {next:?}");
            }
            other => panic!("{n}: the leader saw {other:?}"),
        }
        // Settle, then exactly one leader.
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
        let rounds = checker.join().unwrap();
        eprintln!("{n}: the checker ran {rounds} rounds");
        assert!(rounds > 100, "{n}: the checker ran {rounds} rounds");
        assert_eq!(most.load(Ordering::SeqCst), 1, "{n}: two leaders at once");
        let leaders = cands
            .iter()
            .filter(|c| c.lock().unwrap().is_leader())
            .count();
        assert_eq!(leaders, 1, "{n}");
        for c in cands {
            let c = Arc::try_unwrap(c).ok().unwrap().into_inner().unwrap();
            c.close().unwrap();
        }
        let w = connect();
        no_nodes_left(&w, &dir);
        for z in [za, zb, zc, w] {
            z.close();
        }
        ensemble.restart(on).unwrap();
    }
}
