//! Interoperability with kazoo's `SetPartitioner` (Debian's `python3-kazoo` 2.8,
//! `kazoo_partitioner.py`): a kazoo member and ours in one party on a real server
//! divide one set as kazoo's division says; together they hold every item, no item by
//! both (read from the lock nodes: each item's one node, its `ephemeralOwner` the
//! holder's session, and from what each side reports). The kazoo process killed with
//! SIGKILL: ours takes every item once its session (1 s) expires. A second kazoo joins,
//! the two divide again; ours finishes: kazoo takes every item.
//!
//! kazoo's nodes (2.8's `SetPartitioner`): the party `<path>/party/<uuid hex>-<id>`
//! (ephemeral, its data the identifier), one kazoo `Lock` per item at
//! `<path>/locks/<item>` (`<uuid hex>__lock__<seq>`); ours are the same
//! (`zk_recipes::recipe::partitioner`).

// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Client, HeldItem, Options};

use crate::support::Proc;

/// Debian's Python, which has `python3-kazoo` (a `python3` earlier on PATH may not).
const PYTHON: &str = "/usr/bin/python3";
const PATH: &str = "/interop/partitioner";
const ITEMS: [&str; 8] = ["w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7"];
const W: Duration = Duration::from_secs(20);

/// A kazoo process with one member `k` (1 s sessions, a 200 ms time boundary).
fn kazoo(cs: &str) -> Proc {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/curator/kazoo_partitioner.py"
    );
    let mut cmd = std::process::Command::new(PYTHON);
    cmd.args([script, cs, PATH, &ITEMS.join(","), "0.2", "1.0", "k"]);
    let mut p = Proc::spawn(cmd);
    p.line("JOINED");
    p
}

/// Each item's lock nodes, with their owners' sessions.
async fn lock_owners(zk: &Client) -> Vec<Vec<(String, i64)>> {
    let mut all = Vec::new();
    for item in ITEMS {
        let dir = format!("{PATH}/locks/{item}");
        let mut nodes = Vec::new();
        for n in zk.get_children(&dir).await.unwrap_or_default() {
            if let Ok((_, stat)) = zk.get_data(&format!("{dir}/{n}")).await {
                nodes.push((n, stat.ephemeral_owner));
            }
        }
        all.push(nodes);
    }
    all
}

/// Every item held by exactly one side: ours (`held`, on `zk`'s session) or the other
/// (a kazoo lock node, `<hex>__lock__<seq>`, of another session).
async fn exactly_one_holder(zk: &Client, held: &[HeldItem]) {
    for (item, nodes) in ITEMS.iter().zip(lock_owners(zk).await) {
        assert_eq!(nodes.len(), 1, "{item}: one lock node: {nodes:?}");
        let (node, owner) = &nodes[0];
        match held.iter().find(|h| h.item == *item) {
            Some(h) => assert_eq!((node, *owner), (&h.node, zk.session_id()), "{item}"),
            None => assert!(
                node.contains("__lock__") && *owner != zk.session_id(),
                "{item}: kazoo's: {node}"
            ),
        }
    }
}

fn names(held: &[HeldItem]) -> String {
    held.iter()
        .map(|h| h.item.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn kazoo_and_ours_divide_one_set() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(divide_one_set());
}

async fn divide_one_set() {
    let started = std::time::Instant::now();
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let zk = connect(&cs, Options::default()).await.unwrap();
    let join = || {
        zk.partitioner(PATH, &ITEMS)
            .identifier("r")
            .time_boundary(Duration::from_millis(200))
            .join()
            .unwrap()
    };

    // kazoo's "k" and our "r": k takes the items at even places, r the others.
    let mut kazoo1 = kazoo(&cs);
    let mut ours = join();
    let held = ours.acquired_timeout(W).await.unwrap().expect("our share");
    assert_eq!(names(&held), "w1,w3,w5,w7");
    kazoo1.until("ACQUIRED k w0,w2,w4,w6");
    exactly_one_holder(&zk, &held).await;

    // kazoo killed (SIGKILL): once its session expires, ours is told and takes all.
    kazoo1.kill9();
    assert!(ours.release_needed_timeout(W).await.unwrap(), "told");
    ours.release().await.unwrap();
    let held = ours.acquired_timeout(W).await.unwrap().expect("every item");
    assert_eq!(names(&held), ITEMS.join(","));
    exactly_one_holder(&zk, &held).await;

    // A new kazoo member: the two divide again; ours finishes, kazoo takes all.
    let mut kazoo2 = kazoo(&cs);
    assert!(ours.release_needed_timeout(W).await.unwrap(), "told");
    let held = ours
        .acquired_timeout(W)
        .await
        .unwrap()
        .expect("our new share");
    assert_eq!(names(&held), "w1,w3,w5,w7");
    kazoo2.until("ACQUIRED k w0,w2,w4,w6");
    exactly_one_holder(&zk, &held).await;
    ours.finish().await.unwrap();
    kazoo2.until(&format!("ACQUIRED k {}", ITEMS.join(",")));
    exactly_one_holder(&zk, &[]).await;
    kazoo2.send("finish");
    kazoo2.until("FINISHED");
    assert!(zk
        .get_children(&format!("{PATH}/party"))
        .await
        .unwrap()
        .is_empty());
    assert!(
        lock_owners(&zk).await.iter().all(Vec::is_empty),
        "nothing left"
    );
    println!("kazoo partitioner interop in {:?}", started.elapsed());
    zk.close().await;
}
