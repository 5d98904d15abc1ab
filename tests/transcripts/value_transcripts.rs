//! Transcript tests for `recipe::value` (`Update`, `Counter`): scripted replies in,
//! exact requests and events out.

use super::kit::*;
use core::time::Duration;
use zk_recipes::recipe::value::{
    counter_value, Counter, CounterEvent, CounterFormat, Proposal, Update, UpdateConfig,
    UpdateEvent,
};

const T: Instant = Instant::ZERO;
const S: i64 = 0x77;
const P: &str = "/c";

fn stat(czxid: i64, version: i32) -> Stat {
    Stat {
        czxid,
        mzxid: czxid + i64::from(version),
        version,
        ..Stat::default()
    }
}

fn current(d: &[u8], st: Stat) -> UpdateEvent {
    UpdateEvent::Current {
        data: Some(Bytes::copy_from_slice(d)),
        stat: Some(st),
    }
}

fn missing() -> UpdateEvent {
    UpdateEvent::Current {
        data: None,
        stat: None,
    }
}

fn update(config: UpdateConfig) -> Update {
    let mut u = Update::new(config);
    u.handle_session(T, SessionChange::Connected { session_id: S });
    u.start(T);
    u
}

fn set(d: &'static str) -> Proposal {
    Proposal::Set(Bytes::from_static(d.as_bytes()))
}

/// After a lost race: nothing is sent until the wait is over; returns the instant it is
/// (the read again is then waiting in the outbox).
fn waited<R: Recipe>(r: &mut R) -> Instant {
    assert_eq!(sent(r), [], "read again before the wait");
    let at = r.poll_timeout().expect("a lost race waits");
    r.handle_timeout(at);
    at
}

/// A node at version 3 holding "a" has been read and "b" proposed; returns the set's op.
fn proposed(u: &mut Update) -> OpId {
    let s = sent(u);
    assert_eq!(lines(&s), ["get /c"]);
    u.handle_reply(T, s[0].0, data(b"a", stat(10, 3)));
    assert_eq!(events(u), [current(b"a", stat(10, 3))]);
    assert!(u.is_proposing());
    u.propose(T, set("b"));
    let s = sent(u);
    assert_eq!(lines(&s), ["set /c 'b' @3"]);
    s[0].0
}

// ----- Update -----

#[test]
fn update_happy_path() {
    let mut u = update(UpdateConfig::new(P));
    let op = proposed(&mut u);
    u.handle_reply(T, op, Ok(Response::Stat(stat(10, 4))));
    assert_eq!(events(&mut u), [UpdateEvent::Updated { stat: stat(10, 4) }]);
    assert!(u.is_done());
    assert_eq!(u.rounds(), 1);
}

#[test]
fn update_bad_version_runs_the_function_again() {
    let mut u = update(UpdateConfig::new(P));
    let op = proposed(&mut u);
    u.handle_reply(T, op, code(ErrorCode::BadVersion));
    assert_eq!(events(&mut u), []);
    let t = waited(&mut u);
    let s = expect_sent!(u, ["get /c"]); // no sync needed after BadVersion
    u.handle_reply(t, s[0].0, data(b"z", stat(10, 4)));
    assert_eq!(events(&mut u), [current(b"z", stat(10, 4))]);
    u.propose(t, set("zz"));
    let s = expect_sent!(u, ["set /c 'zz' @4"]);
    u.handle_reply(t, s[0].0, Ok(Response::Stat(stat(10, 5))));
    assert_eq!(events(&mut u), [UpdateEvent::Updated { stat: stat(10, 5) }]);
    assert_eq!(u.rounds(), 2);
}

/// Runs an update (seeded `seed`) through `losses` races lost in a row, each round
/// (read, then `setData` answered `BadVersion`) taking `round`; returns each wait from
/// the lost race to the read that follows it. Checks that nothing is sent before the
/// wait is over and the read is sent as soon as it is.
fn waits_after_lost_races(seed: u64, round: Duration, losses: usize) -> Vec<Duration> {
    let mut config = UpdateConfig::new(P);
    config.seed = seed;
    let mut u = update(config); // reads at T
    let mut now = T;
    let mut waits = Vec::new();
    for i in 0..losses {
        let version = 3 + i as i32;
        let s = sent(&mut u);
        assert_eq!(lines(&s), ["get /c"], "loss {i}");
        u.handle_reply(now + round / 2, s[0].0, data(b"a", stat(10, version)));
        assert_eq!(events(&mut u), [current(b"a", stat(10, version))]);
        u.propose(now + round / 2, set("b"));
        let s = expect_sent!(u, [format!("set /c 'b' @{version}")]);
        now = now + round;
        u.handle_reply(now, s[0].0, code(ErrorCode::BadVersion));
        assert_eq!(sent(&mut u), [], "read again at once after loss {i}");
        let at = u.poll_timeout().expect("a lost race waits for a deadline");
        assert!(
            at > now,
            "loss {i}: the wait ends at {at:?}, lost at {now:?}"
        );
        u.handle_timeout(Instant::from_micros(at.as_micros() - 1));
        assert_eq!(sent(&mut u), [], "read before the wait is over (loss {i})");
        waits.push(at - now);
        now = at;
        u.handle_timeout(now);
    }
    assert_eq!(lines(&sent(&mut u)), ["get /c"]);
    assert_eq!(u.rounds(), losses as u32);
    waits
}

/// Contention (issue 25, item 3): eight counters on one node that read again at once
/// after a lost compare-and-set all collide again. After the n-th race lost in a row
/// the read waits a delay drawn from the seed and the session id in
/// `[span / 2, span]`, `span` = min(the round's duration × 2^min(n, 5), 250 ms): it
/// grows with each loss, is bounded, scales with the server's latency, and differs
/// between updates.
/// The wait after a lost race spans at most 2^this rounds...
const MAX_DOUBLINGS: usize = 5;
/// ...and at most this long.
const MAX_WAIT: Duration = Duration::from_millis(250);

#[test]
fn a_lost_race_waits_a_seeded_jittered_delay_that_grows_with_each_loss() {
    for round in [Duration::from_millis(2), Duration::from_micros(700)] {
        let waits = waits_after_lost_races(1, round, 8);
        for (i, w) in waits.iter().enumerate() {
            let span = round * 2u32.pow((i as u32 + 1).min(MAX_DOUBLINGS as u32));
            assert!(
                *w >= span / 2 && *w <= span,
                "loss {}: waited {w:?}, not within [{:?}, {span:?}] (round {round:?})",
                i + 1,
                span / 2
            );
        }
        for pair in waits[..MAX_DOUBLINGS].windows(2) {
            assert!(pair[1] >= pair[0], "{waits:?} shrinks before the bound");
        }
        assert!(waits[4] > waits[0] * 4, "{waits:?} does not grow");
        assert_eq!(
            waits,
            waits_after_lost_races(1, round, 8),
            "not reproducible"
        );
    }
    // Bounded in time too: a slow round does not make a wait longer than 250 ms.
    let slow = Duration::from_millis(100);
    let waits = waits_after_lost_races(1, slow, 4);
    assert!(waits[0] >= slow && waits[0] <= slow * 2, "{waits:?}");
    for w in &waits[1..] {
        assert!(*w >= MAX_WAIT / 2 && *w <= MAX_WAIT, "{waits:?}");
    }
    let firsts: std::collections::BTreeSet<Duration> = (0..16)
        .map(|seed| waits_after_lost_races(seed, Duration::from_millis(2), 1)[0])
        .collect();
    assert!(firsts.len() >= 12, "16 seeds drew {firsts:?}");
}

#[test]
fn update_keep_writes_nothing() {
    let mut u = update(UpdateConfig::new(P));
    let s = sent(&mut u);
    u.handle_reply(T, s[0].0, data(b"a", stat(10, 3)));
    events(&mut u);
    u.propose(T, Proposal::Keep);
    assert_eq!(sent(&mut u), []);
    assert_eq!(events(&mut u), [UpdateEvent::Kept]);
    assert!(u.is_done());
}

#[test]
fn update_creates_missing_node_and_its_parents() {
    let mut u = update(UpdateConfig::new("/a/b/c"));
    let s = expect_sent!(u, ["get /a/b/c"]);
    u.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    assert_eq!(events(&mut u), [missing()]);
    u.propose(T, set("x"));
    let s = expect_sent!(u, ["create2 /a/b/c 'x'"]);
    u.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    let s = expect_sent!(u, ["container /a", "container /a/b", "create2 /a/b/c 'x'"]);
    u.handle_reply(T, s[0].0, code(ErrorCode::NodeExists));
    u.handle_reply(T, s[1].0, Ok(Response::Path("/a/b".into())));
    u.handle_reply(
        T,
        s[2].0,
        Ok(Response::PathStat {
            path: "/a/b/c".into(),
            stat: stat(20, 0),
        }),
    );
    assert_eq!(events(&mut u), [UpdateEvent::Updated { stat: stat(20, 0) }]);
}

#[test]
fn update_without_create_fails_on_missing_node() {
    let mut c = UpdateConfig::new(P);
    c.create_if_missing = false;
    let mut u = update(c);
    let s = sent(&mut u);
    u.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    assert_eq!(events(&mut u), [missing()]);
    u.propose(T, set("x"));
    assert_eq!(sent(&mut u), []);
    assert_eq!(
        events(&mut u),
        [UpdateEvent::Failed {
            error: Error::Server(ErrorCode::NoNode)
        }]
    );
}

#[test]
fn update_node_exists_race_reads_again() {
    let mut u = update(UpdateConfig::new(P));
    let s = sent(&mut u);
    u.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    events(&mut u);
    u.propose(T, set("x"));
    let s = sent(&mut u);
    u.handle_reply(T, s[0].0, code(ErrorCode::NodeExists));
    let t = waited(&mut u);
    let s = expect_sent!(u, ["get /c"]);
    u.handle_reply(t, s[0].0, data(b"y", stat(30, 0)));
    assert_eq!(events(&mut u), [current(b"y", stat(30, 0))]);
    u.propose(t, set("yx"));
    assert_eq!(lines(&sent(&mut u)), ["set /c 'yx' @0"]);
}

/// The set's reply is lost; after the reconnect the machine syncs and re-reads.
fn lost_set(config: UpdateConfig) -> (Update, OpId) {
    let mut u = update(config);
    let op = proposed(&mut u);
    u.handle_reply(T, op, Err(Error::ConnectionLoss));
    u.handle_session(T, SessionChange::Suspended);
    assert_eq!(sent(&mut u), []);
    u.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = expect_sent!(u, ["sync /c", "get /c"]);
    u.handle_reply(T, s[0].0, Ok(Response::Path(P.into())));
    (u, s[1].0)
}

#[test]
fn lost_set_reply_not_applied_runs_again() {
    let (mut u, read) = lost_set(UpdateConfig::new(P));
    u.handle_reply(T, read, data(b"a", stat(10, 3)));
    assert_eq!(events(&mut u), [current(b"a", stat(10, 3))]);
    u.propose(T, set("b"));
    assert_eq!(lines(&sent(&mut u)), ["set /c 'b' @3"]);
}

#[test]
fn lost_set_reply_applied_is_confirmed() {
    let (mut u, read) = lost_set(UpdateConfig::new(P));
    u.handle_reply(T, read, data(b"b", stat(10, 4)));
    assert_eq!(events(&mut u), [UpdateEvent::Updated { stat: stat(10, 4) }]);
}

#[test]
fn lost_set_reply_unknowable_fails_may_have_applied() {
    let (mut u, read) = lost_set(UpdateConfig::new(P));
    u.handle_reply(T, read, data(b"q", stat(10, 5)));
    let e = events(&mut u);
    assert_eq!(
        e,
        [UpdateEvent::Failed {
            error: Error::ConnectionLoss
        }]
    );
    assert!(matches!(&e[0], UpdateEvent::Failed { error } if error.may_have_applied()));
    assert_eq!(sent(&mut u), []);
}

#[test]
fn lost_set_reply_same_bytes_not_trusted_without_confirm() {
    let mut c = UpdateConfig::new(P);
    c.confirm_by_data = false;
    let (mut u, read) = lost_set(c);
    u.handle_reply(T, read, data(b"b", stat(10, 4)));
    assert_eq!(
        events(&mut u),
        [UpdateEvent::Failed {
            error: Error::ConnectionLoss
        }]
    );
}

#[test]
fn lost_reply_with_failed_sync_reads_again() {
    let mut u = update(UpdateConfig::new(P));
    let op = proposed(&mut u);
    u.handle_reply(T, op, Err(Error::ConnectionLoss));
    u.handle_session(T, SessionChange::Suspended);
    u.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = sent(&mut u);
    u.handle_reply(T, s[0].0, Err(Error::Overloaded)); // the sync was refused
    u.handle_reply(T, s[1].0, data(b"a", stat(10, 3))); // possibly stale: not used
    assert_eq!(events(&mut u), []);
    assert_eq!(sent(&mut u), []);
    let at = u.poll_timeout().expect("a backoff");
    u.handle_timeout(at);
    assert_eq!(lines(&sent(&mut u)), ["sync /c", "get /c"]);
}

#[test]
fn refused_set_is_sent_again_after_backoff() {
    let mut u = update(UpdateConfig::new(P));
    let op = proposed(&mut u);
    u.handle_reply(T, op, Err(Error::Overloaded));
    assert_eq!(sent(&mut u), []);
    assert_eq!(events(&mut u), []);
    // The first backoff is jittered within [5 ms, 10 ms] (Retry::for_id).
    let at = u.poll_timeout().expect("a backoff");
    assert!(
        at >= T + Duration::from_millis(5) && at <= T + Duration::from_millis(10),
        "{at:?}"
    );
    u.handle_timeout(T + Duration::from_millis(4));
    assert_eq!(sent(&mut u), []);
    u.handle_timeout(at);
    let s = expect_sent!(u, ["set /c 'b' @3"]);
    u.handle_reply(T, s[0].0, code(ErrorCode::Throttled));
    // The second doubles: within [10 ms, 20 ms].
    let at = u.poll_timeout().expect("a backoff");
    assert!(
        at >= T + Duration::from_millis(10) && at <= T + Duration::from_millis(20),
        "{at:?}"
    );
    u.handle_timeout(at);
    let s = expect_sent!(u, ["set /c 'b' @3"]);
    u.handle_reply(T, s[0].0, Ok(Response::Stat(stat(10, 4))));
    assert_eq!(events(&mut u), [UpdateEvent::Updated { stat: stat(10, 4) }]);
}

#[test]
fn sync_first_syncs_before_the_read() {
    let mut c = UpdateConfig::new(P);
    c.sync_first = true;
    let mut u = update(c);
    let s = expect_sent!(u, ["sync /c", "get /c"]);
    u.handle_reply(T, s[0].0, Ok(Response::Path(P.into())));
    u.handle_reply(T, s[1].0, data(b"a", stat(10, 3)));
    assert_eq!(events(&mut u), [current(b"a", stat(10, 3))]);
}

#[test]
fn expiry_during_write_verifies_on_the_next_session() {
    let mut u = update(UpdateConfig::new(P));
    let op = proposed(&mut u);
    u.handle_reply(T, op, Err(Error::SessionExpired));
    u.handle_session(T, SessionChange::Expired);
    assert_eq!(sent(&mut u), []);
    u.handle_session(T, SessionChange::Connected { session_id: S + 1 });
    let s = expect_sent!(u, ["sync /c", "get /c"]);
    u.handle_reply(T, s[0].0, Ok(Response::Path(P.into())));
    u.handle_reply(T, s[1].0, data(b"a", stat(10, 3)));
    assert_eq!(events(&mut u), [current(b"a", stat(10, 3))]);
}

#[test]
fn closed_with_write_in_doubt_says_may_have_applied() {
    let mut u = update(UpdateConfig::new(P));
    let op = proposed(&mut u);
    u.handle_reply(T, op, Err(Error::ConnectionLoss));
    u.handle_session(T, SessionChange::Closed);
    assert_eq!(
        events(&mut u),
        [UpdateEvent::Failed {
            error: Error::ConnectionLoss
        }]
    );
    let mut u = update(UpdateConfig::new(P));
    sent(&mut u);
    u.handle_session(T, SessionChange::Closed);
    assert_eq!(
        events(&mut u),
        [UpdateEvent::Failed {
            error: Error::Closed
        }]
    );
}

// ----- Counter -----

fn counter(format: CounterFormat) -> Counter {
    let mut c = Counter::new(P, format);
    c.handle_session(T, SessionChange::Connected { session_id: S });
    c
}

#[test]
fn counter_i32_is_curator_shared_count() {
    let mut c = counter(CounterFormat::I32);
    c.add(T, 1);
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(T, s[0].0, data(&[0, 0, 0, 41], stat(10, 7)));
    let s = expect_sent!(c, ["set /c 0x0000002a @7"]);
    c.handle_reply(T, s[0].0, Ok(Response::Stat(stat(10, 8))));
    assert_added(&mut c, 41, 42, stat(10, 8));
    // Negative values are two's complement, as Java's int. (A second later: read first.)
    let t = T + Duration::from_secs(1);
    c.add(t, -50);
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(t, s[0].0, data(&[0, 0, 0, 42], stat(10, 8)));
    assert_eq!(lines(&sent(&mut c)), ["set /c 0xfffffff8 @8"]);
}

/// An add whose sum leaves the format's range fails with `CounterOverflow` and writes
/// nothing (issue 36: `i64::MAX` added to 3 wrote -9223372036854775806; an `I32` at
/// `i32::MAX` plus 2 wrote `0x80000001`, as Java's int would wrap). The counter goes
/// on: the next add is applied. The same when the add writes without reading (right
/// after our own write).
#[test]
fn counter_add_that_overflows_fails_and_writes_nothing() {
    let overflow = |value, delta, width| {
        [CounterEvent::Failed {
            error: Error::CounterOverflow {
                value,
                delta,
                width,
            },
        }]
    };
    let mut c = counter(CounterFormat::I64);
    c.add(T, i64::MAX);
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(T, s[0].0, data(&3i64.to_be_bytes(), stat(10, 4)));
    assert_eq!(events(&mut c), overflow(3, i64::MAX, 8));
    assert_eq!(sent(&mut c), []);
    let t = T + Duration::from_secs(1);
    c.add(t, i64::MIN);
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(t, s[0].0, data(&(-1i64).to_be_bytes(), stat(10, 4)));
    assert_eq!(events(&mut c), overflow(-1, i64::MIN, 8));
    assert_eq!(sent(&mut c), []);

    let mut c = counter(CounterFormat::I32);
    c.add(T, 1);
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(T, s[0].0, data(&[0x7f, 0xff, 0xff, 0xfe], stat(10, 8)));
    let s = expect_sent!(c, ["set /c 0x7fffffff @8"]);
    c.handle_reply(T, s[0].0, Ok(Response::Stat(stat(10, 9))));
    assert_added(
        &mut c,
        i64::from(i32::MAX) - 1,
        i64::from(i32::MAX),
        stat(10, 9),
    );
    // Right after our write: no read, and still nothing written.
    c.add(T, 1);
    assert_eq!(events(&mut c), overflow(i64::from(i32::MAX), 1, 4));
    assert_eq!(sent(&mut c), []);
    c.add(T, -1); // the counter goes on (reading first: the refused add kept nothing)
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(T, s[0].0, data(&[0x7f, 0xff, 0xff, 0xff], stat(10, 9)));
    let s = expect_sent!(c, ["set /c 0x7ffffffe @9"]);
    c.handle_reply(T, s[0].0, Ok(Response::Stat(stat(10, 10))));
    assert_added(
        &mut c,
        i64::from(i32::MAX),
        i64::from(i32::MAX) - 1,
        stat(10, 10),
    );
    assert_eq!(
        Error::CounterOverflow {
            value: 3,
            delta: i64::MAX,
            width: 8
        }
        .to_string(),
        "adding 9223372036854775807 to the counter's 3 leaves its 64-bit range; nothing was written"
    );
}

/// A burst of increments (issue 25, item 3): an add asked within one round (read sent →
/// write answered) of our last write's answer writes against the value and version
/// that write left, without reading first: one request per increment while nobody else
/// writes. If someone did, the set is answered `BadVersion`, and the add waits and
/// reads as after any lost race. A get always reads; so does an add asked later.
#[test]
fn counter_add_right_after_our_write_skips_the_read() {
    let ms = |n: u64| T + Duration::from_millis(n);
    let mut c = counter(CounterFormat::I32);
    c.add(T, 1);
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(ms(1), s[0].0, data(&[0, 0, 0, 41], stat(10, 7)));
    let s = expect_sent!(c, ["set /c 0x0000002a @7"]);
    c.handle_reply(ms(2), s[0].0, Ok(Response::Stat(stat(10, 8)))); // a 2 ms round
    let added = |before, after, version| CounterEvent::Added {
        before,
        after,
        stat: stat(10, version),
    };
    assert_eq!(events(&mut c), [added(41, 42, 8)]);

    c.add(ms(3), 1); // 1 ms later: against v8, no read
    let s = expect_sent!(c, ["set /c 0x0000002b @8"]);
    c.handle_reply(ms(4), s[0].0, Ok(Response::Stat(stat(10, 9))));
    assert_eq!(events(&mut c), [added(42, 43, 9)]);

    c.add(ms(4), 1); // someone else wrote meanwhile
    let s = expect_sent!(c, ["set /c 0x0000002c @9"]);
    c.handle_reply(ms(5), s[0].0, code(ErrorCode::BadVersion));
    let t = waited(&mut c);
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(t, s[0].0, data(&[0, 0, 0, 50], stat(10, 10)));
    let s = expect_sent!(c, ["set /c 0x00000033 @10"]);
    c.handle_reply(t, s[0].0, Ok(Response::Stat(stat(10, 11))));
    assert_eq!(events(&mut c), [added(50, 51, 11)]);

    c.get(t); // a get reads, however recent our write
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(t, s[0].0, data(&[0, 0, 0, 51], stat(10, 11)));
    assert_eq!(
        events(&mut c),
        [CounterEvent::Value {
            value: 51,
            stat: Some(stat(10, 11))
        }]
    );
    c.add(t, 1); // the get came in between: read
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(t, s[0].0, data(&[0, 0, 0, 51], stat(10, 11)));
    let s = sent(&mut c);
    c.handle_reply(t, s[0].0, Ok(Response::Stat(stat(10, 12))));
    assert_eq!(events(&mut c), [added(51, 52, 12)]);

    c.add(t + Duration::from_secs(1), 1); // a second later: read first
    assert_eq!(lines(&sent(&mut c)), ["get /c"]);
}

#[test]
fn counter_i64_is_curator_atomic_long_and_missing_is_zero() {
    let mut c = counter(CounterFormat::I64);
    c.add(T, -3);
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, code(ErrorCode::NoNode));
    let s = expect_sent!(c, ["create2 /c 0xfffffffffffffffd"]);
    c.handle_reply(
        T,
        s[0].0,
        Ok(Response::PathStat {
            path: P.into(),
            stat: stat(40, 0),
        }),
    );
    assert_eq!(
        events(&mut c),
        [CounterEvent::Added {
            before: 0,
            after: -3,
            stat: stat(40, 0)
        }]
    );
    // Empty data (a node made by an ensure-path helper) counts as 0. (A second later:
    // read first.)
    let t = T + Duration::from_secs(1);
    c.add(t, 5);
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(t, s[0].0, data(&[], stat(40, 1)));
    assert_eq!(lines(&sent(&mut c)), ["set /c 0x0000000000000005 @1"]);
}

#[test]
fn counter_malformed_data_fails_and_writes_nothing() {
    let mut c = counter(CounterFormat::I32);
    c.add(T, 1);
    c.get(T);
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data(&[1, 2, 3], stat(10, 1)));
    assert_eq!(
        events(&mut c),
        [CounterEvent::Failed {
            error: Error::BadCounter {
                expected: 4,
                found: 3
            }
        }]
    );
    // The next operation (the get) runs; it fails the same way, nothing is written.
    let s = expect_sent!(c, ["get /c"]);
    c.handle_reply(T, s[0].0, data(&[0; 8], stat(10, 1)));
    assert_eq!(
        events(&mut c),
        [CounterEvent::Failed {
            error: Error::BadCounter {
                expected: 4,
                found: 8
            }
        }]
    );
    assert_eq!(sent(&mut c), []);
    assert_eq!(
        counter_value(&[0; 8], CounterFormat::I64),
        Ok(0),
        "8 bytes are an I64"
    );
    assert_eq!(
        counter_value(&[1, 2, 3], CounterFormat::I64)
            .unwrap_err()
            .to_string(),
        "the counter node holds 3 bytes, not an 8-byte big-endian integer; nothing was written"
    );
}

#[test]
fn counter_get_and_out_of_range_delta() {
    let mut c = counter(CounterFormat::I32);
    c.add(T, i64::from(i32::MAX) + 1);
    assert_eq!(
        events(&mut c),
        [CounterEvent::Failed {
            error: Error::Server(ErrorCode::BadArguments)
        }]
    );
    assert_eq!(sent(&mut c), []);
    c.get(T);
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data(&[0xff, 0xff, 0xff, 0xfe], stat(10, 2)));
    assert_eq!(
        events(&mut c),
        [CounterEvent::Value {
            value: -2,
            stat: Some(stat(10, 2))
        }]
    );
    assert_eq!(sent(&mut c), []);
}

/// The reply to `op` is lost with the connection; the same session comes back: what
/// the counter sends then.
fn lose_and_reconnect(c: &mut Counter, op: OpId) -> Vec<(OpId, String)> {
    c.handle_reply(T, op, Err(Error::ConnectionLoss));
    c.handle_session(T, SessionChange::Suspended);
    c.handle_session(T, SessionChange::Reconnected { session_id: S });
    sent(c)
}

/// The one event is `Added { before, after, stat }`.
fn assert_added(c: &mut Counter, before: i64, after: i64, st: Stat) {
    assert_eq!(
        events(c),
        [CounterEvent::Added {
            before,
            after,
            stat: st
        }]
    );
}

#[test]
fn counter_lost_reply_same_bytes_is_not_counted() {
    let mut c = counter(CounterFormat::I32);
    c.add(T, 1);
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data(&[0, 0, 0, 1], stat(10, 1)));
    let s = sent(&mut c);
    let s = lose_and_reconnect(&mut c, s[0].0);
    assert_eq!(lines(&s), ["sync /c", "get /c"]);
    c.handle_reply(T, s[0].0, Ok(Response::Path(P.into())));
    // Our bytes at the next version: ours, or a twin adder's; cannot be told apart.
    c.handle_reply(T, s[1].0, data(&[0, 0, 0, 2], stat(10, 2)));
    let e = events(&mut c);
    assert_eq!(
        e,
        [CounterEvent::Failed {
            error: Error::ConnectionLoss
        }]
    );
}

#[test]
fn counter_lost_reply_not_applied_retries() {
    let mut c = counter(CounterFormat::I32);
    c.add(T, 1);
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data(&[0, 0, 0, 1], stat(10, 1)));
    let s = sent(&mut c);
    let s = lose_and_reconnect(&mut c, s[0].0);
    c.handle_reply(T, s[0].0, Ok(Response::Path(P.into())));
    c.handle_reply(T, s[1].0, data(&[0, 0, 0, 1], stat(10, 1)));
    let s = expect_sent!(c, ["set /c 0x00000002 @1"]);
    c.handle_reply(T, s[0].0, Ok(Response::Stat(stat(10, 2))));
    assert_added(&mut c, 1, 2, stat(10, 2));
}

/// An add's set sent without a read (right after our last write) whose reply is lost is
/// verified like any other: the node still at the version we wrote against, it was not
/// applied, and the add goes on; nothing counted twice.
#[test]
fn counter_add_without_read_lost_reply_is_verified() {
    let mut c = counter(CounterFormat::I32);
    c.add(T, 1);
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data(&[0, 0, 0, 1], stat(10, 1)));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, Ok(Response::Stat(stat(10, 2))));
    events(&mut c);
    c.add(T, 1);
    let s = expect_sent!(c, ["set /c 0x00000003 @2"]);
    let s = lose_and_reconnect(&mut c, s[0].0);
    assert_eq!(lines(&s), ["sync /c", "get /c"]);
    c.handle_reply(T, s[0].0, Ok(Response::Path(P.into())));
    c.handle_reply(T, s[1].0, data(&[0, 0, 0, 2], stat(10, 2)));
    let s = expect_sent!(c, ["set /c 0x00000003 @2"]);
    c.handle_reply(T, s[0].0, Ok(Response::Stat(stat(10, 3))));
    assert_added(&mut c, 2, 3, stat(10, 3));
    // The reconnect forgot what we wrote: the next add reads first.
    c.handle_session(T, SessionChange::Suspended);
    c.handle_session(T, SessionChange::Reconnected { session_id: S });
    c.add(T, 1);
    assert_eq!(lines(&sent(&mut c)), ["sync /c", "get /c"]);
}

#[test]
fn counter_close_fails_pending_and_ends() {
    let mut c = counter(CounterFormat::I64);
    c.add(T, 1);
    c.add(T, 2);
    sent(&mut c);
    c.close(T);
    assert_eq!(
        events(&mut c),
        [
            CounterEvent::Failed {
                error: Error::Closed
            },
            CounterEvent::Failed {
                error: Error::Closed
            },
            CounterEvent::Closed
        ]
    );
    assert!(c.is_done());
}

#[test]
fn counter_session_closed_with_add_in_doubt() {
    let mut c = counter(CounterFormat::I32);
    c.add(T, 1);
    c.add(T, 1);
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data(&[0, 0, 0, 1], stat(10, 1)));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, Err(Error::ConnectionLoss));
    c.handle_session(T, SessionChange::Suspended);
    c.handle_session(T, SessionChange::Closed);
    assert_eq!(
        events(&mut c),
        [
            CounterEvent::Failed {
                error: Error::ConnectionLoss
            },
            CounterEvent::Failed {
                error: Error::Closed
            },
            CounterEvent::Closed
        ]
    );
    c.add(T, 1); // ignored after Closed
    assert_eq!(events(&mut c), []);
    assert_eq!(sent(&mut c), []);
    assert!(c.is_done());
}

#[test]
fn closed_with_write_on_the_wire_says_may_have_applied() {
    let mut u = update(UpdateConfig::new(P));
    proposed(&mut u); // the set is sent, no reply yet
    u.handle_session(T, SessionChange::Closed);
    assert_eq!(
        events(&mut u),
        [UpdateEvent::Failed {
            error: Error::ConnectionLoss
        }]
    );
}
