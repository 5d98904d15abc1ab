// Configuration against a real ZooKeeper 3.8, in each form: a writer writes 50
// configurations of 20 nodes (configuration `k` holds `"k"` in every node) while two
// readers on two sessions read; no reader ever sees a mixed configuration, both end
// on the last one. Once with the paper's ready node, once with `multi`/`multiRead`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use zk::{ConfigMode, ConfigSnapshot, Error, ReaderConfig, ReaderEvent};
use zk_recipes_testing::TestServer;

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
        "{NAME} {who}: mixed configuration {:?}",
        s.values
    );
    match first {
        None => 0,
        Some(v) => std::str::from_utf8(&v).unwrap().parse().unwrap(),
    }
}

/// `snapshot()`, until `deadline` at most.
#[form]
async fn snapshot_until(
    r: &mut zk::ConfigReaderHandle,
    deadline: Instant,
) -> Result<ConfigSnapshot, Error> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match r.next_timeout(left).await? {
            Some(ReaderEvent::Snapshot(s)) => return Ok(s),
            Some(ReaderEvent::Failed(e)) => return Err(e),
            Some(ReaderEvent::Closed) | None => return Err(Error::Finished),
            Some(_) => {}
        }
    }
}

/// Follows snapshots until configuration `CONFIGS` (within `W`); returns every
/// configuration seen.
#[form]
async fn follow(r: &mut zk::ConfigReaderHandle, who: &str) -> Vec<u32> {
    let deadline = Instant::now() + W;
    let mut seen = Vec::new();
    loop {
        let s = snapshot_until(r, deadline)
            .await
            .unwrap_or_else(|e| panic!("{NAME} {who}: {e} (seen {seen:?})"));
        let k = config_of(&s, who);
        if let Some(&last) = seen.last() {
            assert!(k > last, "{NAME} {who}: went from {last} to {k}");
        }
        seen.push(k);
        if k == CONFIGS {
            return seen;
        }
    }
}

#[form]
async fn scenario(mode: ConfigMode, root: &str) {
    let server = server();
    let cs = server.connect_string();
    let ready = format!("{root}/ready");
    let paths = paths(root);
    let refs: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
    let reader_config = match mode {
        ConfigMode::ReadyNode => ReaderConfig::ready_node(&ready, &refs),
        ConfigMode::Multi => ReaderConfig::multi(&refs),
    };

    let az = zk::connect(&cs, zk::Options::default()).await.unwrap();
    let bz = zk::connect(&cs, zk::Options::default()).await.unwrap();
    let wz = zk::connect(&cs, zk::Options::default()).await.unwrap();

    // Readers first: they follow the configuration from nothing to the last one.
    let mut a_reader = az.config_reader_with(reader_config.clone()).unwrap();
    let mut b_reader = bz.config_reader_with(reader_config).unwrap();
    let a_task = spawn(move || async move {
        let seen = follow(&mut a_reader, "first").await;
        (seen, a_reader)
    });

    // The writer: 50 configurations, alternating sessions for the writes.
    let tw = zk::connect(&cs, zk::Options::default()).await.unwrap();
    let writing = spawn({
        let (ready, paths, wz) = (ready.clone(), paths.clone(), wz.clone());
        move || async move {
            for k in 1..=CONFIGS {
                let value = Bytes::from(k.to_string());
                let updates: Vec<(String, Bytes)> =
                    paths.iter().map(|p| (p.clone(), value.clone())).collect();
                let writer = if k % 2 == 0 { &wz } else { &tw };
                writer.write_config(&ready, updates, mode).await.unwrap();
                if k % 5 == 0 {
                    // Now and then a pause, so readers also complete rounds between writes.
                    sleep(Duration::from_millis(20)).await;
                }
            }
        }
    });
    let seen_b = follow(&mut b_reader, "second").await;
    writing.join().await;
    // The server holds the last configuration (and ready, in the ready mode).
    for p in &paths {
        assert_eq!(
            wz.get_data(p).await.unwrap().0,
            CONFIGS.to_string().as_bytes()
        );
    }
    assert_eq!(
        wz.exists(&ready).await.unwrap().is_some(),
        mode == ConfigMode::ReadyNode
    );

    let (seen_a, _a_reader) = a_task.join().await;
    println!(
        "{NAME} {mode:?}: the readers saw {} and {} configurations",
        seen_a.len(),
        seen_b.len()
    );
    assert_eq!(seen_a.last(), Some(&CONFIGS));
    assert_eq!(seen_b.last(), Some(&CONFIGS));
}

#[test]
fn ready_node_readers_never_see_a_mixed_configuration() {
    run(scenario(ConfigMode::ReadyNode, "/cfg-ready"));
}

#[test]
fn multi_readers_never_see_a_mixed_configuration() {
    run(scenario(ConfigMode::Multi, "/cfg-multi"));
}

#[test]
fn a_multi_write_larger_than_the_limit_is_refused_up_front() {
    run(a_multi_write_larger_than_the_limit_is_refused_up_front_on(
        &server(),
    ));
}

#[form]
async fn a_multi_write_larger_than_the_limit_is_refused_up_front_on(server: &TestServer) {
    let zk = zk::connect(&server.connect_string(), zk::Options::default())
        .await
        .unwrap();
    let big: Vec<(String, Bytes)> = (0..30)
        .map(|i| (format!("/big/n{i}"), Bytes::from(vec![b'x'; 50_000])))
        .collect();
    match zk.write_config("/big/ready", big, ConfigMode::Multi).await {
        Err(Error::TooLarge(t)) => assert!(t.len > t.max, "{NAME}: {t:?}"),
        other => panic!("{NAME}: {other:?}"),
    }
    let big = zk.exists("/big").await.unwrap();
    assert!(big.is_none(), "{NAME}: something was written");
}

/// The server restarts in the middle of the writes: writers resume (lost replies are
/// resent, `ready` comes back last), readers sync and read again; nobody sees a mixed
/// configuration and everybody ends on the last one.
#[test]
fn writes_and_reads_survive_a_server_restart() {
    let mut server = own_server();
    run(writes_and_reads_survive_a_server_restart_on(&mut server));
}

#[form]
async fn writes_and_reads_survive_a_server_restart_on(server: &mut TestServer) {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    let cs = server.connect_string();
    let root = "/cfg-restart";
    let ready = format!("{root}/ready");
    let paths = paths(root);
    let refs: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
    let config = ReaderConfig::ready_node(&ready, &refs);
    let options = || zk::Options::default().session_timeout(Duration::from_secs(30));
    let az = zk::connect(&cs, options()).await.unwrap();
    let bz = zk::connect(&cs, options()).await.unwrap();
    let wz = zk::connect(&cs, options()).await.unwrap();
    let mut a_reader = az.config_reader_with(config.clone()).unwrap();
    let mut b_reader = bz.config_reader_with(config).unwrap();

    let progress = Arc::new(AtomicU32::new(0));
    let writer = {
        let (progress, paths, ready, wz) =
            (progress.clone(), paths.clone(), ready.clone(), wz.clone());
        spawn(move || async move {
            for k in 1..=CONFIGS {
                let value = Bytes::from(k.to_string());
                let updates = paths.iter().map(|p| (p.clone(), value.clone())).collect();
                wz.write_config(&ready, updates, ConfigMode::ReadyNode)
                    .await
                    .unwrap_or_else(|e| panic!("write {k}: {e}"));
                progress.store(k, Ordering::SeqCst);
                sleep(Duration::from_millis(10)).await;
            }
        })
    };
    while progress.load(Ordering::SeqCst) < 10 {
        sleep(Duration::from_millis(5)).await;
    }
    server.restart().unwrap();
    writer.join().await;

    let seen_a = follow(&mut a_reader, "first").await;
    let seen_b = follow(&mut b_reader, "second").await;
    println!("{NAME} restart: the readers saw {seen_a:?} and {seen_b:?}");
    for p in &paths {
        assert_eq!(
            wz.get_data(p).await.unwrap().0,
            CONFIGS.to_string().as_bytes()
        );
    }
    assert!(wz.exists(&ready).await.unwrap().is_some());
}
