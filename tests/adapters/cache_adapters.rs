// Tree cache against a real ZooKeeper 3.8, in each form: a 10,000-node subtree loaded
// (time printed), 1,000 changes by another client (creates, writes, deletes) followed
// event by event until the cache equals the server (events/s printed), then a server
// restart: the cache resyncs without inventing a change, and follows changes again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zk::{CacheEvent, CachedNode, CreateOptions, Error};
use zk_recipes_testing::{expire_session, TestServer};

const W: Duration = Duration::from_secs(30);
const TOP: usize = 100;
const UNDER: usize = 99;
/// Requests the other client keeps in flight.
const IN_FLIGHT: usize = 50;

// ----- the other client: bulk operations, pipelined -----

#[form]
async fn writer(cs: &str) -> zk::Client {
    zk::connect(
        cs,
        zk::Options::default()
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

/// Runs `ops` (in no particular order) with up to 50 in flight; each must succeed.
#[form]
async fn run_ops(zk: &zk::Client, ops: Vec<Op>) {
    let mut lanes: Vec<Vec<Op>> = (0..IN_FLIGHT).map(|_| Vec::new()).collect();
    for (i, op) in ops.into_iter().enumerate() {
        lanes[i % IN_FLIGHT].push(op);
    }
    let mut parts = Vec::new();
    for lane in lanes {
        let zk = zk.clone();
        parts.push(spawn(move || async move {
            for op in lane {
                let r = match &op {
                    Op::Create(p, d) => zk
                        .create(p, d.clone(), &CreateOptions::default())
                        .await
                        .map(drop),
                    Op::Set(p, d) => zk.set_data(p, d.clone(), None).await.map(drop),
                    Op::Delete(p) => zk.delete(p, None).await,
                };
                r.unwrap_or_else(|e| panic!("{e:?} (status {:?})", zk.status()));
            }
        }));
    }
    for p in parts {
        p.join().await;
    }
}

/// The server's subtree at `root`: path → data, read level by level, up to 50 reads
/// in flight (a node deleted meanwhile is left out; any other error fails).
#[form]
async fn server_tree(zk: &zk::Client, root: &str) -> BTreeMap<String, Bytes> {
    let mut out = BTreeMap::new();
    let mut level = vec![root.to_string()];
    while !level.is_empty() {
        let mut lanes: Vec<Vec<String>> = (0..IN_FLIGHT).map(|_| Vec::new()).collect();
        for (i, p) in level.drain(..).enumerate() {
            lanes[i % IN_FLIGHT].push(p);
        }
        let mut parts = Vec::new();
        for lane in lanes {
            let zk = zk.clone();
            parts.push(spawn(move || async move {
                let mut read = Vec::new();
                for p in lane {
                    let data = zk.get_data(&p).await.map(|(d, _)| d);
                    let kids = zk.get_children(&p).await;
                    read.push((p, data, kids));
                }
                read
            }));
        }
        let mut next = Vec::new();
        for part in parts {
            for (p, data, kids) in part.join().await {
                let gone = |e: &Error| e.code() == Some(zk::ErrorCode::NoNode);
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
            }
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

#[form]
async fn big_tree(server: &mut TestServer) {
    let root = "/cache";
    let cs = server.connect_string();
    let w = writer(&cs).await;
    let base = format!("{root}/tree");
    // 1 + 100 + 100 × 99 = 10,001 nodes.
    let mut ops = Vec::new();
    for i in 0..TOP {
        for j in 0..UNDER {
            ops.push((i, j));
        }
    }
    {
        let _ = w
            .create(root, Bytes::new(), &CreateOptions::default())
            .await;
        w.create(&base, "root", &CreateOptions::default())
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
    }

    // Load.
    let zk = connect(&cs).await;
    let started = Instant::now();
    let mut cache = zk.tree_cache(&base).unwrap();
    let n = cache.initialized().await.unwrap();
    let load = started.elapsed();
    println!(
        "{}: loaded {n} nodes in {:.0} ms ({:.0} nodes/s)",
        NAME,
        load.as_secs_f64() * 1e3,
        n as f64 / load.as_secs_f64()
    );
    assert_eq!(n, 1 + TOP + TOP * UNDER);
    let server_now = server_tree(&w, &base).await;
    let mut replica = data_of(&cache.snapshot().await.unwrap());
    same(&format!("{}: load", NAME), &replica, &server_now);

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
    run_ops(&w, changes).await;
    let written = started.elapsed();
    let mut applied = 0;
    while replica != expected {
        let e = cache
            .next_timeout(W)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("{}: the cache stopped short", NAME));
        if apply(&mut replica, &e) {
            applied += 1;
        }
    }
    let followed = started.elapsed();
    println!(
        "{}: 1,000 changes written in {:.0} ms, {applied} events applied by {:.0} ms ({:.0} events/s)",
        NAME,
        written.as_secs_f64() * 1e3,
        followed.as_secs_f64() * 1e3,
        applied as f64 / followed.as_secs_f64()
    );
    // A write to a node deleted right after may be seen or not (one read finds it
    // gone): at most 1,000 events, at least one per node created or deleted.
    assert!((400..=1_000).contains(&applied), "{applied} events");
    let server_now = server_tree(&w, &base).await;
    same("expected", &expected, &server_now);
    same(
        NAME,
        &data_of(&cache.snapshot().await.unwrap()),
        &server_now,
    );

    // A server restart: Suspended, then Resynced with no change invented.
    server.restart().unwrap();
    let started = Instant::now();
    let mut seen = Vec::new();
    loop {
        let e = cache
            .next_timeout(W * 2)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("{}: no resync: {seen:?}", NAME));
        let done = e == CacheEvent::Resynced;
        seen.push(e);
        if done {
            break;
        }
    }
    println!(
        "{}: resynced {} nodes in {:.0} ms after the restart",
        NAME,
        replica.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(
        seen,
        [CacheEvent::Suspended, CacheEvent::Resynced],
        "{}",
        NAME
    );
    // The watch carries on.
    {
        let w = writer(&cs).await;
        w.set_data(&format!("{base}/n000/m000"), "after", None)
            .await
            .unwrap();
        w.close().await;
    }
    loop {
        let e = cache
            .next_timeout(W)
            .await
            .ok()
            .flatten()
            .expect("the change after the restart");
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
            .await
            .unwrap()
            .map(|n| n.data),
        Some(Bytes::from_static(b"after"))
    );
    drop(cache);
    zk.close().await;
}

#[form]
async fn children_only(server: &mut TestServer) {
    let root = "/cache";
    let cs = server.connect_string();
    let zk = connect(&cs).await;
    let dir = format!("{root}/kids");
    zk.create_all(&format!("{dir}/a/deep"), "x", &CreateOptions::default())
        .await
        .unwrap();
    zk.create_all(&format!("{dir}/b"), "y", &CreateOptions::default())
        .await
        .unwrap();
    let mut cache = zk.children_cache(&dir).unwrap();
    assert_eq!(
        cache.initialized().await.unwrap(),
        3,
        "the node and its two children"
    );
    let snap = cache.snapshot().await.unwrap();
    assert!(snap.contains_key(&format!("{dir}/a")) && !snap.contains_key(&format!("{dir}/a/deep")));
    zk.create_all(&format!("{dir}/a/deeper"), "z", &CreateOptions::default())
        .await
        .unwrap();
    zk.delete(&format!("{dir}/b"), None).await.unwrap();
    loop {
        match cache
            .next_timeout(W)
            .await
            .ok()
            .flatten()
            .expect("an event")
        {
            CacheEvent::Deleted { path } => {
                assert_eq!(path, format!("{dir}/b"), "nothing below depth 1");
                break;
            }
            CacheEvent::Created { path, .. } => panic!("{}: {path}", NAME),
            _ => {}
        }
    }
    drop(cache);
    zk.close().await;
}

/// The cache's session expires; changes are made before and while it is renewed: the
/// new session's resync reports exactly them.
#[form]
async fn session_expiry(server: &mut TestServer) {
    let root = "/cache";
    let cs = server.connect_string();
    let zk = connect(&cs).await;
    let other = connect(&cs).await;
    let dir = format!("{root}/exp");
    zk.create_all(&format!("{dir}/a"), "a1", &CreateOptions::default())
        .await
        .unwrap();
    zk.create_all(&format!("{dir}/b/deep"), "d", &CreateOptions::default())
        .await
        .unwrap();
    let mut cache = zk.tree_cache(&dir).unwrap();
    assert_eq!(cache.initialized().await.unwrap(), 4);
    let mut replica = data_of(&cache.snapshot().await.unwrap());
    let old = zk.session_id();
    expire_session(server.addr(), old, &zk.session_password()).unwrap();
    // A setData started without waiting for it.
    drop(spawn({
        let (other, path) = (other.clone(), format!("{dir}/a"));
        move || async move { other.set_data(&path, Bytes::from_static(b"a2"), None).await }
    }));
    other.delete(&format!("{dir}/b/deep"), None).await.unwrap();
    other.delete(&format!("{dir}/b"), None).await.unwrap();
    other
        .create_all(&format!("{dir}/c"), "c1", &CreateOptions::default())
        .await
        .unwrap();
    let mut expected = replica.clone();
    expected.insert(format!("{dir}/a"), Bytes::from_static(b"a2"));
    expected.remove(&format!("{dir}/b/deep"));
    expected.remove(&format!("{dir}/b"));
    expected.insert(format!("{dir}/c"), Bytes::from_static(b"c1"));
    let mut seen = Vec::new();
    while replica != expected || !seen.contains(&CacheEvent::Resynced) {
        let e = cache
            .next_timeout(W)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("{}: stopped short: {seen:?}", NAME));
        apply(&mut replica, &e);
        seen.push(e);
    }
    assert_ne!(zk.session_id(), old, "{}: a new session", NAME);
    assert_eq!(
        seen.first(),
        Some(&CacheEvent::Suspended),
        "{}: {seen:?}",
        NAME
    );
    assert_eq!(
        data_of(&cache.snapshot().await.unwrap()),
        expected,
        "{}",
        NAME
    );
    // The new session's watch follows changes.
    other.delete(&format!("{dir}/c"), None).await.unwrap();
    loop {
        let e = cache
            .next_timeout(W)
            .await
            .ok()
            .flatten()
            .expect("the deletion");
        if e == (CacheEvent::Deleted {
            path: format!("{dir}/c"),
        }) {
            break;
        }
        assert!(!apply(&mut replica, &e), "{}: {e:?}", NAME);
    }
    drop(cache);
    zk.close().await;
    other.close().await;
}

#[test]
fn session_expiry_resyncs_on_the_new_session() {
    run(session_expiry(&mut server()));
}

#[test]
fn ten_thousand_nodes_changes_and_a_restart() {
    run(big_tree(&mut own_server()));
}

#[test]
fn children_cache() {
    run(children_only(&mut server()));
}
