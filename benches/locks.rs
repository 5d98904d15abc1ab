//! Lock benchmark against a real ZooKeeper: `cargo bench --bench locks`.
//!
//! Latencies are reported in round trips measured in the same run against the same
//! server: a read RTT (`exists`) and a write RTT (`setData` of 100 bytes). Server work is
//! `mntr`'s `zk_packets_received` delta (each probe itself counts one packet, subtracted)
//! and `zk_sum_node_deleted_watch_count` (watchers notified of deletions).
//!
//! The benchmark fails (panics, exit code 101) if it sees two holders at once or a
//! fencing token that does not rise: each holder marks itself inside, yields to every
//! other task ten times while holding, and checks it is still the only one inside.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zk_recipes_testing::{four_letter, Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, Client, CreateOptions, Options};

fn mntr(addr: std::net::SocketAddr, key: &str) -> i64 {
    four_letter(addr, "mntr")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}\t")).map(str::to_string))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn rtts(zk: &Client, n: usize) -> (Duration, Duration) {
    let _ = zk
        .create("/rtt", vec![0u8; 100], &CreateOptions::default())
        .await;
    let mut r = Vec::new();
    let mut w = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        zk.exists("/rtt").await.unwrap();
        r.push(t.elapsed());
        let t = Instant::now();
        zk.set_data("/rtt", vec![1u8; 100], None).await.unwrap();
        w.push(t.elapsed());
    }
    (median(r), median(w))
}

async fn uncontended(
    zk: &Client,
    addr: std::net::SocketAddr,
    n: usize,
    own_watch: bool,
    read: Duration,
    write: Duration,
) {
    let before = mntr(addr, "zk_packets_received");
    let mut lat = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let b = zk.lock("/bench/uncontended");
        let b = if own_watch {
            b
        } else {
            b.without_own_node_watch()
        };
        let g = b.acquire().await.unwrap();
        g.release().await.unwrap();
        lat.push(t.elapsed());
    }
    let after = mntr(addr, "zk_packets_received");
    let per = (after - before - 1) as f64 / n as f64;
    let m = median(lat);
    println!(
        "uncontended acquire+release{}: median {:>6.0} us = {:.2} write RTTs ({:.2} read RTTs); {per:.2} requests to the server",
        if own_watch { " (own-node watch)" } else { " (no own-node watch)" },
        m.as_secs_f64() * 1e6,
        m.as_secs_f64() / write.as_secs_f64(),
        m.as_secs_f64() / read.as_secs_f64(),
    );
}

async fn contended(
    server_addr: std::net::SocketAddr,
    contenders: usize,
    own_watch: bool,
    run: Duration,
    read: Duration,
    write: Duration,
) {
    let mut clients = Vec::new();
    for _ in 0..contenders {
        clients.push(
            connect(&server_addr.to_string(), Options::default())
                .await
                .unwrap(),
        );
    }
    let inside = Arc::new(AtomicUsize::new(0));
    let max_token = Arc::new(AtomicI64::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    let acquisitions = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let handoffs: Arc<Mutex<Vec<Duration>>> = Arc::new(Mutex::new(Vec::new()));
    let p0 = mntr(server_addr, "zk_packets_received");
    let n0 = mntr(server_addr, "zk_sum_node_deleted_watch_count");
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (me, zk) in clients.clone().into_iter().enumerate() {
        let me = me + 1;
        let max_token = max_token.clone();
        let (inside, violations, acquisitions, stop, released_at, handoffs) = (
            inside.clone(),
            violations.clone(),
            acquisitions.clone(),
            stop.clone(),
            released_at.clone(),
            handoffs.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let b = zk.lock("/bench/contended");
                let b = if own_watch {
                    b
                } else {
                    b.without_own_node_watch()
                };
                let g = b.acquire().await.unwrap();
                if let Some(t) = released_at.lock().unwrap().take() {
                    handoffs.lock().unwrap().push(t.elapsed());
                }
                if inside.swap(me, Ordering::SeqCst) != 0 {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                if max_token.fetch_max(g.fencing_token(), Ordering::SeqCst) >= g.fencing_token() {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                // Hold for a moment: every other task gets to run, and would be seen.
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                if inside.load(Ordering::SeqCst) != me {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                acquisitions.fetch_add(1, Ordering::Relaxed);
                inside.store(0, Ordering::SeqCst);
                *released_at.lock().unwrap() = Some(Instant::now());
                g.release().await.unwrap();
            }
        }));
    }
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let acq = acquisitions.load(Ordering::Relaxed);
    let packets = (mntr(server_addr, "zk_packets_received") - p0 - 2) as f64;
    let notified = (mntr(server_addr, "zk_sum_node_deleted_watch_count") - n0) as f64;
    let h = median(handoffs.lock().unwrap().clone());
    println!(
        "{contenders:>2} contenders{}: {:>6.0} acquisitions/s; handoff median {:>6.0} us = {:.2} write RTTs (1 write + 1 read = {:.2}); {:.2} requests/acquisition; {:.2} watchers notified per release; {} exclusion violations",
        if own_watch { "" } else { " (no own-node watch)" },
        acq as f64 / secs,
        h.as_secs_f64() * 1e6,
        h.as_secs_f64() / write.as_secs_f64(),
        (write + read).as_secs_f64() / write.as_secs_f64(),
        packets / acq as f64,
        notified / acq as f64,
        violations.load(Ordering::SeqCst)
    );
    for c in clients {
        c.close().await;
    }
    assert_eq!(
        violations.load(Ordering::SeqCst),
        0,
        "mutual exclusion or fencing broken"
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
    let zk = connect(&addr.to_string(), Options::default())
        .await
        .unwrap();
    let n = if quick { 50 } else { 500 };
    let (read, write) = rtts(&zk, n).await;
    println!(
        "read RTT (exists) {:.0} us, write RTT (setData 100 B) {:.0} us",
        read.as_secs_f64() * 1e6,
        write.as_secs_f64() * 1e6
    );
    uncontended(&zk, addr, n, true, read, write).await;
    uncontended(&zk, addr, n, false, read, write).await;
    let run = Duration::from_secs(if quick { 2 } else { 5 });
    contended(addr, 8, true, run, read, write).await;
    contended(addr, 8, false, run, read, write).await;
    contended(addr, 64, true, run, read, write).await;
}
