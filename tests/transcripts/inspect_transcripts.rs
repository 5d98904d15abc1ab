//! Transcript tests for `recipe::inspect`: each layout's reads and what they read as,
//! a node gone between the listing and its read, the walk below a path and its budget,
//! and every way a look ends (retried after a lost connection or a refusal, failed
//! after too many, on a missing path or the session's end).

use super::kit::*;
use zk_recipes::recipe::inspect::{
    Description, Inspect, InspectConfig, InspectEvent, Kind, Participant, Shape, Survey,
};

const T: Instant = Instant::ZERO;
const S: i64 = 0x42;

fn look(config: InspectConfig) -> Inspect {
    let mut i = Inspect::new(config);
    i.handle_session(T, SessionChange::Connected { session_id: S });
    i.start(T);
    i
}

/// The one `Described` event's descriptions (panics on anything else).
fn described(i: &mut Inspect) -> (Vec<Description>, bool) {
    match &events(i)[..] {
        [InspectEvent::Described(Survey {
            descriptions,
            truncated,
        })] => (descriptions.clone(), *truncated),
        other => panic!("not one Described: {other:?}"),
    }
}

/// A participant's Stat: owned by session `owner`, created at zxid `czxid`, `ctime` ms.
fn node(owner: i64, czxid: i64, ctime: i64) -> Stat {
    Stat {
        ctime,
        ..st().owner(owner).czxid(czxid)
    }
}

fn p(name: &str, stat: Stat, data: &str) -> Participant {
    Participant {
        name: name.into(),
        stat,
        data: Bytes::copy_from_slice(data.as_bytes()),
    }
}

/// Answers the sync and the root's listing.
fn listed(i: &mut Inspect, root: &str, kids: &[&str]) -> Vec<(OpId, String)> {
    let s = expect_sent!(*i, [format!("sync {root}"), format!("list2 {root}")]);
    i.handle_reply(T, s[0].0, Ok(Response::Path(root.into())));
    i.handle_reply(
        T,
        s[1].0,
        children2(kids, st().num_children(kids.len() as i32)),
    );
    sent(i)
}

const A: &str = "_c_aaaaaaaa-0000-4000-8000-000000000001-lock-0000000003";
const B: &str = "_c_bbbbbbbb-0000-4000-8000-000000000002-lock-0000000001";
const C: &str = "_c_cccccccc-0000-4000-8000-000000000003-lock-0000000002";

/// A lock: the lowest contender holds, the others wait in sequence order (not in the
/// listing's order); a waiter gone between the listing and its read (it gave up) is
/// left out; Curator's lock data (the client's address) is a label, our grant is not.
#[test]
fn a_lock_reads_as_its_holder_and_waiters_in_order() {
    let mut i = look(InspectConfig::new("/locks/job"));
    let s = listed(&mut i, "/locks/job", &[A, "foreign", B, C]);
    assert_eq!(
        lines(&s),
        [
            format!("get /locks/job/{B}"),
            format!("get /locks/job/{C}"),
            format!("get /locks/job/{A}"),
        ]
    );
    i.handle_reply(T, s[0].0, data("10.0.0.5", node(7, 100, 1_000)));
    i.handle_reply(T, s[1].0, no_node());
    assert!(events(&mut i).is_empty(), "a read is still out");
    i.handle_reply(T, s[2].0, data("__GRANT__", node(8, 300, 3_000)));
    let (d, truncated) = described(&mut i);
    assert!(!truncated);
    let holder = p(B, node(7, 100, 1_000), "10.0.0.5");
    let waiter = p(A, node(8, 300, 3_000), "__GRANT__");
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].path.as_str(), d[0].unread), ("/locks/job", 0));
    assert_eq!(
        d[0].shape,
        Shape::Lock {
            holder: Some(holder.clone()),
            waiters: vec![waiter.clone()]
        }
    );
    assert_eq!(d[0].shape.kind(), Kind::Lock);
    assert_eq!((holder.label(), waiter.label()), (Some("10.0.0.5"), None));
    assert_eq!(
        (
            holder.session(),
            holder.fencing_token(),
            holder.created_ms()
        ),
        (7, 100, 1_000)
    );
    assert_eq!(sent(&mut i), [], "nothing more");
    assert!(i.is_done());
}

/// An election: the lowest latch leads; each candidate's data is its participant id.
#[test]
fn an_election_reads_as_its_leader_and_candidates() {
    let l1 = "_c_11111111-0000-4000-8000-000000000000-latch-0000000007";
    let l2 = "_c_22222222-0000-4000-8000-000000000000-latch-0000000004";
    let mut i = look(InspectConfig::new("/e"));
    let s = listed(&mut i, "/e", &[l1, l2]);
    assert_eq!(lines(&s), [format!("get /e/{l2}"), format!("get /e/{l1}")]);
    i.handle_reply(T, s[0].0, data("beta", node(2, 40, 4)));
    i.handle_reply(T, s[1].0, data("alpha", node(1, 70, 7)));
    let (d, _) = described(&mut i);
    assert_eq!(
        d[0].shape,
        Shape::Election {
            leader: Some(p(l2, node(2, 40, 4), "beta")),
            candidates: vec![p(l1, node(1, 70, 7), "alpha")]
        }
    );
    assert!(
        matches!(&d[0].shape, Shape::Election { leader: Some(l), .. } if l.label() == Some("beta"))
    );
}

/// A read/write lock: every reader below the lowest writer holds; a writer that is
/// lowest holds alone.
#[test]
fn a_read_write_lock_reads_as_its_holders() {
    let r1 = "_c_r1-__READ__0000000001";
    let r2 = "_c_r2-__READ__0000000002";
    let w3 = "_c_w3-__WRIT__0000000003";
    let r4 = "_c_r4-__READ__0000000004";
    let mut i = look(InspectConfig::new("/rw"));
    let s = listed(&mut i, "/rw", &[r4, w3, r2, r1]);
    assert_eq!(s.len(), 4);
    for (k, (op, _)) in s.iter().enumerate() {
        i.handle_reply(T, *op, data("", node(1, k as i64 + 1, 0)));
    }
    let (d, _) = described(&mut i);
    let names = |v: &[Participant]| v.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    match &d[0].shape {
        Shape::ReadWriteLock { holders, waiters } => {
            assert_eq!(names(holders), [r1, r2]);
            assert_eq!(names(waiters), [w3, r4]);
            assert!(holders[0].is_reader() && !waiters[0].is_reader());
        }
        other => panic!("{other:?}"),
    }

    let mut i = look(InspectConfig::new("/rw"));
    let s = listed(&mut i, "/rw", &[r4, w3]);
    for (op, _) in &s {
        i.handle_reply(T, *op, data("", node(1, 1, 0)));
    }
    match &described(&mut i).0[0].shape {
        Shape::ReadWriteLock { holders, waiters } => {
            assert_eq!(
                (names(holders), names(waiters)),
                (vec![w3.to_string()], vec![r4.to_string()])
            );
        }
        other => panic!("{other:?}"),
    }
}

/// A semaphore: its `leases` and `locks` directories are listed, then each lease and
/// each queued mutex contender read, in order.
#[test]
fn a_semaphore_reads_as_its_leases_and_queue() {
    let mut i = look(InspectConfig::new("/sem"));
    let s = listed(&mut i, "/sem", &["locks", "leases"]);
    assert_eq!(lines(&s), ["list /sem/leases", "list /sem/locks"]);
    let (l1, l2) = ("_c_x-lease-0000000002", "_c_y-lease-0000000001");
    let m1 = "_c_z-lock-0000000009";
    i.handle_reply(T, s[0].0, children(&[l1, l2]));
    i.handle_reply(T, s[1].0, children(&[m1]));
    let s = expect_sent!(
        i,
        [
            format!("get /sem/leases/{l2}"),
            format!("get /sem/leases/{l1}"),
            format!("get /sem/locks/{m1}"),
        ]
    );
    i.handle_reply(T, s[0].0, data("", node(1, 10, 0)));
    i.handle_reply(T, s[1].0, data("", node(2, 20, 0)));
    i.handle_reply(T, s[2].0, data("", node(3, 30, 0)));
    assert_eq!(
        described(&mut i).0[0].shape,
        Shape::Semaphore {
            leases: vec![p(l2, node(1, 10, 0), ""), p(l1, node(2, 20, 0), "")],
            queued: vec![p(m1, node(3, 30, 0), "")]
        }
    );
}

/// A queue: its length from the listing, the oldest item read (the next one when it
/// was taken meanwhile), and the at-least-once claims in its side directory.
#[test]
fn a_queue_reads_as_its_length_oldest_item_and_claims() {
    let mut i = look(InspectConfig::new("/q"));
    let s = listed(
        &mut i,
        "/q",
        &["qn-0000000005", "qn-0000000003", "qn-0000000004", "junk"],
    );
    assert_eq!(lines(&s), ["get /q/qn-0000000003", "list /q-meta"]);
    i.handle_reply(T, s[0].0, no_node()); // taken meanwhile
    i.handle_reply(
        T,
        s[1].0,
        children(&["claim-qn-0000000004", "_m_marker", "claim-qn-0000000003"]),
    );
    let s = expect_sent!(
        i,
        [
            "get /q/qn-0000000004",
            "get /q-meta/claim-qn-0000000003",
            "get /q-meta/claim-qn-0000000004",
        ]
    );
    i.handle_reply(T, s[0].0, data("job", node(0, 4, 1_234)));
    i.handle_reply(T, s[1].0, no_node()); // completed meanwhile
    i.handle_reply(T, s[2].0, data("", node(9, 44, 2_000)));
    assert_eq!(
        described(&mut i).0[0].shape,
        Shape::Queue {
            priority: false,
            items: 3,
            oldest: Some(p("qn-0000000004", node(0, 4, 1_234), "job")),
            claims: vec![p("claim-qn-0000000004", node(9, 44, 2_000), "")]
        }
    );
}

/// A double barrier: its members by name, and whether `ready` is there.
#[test]
fn a_double_barrier_reads_as_its_members() {
    let m1 = "9f1c2a4e-0000-4000-8000-000000000001";
    let m2 = "1a2b3c4d-0000-4000-8000-000000000002";
    let mut i = look(InspectConfig::new("/bar"));
    let s = listed(&mut i, "/bar", &[m1, "ready", m2]);
    assert_eq!(
        lines(&s),
        [format!("get /bar/{m2}"), format!("get /bar/{m1}")]
    );
    i.handle_reply(T, s[0].0, data("", node(2, 2, 0)));
    i.handle_reply(T, s[1].0, data("", node(1, 1, 0)));
    assert_eq!(
        described(&mut i).0[0].shape,
        Shape::DoubleBarrier {
            ready: true,
            members: vec![p(m2, node(2, 2, 0), ""), p(m1, node(1, 1, 0), "")]
        }
    );
    // Without `ready`, members alone (UUID names) are a barrier still filling.
    let mut i = look(InspectConfig::new("/bar"));
    let s = listed(&mut i, "/bar", &[m1]);
    i.handle_reply(T, s[0].0, data("", node(1, 1, 0)));
    assert!(matches!(
        described(&mut i).0[0].shape,
        Shape::DoubleBarrier { ready: false, .. }
    ));
}

/// A path of no layout is a `Node`; with `below`, every recipe directory under it is
/// found (plain nodes on the way are not described), in path order, and a budget
/// stops the walk with `truncated`.
#[test]
fn below_a_plain_node_every_recipe_directory_is_found() {
    let mut i = look(InspectConfig::new("/app"));
    let s = listed(&mut i, "/app", &["config"]);
    assert_eq!(s, []);
    let (d, _) = described(&mut i);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].shape, Shape::Node);

    let mut i = look(InspectConfig {
        below: true,
        ..InspectConfig::new("/")
    });
    let s = listed(&mut i, "/", &["zookeeper", "app"]);
    assert_eq!(lines(&s), ["list2 /app", "list2 /zookeeper"]);
    i.handle_reply(T, s[0].0, children2(&["locks", "q"], st()));
    i.handle_reply(T, s[1].0, children2(&["quota"], st()));
    let s = expect_sent!(
        i,
        ["list2 /app/locks", "list2 /app/q", "list2 /zookeeper/quota"]
    );
    i.handle_reply(T, s[0].0, children2(&["job"], st()));
    i.handle_reply(T, s[1].0, children2(&["qn-0000000000"], st()));
    i.handle_reply(T, s[2].0, children2(&[], st()));
    let s = expect_sent!(
        i,
        [
            "list2 /app/locks/job",
            "get /app/q/qn-0000000000",
            "list /app/q-meta",
        ]
    );
    i.handle_reply(T, s[0].0, children2(&[B], st()));
    i.handle_reply(T, s[1].0, data("x", node(0, 1, 0)));
    i.handle_reply(T, s[2].0, no_node());
    let s = expect_sent!(i, [format!("get /app/locks/job/{B}")]);
    i.handle_reply(T, s[0].0, data("", node(5, 6, 0)));
    let (d, truncated) = described(&mut i);
    assert!(!truncated);
    let found: Vec<(&str, Kind)> = d
        .iter()
        .map(|d| (d.path.as_str(), d.shape.kind()))
        .collect();
    assert_eq!(
        found,
        [("/app/locks/job", Kind::Lock), ("/app/q", Kind::Queue)]
    );

    // A budget of 3 requests: the root's listing and two more.
    let mut i = look(InspectConfig {
        below: true,
        max_reads: 3,
        ..InspectConfig::new("/app")
    });
    let s = listed(&mut i, "/app", &["a", "b", "c"]);
    assert_eq!(lines(&s), ["list2 /app/a", "list2 /app/b"]);
    i.handle_reply(T, s[0].0, children2(&[A], st()));
    i.handle_reply(T, s[1].0, children2(&[], st()));
    let (d, truncated) = described(&mut i);
    assert!(truncated);
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].path.as_str(), d[0].unread), ("/app/a", 1));
    assert_eq!(
        d[0].shape,
        Shape::Lock {
            holder: None,
            waiters: vec![]
        }
    );
}

/// A connection lost mid-look: the look starts again (synced) once the session is
/// back, and reads as if nothing happened; a refusal waits a backoff; a missing path
/// fails at once; an invalid one sends nothing.
#[test]
fn a_lost_look_starts_again_and_a_missing_path_fails() {
    let mut i = look(InspectConfig::new("/l"));
    let s = listed(&mut i, "/l", &[A]);
    i.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    i.handle_session(T, SessionChange::Suspended);
    assert_eq!(sent(&mut i), [], "nothing while suspended");
    assert_eq!(i.poll_timeout(), None);
    i.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = listed(&mut i, "/l", &[A]);
    i.handle_reply(T, s[0].0, data("", node(S, 1, 0)));
    let (d, _) = described(&mut i);
    assert!(matches!(&d[0].shape, Shape::Lock { holder: Some(h), .. } if h.name == A));

    // Refused (never applied): again after the backoff.
    let mut i = look(InspectConfig::new("/l"));
    let s = expect_sent!(i, ["sync /l", "list2 /l"]);
    i.handle_reply(T, s[0].0, Err(Error::Overloaded));
    i.handle_reply(T, s[1].0, Err(Error::Overloaded));
    assert_eq!(sent(&mut i), []);
    let at = i.poll_timeout().expect("a backoff");
    assert!(at > T);
    i.handle_timeout(at);
    assert_eq!(sent_lines(&mut i), ["sync /l", "list2 /l"]);

    // Refused every time: Failed after MAX_ROUNDS looks.
    let mut i = look(InspectConfig::new("/l"));
    let mut now = T;
    for round in 1..=Inspect::MAX_ROUNDS {
        let s = sent(&mut i);
        assert_eq!(lines(&s), ["sync /l", "list2 /l"], "round {round}");
        for (op, _) in s {
            i.handle_reply(now, op, Err(Error::Server(ErrorCode::Throttled)));
        }
        if let Some(at) = i.poll_timeout() {
            now = at;
            i.handle_timeout(now);
        }
    }
    assert_eq!(
        events(&mut i),
        [InspectEvent::Failed(Error::Server(ErrorCode::Throttled))]
    );
    assert!(i.is_done());

    // Missing: NoNode, final.
    let mut i = look(InspectConfig::new("/nope"));
    let s = expect_sent!(i, ["sync /nope", "list2 /nope"]);
    i.handle_reply(T, s[0].0, ok());
    i.handle_reply(T, s[1].0, no_node());
    assert_eq!(
        events(&mut i),
        [InspectEvent::Failed(Error::Server(ErrorCode::NoNode))]
    );

    // Invalid: nothing sent.
    let mut i = look(InspectConfig::new("no/slash"));
    assert_eq!(sent(&mut i), []);
    assert!(matches!(
        &events(&mut i)[..],
        [InspectEvent::Failed(Error::InvalidPath { .. })]
    ));

    // The session closed mid-look: Failed(Closed); a late reply changes nothing.
    let mut i = look(InspectConfig::new("/l"));
    let s = expect_sent!(i, ["sync /l", "list2 /l"]);
    i.handle_session(T, SessionChange::Closed);
    i.handle_reply(T, s[1].0, children2(&[A], st()));
    assert_eq!(events(&mut i), [InspectEvent::Failed(Error::Closed)]);
    assert_eq!(sent(&mut i), []);
}
