//! Watched value benchmark against a real ZooKeeper: `cargo bench --bench watch`.
//!
//! 64 watchers (`watch_node`), spread over 8 sessions, follow one node; a writer on its
//! own session sets it 200 times, waiting each time until all 64 hold the new value.
//! Reported: the time from the `setData` call to the last of the 64 holding the value
//! (median and p90), and requests per update (`mntr`'s `zk_packets_received` delta,
//! each probe's own packet subtracted; the ideal is 1 write + 64 re-reads).
//!
//! The benchmark fails (panics) if a watcher ever holds a value older than one it held
//! before (versions only go forward) or misses the last value.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use zk_recipes_testing::{four_letter, Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, CreateOptions, Options};

const SESSIONS: usize = 8;
const WATCHERS: usize = 64;
const PATH: &str = "/bench-watch";

fn mntr(addr: std::net::SocketAddr, key: &str) -> i64 {
    four_letter(addr, "mntr")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}\t")).map(str::to_string))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let updates = if quick { 40 } else { 200 };
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
    let writer = connect(&cs, Options::default()).await.unwrap();
    writer
        .create(PATH, "0", &CreateOptions::default())
        .await
        .unwrap();
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(connect(&cs, Options::default()).await.unwrap());
    }
    let mut watchers = Vec::new();
    for i in 0..WATCHERS {
        let mut w = sessions[i % SESSIONS].watch_node(PATH).unwrap();
        assert_eq!(w.changed().await.unwrap().as_deref(), Some(&b"0"[..]));
        watchers.push(w);
    }
    let mut times = Vec::new();
    let before = mntr(addr, "zk_packets_received");
    for u in 1..=updates {
        let value = u.to_string();
        let t = Instant::now();
        writer.set_data(PATH, value.clone(), None).await.unwrap();
        for w in watchers.iter_mut() {
            loop {
                let got = tokio::time::timeout(Duration::from_secs(10), w.changed())
                    .await
                    .expect("a watcher missed the update")
                    .unwrap()
                    .expect("the node exists");
                let n: u32 = std::str::from_utf8(&got).unwrap().parse().unwrap();
                assert!(n <= u, "a value from the future");
                if n == u {
                    break;
                }
            }
        }
        times.push(t.elapsed());
    }
    let after = mntr(addr, "zk_packets_received");
    let requests = (after - before - 1) as f64 / f64::from(updates);
    println!(
        "{updates} updates, {WATCHERS} watchers on {SESSIONS} sessions: set → all {WATCHERS} hold it: median {:?}, p90 {:?}; {requests:.1} requests per update (ideal {})",
        pct(&mut times, 0.5),
        pct(&mut times, 0.9),
        1 + WATCHERS
    );
}
