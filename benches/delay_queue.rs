//! Delay queue benchmark against a real ZooKeeper 3.8, ours beside Apache Curator 5.4's
//! `DistributedDelayQueue` (`benches/curator/CuratorDelayQueueBench.java`) on the same
//! server: `cargo bench --bench delay_queue` (`BENCH_QUICK=1`: 100 items).
//!
//! A producer session puts 1,000 items (pipelined: `put_many_at`), item `i` due at
//! start + 1 s + `i` ms; a consumer session, already waiting, takes them all (at most
//! once, `take_batch(100)`). Reported: the time to put them, how late each item was
//! taken after its time (median, 99th percentile, max; never early: the bench panics
//! on an item taken before its time or a lost or doubled one), and requests per item
//! over the whole run (`mntr`'s `zk_packets_received` delta, pings included, the
//! probes' own packets subtracted).
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

#[path = "support/curator.rs"]
mod curator;

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Options};

const DELAY_MS: u64 = 1_000;
const SPREAD_MS: u64 = 1_000;

struct Figures {
    put_ms: u64,
    late: [u64; 3],
    requests: i64,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn ours(server: &TestServer, n: usize) -> Figures {
    const PATH: &str = "/bench-dq/ours";
    let cs = server.connect_string();
    let pz = connect(&cs, Options::default()).await.unwrap();
    let cz = connect(&cs, Options::default()).await.unwrap();
    let mut producer = pz.delay_queue(PATH);
    producer.put_at("warm", SystemTime::now()).await.unwrap();
    let mut consumer = cz.delay_queue(PATH);
    consumer.take().await.unwrap();
    let before = curator::mntr(server.addr(), "zk_packets_received");
    let taker = tokio::spawn(async move {
        let mut late = Vec::with_capacity(n);
        let mut seen = HashSet::new();
        while late.len() < n {
            for item in consumer.take_batch(100).await.unwrap() {
                let now = unix_ms();
                let text = String::from_utf8(item.data.to_vec()).unwrap();
                let (_, due) = text.rsplit_once('@').unwrap();
                let due: u64 = due.parse().unwrap();
                assert!(now >= due, "{text} taken at {now}: early");
                assert!(seen.insert(text.clone()), "{text} taken twice");
                late.push(now - due);
            }
        }
        late
    });
    let start = unix_ms();
    let items: Vec<(String, SystemTime)> = (0..n as u64)
        .map(|i| {
            let due = start + DELAY_MS + i * SPREAD_MS / n as u64;
            (
                format!("i{i}@{due}"),
                UNIX_EPOCH + Duration::from_millis(due),
            )
        })
        .collect();
    producer.put_many_at(items).await.unwrap();
    let put_ms = unix_ms() - start;
    let mut late = taker.await.unwrap();
    let requests = curator::mntr(server.addr(), "zk_packets_received") - before - 1;
    late.sort_unstable();
    Figures {
        put_ms,
        late: [late[n / 2], late[(n * 99 / 100).min(n - 1)], late[n - 1]],
        requests,
    }
}

fn curator(server: &TestServer, n: usize) -> Figures {
    let args = [
        server.connect_string(),
        "/bench-dq/curator".into(),
        n.to_string(),
        DELAY_MS.to_string(),
        SPREAD_MS.to_string(),
    ];
    let (result, requests) = curator::run_measured("CuratorDelayQueueBench", &args, server.addr());
    let v: Vec<u64> = result.split(' ').map(|x| x.parse().unwrap()).collect();
    Figures {
        put_ms: v[0],
        late: [v[1], v[2], v[3]],
        requests,
    }
}

fn report(who: &str, n: usize, f: &Figures) {
    println!(
        "delay queue {who:>7}: put {n} in {:>5} ms; taken late by p50 {:>4} ms, p99 {:>4} ms, \
         max {:>4} ms; {:.2} requests/item",
        f.put_ms,
        f.late[0],
        f.late[1],
        f.late[2],
        f.requests as f64 / n as f64
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = if std::env::var_os("BENCH_QUICK").is_some() {
        100
    } else {
        1_000
    };
    let server = TestServer::start().unwrap();
    let o = ours(&server, n).await;
    report("ours", n, &o);
    let c = tokio::task::block_in_place(|| curator(&server, n));
    report("Curator", n, &c);
}
