//! Interoperability with Apache Curator 5.4's `SimpleDistributedQueue` (Debian's
//! `libcurator-recipes-java`): items a Java producer offers are taken by our consumer,
//! items our producer puts are taken by Java, and a Java consumer and ours share one
//! queue — in order, none lost, none duplicated.
//!
//! Curator's format (checked in its source): items are `<path>/qn-<10-digit seq>`,
//! `PERSISTENT_SEQUENTIAL`, parents created as containers; `take` lists the children,
//! keeps those starting with `qn-`, sorts the names, and takes the first it can
//! `delete` (a `NoNode` means someone else took it). Our side directory
//! (`<path>-meta`) is a sibling, so Curator never sees our markers or claims.

// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use crate::support as curator_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Options};

fn java(cp: &str, args: &[&str]) -> Command {
    let mut c = Command::new("java");
    c.arg("-cp").arg(cp).arg("CuratorQueue").args(args);
    c
}

/// Runs a Java `take` of `n` items in a thread; its items, in the order it took them.
fn java_take(cp: &str, cs: &str, path: &str, n: usize) -> std::thread::JoinHandle<Vec<String>> {
    let child = java(cp, &[cs, path, "take", &n.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    curator_support::items_until_done(child)
}

fn numbered(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_offers_and_we_take_in_order() {
    let (_dir, cp) = curator_support::compiled("CuratorQueue");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let out = java(&cp, &[&cs, "/interop/q1", "offer", "20", "j"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OFFERED 20");
    let zk = connect(&cs, Options::default()).await.unwrap();
    let kids = zk.get_children("/interop/q1").await.unwrap();
    assert!(kids.iter().all(|k| k.starts_with("qn-")), "{kids:?}");
    let mut q = zk.queue("/interop/q1");
    let mut got = Vec::new();
    for _ in 0..20 {
        let item = tokio::time::timeout(Duration::from_secs(20), q.take())
            .await
            .expect("taken")
            .unwrap();
        got.push(String::from_utf8(item.data.to_vec()).unwrap());
    }
    assert_eq!(got, numbered("j", 20), "in order, none lost or doubled");
    assert!(q
        .take_timeout(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(zk.get_children("/interop/q1").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn we_put_and_curator_takes_in_order() {
    let (_dir, cp) = curator_support::compiled("CuratorQueue");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let zk = connect(&cs, Options::default()).await.unwrap();
    let mut q = zk.queue("/interop/q2");
    // Curator waits on the empty queue first; our items wake it.
    let taker = java_take(&cp, &cs, "/interop/q2", 20);
    tokio::time::sleep(Duration::from_millis(500)).await;
    q.put_many(numbered("r", 10)).await.unwrap();
    for item in numbered("r", 20).into_iter().skip(10) {
        q.put(item).await.unwrap();
    }
    let got = tokio::task::spawn_blocking(move || taker.join().unwrap())
        .await
        .unwrap();
    assert_eq!(got, numbered("r", 20), "in order, none lost or doubled");
    assert!(zk.get_children("/interop/q2").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curator_consumer_and_ours_share_one_queue() {
    let (_dir, cp) = curator_support::compiled("CuratorQueue");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let zk = connect(&cs, Options::default()).await.unwrap();
    let mut producer = zk.queue("/interop/q3");
    let java_items = java_take(&cp, &cs, "/interop/q3", 15);
    let mut ours = zk.queue("/interop/q3");
    let taker = tokio::spawn(async move {
        let mut got = Vec::new();
        while got.len() < 25 {
            match ours.take_timeout(Duration::from_secs(20)).await.unwrap() {
                Some(item) => got.push(String::from_utf8(item.data.to_vec()).unwrap()),
                None => break,
            }
        }
        got
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    for chunk in numbered("s", 40).chunks(5) {
        producer.put_many(chunk.to_vec()).await.unwrap();
    }
    let ours = taker.await.unwrap();
    let theirs = tokio::task::spawn_blocking(move || java_items.join().unwrap())
        .await
        .unwrap();
    let index = |s: &String| s[1..].parse::<usize>().unwrap();
    // Curator takes the lowest item each time: in order. Ours, meeting contention,
    // moves on in its listing and takes what it passed over in its next round.
    let idx: Vec<usize> = theirs.iter().map(index).collect();
    assert!(idx.windows(2).all(|w| w[0] < w[1]), "in order: {idx:?}");
    let mut all: Vec<usize> = ours.iter().chain(&theirs).map(index).collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..40).collect::<Vec<_>>(),
        "ours {ours:?} theirs {theirs:?}"
    );
    assert!(zk.get_children("/interop/q3").await.unwrap().is_empty());
}
