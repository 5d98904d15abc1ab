//! Two-phase commit against a real ZooKeeper, end to end: `cargo bench --bench two_phase`
//! (`BENCH_QUICK=1` for a short run).
//!
//! One coordinator and 8 sites, each on its own session (its own tokio client). For each
//! transaction the sites are already waiting for it (joined, `exists` watch on the
//! transaction node); the clock starts when the coordinator starts and stops when the
//! last site knows the outcome. Each site votes commit once every site has joined (its
//! "prepare" step), so every transaction must commit (the bench fails otherwise). Both
//! variants:
//!
//! * O(n): only the coordinator watches the votes and writes the outcome;
//! * O(n²): every site watches every vote and may write the outcome itself.
//!
//! Server work per transaction from `mntr` deltas over all transactions: watch
//! notifications (`zk_sum_node_{created,changed,deleted,children}_watch_count`: watchers
//! triggered), `zk_packets_sent` (replies + notifications) and `zk_packets_received`
//! (requests). Latencies are also given in write round trips (`setData` of 100 B)
//! measured in the same run.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::recipe::two_phase::{Outcome, Variant, Vote};
use zk_recipes_testing::{four_letter, Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, Client, CreateOptions, Options};

const SITES: usize = 8;
const WATCH_COUNTERS: [&str; 4] = [
    "zk_sum_node_created_watch_count",
    "zk_sum_node_changed_watch_count",
    "zk_sum_node_deleted_watch_count",
    "zk_sum_node_children_watch_count",
];

fn mntr(addr: std::net::SocketAddr) -> std::collections::HashMap<String, i64> {
    four_letter(addr, "mntr")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('\t')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

fn notifications(m: &std::collections::HashMap<String, i64>) -> i64 {
    WATCH_COUNTERS
        .iter()
        .map(|k| m.get(*k).copied().unwrap_or(0))
        .sum()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn write_rtt(zk: &Client, n: usize) -> Duration {
    let _ = zk
        .create("/rtt", vec![0u8; 100], &CreateOptions::default())
        .await;
    let mut w = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        zk.set_data("/rtt", vec![1u8; 100], None).await.unwrap();
        w.push(t.elapsed());
    }
    median(w)
}

async fn run(
    addr: std::net::SocketAddr,
    coordinator: &Client,
    sites: &[Client],
    variant: Variant,
    n: usize,
    write: Duration,
) {
    let names: Vec<String> = (0..SITES).map(|i| format!("site-{i}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let before = mntr(addr);
    let mut latencies = Vec::with_capacity(n);
    for k in 0..n {
        let tx = format!("/bench/2pc-{variant:?}/tx-{k}");
        // The sites wait for the transaction (each on its own session); each votes once
        // every site has joined (its "prepare" work done), so votes are watched.
        let prepared = Arc::new(tokio::sync::Barrier::new(SITES));
        let mut waiting = Vec::new();
        for (i, client) in sites.iter().enumerate() {
            let (client, tx, name) = (client.clone(), tx.clone(), names[i].clone());
            let prepared = prepared.clone();
            waiting.push(tokio::spawn(async move {
                let mut site = client.site(&tx, &name, variant).await.unwrap();
                prepared.wait().await;
                site.vote(Vote::Commit).await.unwrap();
                let outcome = site.outcome().await.unwrap();
                (Instant::now(), outcome)
            }));
        }
        tokio::time::sleep(Duration::from_millis(30)).await; // their watches are set
        let start = Instant::now();
        let mut t = coordinator
            .transaction(&tx, &name_refs, variant)
            .payload(&b"bench"[..])
            .start()
            .await
            .unwrap();
        let mut last = start;
        for w in waiting {
            let (at, outcome) = w.await.unwrap();
            assert_eq!(outcome, Outcome::Commit, "every site voted commit");
            last = last.max(at);
        }
        assert_eq!(t.outcome().await.unwrap(), Outcome::Commit);
        latencies.push(last - start);
        drop(t);
    }
    // Let the presence deletes and their notifications land before counting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = mntr(addr);
    let delta = |k: &str| {
        (after.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0)) as f64 / n as f64
    };
    let notified = (notifications(&after) - notifications(&before)) as f64 / n as f64;
    let m = median(latencies);
    println!(
        "2pc {SITES} sites {}: coordinator start -> all sites know the outcome: median {:>6.0} us = {:.1} write RTTs; per transaction: {notified:.1} watch notifications, {:.1} packets sent, {:.1} requests",
        match variant {
            Variant::Coordinator => "O(n)  (coordinator watches votes)",
            Variant::Peers => "O(n²) (every site watches every vote)",
        },
        m.as_secs_f64() * 1e6,
        m.as_secs_f64() / write.as_secs_f64(),
        delta("zk_packets_sent"),
        delta("zk_packets_received"),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let base = std::path::Path::new("/dev/shm");
    let server = TestServer::start_with(ServerOptions {
        base_dir: base.exists().then(|| base.to_path_buf()),
        ..Default::default()
    })
    .unwrap();
    let addr = server.addr();
    println!(
        "server {addr}, data on {}",
        if base.exists() { "/dev/shm" } else { "disk" }
    );
    let cs = addr.to_string();
    let coordinator = connect(&cs, Options::default()).await.unwrap();
    let mut sites = Vec::new();
    for _ in 0..SITES {
        sites.push(connect(&cs, Options::default()).await.unwrap());
    }
    let write = write_rtt(&coordinator, if quick { 50 } else { 300 }).await;
    println!(
        "write RTT (setData 100 B) {:.0} us",
        write.as_secs_f64() * 1e6
    );
    let n = if quick { 20 } else { 100 };
    run(addr, &coordinator, &sites, Variant::Coordinator, n, write).await;
    run(addr, &coordinator, &sites, Variant::Peers, n, write).await;
}
