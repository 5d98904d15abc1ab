//! The watched value (`watch_node`, the core's `NodeWatch`) against a real ZooKeeper 3.8
//! through both adapters at once: a tokio watcher and a blocking watcher follow one
//! node while a third client creates it, writes it 50 times in a burst, deletes and
//! re-creates it, and writes it again after a server restart. Each watcher reports a
//! missing node as missing, never reports a version twice or out of order, and ends
//! holding the last written value every time writes stop (convergence).
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use support::runtime;
use zk_recipes::recipe::node::NodeWatchEvent;
use zk_recipes_testing::TestServer;

use zk_recipes_blocking as zb;
use zk_recipes_tokio as zt;

const PATH: &str = "/cfg/watched";
const WITHIN: Duration = Duration::from_secs(20);

/// One watcher, whichever adapter.
trait Watcher {
    fn name(&self) -> &'static str;
    fn next(&mut self, within: Duration) -> Option<NodeWatchEvent>;
    fn value(&self) -> Option<(Bytes, zk_recipes::proto::Stat)>;
    fn refresh(&self);
}

struct T(zt::NodeWatchHandle);
struct B(zb::NodeWatchHandle);

impl Watcher for T {
    fn name(&self) -> &'static str {
        "tokio"
    }
    fn next(&mut self, within: Duration) -> Option<NodeWatchEvent> {
        runtime()
            .block_on(async { tokio::time::timeout(within, self.0.next()).await })
            .ok()
            .flatten()
    }
    fn value(&self) -> Option<(Bytes, zk_recipes::proto::Stat)> {
        runtime().block_on(self.0.value()).unwrap()
    }
    fn refresh(&self) {
        self.0.refresh().unwrap()
    }
}

impl Watcher for B {
    fn name(&self) -> &'static str {
        "blocking"
    }
    fn next(&mut self, within: Duration) -> Option<NodeWatchEvent> {
        self.0.next_timeout(within).ok().flatten()
    }
    fn value(&self) -> Option<(Bytes, zk_recipes::proto::Stat)> {
        self.0.value().unwrap()
    }
    fn refresh(&self) {
        self.0.refresh().unwrap()
    }
}

/// Reads events until the watcher holds `want` (`None`: missing); checks that the
/// versions it reports only go forward.
fn until(w: &mut dyn Watcher, want: Option<&str>, last: &mut (i64, i32)) {
    let deadline = Instant::now() + WITHIN;
    let mut seen = Vec::new();
    loop {
        let holds = w.value().map(|(d, _)| d);
        if holds.as_deref() == want.map(str::as_bytes) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{}: never held {want:?} (events {seen:?})",
            w.name()
        );
        match w.next(left) {
            Some(NodeWatchEvent::Data { data, stat }) => {
                let v = (stat.czxid, stat.version);
                assert!(
                    v.0 > last.0 || (v.0 == last.0 && v.1 > last.1),
                    "{}: version {v:?} after {last:?} ({data:?})",
                    w.name()
                );
                *last = v;
                seen.push(NodeWatchEvent::Data { data, stat });
            }
            Some(e @ (NodeWatchEvent::Failed(_) | NodeWatchEvent::Closed)) => {
                panic!("{}: ended: {e:?}", w.name())
            }
            Some(e) => seen.push(e),
            None => {}
        }
    }
}

#[test]
fn watchers_of_both_adapters_follow_and_converge() {
    let mut server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    let opts = || zb::Options::default().connect_timeout(Duration::from_secs(10));
    let writer = zb::connect(&cs, opts()).unwrap();
    writer
        .create("/cfg", "", &zb::CreateOptions::default())
        .unwrap();
    let tz = runtime()
        .block_on(zt::connect(
            &cs,
            zt::Options::default().connect_timeout(Duration::from_secs(10)),
        ))
        .unwrap();
    let bz = zb::connect(&cs, opts()).unwrap();
    let mut watchers: Vec<Box<dyn Watcher>> = vec![
        Box::new(T(tz.watch_node(PATH).unwrap())),
        Box::new(B(bz.watch_node(PATH).unwrap())),
    ];
    let mut last = vec![(0i64, -1i32); 2];

    // Missing at first.
    for (w, l) in watchers.iter_mut().zip(&mut last) {
        let e = w.next(WITHIN);
        assert_eq!(
            e,
            Some(NodeWatchEvent::Missing { gone: false }),
            "{}",
            w.name()
        );
        until(w.as_mut(), None, l);
    }
    // Created, then a burst of 50 writes: every watcher ends on the last.
    writer
        .create(PATH, "v0", &zb::CreateOptions::default())
        .unwrap();
    for i in 1..=50 {
        writer.set_data(PATH, format!("v{i}"), None).unwrap();
    }
    for (w, l) in watchers.iter_mut().zip(&mut last) {
        until(w.as_mut(), Some("v50"), l);
    }
    // Deleted and created again: followed (the new node's czxid is higher).
    writer.delete(PATH, None).unwrap();
    writer
        .create(PATH, "again", &zb::CreateOptions::default())
        .unwrap();
    for (w, l) in watchers.iter_mut().zip(&mut last) {
        until(w.as_mut(), Some("again"), l);
        let (_, stat) = w.value().unwrap();
        assert_eq!(stat.version, 0, "{}: the new node", w.name());
    }
    // A refresh after an out-of-band notice: the same version is not reported again.
    for (w, l) in watchers.iter_mut().zip(&mut last) {
        // First what is still queued from before (versions still only go forward).
        while let Some(e) = w.next(Duration::from_millis(300)) {
            if let NodeWatchEvent::Data { stat, .. } = e {
                assert!((stat.czxid, stat.version) > *l, "{}: {stat:?}", w.name());
                *l = (stat.czxid, stat.version);
            }
        }
        w.refresh();
        std::thread::sleep(Duration::from_millis(200));
        let e = w.next(Duration::from_millis(300));
        assert!(
            !matches!(e, Some(NodeWatchEvent::Data { .. })),
            "{}: {e:?}",
            w.name()
        );
    }
    // The server restarts; the writer writes once it is back: re-read, converged.
    server.restart().unwrap();
    let t = Instant::now();
    loop {
        match writer.set_data(PATH, "after-restart", None) {
            Ok(_) => break,
            Err(e) => {
                assert!(t.elapsed() < WITHIN, "writer: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    for (w, l) in watchers.iter_mut().zip(&mut last) {
        until(w.as_mut(), Some("after-restart"), l);
    }
    // Deleted for good: missing.
    writer.delete(PATH, None).unwrap();
    for (w, l) in watchers.iter_mut().zip(&mut last) {
        until(w.as_mut(), None, l);
    }
}
