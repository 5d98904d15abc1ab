//! End-to-end benchmark against a real ZooKeeper: `cargo bench --bench e2e`.
//!
//! Starts a standalone server with the test support (data dir on /dev/shm when present,
//! so a write costs about one read round trip) unless `ZK_BENCH_ADDR=host:port` names
//! one. Reports round-trip latency of `exists` and of a 100-byte `setData`, pipelined
//! `getData` throughput from one session at 1, 16 and 256 requests in flight, the
//! server's `zk_packets_received` per operation, the client's CPU per request, and, as
//! the ceiling to compare with, what a bare codec loop on one connection achieves.

// A benchmark is a driver: it owns the clock (the ban in clippy.toml is for the core).
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use zk_recipes::proto::*;
use zk_recipes_testing::{four_letter, Options as ServerOptions, RawClient, TestServer};
use zk_recipes_tokio::{connect, CreateOptions, Options};

fn cpu_time() -> Duration {
    // utime + stime of this process, in clock ticks (100 Hz on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // fields after ')' start at index 3 (state is not numeric, so shift by one)
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn packets(addr: std::net::SocketAddr) -> i64 {
    let text = four_letter(addr, "mntr").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("zk_packets_received\t"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Bare codec loop on one connection: `window` getData requests in flight.
fn bare_codec(addr: std::net::SocketAddr, total: usize, window: usize) -> f64 {
    let raw = RawClient::connect(addr, 30_000).unwrap();
    drop(raw);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut out = BytesMut::new();
    encode_connect(
        &mut out,
        &ConnectRequest {
            timeout_ms: 30_000,
            passwd: bytes::Bytes::from_static(&[0; 16]),
            ..Default::default()
        },
    );
    s.write_all(&out).unwrap();
    let mut dec = FrameDecoder::new(DEFAULT_MAX_REPLY);
    let mut buf = vec![0u8; 256 * 1024];
    let mut next = |s: &mut TcpStream, dec: &mut FrameDecoder, pending: &mut Vec<u8>| loop {
        let mut input = &pending[..];
        let got = dec.decode(&mut input).unwrap();
        let used = pending.len() - input.len();
        pending.drain(..used);
        if got.is_some() {
            return;
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "server closed");
        pending.extend_from_slice(&buf[..n]);
    };
    let mut pending = Vec::new();
    next(&mut s, &mut dec, &mut pending); // handshake
    let req = Request::GetData(PathWatch {
        path: "/bench".into(),
        watch: false,
    });
    let start = Instant::now();
    let mut sent = 0;
    let mut xid = 1;
    out.clear();
    while sent < window.min(total) {
        encode_request(&mut out, xid, &req, DEFAULT_MAX_REQUEST).unwrap();
        xid += 1;
        sent += 1;
    }
    s.write_all(&out).unwrap();
    for done in 0..total {
        next(&mut s, &mut dec, &mut pending);
        if sent < total {
            out.clear();
            encode_request(&mut out, xid, &req, DEFAULT_MAX_REQUEST).unwrap();
            xid += 1;
            sent += 1;
            s.write_all(&out).unwrap();
        }
        let _ = done;
    }
    total as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--test") || std::env::var_os("E2E_QUICK").is_some();
    let scale = if quick { 10 } else { 1 };
    let (_server, addr) = match std::env::var("ZK_BENCH_ADDR") {
        Ok(a) => (None, a.parse().expect("ZK_BENCH_ADDR=host:port")),
        Err(_) => {
            let base = std::path::Path::new("/dev/shm");
            let opts = ServerOptions {
                base_dir: base.exists().then(|| base.to_path_buf()),
                ..Default::default()
            };
            let s = TestServer::start_with(opts).expect("start ZooKeeper");
            let a = s.addr();
            (Some(s), a)
        }
    };
    println!(
        "server {addr} (data on {})",
        if std::path::Path::new("/dev/shm").exists() {
            "/dev/shm"
        } else {
            "disk"
        }
    );
    let zk = connect(&addr.to_string(), Options::default())
        .await
        .unwrap();
    let _ = zk.delete("/bench", None).await;
    zk.create("/bench", vec![7u8; 100], &CreateOptions::default())
        .await
        .unwrap();
    for _ in 0..500 / scale {
        zk.exists("/bench").await.unwrap(); // warm up the JIT
    }

    let n = 2000 / scale;
    let before = packets(addr);
    let mut rtts = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        zk.exists("/bench").await.unwrap();
        rtts.push(t.elapsed());
    }
    let per_op = (packets(addr) - before - 1) as f64 / n as f64;
    rtts.sort();
    let read_rtt = percentile(&rtts, 0.5);
    println!(
        "exists round trip:    median {:>7.1} us   p99 {:>7.1} us   server packets/op {per_op:.2}",
        read_rtt.as_secs_f64() * 1e6,
        percentile(&rtts, 0.99).as_secs_f64() * 1e6
    );
    let mut w = Vec::new();
    for _ in 0..500 / scale {
        let t = Instant::now();
        zk.set_data("/bench", vec![1u8; 100], None).await.unwrap();
        w.push(t.elapsed());
    }
    w.sort();
    println!(
        "setData(100 B) trip:  median {:>7.1} us   p99 {:>7.1} us   ({:.2} read RTTs)",
        percentile(&w, 0.5).as_secs_f64() * 1e6,
        percentile(&w, 0.99).as_secs_f64() * 1e6,
        percentile(&w, 0.5).as_secs_f64() / read_rtt.as_secs_f64()
    );

    let total = 40_000 / scale;
    for window in [1usize, 16, 256] {
        let before = packets(addr);
        let cpu0 = cpu_time();
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..window {
            let zk = zk.clone();
            let each = total / window;
            tasks.spawn(async move {
                for _ in 0..each {
                    zk.get_data("/bench").await.unwrap();
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        let secs = start.elapsed().as_secs_f64();
        let done = (total / window) * window;
        let cpu = cpu_time() - cpu0;
        let per_op = (packets(addr) - before - 1) as f64 / done as f64;
        println!(
            "getData, {window:>3} in flight: {:>8.0} req/s   client CPU {:>5.1} us/req   server packets/op {per_op:.2}",
            done as f64 / secs,
            cpu.as_secs_f64() * 1e6 / done as f64
        );
    }
    for window in [1usize, 256] {
        let addr2 = addr;
        let rate = tokio::task::spawn_blocking(move || bare_codec(addr2, total, window))
            .await
            .unwrap();
        println!("bare codec loop, one connection, {window:>3} in flight: {rate:>8.0} req/s (the server's ceiling for one session)");
    }
    zk.close().await;
}
