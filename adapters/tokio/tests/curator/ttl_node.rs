//! Interoperability with Apache Curator 5.4's `PersistentTtlNode` (`CuratorTtlNode.java`)
//! on a real ZooKeeper with TTL nodes on: Curator's node is read by ours and lapses
//! after its TTL once its process is killed with SIGKILL; Curator's node on a path
//! ours keeps adopts our node (same container, same touch child), and the node lapses
//! after its TTL once both stopped touching.
//!
//! What Curator does (its 5.4 source): a `PersistentNode(CONTAINER, <path>, data)`
//! whose close deletes nothing (a `NodeExists` on its create is answered with a
//! `setData` of its data, then `waitForInitialCreate` is true), and every `ttl / 2` a
//! `setData(<path>/touch)`, or on `NoNode` a `create().orSetData()` of it as
//! `PERSISTENT_WITH_TTL` with the TTL. Ours ([`zk_recipes_tokio::Client::ttl_node`])
//! writes the same nodes.

// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use zk_recipes::proto::Stat;
use zk_recipes_testing::{Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, Client, Options};

use crate::support::{self as curator_support, Proc};

const TTL: Duration = Duration::from_millis(1000);
const TTL_MS: &str = "1000";

/// Curator's `PersistentTtlNode` on `path` (data "java") in a process of its own,
/// once its client read `existing` there (`-`: nothing), `waitForInitialCreate` was
/// true and its touch child is on the server.
fn curator_node(cp: &str, cs: &str, path: &str, existing: &str) -> Proc {
    let mut java = Proc::java(cp, "CuratorTtlNode", &[cs, path, TTL_MS, "java"]);
    assert_eq!(java.line("EXISTING"), format!("EXISTING {existing}"));
    assert_eq!(java.line("CREATED"), "CREATED true");
    java.line("TOUCHED");
    java
}

/// The touch child of `path`'s stat after more than its TTL: the same child as
/// `first` (not lapsed and made again), touched since (its version moved on).
async fn touched_past_ttl(zk: &Client, path: &str, first: &Stat) -> Stat {
    tokio::time::sleep(TTL * 3 / 2).await;
    let touch = format!("{path}/touch");
    let later = zk
        .exists(&touch)
        .await
        .unwrap()
        .expect("lapsed while touched");
    assert_eq!(later.czxid, first.czxid, "the touch child was made again");
    assert!(later.version > first.version, "{first:?} -> {later:?}");
    later
}

/// Waits until `path` is gone (our raw `exists`), at most `TTL * 8` (Curator's session
/// lasts 20 s: a node gone by then went by its TTL), measured from now; checks it went
/// no sooner than its TTL allows (the last touch was at most `ttl / 2` ago).
async fn lapses(zk: &Client, path: &str) -> Duration {
    let since = Instant::now();
    loop {
        if zk.exists(path).await.unwrap().is_none() {
            let gone = since.elapsed();
            assert!(
                gone >= TTL / 4,
                "{path} gone {gone:?} after: before its TTL"
            );
            return gone;
        }
        assert!(
            since.elapsed() < TTL * 8,
            "{path} still there {:?} after its owners stopped",
            since.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_ours_keep_one_ttl_node_and_it_lapses_after_both_stop() {
    // The container manager runs every 100 ms (60 s by default): a lapsed node goes
    // within the test's time.
    let server = TestServer::start_with(ServerOptions {
        jvm_flags: vec!["-Dznode.container.checkIntervalMs=100".into()],
        ..ServerOptions::default()
    })
    .expect("a real ZooKeeper with TTL nodes");
    let cs = server.connect_string();
    let (_java, cp) = curator_support::compiled("CuratorTtlNode");
    let zk = connect(&cs, Options::default()).await.unwrap();

    // (1) Curator's node, read by ours: the data at `<path>`, the `touch` child, kept
    // past its TTL by Curator's touches.
    let path = "/interop/ttl/curator";
    let mut java = curator_node(&cp, &cs, path, "-");
    assert_eq!(&zk.get_data(path).await.unwrap().0[..], b"java");
    let first = zk.exists(&format!("{path}/touch")).await.unwrap();
    touched_past_ttl(&zk, path, &first.expect("Curator's touch child")).await;
    // Killed with SIGKILL: the child lapses after its TTL (counted from the last
    // touch), then the container goes.
    java.kill9();
    let gone = lapses(&zk, path).await;
    println!("Curator's node gone {gone:?} after its process was killed (TTL {TTL:?})");

    // (2) Ours keeps a node; Curator's `PersistentTtlNode` on the same path adopts it:
    // its client reads our data, its create finds our container (same czxid) and
    // writes its data in, and its touches land on our touch child (same czxid).
    let path = "/interop/ttl/ours";
    let mut ours = zk.ttl_node(path, "ours", TTL).unwrap();
    ours.present(Duration::from_secs(10)).await.unwrap();
    let container = zk.exists(path).await.unwrap().expect("our container");
    let first = zk.exists(&format!("{path}/touch")).await.unwrap();
    let first = first.expect("our touch child");
    let mut java = curator_node(&cp, &cs, path, "ours");
    let (data, stat) = zk.get_data(path).await.unwrap();
    assert_eq!((&data[..], stat.czxid), (&b"java"[..], container.czxid));
    let both = touched_past_ttl(&zk, path, &first).await;
    // Curator closes (it deletes nothing): ours keeps the node past its TTL.
    java.send("close");
    java.line("CLOSED");
    touched_past_ttl(&zk, path, &both).await;
    assert!(ours.is_present().await.unwrap());
    // Ours closes too: the node lapses after its TTL.
    ours.close().await.unwrap();
    let gone = lapses(&zk, path).await;
    println!("the node gone {gone:?} after ours closed (TTL {TTL:?})");
    zk.close().await;
}
