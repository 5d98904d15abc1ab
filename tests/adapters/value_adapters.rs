// Compare-and-set updates and shared counters against a real ZooKeeper 3.8, in each
// form: 4 adders (tasks or threads) each add 1 a hundred times to one counter (I32 and
// I64): the node ends at exactly 400 and every add saw its own value; an update that
// loses a race to another writer runs its function again on the other writer's value;
// adds across a killed and restarted server (none lost, none counted twice); and a
// watched counter (`watch_counter`) followed by two watches at once sees the same
// values.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use zk::CounterFormat;
use zk_recipes::recipe::value::counter_value;
use zk_recipes_testing::TestServer;

const ADDS: i64 = 100;

#[form]
async fn client(cs: &str) -> zk::Client {
    zk::connect(
        cs,
        zk::Options::default().connect_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap_or_else(|e| panic!("{NAME} client: {e}"))
}

#[form]
async fn four_adders(server: &TestServer, format: CounterFormat, path: &str) {
    let cs = server.connect_string();
    let (t, b) = (client(&cs).await, client(&cs).await);
    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for zk in [&t, &t, &b, &b] {
        let mut c = zk.counter(path, format).unwrap();
        tasks.push(spawn(move || async move {
            let mut seen = Vec::new();
            for _ in 0..ADDS {
                seen.push(c.add(1).await.expect("add"));
            }
            seen
        }));
    }
    let mut all = BTreeSet::new();
    for task in tasks {
        for v in task.join().await {
            assert!(all.insert(v), "{NAME}: value {v} reported twice");
        }
    }
    println!(
        "{NAME} {format:?}: {} contended adds in {:?}",
        4 * ADDS,
        started.elapsed()
    );
    // Every add saw its own value: 1..=400, each once.
    assert_eq!(all, (1..=4 * ADDS).collect::<BTreeSet<_>>(), "{NAME}");
    let (data, _) = b.get_data(path).await.unwrap();
    assert_eq!(data.len(), format.width());
    assert_eq!(counter_value(&data, format), Ok(4 * ADDS));
    let mut reader = t.counter(path, format).unwrap();
    assert_eq!(reader.get().await, Ok(4 * ADDS));
}

#[test]
fn four_adders_i32_reach_exactly_400() {
    run(four_adders(
        &server(),
        CounterFormat::I32,
        "/counters/shared/i32",
    ));
}

#[test]
fn four_adders_i64_reach_exactly_400() {
    run(four_adders(
        &server(),
        CounterFormat::I64,
        "/counters/atomic/i64",
    ));
}

#[test]
fn update_reruns_after_a_concurrent_writer() {
    run(update_reruns_after_a_concurrent_writer_on(&server()));
}

#[form]
async fn update_reruns_after_a_concurrent_writer_on(server: &TestServer) {
    let cs = server.connect_string();
    let t = client(&cs).await;
    // The other writer writes from inside the update's (synchronous) function: a plain
    // blocking client, whichever form updates.
    let other = zk_recipes_blocking::connect(&cs, options()).unwrap();

    t.create("/cfg", "", &zk::CreateOptions::default())
        .await
        .unwrap();
    // We update; the other client writes in between (inside the first call).
    let calls = Arc::new(AtomicU32::new(0));
    let (c2, o2) = (calls.clone(), other.clone());
    let stat = t
        .update("/cfg/a", move |old| {
            if c2.fetch_add(1, Ordering::SeqCst) == 0 {
                assert_eq!(old, None);
                o2.create("/cfg/a", "other", &zk::CreateOptions::default())
                    .unwrap();
            }
            let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
            v.extend_from_slice(b"+t");
            Some(Bytes::from(v))
        })
        .await
        .unwrap()
        .expect("written");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "{NAME}: the function ran again"
    );
    let (data, s) = t.get_data("/cfg/a").await.unwrap();
    assert_eq!(&data[..], b"other+t");
    assert_eq!(s.version, stat.version);

    // Again, on an existing node: the other client overwrites it in between.
    let calls = Arc::new(AtomicU32::new(0));
    let (c2, o2) = (calls.clone(), other.clone());
    let stat = t
        .update("/cfg/a", move |old| {
            if c2.fetch_add(1, Ordering::SeqCst) == 0 {
                o2.set_data("/cfg/a", "again", None).unwrap();
            }
            let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
            v.extend_from_slice(b"+b");
            Some(Bytes::from(v))
        })
        .await
        .unwrap()
        .expect("written");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "{NAME}");
    let (data, s) = other.get_data("/cfg/a").unwrap();
    assert_eq!(&data[..], b"again+b");
    assert_eq!(s.version, stat.version);

    // Keep: nothing written.
    assert_eq!(t.update("/cfg/a", |_| None).await, Ok(None));
    let (data, _) = t.get_data("/cfg/a").await.unwrap();
    assert_eq!(&data[..], b"again+b");

    // A malformed counter fails clearly and writes nothing.
    let mut c = t.counter("/cfg/a", CounterFormat::I32).unwrap();
    assert_eq!(
        c.add(1).await,
        Err(zk::Error::BadCounter {
            expected: 4,
            found: 7
        })
    );
    let (data, _) = t.get_data("/cfg/a").await.unwrap();
    assert_eq!(&data[..], b"again+b");
}

/// Adds from two sessions while the server is killed and restarted: every add either
/// reports its own value or fails; the node ends between the adds reported and those
/// plus the ones whose error says `may_have_applied` (none lost, none counted twice).
#[test]
fn counter_across_a_server_restart() {
    let mut server = own_server();
    run(counter_across_a_server_restart_on(&mut server));
}

type Outcome = (Vec<i64>, usize, usize); // values, in doubt, not applied

fn tally(r: Result<i64, zk::Error>, o: &mut Outcome) {
    match r {
        Ok(v) => o.0.push(v),
        Err(e) if e.may_have_applied() => o.1 += 1,
        Err(_) => o.2 += 1,
    }
}

#[form]
async fn counter_across_a_server_restart_on(server: &mut TestServer) {
    use std::sync::atomic::AtomicUsize;
    let cs = server.connect_string();
    let (t, b) = (client(&cs).await, client(&cs).await);
    let path = "/counters/restart";
    let format = CounterFormat::I64;
    let done = Arc::new(AtomicUsize::new(0));
    let mut adders = Vec::new();
    for zk in [&t, &b] {
        let mut c = zk.counter(path, format).unwrap();
        let d = done.clone();
        adders.push(spawn(move || async move {
            let mut o: Outcome = Default::default();
            for _ in 0..ADDS {
                tally(c.add(1).await, &mut o);
                d.fetch_add(1, Ordering::SeqCst);
            }
            o
        }));
    }
    while done.load(Ordering::SeqCst) < 40 {
        sleep(Duration::from_millis(1)).await;
    }
    // SIGKILL: replies in flight are lost. Counted at the kill: the clients may
    // reconnect and finish before `restart()` has seen the server answer its probes.
    server.kill().unwrap();
    let restarted_at = done.load(Ordering::SeqCst);
    server.restart().unwrap();
    let mut outcomes = Vec::new();
    for a in adders {
        outcomes.push(a.join().await);
    }
    let (a, z) = (&outcomes[0], &outcomes[1]);
    let ok = a.0.len() + z.0.len();
    let doubt = a.1 + z.1;
    let mut values: Vec<i64> = a.0.iter().chain(&z.0).copied().collect();
    values.sort();
    values.dedup();
    assert_eq!(values.len(), ok, "{NAME}: a value reported twice");
    let (data, _) = b.get_data(path).await.unwrap();
    let v = counter_value(&data, format).unwrap();
    println!(
        "{NAME}: restart after {restarted_at} adds: {ok} added, {doubt} in doubt, {} not applied; node {v}",
        a.2 + z.2
    );
    assert!(
        restarted_at < 2 * ADDS as usize,
        "{NAME}: the restart came after the adds"
    );
    assert!(
        v >= ok as i64 && v <= (ok + doubt) as i64,
        "{NAME}: node {v}, {ok} added, {doubt} in doubt"
    );
}

/// Waits (10 s at most) for the next change a counter watch reports, as `changed()`
/// would (the core's `CounterWatchEvent::change`).
#[form]
async fn change(w: &mut zk::CounterWatchHandle) -> Result<i64, zk::Error> {
    loop {
        let e = w
            .next_timeout(Duration::from_secs(10))
            .await
            .expect("no change within 10 s")
            .expect("the watch ended");
        if let Some(r) = e.change() {
            return r;
        }
    }
}

/// The next change of both watches, which must agree.
#[form]
async fn both(
    tw: &mut zk::CounterWatchHandle,
    bw: &mut zk::CounterWatchHandle,
) -> Result<i64, zk::Error> {
    let a = change(tw).await;
    let z = change(bw).await;
    assert_eq!(a, z, "{NAME}: the watches disagree");
    a
}

/// One scripted scenario, two watches on two sessions following the same counter at
/// once: each write is made only after both watches reported the previous one, so every
/// version is seen. Expected: the initial missing node as 0, each write's value, a
/// malformed node as `BadCounter` with the watch going on, empty data and a deleted
/// node as 0, a re-created node followed. Then 4 concurrent adders (200 adds): both
/// watches see strictly increasing values ending at the total.
#[form]
async fn counter_watch_scenario(server: &TestServer, format: CounterFormat, path: &str) {
    let cs = server.connect_string();
    let (t, b, writer) = (client(&cs).await, client(&cs).await, client(&cs).await);
    let mut tw = t.watch_counter(path, format).unwrap();
    let mut bw = b.watch_counter(path, format).unwrap();
    let bad = |found| {
        Err(zk::Error::BadCounter {
            expected: format.width(),
            found,
        })
    };
    let opts = zk::CreateOptions::default();

    assert_eq!(
        both(&mut tw, &mut bw).await,
        Ok(0),
        "a missing node counts as 0"
    );
    let parent = &path[..path.rfind('/').unwrap()];
    writer.create(parent, "", &opts).await.unwrap();
    writer.create(path, format.encode(5), &opts).await.unwrap();
    assert_eq!(both(&mut tw, &mut bw).await, Ok(5));
    let mut c = writer.counter(path, format).unwrap();
    assert_eq!(c.add(-7).await, Ok(-2));
    assert_eq!(
        both(&mut tw, &mut bw).await,
        Ok(-2),
        "negative values decode"
    );
    writer.set_data(path, "abc", None).await.unwrap();
    assert_eq!(
        both(&mut tw, &mut bw).await,
        bad(3),
        "malformed: reported, not guessed"
    );
    assert_eq!(tw.value().await.unwrap(), Some(bad(3)));
    assert_eq!(bw.value().await.unwrap(), Some(bad(3)));
    writer
        .set_data(path, format.encode(42), None)
        .await
        .unwrap();
    assert_eq!(
        both(&mut tw, &mut bw).await,
        Ok(42),
        "the watch goes on after a bad value"
    );
    writer
        .set_data(path, format.encode(42), None)
        .await
        .unwrap();
    assert_eq!(
        both(&mut tw, &mut bw).await,
        Ok(42),
        "a new version of the same value"
    );
    writer.set_data(path, "", None).await.unwrap();
    assert_eq!(
        both(&mut tw, &mut bw).await,
        Ok(0),
        "empty data counts as 0"
    );
    writer.set_data(path, format.encode(9), None).await.unwrap();
    assert_eq!(both(&mut tw, &mut bw).await, Ok(9));
    writer.delete(path, None).await.unwrap();
    assert_eq!(
        both(&mut tw, &mut bw).await,
        Ok(0),
        "a deleted node counts as 0"
    );
    writer.create(path, format.encode(11), &opts).await.unwrap();
    assert_eq!(
        both(&mut tw, &mut bw).await,
        Ok(11),
        "a re-created node is followed"
    );
    assert_eq!(tw.value().await.unwrap(), Some(Ok(11)));
    assert_eq!(bw.value().await.unwrap(), Some(Ok(11)));
    assert!(tw.try_next().is_none() && bw.try_next().is_none());

    // Concurrent adders: notifications may coalesce writes, never reorder them.
    const EACH: i64 = 50;
    let mut adders = Vec::new();
    for _ in 0..4 {
        let mut c = writer.counter(path, format).unwrap();
        adders.push(spawn(move || async move {
            for _ in 0..EACH {
                c.add(1).await.expect("add");
            }
        }));
    }
    let total = 11 + 4 * EACH;
    let follow_t = spawn(move || async move {
        let mut seen = vec![11];
        while *seen.last().unwrap() < total {
            seen.push(change(&mut tw).await.expect("a value"));
        }
        seen
    });
    let mut seen_b = vec![11];
    while *seen_b.last().unwrap() < total {
        seen_b.push(change(&mut bw).await.expect("a value"));
    }
    for a in adders {
        a.join().await;
    }
    let seen_t = follow_t.join().await;
    for (name, seen) in [("first", &seen_t), ("second", &seen_b)] {
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "{NAME} {name}: values went back: {seen:?}"
        );
        assert_eq!(*seen.last().unwrap(), total, "{NAME} {name}");
        println!(
            "{format:?} {NAME} {name}: {} changes seen for {} adds",
            seen.len() - 1,
            4 * EACH
        );
    }
}

#[test]
fn counter_watch_follows_every_version() {
    run(counter_watch_scenario(
        &server(),
        CounterFormat::I32,
        "/watched/i32",
    ));
    run(counter_watch_scenario(
        &server(),
        CounterFormat::I64,
        "/watched/i64",
    ));
}
