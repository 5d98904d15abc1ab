//! Transcript tests for `recipe::config`: scripted replies in, exact requests and
//! events out, in the lines of `kit.rs`.

use super::kit::*;
use zk_recipes::recipe::config::{
    ConfigReader, ConfigSnapshot, ConfigWriter, ReaderConfig, ReaderEvent, WriterConfig,
    WriterEvent,
};

const T: Instant = Instant::ZERO;
const S: i64 = 0x77;
const READY: &str = "/cfg/ready";
const A: &str = "/cfg/a";
const B: &str = "/cfg/b";

fn stat(czxid: i64, mzxid: i64) -> Stat {
    Stat {
        czxid,
        mzxid,
        version: (mzxid - czxid) as i32,
        ..Stat::default()
    }
}

fn reader(config: ReaderConfig) -> ConfigReader {
    let mut r = ConfigReader::new(config);
    r.handle_session(T, SessionChange::Connected { session_id: S });
    r.start(T);
    r
}

fn snap(vals: &[(&str, Option<&'static str>)], versions: &[Option<i32>], zxid: i64) -> ReaderEvent {
    ReaderEvent::Snapshot(ConfigSnapshot {
        values: vals
            .iter()
            .map(|(p, v)| (p.to_string(), v.map(Bytes::from_static_str)))
            .collect(),
        versions: versions.to_vec(),
        zxid,
    })
}

trait FromStaticStr {
    fn from_static_str(s: &'static str) -> Bytes;
}
impl FromStaticStr for Bytes {
    fn from_static_str(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }
}

/// Answers a round: ready's Stat (or missing), then the nodes' values.
fn answer(r: &mut ConfigReader, ops: &[(OpId, String)], replies: Vec<Result<Response, Error>>) {
    assert_eq!(ops.len(), replies.len(), "{ops:?}");
    for ((op, _), reply) in ops.iter().zip(replies) {
        r.handle_reply(T, *op, reply);
    }
}

#[test]
fn reader_pipelines_ready_then_every_node_and_reports_a_snapshot() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A, B]));
    let round = expect_sent!(r, ["exists! /cfg/ready", "get! /cfg/a", "get! /cfg/b"]);
    assert!(!r.is_ready(), "nothing read yet: `ready` not seen");
    answer(
        &mut r,
        &round,
        vec![
            Ok(Response::Stat(stat(9, 9))),
            data("1", stat(3, 7)),
            data("1", stat(4, 8)),
        ],
    );
    assert_eq!(
        events(&mut r),
        [snap(
            &[(A, Some("1")), (B, Some("1"))],
            &[Some(4), Some(4)],
            9
        )]
    );
    assert!(r.is_ready());
    // Watches armed: nothing more is sent until a notification.
    assert!(sent(&mut r).is_empty());
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn reader_waits_for_ready_and_discards_a_round_that_saw_ready_deleted() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A, B]));
    let round = sent(&mut r);
    // ready missing: NotReady; the exists watch waits for it.
    answer(
        &mut r,
        &round,
        vec![no_node(), data("1", stat(3, 7)), data("2", stat(4, 8))],
    );
    assert_eq!(events(&mut r), [ReaderEvent::NotReady]);
    assert!(sent(&mut r).is_empty());
    // A node changes while ready is missing: no round (ready's creation starts one).
    r.handle_watch(T, round[1].0, &ev(EventType::NodeDataChanged, A));
    assert!(sent(&mut r).is_empty());
    // ready created: read again; a is re-watched, b is read without a new watch.
    r.handle_watch(T, round[0].0, &ev(EventType::NodeCreated, READY));
    let round2 = expect_sent!(r, ["exists! /cfg/ready", "get! /cfg/a", "get /cfg/b"]);
    // ready is deleted while the round is on the wire: the notification comes before
    // the replies that follow it; everything read is discarded.
    r.handle_reply(T, round2[0].0, Ok(Response::Stat(stat(20, 20))));
    r.handle_watch(T, round2[0].0, &ev(EventType::NodeDeleted, READY));
    // Still not ready since the last report: nothing new to say.
    assert!(events(&mut r).is_empty());
    r.handle_reply(T, round2[1].0, data("3", stat(3, 21)));
    r.handle_reply(T, round2[2].0, data("2", stat(4, 8)));
    assert!(
        events(&mut r).is_empty(),
        "a mixed configuration was reported"
    );
    let round3 = expect_sent!(r, ["exists! /cfg/ready", "get /cfg/a", "get /cfg/b"]);
    answer(
        &mut r,
        &round3,
        vec![
            Ok(Response::Stat(stat(30, 30))),
            data("3", stat(3, 21)),
            data("3", stat(4, 22)),
        ],
    );
    assert_eq!(
        events(&mut r),
        [snap(
            &[(A, Some("3")), (B, Some("3"))],
            &[Some(18), Some(18)],
            30
        )]
    );
}

#[test]
fn reader_rereads_on_a_node_change_while_ready_exists() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A]));
    let round = sent(&mut r);
    answer(
        &mut r,
        &round,
        vec![Ok(Response::Stat(stat(9, 9))), data("1", stat(3, 3))],
    );
    assert_eq!(events(&mut r).len(), 1);
    // A multi writer changed a: one more round, a new snapshot.
    r.handle_watch(T, round[1].0, &ev(EventType::NodeDataChanged, A));
    let round2 = expect_sent!(r, ["exists /cfg/ready", "get! /cfg/a"]);
    answer(
        &mut r,
        &round2,
        vec![Ok(Response::Stat(stat(9, 9))), data("2", stat(3, 12))],
    );
    assert_eq!(events(&mut r), [snap(&[(A, Some("2"))], &[Some(9)], 12)]);
}

#[test]
fn reader_watches_a_missing_node_with_exists_before_trusting_it() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A]));
    let round = sent(&mut r);
    // getData on a missing node sets no watch: the round is done again with exists.
    answer(
        &mut r,
        &round,
        vec![Ok(Response::Stat(stat(9, 9))), no_node()],
    );
    assert!(events(&mut r).is_empty());
    let round2 = expect_sent!(r, ["exists /cfg/ready", "exists! /cfg/a", "get /cfg/a"]);
    answer(
        &mut r,
        &round2,
        vec![Ok(Response::Stat(stat(9, 9))), no_node(), no_node()],
    );
    assert_eq!(events(&mut r), [snap(&[(A, None)], &[None], 9)]);
}

#[test]
fn reader_syncs_after_a_reconnect_and_reports_nothing_new_if_nothing_changed() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A]).sync_first(false));
    let round = sent(&mut r);
    answer(
        &mut r,
        &round,
        vec![Ok(Response::Stat(stat(9, 9))), data("1", stat(3, 3))],
    );
    assert_eq!(events(&mut r).len(), 1);
    r.handle_session(T, SessionChange::Suspended);
    r.handle_session(T, SessionChange::Reconnected { session_id: S });
    let round2 = expect_sent!(r, ["sync /cfg/ready", "exists /cfg/ready", "get /cfg/a"]);
    answer(
        &mut r,
        &round2,
        vec![
            Ok(Response::Path(READY.into())),
            Ok(Response::Stat(stat(9, 9))),
            data("1", stat(3, 3)),
        ],
    );
    assert!(
        events(&mut r).is_empty(),
        "same configuration reported twice"
    );
}

#[test]
fn reader_redoes_a_round_that_lost_its_connection_and_starts_over_after_expiry() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A]));
    let round = sent(&mut r);
    r.handle_session(T, SessionChange::Suspended);
    for (op, _) in &round {
        r.handle_reply(T, *op, Err(Error::ConnectionLoss));
    }
    assert!(sent(&mut r).is_empty(), "retried while suspended");
    r.handle_session(T, SessionChange::Reconnected { session_id: S });
    expect_sent!(r, ["sync /cfg/ready", "exists! /cfg/ready", "get! /cfg/a"]);
    // The session expires mid-round; a new one starts: new watches.
    r.handle_session(T, SessionChange::Expired);
    r.handle_session(T, SessionChange::Connected { session_id: S + 1 });
    let round3 = expect_sent!(r, ["sync /cfg/ready", "exists! /cfg/ready", "get! /cfg/a"]);
    answer(
        &mut r,
        &round3,
        vec![
            Ok(Response::Path(READY.into())),
            Ok(Response::Stat(stat(9, 9))),
            data("1", stat(3, 3)),
        ],
    );
    assert_eq!(events(&mut r), [snap(&[(A, Some("1"))], &[Some(0)], 9)]);
    r.handle_session(T, SessionChange::Closed);
    assert_eq!(events(&mut r), [ReaderEvent::Failed(Error::Closed)]);
    assert!(r.is_done());
}

#[test]
fn reader_sync_first_syncs_every_round() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A]).sync_first(true));
    assert_eq!(
        lines(&sent(&mut r)),
        ["sync /cfg/ready", "exists! /cfg/ready", "get! /cfg/a"]
    );
}

#[test]
fn multi_reader_arms_watches_then_one_multiread() {
    let mut r = reader(ReaderConfig::multi(&[A, B]));
    let round = expect_sent!(
        r,
        [
            "exists! /cfg/a",
            "exists! /cfg/b",
            "multiRead[get /cfg/a, get /cfg/b]"
        ]
    );
    let mr = Ok(Response::Multi(vec![
        MultiResult::GetData {
            data: Bytes::from_static(b"5"),
            stat: stat(3, 40),
        },
        MultiResult::Error(ErrorCode::NoNode),
    ]));
    answer(
        &mut r,
        &round,
        vec![Ok(Response::Stat(stat(3, 40))), no_node(), mr],
    );
    assert_eq!(
        events(&mut r),
        [snap(&[(A, Some("5")), (B, None)], &[Some(37), None], 40)]
    );
    // b created: only b's watch is re-armed.
    r.handle_watch(T, round[1].0, &ev(EventType::NodeCreated, B));
    assert_eq!(
        lines(&sent(&mut r)),
        ["exists! /cfg/b", "multiRead[get /cfg/a, get /cfg/b]"]
    );
}

#[test]
fn multi_reader_fails_when_the_server_has_no_multiread() {
    let mut r = reader(ReaderConfig::multi(&[A]));
    let round = sent(&mut r);
    answer(
        &mut r,
        &round,
        vec![
            Ok(Response::Stat(stat(3, 3))),
            Err(Error::from(ErrorCode::Unimplemented)),
        ],
    );
    assert_eq!(
        events(&mut r),
        [ReaderEvent::Failed(Error::from(ErrorCode::Unimplemented))]
    );
}

fn writer(config: WriterConfig, updates: &[(&str, &'static str)]) -> ConfigWriter {
    let updates = updates
        .iter()
        .map(|(p, v)| (p.to_string(), Bytes::from_static(v.as_bytes())))
        .collect();
    let mut w = ConfigWriter::new(config, updates);
    w.handle_session(T, SessionChange::Connected { session_id: S });
    w.start(T);
    w
}

fn set_ok() -> Result<Response, Error> {
    Ok(Response::Stat(stat(1, 2)))
}

#[test]
fn writer_deletes_ready_then_pipelines_every_set_then_creates_ready() {
    let mut w = writer(WriterConfig::ready_node(READY), &[(A, "7"), (B, "7")]);
    let d = expect_sent!(w, ["delete /cfg/ready"]);
    w.handle_reply(T, d[0].0, no_node()); // already gone: fine
    let sets = expect_sent!(w, ["set /cfg/a '7'", "set /cfg/b '7'"]);
    w.handle_reply(T, sets[0].0, set_ok());
    assert!(
        sent(&mut w).is_empty(),
        "ready created before every node was written"
    );
    w.handle_reply(T, sets[1].0, set_ok());
    let c = expect_sent!(w, ["create /cfg/ready"]);
    w.handle_reply(T, c[0].0, Ok(Response::Path(READY.into())));
    assert_eq!(events(&mut w), [WriterEvent::Written]);
    assert!(w.is_done());
}

#[test]
fn writer_creates_missing_nodes_and_parents_before_ready() {
    let mut w = writer(
        WriterConfig::ready_node("/r/ready"),
        &[("/x/y", "1"), (A, "1")],
    );
    let d = sent(&mut w);
    w.handle_reply(T, d[0].0, ok());
    let sets = sent(&mut w);
    w.handle_reply(T, sets[0].0, no_node());
    w.handle_reply(T, sets[1].0, set_ok());
    let c = expect_sent!(w, ["create /x/y '1'"]);
    w.handle_reply(T, c[0].0, no_node()); // parent missing
    let c2 = expect_sent!(w, ["container /x", "create /x/y '1'"]);
    w.handle_reply(T, c2[0].0, Ok(Response::Path("/x".into())));
    w.handle_reply(T, c2[1].0, Ok(Response::Path("/x/y".into())));
    let r = expect_sent!(w, ["create /r/ready"]);
    w.handle_reply(T, r[0].0, no_node());
    let r2 = expect_sent!(w, ["container /r", "create /r/ready"]);
    w.handle_reply(T, r2[0].0, ok());
    w.handle_reply(T, r2[1].0, Err(Error::from(ErrorCode::NodeExists)));
    assert_eq!(events(&mut w), [WriterEvent::Written]);
}

#[test]
fn writer_resumes_after_lost_replies_with_ready_last() {
    let mut w = writer(WriterConfig::ready_node(READY), &[(A, "7"), (B, "7")]);
    let d = sent(&mut w);
    w.handle_reply(T, d[0].0, ok());
    let sets = sent(&mut w);
    // a applied and answered; b's reply lost with the connection.
    w.handle_reply(T, sets[0].0, set_ok());
    w.handle_session(T, SessionChange::Suspended);
    w.handle_reply(T, sets[1].0, Err(Error::ConnectionLoss));
    assert!(sent(&mut w).is_empty());
    w.handle_session(T, SessionChange::Reconnected { session_id: S });
    // Starts again from delete(ready); only b is resent; ready comes back last.
    let d2 = expect_sent!(w, ["delete /cfg/ready"]);
    w.handle_reply(T, d2[0].0, no_node());
    let s2 = expect_sent!(w, ["set /cfg/b '7'"]);
    w.handle_reply(T, s2[0].0, set_ok());
    let c = expect_sent!(w, ["create /cfg/ready"]);
    // create(ready) applied, reply lost: resent, NodeExists is success.
    w.handle_session(T, SessionChange::Suspended);
    w.handle_reply(T, c[0].0, Err(Error::ConnectionLoss));
    w.handle_session(T, SessionChange::Reconnected { session_id: S });
    let c2 = expect_sent!(w, ["create /cfg/ready"]);
    w.handle_reply(T, c2[0].0, Err(Error::from(ErrorCode::NodeExists)));
    assert_eq!(events(&mut w), [WriterEvent::Written]);
}

#[test]
fn writer_never_writes_after_a_refused_delete() {
    let mut w = writer(WriterConfig::ready_node(READY), &[(A, "7")]);
    let d = sent(&mut w);
    w.handle_reply(T, d[0].0, Err(Error::Overloaded));
    assert!(sent(&mut w).is_empty(), "no retry before the backoff");
    let at = w.poll_timeout().expect("a backoff deadline");
    w.handle_timeout(at);
    assert_eq!(lines(&sent(&mut w)), ["delete /cfg/ready"]);
}

#[test]
fn writer_fails_on_no_auth() {
    let mut w = writer(WriterConfig::ready_node(READY), &[(A, "7")]);
    let d = sent(&mut w);
    w.handle_reply(T, d[0].0, ok());
    let s = sent(&mut w);
    w.handle_reply(T, s[0].0, Err(Error::from(ErrorCode::NoAuth)));
    assert_eq!(
        events(&mut w),
        [WriterEvent::Failed(Error::from(ErrorCode::NoAuth))]
    );
    assert!(w.is_done());
}

#[test]
fn multi_writer_sends_one_multi_and_probes_after_a_missing_node() {
    let mut w = writer(WriterConfig::multi(), &[(A, "3"), ("/x/y", "3")]);
    let m = expect_sent!(w, ["multi[set /cfg/a '3', set /x/y '3']"]);
    w.handle_reply(
        T,
        m[0].0,
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::NoNode),
        ])),
    );
    let p = expect_sent!(w, ["exists /cfg/a", "exists /x/y"]);
    w.handle_reply(T, p[0].0, Ok(Response::Stat(stat(1, 1))));
    w.handle_reply(T, p[1].0, no_node());
    let m2 = expect_sent!(
        w,
        ["container /x", "multi[set /cfg/a '3', create /x/y '3']"]
    );
    w.handle_reply(T, m2[0].0, ok());
    w.handle_reply(
        T,
        m2[1].0,
        Ok(Response::Multi(vec![
            MultiResult::SetData(stat(1, 5)),
            MultiResult::Create("/x/y".into()),
        ])),
    );
    assert_eq!(events(&mut w), [WriterEvent::Written]);
}

#[test]
fn multi_writer_refuses_a_write_larger_than_the_limit_up_front() {
    let big: Vec<(String, Bytes)> = (0..20)
        .map(|i| (format!("/cfg/n{i}"), Bytes::from(vec![b'x'; 60_000])))
        .collect();
    let mut w = ConfigWriter::new(WriterConfig::multi(), big);
    w.handle_session(T, SessionChange::Connected { session_id: S });
    w.start(T);
    assert!(sent(&mut w).is_empty());
    match events(&mut w).as_slice() {
        [WriterEvent::Failed(Error::TooLarge(t))] => {
            assert!(t.len > 1_200_000, "{t:?}");
            assert_eq!(t.max, WriterConfig::MAX_MULTI_BYTES);
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn multi_writer_resends_after_a_lost_reply() {
    let mut w = writer(WriterConfig::multi(), &[(A, "3")]);
    let m = sent(&mut w);
    w.handle_session(T, SessionChange::Suspended);
    w.handle_reply(T, m[0].0, Err(Error::ConnectionLoss));
    w.handle_session(T, SessionChange::Reconnected { session_id: S });
    assert_eq!(lines(&sent(&mut w)), ["multi[set /cfg/a '3']"]);
}

#[test]
fn invalid_paths_end_at_once() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A, A]));
    assert!(matches!(
        events(&mut r).as_slice(),
        [ReaderEvent::Failed(_)]
    ));
    let mut w = writer(WriterConfig::ready_node("bad"), &[(A, "1")]);
    assert!(matches!(
        events(&mut w).as_slice(),
        [WriterEvent::Failed(Error::InvalidPath { .. })]
    ));
    assert!(sent(&mut w).is_empty());
}

// ----- the watcher lifecycle (pinned with the port to the shared watcher) -----

#[test]
fn reader_refused_round_backs_off_then_syncs_and_rearms() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A]));
    let round = expect_sent!(r, ["exists! /cfg/ready", "get! /cfg/a"]);
    for (op, _) in &round {
        r.handle_reply(T, *op, Err(Error::Overloaded));
    }
    assert!(sent(&mut r).is_empty(), "backing off");
    assert!(!r.is_idle());
    let at = r.poll_timeout().expect("a deadline");
    r.handle_timeout(at);
    expect_sent!(r, ["sync /cfg/ready", "exists! /cfg/ready", "get! /cfg/a"]);
    assert_eq!(
        r.poll_timeout(),
        None,
        "a round in flight waits for no timer"
    );
}

#[test]
fn reader_closed_while_backing_off_has_no_deadline_and_ignores_the_session() {
    let mut r = reader(ReaderConfig::ready_node(READY, &[A]));
    let round = sent(&mut r);
    for (op, _) in &round {
        r.handle_reply(T, *op, Err(Error::Overloaded));
    }
    assert!(r.poll_timeout().is_some());
    r.close(T);
    assert_eq!(r.poll_timeout(), None);
    r.handle_session(T, SessionChange::Reconnected { session_id: S });
    assert_eq!(events(&mut r), [ReaderEvent::Closed]);
    assert!(sent(&mut r).is_empty());
    assert!(r.is_done());
}
