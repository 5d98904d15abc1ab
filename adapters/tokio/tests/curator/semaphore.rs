//! Interoperability with Apache Curator 5.4 (Debian's `libcurator-recipes-java`): a Java
//! `InterProcessSemaphoreV2(client, path, 2)` and our `Client::semaphore(path, 2)` count
//! leases together — same `locks`/`leases` layout, same protected node names.

use crate::support as curator_support;

use std::io::{BufRead, BufReader, Write};

use std::process::{Command, Stdio};
use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Options};

fn curator_try(cp: &str, connect: &str, path: &str) -> String {
    let out = Command::new("java")
        .args(["-cp", cp, "CuratorSemaphore", connect, path, "2", "try"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_zk_recipes_share_the_leases() {
    let (_dir, cp) = curator_support::compiled("CuratorSemaphore");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let a = connect(&cs, Options::default()).await.unwrap();
    let b = connect(&cs, Options::default()).await.unwrap();
    const P: &str = "/interop/sem";

    // We hold both leases: Curator counts them and gets none.
    let l1 = a.semaphore(P, 2).acquire().await.unwrap();
    let l2 = b.semaphore(P, 2).acquire().await.unwrap();
    assert_eq!(curator_try(&cp, &cs, P), "BUSY");
    l2.release().await.unwrap();
    // One free: Curator gets it (and returns it).
    assert_eq!(curator_try(&cp, &cs, P), "ACQUIRED");

    // Curator holds one, we hold one: the semaphore is full for us too.
    let mut java = Command::new("java")
        .args(["-cp", &cp, "CuratorSemaphore", &cs, P, "2", "hold"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(java.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("ACQUIRED"), "{first}");
    let kids = a.get_children(&format!("{P}/leases")).await.unwrap();
    assert_eq!(kids.len(), 2, "{kids:?}");
    assert!(
        kids.iter()
            .all(|k| k.starts_with("_c_") && k.contains("-lease-")),
        "one node format for both: {kids:?}"
    );
    assert!(b
        .semaphore(P, 2)
        .acquire_timeout(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    // We queue (holding the shared `locks` mutex, as Curator does) and get the lease
    // Curator returns.
    let waiting = tokio::spawn({
        let b = b.clone();
        async move { b.semaphore(P, 2).acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "we must wait for Curator's lease");
    java.stdin.take().unwrap().write_all(b"release\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "RELEASED");
    let l3 = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("handed over")
        .unwrap()
        .unwrap();
    let _ = java.wait();
    l1.release().await.unwrap();
    l3.release().await.unwrap();
    assert_eq!(
        a.get_children(&format!("{P}/leases")).await.unwrap(),
        Vec::<String>::new()
    );
}

/// Acquire-and-release in a row, one client, the same path and server for both: prints
/// both rates (a measurement, not a benchmark harness: one run each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_acquisitions_per_second_against_curator() {
    const N: u32 = 300;
    let (_dir, cp) = curator_support::compiled("CuratorSemaphore");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let out = Command::new("java")
        .args([
            "-cp",
            &cp,
            "CuratorSemaphore",
            &cs,
            "/bench/curator",
            "2",
            "bench",
        ])
        .arg(N.to_string())
        .output()
        .unwrap();
    let curator_ms: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("Curator's elapsed milliseconds");
    let zk = connect(&cs, Options::default()).await.unwrap();
    let sem = zk.semaphore("/bench/ours", 2);
    sem.acquire().await.unwrap().release().await.unwrap(); // parents exist
    let start = std::time::Instant::now();
    for _ in 0..N {
        sem.acquire().await.unwrap().release().await.unwrap();
    }
    let ours_ms = start.elapsed().as_secs_f64() * 1000.0;
    println!(
        "{N} acquire+release in a row: zk-recipes {ours_ms:.0} ms ({:.0}/s), Curator 5.4 {curator_ms:.0} ms ({:.0}/s)",
        f64::from(N) * 1000.0 / ours_ms,
        f64::from(N) * 1000.0 / curator_ms.max(1.0)
    );
    assert_eq!(
        zk.get_children("/bench/ours/leases").await.unwrap(),
        Vec::<String>::new()
    );
}
