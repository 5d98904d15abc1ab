// The watched value (`watch_node`, the core's `NodeWatch`) against a real ZooKeeper 3.8,
// in each form: a watcher follows one node while another client creates it, writes it
// 50 times in a burst, deletes and re-creates it, and writes it again after a server
// restart. The watcher reports a missing node as missing, never reports a version
// twice or out of order, and ends holding the last written value every time writes
// stop (convergence).

use std::time::{Duration, Instant};

use zk::NodeWatchEvent;
use zk_recipes_testing::TestServer;

const PATH: &str = "/cfg/watched";
const WITHIN: Duration = Duration::from_secs(20);

/// Reads events until the watcher holds `want` (`None`: missing); checks that the
/// versions it reports only go forward.
#[form]
async fn until(w: &mut zk::NodeWatchHandle, want: Option<&str>, last: &mut (i64, i32)) {
    let deadline = Instant::now() + WITHIN;
    let mut seen = Vec::new();
    loop {
        let holds = w.value().await.unwrap().map(|(d, _)| d);
        if holds.as_deref() == want.map(str::as_bytes) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{NAME}: never held {want:?} (events {seen:?})"
        );
        match w.next_timeout(left).await.ok().flatten() {
            Some(NodeWatchEvent::Data { data, stat }) => {
                let v = (stat.czxid, stat.version);
                assert!(
                    v.0 > last.0 || (v.0 == last.0 && v.1 > last.1),
                    "{NAME}: version {v:?} after {last:?} ({data:?})"
                );
                *last = v;
                seen.push(NodeWatchEvent::Data { data, stat });
            }
            Some(e @ (NodeWatchEvent::Failed(_) | NodeWatchEvent::Closed)) => {
                panic!("{NAME}: ended: {e:?}")
            }
            Some(e) => seen.push(e),
            None => {}
        }
    }
}

#[test]
fn a_watcher_follows_and_converges() {
    let mut server = TestServer::start().expect("a real ZooKeeper");
    run(a_watcher_follows_and_converges_on(&mut server));
}

#[form]
async fn a_watcher_follows_and_converges_on(server: &mut TestServer) {
    let cs = server.connect_string();
    let opts = || zk::Options::default().connect_timeout(Duration::from_secs(10));
    let writer = zk::connect(&cs, opts()).await.unwrap();
    writer
        .create("/cfg", "", &zk::CreateOptions::default())
        .await
        .unwrap();
    let watching = zk::connect(&cs, opts()).await.unwrap();
    let mut w = watching.watch_node(PATH).unwrap();
    let l = &mut (0i64, -1i32);

    // Missing at first.
    let e = w.next_timeout(WITHIN).await.ok().flatten();
    assert_eq!(e, Some(NodeWatchEvent::Missing { gone: false }), "{NAME}");
    until(&mut w, None, l).await;
    // Created, then a burst of 50 writes: the watcher ends on the last.
    writer
        .create(PATH, "v0", &zk::CreateOptions::default())
        .await
        .unwrap();
    for i in 1..=50 {
        writer.set_data(PATH, format!("v{i}"), None).await.unwrap();
    }
    until(&mut w, Some("v50"), l).await;
    // Deleted and created again: followed (the new node's czxid is higher).
    writer.delete(PATH, None).await.unwrap();
    writer
        .create(PATH, "again", &zk::CreateOptions::default())
        .await
        .unwrap();
    until(&mut w, Some("again"), l).await;
    let (_, stat) = w.value().await.unwrap().unwrap();
    assert_eq!(stat.version, 0, "{NAME}: the new node");
    // A refresh after an out-of-band notice: the same version is not reported again.
    // First what is still queued from before (versions still only go forward).
    while let Ok(Some(e)) = w.next_timeout(Duration::from_millis(300)).await {
        if let NodeWatchEvent::Data { stat, .. } = e {
            assert!((stat.czxid, stat.version) > *l, "{NAME}: {stat:?}");
            *l = (stat.czxid, stat.version);
        }
    }
    w.refresh().unwrap();
    sleep(Duration::from_millis(200)).await;
    let e = w
        .next_timeout(Duration::from_millis(300))
        .await
        .ok()
        .flatten();
    assert!(
        !matches!(e, Some(NodeWatchEvent::Data { .. })),
        "{NAME}: {e:?}"
    );
    // The server restarts; the writer writes once it is back: re-read, converged.
    server.restart().unwrap();
    let t = Instant::now();
    loop {
        match writer.set_data(PATH, "after-restart", None).await {
            Ok(_) => break,
            Err(e) => {
                assert!(t.elapsed() < WITHIN, "writer: {e}");
                sleep(Duration::from_millis(100)).await;
            }
        }
    }
    until(&mut w, Some("after-restart"), l).await;
    // Deleted for good: missing.
    writer.delete(PATH, None).await.unwrap();
    until(&mut w, None, l).await;
}
