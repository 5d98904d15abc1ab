// The name service against a real ZooKeeper 3.8, in each form: four workers (each on
// its own session) take 250 ids each at once — 1,000 distinct ids, increasing per
// worker, above every id given before; once one id per call, once 250 per call
// (pipelined); ids/s printed on one line; no node left — and a name registered,
// watched, resolved from another session, registered again after its session
// expired, and unregistered.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk::{CreateMode, Error, LostReason, NodeWatchEvent, OwnedNodeEvent};
use zk_recipes::proto::PathError;
use zk_recipes_testing::{expire_session, TestServer};

const W: Duration = Duration::from_secs(10);

/// The next `Data` or `Missing` event (connection events skipped).
#[form]
async fn next_change(w: &mut zk::NodeWatchHandle) -> NodeWatchEvent {
    loop {
        match w
            .next_timeout(W)
            .await
            .ok()
            .flatten()
            .expect("a watch event")
        {
            NodeWatchEvent::Suspended | NodeWatchEvent::Reconnected => {}
            e => return e,
        }
    }
}

/// `resolve`, within `W`.
#[form]
async fn resolve(
    zk: &zk::Client,
    dir: &str,
    name: &str,
) -> Result<Option<(bytes::Bytes, zk::Stat)>, Error> {
    within(W, zk.resolve(dir, name))
        .await
        .unwrap_or(Err(Error::Timeout))
}

/// A worker on its own session: `n` ids one at a time, or (`batch`) `n` at once,
/// once `go` is set.
#[form]
async fn take(
    cs: &str,
    dir: &'static str,
    n: usize,
    batch: bool,
    go: Arc<AtomicBool>,
) -> Task<Vec<i64>> {
    let zk = connect(cs).await;
    let mut g = zk.id_generator(dir).unwrap();
    spawn(move || async move {
        while !go.load(Ordering::SeqCst) {
            sleep(Duration::from_micros(200)).await;
        }
        let ids: Vec<i64> = if batch {
            within(W, g.next_ids(n))
                .await
                .unwrap_or(Err(Error::Timeout))
                .unwrap_or_else(|e| panic!("{NAME}: {e}"))
        } else {
            let mut ids = Vec::new();
            for _ in 0..n {
                let id = within(W, g.next_id()).await.unwrap_or(Err(Error::Timeout));
                ids.push(id.unwrap_or_else(|e| panic!("{NAME}: {e}")));
            }
            ids
        };
        drop(g);
        zk.close().await;
        ids
    })
}

#[test]
fn four_workers_take_1000_distinct_increasing_ids() {
    run(four_workers_take_1000_distinct_increasing_ids_on(&server()));
}

#[form]
async fn four_workers_take_1000_distinct_increasing_ids_on(server: &TestServer) {
    let cs = server.connect_string();
    const DIR: &str = "/naming/ids";
    const EACH: usize = 250;
    // The directory exists before the clock starts (the first create makes it).
    let zk = connect(&cs).await;
    let mut warm = zk.id_generator(DIR).unwrap();
    let mut floor = warm.next_id().await.unwrap();
    let mut rates = Vec::new();
    let mut all = BTreeSet::new();
    for batch in [false, true] {
        // Connected and hosted before the clock starts.
        let go = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for _ in 0..4 {
            workers.push(take(&cs, DIR, EACH, batch, go.clone()).await);
        }
        go.store(true, Ordering::SeqCst);
        let start = Instant::now();
        let mut per = Vec::new();
        for w in workers {
            per.push(w.join().await);
        }
        let took = start.elapsed();
        let mut round = BTreeSet::new();
        for (w, ids) in per.iter().enumerate() {
            assert_eq!(ids.len(), EACH);
            assert!(
                ids.windows(2).all(|p| p[0] < p[1]),
                "{NAME} worker {w}: ids not increasing: {ids:?}"
            );
            assert!(
                ids[0] > floor,
                "{NAME} worker {w} got an id below one given before"
            );
            round.extend(ids.iter().copied());
        }
        assert_eq!(round.len(), 4 * EACH, "{NAME}: ids repeated across workers");
        floor = *round.last().unwrap();
        rates.push((took, round.len() as f64 / took.as_secs_f64()));
        all.extend(round);
    }
    assert_eq!(all.len(), 8 * EACH);
    println!(
        "naming ({NAME}): 1000 ids by 4 workers: one at a time {:.0} ms, {:.0} ids/s; 250 pipelined per call {:.0} ms, {:.0} ids/s",
        rates[0].0.as_secs_f64() * 1e3,
        rates[0].1,
        rates[1].0.as_secs_f64() * 1e3,
        rates[1].1,
    );
    // Every node drawn is deleted.
    drop(warm);
    let deadline = Instant::now() + W;
    loop {
        let left = zk.get_children(DIR).await.unwrap();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{NAME}: nodes left: {left:?}");
        sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn register_resolve_and_expiry_of_an_ephemeral_name() {
    run(register_resolve_and_expiry_of_an_ephemeral_name_on(
        &server(),
    ));
}

#[form]
async fn register_resolve_and_expiry_of_an_ephemeral_name_on(server: &TestServer) {
    let dir = "/services";
    let owner = connect(&server.connect_string()).await;
    let reader = connect(&server.connect_string()).await;
    assert_eq!(resolve(&reader, dir, "db").await.unwrap(), None, "{NAME}");
    let mut watch = reader.watch_name(dir, "db").unwrap();
    assert_eq!(
        next_change(&mut watch).await,
        NodeWatchEvent::Missing { gone: false }
    );

    let mut db = owner
        .register_name(dir, "db", "10.0.0.7:5432", CreateMode::Ephemeral)
        .unwrap();
    let stat = created(&mut db, W).await.unwrap();
    let old = owner.session_id();
    assert_eq!(stat.ephemeral_owner, old);
    let (data, stat) = resolve(&reader, dir, "db")
        .await
        .unwrap()
        .expect("registered");
    assert_eq!(&data[..], b"10.0.0.7:5432");
    assert_eq!(stat.ephemeral_owner, old);
    match next_change(&mut watch).await {
        NodeWatchEvent::Data { data, stat } => {
            assert_eq!(&data[..], b"10.0.0.7:5432");
            assert_eq!(stat.ephemeral_owner, old);
        }
        e => panic!("{NAME}: {e:?}"),
    }

    // The owner's session expires: the name is registered again on the new one.
    expire_session(server.addr(), old, &owner.session_password()).unwrap();
    let mut seen = Vec::new();
    loop {
        let e = db.next_timeout(W).await.ok().flatten();
        match e.expect("an event of the name") {
            OwnedNodeEvent::Created { stat } => {
                assert_ne!(stat.ephemeral_owner, old);
                assert_eq!(stat.ephemeral_owner, owner.session_id());
                break;
            }
            e => seen.push(e),
        }
    }
    assert!(
        seen.contains(&OwnedNodeEvent::Lost {
            reason: LostReason::SessionExpired
        }),
        "{NAME}: {seen:?}"
    );
    let (data, stat) = resolve(&reader, dir, "db")
        .await
        .unwrap()
        .expect("registered again");
    assert_eq!(&data[..], b"10.0.0.7:5432");
    assert_eq!(stat.ephemeral_owner, owner.session_id());

    // The watcher follows: the name is owned by the new session in the end.
    loop {
        match next_change(&mut watch).await {
            NodeWatchEvent::Data { stat, .. } if stat.ephemeral_owner == owner.session_id() => {
                break
            }
            NodeWatchEvent::Data { .. } | NodeWatchEvent::Missing { .. } => {}
            e => panic!("{NAME}: {e:?}"),
        }
    }

    // Unregistered.
    within(W, db.delete())
        .await
        .unwrap_or(Err(Error::Timeout))
        .unwrap();
    assert_eq!(resolve(&reader, dir, "db").await.unwrap(), None);
    assert_eq!(
        next_change(&mut watch).await,
        NodeWatchEvent::Missing { gone: true }
    );
    owner.close().await;
    reader.close().await;
}

#[test]
fn persistent_names_and_invalid_names() {
    run(persistent_names_and_invalid_names_on(&server()));
}

#[form]
async fn persistent_names_and_invalid_names_on(server: &TestServer) {
    let dir = "/registry";
    let zk = connect(&server.connect_string()).await;
    let mut cfg = zk
        .register_name(dir, "config", "v1", CreateMode::Persistent)
        .unwrap();
    assert_eq!(created(&mut cfg, W).await.unwrap().ephemeral_owner, 0);
    let got = resolve(&zk, dir, "config").await.unwrap().unwrap();
    assert_eq!(&got.0[..], b"v1");
    within(W, cfg.delete())
        .await
        .unwrap_or(Err(Error::Timeout))
        .unwrap();
    assert_eq!(resolve(&zk, dir, "config").await.unwrap(), None);
    let slash = zk
        .register_name(dir, "a/b", "", CreateMode::Ephemeral)
        .err();
    assert_eq!(
        slash,
        Some(Error::InvalidPath {
            path: "a/b".into(),
            error: PathError::InvalidChar { offset: 1, ch: '/' }
        }),
        "{NAME}"
    );
    let empty = resolve(&zk, dir, "").await;
    assert!(matches!(
        empty,
        Err(Error::InvalidPath {
            error: PathError::Empty,
            ..
        })
    ));
    zk.close().await;
}
