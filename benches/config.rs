//! Configuration writes against a real ZooKeeper: `cargo bench --bench config`.
//!
//! The paper's figure: 5,000 configuration parameters take about 10 s written one by
//! one, under 1 s pipelined. Writes the same 5,000 parameters (`/bench-config/pNNNN`,
//! 8-byte values; the nodes exist) three ways and reports each time and the ratios:
//!
//! * one by one: `delete(ready)`, 5,000 synchronous `setData` (each waits for its
//!   reply), `create(ready)` — what the paper measured as "one by one";
//! * pipelined: `write_config(.., ConfigMode::ReadyNode)` (`delete(ready)`, 5,000 sets
//!   back to back, `create(ready)`: three round trips);
//! * one `multi` (`ConfigMode::Multi`).
//!
//! Runs once with the server's data on disk (each write is an fsync'd log append, as
//! in the paper) and once on `/dev/shm` when present. `ZK_BENCH_ADDR=host:port` uses
//! that server instead; `--test` or `CONFIG_QUICK=1` writes 500 parameters.

// A benchmark is a driver: it owns the clock (the ban in clippy.toml is for the core).
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use zk_recipes::recipe::config::ConfigMode;
use zk_recipes_blocking::{connect, Client, CreateOptions, Options};
use zk_recipes_testing::{Options as ServerOptions, TestServer};

const ROOT: &str = "/bench-config";
const READY: &str = "/bench-config/ready";

fn updates(n: usize, round: u32) -> Vec<(String, Bytes)> {
    (0..n)
        .map(|i| {
            (
                format!("{ROOT}/p{i:04}"),
                Bytes::from(format!("v{round:07}")),
            )
        })
        .collect()
}

fn one_by_one(zk: &Client, updates: &[(String, Bytes)]) -> Duration {
    let t = Instant::now();
    match zk.delete(READY, None) {
        Ok(()) => {}
        Err(e) if e.code() == Some(zk_recipes::proto::ErrorCode::NoNode) => {}
        Err(e) => panic!("{e}"),
    }
    for (p, v) in updates {
        zk.set_data(p, v.clone(), None).unwrap();
    }
    zk.create(READY, Bytes::new(), &CreateOptions::default())
        .unwrap();
    t.elapsed()
}

fn run(addr: &str, label: &str, n: usize) {
    let zk = connect(addr, Options::default()).unwrap();
    // The nodes exist before the timed writes (both ways then only set).
    zk.write_config(READY, updates(n, 0), ConfigMode::ReadyNode)
        .unwrap();
    let mut round = 1;
    let mut best = |f: &mut dyn FnMut(u32) -> Duration| {
        let mut times: Vec<Duration> = (0..3)
            .map(|_| {
                round += 1;
                f(round)
            })
            .collect();
        times.sort();
        times[0]
    };
    let serial = best(&mut |r| one_by_one(&zk, &updates(n, r)));
    let pipelined = best(&mut |r| {
        let u = updates(n, r);
        let t = Instant::now();
        zk.write_config(READY, u, ConfigMode::ReadyNode).unwrap();
        t.elapsed()
    });
    let multi = best(&mut |r| {
        let u = updates(n, r);
        let t = Instant::now();
        zk.write_config(READY, u, ConfigMode::Multi).unwrap();
        t.elapsed()
    });
    // Check the last write landed.
    let last = zk.get_data(&format!("{ROOT}/p{:04}", n - 1)).unwrap().0;
    assert_eq!(last, format!("v{round:07}").as_bytes());
    println!(
        "{label}: {n} parameters: one by one {:.1} ms, pipelined (ready node) {:.1} ms, one multi {:.1} ms; one-by-one/pipelined = {:.1}x, one-by-one/multi = {:.1}x",
        serial.as_secs_f64() * 1e3,
        pipelined.as_secs_f64() * 1e3,
        multi.as_secs_f64() * 1e3,
        serial.as_secs_f64() / pipelined.as_secs_f64(),
        serial.as_secs_f64() / multi.as_secs_f64(),
    );
    zk.delete_all(ROOT).unwrap();
    zk.close();
}

fn main() {
    let quick =
        std::env::args().any(|a| a == "--test") || std::env::var_os("CONFIG_QUICK").is_some();
    let n = if quick { 500 } else { 5_000 };
    if let Ok(addr) = std::env::var("ZK_BENCH_ADDR") {
        run(&addr, &addr, n);
        return;
    }
    let disk = TestServer::start().expect("start ZooKeeper");
    run(&disk.connect_string(), "data on disk", n);
    drop(disk);
    let shm = std::path::Path::new("/dev/shm");
    if shm.exists() {
        let opts = ServerOptions {
            base_dir: Some(shm.to_path_buf()),
            ..Default::default()
        };
        let s = TestServer::start_with(opts).expect("start ZooKeeper");
        run(&s.connect_string(), "data on /dev/shm", n);
    }
}
