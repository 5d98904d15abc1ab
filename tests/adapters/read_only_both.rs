// Read-only mode against a real three-server ensemble started with
// `readonlymode.enabled` (and local sessions, which 3.8's read-only server needs), in
// each form (both share one ensemble: see `read_only_mode_on_a_partitioned_ensemble`
// in main.rs): a client that accepts read-only servers, holding an ephemeral node (so
// its session is a global one, which 3.8's read-only server refuses to take over),
// keeps its session through the loss of two servers: on the third, now read-only, a
// read-only stand-in serves it; it reads, and its tree cache and configuration reader
// keep their data; a write and a lock attempt fail at once naming `NotReadOnly`; once
// the quorum is back the same session is read-write again, its ephemeral node still
// there and its watches intact (the cache and the reader see what is written next),
// and the lock is taken.

use std::time::{Duration, Instant};

use zk::{
    connect, ConfigMode, CreateMode, CreateOptions, ErrorCode, NodeWatchEvent, Options,
    ReaderEvent, Status,
};
use zk_recipes_testing::TestEnsemble;

const W: Duration = Duration::from_secs(40);

/// What one form measured.
struct Figures {
    /// Reads answered while the client was on the read-only server.
    pub reads: u64,
    /// Over this long.
    pub reading: Duration,
    /// From the kill of two servers to a read-only connection.
    pub to_read_only: Duration,
    /// From the quorum's return (the restarted server serving) to a read-write
    /// connection.
    pub back_to_read_write: Duration,
}

/// Runs the scenario on `ensemble` (all three serving, or server 2 already down),
/// under `root`, and prints its figures; leaves servers 0 and 1 serving.
pub fn partition(ensemble: &mut TestEnsemble, root: &str) {
    let f = run(scenario(ensemble, root));
    println!(
        "{NAME}: read-only {:?} after two servers died; {} reads in {:?} ({:.0}/s) on the \
         read-only server; read-write {:?} after the quorum returned",
        f.to_read_only,
        f.reads,
        f.reading,
        f.reads as f64 / f.reading.as_secs_f64(),
        f.back_to_read_write
    );
}

fn is_read_only(s: Status) -> bool {
    matches!(s, Status::Connected { read_only: true, .. })
}

fn is_read_write(s: Status) -> bool {
    matches!(s, Status::Connected { read_only: false, .. })
}

/// The configuration reader's next snapshot's value of its one node.
#[form]
async fn next_value(r: &mut zk::ConfigReaderHandle) -> Option<bytes::Bytes> {
    let deadline = Instant::now() + W;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match r.next_timeout(left).await {
            Ok(Some(ReaderEvent::Snapshot(s))) => return s.values[0].1.clone(),
            Ok(Some(ReaderEvent::Failed(e))) => panic!("{NAME}: reader failed: {e}"),
            Ok(Some(_)) => {}
            other => panic!("{NAME}: no snapshot: {other:?}"),
        }
    }
}

/// The watched value's next version with data `want` (earlier versions, re-reads
/// after a reconnect and other events skipped).
#[form]
async fn watched_becomes(w: &mut zk::NodeWatchHandle, want: &[u8]) {
    let deadline = Instant::now() + W;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match w.next_timeout(left).await {
            Ok(Some(NodeWatchEvent::Data { data, .. })) if &data[..] == want => return,
            Ok(Some(NodeWatchEvent::Failed(e))) => panic!("{NAME}: watched value failed: {e}"),
            Ok(Some(_)) => {}
            other => panic!("{NAME}: never {want:?}: {other:?}"),
        }
    }
}

#[form]
async fn scenario(ensemble: &mut TestEnsemble, root: &str) -> Figures {
    let cs = ensemble.connect_string();
    let (tree, ready, value, lock) = (
        format!("{root}/tree"),
        format!("{root}/cfg/ready"),
        format!("{root}/cfg/value"),
        format!("{root}/lock"),
    );
    let persistent = CreateOptions::mode(CreateMode::Persistent);
    let writer = connect(&cs, Options::default()).await.unwrap();
    for child in ["a", "b"] {
        writer
            .create_all(&format!("{tree}/{child}"), child, &persistent)
            .await
            .unwrap();
    }
    writer
        .write_config(&ready, vec![(value.clone(), "v1".into())], ConfigMode::ReadyNode)
        .await
        .unwrap();
    writer.close().await;

    let zk = connect(
        &cs,
        Options::default()
            .read_only(true)
            .session_timeout(Duration::from_secs(8))
            .connect_timeout(W),
    )
    .await
    .unwrap();
    let session = zk.session_id();
    assert!(is_read_write(zk.status()), "{NAME}: {:?}", zk.status());
    // An ephemeral node: the session becomes a global one (with local sessions on, a
    // session is local to its server until it creates one).
    let member = format!("{root}/member");
    zk.create(
        &member,
        "m",
        &CreateOptions::mode(CreateMode::Ephemeral),
    )
    .await
    .unwrap();
    let mut cache = zk.tree_cache(&tree).unwrap();
    assert_eq!(cache.initialized().await.unwrap(), 3);
    let mut reader = zk.config_reader(&ready, &[value.as_str()]).unwrap();
    assert_eq!(next_value(&mut reader).await.as_deref(), Some(&b"v1"[..]));
    let mut watched = zk.watch_node(&value).unwrap();
    watched_becomes(&mut watched, b"v1").await;

    // Servers 1 and 2 die: server 0 loses its quorum and, read-only mode enabled,
    // serves reads alone.
    let killed = Instant::now();
    ensemble.kill(1).unwrap();
    ensemble.kill(2).unwrap();
    zk.wait_status(W, is_read_only)
        .await
        .unwrap_or_else(|| panic!("{NAME}: never read-only: {:?}", zk.status()));
    let to_read_only = killed.elapsed();
    assert_eq!(zk.session_id(), session, "{NAME}: the session is kept");

    // Reads are served, for a second: count them.
    let reading = Instant::now();
    let mut reads = 0u64;
    while reading.elapsed() < Duration::from_secs(1) {
        assert_eq!(&zk.get_data(&value).await.unwrap().0[..], b"v1");
        reads += 1;
    }
    let reading = reading.elapsed();
    assert!(cache.get(&format!("{tree}/a")).await.unwrap().is_some());
    assert_eq!(cache.snapshot().await.unwrap().len(), 3);
    let (data, _) = watched.value().await.unwrap().expect("the watched value");
    assert_eq!(&data[..], b"v1", "{NAME}: the watched value");
    assert_eq!(
        zk.get_children(&tree).await.unwrap().len(),
        2,
        "{NAME}: a listing"
    );

    // A write, and a lock attempt (it writes): refused at once, naming the cause.
    let refused = Instant::now();
    let e = zk.set_data(&value, "v1.5", None).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotReadOnly), "{NAME}: {e}");
    assert!(e.to_string().contains("read-only"), "{NAME}: {e}");
    let e = match zk.lock(&lock).acquire_timeout(W).await {
        Err(e) => e,
        Ok(held) => panic!("{NAME}: a lock on a read-only server: {}", held.is_some()),
    };
    assert_eq!(e.code(), Some(ErrorCode::NotReadOnly), "{NAME}: {e}");
    // A queue put and a counter add (recipes that write) too.
    let e = zk.queue(&format!("{root}/queue")).put("x").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotReadOnly), "{NAME}: queue: {e}");
    let mut counter = zk
        .counter(&format!("{root}/counter"), zk::CounterFormat::I64)
        .unwrap();
    let e = counter.add(1).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotReadOnly), "{NAME}: counter: {e}");
    assert!(
        refused.elapsed() < Duration::from_secs(5),
        "{NAME}: refused after {:?}",
        refused.elapsed()
    );
    assert!(is_read_only(zk.status()), "{NAME}: {:?}", zk.status());

    // The quorum returns: the same session, read-write, its watches intact.
    ensemble.restart(1).unwrap();
    let back = Instant::now();
    zk.wait_status(W, is_read_write)
        .await
        .unwrap_or_else(|| panic!("{NAME}: never read-write again: {:?}", zk.status()));
    let back_to_read_write = back.elapsed();
    assert_eq!(zk.session_id(), session, "{NAME}: the same session");
    let (_, stat) = zk.get_data(&member).await.unwrap();
    assert_eq!(stat.ephemeral_owner, session, "{NAME}: its ephemeral node is kept");
    let writer = connect(&cs, Options::default()).await.unwrap();
    writer
        .write_config(&ready, vec![(value.clone(), "v2".into())], ConfigMode::ReadyNode)
        .await
        .unwrap();
    writer
        .create(&format!("{tree}/c"), "c", &persistent)
        .await
        .unwrap();
    assert_eq!(next_value(&mut reader).await.as_deref(), Some(&b"v2"[..]));
    watched_becomes(&mut watched, b"v2").await;
    let deadline = Instant::now() + W;
    while cache.get(&format!("{tree}/c")).await.unwrap().is_none() {
        assert!(Instant::now() < deadline, "{NAME}: the cache never saw c");
        sleep(Duration::from_millis(20)).await;
    }
    let guard = zk.lock(&lock).acquire_timeout(W).await.unwrap();
    guard.expect("the lock, read-write").release().await.unwrap();
    writer.close().await;
    zk.close().await;
    Figures {
        reads,
        reading,
        to_read_only,
        back_to_read_write,
    }
}
