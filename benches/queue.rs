//! Queue benchmark against a real ZooKeeper: `cargo bench --bench queue`.
//!
//! One producer puts 5,000 items of 100 B (pipelined, batched: `put_many`), then 1 and
//! 4 consumers (separate sessions) take them all (`take_batch(100)`, at most once), and
//! one at-least-once consumer claims and completes 1,000 (`take_claimed` + `complete`).
//! Reports items/s, requests per item (`mntr` `zk_packets_received` delta, pings
//! included) and lost / duplicated / left-over items; panics on any loss or duplicate.
#![allow(clippy::disallowed_methods)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zk_recipes_blocking::{connect, Client, Options};
use zk_recipes_testing::{four_letter, TestServer};

const N: usize = 5_000;

fn mntr(addr: std::net::SocketAddr, key: &str) -> i64 {
    four_letter(addr, "mntr")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}\t")).map(str::to_string))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn client(cs: &str) -> Client {
    connect(
        cs,
        Options::default().session_timeout(Duration::from_secs(10)),
    )
    .expect("connect")
}

fn items(tag: &str, n: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| {
            let mut v = format!("{tag}-{i:06}-").into_bytes();
            v.resize(100, b'x');
            Bytes::from(v)
        })
        .collect()
}

fn put(cs: &str, addr: std::net::SocketAddr, dir: &str, tag: &str, n: usize) {
    let z = client(cs);
    let mut q = z.queue(dir);
    let p0 = mntr(addr, "zk_packets_received");
    let t = Instant::now();
    q.put_many(items(tag, n)).expect("put");
    let dt = t.elapsed();
    let p = (mntr(addr, "zk_packets_received") - p0 - 1) as f64;
    println!(
        "queue put   {tag:>6}: {n} items in {:>7.1} ms = {:>8.0} items/s, {:.3} requests/item",
        dt.as_secs_f64() * 1e3,
        n as f64 / dt.as_secs_f64(),
        p / n as f64
    );
    // Latency of a lone put (one round trip), in a queue of its own.
    let mut q = z.queue(&format!("{dir}-latency"));
    let mut lat = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        q.put(Bytes::from_static(&[b'l'; 100])).expect("put");
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "queue put latency (lone put): median {:?}, p99 {:?}",
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100]
    );
    let mut left = 200;
    while left > 0 {
        left -= q.take_batch(left).expect("take").len();
    }
    z.close();
}

fn take(cs: &str, addr: std::net::SocketAddr, dir: &str, tag: &str, consumers: usize) {
    put(cs, addr, dir, tag, N);
    let p0 = mntr(addr, "zk_packets_received");
    let t = Instant::now();
    let handles: Vec<_> = (0..consumers)
        .map(|_| {
            let cs = cs.to_string();
            let dir = dir.to_string();
            std::thread::spawn(move || {
                let z = client(&cs);
                let mut q = z.queue(&dir);
                let mut got = Vec::new();
                loop {
                    let b = q
                        .take_batch_timeout(100, Duration::from_millis(300))
                        .expect("take");
                    if b.is_empty() {
                        break;
                    }
                    got.extend(b.into_iter().map(|i| i.data));
                }
                z.close();
                got
            })
        })
        .collect();
    let all: Vec<Bytes> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("consumer"))
        .collect();
    let dt = t.elapsed().saturating_sub(Duration::from_millis(300));
    let p = (mntr(addr, "zk_packets_received") - p0 - 1) as f64;
    let set: HashSet<_> = all.iter().cloned().collect();
    let z = client(cs);
    let left = z
        .get_children(dir)
        .map(|c| c.iter().filter(|c| c.starts_with("qn-")).count())
        .unwrap_or(0);
    z.close();
    let dup = all.len() - set.len();
    let lost = N - set.len() - left;
    println!(
        "queue take  {consumers} consumer(s): {} items in {:>7.1} ms = {:>8.0} items/s, {:.3} requests/item; lost {lost}, duplicated {dup}, left {left}",
        all.len(),
        dt.as_secs_f64() * 1e3,
        set.len() as f64 / dt.as_secs_f64(),
        p / N as f64
    );
    assert_eq!((lost, dup, left), (0, 0, 0));
}

fn at_least_once(cs: &str, addr: std::net::SocketAddr, dir: &str) {
    let n = 1_000;
    let z = client(cs);
    z.queue(dir).put_many(items("alo", n)).expect("put");
    let p0 = mntr(addr, "zk_packets_received");
    let t = Instant::now();
    let mut q = z.queue(dir);
    let mut seen = HashSet::new();
    while let Some(c) = q
        .take_claimed_timeout(Duration::from_millis(300))
        .expect("claim")
    {
        seen.insert(c.data().clone());
        c.complete().expect("complete");
    }
    let dt = t.elapsed().saturating_sub(Duration::from_millis(300));
    let p = (mntr(addr, "zk_packets_received") - p0 - 1) as f64;
    println!(
        "queue at-least-once 1 consumer: {} items in {:>7.1} ms = {:>8.0} items/s, {:.3} requests/item",
        seen.len(),
        dt.as_secs_f64() * 1e3,
        seen.len() as f64 / dt.as_secs_f64(),
        p / n as f64
    );
    assert_eq!(seen.len(), n);
    z.close();
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    let addr = server.addr();
    take(&cs, addr, "/bench/q1", "one", 1);
    take(&cs, addr, "/bench/q4", "four", 4);
    at_least_once(&cs, addr, "/bench/qa");
}
