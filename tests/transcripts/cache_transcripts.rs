//! Transcript tests for `recipe::cache::TreeCache`: scripted replies and notifications
//! in, exact requests and events out (requests in the lines of `kit.rs`).

use super::kit::*;
use zk_recipes::recipe::cache::{CacheConfig, CacheEvent, TreeCache, WatchStyle};

const T: Instant = Instant::ZERO;
const S: i64 = 0x77;

/// The cache's events, one line each: `created /p data m<mzxid>`, `changed ...`, `deleted /p`.
fn cache_events(r: &mut TreeCache) -> Vec<String> {
    events(r)
        .into_iter()
        .map(|e| match e {
            CacheEvent::Created { path, data, stat } => format!(
                "created {path} {} m{}",
                String::from_utf8_lossy(&data),
                stat.mzxid
            ),
            CacheEvent::Changed { path, data, stat } => format!(
                "changed {path} {} m{}",
                String::from_utf8_lossy(&data),
                stat.mzxid
            ),
            CacheEvent::Deleted { path } => format!("deleted {path}"),
            other => format!("{other:?}"),
        })
        .collect()
}

fn data(d: &'static str, czxid: i64, mzxid: i64) -> Result<Response, Error> {
    Ok(Response::Data {
        data: Bytes::from_static(d.as_bytes()),
        stat: st().czxid(czxid).mzxid(mzxid).pzxid(0),
    })
}

fn kids(names: &[&str], czxid: i64, pzxid: i64) -> Result<Response, Error> {
    Ok(Response::Children2 {
        children: names.iter().map(|s| s.to_string()).collect(),
        stat: st().czxid(czxid).mzxid(0).pzxid(pzxid),
    })
}

fn started(config: CacheConfig) -> TreeCache {
    let mut c = TreeCache::new(config);
    c.handle_session(T, SessionChange::Connected { session_id: S });
    c.start(T);
    c
}

/// Answers the load's first four requests (`s`: addWatch, sync, read and listing of
/// `/r`): the root with data "root" and children `kids` (pzxid `pzxid`).
fn answer_the_root(c: &mut TreeCache, s: &[(OpId, String)], kids_of_root: &[&str], pzxid: i64) {
    c.handle_reply(T, s[0].0, Ok(Response::WatchAdded));
    c.handle_reply(T, s[1].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[2].0, data("root", 1, 1));
    c.handle_reply(T, s[3].0, kids(kids_of_root, 1, pzxid));
}

/// Loads `/r` = { a: "1" (czxid 2), b: "2" (czxid 3) }; returns the cache and the
/// addWatch op.
fn loaded() -> (TreeCache, OpId) {
    let mut c = started(CacheConfig::tree("/r"));
    let s = expect_sent!(c, ["addWatch /r 1", "sync /r", "get /r", "list2 /r"]);
    let w = s[0].0;
    answer_the_root(&mut c, &s, &["b", "a"], 3);
    let s = expect_sent!(c, ["get /r/a", "list2 /r/a", "get /r/b", "list2 /r/b"]);
    c.handle_reply(T, s[0].0, data("1", 2, 2));
    c.handle_reply(T, s[1].0, kids(&[], 2, 2));
    c.handle_reply(T, s[2].0, data("2", 3, 3));
    assert_eq!(
        cache_events(&mut c),
        [
            "created /r root m1",
            "created /r/a 1 m2",
            "created /r/b 2 m3"
        ]
    );
    assert!(!c.is_initialized(), "one listing still in flight");
    c.handle_reply(T, s[3].0, kids(&[], 3, 3));
    assert_eq!(cache_events(&mut c), ["Initialized"]);
    assert_eq!(c.watch_style(), WatchStyle::Persistent);
    assert!(c.is_synced());
    (c, w)
}

#[test]
fn load_arms_first_then_reads_breadth_first() {
    let (c, _) = loaded();
    assert_eq!(c.len(), 3);
    assert_eq!(c.children("/r"), ["a", "b"]);
    assert_eq!(c.get("/r/b").map(|n| &n.data[..]), Some(&b"2"[..]));
    assert!(c.get("/r/c").is_none());
}

#[test]
fn notifications_after_the_load_read_and_report_in_order() {
    let (mut c, w) = loaded();
    c.handle_watch(T, w, &ev(EventType::NodeCreated, "/r/a/x"));
    c.handle_watch(T, w, &ev(EventType::NodeDataChanged, "/r/b"));
    c.handle_watch(T, w, &ev(EventType::NodeDeleted, "/r/a/x"));
    assert!(cache_events(&mut c).is_empty(), "x was never cached");
    let s = expect_sent!(c, ["get /r/a/x", "list2 /r/a/x", "get /r/b"]);
    // The read of x was answered after its deletion.
    c.handle_reply(T, s[0].0, no_node());
    c.handle_reply(T, s[1].0, no_node());
    c.handle_reply(T, s[2].0, data("2b", 3, 9));
    assert_eq!(cache_events(&mut c), ["changed /r/b 2b m9"]);
    c.handle_watch(T, w, &ev(EventType::NodeDeleted, "/r/b"));
    assert_eq!(cache_events(&mut c), ["deleted /r/b"]);
    assert!(sent(&mut c).is_empty(), "a deletion needs no read");
    assert_eq!(c.children("/r"), ["a"]);
}

#[test]
fn notifications_during_the_load_are_applied_in_order() {
    let mut c = started(CacheConfig::tree("/r"));
    let s = sent(&mut c);
    let w = s[0].0;
    answer_the_root(&mut c, &s, &["b"], 2);
    let s = expect_sent!(c, ["get /r/b", "list2 /r/b"]);
    // While /r/b is being read: /r/a is created (after the root's listing, which did
    // not have it), the root changes, /r/b is deleted after it was read.
    c.handle_reply(T, s[0].0, data("2", 2, 2));
    c.handle_watch(T, w, &ev(EventType::NodeCreated, "/r/a"));
    c.handle_watch(T, w, &ev(EventType::NodeDataChanged, "/r"));
    c.handle_watch(T, w, &ev(EventType::NodeDeleted, "/r/b"));
    c.handle_reply(T, s[1].0, no_node());
    assert_eq!(
        cache_events(&mut c),
        ["created /r root m1", "created /r/b 2 m2", "deleted /r/b"]
    );
    let s = expect_sent!(c, ["get /r/a", "list2 /r/a", "get /r"]);
    c.handle_reply(T, s[0].0, data("1", 5, 5));
    c.handle_reply(T, s[1].0, kids(&[], 5, 5));
    assert!(!c.is_initialized(), "a read is still out");
    c.handle_reply(T, s[2].0, data("root2", 1, 6));
    assert_eq!(
        cache_events(&mut c),
        ["created /r/a 1 m5", "changed /r root2 m6", "Initialized"]
    );
    assert_eq!(c.children("/r"), ["a"]);
}

#[test]
fn a_read_older_than_what_is_held_does_not_overwrite_it() {
    let (mut c, w) = loaded();
    // Two changes, two reads; the replies come back newest first (as they could from a
    // lagging server): the older one must not win.
    c.handle_watch(T, w, &ev(EventType::NodeDataChanged, "/r/a"));
    let s1 = sent(&mut c);
    c.handle_watch(T, w, &ev(EventType::NodeDataChanged, "/r/a"));
    let s2 = sent(&mut c);
    c.handle_reply(T, s2[0].0, data("new", 2, 8));
    c.handle_reply(T, s1[0].0, data("old", 2, 7));
    assert_eq!(cache_events(&mut c), ["changed /r/a new m8"]);
    assert_eq!(c.get("/r/a").map(|n| n.stat.mzxid), Some(8));
    // The same version again is no change.
    c.handle_watch(T, w, &ev(EventType::NodeDataChanged, "/r/a"));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data("new", 2, 8));
    assert!(cache_events(&mut c).is_empty());
}

#[test]
fn a_deleted_node_read_before_its_deletion_is_not_resurrected() {
    let (mut c, w) = loaded();
    c.handle_watch(T, w, &ev(EventType::NodeDataChanged, "/r/a"));
    let s = sent(&mut c);
    c.handle_watch(T, w, &ev(EventType::NodeDeleted, "/r/a"));
    assert_eq!(cache_events(&mut c), ["deleted /r/a"]);
    // A reply carrying the deleted incarnation (czxid 2) is stale.
    c.handle_reply(T, s[0].0, data("ghost", 2, 7));
    assert!(cache_events(&mut c).is_empty());
    assert!(c.get("/r/a").is_none());
    // A re-created node (greater czxid) is new.
    c.handle_watch(T, w, &ev(EventType::NodeCreated, "/r/a"));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data("again", 11, 11));
    assert_eq!(cache_events(&mut c), ["created /r/a again m11"]);
}

#[test]
fn an_older_listing_is_ignored() {
    let (mut c, w) = loaded();
    c.handle_watch(T, w, &ev(EventType::NodeCreated, "/r/a/x"));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data("x", 20, 20));
    c.handle_reply(T, s[1].0, kids(&[], 20, 20));
    assert_eq!(cache_events(&mut c), ["created /r/a/x x m20"]);
    // A listing of /r/a older than x's creation (pzxid 2 < 20 applied? none applied
    // yet for /r/a after the load: its load listing had pzxid 2).
    c.handle_watch(T, w, &ev(EventType::NodeCreated, "/r/a"));
    let s = expect_sent!(c, ["get /r/a", "list2 /r/a"]);
    c.handle_reply(T, s[0].0, data("1", 2, 2));
    c.handle_reply(T, s[1].0, kids(&["x"], 2, 20));
    assert!(cache_events(&mut c).is_empty());
    // Stale: pzxid 2 < 20.
    c.handle_watch(T, w, &ev(EventType::NodeCreated, "/r/a"));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data("1", 2, 2));
    c.handle_reply(T, s[1].0, kids(&[], 2, 2));
    assert!(
        cache_events(&mut c).is_empty(),
        "x stays: that listing is older"
    );
    assert_eq!(c.children("/r/a"), ["x"]);
}

#[test]
fn reconnect_syncs_rereads_and_reports_only_differences() {
    let (mut c, w) = loaded();
    c.handle_session(T, SessionChange::Suspended);
    assert_eq!(cache_events(&mut c), ["Suspended"]);
    assert!(sent(&mut c).is_empty(), "nothing is read while suspended");
    c.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = sent(&mut c);
    assert_eq!(
        lines(&s),
        ["sync /r", "get /r", "list2 /r"],
        "the watch survives"
    );
    c.handle_reply(T, s[0].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[1].0, data("root", 1, 1)); // unchanged
    c.handle_reply(T, s[2].0, kids(&["a", "c"], 1, 12)); // b gone, c new
    assert_eq!(cache_events(&mut c), ["deleted /r/b"]);
    let s = expect_sent!(c, ["get /r/a", "list2 /r/a", "get /r/c", "list2 /r/c"]);
    c.handle_reply(T, s[0].0, data("1x", 2, 10)); // changed while away
    c.handle_reply(T, s[1].0, kids(&[], 2, 2));
    c.handle_reply(T, s[2].0, data("3", 12, 12));
    c.handle_reply(T, s[3].0, kids(&[], 12, 12));
    assert_eq!(
        cache_events(&mut c),
        ["changed /r/a 1x m10", "created /r/c 3 m12", "Resynced"]
    );
    // Notifications of what changed while away, re-sent after the reconnect, find
    // nothing new.
    c.handle_watch(T, w, &ev(EventType::NodeDataChanged, "/r/a"));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data("1x", 2, 10));
    assert!(cache_events(&mut c).is_empty());
    assert!(c.is_synced());
}

#[test]
fn a_new_session_rearms_the_watch_then_resyncs() {
    let (mut c, _) = loaded();
    c.handle_session(T, SessionChange::Expired);
    assert_eq!(cache_events(&mut c), ["Suspended"]);
    assert_eq!(c.len(), 3, "kept while no session");
    c.handle_session(T, SessionChange::Connected { session_id: S + 1 });
    let s = expect_sent!(c, ["addWatch /r 1", "sync /r", "get /r", "list2 /r"]);
    c.handle_reply(T, s[0].0, Ok(Response::WatchAdded));
    c.handle_reply(T, s[1].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[2].0, no_node()); // the whole subtree is gone
    c.handle_reply(T, s[3].0, no_node());
    assert_eq!(
        cache_events(&mut c),
        ["deleted /r/b", "deleted /r/a", "deleted /r", "Resynced"]
    );
    assert!(c.is_empty());
}

#[test]
fn refusals_are_retried_after_a_backoff() {
    let mut c = started(CacheConfig::tree("/r"));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, Ok(Response::WatchAdded));
    c.handle_reply(T, s[1].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[2].0, Err(Error::Overloaded));
    c.handle_reply(T, s[3].0, Err(Error::Overloaded));
    assert!(sent(&mut c).is_empty(), "backing off");
    let at = c.poll_timeout().expect("a deadline");
    assert!(at > T);
    assert!(
        cache_events(&mut c).is_empty(),
        "a refusal is not an answer"
    );
    c.handle_timeout(at);
    let s = expect_sent!(c, ["get /r", "list2 /r"]);
    c.handle_reply(at, s[0].0, data("root", 1, 1));
    c.handle_reply(at, s[1].0, kids(&[], 1, 1));
    assert_eq!(cache_events(&mut c), ["created /r root m1", "Initialized"]);
}

#[test]
fn exceeding_max_nodes_fails_clearly() {
    let mut c = started(CacheConfig {
        max_nodes: 3,
        ..CacheConfig::tree("/r")
    });
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, Ok(Response::WatchAdded));
    c.handle_reply(T, s[1].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[2].0, data("root", 1, 1));
    c.handle_reply(T, s[3].0, kids(&["a", "b", "c"], 1, 5));
    assert_eq!(
        cache_events(&mut c),
        [
            "created /r root m1".to_string(),
            format!(
                "{:?}",
                CacheEvent::Failed(Error::TooLarge(TooLarge { len: 4, max: 3 }))
            )
        ]
    );
    assert!(c.is_done());
    assert!(sent(&mut c).is_empty());
}

/// Loads `/r` = { a (czxid 2) = { x (czxid 3) } } into a cache of at most 3 nodes, then
/// loses the connection and starts the resync: the root is read again and now lists
/// `a` and a new `b` (czxid 5). Returns the cache, the
/// watch's op and the resync's reads of `a` and `b`.
fn full_cache_resyncing() -> (TreeCache, OpId, Vec<(OpId, String)>) {
    let mut c = started(CacheConfig {
        max_nodes: 3,
        ..CacheConfig::tree("/r")
    });
    let s = sent(&mut c);
    let w = s[0].0;
    answer_the_root(&mut c, &s, &["a"], 2);
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, data("1", 2, 2));
    c.handle_reply(T, s[1].0, kids(&["x"], 2, 3));
    let s = expect_sent!(c, ["get /r/a/x", "list2 /r/a/x"]);
    c.handle_reply(T, s[0].0, data("x", 3, 3));
    c.handle_reply(T, s[1].0, kids(&[], 3, 3));
    assert_eq!(
        cache_events(&mut c),
        [
            "created /r root m1",
            "created /r/a 1 m2",
            "created /r/a/x x m3",
            "Initialized"
        ]
    );
    c.handle_session(T, SessionChange::Suspended);
    c.handle_session(T, SessionChange::Reconnected { session_id: S });
    let s = expect_sent!(c, ["sync /r", "get /r", "list2 /r"]);
    c.handle_reply(T, s[0].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[1].0, data("root", 1, 1));
    // `b` is new; `x` was not re-read yet (maybe gone): 3 nodes known, not 4.
    c.handle_reply(T, s[2].0, kids(&["a", "b"], 1, 5));
    assert_eq!(cache_events(&mut c), ["Suspended"]);
    let s = expect_sent!(c, ["get /r/a", "list2 /r/a", "get /r/b", "list2 /r/b"]);
    // `b` is read before `a`'s listing: it does not fit while `x` is unseen, and waits.
    c.handle_reply(T, s[2].0, data("2", 5, 5));
    c.handle_reply(T, s[3].0, kids(&[], 5, 5));
    assert!(cache_events(&mut c).is_empty(), "nothing decided yet");
    assert_eq!(c.len(), 3);
    c.handle_reply(T, s[0].0, data("1", 2, 2));
    (c, w, s)
}

/// Found by the `cache` fuzz target (tests/data/fuzz/cache-ed7463c6…): a resync counted
/// a cached node it had not re-read yet, gone on the server, toward `max_nodes` and
/// failed with `TooLarge` a subtree that never held more than `max_nodes` nodes.
#[test]
fn a_resync_counts_only_the_nodes_it_has_seen_toward_max_nodes() {
    let (mut c, _, s) = full_cache_resyncing();
    c.handle_reply(T, s[1].0, kids(&[], 2, 6)); // x was deleted while away
    assert_eq!(cache_events(&mut c), ["deleted /r/a/x"]);
    let s = sent(&mut c);
    assert_eq!(
        lines(&s),
        ["get /r/b", "list2 /r/b"],
        "b read again, now it fits"
    );
    c.handle_reply(T, s[0].0, data("2", 5, 5));
    c.handle_reply(T, s[1].0, kids(&[], 5, 5));
    assert_eq!(cache_events(&mut c), ["created /r/b 2 m5", "Resynced"]);
    assert!(c.is_synced());
    assert_eq!(c.len(), 3);
}

/// The same resync where `x` is still there: `a`'s listing shows it, so 4 nodes are
/// known (3 seen, `b` waiting): more than 3, it fails.
#[test]
fn a_resync_still_fails_a_subtree_really_over_max_nodes() {
    let (mut c, _, s) = full_cache_resyncing();
    c.handle_reply(T, s[1].0, kids(&["x"], 2, 3));
    assert_eq!(
        cache_events(&mut c),
        [format!(
            "{:?}",
            CacheEvent::Failed(Error::TooLarge(TooLarge { len: 4, max: 3 }))
        )]
    );
    assert!(c.is_done());
    assert!(sent(&mut c).is_empty());
    assert_eq!(c.len(), 3, "never more than max_nodes cached");
}

/// The same resync where `b`, waiting, is deleted before `a`'s listing shows `x` still
/// there: 3 nodes, no failure, and `b` is not read again.
#[test]
fn a_waiting_node_deleted_meanwhile_no_longer_counts() {
    let (mut c, w, s) = full_cache_resyncing();
    c.handle_watch(T, w, &ev(EventType::NodeDeleted, "/r/b"));
    c.handle_reply(T, s[1].0, kids(&["x"], 2, 3));
    let s = expect_sent!(c, ["get /r/a/x", "list2 /r/a/x"]);
    c.handle_reply(T, s[0].0, data("x", 3, 3));
    c.handle_reply(T, s[1].0, kids(&[], 3, 3));
    assert_eq!(cache_events(&mut c), ["Resynced"]);
    assert!(sent(&mut c).is_empty());
    assert!(c.is_synced());
    assert_eq!(c.len(), 3);
}

#[test]
fn max_in_flight_bounds_the_reads() {
    let mut c = started(CacheConfig {
        max_in_flight: 4,
        ..CacheConfig::tree("/r")
    });
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, Ok(Response::WatchAdded));
    c.handle_reply(T, s[1].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[2].0, data("root", 1, 1));
    c.handle_reply(T, s[3].0, kids(&["a", "b", "c"], 1, 5));
    let s = expect_sent!(c, ["get /r/a", "list2 /r/a", "get /r/b", "list2 /r/b"]);
    c.handle_reply(T, s[0].0, data("a", 2, 2));
    assert!(
        sent(&mut c).is_empty(),
        "3 in flight: a node's 2 reads do not fit"
    );
    c.handle_reply(T, s[1].0, kids(&[], 2, 2));
    assert_eq!(lines(&sent(&mut c)), ["get /r/c", "list2 /r/c"]);
}

#[test]
fn children_cache_stops_at_depth_one() {
    let mut c = started(CacheConfig::children("/r"));
    let s = sent(&mut c);
    let w = s[0].0;
    answer_the_root(&mut c, &s, &["a"], 2);
    let s = sent(&mut c);
    assert_eq!(lines(&s), ["get /r/a"], "children are not listed");
    c.handle_reply(T, s[0].0, data("1", 2, 2));
    assert_eq!(
        cache_events(&mut c),
        ["created /r root m1", "created /r/a 1 m2", "Initialized"]
    );
    c.handle_watch(T, w, &ev(EventType::NodeCreated, "/r/a/deep"));
    assert!(sent(&mut c).is_empty(), "below the depth limit");
}

#[test]
fn a_server_without_persistent_watches_gets_one_shot_watches() {
    let mut c = started(CacheConfig::tree("/r"));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, Err(Error::from(ErrorCode::Unimplemented)));
    // The load restarts with watches (the first reads may still answer: ignored).
    c.handle_reply(T, s[1].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[2].0, data("root", 1, 1));
    c.handle_reply(T, s[3].0, kids(&["a"], 1, 2));
    assert!(cache_events(&mut c).is_empty());
    assert_eq!(c.watch_style(), WatchStyle::OneShot);
    let s = expect_sent!(c, ["sync /r", "get! /r", "list2! /r"]);
    let r_ls = s[2].0;
    c.handle_reply(T, s[0].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[1].0, data("root", 1, 1));
    c.handle_reply(T, s[2].0, kids(&["a"], 1, 2));
    let s = expect_sent!(c, ["get! /r/a", "list2! /r/a"]);
    let a_get = s[0].0;
    c.handle_reply(T, s[0].0, data("1", 2, 2));
    c.handle_reply(T, s[1].0, kids(&[], 2, 2));
    assert_eq!(
        cache_events(&mut c),
        ["created /r root m1", "created /r/a 1 m2", "Initialized"]
    );
    // A child appears: the root's child watch fires; a new listing, the new child read.
    c.handle_watch(T, r_ls, &ev(EventType::NodeChildrenChanged, "/r"));
    let s = expect_sent!(c, ["list2! /r"]);
    let r_ls = s[0].0;
    c.handle_reply(T, s[0].0, kids(&["a", "b"], 1, 5));
    let s = expect_sent!(c, ["get! /r/b", "list2! /r/b"]);
    let (b_get, b_ls) = (s[0].0, s[1].0);
    c.handle_reply(T, s[0].0, data("2", 5, 5));
    c.handle_reply(T, s[1].0, kids(&[], 5, 5));
    assert_eq!(cache_events(&mut c), ["created /r/b 2 m5"]);
    // A data change re-arms only the data watch.
    c.handle_watch(T, a_get, &ev(EventType::NodeDataChanged, "/r/a"));
    let s = expect_sent!(c, ["get! /r/a"]);
    c.handle_reply(T, s[0].0, data("1b", 2, 6));
    assert_eq!(cache_events(&mut c), ["changed /r/a 1b m6"]);
    // Deleted: both of its watches fire; one Deleted.
    c.handle_watch(T, b_get, &ev(EventType::NodeDeleted, "/r/b"));
    c.handle_watch(T, b_ls, &ev(EventType::NodeDeleted, "/r/b"));
    c.handle_watch(T, r_ls, &ev(EventType::NodeChildrenChanged, "/r"));
    assert_eq!(cache_events(&mut c), ["deleted /r/b"]);
    let s = expect_sent!(c, ["list2! /r"]);
    c.handle_reply(T, s[0].0, kids(&["a"], 1, 7));
    assert!(cache_events(&mut c).is_empty());
    assert!(sent(&mut c).is_empty());
    // A notification of an older registration leaves the newer one alone: no second
    // watch is asked for.
    c.handle_watch(T, b_get, &ev(EventType::NodeDataChanged, "/r/a"));
    assert_eq!(lines(&sent(&mut c)), ["get /r/a"]);
}

#[test]
fn one_shot_missing_root_waits_with_exists() {
    let mut c = started(CacheConfig {
        persistent_watch: false,
        ..CacheConfig::tree("/r")
    });
    let s = expect_sent!(c, ["sync /r", "get! /r", "list2! /r"]);
    c.handle_reply(T, s[0].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[1].0, no_node());
    c.handle_reply(T, s[2].0, no_node());
    let s = expect_sent!(c, ["exists! /r"]);
    c.handle_reply(T, s[0].0, no_node());
    assert_eq!(cache_events(&mut c), ["Initialized"]);
    c.handle_watch(T, s[0].0, &ev(EventType::NodeCreated, "/r"));
    let s = expect_sent!(c, ["get! /r", "list2! /r"]);
    c.handle_reply(T, s[0].0, data("root", 4, 4));
    c.handle_reply(T, s[1].0, kids(&[], 4, 4));
    assert_eq!(cache_events(&mut c), ["created /r root m4"]);
}

#[test]
fn closed_session_fails_and_close_ends() {
    let (mut c, _) = loaded();
    c.handle_session(T, SessionChange::Closed);
    assert_eq!(cache_events(&mut c), ["Failed(Closed)"]);
    assert!(c.is_done());
    let (mut c, _) = loaded();
    c.close(T);
    assert_eq!(cache_events(&mut c), ["Closed"]);
    assert!(c.is_done());
}

// ----- memory per cached node -----

mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    std::thread_local! {
        /// Heap bytes allocated minus freed by the current thread: this test binary runs
        /// many tests in parallel, each on its own thread, so a figure per thread is
        /// exact for a test that keeps its data on its thread.
        static LIVE: Cell<isize> = const { Cell::new(0) };
    }

    fn add(n: isize) {
        // `try_with`: an allocation during the thread's teardown is not counted.
        let _ = LIVE.try_with(|l| l.set(l.get() + n));
    }

    /// The current thread's live heap bytes (see `LIVE`).
    pub fn live() -> isize {
        LIVE.try_with(Cell::get).unwrap_or(0)
    }

    pub struct Counting;

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            add(l.size() as isize);
            unsafe { System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            add(-(l.size() as isize));
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            add(new as isize - l.size() as isize);
            unsafe { System.realloc(p, l, new) }
        }
    }
}

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

/// Loads 10,000 children (12-byte paths, 8-byte data) from scripted replies and
/// reports the heap the loaded cache holds per node (counted on this test's thread, so
/// the tests running in parallel in this binary do not blur it).
#[test]
fn memory_per_cached_node() {
    let names: Vec<String> = (0..10_000).map(|i| format!("n{i:04}")).collect();
    let before = counting::live();
    let mut c = started(CacheConfig::children("/r"));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, Ok(Response::WatchAdded));
    c.handle_reply(T, s[1].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[2].0, data("root", 1, 1));
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    c.handle_reply(T, s[3].0, kids(&refs, 1, 2));
    let mut zxid = 2;
    loop {
        let s = sent(&mut c);
        if s.is_empty() {
            break;
        }
        for (op, _) in s {
            zxid += 1;
            c.handle_reply(
                T,
                op,
                Ok(Response::Data {
                    data: Bytes::from(format!("{zxid:08}")),
                    stat: st().czxid(zxid).mzxid(zxid).pzxid(0),
                }),
            );
        }
        while c.poll_event().is_some() {}
    }
    assert!(c.is_initialized());
    assert_eq!(c.len(), 10_001);
    let held = counting::live() - before;
    let per = held / 10_001;
    println!("cache of 10,001 nodes holds {held} heap bytes: {per} bytes per node");
    assert!(per < 1_000, "{per} bytes per node");
    drop(c);
}

// ----- the watcher lifecycle (pinned with the port to the shared watcher) -----

#[test]
fn a_cache_suspended_during_its_first_load_reports_initialized_not_resynced() {
    let mut c = started(CacheConfig::tree("/r"));
    let s = expect_sent!(c, ["addWatch /r 1", "sync /r", "get /r", "list2 /r"]);
    c.handle_session(T, SessionChange::Suspended);
    assert_eq!(cache_events(&mut c), ["Suspended"]);
    c.handle_session(T, SessionChange::Reconnected { session_id: S });
    c.handle_reply(T, s[0].0, Ok(Response::WatchAdded));
    let s = expect_sent!(c, ["sync /r", "get /r", "list2 /r"]);
    c.handle_reply(T, s[0].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[1].0, data("root", 1, 1));
    c.handle_reply(T, s[2].0, kids(&[], 1, 1));
    assert_eq!(cache_events(&mut c), ["created /r root m1", "Initialized"]);
    assert!(c.is_synced(), "Initialized answers the Suspended");
}

#[test]
fn a_cache_closed_while_backing_off_has_no_deadline_and_ignores_the_session() {
    let mut c = started(CacheConfig::tree("/r"));
    let s = sent(&mut c);
    c.handle_reply(T, s[0].0, Ok(Response::WatchAdded));
    c.handle_reply(T, s[1].0, Ok(Response::Path("/r".into())));
    c.handle_reply(T, s[2].0, Err(Error::Overloaded));
    assert!(c.poll_timeout().is_some());
    c.close(T);
    assert!(c.poll_timeout().is_none());
    c.handle_session(T, SessionChange::Suspended);
    c.handle_session(T, SessionChange::Reconnected { session_id: S });
    assert_eq!(cache_events(&mut c), ["Closed"]);
    assert!(sent(&mut c).is_empty());
    assert!(c.has_ended());
}
