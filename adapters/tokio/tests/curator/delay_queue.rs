//! Interoperability with Apache Curator 5.4's `DistributedDelayQueue` (Debian's
//! `libcurator-recipes-java`) on one path: items a Java producer puts for later are
//! taken by our consumer, not before their time, and items our producer puts for later
//! are consumed by Java, not before their time — none lost, none doubled.
//!
//! Curator's format (checked in its source): items are
//! `<path>/queue-|<time as %08X>|<10-digit seq>`, `PERSISTENT_SEQUENTIAL`, the data
//! framed by its `ItemSerializer`; its consumer sorts by time and waits for the
//! earliest. Each item's data here is `<name>@<its time in Unix ms>`, so the taker
//! checks the time against its own clock (one machine: one clock).

// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use crate::support as curator_support;

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, CreateOptions, Options};

fn java(cp: &str, args: &[&str]) -> Command {
    let mut c = Command::new("java");
    c.arg("-cp").arg(cp).arg("CuratorDelayQueue").args(args);
    c
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `<name>@<time>` → (name, time).
fn split(item: &str) -> (String, u64) {
    let (name, at) = item.rsplit_once('@').unwrap();
    (name.to_string(), at.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_puts_for_later_and_we_take_not_before_their_time() {
    let (_dir, cp) = curator_support::compiled("CuratorDelayQueue");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let zk = connect(&cs, Options::default()).await.unwrap();
    // The queue's directory made persistent first (Curator would make a container).
    zk.create_all("/interop/dq1", "", &CreateOptions::default())
        .await
        .unwrap();
    // Five due at once, then five due 3 s after their put: ours takes the five due
    // first, then the others, each not before its time.
    for (prefix, delay) in [("now", "0"), ("late", "3000")] {
        let out = java(&cp, &[&cs, "/interop/dq1", "put", "5", prefix, delay])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "PUT 5");
    }
    let kids = zk.get_children("/interop/dq1").await.unwrap();
    assert!(kids.iter().all(|k| k.starts_with("queue-|")), "{kids:?}");
    let mut q = zk.delay_queue("/interop/dq1");
    let mut got = Vec::new();
    for _ in 0..10 {
        let item = tokio::time::timeout(Duration::from_secs(20), q.take())
            .await
            .expect("taken")
            .unwrap();
        let taken_at = unix_ms();
        let (name, at) = split(std::str::from_utf8(&item.data).unwrap());
        assert!(taken_at >= at, "{name} taken at {taken_at}, due at {at}");
        got.push(name);
    }
    assert!(got[..5].iter().all(|n| n.starts_with("now")), "{got:?}");
    let mut late: Vec<&String> = got[5..].iter().collect();
    late.sort();
    assert_eq!(late, ["late0", "late1", "late2", "late3", "late4"]);
    assert!(q
        .take_timeout(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(zk.get_children("/interop/dq1").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn we_put_for_later_and_curator_takes_not_before_their_time() {
    let (_dir, cp) = curator_support::compiled("CuratorDelayQueue");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let zk = connect(&cs, Options::default()).await.unwrap();
    let mut q = zk.delay_queue("/interop/dq2");
    // Our first put makes the directory (persistent) before Curator starts.
    let at = SystemTime::now() + Duration::from_millis(1500);
    let ms = at.duration_since(UNIX_EPOCH).unwrap().as_millis();
    q.put_at(format!("r0@{ms}"), at).await.unwrap();
    let child = java(&cp, &[&cs, "/interop/dq2", "take", "6"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = curator_support::items_until_done(child);
    let mut items = Vec::new();
    for i in 1..6 {
        let delay = Duration::from_millis(if i % 2 == 0 { 0 } else { 800 });
        let at = SystemTime::now() + delay;
        let ms = at.duration_since(UNIX_EPOCH).unwrap().as_millis();
        items.push((format!("r{i}@{ms}"), at));
    }
    q.put_many_at(items).await.unwrap();
    let got = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    assert_eq!(got.len(), 6, "{got:?}");
    let mut names = Vec::new();
    for line in &got {
        let (item, consumed) = line.rsplit_once(' ').unwrap();
        let consumed: u64 = consumed.parse().unwrap();
        let (name, at) = split(item);
        assert!(consumed >= at, "{name} consumed at {consumed}, due at {at}");
        names.push(name);
    }
    names.sort();
    assert_eq!(names, ["r0", "r1", "r2", "r3", "r4", "r5"]);
    assert!(zk.get_children("/interop/dq2").await.unwrap().is_empty());
}
