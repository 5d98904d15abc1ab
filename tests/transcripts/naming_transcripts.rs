//! Transcript tests for `recipe::naming`: scripted replies in, exact requests and
//! events out, in the lines of `kit.rs`.

use super::kit::*;
use zk_recipes::recipe::lock::LostReason;
use zk_recipes::recipe::naming::{
    name_path, register, watch, IdEvent, IdGenerator, IdGeneratorConfig, Resolve, ResolveConfig,
    ResolveEvent,
};
use zk_recipes::recipe::node::{NodeWatchEvent, OwnedNodeEvent};

const T: Instant = Instant::ZERO;
const S: i64 = 0x77;

fn created(path: &str) -> Result<Response, Error> {
    Ok(Response::PathStat {
        path: path.into(),
        stat: Stat {
            ephemeral_owner: S,
            ..Stat::default()
        },
    })
}

fn generator() -> IdGenerator {
    let mut g = IdGenerator::new(IdGeneratorConfig::new("/ids", 1));
    g.handle_session(T, SessionChange::Connected { session_id: S });
    g
}

fn id(request: u64, id: i64) -> IdEvent {
    IdEvent::Id { request, id }
}

// ----- names -----

#[test]
fn invalid_names_are_refused_before_anything_is_sent() {
    let bad = |dir: &str, name: &str| name_path(dir, name).unwrap_err();
    assert_eq!(
        bad("/svc", ""),
        Error::InvalidPath {
            path: "".into(),
            error: PathError::Empty
        }
    );
    assert_eq!(
        bad("/svc", "a/b"),
        Error::InvalidPath {
            path: "a/b".into(),
            error: PathError::InvalidChar { offset: 1, ch: '/' }
        }
    );
    assert_eq!(
        bad("/svc", ".."),
        Error::InvalidPath {
            path: "..".into(),
            error: PathError::RelativeSegment
        }
    );
    assert_eq!(
        bad("svc", "db"),
        Error::InvalidPath {
            path: "svc".into(),
            error: PathError::NotAbsolute
        }
    );
    assert!(matches!(
        bad("/svc", "a\u{1}"),
        Error::InvalidPath {
            error: PathError::InvalidChar { ch: '\u{1}', .. },
            ..
        }
    ));
    assert_eq!(name_path("/", "db").unwrap(), "/db");
    assert_eq!(name_path("/svc", "db").unwrap(), "/svc/db");
    assert!(register("/svc", "", "x", CreateMode::Ephemeral).is_err());
    assert!(watch("/svc", "a/b").is_err());
    assert!(ResolveConfig::new("/svc", "").is_err());
    assert_eq!(
        register("/svc", "db", "x", CreateMode::EphemeralSequential).unwrap_err(),
        Error::Server(ErrorCode::BadArguments)
    );
}

#[test]
fn a_registered_ephemeral_name_is_registered_again_after_expiry() {
    let mut n = register("/svc", "db", "10.0.0.7", CreateMode::Ephemeral).unwrap();
    n.handle_session(T, SessionChange::Connected { session_id: S });
    n.create(T);
    let s = expect_sent!(n, ["create2 /svc/db e '10.0.0.7'", "get! /svc/db"]);
    n.handle_reply(T, s[0].0, created("/svc/db"));
    assert!(matches!(
        events(&mut n)[..],
        [OwnedNodeEvent::Created { .. }]
    ));
    n.handle_reply(
        T,
        s[1].0,
        Ok(Response::Data {
            data: Bytes::from_static(b"10.0.0.7"),
            stat: Stat {
                ephemeral_owner: S,
                ..Stat::default()
            },
        }),
    );
    assert_eq!(events(&mut n), []);
    n.handle_session(T, SessionChange::Expired);
    assert_eq!(
        events(&mut n),
        [OwnedNodeEvent::Lost {
            reason: LostReason::SessionExpired
        }]
    );
    assert_eq!(lines(&sent(&mut n)), Vec::<&str>::new());
    n.handle_session(T, SessionChange::Connected { session_id: S + 1 });
    assert_eq!(
        lines(&sent(&mut n)),
        ["create2 /svc/db e '10.0.0.7'", "get! /svc/db"]
    );
}

#[test]
fn a_persistent_name_is_created_persistent() {
    let mut n = register("/svc", "db", "x", CreateMode::Persistent).unwrap();
    n.handle_session(T, SessionChange::Connected { session_id: S });
    n.create(T);
    assert_eq!(
        lines(&sent(&mut n)),
        ["create2 /svc/db 'x'", "get! /svc/db"]
    );
}

#[test]
fn resolve_is_one_read() {
    let mut r = Resolve::new(ResolveConfig::new("/svc", "db").unwrap());
    r.handle_session(T, SessionChange::Connected { session_id: S });
    r.start(T);
    let s = expect_sent!(r, ["get /svc/db"]);
    let stat = Stat {
        version: 3,
        ..Stat::default()
    };
    r.handle_reply(
        T,
        s[0].0,
        Ok(Response::Data {
            data: Bytes::from_static(b"addr"),
            stat,
        }),
    );
    assert_eq!(
        events(&mut r),
        [ResolveEvent::Resolved {
            data: Bytes::from_static(b"addr"),
            stat
        }]
    );
    assert!(r.is_done());
}

#[test]
fn resolve_not_found_and_sync_first() {
    let mut c = ResolveConfig::new("/svc", "db").unwrap();
    c.sync_first = true;
    let mut r = Resolve::new(c);
    r.handle_session(T, SessionChange::Connected { session_id: S });
    r.start(T);
    let s = expect_sent!(r, ["sync /svc/db", "get /svc/db"]);
    r.handle_reply(T, s[0].0, Ok(Response::Path("/svc/db".into())));
    r.handle_reply(T, s[1].0, code(ErrorCode::NoNode));
    assert_eq!(events(&mut r), [ResolveEvent::NotFound]);
    assert!(r.is_done());
}

#[test]
fn resolve_retries_a_lost_read_after_the_reconnect_and_a_failed_sync_reads_again() {
    let mut c = ResolveConfig::new("/svc", "db").unwrap();
    c.sync_first = true;
    let mut r = Resolve::new(c);
    r.handle_session(T, SessionChange::Connected { session_id: S });
    r.start(T);
    let s = sent(&mut r);
    r.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    r.handle_reply(T, s[1].0, code(ErrorCode::NoNode)); // after a failed sync: stale
    r.handle_session(T, SessionChange::Suspended);
    assert_eq!(events(&mut r), []);
    assert_eq!(lines(&sent(&mut r)), Vec::<&str>::new());
    r.handle_session(T, SessionChange::Reconnected { session_id: S });
    expect_sent!(r, ["sync /svc/db", "get /svc/db"]);
    r.handle_session(T, SessionChange::Closed);
    assert_eq!(events(&mut r), [ResolveEvent::Failed(Error::Closed)]);
}

#[test]
fn watch_follows_the_name() {
    let mut w = watch("/svc", "db").unwrap();
    w.handle_session(T, SessionChange::Connected { session_id: S });
    w.start(T);
    let s = expect_sent!(w, ["get! /svc/db"]);
    w.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    assert_eq!(events(&mut w), [NodeWatchEvent::Missing { gone: false }]);
}

// ----- ids -----

#[test]
fn ids_are_pipelined_returned_in_request_order_and_their_nodes_deleted() {
    let mut g = generator();
    let r: Vec<u64> = (0..3).map(|_| g.request(T)).collect();
    assert_eq!(r, [1, 2, 3]);
    let s = expect_sent!(
        g,
        [
            "create2 /ids/id-77-1-1- es",
            "create2 /ids/id-77-1-2- es",
            "create2 /ids/id-77-1-3- es",
        ]
    );
    g.handle_reply(T, s[0].0, created("/ids/id-77-1-1-0000000004"));
    assert_eq!(events(&mut g), [id(1, 4)]);
    // The delete goes out at once, on the wire behind the creates still pending.
    g.request(T);
    let s2 = expect_sent!(
        g,
        [
            "delete /ids/id-77-1-1-0000000004",
            "create2 /ids/id-77-1-4- es",
        ]
    );
    let s2 = &s2[1..];
    g.handle_reply(T, s[1].0, created("/ids/id-77-1-2-0000000005"));
    g.handle_reply(T, s[2].0, created("/ids/id-77-1-3-0000000006"));
    g.handle_reply(T, s2[0].0, created("/ids/id-77-1-4-0000000009"));
    assert_eq!(events(&mut g), [id(2, 5), id(3, 6), id(4, 9)]);
    assert_eq!(
        lines(&sent(&mut g)),
        [
            "delete /ids/id-77-1-2-0000000005",
            "delete /ids/id-77-1-3-0000000006",
            "delete /ids/id-77-1-4-0000000009",
        ]
    );
    assert_eq!(g.last_id(), Some(9));
    assert_eq!(g.pending(), 0);
}

#[test]
fn a_lost_create_reply_is_recovered_by_listing() {
    let mut g = generator();
    g.request(T);
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    g.handle_reply(T, s[1].0, Err(Error::ConnectionLoss));
    g.handle_session(T, SessionChange::Suspended);
    assert_eq!(lines(&sent(&mut g)), Vec::<&str>::new());
    g.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = expect_sent!(g, ["sync /ids", "list /ids"]);
    g.handle_reply(T, s[0].0, Ok(Response::Path("/ids".into())));
    // The first create applied, the second did not; another session's node and
    // another generator's node of our session are not ours.
    g.handle_reply(
        T,
        s[1].0,
        Ok(Response::Children(vec![
            "id-78-1-1-0000000006".into(),
            "id-77-2-1-0000000008".into(),
            "id-77-1-1-0000000007".into(),
        ])),
    );
    assert_eq!(events(&mut g), [id(1, 7)]);
    assert_eq!(
        lines(&sent(&mut g)),
        [
            "create2 /ids/id-77-1-3- es",
            "delete /ids/id-77-1-1-0000000007",
        ]
    );
    assert_eq!(g.recovered(), 1);
}

#[test]
fn a_lost_listing_lists_again_and_ids_stay_in_order() {
    let mut g = generator();
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    g.handle_session(T, SessionChange::Suspended);
    g.handle_session(T, SessionChange::Reconnected { session_id: S });
    g.request(T); // sent behind the listing
    let s = expect_sent!(g, ["sync /ids", "list /ids", "create2 /ids/id-77-1-2- es"]);
    g.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    g.handle_reply(T, s[1].0, Err(Error::ConnectionLoss));
    g.handle_reply(T, s[2].0, Err(Error::ConnectionLoss));
    g.handle_session(T, SessionChange::Suspended);
    g.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = expect_sent!(g, ["sync /ids", "list /ids"]);
    g.handle_reply(T, s[0].0, Ok(Response::Path("/ids".into())));
    g.handle_reply(
        T,
        s[1].0,
        Ok(Response::Children(vec![
            "id-77-1-2-0000000012".into(),
            "id-77-1-1-0000000010".into(),
        ])),
    );
    assert_eq!(events(&mut g), [id(1, 10), id(2, 12)]);
}

#[test]
fn creates_of_an_expired_session_are_made_again_in_the_next() {
    let mut g = generator();
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, Err(Error::SessionExpired));
    g.handle_session(T, SessionChange::Expired);
    assert_eq!(events(&mut g), []);
    assert_eq!(lines(&sent(&mut g)), Vec::<&str>::new());
    g.handle_session(T, SessionChange::Connected { session_id: 0x99 });
    let s = expect_sent!(g, ["create2 /ids/id-99-1-2- es"]);
    g.handle_reply(T, s[0].0, created("/ids/id-99-1-2-0000000003"));
    assert_eq!(events(&mut g), [id(1, 3)]);
}

#[test]
fn a_refused_create_goes_again_after_a_backoff_and_ids_follow_the_server_order() {
    let mut g = generator();
    g.request(T);
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, Err(Error::Overloaded));
    g.handle_reply(T, s[1].0, created("/ids/id-77-1-2-0000000010"));
    // Request 1 takes the smallest number drawn; the next create is for request 2.
    assert_eq!(events(&mut g), [id(1, 10)]);
    assert_eq!(lines(&sent(&mut g)), Vec::<&str>::new());
    let at = g.poll_timeout().expect("a backoff deadline");
    assert!(at > T);
    g.handle_timeout(at);
    let s = expect_sent!(
        g,
        [
            "create2 /ids/id-77-1-3- es",
            "delete /ids/id-77-1-2-0000000010",
        ]
    );
    g.handle_reply(T, s[0].0, created("/ids/id-77-1-3-0000000012"));
    assert_eq!(events(&mut g), [id(2, 12)]);
}

#[test]
fn a_missing_directory_is_created_persistent() {
    let mut g = IdGenerator::new(IdGeneratorConfig::new("/app/ids", 1));
    g.handle_session(T, SessionChange::Connected { session_id: S });
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    let s = expect_sent!(
        g,
        [
            "create /app",
            "create /app/ids",
            "create2 /app/ids/id-77-1-2- es",
        ]
    );
    g.handle_reply(T, s[0].0, Ok(Response::Path("/app".into())));
    g.handle_reply(T, s[1].0, code(ErrorCode::NodeExists));
    g.handle_reply(T, s[2].0, created("/app/ids/id-77-1-2-0000000000"));
    assert_eq!(events(&mut g), [id(1, 0)]);
}

#[test]
fn a_directory_that_cannot_be_created_fails_the_requests() {
    let mut g = generator();
    g.request(T);
    for _ in 0..2 {
        let s = sent(&mut g);
        for (op, _) in &s[..s.len() - 1] {
            g.handle_reply(T, *op, code(ErrorCode::NoAuth));
        }
        g.handle_reply(T, s[s.len() - 1].0, code(ErrorCode::NoNode));
        assert_eq!(events(&mut g), []);
    }
    let s = expect_sent!(g, ["create /ids", "create2 /ids/id-77-1-3- es"]);
    g.handle_reply(T, s[0].0, code(ErrorCode::NoAuth));
    g.handle_reply(T, s[1].0, code(ErrorCode::NoNode));
    assert_eq!(
        events(&mut g),
        [IdEvent::Failed {
            request: 1,
            error: Error::NoParent {
                path: "/ids".into(),
                code: ErrorCode::NoAuth
            }
        }]
    );
}

#[test]
fn the_largest_sequence_number_is_an_id_and_the_wrap_is_an_error() {
    let mut g = generator();
    g.request(T);
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, created("/ids/id-77-1-1-2147483647"));
    g.handle_reply(T, s[1].0, created("/ids/id-77-1-2--2147483648"));
    let overflow = Error::SequenceOverflow {
        path: "/ids".into(),
    };
    assert_eq!(
        events(&mut g),
        [
            id(1, 2_147_483_647),
            IdEvent::Failed {
                request: 2,
                error: overflow.clone()
            }
        ]
    );
    // Both nodes are deleted; later requests fail at once, nothing is sent for them.
    assert_eq!(g.request(T), 3);
    assert_eq!(
        events(&mut g),
        [IdEvent::Failed {
            request: 3,
            error: overflow
        }]
    );
    assert_eq!(
        lines(&sent(&mut g)),
        [
            "delete /ids/id-77-1-1-2147483647",
            "delete /ids/id-77-1-2--2147483648",
        ]
    );
}

#[test]
fn a_number_not_above_the_last_is_never_returned() {
    let mut g = generator();
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, created("/ids/id-77-1-1-0000000050"));
    assert_eq!(events(&mut g), [id(1, 50)]);
    // The directory was deleted and re-created: its counter started again.
    g.request(T);
    let s = expect_sent!(
        g,
        [
            "delete /ids/id-77-1-1-0000000050",
            "create2 /ids/id-77-1-2- es",
        ]
    );
    g.handle_reply(T, s[1].0, created("/ids/id-77-1-2-0000000000"));
    assert_eq!(
        events(&mut g),
        [IdEvent::Failed {
            request: 2,
            error: Error::SequenceOverflow {
                path: "/ids".into()
            }
        }]
    );
}

#[test]
fn a_name_we_cannot_read_fails_one_request() {
    let mut g = generator();
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, created("/ids/id-77-1-1-12x"));
    assert_eq!(
        events(&mut g),
        [IdEvent::Failed {
            request: 1,
            error: Error::UnexpectedReply
        }]
    );
    assert_eq!(lines(&sent(&mut g)), ["delete /ids/id-77-1-1-12x"]);
}

#[test]
fn close_fails_the_waiting_requests_and_cleans_up_before_ending() {
    let mut g = generator();
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    g.close(T);
    assert_eq!(
        events(&mut g),
        [IdEvent::Failed {
            request: 1,
            error: Error::Closed
        }]
    );
    assert!(!g.is_done());
    g.handle_session(T, SessionChange::Suspended);
    g.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = expect_sent!(g, ["sync /ids", "list /ids"]);
    g.handle_reply(T, s[0].0, Ok(Response::Path("/ids".into())));
    g.handle_reply(
        T,
        s[1].0,
        Ok(Response::Children(vec!["id-77-1-1-0000000003".into()])),
    );
    assert_eq!(events(&mut g), []); // nobody waits for it
    let s = expect_sent!(g, ["delete /ids/id-77-1-1-0000000003"]);
    assert!(!g.is_done());
    g.handle_reply(T, s[0].0, Ok(Response::Empty));
    assert!(g.is_done());
    assert_eq!(g.request(T), 2);
    assert_eq!(
        events(&mut g),
        [IdEvent::Failed {
            request: 2,
            error: Error::Closed
        }]
    );
}

#[test]
fn a_closed_session_fails_every_waiting_request() {
    let mut g = generator();
    g.request(T);
    g.request(T);
    let _ = sent(&mut g);
    g.handle_session(T, SessionChange::Closed);
    assert_eq!(
        events(&mut g),
        [
            IdEvent::Failed {
                request: 1,
                error: Error::Closed
            },
            IdEvent::Failed {
                request: 2,
                error: Error::Closed
            },
        ]
    );
    assert!(g.is_done());
}

#[test]
fn a_number_drawn_for_failed_requests_serves_no_later_request() {
    let mut g = generator();
    g.request(T);
    g.request(T);
    let s = sent(&mut g);
    g.handle_reply(T, s[0].0, code(ErrorCode::NoAuth));
    let no_auth = Error::Server(ErrorCode::NoAuth);
    assert_eq!(
        events(&mut g),
        [
            IdEvent::Failed {
                request: 1,
                error: no_auth.clone()
            },
            IdEvent::Failed {
                request: 2,
                error: no_auth
            },
        ]
    );
    // Request 3 comes after request 2's create was sent: that number is too old for it.
    g.request(T);
    let s3 = expect_sent!(g, ["create2 /ids/id-77-1-3- es"]);
    g.handle_reply(T, s[1].0, created("/ids/id-77-1-2-0000000007"));
    assert_eq!(events(&mut g), []);
    g.handle_reply(T, s3[0].0, created("/ids/id-77-1-3-0000000009"));
    assert_eq!(events(&mut g), [id(3, 9)]);
    assert_eq!(
        lines(&sent(&mut g)),
        [
            "delete /ids/id-77-1-2-0000000007",
            "delete /ids/id-77-1-3-0000000009",
        ]
    );
}
