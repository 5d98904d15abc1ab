//! Service discovery against a real ZooKeeper 3.8: `cargo bench --bench discovery`
//! (`BENCH_QUICK=1`: 50 rounds instead of 300).
//!
//! * Registration to a watching cache: a second session registers an instance
//!   (`register_service`), the time until our `ServiceCache` reports it `Added`; then it
//!   unregisters and we wait for `Removed`. Median and 90th percentile of the rounds.
//! * Requests per lookup: 10 instances registered, 10,000 `pick`s from the cache; the
//!   server's `zk_packets_received` (`mntr`) before and after, divided by the picks
//!   (0 expected: a pick is served from the cache).
//!
//! Then the same for Curator 5.4 (`benches/curator/CuratorDiscoveryBench.java`, Debian's
//! `libcurator-discovery-java`) on the same server, under another base path: a second
//! Curator client registers, the time until its `ServiceCache` lists the instance
//! (woken by the cache's listener); 10,000 `ServiceProvider.getInstance()` (round robin).
//!
//! The bench fails (panics) if an event is missing or a pick finds no instance.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

#[path = "support/curator.rs"]
#[allow(dead_code)] // only `mntr` is used here
mod curator;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Options, ServiceCacheEvent, ServiceInstance};

const BASE: &str = "/bench-discovery";
const W: Duration = Duration::from_secs(10);

async fn next_change(cache: &mut zk_recipes_tokio::ServiceCacheHandle) -> ServiceCacheEvent {
    loop {
        match tokio::time::timeout(W, cache.next()).await {
            Ok(Some(ServiceCacheEvent::Synced)) => {}
            Ok(Some(e)) => return e,
            e => panic!("no cache event: {e:?}"),
        }
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = if std::env::var_os("BENCH_QUICK").is_some() {
        50
    } else {
        300
    };
    let server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    let ours = connect(&cs, Options::default()).await.unwrap();
    let other = connect(&cs, Options::default()).await.unwrap();
    let mut cache = ours.service_cache(BASE, "web").unwrap();
    cache.synced().await.unwrap();

    let mut reach = Vec::with_capacity(rounds);
    for k in 0..rounds {
        let i = ServiceInstance::new("web", &format!("i{k}"), "10.0.0.1", 8080);
        let start = Instant::now();
        let r = other.register_service(BASE, &i).unwrap();
        match next_change(&mut cache).await {
            ServiceCacheEvent::Added(got) => assert_eq!(got.id, i.id),
            e => panic!("{e:?}"),
        }
        reach.push(start.elapsed());
        r.unregister().await.unwrap();
        match next_change(&mut cache).await {
            ServiceCacheEvent::Removed(got) => assert_eq!(got.id, i.id),
            e => panic!("{e:?}"),
        }
    }
    reach.sort();
    println!(
        "registration to a watching cache ({rounds} rounds): median {:.2} ms, p90 {:.2} ms",
        percentile(&reach, 50).as_secs_f64() * 1e3,
        percentile(&reach, 90).as_secs_f64() * 1e3
    );

    let mut held = Vec::new();
    for k in 0..10 {
        let i = ServiceInstance::new("web", &format!("n{k}"), "10.0.0.2", 9000 + k);
        let mut r = other.register_service(BASE, &i).unwrap();
        r.created().await.unwrap();
        held.push(r);
    }
    while cache.instances().await.unwrap().len() < 10 {
        next_change(&mut cache).await;
    }
    const PICKS: i64 = 10_000;
    let before = curator::mntr(server.addr(), "zk_packets_received");
    let start = Instant::now();
    for _ in 0..PICKS {
        assert!(cache.pick().await.unwrap().is_some());
    }
    let took = start.elapsed();
    let after = curator::mntr(server.addr(), "zk_packets_received");
    println!(
        "lookups from the cache: {PICKS} picks in {:.1} ms ({:.2} µs each), {} requests to \
         the server ({:.4} per lookup; pings included)",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / PICKS as f64,
        after - before,
        (after - before) as f64 / PICKS as f64
    );
    drop(held);
    ours.close().await;
    other.close().await;
    curators(&server, rounds);
}

/// Curator's side, on the same server.
fn curators(server: &TestServer, rounds: usize) {
    let java = curator::compiled("CuratorDiscoveryBench");
    let mut child = Command::new("java")
        .args(["-cp", &java.classpath, "CuratorDiscoveryBench"])
        .arg(server.connect_string())
        .arg(format!("{BASE}-curator"))
        .arg(rounds.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("java");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line from Curator").unwrap();
    let reach = next();
    let r: Vec<&str> = reach.split(' ').collect();
    println!(
        "Curator: registration to a watching ServiceCache ({rounds} rounds): median {} ms, p90 {} ms",
        r[1], r[2]
    );
    assert_eq!(next(), "PICKS");
    let before = curator::mntr(server.addr(), "zk_packets_received");
    writeln!(stdin, "GO").unwrap();
    let picked = next();
    let after = curator::mntr(server.addr(), "zk_packets_received");
    writeln!(stdin, "END").unwrap();
    let ms = picked.strip_prefix("PICKED ").expect("PICKED");
    println!(
        "Curator: 10000 ServiceProvider.getInstance() in {ms} ms, {} requests to the server \
         ({:.4} per lookup; pings included)",
        after - before,
        (after - before) as f64 / 10_000.0
    );
    child.wait().unwrap();
}
