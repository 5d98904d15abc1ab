//! The embedded server against a real ZooKeeper 3.8 for what a test suite pays:
//! `cargo bench --bench embedded`.
//!
//! * Start: from the call until a client (the tokio adapter) has its session, then the
//!   client closed and the server stopped — the embedded server
//!   (`EmbeddedServer::start`) and a real one (`TestServer::start`: a JVM, data on disk
//!   under the system temp dir, and again with its data on tmpfs, `/dev/shm`).
//! * A lock cycle: an uncontended `acquire` + `release` on one session (the tokio
//!   adapter, `/bench/lock`), against each server; median and 90th percentile, and the
//!   requests per cycle from the client's counters. Round trips of the same run for
//!   scale: a read (`exists`) and a write (`setData` of 100 bytes), medians.
//!
//! Full run: 30 embedded starts and 5 of each real server, 2,000 lock cycles after 500
//! of warm-up; `BENCH_QUICK=1`: 10 and 2 starts, 300 cycles after 100.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use zk_recipes_testing::{EmbeddedServer, Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, Client, CreateOptions, Options};

fn quick() -> bool {
    std::env::var_os("BENCH_QUICK").is_some()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median and 90th percentile of `samples`, ms.
fn stats(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| ms(samples[((samples.len() - 1) as f64 * q).round() as usize]);
    (at(0.5), at(0.9))
}

/// A server of either kind, kept alive while a client uses it.
enum Server {
    Embedded(EmbeddedServer),
    Real(TestServer),
}

impl Server {
    fn connect_string(&self) -> String {
        match self {
            Server::Embedded(s) => s.connect_string(),
            Server::Real(s) => s.connect_string(),
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Embedded,
    RealDisk,
    RealTmpfs,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Embedded => "embedded server",
            Kind::RealDisk => "ZooKeeper 3.8 (JVM), data on disk",
            Kind::RealTmpfs => "ZooKeeper 3.8 (JVM), data on tmpfs",
        }
    }

    fn start(self) -> Server {
        match self {
            Kind::Embedded => Server::Embedded(EmbeddedServer::start().unwrap()),
            Kind::RealDisk => Server::Real(TestServer::start().unwrap()),
            Kind::RealTmpfs => Server::Real(
                TestServer::start_with(ServerOptions {
                    base_dir: Some(PathBuf::from("/dev/shm")),
                    ..ServerOptions::default()
                })
                .unwrap(),
            ),
        }
    }
}

/// From the start call to a connected client; the whole start-use-stop cycle too.
async fn start_once(kind: Kind) -> (Duration, Duration) {
    let t0 = Instant::now();
    let server = kind.start();
    let zk = connect(&server.connect_string(), Options::default())
        .await
        .unwrap();
    let ready = t0.elapsed();
    zk.close().await;
    drop(server);
    (ready, t0.elapsed())
}

/// Median of `n` calls of `f`.
async fn rtt<F, Fut>(n: usize, mut f: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        samples.push(t.elapsed());
    }
    stats(&mut samples).0
}

struct Cycles {
    median: f64,
    p90: f64,
    per_second: f64,
    requests: f64,
    read_rtt: f64,
    write_rtt: f64,
}

async fn lock_cycles(zk: &Client, warmup: usize, n: usize) -> Cycles {
    zk.create_all("/bench/value", "", &CreateOptions::default())
        .await
        .unwrap();
    let read_rtt = rtt(200, || async {
        zk.exists("/bench/value").await.unwrap();
    })
    .await;
    let write_rtt = rtt(200, || async {
        zk.set_data("/bench/value", vec![7u8; 100], None)
            .await
            .unwrap();
    })
    .await;
    for _ in 0..warmup {
        zk.lock("/bench/lock")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    let before = zk.counters().await.unwrap();
    let mut samples = Vec::with_capacity(n);
    let all = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        zk.lock("/bench/lock")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        samples.push(t.elapsed());
    }
    let total = all.elapsed();
    let after = zk.counters().await.unwrap();
    let (median, p90) = stats(&mut samples);
    Cycles {
        median,
        p90,
        per_second: n as f64 / total.as_secs_f64(),
        requests: (after.requests_sent - before.requests_sent) as f64 / n as f64,
        read_rtt,
        write_rtt,
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let kinds = [Kind::Embedded, Kind::RealDisk, Kind::RealTmpfs];
    let (embedded_starts, real_starts) = if quick() { (10, 2) } else { (30, 5) };
    let (warmup, cycles) = if quick() { (100, 300) } else { (500, 2000) };

    println!(
        "start: from the call to a connected client (and the whole start, connect, close, stop)"
    );
    println!("| server | starts | ready median ms | ready p90 ms | start-to-stop median ms |");
    println!("|---|---|---|---|---|");
    let mut ready_medians = Vec::new();
    for kind in kinds {
        let n = if matches!(kind, Kind::Embedded) {
            embedded_starts
        } else {
            real_starts
        };
        let (mut ready, mut whole): (Vec<_>, Vec<_>) =
            (0..n).map(|_| rt.block_on(start_once(kind))).unzip();
        let (r50, r90) = stats(&mut ready);
        let (w50, _) = stats(&mut whole);
        ready_medians.push(r50);
        println!("| {} | {n} | {r50:.2} | {r90:.2} | {w50:.2} |", kind.name());
        eprintln!("{}: started {n} times", kind.name());
    }
    println!(
        "a real server takes {:.0}x (disk) and {:.0}x (tmpfs) as long to be ready as the embedded one",
        ready_medians[1] / ready_medians[0],
        ready_medians[2] / ready_medians[0]
    );

    println!();
    println!("lock: uncontended acquire + release on one session, {cycles} cycles after {warmup}");
    println!("| server | median ms | p90 ms | cycles/s | requests/cycle | read RTT ms | write RTT ms | median in write RTTs |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut medians = Vec::new();
    for kind in kinds {
        let server = kind.start();
        let c = rt.block_on(async {
            let zk = connect(&server.connect_string(), Options::default())
                .await
                .unwrap();
            let c = lock_cycles(&zk, warmup, cycles).await;
            zk.close().await;
            c
        });
        medians.push(c.median);
        println!(
            "| {} | {:.3} | {:.3} | {:.0} | {:.1} | {:.3} | {:.3} | {:.1} |",
            kind.name(),
            c.median,
            c.p90,
            c.per_second,
            c.requests,
            c.read_rtt,
            c.write_rtt,
            c.median / c.write_rtt
        );
        drop(server);
    }
    println!(
        "a lock cycle against a real server takes {:.1}x (disk) and {:.1}x (tmpfs) the embedded one's",
        medians[1] / medians[0],
        medians[2] / medians[0]
    );
}
