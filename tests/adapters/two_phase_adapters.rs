//! Two-phase commit against a real ZooKeeper 3.8, each scenario once per adapter (the
//! same calls must mean the same in `zk-recipes-blocking` and `zk-recipes-tokio`):
//! commit and abort in both variants with every site on its own session, a site
//! crashing mid-vote (session closed, or expired) before the deadline, a coordinator
//! gone before deciding, a restarted site that finds its vote and a late site that
//! learns the outcome.
// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use crate::two_phase_support;

use std::thread;
use std::time::Duration;

use two_phase_support::Tpc;
use zk_recipes::client::Error;
use zk_recipes::recipe::two_phase::{Outcome, Variant, Vote, VoteOutcome};
use zk_recipes_testing::{expire_session, TestServer};

type B = zk_recipes_blocking::Client;
type T = zk_recipes_tokio::Client;

const WAIT: Duration = Duration::from_secs(30);
const SESSION: Duration = Duration::from_secs(4);

macro_rules! both {
    ($name:ident) => {
        #[test]
        fn $name() {
            let server = TestServer::start().expect("a real ZooKeeper");
            scenarios::$name::<B>(&server, "/blocking");
            scenarios::$name::<T>(&server, "/tokio");
        }
    };
}

both!(every_site_votes_commit_in_both_variants);
both!(one_abort_vote_aborts_for_everyone);
both!(a_site_crashing_before_its_vote_aborts_after_the_deadline);
both!(a_site_whose_session_expires_mid_vote_aborts_after_the_deadline);
both!(a_coordinator_gone_before_deciding_lets_the_sites_abort);
both!(a_restarted_site_keeps_its_vote_and_a_late_one_learns_the_outcome);

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
fn spawn_site<Z: Tpc>(
    cs: String,
    tx: String,
    name: &'static str,
    variant: Variant,
    vote: Option<Vote>,
) -> thread::JoinHandle<SiteResult> {
    thread::spawn(move || {
        let z = Z::connect(&cs, SESSION).unwrap();
        let mut site = z.site(&tx, name, variant).unwrap();
        assert_eq!(
            site.payload().as_deref(),
            Some(&b"the payload"[..]),
            "{}",
            Z::NAME
        );
        let voted = vote.map(|v| site.vote(v).unwrap());
        let outcome = site.outcome(WAIT);
        drop(site);
        z.close();
        (voted, outcome)
    })
}

mod scenarios {
    use super::*;

    pub fn every_site_votes_commit_in_both_variants<Z: Tpc>(server: &TestServer, root: &str) {
        let cs = server.connect_string();
        for (variant, name) in [(Variant::Coordinator, "on"), (Variant::Peers, "peers")] {
            let tx = format!("{root}/commit/{name}");
            // The sites start first: they wait for the transaction to be created.
            let sites: Vec<_> = ["a", "b", "c"]
                .into_iter()
                .map(|s| spawn_site::<Z>(cs.clone(), tx.clone(), s, variant, Some(Vote::Commit)))
                .collect();
            thread::sleep(Duration::from_millis(200));
            let z = Z::connect(&cs, SESSION).unwrap();
            let mut t = z
                .transaction(&tx, &["a", "b", "c"], variant, b"the payload", WAIT)
                .unwrap();
            assert_eq!(
                t.outcome(WAIT).unwrap(),
                Some(Outcome::Commit),
                "{}",
                Z::NAME
            );
            for s in sites {
                let (voted, outcome) = s.join().unwrap();
                assert_eq!(voted, Some(VoteOutcome::Cast(Vote::Commit)));
                assert_eq!(
                    outcome.unwrap(),
                    Some(Outcome::Commit),
                    "{} {variant:?}",
                    Z::NAME
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
                thread::sleep(Duration::from_millis(20));
            }
            z.close();
        }
    }

    pub fn one_abort_vote_aborts_for_everyone<Z: Tpc>(server: &TestServer, root: &str) {
        let cs = server.connect_string();
        for variant in [Variant::Coordinator, Variant::Peers] {
            let tx = format!("{root}/abort/{variant:?}");
            let a = spawn_site::<Z>(cs.clone(), tx.clone(), "a", variant, Some(Vote::Commit));
            let b = spawn_site::<Z>(cs.clone(), tx.clone(), "b", variant, Some(Vote::Abort));
            thread::sleep(Duration::from_millis(100));
            let z = Z::connect(&cs, SESSION).unwrap();
            let mut t = z
                .transaction(&tx, &["a", "b"], variant, b"the payload", WAIT)
                .unwrap();
            assert_eq!(t.outcome(WAIT).unwrap(), Some(Outcome::Abort));
            for s in [a, b] {
                let (voted, outcome) = s.join().unwrap();
                assert!(voted.is_some());
                assert_eq!(outcome.unwrap(), Some(Outcome::Abort), "{}", Z::NAME);
            }
            assert_eq!(tx_node(server, &tx), ("abort".into(), 1));
            z.close();
        }
    }

    /// Site `b` joins (its presence node exists), then its process dies before it votes
    /// (`close`, or `expire`): after the deadline the coordinator aborts, and `a`, who
    /// voted commit, learns `abort`. A `b` restarted later learns `abort` too.
    fn crash_before_vote<Z: Tpc>(server: &TestServer, tx: &str, expire: bool) {
        let cs = server.connect_string();
        let a = spawn_site::<Z>(
            cs.clone(),
            tx.into(),
            "a",
            Variant::Coordinator,
            Some(Vote::Commit),
        );
        // Its process does not come back: no new session after the expiry.
        let doomed = Z::connect_with(&cs, SESSION, false).unwrap();
        let doomed2 = doomed.clone();
        let tx2 = tx.to_string();
        // Its handle stays alive: the process dies, nobody drops anything.
        let b = thread::spawn(move || doomed2.site(&tx2, "b", Variant::Coordinator));
        thread::sleep(Duration::from_millis(100));
        let z = Z::connect(&cs, SESSION).unwrap();
        let started = std::time::Instant::now();
        let deadline = Duration::from_millis(1500);
        let mut t = z
            .transaction(
                tx,
                &["a", "b"],
                Variant::Coordinator,
                b"the payload",
                deadline,
            )
            .unwrap();
        let b_handle = b.join().unwrap().unwrap();
        assert!(b_handle.payload().is_some(), "b joined");
        if expire {
            expire_session(
                server.addr(),
                doomed.session_id(),
                &doomed.session_password(),
            )
            .unwrap();
        } else {
            doomed.close();
        }
        assert_eq!(
            t.outcome(WAIT).unwrap(),
            Some(Outcome::Abort),
            "{}",
            Z::NAME
        );
        assert!(started.elapsed() >= deadline, "not before the deadline");
        let (voted, outcome) = a.join().unwrap();
        assert_eq!(voted, Some(VoteOutcome::Cast(Vote::Commit)));
        assert_eq!(outcome.unwrap(), Some(Outcome::Abort));
        drop(b_handle);
        // b comes back: it learns the outcome; its vote is too late.
        let again = Z::connect(&cs, SESSION).unwrap();
        let mut b = again.site(tx, "b", Variant::Coordinator).unwrap();
        assert_eq!(b.outcome(WAIT).unwrap(), Some(Outcome::Abort));
        assert_eq!(
            b.vote(Vote::Commit).unwrap(),
            VoteOutcome::TooLate(Outcome::Abort)
        );
        drop(b);
        again.close();
        z.close();
    }

    pub fn a_site_crashing_before_its_vote_aborts_after_the_deadline<Z: Tpc>(
        server: &TestServer,
        root: &str,
    ) {
        crash_before_vote::<Z>(server, &format!("{root}/crash/closed"), false);
    }

    pub fn a_site_whose_session_expires_mid_vote_aborts_after_the_deadline<Z: Tpc>(
        server: &TestServer,
        root: &str,
    ) {
        crash_before_vote::<Z>(server, &format!("{root}/crash/expired"), true);
    }

    pub fn a_coordinator_gone_before_deciding_lets_the_sites_abort<Z: Tpc>(
        server: &TestServer,
        root: &str,
    ) {
        let cs = server.connect_string();
        for (expire, name) in [(false, "closed"), (true, "expired")] {
            let tx = format!("{root}/coordinator-gone/{name}");
            let a = spawn_site::<Z>(
                cs.clone(),
                tx.clone(),
                "a",
                Variant::Coordinator,
                Some(Vote::Commit),
            );
            thread::sleep(Duration::from_millis(100));
            let z = Z::connect(&cs, SESSION).unwrap();
            let mut t = z
                .transaction(&tx, &["a", "b"], Variant::Coordinator, b"the payload", WAIT)
                .unwrap();
            let sz = Z::connect(&cs, SESSION).unwrap();
            let mut b = sz.site(&tx, "b", Variant::Coordinator).unwrap();
            if expire {
                // The coordinator's process lives on and carries on into a new session.
                expire_session(server.addr(), z.session_id(), &z.session_password()).unwrap();
                assert_eq!(
                    t.outcome(WAIT).unwrap(),
                    Some(Outcome::Abort),
                    "{}",
                    Z::NAME
                );
            } else {
                drop(t);
                z.close();
            }
            assert_eq!(
                b.outcome(WAIT).unwrap(),
                Some(Outcome::Abort),
                "{} {name}",
                Z::NAME
            );
            assert_eq!(
                b.vote(Vote::Commit).unwrap(),
                VoteOutcome::TooLate(Outcome::Abort)
            );
            let (_, outcome) = a.join().unwrap();
            assert_eq!(outcome.unwrap(), Some(Outcome::Abort));
            assert_eq!(tx_node(server, &tx), ("abort".into(), 1));
            drop(b);
            sz.close();
            z.close();
        }
    }

    pub fn a_restarted_site_keeps_its_vote_and_a_late_one_learns_the_outcome<Z: Tpc>(
        server: &TestServer,
        root: &str,
    ) {
        let cs = server.connect_string();
        let tx = format!("{root}/restart");
        let z = Z::connect(&cs, SESSION).unwrap();
        let mut t = z
            .transaction(&tx, &["a", "b"], Variant::Peers, b"the payload", WAIT)
            .unwrap();
        // a votes commit and crashes right after.
        let first = Z::connect(&cs, SESSION).unwrap();
        let mut a = first.site(&tx, "a", Variant::Peers).unwrap();
        assert_eq!(
            a.vote(Vote::Commit).unwrap(),
            VoteOutcome::Cast(Vote::Commit)
        );
        drop(a);
        first.close();
        // Restarted, it finds its vote; a different vote cannot replace it.
        let second = Z::connect(&cs, SESSION).unwrap();
        let mut a = second.site(&tx, "a", Variant::Peers).unwrap();
        assert_eq!(a.voted(), Some(Vote::Commit));
        assert_eq!(
            a.vote(Vote::Abort).unwrap(),
            VoteOutcome::Cast(Vote::Commit)
        );
        let b = spawn_site::<Z>(
            cs.clone(),
            tx.clone(),
            "b",
            Variant::Peers,
            Some(Vote::Commit),
        );
        assert_eq!(
            a.outcome(WAIT).unwrap(),
            Some(Outcome::Commit),
            "{}",
            Z::NAME
        );
        assert_eq!(b.join().unwrap().1.unwrap(), Some(Outcome::Commit));
        assert_eq!(t.outcome(WAIT).unwrap(), Some(Outcome::Commit));
        drop(a);
        second.close();
        // A site joining long after learns the same outcome at once.
        let late = Z::connect(&cs, SESSION).unwrap();
        let mut b = late.site(&tx, "b", Variant::Peers).unwrap();
        assert_eq!(
            b.outcome(Duration::from_secs(1)).unwrap(),
            Some(Outcome::Commit)
        );
        drop(b);
        late.close();
        z.close();
    }
}
