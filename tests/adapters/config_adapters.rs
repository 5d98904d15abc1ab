//! Configuration against a real ZooKeeper 3.8 through both adapters: a writer writes 50
//! configurations of 20 nodes (configuration `k` holds `"k"` in every node) while two
//! readers, one per adapter, read; no reader ever sees a mixed configuration, both end
//! on the last one. Once with the paper's ready node, once with `multi`/`multiRead`.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use support::runtime;
use zk_recipes::recipe::config::{ConfigMode, ConfigSnapshot, ReaderConfig};
use zk_recipes_testing::TestServer;

use zk_recipes_blocking as zb;
use zk_recipes_tokio as zt;

const CONFIGS: u32 = 50;
const NODES: usize = 20;
const W: Duration = Duration::from_secs(30);

fn paths(root: &str) -> Vec<String> {
    (0..NODES).map(|i| format!("{root}/n{i:02}")).collect()
}

/// The configuration a snapshot holds; panics on a mixed one.
fn config_of(s: &ConfigSnapshot, who: &str) -> u32 {
    let first = s.values[0].1.clone();
    assert!(
        s.values.iter().all(|(_, v)| *v == first),
        "{who}: mixed configuration {:?}",
        s.values
    );
    match first {
        None => 0,
        Some(v) => std::str::from_utf8(&v).unwrap().parse().unwrap(),
    }
}

/// Follows snapshots until configuration `CONFIGS`; returns every configuration seen.
fn follow(
    mut next: impl FnMut() -> Result<ConfigSnapshot, zk_recipes::client::Error>,
    who: &str,
) -> Vec<u32> {
    let deadline = Instant::now() + W;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let s = next().unwrap_or_else(|e| panic!("{who}: {e}"));
        let k = config_of(&s, who);
        if let Some(&last) = seen.last() {
            assert!(k > last, "{who}: went from {last} to {k}");
        }
        seen.push(k);
        if k == CONFIGS {
            return seen;
        }
    }
    panic!("{who}: no configuration {CONFIGS} within {W:?}: {seen:?}");
}

fn scenario(mode: ConfigMode, root: &str) {
    let server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    let ready = format!("{root}/ready");
    let paths = paths(root);
    let refs: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
    let reader_config = match mode {
        ConfigMode::ReadyNode => ReaderConfig::ready_node(&ready, &refs),
        ConfigMode::Multi => ReaderConfig::multi(&refs),
    };

    let bz = zb::connect(&cs, zb::Options::default()).unwrap();
    let tz = runtime()
        .block_on(zt::connect(&cs, zt::Options::default()))
        .unwrap();
    let wz = zb::connect(&cs, zb::Options::default()).unwrap();

    // Readers first: they follow the configuration from nothing to the last one.
    let mut b_reader = bz.config_reader_with(reader_config.clone()).unwrap();
    let mut t_reader = tz.config_reader_with(reader_config).unwrap();
    let seen_t = Arc::new(Mutex::new(Vec::new()));
    let t_task = {
        let seen_t = seen_t.clone();
        runtime().spawn(async move {
            let deadline = tokio::time::Instant::now() + W;
            loop {
                let s = tokio::time::timeout_at(deadline, t_reader.snapshot())
                    .await
                    .expect("tokio reader: no last configuration in time")
                    .expect("tokio reader ended");
                let k = config_of(&s, "tokio");
                let mut seen = seen_t.lock().unwrap();
                if let Some(&last) = seen.last() {
                    assert!(k > last, "tokio: went from {last} to {k}");
                }
                seen.push(k);
                if k == CONFIGS {
                    return t_reader;
                }
            }
        })
    };
    let b_thread = std::thread::spawn(move || {
        let seen = follow(|| b_reader.snapshot(), "blocking");
        (seen, b_reader)
    });

    // The writer: 50 configurations, alternating adapters for the writes.
    let tw = runtime()
        .block_on(zt::connect(&cs, zt::Options::default()))
        .unwrap();
    for k in 1..=CONFIGS {
        let value = Bytes::from(k.to_string());
        let updates: Vec<(String, Bytes)> =
            paths.iter().map(|p| (p.clone(), value.clone())).collect();
        if k % 2 == 0 {
            wz.write_config(&ready, updates, mode).unwrap();
        } else {
            runtime()
                .block_on(tw.write_config(&ready, updates, mode))
                .unwrap();
        }
        if k % 5 == 0 {
            // Now and then a pause, so readers also complete rounds between writes.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The server holds the last configuration (and ready, in the ready mode).
    for p in &paths {
        assert_eq!(wz.get_data(p).unwrap().0, CONFIGS.to_string().as_bytes());
    }
    assert_eq!(
        wz.exists(&ready).unwrap().is_some(),
        mode == ConfigMode::ReadyNode
    );

    let (seen_b, _b_reader) = b_thread.join().expect("blocking reader");
    let _t_reader = runtime().block_on(t_task).expect("tokio reader");
    let seen_t = seen_t.lock().unwrap().clone();
    println!(
        "{mode:?}: blocking saw {} configurations, tokio {}",
        seen_b.len(),
        seen_t.len()
    );
    assert_eq!(seen_b.last(), Some(&CONFIGS));
    assert_eq!(seen_t.last(), Some(&CONFIGS));
}

#[test]
fn ready_node_readers_never_see_a_mixed_configuration() {
    scenario(ConfigMode::ReadyNode, "/cfg-ready");
}

#[test]
fn multi_readers_never_see_a_mixed_configuration() {
    scenario(ConfigMode::Multi, "/cfg-multi");
}

#[test]
fn a_multi_write_larger_than_the_limit_is_refused_up_front() {
    let server = TestServer::start().expect("a real ZooKeeper");
    let zk = zb::connect(&server.connect_string(), zb::Options::default()).unwrap();
    let big: Vec<(String, Bytes)> = (0..30)
        .map(|i| (format!("/big/n{i}"), Bytes::from(vec![b'x'; 50_000])))
        .collect();
    match zk.write_config("/big/ready", big, ConfigMode::Multi) {
        Err(zk_recipes::client::Error::TooLarge(t)) => assert!(t.len > t.max, "{t:?}"),
        other => panic!("{other:?}"),
    }
    assert!(
        zk.exists("/big").unwrap().is_none(),
        "something was written"
    );
}

/// The server restarts in the middle of the writes: writers resume (lost replies are
/// resent, `ready` comes back last), readers sync and read again; nobody sees a mixed
/// configuration and everybody ends on the last one.
#[test]
fn writes_and_reads_survive_a_server_restart() {
    let mut server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    let root = "/cfg-restart";
    let ready = format!("{root}/ready");
    let paths = paths(root);
    let refs: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
    let config = ReaderConfig::ready_node(&ready, &refs);
    let session = Duration::from_secs(30);
    let bz = zb::connect(&cs, zb::Options::default().session_timeout(session)).unwrap();
    let tz = runtime()
        .block_on(zt::connect(
            &cs,
            zt::Options::default().session_timeout(session),
        ))
        .unwrap();
    let wz = zb::connect(&cs, zb::Options::default().session_timeout(session)).unwrap();
    let mut b_reader = bz.config_reader_with(config.clone()).unwrap();
    let mut t_reader = tz.config_reader_with(config).unwrap();

    let progress = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let writer = {
        let (progress, paths, ready, wz) =
            (progress.clone(), paths.clone(), ready.clone(), wz.clone());
        std::thread::spawn(move || {
            for k in 1..=CONFIGS {
                let value = Bytes::from(k.to_string());
                let updates = paths.iter().map(|p| (p.clone(), value.clone())).collect();
                wz.write_config(&ready, updates, ConfigMode::ReadyNode)
                    .unwrap_or_else(|e| panic!("write {k}: {e}"));
                progress.store(k, std::sync::atomic::Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    while progress.load(std::sync::atomic::Ordering::SeqCst) < 10 {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.restart().unwrap();
    writer.join().expect("the writer");

    let seen_b = follow(|| b_reader.snapshot(), "blocking");
    let seen_t = follow(
        || {
            runtime().block_on(async {
                tokio::time::timeout(W, t_reader.snapshot())
                    .await
                    .unwrap_or(Err(zk_recipes::client::Error::Timeout))
            })
        },
        "tokio",
    );
    println!("restart: blocking saw {seen_b:?}, tokio {seen_t:?}");
    for p in &paths {
        assert_eq!(wz.get_data(p).unwrap().0, CONFIGS.to_string().as_bytes());
    }
    assert!(wz.exists(&ready).unwrap().is_some());
}
