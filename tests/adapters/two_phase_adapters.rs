// Two-phase commit against a real ZooKeeper 3.8, each scenario once per adapter (the
// same calls must mean the same in `zk-recipes-blocking` and `zk-recipes-tokio`):
// commit and abort in both variants with every site on its own session, a site
// crashing mid-vote (session closed, or expired) before the deadline, a coordinator
// gone before deciding, a restarted site that finds its vote and a late site that
// learns the outcome.

use std::time::Duration;

use zk::{Error, Outcome, Variant, Vote, VoteOutcome};
use zk_recipes_testing::{expire_session, TestServer};

const WAIT: Duration = Duration::from_secs(30);
const SESSION: Duration = Duration::from_secs(4);

/// A client with `session`; `renew`: start a new session after an expiry (else the
/// client ends).
#[form]
async fn tconnect(cs: &str, session: Duration, renew: bool) -> zk::Client {
    zk::connect(
        cs,
        zk::Options::default()
            .session_timeout(session)
            .renew_on_expiry(renew)
            .connect_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap_or_else(|e| panic!("{NAME}: {e}"))
}

/// Starts transaction `tx` with the test payload and `deadline`.
#[form]
async fn start_tx(
    z: &zk::Client,
    tx: &str,
    sites: &[&str],
    variant: Variant,
    deadline: Duration,
) -> zk::Transaction {
    z.transaction(tx, sites, variant)
        .payload(&b"the payload"[..])
        .deadline(deadline)
        .start()
        .await
        .unwrap()
}

/// A raw client to look at the nodes.
fn raw(server: &TestServer) -> zk_recipes_blocking::Client {
    zk_recipes_blocking::connect(&server.connect_string(), Default::default()).unwrap()
}

/// The transaction node's data and version.
fn tx_node(server: &TestServer, tx: &str) -> (String, i32) {
    let (data, stat) = raw(server).get_data(tx).unwrap();
    (String::from_utf8_lossy(&data).into(), stat.version)
}

/// What a site thread saw: its vote, and the outcome.
type SiteResult = (Option<VoteOutcome>, Result<Option<Outcome>, Error>);

/// Runs site `name` on its own session on a thread: joins, votes `vote` (if any),
/// returns what its vote and the outcome were.
#[form]
async fn spawn_site(
    cs: String,
    tx: String,
    name: &'static str,
    variant: Variant,
    vote: Option<Vote>,
) -> Task<SiteResult> {
    spawn(move || async move {
        let z = tconnect(&cs, SESSION, true).await;
        let mut site = z.site(&tx, name, variant).await.unwrap();
        assert_eq!(
            site.payload().map(|p| &p[..]),
            Some(&b"the payload"[..]),
            "{}",
            NAME
        );
        let mut voted = None;
        if let Some(v) = vote {
            voted = Some(site.vote(v).await.unwrap());
        }
        let outcome = site.outcome_timeout(WAIT).await;
        drop(site);
        z.close().await;
        (voted, outcome)
    })
}

#[test]
fn every_site_votes_commit_in_both_variants() {
    run(every_site_votes_commit_in_both_variants_on(&server()));
}

#[form]
async fn every_site_votes_commit_in_both_variants_on(server: &TestServer) {
    let root = "";
    let cs = server.connect_string();
    for (variant, name) in [(Variant::Coordinator, "on"), (Variant::Peers, "peers")] {
        let tx = format!("{root}/commit/{name}");
        // The sites start first: they wait for the transaction to be created.
        let mut sites = Vec::new();
        for s in ["a", "b", "c"] {
            sites.push(spawn_site(cs.clone(), tx.clone(), s, variant, Some(Vote::Commit)).await);
        }
        sleep(Duration::from_millis(200)).await;
        let z = tconnect(&cs, SESSION, true).await;
        let mut t = start_tx(&z, &tx, &["a", "b", "c"], variant, WAIT).await;
        assert_eq!(
            t.outcome_timeout(WAIT).await.unwrap(),
            Some(Outcome::Commit),
            "{}",
            NAME
        );
        for s in sites {
            let (voted, outcome) = s.join().await;
            assert_eq!(voted, Some(VoteOutcome::Cast(Vote::Commit)));
            assert_eq!(
                outcome.unwrap(),
                Some(Outcome::Commit),
                "{} {variant:?}",
                NAME
            );
        }
        assert_eq!(tx_node(server, &tx), ("commit".into(), 1));
        // Nothing but the durable record is left: no presence nodes.
        let r = raw(server);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while r.exists(&format!("{tx}/coordinator")).unwrap().is_some()
            || !r.get_children(&format!("{tx}/alive")).unwrap().is_empty()
        {
            assert!(std::time::Instant::now() < deadline, "presence nodes left");
            sleep(Duration::from_millis(20)).await;
        }
        z.close().await;
    }
}

#[test]
fn one_abort_vote_aborts_for_everyone() {
    run(one_abort_vote_aborts_for_everyone_on(&server()));
}

#[form]
async fn one_abort_vote_aborts_for_everyone_on(server: &TestServer) {
    let root = "";
    let cs = server.connect_string();
    for variant in [Variant::Coordinator, Variant::Peers] {
        let tx = format!("{root}/abort/{variant:?}");
        let a = spawn_site(cs.clone(), tx.clone(), "a", variant, Some(Vote::Commit)).await;
        let b = spawn_site(cs.clone(), tx.clone(), "b", variant, Some(Vote::Abort)).await;
        sleep(Duration::from_millis(100)).await;
        let z = tconnect(&cs, SESSION, true).await;
        let mut t = start_tx(&z, &tx, &["a", "b"], variant, WAIT).await;
        assert_eq!(t.outcome_timeout(WAIT).await.unwrap(), Some(Outcome::Abort));
        for s in [a, b] {
            let (voted, outcome) = s.join().await;
            assert!(voted.is_some());
            assert_eq!(outcome.unwrap(), Some(Outcome::Abort), "{}", NAME);
        }
        assert_eq!(tx_node(server, &tx), ("abort".into(), 1));
        z.close().await;
    }
}

/// Site `b` joins (its presence node exists), then its process dies before it votes
/// (`close`, or `expire`): after the deadline the coordinator aborts, and `a`, who
/// voted commit, learns `abort`. A `b` restarted later learns `abort` too.
#[form]
async fn crash_before_vote(server: &TestServer, tx: &str, expire: bool) {
    let cs = server.connect_string();
    let a = spawn_site(
        cs.clone(),
        tx.into(),
        "a",
        Variant::Coordinator,
        Some(Vote::Commit),
    )
    .await;
    // Its process does not come back: no new session after the expiry.
    let doomed = tconnect(&cs, SESSION, false).await;
    let doomed2 = doomed.clone();
    let tx2 = tx.to_string();
    // Its handle stays alive: the process dies, nobody drops anything.
    let b = spawn(move || async move { doomed2.site(&tx2, "b", Variant::Coordinator).await });
    sleep(Duration::from_millis(100)).await;
    let z = tconnect(&cs, SESSION, true).await;
    let started = std::time::Instant::now();
    let deadline = Duration::from_millis(1500);
    let mut t = start_tx(&z, tx, &["a", "b"], Variant::Coordinator, deadline).await;
    let b_handle = b.join().await.unwrap();
    assert!(b_handle.payload().is_some(), "b joined");
    if expire {
        expire_session(
            server.addr(),
            doomed.session_id(),
            &doomed.session_password(),
        )
        .unwrap();
    } else {
        doomed.close().await;
    }
    assert_eq!(
        t.outcome_timeout(WAIT).await.unwrap(),
        Some(Outcome::Abort),
        "{}",
        NAME
    );
    assert!(started.elapsed() >= deadline, "not before the deadline");
    let (voted, outcome) = a.join().await;
    assert_eq!(voted, Some(VoteOutcome::Cast(Vote::Commit)));
    assert_eq!(outcome.unwrap(), Some(Outcome::Abort));
    drop(b_handle);
    // b comes back: it learns the outcome; its vote is too late.
    let again = tconnect(&cs, SESSION, true).await;
    let mut b = again.site(tx, "b", Variant::Coordinator).await.unwrap();
    assert_eq!(b.outcome_timeout(WAIT).await.unwrap(), Some(Outcome::Abort));
    assert_eq!(
        b.vote(Vote::Commit).await.unwrap(),
        VoteOutcome::TooLate(Outcome::Abort)
    );
    drop(b);
    again.close().await;
    z.close().await;
}

#[test]
fn a_site_crashing_before_its_vote_aborts_after_the_deadline() {
    run(a_site_crashing_before_its_vote_aborts_after_the_deadline_on(&server()));
}

#[form]
async fn a_site_crashing_before_its_vote_aborts_after_the_deadline_on(server: &TestServer) {
    let root = "";
    crash_before_vote(server, &format!("{root}/crash/closed"), false).await;
}

#[test]
fn a_site_whose_session_expires_mid_vote_aborts_after_the_deadline() {
    run(a_site_whose_session_expires_mid_vote_aborts_after_the_deadline_on(&server()));
}

#[form]
async fn a_site_whose_session_expires_mid_vote_aborts_after_the_deadline_on(server: &TestServer) {
    let root = "";
    crash_before_vote(server, &format!("{root}/crash/expired"), true).await;
}

#[test]
fn a_coordinator_gone_before_deciding_lets_the_sites_abort() {
    run(a_coordinator_gone_before_deciding_lets_the_sites_abort_on(
        &server(),
    ));
}

#[form]
async fn a_coordinator_gone_before_deciding_lets_the_sites_abort_on(server: &TestServer) {
    let root = "";
    let cs = server.connect_string();
    for (expire, name) in [(false, "closed"), (true, "expired")] {
        let tx = format!("{root}/coordinator-gone/{name}");
        let a = spawn_site(
            cs.clone(),
            tx.clone(),
            "a",
            Variant::Coordinator,
            Some(Vote::Commit),
        )
        .await;
        sleep(Duration::from_millis(100)).await;
        let z = tconnect(&cs, SESSION, true).await;
        let mut t = start_tx(&z, &tx, &["a", "b"], Variant::Coordinator, WAIT).await;
        let sz = tconnect(&cs, SESSION, true).await;
        let mut b = sz.site(&tx, "b", Variant::Coordinator).await.unwrap();
        if expire {
            // The coordinator's process lives on and carries on into a new session.
            expire_session(server.addr(), z.session_id(), &z.session_password()).unwrap();
            assert_eq!(
                t.outcome_timeout(WAIT).await.unwrap(),
                Some(Outcome::Abort),
                "{}",
                NAME
            );
        } else {
            drop(t);
            z.close().await;
        }
        assert_eq!(
            b.outcome_timeout(WAIT).await.unwrap(),
            Some(Outcome::Abort),
            "{} {name}",
            NAME
        );
        assert_eq!(
            b.vote(Vote::Commit).await.unwrap(),
            VoteOutcome::TooLate(Outcome::Abort)
        );
        let (_, outcome) = a.join().await;
        assert_eq!(outcome.unwrap(), Some(Outcome::Abort));
        assert_eq!(tx_node(server, &tx), ("abort".into(), 1));
        drop(b);
        sz.close().await;
        z.close().await;
    }
}

#[test]
fn a_restarted_site_keeps_its_vote_and_a_late_one_learns_the_outcome() {
    run(a_restarted_site_keeps_its_vote_and_a_late_one_learns_the_outcome_on(&server()));
}

#[form]
async fn a_restarted_site_keeps_its_vote_and_a_late_one_learns_the_outcome_on(server: &TestServer) {
    let root = "";
    let cs = server.connect_string();
    let tx = format!("{root}/restart");
    let z = tconnect(&cs, SESSION, true).await;
    let mut t = start_tx(&z, &tx, &["a", "b"], Variant::Peers, WAIT).await;
    // a votes commit and crashes right after.
    let first = tconnect(&cs, SESSION, true).await;
    let mut a = first.site(&tx, "a", Variant::Peers).await.unwrap();
    assert_eq!(
        a.vote(Vote::Commit).await.unwrap(),
        VoteOutcome::Cast(Vote::Commit)
    );
    drop(a);
    first.close().await;
    // Restarted, it finds its vote; a different vote cannot replace it.
    let second = tconnect(&cs, SESSION, true).await;
    let mut a = second.site(&tx, "a", Variant::Peers).await.unwrap();
    assert_eq!(a.voted(), Some(Vote::Commit));
    assert_eq!(
        a.vote(Vote::Abort).await.unwrap(),
        VoteOutcome::Cast(Vote::Commit)
    );
    let b = spawn_site(
        cs.clone(),
        tx.clone(),
        "b",
        Variant::Peers,
        Some(Vote::Commit),
    )
    .await;
    assert_eq!(
        a.outcome_timeout(WAIT).await.unwrap(),
        Some(Outcome::Commit),
        "{}",
        NAME
    );
    assert_eq!(b.join().await.1.unwrap(), Some(Outcome::Commit));
    assert_eq!(
        t.outcome_timeout(WAIT).await.unwrap(),
        Some(Outcome::Commit)
    );
    drop(a);
    second.close().await;
    // A site joining long after learns the same outcome at once.
    let late = tconnect(&cs, SESSION, true).await;
    let mut b = late.site(&tx, "b", Variant::Peers).await.unwrap();
    assert_eq!(
        b.outcome_timeout(Duration::from_secs(1)).await.unwrap(),
        Some(Outcome::Commit)
    );
    drop(b);
    late.close().await;
    z.close().await;
}
