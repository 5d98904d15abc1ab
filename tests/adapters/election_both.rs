// Leader election against a real ZooKeeper 3.8, in each form (issue 11): one leader
// among many, the next one elected after a close, an expiry, a resignation or a
// deleted node; the acknowledgement and its guard against deposed leaders; the
// `lead()` helper; a leader whose server dies in a three-server ensemble; nothing left
// behind.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::only::{Run, Work};
use zk::{ElectionEvent, Error, Leadership, LostReason, ObserverEvent, Participant, Status};
use zk_recipes_testing::{expire_session, TestEnsemble, TestServer};

const LONG: Duration = Duration::from_secs(15);
/// How often `eventually!` looks.
const TICK: Duration = Duration::from_millis(10);

/// Whether `$cond` holds within `$within`, looked at every `$pause` (written
/// `sleep(TICK).await`, so that the blocking form loses the `.await`).
macro_rules! eventually {
    ($within:expr, $cond:expr, $pause:expr) => {{
        let deadline = Instant::now() + $within;
        loop {
            if $cond {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            $pause;
        }
    }};
}

/// A client with 6 s sessions renewed on expiry (the election scenarios' options:
/// a 5 s call timeout).
#[form]
async fn connect(cs: &str) -> zk::Client {
    econnect(cs, Duration::from_secs(6)).await
}

/// A client with sessions of `session`, renewed on expiry.
#[form]
async fn econnect(cs: &str, session: Duration) -> zk::Client {
    zk::connect(
        cs,
        zk::Options::default()
            .session_timeout(session)
            .renew_on_expiry(true)
            .connect_timeout(Duration::from_secs(10))
            .call_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap_or_else(|e| panic!("{NAME}: {e}"))
}

#[form]
async fn elected(c: &mut zk::Candidate) -> i64 {
    match c.elected_timeout(LONG).await {
        Ok(Some(t)) => t,
        other => panic!("{NAME}: not elected: {other:?}"),
    }
}

fn ids(parts: &[Participant]) -> Vec<&str> {
    parts.iter().map(|p| p.id.as_str()).collect()
}

/// Waits until the observer lists exactly `want` (in order); panics with what it saw.
#[form]
async fn participants_are(obs: &zk::ElectionObserver, want: &[&str]) -> Vec<Participant> {
    let mut last;
    let ok = eventually!(
        LONG,
        {
            last = obs.participants().await.unwrap();
            ids(&last) == want
        },
        sleep(TICK).await
    );
    assert!(ok, "{NAME}: participants {:?}, want {want:?}", ids(&last));
    last
}

/// Waits until the observer's leader is `id`; returns it.
#[form]
async fn leader_is(obs: &zk::ElectionObserver, id: &str) -> Participant {
    let mut last;
    let ok = eventually!(
        LONG,
        {
            last = obs.leader().await.unwrap();
            last.as_ref().is_some_and(|p| p.id == id)
        },
        sleep(TICK).await
    );
    assert!(ok, "{NAME}: observer's leader {last:?}, want {id}");
    last.unwrap()
}

/// Events until one `stop` accepts (or nothing for `LONG`); all of them.
#[form]
async fn events_until(
    c: &mut zk::Candidate,
    stop: impl Fn(&ElectionEvent) -> bool,
) -> Vec<ElectionEvent> {
    let mut seen = Vec::new();
    while let Some(e) = c.changed_timeout(LONG).await {
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
#[form]
async fn queued(zk: &zk::Client, dir: &str, count: usize) {
    let mut kids;
    let ok = eventually!(
        LONG,
        {
            kids = zk.get_children(dir).await.unwrap_or_default();
            kids.len() == count
        },
        sleep(TICK).await
    );
    assert!(ok, "{NAME}: {kids:?} in {dir}, want {count}");
}

#[form]
async fn no_nodes_left(zk: &zk::Client, dir: &str) {
    let mut kids;
    let ok = eventually!(
        LONG,
        {
            kids = zk.get_children(dir).await.unwrap_or_default();
            kids.is_empty()
        },
        sleep(TICK).await
    );
    assert!(ok, "{NAME}: candidates left in {dir}: {kids:?}");
    // The acknowledgement directory is a container the server removes once empty.
    let ack = format!("{dir}-leader");
    let ok = eventually!(
        LONG,
        zk.get_children(&ack).await.unwrap_or_default().is_empty(),
        sleep(TICK).await
    );
    assert!(ok, "{NAME}: acknowledgement left in {ack}");
}

#[test]
fn three_candidates_one_leader_the_observer_agrees() {
    run(three_candidates_one_leader_the_observer_agrees_on(&server()));
}

#[form]
async fn three_candidates_one_leader_the_observer_agrees_on(server: &TestServer) {
    let root = "";
    let n = NAME;
    let dir = format!("{root}/three");
    let (za, zb, zc, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let mut obs = w.election_observer(&dir).await.unwrap();
    let mut a = za.election(&dir, "a").join().await.unwrap();
    let t = elected(&mut a).await;
    let mut b = zb.election(&dir, "b").join().await.unwrap();
    let mut c = zc.election(&dir, "c").join().await.unwrap();
    assert_eq!(
        b.elected_timeout(Duration::from_millis(300)).await,
        Ok(None),
        "{n}"
    );
    assert_eq!(
        c.elected_timeout(Duration::from_millis(10)).await,
        Ok(None),
        "{n}"
    );
    assert!(a.is_leader() && !b.is_leader() && !c.is_leader(), "{n}");
    assert_eq!(a.leadership(), Leadership::Leading, "{n}");
    assert_eq!(b.leadership(), Leadership::Follower, "{n}");
    assert_eq!(a.fencing_token(), Some(t), "{n}");
    assert_eq!(b.fencing_token(), None, "{n}");
    assert!(
        matches!(
            a.changed_timeout(Duration::from_secs(1)).await,
            Some(ElectionEvent::Joined { .. })
        ),
        "{n}: in line first"
    );
    assert!(
        matches!(a.changed_timeout(Duration::from_secs(1)).await, Some(ElectionEvent::Elected { fencing_token, .. }) if fencing_token == t),
        "{n}"
    );

    let seen = obs
        .wait_for_timeout(|e| matches!(e, ObserverEvent::Leader(Some(_))), LONG)
        .await;
    let Some(ObserverEvent::Leader(Some(leader))) = seen else {
        panic!("{n}: {seen:?}")
    };
    assert_eq!((leader.id.as_str(), leader.fencing_token), ("a", t), "{n}");
    let parts = participants_are(&obs, &["a", "b", "c"]).await;
    // The nodes are Curator's, and the observer's order is the servers' sequence order.
    let mut kids = w.get_children(&dir).await.unwrap();
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
            w.get_data(&format!("{dir}/{}", p.node))
                .await
                .unwrap()
                .0
                .as_ref(),
            p.id.as_bytes(),
            "{n}"
        );
    }
    for cand in [a, b, c] {
        cand.close().await.unwrap();
    }
    no_nodes_left(&w, &dir).await;
    for z in [za, zb, zc, w] {
        z.close().await;
    }
}

/// Issue 25, item 1: `close()` ends the leadership of the client's candidates
/// before closeSession is sent, so no other candidate can be elected while the
/// closing one still reports that it leads. 100 of 100 runs (it failed about half
/// of them when the candidate heard of the close only from the server).
#[test]
fn a_closing_clients_leader_ends_before_another_is_elected() {
    run(a_closing_clients_leader_ends_before_another_is_elected_on(
        &server(),
    ));
}

#[form]
async fn a_closing_clients_leader_ends_before_another_is_elected_on(server: &TestServer) {
    let root = "";
    let n = NAME;
    let w = connect(&server.connect_string()).await;
    for run in 0..100 {
        let dir = format!("{root}/closing-{run}");
        let (za, zb) = (
            connect(&server.connect_string()).await,
            connect(&server.connect_string()).await,
        );
        let mut a = za.election(&dir, "a").join().await.unwrap();
        let t1 = elected(&mut a).await;
        let mut b = zb.election(&dir, "b").join().await.unwrap();
        let closing = spawn(move || async move { za.close().await });
        let t2 = elected(&mut b).await;
        assert!(t2 > t1, "{n} run {run}");
        // b leads: a must have ended already (its final event came first).
        assert!(!a.is_leader(), "{n} run {run}: two leaders after close()");
        let seen = events_until(&mut a, ElectionEvent::is_final).await;
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
        closing.join().await;
        b.close().await.unwrap();
        zb.close().await;
        w.delete(&dir, None).await.unwrap();
    }
    w.close().await;
}

#[test]
fn leader_session_closed_the_next_leads_with_a_higher_token() {
    run(leader_session_closed_the_next_leads_with_a_higher_token_on(
        &server(),
    ));
}

#[form]
async fn leader_session_closed_the_next_leads_with_a_higher_token_on(server: &TestServer) {
    let root = "";
    let n = NAME;
    let dir = format!("{root}/closed");
    let (za, zb, zc, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let mut obs = w.election_observer(&dir).await.unwrap();
    let mut a = za.election(&dir, "a").join().await.unwrap();
    let t1 = elected(&mut a).await;
    let mut b = zb.election(&dir, "b").join().await.unwrap();
    let mut c = zc.election(&dir, "c").join().await.unwrap();
    participants_are(&obs, &["a", "b", "c"]).await;

    za.close().await;
    let t2 = elected(&mut b).await;
    assert!(t2 > t1, "{n}: {t2} after {t1}");
    assert!(!c.is_leader(), "{n}: two leaders");
    assert_eq!(
        c.elected_timeout(Duration::from_millis(300)).await,
        Ok(None),
        "{n}"
    );
    // The closed one was told, and its candidate ended.
    let seen = events_until(&mut a, ElectionEvent::is_final).await;
    assert!(
        seen.iter().any(|e| matches!(e, ElectionEvent::Lost { .. })),
        "{n}: {seen:?}"
    );
    assert_eq!(seen.last(), Some(&ElectionEvent::Closed), "{n}: {seen:?}");
    assert!(!a.is_leader(), "{n}");
    assert_eq!(a.leadership(), Leadership::Ended, "{n}");
    assert!(
        a.elected_timeout(Duration::from_secs(1)).await.is_err(),
        "{n}"
    );

    let seen = obs
        .wait_for_timeout(
            |e| matches!(e, ObserverEvent::Leader(Some(p)) if p.id == "b"),
            LONG,
        )
        .await;
    assert!(
        matches!(seen, Some(ObserverEvent::Leader(Some(ref p))) if p.fencing_token == t2),
        "{n}: {seen:?}"
    );
    participants_are(&obs, &["b", "c"]).await;
    a.close().await.unwrap();
    b.close().await.unwrap();
    let t3 = elected(&mut c).await;
    assert!(t3 > t2, "{n}");
    c.close().await.unwrap();
    no_nodes_left(&w, &dir).await;
    for z in [zb, zc, w] {
        z.close().await;
    }
}

#[test]
fn leader_session_expired_the_next_leads_and_the_old_one_rejoins_at_the_back() {
    run(leader_session_expired_the_next_leads_and_the_old_one_rejoins_at_the_back_on(&server()));
}

#[form]
async fn leader_session_expired_the_next_leads_and_the_old_one_rejoins_at_the_back_on(
    server: &TestServer,
) {
    let root = "";
    let n = NAME;
    let dir = format!("{root}/expired");
    let (za, zb, zc, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let obs = w.election_observer(&dir).await.unwrap();
    let mut a = za.election(&dir, "a").join().await.unwrap();
    let t1 = elected(&mut a).await;
    assert!(matches!(
        a.changed_timeout(Duration::from_secs(1)).await,
        Some(ElectionEvent::Joined { .. })
    ));
    assert!(matches!(
        a.changed_timeout(Duration::from_secs(1)).await,
        Some(ElectionEvent::Elected { .. })
    ));
    let mut b = zb.election(&dir, "b").join().await.unwrap();
    let mut c = zc.election(&dir, "c").join().await.unwrap();
    participants_are(&obs, &["a", "b", "c"]).await;

    let old = za.session_id();
    expire_session(server.addr(), old, &za.session_password()).unwrap();
    // Suspended (the connection was taken over) maybe, then Lost(SessionExpired).
    let seen = events_until(&mut a, |e| !matches!(e, ElectionEvent::Suspended)).await;
    assert_eq!(
        seen.last(),
        Some(&ElectionEvent::Lost {
            reason: LostReason::SessionExpired
        }),
        "{n}: {seen:?}"
    );
    assert!(!a.is_leader(), "{n}");
    let t2 = elected(&mut b).await;
    assert!(t2 > t1, "{n}");
    assert!(!c.is_leader(), "{n}");

    // The client renews its session; the candidate stands again, at the back.
    let now = wait_status(&za, LONG, |s| matches!(s, Status::Connected { .. }))
        .await
        .unwrap_or_else(|| za.status());
    assert!(
        matches!(now, Status::Connected { session_id, .. } if session_id != old),
        "{n}: {now:?}"
    );
    let parts = participants_are(&obs, &["b", "c", "a"]).await;
    assert!(parts[2].fencing_token > t2, "{n}: a new node");
    assert_eq!(a.leadership(), Leadership::Follower, "{n}");
    assert_eq!(
        a.elected_timeout(Duration::from_millis(200)).await,
        Ok(None),
        "{n}"
    );

    // It leads again when its turn comes.
    b.close().await.unwrap();
    let t3 = elected(&mut c).await;
    c.close().await.unwrap();
    let t4 = elected(&mut a).await;
    assert!(t4 > t3 && t3 > t2, "{n}");
    a.close().await.unwrap();
    no_nodes_left(&w, &dir).await;
    for z in [za, zb, zc, w] {
        z.close().await;
    }
}

#[test]
fn resign_and_requeue_hand_leadership_over() {
    run(resign_and_requeue_hand_leadership_over_on(&server()));
}

#[form]
async fn resign_and_requeue_hand_leadership_over_on(server: &TestServer) {
    let root = "";
    let n = NAME;
    let dir = format!("{root}/resign");
    let (za, zb, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let obs = w.election_observer(&dir).await.unwrap();
    let mut a = za.election(&dir, "a").join().await.unwrap();
    let t1 = elected(&mut a).await;
    let mut b = zb.election(&dir, "b").join().await.unwrap();
    participants_are(&obs, &["a", "b"]).await;

    // Requeue: a steps back behind b.
    a.requeue().await.unwrap();
    assert!(!a.is_leader(), "{n}");
    let t2 = elected(&mut b).await;
    assert!(t2 > t1, "{n}");
    participants_are(&obs, &["b", "a"]).await;
    let seen = events_until(&mut a, |e| *e == ElectionEvent::Resigned).await;
    assert_eq!(seen.last(), Some(&ElectionEvent::Resigned), "{n}: {seen:?}");
    assert_eq!(
        a.elected_timeout(Duration::from_millis(200)).await,
        Ok(None),
        "{n}"
    );

    // Resign: b leaves the line; a leads; b is no candidate until it joins again.
    b.resign().await.unwrap();
    assert!(!b.is_leader(), "{n}");
    let t3 = elected(&mut a).await;
    assert!(t3 > t2, "{n}");
    participants_are(&obs, &["a"]).await;
    assert_eq!(b.leadership(), Leadership::Follower, "{n}");
    assert_eq!(
        b.elected_timeout(Duration::from_millis(300)).await,
        Ok(None),
        "{n}"
    );
    b.join().await.unwrap();
    participants_are(&obs, &["a", "b"]).await;
    assert!(!b.is_leader(), "{n}");
    // Resigning twice is harmless.
    a.resign().await.unwrap();
    a.resign().await.unwrap();
    let t4 = elected(&mut b).await;
    assert!(t4 > t3, "{n}");
    participants_are(&obs, &["b"]).await;
    a.close().await.unwrap();
    b.close().await.unwrap();
    no_nodes_left(&w, &dir).await;
    for z in [za, zb, w] {
        z.close().await;
    }
}

#[test]
fn acknowledgement_guarded_against_deposed_leaders_and_withdrawn_by_them() {
    run(acknowledgement_guarded_against_deposed_leaders_and_withdrawn_by_them_on(&server()));
}

#[form]
async fn acknowledgement_guarded_against_deposed_leaders_and_withdrawn_by_them_on(
    server: &TestServer,
) {
    let root = "";
    let n = NAME;
    let dir = format!("{root}/ack");
    let ack = format!("{dir}-leader");
    let (za, zb, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let mut obs = w.election_observer(&dir).await.unwrap();
    let mut a = za.election(&dir, "a").join().await.unwrap();
    let t1 = elected(&mut a).await;
    let mut b = zb.election(&dir, "b").join().await.unwrap();
    assert_eq!(
        b.acknowledge().await,
        Err(Error::NotLeader),
        "{n}: a follower"
    );
    assert_eq!(a.acknowledge().await, Ok(t1), "{n}");
    let seen = obs
        .wait_for_timeout(|e| matches!(e, ObserverEvent::Acknowledged(_)), LONG)
        .await;
    assert!(
        matches!(seen, Some(ObserverEvent::Acknowledged(ref p)) if p.id == "a" && p.fencing_token == t1),
        "{n}: {seen:?}"
    );
    assert_eq!(
        obs.acknowledged().await.unwrap().map(|p| p.id),
        Some("a".into())
    );
    assert_eq!(
        w.get_data(&format!("{ack}/{t1}")).await.unwrap().0.as_ref(),
        b"a"
    );
    // Acknowledging again is idempotent.
    assert_eq!(a.acknowledge().await, Ok(t1), "{n}");

    // An operator deletes the leader's node: it is deposed, cannot acknowledge, and
    // withdraws its acknowledgement (its name is its leadership's alone).
    let leader = leader_is(&obs, "a").await;
    w.delete(&format!("{dir}/{}", leader.node), None)
        .await
        .unwrap();
    let seen = events_until(&mut a, |e| matches!(e, ElectionEvent::Lost { .. })).await;
    assert_eq!(
        seen.last(),
        Some(&ElectionEvent::Lost {
            reason: LostReason::NodeDeleted
        }),
        "{n}: {seen:?}"
    );
    assert!(!a.is_leader(), "{n}");
    assert_eq!(a.acknowledge().await, Err(Error::NotLeader), "{n}: deposed");
    let t2 = elected(&mut b).await;
    assert!(t2 > t1, "{n}");
    leader_is(&obs, "b").await;
    assert!(
        eventually!(
            LONG,
            w.exists(&format!("{ack}/{t1}")).await.unwrap().is_none(),
            sleep(TICK).await
        ),
        "{n}: the deposed leader withdraws its acknowledgement"
    );
    assert_eq!(
        obs.acknowledged().await.unwrap(),
        None,
        "{n}: b has not acknowledged"
    );
    // a stood again, at the back.
    participants_are(&obs, &["b", "a"]).await;

    // The new leader acknowledges.
    assert_eq!(b.acknowledge().await, Ok(t2), "{n}");
    assert_eq!(
        w.get_data(&format!("{ack}/{t2}")).await.unwrap().0.as_ref(),
        b"b"
    );
    let seen = obs
        .wait_for_timeout(
            |e| matches!(e, ObserverEvent::Acknowledged(p) if p.id == "b"),
            LONG,
        )
        .await;
    assert!(seen.is_some(), "{n}: observer saw b acknowledge");
    assert_eq!(
        obs.acknowledged().await.unwrap().map(|p| p.id),
        Some("b".into())
    );

    // A leader that resigns withdraws its acknowledgement; the next one writes its own.
    b.resign().await.unwrap();
    assert!(
        w.get_children(&ack).await.unwrap().is_empty(),
        "{n}: withdrawn with the resignation"
    );
    let t3 = elected(&mut a).await;
    assert_eq!(a.acknowledge().await, Ok(t3), "{n}");
    assert_eq!(
        w.get_data(&format!("{ack}/{t3}")).await.unwrap().0.as_ref(),
        b"a"
    );
    a.close().await.unwrap();
    b.close().await.unwrap();
    no_nodes_left(&w, &dir).await;
    for z in [za, zb, w] {
        z.close().await;
    }
}

fn work(name: &'static str, log: &Arc<Mutex<Vec<Run>>>) -> Work {
    Work {
        name,
        log: log.clone(),
        finish: Arc::new(AtomicBool::new(false)),
    }
}

#[form]
async fn logged(log: &Arc<Mutex<Vec<Run>>>, what: impl Fn(&Run) -> bool) -> Option<Run> {
    let mut found;
    eventually!(
        LONG,
        {
            found = log.lock().unwrap().iter().find(|r| what(r)).cloned();
            found.is_some()
        },
        sleep(TICK).await
    );
    found
}

#[test]
fn lead_stops_the_work_when_deposed_and_requeue_hands_over() {
    run(lead_stops_the_work_when_deposed_and_requeue_hands_over_on(
        &server(),
    ));
}

#[form]
async fn lead_stops_the_work_when_deposed_and_requeue_hands_over_on(server: &TestServer) {
    let root = "";
    let n = NAME;
    let dir = format!("{root}/lead");
    let (za, zb, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let obs = w.election_observer(&dir).await.unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (wa, wb) = (work("a", &log), work("b", &log));
    let spawn_lead = |mut c: zk::Candidate, wk: Work| {
        spawn(move || async move {
            let r = only::lead_work(&mut c, true, wk).await;
            (r, c)
        })
    };
    let ta = spawn_lead(za.election(&dir, "a").join().await.unwrap(), wa.clone());
    let Some(Run::Started(_, t1)) = logged(&log, |r| matches!(r, Run::Started("a", _))).await
    else {
        panic!("{n}: a never led: {:?}", log.lock().unwrap())
    };
    let tb = spawn_lead(zb.election(&dir, "b").join().await.unwrap(), wb.clone());
    participants_are(&obs, &["a", "b"]).await;

    // The leader's node is deleted: its work is stopped, b leads, a queues again.
    let leader = leader_is(&obs, "a").await;
    w.delete(&format!("{dir}/{}", leader.node), None)
        .await
        .unwrap();
    assert_eq!(
        logged(&log, |r| matches!(r, Run::Stopped("a", _))).await,
        Some(Run::Stopped("a", t1)),
        "{n}: {:?}",
        log.lock().unwrap()
    );
    let Some(Run::Started(_, t2)) = logged(&log, |r| matches!(r, Run::Started("b", _))).await
    else {
        panic!("{n}: b never led: {:?}", log.lock().unwrap())
    };
    assert!(t2 > t1, "{n}");
    participants_are(&obs, &["b", "a"]).await;

    // b's work finishes: with requeue b stands again behind a, and a leads.
    wb.finish.store(true, Ordering::SeqCst);
    let Some(Run::Started(_, t3)) =
        logged(&log, |r| matches!(r, Run::Started("a", t) if *t > t2)).await
    else {
        panic!("{n}: a never led again: {:?}", log.lock().unwrap())
    };
    assert!(t3 > t2, "{n}");
    participants_are(&obs, &["a", "b"]).await;
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
    zb.close().await;
    za.close().await;
    let (ra, _) = ta.join().await;
    let (rb, _) = tb.join().await;
    assert!(ra.is_err() && rb.is_err(), "{n}: {ra:?} {rb:?}");
    assert_eq!(
        log.lock().unwrap().last(),
        Some(&Run::Stopped("a", t3)),
        "{n}"
    );

    // Without requeue, lead() resigns and returns once the work is done.
    let zc = connect(&server.connect_string()).await;
    let mut c = zc.election(&dir, "c").join().await.unwrap();
    let wc = work("c", &log);
    wc.finish.store(true, Ordering::SeqCst);
    assert_eq!(only::lead_work(&mut c, false, wc).await, Ok(()), "{n}");
    assert!(matches!(
        log.lock().unwrap().last(),
        Some(Run::Finished("c", _))
    ));
    assert!(!c.is_leader(), "{n}");
    assert!(
        w.get_children(&dir).await.unwrap().is_empty(),
        "{n}: resigned"
    );
    c.close().await.unwrap();
    no_nodes_left(&w, &dir).await;
    zc.close().await;
    w.close().await;
}

#[test]
fn without_rejoin_an_expired_candidacy_ends() {
    run(without_rejoin_an_expired_candidacy_ends_on(&server()));
}

#[form]
async fn without_rejoin_an_expired_candidacy_ends_on(server: &TestServer) {
    let root = "";
    let n = NAME;
    let dir = format!("{root}/norejoin-expired");
    let (za, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let mut a = za
        .election(&dir, "a")
        .without_rejoin()
        .join()
        .await
        .unwrap();
    elected(&mut a).await;
    expire_session(server.addr(), za.session_id(), &za.session_password()).unwrap();
    let seen = events_until(&mut a, ElectionEvent::is_final).await;
    assert!(
        seen.contains(&ElectionEvent::Lost {
            reason: LostReason::SessionExpired
        }),
        "{n}: {seen:?}"
    );
    assert!(seen.last().is_some_and(|e| e.is_final()), "{n}: {seen:?}");
    assert_eq!(a.leadership(), Leadership::Ended, "{n}");
    assert!(
        a.elected_timeout(Duration::from_secs(1)).await.is_err(),
        "{n}"
    );
    // The client's new session does not stand again.
    wait_status(&za, LONG, |s| matches!(s, Status::Connected { .. })).await;
    sleep(Duration::from_millis(300)).await;
    assert!(w.get_children(&dir).await.unwrap().is_empty(), "{n}");
    assert!(a.close().await.is_ok(), "{n}");
    za.close().await;
    w.close().await;
}

#[test]
fn without_rejoin_a_deleted_candidacy_ends() {
    run(without_rejoin_a_deleted_candidacy_ends_on(&server()));
}

#[form]
async fn without_rejoin_a_deleted_candidacy_ends_on(server: &TestServer) {
    let root = "";
    // ElectionBuilder::without_rejoin: "Do not stand again by ourselves when a
    // candidacy ends (session expired, node deleted): the candidate then ends with it."
    let n = NAME;
    let dir = format!("{root}/norejoin-deleted");
    let (za, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let mut a = za
        .election(&dir, "a")
        .without_rejoin()
        .join()
        .await
        .unwrap();
    elected(&mut a).await;
    let kids = w.get_children(&dir).await.unwrap();
    w.delete(&format!("{dir}/{}", kids[0]), None).await.unwrap();
    let seen = events_until(&mut a, |e| e.is_final()).await;
    assert!(
        seen.contains(&ElectionEvent::Lost {
            reason: LostReason::NodeDeleted
        }),
        "{n}: {seen:?}"
    );
    sleep(Duration::from_millis(300)).await;
    assert!(
        w.get_children(&dir).await.unwrap().is_empty(),
        "{n}: stood again"
    );
    assert!(seen.last().is_some_and(|e| e.is_final()), "{n}: {seen:?}");
    assert_eq!(a.leadership(), Leadership::Ended, "{n}");
    assert!(
        a.elected_timeout(Duration::from_secs(1)).await.is_err(),
        "{n}"
    );
    assert!(a.close().await.is_ok(), "{n}");
    za.close().await;
    w.close().await;
}

#[test]
fn join_returns_once_the_node_exists() {
    run(join_returns_once_the_node_exists_on(&server()));
}

#[form]
async fn join_returns_once_the_node_exists_on(server: &TestServer) {
    let root = "";
    // The builder's docs: "Stands for election: our node is created and the
    // candidate waits in line." Seen: join() returns once the create is queued, so
    // another session may list the directory without our node, and `b.join()`
    // then `c.join()` (two sessions) may queue c before b.
    let n = NAME;
    let dir = format!("{root}/join");
    let (z, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let mut missing = 0;
    for _ in 0..20 {
        let c = z.election(&dir, "x").join().await.unwrap();
        if w.get_children(&dir).await.unwrap_or_default().len() != 1 {
            missing += 1;
        }
        c.close().await.unwrap();
    }
    assert_eq!(
        missing, 0,
        "{n}: {missing} of 20 joins returned before the node existed"
    );
    z.close().await;
    w.close().await;
}

#[test]
fn nothing_left_after_close_resign_or_drop() {
    // Counts the server's ephemerals (`mntr`): a server of its own.
    run(nothing_left_after_close_resign_or_drop_on(&own_server()));
}

#[form]
async fn nothing_left_after_close_resign_or_drop_on(server: &TestServer) {
    let root = "";
    let n = NAME;
    let dir = format!("{root}/clean");
    let (za, zb, zc, w) = (
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
        connect(&server.connect_string()).await,
    );
    let before = server.mntr_value("zk_ephemerals_count").unwrap();
    let mut a = za.election(&dir, "a").join().await.unwrap();
    let t = elected(&mut a).await;
    assert_eq!(a.acknowledge().await, Ok(t), "{n}");
    let b = zb.election(&dir, "b").join().await.unwrap();
    let c = zc.election(&dir, "c").join().await.unwrap();
    let mut d = zc
        .election(&dir, "d")
        .without_rejoin()
        .join()
        .await
        .unwrap();
    queued(&w, &dir, 4).await;
    // Dropped without close: withdrawn all the same.
    drop(c);
    assert!(
        eventually!(
            LONG,
            w.get_children(&dir).await.unwrap().len() == 3,
            sleep(TICK).await
        ),
        "{n}: a dropped candidate's node stays"
    );
    d.resign().await.unwrap();
    d.close().await.unwrap();
    assert_eq!(w.get_children(&dir).await.unwrap().len(), 2, "{n}");
    // The acknowledged leader closes: its node and acknowledgement go.
    a.close().await.unwrap();
    assert!(
        w.get_children(&format!("{dir}-leader"))
            .await
            .unwrap()
            .is_empty(),
        "{n}"
    );
    assert_eq!(w.get_children(&dir).await.unwrap().len(), 1, "{n}");
    b.close().await.unwrap();
    no_nodes_left(&w, &dir).await;
    assert!(
        eventually!(
            LONG,
            server.mntr_value("zk_ephemerals_count").unwrap() == before,
            sleep(TICK).await
        ),
        "{n}: ephemerals left"
    );
    // Closing a candidate whose session is gone returns at once.
    let mut e = zb.election(&dir, "e").join().await.unwrap();
    elected(&mut e).await;
    zb.close().await;
    let t0 = Instant::now();
    assert!(e.close().await.is_ok(), "{n}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{n}");
    no_nodes_left(&w, &dir).await;
    for z in [za, zc, w] {
        z.close().await;
    }
}

#[test]
fn ensemble_leader_server_killed_never_two_leaders() {
    let mut ensemble = TestEnsemble::start().expect("a three-server ensemble");
    run(ensemble_leader_server_killed(&mut ensemble));
}

#[allow(clippy::await_holding_lock)]
#[form]
async fn ensemble_leader_server_killed(ensemble: &mut TestEnsemble) {
    let root = "";
    let n = NAME;
    let dir = format!("{root}/ensemble");
    let cs = ensemble.connect_string();
    let session_of = Duration::from_secs(10);
    let (za, zb, zc) = (
        econnect(&cs, session_of).await,
        econnect(&cs, session_of).await,
        econnect(&cs, session_of).await,
    );
    let mut a = za.election(&dir, "a").join().await.unwrap();
    let t1 = elected(&mut a).await;
    assert!(matches!(
        a.changed_timeout(Duration::from_secs(1)).await,
        Some(ElectionEvent::Joined { .. })
    ));
    assert!(matches!(
        a.changed_timeout(Duration::from_secs(1)).await,
        Some(ElectionEvent::Elected { .. })
    ));
    let cands: Vec<Arc<Mutex<zk::Candidate>>> = vec![
        Arc::new(Mutex::new(a)),
        Arc::new(Mutex::new(zb.election(&dir, "b").join().await.unwrap())),
        Arc::new(Mutex::new(zc.election(&dir, "c").join().await.unwrap())),
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
        // Held for 20 ms at most; the checker is a plain thread.
        let e = cands[0]
            .lock()
            .unwrap()
            .changed_timeout(Duration::from_millis(20))
            .await;
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
            let mut next = None;
            for c in &cands[1..] {
                next = c.lock().unwrap().elected_timeout(LONG).await.ok().flatten();
                if next.is_some() {
                    break;
                }
            }
            assert!(next.is_some_and(|t| t > t1), "{n}: {next:?}");
        }
        other => panic!("{n}: the leader saw {other:?}"),
    }
    // Settle, then exactly one leader.
    sleep(Duration::from_millis(500)).await;
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
        c.close().await.unwrap();
    }
    let w = econnect(&cs, session_of).await;
    no_nodes_left(&w, &dir).await;
    for z in [za, zb, zc, w] {
        z.close().await;
    }
    ensemble.restart(on).unwrap();
}
