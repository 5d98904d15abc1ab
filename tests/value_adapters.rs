//! Compare-and-set updates and shared counters against a real ZooKeeper 3.8 through both
//! adapters at once: 2 tokio tasks and 2 blocking threads each add 1 a hundred times to
//! one counter (I32 and I64): the node ends at exactly 400 and every add saw its own
//! value; and an update that loses a race to another writer runs its function again on
//! the other writer's value; and adds through both adapters across a killed and
//! restarted server (none lost, none counted twice); and a watched counter
//! (`watch_counter`) followed through both adapters at once sees the same values.
#![allow(clippy::disallowed_methods)]

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use support::runtime;
use zk_recipes::recipe::value::counter_value;
use zk_recipes_testing::TestServer;

use zk_recipes_blocking as zb;
use zk_recipes_tokio as zt;

const ADDS: i64 = 100;

fn server() -> TestServer {
    TestServer::start().expect("a real ZooKeeper")
}

fn blocking(cs: &str) -> zb::Client {
    zb::connect(
        cs,
        zb::Options::default().connect_timeout(Duration::from_secs(10)),
    )
    .expect("blocking client")
}

fn tokio_client(cs: &str) -> zt::Client {
    runtime()
        .block_on(zt::connect(
            cs,
            zt::Options::default().connect_timeout(Duration::from_secs(10)),
        ))
        .expect("tokio client")
}

fn four_adders(format: zt::CounterFormat, path: &str) {
    let server = server();
    let cs = server.connect_string();
    let t = tokio_client(&cs);
    let b = blocking(&cs);
    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let mut c = t.counter(path, format).unwrap();
        tasks.push(runtime().spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..ADDS {
                seen.push(c.add(1).await.expect("add (tokio)"));
            }
            seen
        }));
    }
    let mut threads = Vec::new();
    for _ in 0..2 {
        let mut c = b.counter(path, format).unwrap();
        threads.push(std::thread::spawn(move || {
            (0..ADDS)
                .map(|_| c.add(1).expect("add (blocking)"))
                .collect::<Vec<_>>()
        }));
    }
    let mut all = BTreeSet::new();
    for task in tasks {
        for v in runtime().block_on(task).unwrap() {
            assert!(all.insert(v), "value {v} reported twice");
        }
    }
    for th in threads {
        for v in th.join().unwrap() {
            assert!(all.insert(v), "value {v} reported twice");
        }
    }
    println!(
        "{format:?}: {} contended adds in {:?}",
        4 * ADDS,
        started.elapsed()
    );
    // Every add saw its own value: 1..=400, each once.
    assert_eq!(all, (1..=4 * ADDS).collect::<BTreeSet<_>>());
    let (data, _) = b.get_data(path).unwrap();
    assert_eq!(data.len(), format.width());
    assert_eq!(counter_value(&data, format), Ok(4 * ADDS));
    let mut reader = t.counter(path, format).unwrap();
    assert_eq!(runtime().block_on(reader.get()), Ok(4 * ADDS));
    let mut reader = b.counter(path, format).unwrap();
    assert_eq!(reader.get(), Ok(4 * ADDS));
}

#[test]
fn four_adders_i32_reach_exactly_400() {
    four_adders(zt::CounterFormat::I32, "/counters/shared/i32");
}

#[test]
fn four_adders_i64_reach_exactly_400() {
    four_adders(zt::CounterFormat::I64, "/counters/atomic/i64");
}

#[test]
fn update_reruns_after_a_concurrent_writer() {
    let server = server();
    let cs = server.connect_string();
    let t = tokio_client(&cs);
    let b = blocking(&cs);

    b.create("/cfg", "", &zb::CreateOptions::default()).unwrap();
    // tokio updates; the blocking client writes in between (inside the first call).
    let calls = Arc::new(AtomicU32::new(0));
    let (c2, b2) = (calls.clone(), b.clone());
    let stat = runtime()
        .block_on(async {
            t.update("/cfg/a", move |old| {
                if c2.fetch_add(1, Ordering::SeqCst) == 0 {
                    assert_eq!(old, None);
                    b2.create("/cfg/a", "other", &zb::CreateOptions::default())
                        .unwrap();
                }
                let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
                v.extend_from_slice(b"+t");
                Some(Bytes::from(v))
            })
            .await
        })
        .unwrap()
        .expect("written");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the function ran again");
    let (data, s) = b.get_data("/cfg/a").unwrap();
    assert_eq!(&data[..], b"other+t");
    assert_eq!(s.version, stat.version);

    // blocking updates; the tokio client writes in between.
    let calls = AtomicU32::new(0);
    let stat = b
        .update("/cfg/a", |old| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                runtime()
                    .block_on(t.set_data("/cfg/a", "again", None))
                    .unwrap();
            }
            let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
            v.extend_from_slice(b"+b");
            Some(Bytes::from(v))
        })
        .unwrap()
        .expect("written");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let (data, s) = runtime().block_on(t.get_data("/cfg/a")).unwrap();
    assert_eq!(&data[..], b"again+b");
    assert_eq!(s.version, stat.version);

    // Keep: nothing written.
    assert_eq!(b.update("/cfg/a", |_| None), Ok(None));
    assert_eq!(runtime().block_on(t.update("/cfg/a", |_| None)), Ok(None));
    let (data, _) = b.get_data("/cfg/a").unwrap();
    assert_eq!(&data[..], b"again+b");

    // A malformed counter fails clearly and writes nothing.
    let mut c = b.counter("/cfg/a", zt::CounterFormat::I32).unwrap();
    assert_eq!(
        c.add(1),
        Err(zb::Error::BadCounter {
            expected: 4,
            found: 7
        })
    );
    let (data, _) = b.get_data("/cfg/a").unwrap();
    assert_eq!(&data[..], b"again+b");
}

/// Adds through both adapters while the server is killed and restarted: every add either reports its
/// own value or fails; the node ends between the adds reported and those plus the ones
/// whose error says `may_have_applied` (none lost, none counted twice).
#[test]
fn counter_across_a_server_restart() {
    use std::sync::atomic::AtomicUsize;
    let mut server = server();
    let cs = server.connect_string();
    let t = tokio_client(&cs);
    let b = blocking(&cs);
    let path = "/counters/restart";
    let format = zt::CounterFormat::I64;
    let done = Arc::new(AtomicUsize::new(0));
    type Outcome = (Vec<i64>, usize, usize); // values, in doubt, not applied
    let tally = |r: Result<i64, zt::Error>, o: &mut Outcome| match r {
        Ok(v) => o.0.push(v),
        Err(e) if e.may_have_applied() => o.1 += 1,
        Err(_) => o.2 += 1,
    };
    let mut c = t.counter(path, format).unwrap();
    let d = done.clone();
    let task = runtime().spawn(async move {
        let mut o: Outcome = Default::default();
        for _ in 0..ADDS {
            tally(c.add(1).await, &mut o);
            d.fetch_add(1, Ordering::SeqCst);
        }
        o
    });
    let mut c = b.counter(path, format).unwrap();
    let d = done.clone();
    let thread = std::thread::spawn(move || {
        let mut o: Outcome = Default::default();
        for _ in 0..ADDS {
            tally(c.add(1), &mut o);
            d.fetch_add(1, Ordering::SeqCst);
        }
        o
    });
    while done.load(Ordering::SeqCst) < 40 {
        std::thread::sleep(Duration::from_millis(1));
    }
    // SIGKILL: replies in flight are lost. Counted at the kill: the clients may
    // reconnect and finish before `restart()` has seen the server answer its probes.
    server.kill().unwrap();
    let restarted_at = done.load(Ordering::SeqCst);
    server.restart().unwrap();
    let a = runtime().block_on(task).unwrap();
    let z = thread.join().unwrap();
    let ok = a.0.len() + z.0.len();
    let doubt = a.1 + z.1;
    let mut values: Vec<i64> = a.0.iter().chain(&z.0).copied().collect();
    values.sort();
    values.dedup();
    assert_eq!(values.len(), ok, "a value reported twice");
    let (data, _) = b.get_data(path).unwrap();
    let v = counter_value(&data, format).unwrap();
    println!(
        "restart after {restarted_at} adds: {ok} added, {doubt} in doubt, {} not applied; node {v}",
        a.2 + z.2
    );
    assert!(
        restarted_at < 2 * ADDS as usize,
        "the restart came after the adds"
    );
    assert!(
        v >= ok as i64 && v <= (ok + doubt) as i64,
        "node {v}, {ok} added, {doubt} in doubt"
    );
}

/// Waits (10 s at most) for the next change a tokio counter watch reports.
fn tokio_change(w: &mut zt::CounterWatchHandle) -> Result<i64, zt::Error> {
    runtime()
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), w.changed()).await })
        .expect("tokio watch: no change within 10 s")
}

/// Waits (10 s at most) for the next change a blocking counter watch reports, as
/// `changed()` would (the core's `CounterWatchEvent::change`).
fn blocking_change(w: &mut zb::CounterWatchHandle) -> Result<i64, zb::Error> {
    loop {
        let e = w
            .next_timeout(Duration::from_secs(10))
            .expect("blocking watch: no change within 10 s")
            .expect("the watch ended");
        if let Some(r) = e.change() {
            return r;
        }
    }
}

/// One scripted scenario, both adapters watching the same counter at once: each write
/// is made only after both watches reported the previous one, so every version is
/// seen. Expected: the initial missing node as 0, each write's value, a malformed node
/// as `BadCounter` with the watch going on, empty data and a deleted node as 0, a
/// re-created node followed. Then 4 concurrent adders (200 adds): both watches see
/// strictly increasing values ending at the total.
fn counter_watch_scenario(format: zt::CounterFormat, path: &str) {
    let server = server();
    let cs = server.connect_string();
    let t = tokio_client(&cs);
    let b = blocking(&cs);
    let writer = blocking(&cs);
    let mut tw = t.watch_counter(path, format).unwrap();
    let mut bw = b.watch_counter(path, format).unwrap();
    let both = |tw: &mut zt::CounterWatchHandle, bw: &mut zb::CounterWatchHandle| {
        let a = tokio_change(tw);
        let z = blocking_change(bw);
        assert_eq!(a, z, "the adapters disagree");
        a
    };
    let bad = |found| {
        Err(zb::Error::BadCounter {
            expected: format.width(),
            found,
        })
    };
    let opts = zb::CreateOptions::default();

    assert_eq!(both(&mut tw, &mut bw), Ok(0), "a missing node counts as 0");
    let parent = &path[..path.rfind('/').unwrap()];
    writer.create(parent, "", &opts).unwrap();
    writer.create(path, format.encode(5), &opts).unwrap();
    assert_eq!(both(&mut tw, &mut bw), Ok(5));
    let mut c = writer.counter(path, format).unwrap();
    assert_eq!(c.add(-7), Ok(-2));
    assert_eq!(both(&mut tw, &mut bw), Ok(-2), "negative values decode");
    writer.set_data(path, "abc", None).unwrap();
    assert_eq!(
        both(&mut tw, &mut bw),
        bad(3),
        "malformed: reported, not guessed"
    );
    assert_eq!(runtime().block_on(tw.value()).unwrap(), Some(bad(3)));
    assert_eq!(bw.value().unwrap(), Some(bad(3)));
    writer.set_data(path, format.encode(42), None).unwrap();
    assert_eq!(
        both(&mut tw, &mut bw),
        Ok(42),
        "the watch goes on after a bad value"
    );
    writer.set_data(path, format.encode(42), None).unwrap();
    assert_eq!(
        both(&mut tw, &mut bw),
        Ok(42),
        "a new version of the same value"
    );
    writer.set_data(path, "", None).unwrap();
    assert_eq!(both(&mut tw, &mut bw), Ok(0), "empty data counts as 0");
    writer.set_data(path, format.encode(9), None).unwrap();
    assert_eq!(both(&mut tw, &mut bw), Ok(9));
    writer.delete(path, None).unwrap();
    assert_eq!(both(&mut tw, &mut bw), Ok(0), "a deleted node counts as 0");
    writer.create(path, format.encode(11), &opts).unwrap();
    assert_eq!(
        both(&mut tw, &mut bw),
        Ok(11),
        "a re-created node is followed"
    );
    assert_eq!(runtime().block_on(tw.value()).unwrap(), Some(Ok(11)));
    assert_eq!(bw.value().unwrap(), Some(Ok(11)));
    assert!(tw.try_next().is_none() && bw.try_next().is_none());

    // Concurrent adders: notifications may coalesce writes, never reorder them.
    const EACH: i64 = 50;
    let adders: Vec<_> = (0..4)
        .map(|_| {
            let mut c = writer.counter(path, format).unwrap();
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    c.add(1).expect("add");
                }
            })
        })
        .collect();
    let total = 11 + 4 * EACH;
    let follow_tokio = std::thread::spawn(move || {
        let mut seen = vec![11];
        while *seen.last().unwrap() < total {
            seen.push(tokio_change(&mut tw).expect("a value"));
        }
        seen
    });
    let mut seen_b = vec![11];
    while *seen_b.last().unwrap() < total {
        seen_b.push(blocking_change(&mut bw).expect("a value"));
    }
    for a in adders {
        a.join().unwrap();
    }
    let seen_t = follow_tokio.join().unwrap();
    for (name, seen) in [("tokio", &seen_t), ("blocking", &seen_b)] {
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "{name}: values went back: {seen:?}"
        );
        assert_eq!(*seen.last().unwrap(), total, "{name}");
        println!(
            "{format:?} {name}: {} changes seen for {} adds",
            seen.len() - 1,
            4 * EACH
        );
    }
}

#[test]
fn counter_watch_through_both_adapters() {
    counter_watch_scenario(zt::CounterFormat::I32, "/watched/i32");
    counter_watch_scenario(zt::CounterFormat::I64, "/watched/i64");
}
