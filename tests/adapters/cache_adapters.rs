//! Tree cache against a real ZooKeeper 3.8, the same scenario through both adapters:
//! a 10,000-node subtree loaded (time printed), 1,000 changes by another client
//! (creates, writes, deletes) followed event by event until the cache equals the
//! server (events/s printed), then a server restart: the cache resyncs without
//! inventing a change, and follows changes again.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use support::{runtime, Zk};
use zk_recipes::client::Error;
use zk_recipes::recipe::cache::{CacheEvent, CachedNode};
use zk_recipes_testing::{expire_session, TestServer};
use zk_recipes_tokio as zt;

type B = zk_recipes_blocking::Client;
type T = zk_recipes_tokio::Client;

const W: Duration = Duration::from_secs(30);
const TOP: usize = 100;
const UNDER: usize = 99;

/// A cache handle, either adapter's.
trait CacheH: Send {
    fn initialized(&mut self) -> Result<usize, Error>;
    fn next(&mut self, within: Duration) -> Option<CacheEvent>;
    fn snapshot(&self) -> Result<BTreeMap<String, CachedNode>, Error>;
    fn get(&self, path: &str) -> Result<Option<CachedNode>, Error>;
}

trait CacheZk: Zk {
    fn tree_cache(&self, path: &str) -> Box<dyn CacheH>;
    fn children_cache(&self, path: &str) -> Box<dyn CacheH>;
}

impl CacheH for zk_recipes_blocking::TreeCacheHandle {
    fn initialized(&mut self) -> Result<usize, Error> {
        zk_recipes_blocking::TreeCacheHandle::initialized(self)
    }
    fn next(&mut self, within: Duration) -> Option<CacheEvent> {
        self.next_timeout(within).ok().flatten()
    }
    fn snapshot(&self) -> Result<BTreeMap<String, CachedNode>, Error> {
        zk_recipes_blocking::TreeCacheHandle::snapshot(self)
    }
    fn get(&self, path: &str) -> Result<Option<CachedNode>, Error> {
        zk_recipes_blocking::TreeCacheHandle::get(self, path)
    }
}

impl CacheZk for B {
    fn tree_cache(&self, path: &str) -> Box<dyn CacheH> {
        Box::new(B::tree_cache(self, path).unwrap())
    }
    fn children_cache(&self, path: &str) -> Box<dyn CacheH> {
        Box::new(B::children_cache(self, path).unwrap())
    }
}

impl CacheH for zt::TreeCacheHandle {
    fn initialized(&mut self) -> Result<usize, Error> {
        runtime().block_on(zt::TreeCacheHandle::initialized(self))
    }
    fn next(&mut self, within: Duration) -> Option<CacheEvent> {
        runtime()
            .block_on(async { tokio::time::timeout(within, zt::TreeCacheHandle::next(self)).await })
            .ok()
            .flatten()
    }
    fn snapshot(&self) -> Result<BTreeMap<String, CachedNode>, Error> {
        runtime().block_on(zt::TreeCacheHandle::snapshot(self))
    }
    fn get(&self, path: &str) -> Result<Option<CachedNode>, Error> {
        runtime().block_on(zt::TreeCacheHandle::get(self, path))
    }
}

impl CacheZk for T {
    fn tree_cache(&self, path: &str) -> Box<dyn CacheH> {
        let _rt = runtime().enter();
        Box::new(T::tree_cache(self, path).unwrap())
    }
    fn children_cache(&self, path: &str) -> Box<dyn CacheH> {
        let _rt = runtime().enter();
        Box::new(T::children_cache(self, path).unwrap())
    }
}

// ----- the other client: bulk operations, pipelined -----

async fn writer(cs: &str) -> T {
    zt::connect(
        cs,
        zt::Options::default()
            .session_timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap()
}

enum Op {
    Create(String, Bytes),
    Set(String, Bytes),
    Delete(String),
}

/// Runs `ops` with up to 50 in flight; each must succeed.
async fn run_ops(zk: &T, ops: Vec<Op>) {
    let mut set = tokio::task::JoinSet::new();
    for op in ops {
        if set.len() >= 50 {
            set.join_next().await.unwrap().unwrap();
        }
        let zk = zk.clone();
        set.spawn(async move {
            let r = match &op {
                Op::Create(p, d) => zk
                    .create(p, d.clone(), &zt::CreateOptions::default())
                    .await
                    .map(drop),
                Op::Set(p, d) => zk.set_data(p, d.clone(), None).await.map(drop),
                Op::Delete(p) => zk.delete(p, None).await,
            };
            r.unwrap_or_else(|e| panic!("{e:?} (status {:?})", zk.status()));
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
}

/// The server's subtree at `root`: path → data, read level by level, up to 50 reads
/// in flight (a node deleted meanwhile is left out; any other error fails).
async fn server_tree(zk: &T, root: &str) -> BTreeMap<String, Bytes> {
    let mut out = BTreeMap::new();
    let mut level = vec![root.to_string()];
    while !level.is_empty() {
        let mut set = tokio::task::JoinSet::new();
        let mut next = Vec::new();
        let mut take = |r: (String, Result<Bytes, Error>, Result<Vec<String>, Error>)| {
            let (p, data, kids) = r;
            let gone = |e: &Error| *e == Error::Server(zt::ErrorCode::NoNode);
            match (data, kids) {
                (Ok(data), Ok(kids)) => {
                    for k in kids {
                        next.push(format!("{p}/{k}"));
                    }
                    out.insert(p, data);
                }
                (Err(e), _) | (_, Err(e)) if gone(&e) => {}
                (Err(e), _) | (_, Err(e)) => {
                    panic!("reading {p}: {e:?} (status {:?})", zk.status())
                }
            }
        };
        for p in level.drain(..) {
            if set.len() >= 50 {
                take(set.join_next().await.unwrap().unwrap());
            }
            let zk = zk.clone();
            set.spawn(async move {
                let data = zk.get_data(&p).await.map(|(d, _)| d);
                let kids = zk.get_children(&p).await;
                (p, data, kids)
            });
        }
        while let Some(r) = set.join_next().await {
            take(r.unwrap());
        }
        level = next;
    }
    out
}

/// Panics with the first few differences (not the whole maps).
fn same(what: &str, cache: &BTreeMap<String, Bytes>, server: &BTreeMap<String, Bytes>) {
    let diff: Vec<_> = cache
        .iter()
        .filter(|(p, d)| server.get(*p) != Some(d))
        .map(|(p, d)| format!("cache {p}={d:?} server {:?}", server.get(p)))
        .chain(
            server
                .iter()
                .filter(|(p, _)| !cache.contains_key(*p))
                .map(|(p, d)| format!("missing {p}={d:?}")),
        )
        .take(10)
        .collect();
    assert!(
        diff.is_empty(),
        "{what}: {} cached, {} on the server: {diff:?}",
        cache.len(),
        server.len()
    );
}

fn data_of(snap: &BTreeMap<String, CachedNode>) -> BTreeMap<String, Bytes> {
    snap.iter()
        .map(|(p, n)| (p.clone(), n.data.clone()))
        .collect()
}

/// Applies one event to a replica; panics on an event that does not fit.
fn apply(replica: &mut BTreeMap<String, Bytes>, e: &CacheEvent) -> bool {
    match e {
        CacheEvent::Created { path, data, .. } => {
            assert!(
                replica.insert(path.clone(), data.clone()).is_none(),
                "{e:?}"
            );
        }
        CacheEvent::Changed { path, data, .. } => {
            assert!(
                replica.insert(path.clone(), data.clone()).is_some(),
                "{e:?}"
            );
        }
        CacheEvent::Deleted { path } => {
            assert!(replica.remove(path).is_some(), "{e:?}");
        }
        _ => return false,
    }
    true
}

fn big_tree<Z: CacheZk>(server: &mut TestServer, root: &str) {
    let cs = server.connect_string();
    let w = runtime().block_on(writer(&cs));
    let base = format!("{root}/tree");
    // 1 + 100 + 100 × 99 = 10,001 nodes.
    let mut ops = Vec::new();
    for i in 0..TOP {
        for j in 0..UNDER {
            ops.push((i, j));
        }
    }
    runtime().block_on(async {
        let _ = w
            .create(root, Bytes::new(), &zt::CreateOptions::default())
            .await;
        w.create(&base, "root", &zt::CreateOptions::default())
            .await
            .unwrap();
        run_ops(
            &w,
            (0..TOP)
                .map(|i| Op::Create(format!("{base}/n{i:03}"), Bytes::from(format!("{i}"))))
                .collect(),
        )
        .await;
        run_ops(
            &w,
            ops.iter()
                .map(|(i, j)| {
                    Op::Create(
                        format!("{base}/n{i:03}/m{j:03}"),
                        Bytes::from(format!("{i}.{j}")),
                    )
                })
                .collect(),
        )
        .await;
    });

    // Load.
    let zk = Z::connect(&cs).unwrap();
    let started = Instant::now();
    let mut cache = zk.tree_cache(&base);
    let n = cache.initialized().unwrap();
    let load = started.elapsed();
    println!(
        "{}: loaded {n} nodes in {:.0} ms ({:.0} nodes/s)",
        Z::NAME,
        load.as_secs_f64() * 1e3,
        n as f64 / load.as_secs_f64()
    );
    assert_eq!(n, 1 + TOP + TOP * UNDER);
    let server_now = runtime().block_on(server_tree(&w, &base));
    let mut replica = data_of(&cache.snapshot().unwrap());
    same(&format!("{}: load", Z::NAME), &replica, &server_now);

    // 1,000 changes: 600 writes, 200 creates, 200 deletes (of leaves).
    // `expected`: the subtree once they are applied (they touch distinct nodes).
    let mut expected = replica.clone();
    let mut changes = Vec::new();
    for k in 0..600 {
        let (i, j) = ops[(k * 7919) % ops.len()];
        let (p, d) = (
            format!("{base}/n{i:03}/m{j:03}"),
            Bytes::from(format!("w{k}")),
        );
        expected.insert(p.clone(), d.clone());
        changes.push(Op::Set(p, d));
    }
    for k in 0..200 {
        let (p, d) = (
            format!("{base}/n{:03}/new{k:03}", k % TOP),
            Bytes::from(format!("c{k}")),
        );
        expected.insert(p.clone(), d.clone());
        changes.push(Op::Create(p, d));
    }
    for k in 0..200 {
        // m098 of every node, m097 of every other.
        let (i, j) = (k % TOP, 98 - k / TOP);
        let p = format!("{base}/n{i:03}/m{j:03}");
        expected.remove(&p);
        changes.push(Op::Delete(p));
    }
    let started = Instant::now();
    runtime().block_on(run_ops(&w, changes));
    let written = started.elapsed();
    let mut applied = 0;
    while replica != expected {
        let e = cache
            .next(W)
            .unwrap_or_else(|| panic!("{}: the cache stopped short", Z::NAME));
        if apply(&mut replica, &e) {
            applied += 1;
        }
    }
    let followed = started.elapsed();
    println!(
        "{}: 1,000 changes written in {:.0} ms, {applied} events applied by {:.0} ms ({:.0} events/s)",
        Z::NAME,
        written.as_secs_f64() * 1e3,
        followed.as_secs_f64() * 1e3,
        applied as f64 / followed.as_secs_f64()
    );
    // A write to a node deleted right after may be seen or not (one read finds it
    // gone): at most 1,000 events, at least one per node created or deleted.
    assert!((400..=1_000).contains(&applied), "{applied} events");
    let server_now = runtime().block_on(server_tree(&w, &base));
    same("expected", &expected, &server_now);
    same(Z::NAME, &data_of(&cache.snapshot().unwrap()), &server_now);

    // A server restart: Suspended, then Resynced with no change invented.
    server.restart().unwrap();
    let started = Instant::now();
    let mut seen = Vec::new();
    loop {
        let e = cache
            .next(W * 2)
            .unwrap_or_else(|| panic!("{}: no resync: {seen:?}", Z::NAME));
        let done = e == CacheEvent::Resynced;
        seen.push(e);
        if done {
            break;
        }
    }
    println!(
        "{}: resynced {} nodes in {:.0} ms after the restart",
        Z::NAME,
        replica.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(
        seen,
        [CacheEvent::Suspended, CacheEvent::Resynced],
        "{}",
        Z::NAME
    );
    // The watch carries on.
    runtime().block_on(async {
        let w = writer(&cs).await;
        w.set_data(&format!("{base}/n000/m000"), "after", None)
            .await
            .unwrap();
        w.close().await;
    });
    loop {
        let e = cache.next(W).expect("the change after the restart");
        if let CacheEvent::Changed { path, data, .. } = &e {
            assert_eq!(path, &format!("{base}/n000/m000"));
            assert_eq!(&data[..], b"after");
            break;
        }
        assert!(!apply(&mut replica, &e), "{e:?}");
    }
    assert_eq!(
        cache
            .get(&format!("{base}/n000/m000"))
            .unwrap()
            .map(|n| n.data),
        Some(Bytes::from_static(b"after"))
    );
    drop(cache);
    zk.close();
}

fn children_only<Z: CacheZk>(server: &mut TestServer, root: &str) {
    let cs = server.connect_string();
    let zk = Z::connect(&cs).unwrap();
    let dir = format!("{root}/kids");
    zk.create_all(&format!("{dir}/a/deep"), "x").unwrap();
    zk.create_all(&format!("{dir}/b"), "y").unwrap();
    let mut cache = zk.children_cache(&dir);
    assert_eq!(
        cache.initialized().unwrap(),
        3,
        "the node and its two children"
    );
    let snap = cache.snapshot().unwrap();
    assert!(snap.contains_key(&format!("{dir}/a")) && !snap.contains_key(&format!("{dir}/a/deep")));
    zk.create_all(&format!("{dir}/a/deeper"), "z").unwrap();
    zk.delete(&format!("{dir}/b")).unwrap();
    loop {
        match cache.next(W).expect("an event") {
            CacheEvent::Deleted { path } => {
                assert_eq!(path, format!("{dir}/b"), "nothing below depth 1");
                break;
            }
            CacheEvent::Created { path, .. } => panic!("{}: {path}", Z::NAME),
            _ => {}
        }
    }
    drop(cache);
    zk.close();
}

/// The cache's session expires; changes are made before and while it is renewed: the
/// new session's resync reports exactly them.
fn session_expiry<Z: CacheZk>(server: &mut TestServer, root: &str) {
    let cs = server.connect_string();
    let zk = Z::connect(&cs).unwrap();
    let other = Z::connect(&cs).unwrap();
    let dir = format!("{root}/exp");
    zk.create_all(&format!("{dir}/a"), "a1").unwrap();
    zk.create_all(&format!("{dir}/b/deep"), "d").unwrap();
    let mut cache = zk.tree_cache(&dir);
    assert_eq!(cache.initialized().unwrap(), 4);
    let mut replica = data_of(&cache.snapshot().unwrap());
    let old = zk.session_id();
    expire_session(server.addr(), old, &zk.session_password()).unwrap();
    other.fire_set_data(&format!("{dir}/a"), Bytes::from_static(b"a2"));
    other.delete(&format!("{dir}/b/deep")).unwrap();
    other.delete(&format!("{dir}/b")).unwrap();
    other.create_all(&format!("{dir}/c"), "c1").unwrap();
    let mut expected = replica.clone();
    expected.insert(format!("{dir}/a"), Bytes::from_static(b"a2"));
    expected.remove(&format!("{dir}/b/deep"));
    expected.remove(&format!("{dir}/b"));
    expected.insert(format!("{dir}/c"), Bytes::from_static(b"c1"));
    let mut seen = Vec::new();
    while replica != expected || !seen.contains(&CacheEvent::Resynced) {
        let e = cache
            .next(W)
            .unwrap_or_else(|| panic!("{}: stopped short: {seen:?}", Z::NAME));
        apply(&mut replica, &e);
        seen.push(e);
    }
    assert_ne!(zk.session_id(), old, "{}: a new session", Z::NAME);
    assert_eq!(
        seen.first(),
        Some(&CacheEvent::Suspended),
        "{}: {seen:?}",
        Z::NAME
    );
    assert_eq!(data_of(&cache.snapshot().unwrap()), expected, "{}", Z::NAME);
    // The new session's watch follows changes.
    other.delete(&format!("{dir}/c")).unwrap();
    loop {
        let e = cache.next(W).expect("the deletion");
        if e == (CacheEvent::Deleted {
            path: format!("{dir}/c"),
        }) {
            break;
        }
        assert!(!apply(&mut replica, &e), "{}: {e:?}", Z::NAME);
    }
    drop(cache);
    zk.close();
    other.close();
}

#[test]
fn session_expiry_resyncs_on_the_new_session() {
    let mut server = TestServer::start().expect("a real ZooKeeper");
    session_expiry::<B>(&mut server, "/blocking");
    session_expiry::<T>(&mut server, "/tokio");
}

#[test]
fn ten_thousand_nodes_changes_and_a_restart() {
    let mut server = TestServer::start().expect("a real ZooKeeper");
    big_tree::<B>(&mut server, "/blocking");
    big_tree::<T>(&mut server, "/tokio");
}

#[test]
fn children_cache_through_both_adapters() {
    let mut server = TestServer::start().expect("a real ZooKeeper");
    children_only::<B>(&mut server, "/blocking");
    children_only::<T>(&mut server, "/tokio");
}
