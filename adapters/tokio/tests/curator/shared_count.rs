//! Interoperability with Apache Curator 5.4 (Debian's `libcurator-recipes-java`): a Java
//! `SharedCount` (4-byte int) or `DistributedAtomicLong` (8-byte long) and two of our
//! counters (`Client::counter`, each on its own session) increment the same node at the
//! same time, 150 times each: the node ends at exactly 450 and the 450 values written
//! (Curator's and ours) are 1..=450, each once — no increment lost or applied twice, in
//! either format. Our counter watch follows the node meanwhile and ends at 450 too.

use crate::support as curator_support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use zk_recipes::recipe::value::counter_value;
use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, CounterFormat, Options};

const EACH: i64 = 150;

async fn three_writers(cp: &str, cs: &str, kind: &str, format: CounterFormat, path: &str) {
    let a = connect(cs, Options::default()).await.unwrap();
    let b = connect(cs, Options::default()).await.unwrap();
    let mut java = Command::new("java")
        .args(["-cp", cp, "CuratorCounter", cs, path, kind])
        .arg(EACH.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(java.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "READY");
    let mut watch = a.watch_counter(path, format).unwrap();
    // All three start together.
    let mut ours = Vec::new();
    for zk in [&a, &b] {
        let mut c = zk.counter(path, format).unwrap();
        ours.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..EACH {
                seen.push(c.add(1).await.expect("add"));
            }
            seen
        }));
    }
    java.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut all = BTreeSet::new();
    for t in ours {
        for v in t.await.unwrap() {
            assert!(all.insert(v), "{kind}: value {v} written twice");
        }
    }
    let line = tokio::task::spawn_blocking(move || lines.next().unwrap().unwrap())
        .await
        .unwrap();
    assert!(java.wait().unwrap().success(), "Curator failed");
    let theirs: Vec<i64> = line
        .strip_prefix("VALUES ")
        .unwrap_or_else(|| panic!("Curator said {line}"))
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(theirs.len(), EACH as usize);
    // How interleaved the three writers were: runs of consecutive values Curator wrote.
    let runs = 1 + theirs.windows(2).filter(|w| w[1] != w[0] + 1).count();
    println!(
        "{kind}: Curator wrote {} values in {runs} runs between ours ({}..={})",
        theirs.len(),
        theirs[0],
        theirs[theirs.len() - 1]
    );
    for v in theirs {
        assert!(
            all.insert(v),
            "{kind}: value {v} written by Curator and by us"
        );
    }
    let total = 3 * EACH;
    assert_eq!(all, (1..=total).collect::<BTreeSet<_>>(), "{kind}");
    let (data, _) = a.get_data(path).await.unwrap();
    assert_eq!(data.len(), format.width(), "{kind}: Curator's width");
    assert_eq!(counter_value(&data, format), Ok(total), "{kind}");
    assert_eq!(b.counter(path, format).unwrap().get().await, Ok(total));
    let mut last = 0;
    while last < total {
        let v = tokio::time::timeout(Duration::from_secs(10), watch.changed())
            .await
            .expect("the watch reaches the total")
            .unwrap();
        assert!(v >= last, "{kind}: the watch went back from {last} to {v}");
        last = v;
    }
    assert_eq!(last, total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_shared_count_and_ours_count_together() {
    let (_dir, cp) = curator_support::compiled("CuratorCounter");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    three_writers(&cp, &cs, "shared", CounterFormat::I32, "/interop/shared").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_atomic_long_and_ours_count_together() {
    let (_dir, cp) = curator_support::compiled("CuratorCounter");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    three_writers(&cp, &cs, "atomic", CounterFormat::I64, "/interop/atomic").await;
}
