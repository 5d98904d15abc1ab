//! Interoperability with Apache Curator 5.4's `CuratorCache` (`CuratorTreeCache.java`):
//! it and our tree cache follow one tree while a writer makes a burst of creates, sets
//! and deletes (depth 1 to 3, a subtree deleted, a node deleted and created again).
//!
//! What is compared:
//! 1. **Final state.** Once the writer is done, each cache converges to the server's
//!    tree (read by walking it): the same set of paths, and for each node the same
//!    data, `czxid`, `mzxid` and data version. So both caches end equal.
//! 2. **No contradicting event.** The writer records each path's history, in order:
//!    one state per create and per set (its `czxid`, `mzxid`, version and data, from
//!    the reply's Stat) and a deletion per delete. Each cache's events for a path
//!    (ours: `Created`, `Changed`, `Deleted`; Curator's `NODE_CREATED`,
//!    `NODE_CHANGED`, `NODE_DELETED`), in the order delivered, must be a subsequence of
//!    that history: a `Created`/`Changed` names a state that existed (same `mzxid`,
//!    version and data), later than the one reported before; a `Changed` stays in the
//!    incarnation (`czxid`) last reported and a `Created` starts one not reported yet
//!    (the node absent from the cache until then); a `Deleted` follows a reported
//!    state and a deletion of the history after it. Both reporting only what
//!    happened, in the order it happened, neither can contradict the other (a cache
//!    may skip intermediate states: it reads the latest one).

// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, CacheEvent, Client, CreateOptions, Options, Stat};

use crate::support::{self as curator_support, Proc};

const ROOT: &str = "/interop/tree";
const W: Duration = Duration::from_secs(20);

/// A node as both caches and the server show it: czxid, mzxid, version, data.
type Node = (i64, i64, i32, String);

fn node(stat: &Stat, data: &[u8]) -> Node {
    (
        stat.czxid,
        stat.mzxid,
        stat.version,
        String::from_utf8_lossy(data).into_owned(),
    )
}

/// One reported change of a path: `Some(node)` created or changed, `None` deleted;
/// `bool`: reported as a creation.
type Edge = (bool, Option<Node>);

/// Checks one side's events of one path against the path's history (see the module
/// doc); `Err` names the contradiction.
fn consistent(path: &str, events: &[Edge], history: &[Option<Node>]) -> Result<(), String> {
    let mut at = 0; // history entries before `at` are behind us
    let mut shown: Option<Node> = None;
    for (created, e) in events {
        match e {
            Some(n) => {
                let i = (at..history.len())
                    .find(|&i| history[i].as_ref() == Some(n))
                    .ok_or_else(|| format!("{path}: {n:?} is not a later state: {events:?}"))?;
                match (&shown, created) {
                    (None, true) => {}
                    (Some(s), false) if s.0 == n.0 => {}
                    _ => return Err(format!("{path}: {created} {n:?} after {shown:?}")),
                }
                at = i + 1;
                shown = Some(n.clone());
            }
            None => {
                let i = (at..history.len())
                    .find(|&i| history[i].is_none())
                    .ok_or_else(|| format!("{path}: deleted without a deletion: {events:?}"))?;
                if shown.is_none() {
                    return Err(format!("{path}: deleted, not shown: {events:?}"));
                }
                at = i + 1;
                shown = None;
            }
        }
    }
    Ok(())
}

/// The writer: records every path's history.
struct Writer {
    zk: Client,
    history: BTreeMap<String, Vec<Option<Node>>>,
}

impl Writer {
    async fn create(&mut self, path: &str, data: &str) {
        let (_, stat) = self
            .zk
            .create2(path, data.to_string(), &CreateOptions::default())
            .await
            .unwrap();
        self.record(path, Some(node(&stat, data.as_bytes())));
    }

    async fn set(&mut self, path: &str, data: &str) {
        let stat = self
            .zk
            .set_data(path, data.to_string(), None)
            .await
            .unwrap();
        self.record(path, Some(node(&stat, data.as_bytes())));
    }

    async fn delete(&mut self, path: &str) {
        self.zk.delete(path, None).await.unwrap();
        self.record(path, None);
    }

    fn record(&mut self, path: &str, n: Option<Node>) {
        self.history.entry(path.to_string()).or_default().push(n);
    }

    /// Creates, sets and deletes, depth 1 to 3.
    async fn burst(&mut self) {
        let a = |i: u32| format!("{ROOT}/a{i}");
        let b = |i: u32, j: u32| format!("{ROOT}/a{i}/b{j}");
        let c = |i: u32, j: u32| format!("{ROOT}/a{i}/b{j}/c");
        for i in 0..3 {
            self.create(&a(i), &format!("a{i}")).await;
            for j in 0..3 {
                self.create(&b(i, j), &format!("b{i}{j}")).await;
            }
            for j in 0..2 {
                self.create(&c(i, j), "c").await;
            }
        }
        for round in 0..3 {
            for i in 0..3 {
                for j in 0..2 {
                    self.set(&b(i, j), &format!("b{i}{j}.{round}")).await;
                    self.set(&c(i, j), &format!("c{i}{j}.{round}")).await;
                }
            }
        }
        // A node deleted and created again; a leaf deleted.
        self.delete(&c(0, 0)).await;
        self.delete(&b(0, 0)).await;
        self.create(&b(0, 0), "again").await;
        self.set(&b(0, 0), "again.1").await;
        self.delete(&b(1, 2)).await;
        // A subtree deleted, its root created again with one child.
        for j in 0..2 {
            self.delete(&c(2, j)).await;
        }
        for j in 0..3 {
            self.delete(&b(2, j)).await;
        }
        self.delete(&a(2)).await;
        self.create(&a(2), "a2 again").await;
        self.create(&b(2, 9), "b29").await;
        self.set(ROOT, "end").await;
    }
}

/// The server's tree under `ROOT`, by path.
async fn server_tree(zk: &Client) -> BTreeMap<String, Node> {
    let mut tree = BTreeMap::new();
    let mut todo = vec![ROOT.to_string()];
    while let Some(p) = todo.pop() {
        let (data, stat) = zk.get_data(&p).await.unwrap();
        tree.insert(p.clone(), node(&stat, &data));
        for k in zk.get_children(&p).await.unwrap() {
            todo.push(format!("{p}/{k}"));
        }
    }
    tree
}

/// `<path> <czxid> <mzxid> <version> <data>` as Curator's program prints it.
fn parse(fields: &str) -> (String, Node) {
    let mut f = fields.splitn(5, ' ');
    let mut next = || f.next().unwrap_or_default().to_string();
    let path = next();
    let n = (
        next().parse().unwrap(),
        next().parse().unwrap(),
        next().parse().unwrap(),
        next(),
    );
    (path, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_cache_and_ours_agree_under_a_writer() {
    let server = TestServer::start().unwrap();
    let cs = server.connect_string();
    let (_java, cp) = curator_support::compiled("CuratorTreeCache");
    let zk = connect(&cs, Options::default()).await.unwrap();
    zk.create_all("/interop", "", &CreateOptions::default())
        .await
        .unwrap();
    let (_, stat) = zk
        .create2(ROOT, "start", &CreateOptions::default())
        .await
        .unwrap();
    let mut writer = Writer {
        zk: zk.clone(),
        history: BTreeMap::new(),
    };
    writer.record(ROOT, Some(node(&stat, b"start")));

    let mut ours = zk.tree_cache(ROOT).unwrap();
    let mut ours_events: BTreeMap<String, Vec<Edge>> = BTreeMap::new();
    ours_events
        .entry(ROOT.to_string())
        .or_default()
        .push((true, Some(node(&stat, b"start"))));
    assert_eq!(ours.initialized().await.unwrap(), 1);
    let mut java = Proc::java(&cp, "CuratorTreeCache", &[&cs, ROOT]);
    let mut java_lines = java.lines_until("INIT");

    writer.burst().await;
    let truth = server_tree(&zk).await;
    assert_eq!(truth.len(), 1 + 3 + 6 + 3);

    // Ours converges to the server's tree; its events are collected on the way.
    let deadline = Instant::now() + W;
    loop {
        match ours.next_timeout(Duration::from_millis(200)).await {
            Ok(Some(e)) => {
                let (path, edge) = match e {
                    CacheEvent::Created { path, data, stat } => {
                        (path, (true, Some(node(&stat, &data))))
                    }
                    CacheEvent::Changed { path, data, stat } => {
                        (path, (false, Some(node(&stat, &data))))
                    }
                    CacheEvent::Deleted { path } => (path, (false, None)),
                    other => panic!("our cache: {other:?}"),
                };
                ours_events.entry(path).or_default().push(edge);
            }
            Ok(None) => panic!("our cache ended"),
            Err(_) => {
                let snapshot: BTreeMap<String, Node> = ours
                    .snapshot()
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|(p, n)| (p, node(&n.stat, &n.data)))
                    .collect();
                if snapshot == truth {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "ours: {snapshot:#?} vs {truth:#?}"
                );
            }
        }
    }

    // Curator's converges to the server's tree.
    let deadline = Instant::now() + W;
    loop {
        java.send("dump");
        let mut lines = java.lines_until("END");
        let nodes: BTreeMap<String, Node> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("NODE "))
            .map(parse)
            .collect();
        lines.retain(|l| l.starts_with("EVENT "));
        java_lines.extend(lines);
        if nodes == truth {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Curator's: {nodes:#?} vs {truth:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    java.send("dump");
    java_lines.extend(
        java.lines_until("END")
            .into_iter()
            .filter(|l| l.starts_with("EVENT ")),
    );
    let mut java_events: BTreeMap<String, Vec<Edge>> = BTreeMap::new();
    for l in &java_lines {
        let (kind, rest) = l.strip_prefix("EVENT ").unwrap().split_once(' ').unwrap();
        let (path, n) = parse(rest);
        let edge = match kind {
            "CREATED" => (true, Some(n)),
            "CHANGED" => (false, Some(n)),
            "DELETED" => (false, None),
            k => panic!("Curator's event {k}"),
        };
        java_events.entry(path).or_default().push(edge);
    }

    // Neither reports a state that did not exist, or out of order; both end where the
    // server is (a path's last event is its final state).
    for (side, events) in [("ours", &ours_events), ("Curator's", &java_events)] {
        for (path, history) in &writer.history {
            let evs = events.get(path).map(Vec::as_slice).unwrap_or_default();
            consistent(path, evs, history).unwrap_or_else(|e| panic!("{side}: {e}"));
            let last = evs.last().and_then(|(_, n)| n.clone());
            assert_eq!(
                last.as_ref(),
                truth.get(path),
                "{side}: {path}'s last event"
            );
        }
        assert!(
            events.keys().all(|p| writer.history.contains_key(p)),
            "{side}: {events:?}"
        );
    }
    zk.close().await;
}

#[test]
fn the_consistency_check_refuses_contradictions() {
    let s = |m: i64, v: i32| Some((1, m, v, format!("{m}")));
    let history = [s(1, 0), s(2, 1), s(3, 2), None, Some((5, 5, 0, "5".into()))];
    let ok = [
        (true, s(1, 0)),
        (false, s(3, 2)),
        (false, None),
        (true, history[4].clone()),
    ];
    assert!(consistent("/p", &ok, &history).is_ok());
    // Out of order, invented, a change across incarnations, a deletion never made.
    assert!(consistent("/p", &[(true, s(2, 1)), (false, s(1, 0))], &history).is_err());
    assert!(consistent("/p", &[(true, s(4, 9))], &history).is_err());
    assert!(consistent(
        "/p",
        &[(true, s(1, 0)), (false, history[4].clone())],
        &history
    )
    .is_err());
    assert!(consistent(
        "/p",
        &[(true, s(1, 0)), (false, None), (false, None)],
        &history
    )
    .is_err());
}
