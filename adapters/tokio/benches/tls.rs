//! TLS against plain TCP, in one run against one real ZooKeeper 3.8 that serves both
//! a plain and a secure client port (mutual TLS, certificates made at start):
//! `cargo bench -p zk-recipes-tokio --features tls --bench tls`.
//!
//! * uncontended lock cycle (acquire + release on one session): median and p90 of
//!   every cycle of every round;
//! * 8 contenders, each on its own session, on one lock: acquisitions per second
//!   (median over rounds);
//! * connect: `connect()` until the session is established (TCP, TLS handshake,
//!   ZooKeeper handshake), median.
//!
//! The machine is shared, so plain and TLS take turns in rounds (plain, TLS, again),
//! after the same warm-up for both. Full run: 6 rounds of 300 cycles and of 2 s
//! contended, 20 connects each; `BENCH_QUICK=1`: 2 rounds of 100 cycles and of 1 s.
//! The last column is TLS / plain (the target on the cycle: within 1.2x). The server's
//! JVM runs with its full JIT (C2) unless `TLS_BENCH_C1=1` (the test support's C1 only).
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes_testing::{ClientAuth, Options as ServerOptions, SecureServer};
use zk_recipes_tokio::{connect, Client, Options, Tls};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Plain,
    Tls,
}

struct Setup {
    server: SecureServer,
    tls: Tls,
}

impl Setup {
    fn options(&self, mode: Mode) -> (String, Options) {
        let options = Options::default().connect_timeout(Duration::from_secs(20));
        match mode {
            Mode::Plain => (self.server.server.connect_string(), options),
            Mode::Tls => (self.server.connect_string(), options.tls(self.tls.clone())),
        }
    }

    async fn client(&self, mode: Mode) -> Client {
        let (hosts, options) = self.options(mode);
        connect(&hosts, options).await.expect("connect")
    }
}

fn median(v: &mut [f64]) -> f64 {
    percentile(v, 0.5)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(f64::NAN)
}

async fn cycles(client: &Client, dir: &str, n: usize, out: &mut Vec<f64>) {
    for _ in 0..n {
        let start = Instant::now();
        let guard = client.lock(dir).acquire().await.expect("acquire");
        guard.release().await.expect("release");
        out.push(start.elapsed().as_secs_f64() * 1e6);
    }
}

/// Acquisitions per second of `clients` contending on `dir` for `length`.
async fn contended(clients: &[Client], dir: &str, length: Duration) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = clients
        .iter()
        .map(|c| {
            let (c, stop, count, dir) = (c.clone(), stop.clone(), count.clone(), dir.to_string());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let guard = c.lock(&dir).acquire().await.expect("acquire");
                    count.fetch_add(1, Ordering::Relaxed);
                    guard.release().await.expect("release");
                }
            })
        })
        .collect();
    let start = Instant::now();
    tokio::time::sleep(length).await;
    let done = count.load(Ordering::Relaxed);
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("contender");
    }
    done as f64 / elapsed.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let (rounds, per_round, round_len, connects) = if quick {
        (2, 100, Duration::from_secs(1), 5)
    } else {
        (6, 300, Duration::from_secs(2), 20)
    };
    // The test support runs the JVM with C1 only (quick start for tests); a server in
    // production runs C2, which has the AES-GCM intrinsics TLS leans on. Both ports
    // share the one JVM either way. `TLS_BENCH_C1=1` keeps the test support's JIT.
    let c1 = std::env::var_os("TLS_BENCH_C1").is_some();
    let server_options = ServerOptions {
        jvm_flags: if c1 {
            Vec::new()
        } else {
            vec!["-XX:TieredStopAtLevel=4".into()]
        },
        ..ServerOptions::default()
    };
    let server = tokio::task::spawn_blocking(move || {
        SecureServer::start_with(ClientAuth::Need, false, server_options)
    })
    .await
    .expect("start")
    .expect("secure server");
    let cert = server.client_cert("bench").expect("client certificate");
    let tls = Tls::from_ca_pem(server.ca.pem().as_bytes())
        .and_then(|t| t.client_cert_pem(cert.cert_pem.as_bytes(), cert.key_pem.as_bytes()))
        .expect("tls");
    let setup = Setup { server, tls };
    let modes = [Mode::Plain, Mode::Tls];
    println!(
        "TLS vs plain, tokio adapter, one ZooKeeper 3.8 (plain and secure port; mutual TLS, \
         ECDSA P-256 certificates; rustls 0.23 with ring); server JIT: {}",
        if c1 {
            "C1 only (test support)"
        } else {
            "C1 + C2"
        }
    );

    // Connect cost.
    let mut connect_us = [Vec::new(), Vec::new()];
    for _ in 0..connects {
        for (i, mode) in modes.iter().enumerate() {
            let start = Instant::now();
            let c = setup.client(*mode).await;
            connect_us[i].push(start.elapsed().as_secs_f64() * 1e6);
            c.close().await;
        }
    }

    // Uncontended cycles.
    let single = [
        setup.client(Mode::Plain).await,
        setup.client(Mode::Tls).await,
    ];
    let mut cycle_us = [Vec::new(), Vec::new()];
    let mut warm = Vec::new();
    for c in &single {
        cycles(c, "/bench/tls-uncontended", per_round, &mut warm).await;
    }
    for round in 0..rounds {
        for (i, c) in single.iter().enumerate() {
            let mut v = Vec::new();
            cycles(c, "/bench/tls-uncontended", per_round, &mut v).await;
            eprintln!(
                "round {round} {:?}: uncontended median {:.0} us",
                modes[i],
                median(&mut v.clone())
            );
            cycle_us[i].extend(v);
        }
    }

    // 8 contenders, each on its own session.
    let mut groups = Vec::new();
    for mode in modes {
        let mut clients = Vec::new();
        for _ in 0..8 {
            clients.push(setup.client(mode).await);
        }
        groups.push(clients);
    }
    let mut rates = [Vec::new(), Vec::new()];
    for g in &groups {
        contended(g, "/bench/tls-contended", round_len / 2).await; // warm-up
    }
    for round in 0..rounds {
        for (i, g) in groups.iter().enumerate() {
            let rate = contended(g, "/bench/tls-contended", round_len).await;
            eprintln!("round {round} {:?}: 8 contenders {rate:.0} acq/s", modes[i]);
            rates[i].push(rate);
        }
    }

    let rows = [
        (
            "uncontended cycle, median (us)",
            median(&mut cycle_us[0]),
            median(&mut cycle_us[1]),
        ),
        (
            "uncontended cycle, p90 (us)",
            percentile(&mut cycle_us[0], 0.9),
            percentile(&mut cycle_us[1], 0.9),
        ),
        (
            "8 contenders, acquisitions/s (median)",
            median(&mut rates[0]),
            median(&mut rates[1]),
        ),
        (
            "connect, median (us)",
            median(&mut connect_us[0]),
            median(&mut connect_us[1]),
        ),
    ];
    println!(
        "rounds: {rounds} x {per_round} cycles, {rounds} x {} ms contended, {connects} connects",
        round_len.as_millis()
    );
    println!(
        "{:<40} {:>10} {:>10} {:>10}",
        "", "plain", "TLS", "TLS/plain"
    );
    for (what, plain, tls) in rows {
        println!("{what:<40} {plain:>10.0} {tls:>10.0} {:>10.2}", tls / plain);
    }
    for c in single.iter().chain(groups.iter().flatten()) {
        c.close().await;
    }
}
