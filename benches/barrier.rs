//! Double barrier benchmark against a real ZooKeeper: `cargo bench --bench barrier`.
//!
//! 8 participants, each in its own session, enter and leave one barrier path together,
//! 100 rounds (the path is reused: the last leaver of a round removes it). Reported: the
//! round time (first `enter` call to the last `leave` answer; median and p90), requests
//! per round (`mntr`'s `zk_packets_received` delta, each probe's own packet subtracted)
//! and hung rounds (a participant not through enter or leave within 5 s).
//!
//! The benchmark fails (panics) if a participant passes enter before all 8 have called
//! it, or completes leave before all 8 have called it.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes_testing::{four_letter, Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, CreateOptions, Options};

const N: usize = 8;
const HANG: Duration = Duration::from_secs(5);

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
    let rounds = if quick { 20 } else { 100 };
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
    let mut clients = Vec::new();
    for _ in 0..N {
        clients.push(
            connect(&addr.to_string(), Options::default())
                .await
                .unwrap(),
        );
    }
    // RTTs for scale.
    let zk = &clients[0];
    let _ = zk
        .create("/rtt", vec![0u8; 100], &CreateOptions::default())
        .await;
    let mut w = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        zk.set_data("/rtt", vec![1u8; 100], None).await.unwrap();
        w.push(t.elapsed());
    }
    let write = pct(&mut w, 0.5);
    println!(
        "write RTT (setData 100 B) {:.0} us",
        write.as_secs_f64() * 1e6
    );

    let mut times = Vec::new();
    let mut hung = 0;
    let mut late = 0;
    let p0 = mntr(addr, "zk_packets_received");
    for _ in 0..rounds {
        let entering = Arc::new(AtomicUsize::new(0));
        let leaving = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let tasks: Vec<_> = clients
            .iter()
            .map(|c| {
                let mut b = c.double_barrier("/bench/barrier", N as u32);
                let (entering, leaving) = (entering.clone(), leaving.clone());
                tokio::spawn(async move {
                    entering.fetch_add(1, Ordering::SeqCst);
                    if !b.enter_timeout(HANG).await.unwrap() {
                        return (false, false);
                    }
                    assert_eq!(entering.load(Ordering::SeqCst), N, "passed enter early");
                    let late = b.entered_late() == Some(true);
                    leaving.fetch_add(1, Ordering::SeqCst);
                    if !b.leave_timeout(HANG).await.unwrap() {
                        return (false, late);
                    }
                    assert_eq!(leaving.load(Ordering::SeqCst), N, "completed leave early");
                    (true, late)
                })
            })
            .collect();
        let mut ok = true;
        for t in tasks {
            let (done, was_late) = t.await.unwrap();
            ok &= done;
            late += usize::from(was_late);
        }
        if ok {
            times.push(start.elapsed());
        } else {
            hung += 1;
        }
    }
    let packets = (mntr(addr, "zk_packets_received") - p0 - 1) as f64;
    let median = pct(&mut times, 0.5);
    let p90 = pct(&mut times, 0.9);
    println!(
        "double barrier, {N} participants, {rounds} rounds: round median {:.2} ms ({:.1} write RTTs), p90 {:.2} ms; {:.1} requests per round ({:.2} per participant); {hung} hung rounds; {late} late entries",
        median.as_secs_f64() * 1e3,
        median.as_secs_f64() / write.as_secs_f64(),
        p90.as_secs_f64() * 1e3,
        packets / rounds as f64,
        packets / (rounds * N) as f64,
    );
    let left = clients[0]
        .get_children("/bench/barrier")
        .await
        .unwrap_or_default();
    assert!(left.is_empty(), "nodes left behind: {left:?}");
    for c in clients {
        c.close().await;
    }
    assert_eq!(hung, 0, "hung rounds");
}
