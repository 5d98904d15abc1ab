// Queue scenarios against a real ZooKeeper 3.8, in each form: producers and
// consumers in separate sessions, four concurrent consumers, a claiming consumer whose
// session is closed mid-batch, the server restarted mid-run, priority order.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use zk_recipes_testing::TestServer;

/// A client with the queue scenarios' options (6 s session, 5 s call timeout).
#[form]
async fn qconnect(cs: &str) -> zk::Client {
    qconnect_for(cs, Duration::from_secs(6)).await
}

/// A client with the queue scenarios' options and a `session` of its own.
#[form]
async fn qconnect_for(cs: &str, session: Duration) -> zk::Client {
    zk::connect(
        cs,
        zk::Options::default()
            .session_timeout(session)
            .connect_timeout(Duration::from_secs(10))
            .call_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap_or_else(|e| panic!("{NAME}: {e}"))
}

fn items(prefix: &str, n: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| Bytes::from(format!("{prefix}-{i:05}")))
        .collect()
}

#[form]
async fn drain(z: &zk::Client, dir: &str, k: usize) -> Vec<String> {
    let mut q = z.queue(dir);
    let mut got = Vec::new();
    loop {
        let batch = q
            .take_batch_timeout(k, Duration::from_millis(500))
            .await
            .unwrap();
        if batch.is_empty() {
            return got;
        }
        got.extend(
            batch
                .into_iter()
                .map(|i| String::from_utf8(i.data.to_vec()).unwrap()),
        );
    }
}

#[form]
async fn left(z: &zk::Client, dir: &str) -> usize {
    z.get_children(dir)
        .await
        .map(|c| {
            c.iter()
                .filter(|c| c.starts_with("qn-") || c.starts_with("entry-"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn one_consumer_takes_in_order_from_another_session() {
    run(one_consumer_takes_in_order_from_another_session_on(
        &mut server(),
    ));
}

#[form]
async fn one_consumer_takes_in_order_from_another_session_on(s: &mut TestServer) {
    let root = "";
    let dir = format!("{root}/q1");
    let producer = qconnect(&s.connect_string()).await;
    let consumer = qconnect(&s.connect_string()).await;
    let mut q = producer.queue(&dir);
    let names = q.put_many(items("a", 300)).await.unwrap();
    assert_eq!(names.len(), 300);
    assert!(names
        .iter()
        .all(|n| n.as_deref().is_some_and(|n| n.starts_with("qn-"))));
    let got = drain(&consumer, &dir, 64).await;
    assert_eq!(
        got,
        (0..300).map(|i| format!("a-{i:05}")).collect::<Vec<_>>(),
        "{}",
        NAME
    );
    assert_eq!(left(&consumer, &dir).await, 0);
    producer.close().await;
    consumer.close().await;
}

#[test]
fn four_consumers_take_every_item_exactly_once() {
    run(four_consumers_take_every_item_exactly_once_on(&mut server()));
}

#[form]
async fn four_consumers_take_every_item_exactly_once_on(s: &mut TestServer) {
    let root = "";
    let dir = format!("{root}/q4");
    let cs = s.connect_string();
    let producer = qconnect(&cs).await;
    producer
        .queue(&dir)
        .put_many(items("b", 1000))
        .await
        .unwrap();
    let mut handles = Vec::new();
    for _ in 0..4 {
        let cs = cs.clone();
        let dir = dir.clone();
        handles.push(spawn(move || async move {
            let z = qconnect(&cs).await;
            let got = drain(&z, &dir, 32).await;
            z.close().await;
            got
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        // Order across consumers is per listing only (an item passed over because
        // of contention is taken in a later round, possibly after higher ones: see
        // the queue's order guarantee); a lone consumer's strict order is checked
        // by `one_consumer_takes_in_order_from_another_session`.
        all.extend(h.join().await);
    }
    let set: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(set.len(), all.len(), "no duplicate ({})", NAME);
    assert_eq!(set.len(), 1000, "none lost ({})", NAME);
    assert_eq!(left(&producer, &dir).await, 0);
    producer.close().await;
}

#[test]
fn a_claiming_consumer_closed_mid_batch_leaves_its_items_to_another() {
    run(a_claiming_consumer_closed_mid_batch_leaves_its_items_to_another_on(&mut server()));
}

#[form]
async fn a_claiming_consumer_closed_mid_batch_leaves_its_items_to_another_on(s: &mut TestServer) {
    let root = "";
    let dir = format!("{root}/qa");
    let cs = s.connect_string();
    let producer = qconnect(&cs).await;
    producer.queue(&dir).put_many(items("c", 5)).await.unwrap();
    let dying = qconnect(&cs).await;
    let mut dq = dying.queue(&dir);
    let h1 = dq
        .take_claimed_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    let h2 = dq
        .take_claimed_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    let held: BTreeSet<_> = [h1.item().name.clone(), h2.item().name.clone()].into();
    // Another consumer cannot take what is claimed...
    let other = qconnect(&cs).await;
    let mut oq = other.queue(&dir);
    let first = oq
        .take_claimed_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert!(!held.contains(&first.item().name));
    first.complete().await.unwrap();
    // ... until the session holding the claims is closed mid-batch.
    std::mem::forget(h1);
    std::mem::forget(h2);
    dying.close().await;
    let mut done = BTreeSet::new();
    while let Some(h) = oq
        .take_claimed_timeout(Duration::from_secs(2))
        .await
        .unwrap()
    {
        done.insert(String::from_utf8(h.data().to_vec()).unwrap());
        h.complete().await.unwrap();
    }
    assert_eq!(done.len(), 4, "{}", NAME);
    assert_eq!(left(&producer, &dir).await, 0);
    producer.close().await;
    other.close().await;
}

/// The session outlives the restart, so every put and take must succeed and all 400
/// items come out exactly once. A 30 s session: under heavy load a restart (SIGTERM, a
/// new JVM, ready) can outlast the scenarios' usual 6 s, and then the clients expire the
/// session by their estimate and a put on the wire ends in doubt — the next test's case,
/// a documented `ConnectionLoss`, which made this one flaky when it unwrapped every put.
#[test]
fn the_server_restarted_mid_run_loses_and_doubles_nothing() {
    run(the_server_restarted_mid_run_loses_and_doubles_nothing_on(
        &mut own_server(),
        Duration::from_secs(30),
        Duration::ZERO,
    ));
}

/// The server stays down longer than the 6 s session: the clients expire it by their
/// estimate and start new ones, so a put or a take on the wire then is in doubt and
/// fails with `ConnectionLoss` (docs/recipes.md, "Queues"): never a duplicate, every
/// put answered `Ok` is in the queue (but for what a take in doubt deleted). Slow
/// (~15 s): `-- --ignored`.
#[test]
#[ignore = "slow (~15 s): a restart longer than the session; run with --ignored"]
fn a_restart_longer_than_the_session_answers_in_doubt_and_doubles_nothing() {
    run(the_server_restarted_mid_run_loses_and_doubles_nothing_on(
        &mut own_server(),
        Duration::from_secs(6),
        Duration::from_secs(7),
    ));
}

/// Producer and consumer run while the server restarts (down for `down` at least);
/// sessions of `session`. What may go wrong is only what the queue documents: a put or
/// a take whose request was on the wire when its session ended fails with an error that
/// says it may have applied — and only if that client's session did end (its id
/// changed). Whatever the calls answered: nothing is taken twice, nothing taken that
/// was not put, every put answered `Ok` is taken unless a take in doubt deleted it.
#[form]
async fn the_server_restarted_mid_run_loses_and_doubles_nothing_on(
    s: &mut TestServer,
    session: Duration,
    down: Duration,
) {
    let root = "";
    let dir = format!("{root}/qr");
    let cs = s.connect_string();
    let producer = qconnect_for(&cs, session).await;
    let consumer = qconnect_for(&cs, session).await;
    let p = {
        let producer = producer.clone();
        let dir = dir.clone();
        spawn(move || async move {
            let first = producer.session_id();
            let mut q = producer.queue(&dir);
            let (mut ok, mut doubt, mut errors) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..20 {
                let these = items(&format!("r{round:02}"), 20);
                let text = these.iter().map(|i| String::from_utf8(i.to_vec()).unwrap());
                match q.put_many(these.clone()).await {
                    Ok(_) => ok.extend(text),
                    Err(e) => {
                        doubt.extend(text);
                        errors.push(e);
                    }
                }
                sleep(Duration::from_millis(20)).await;
            }
            (ok, doubt, errors, producer.session_id() != first)
        })
    };
    let c = {
        let dir = dir.clone();
        spawn(move || async move {
            let first = consumer.session_id();
            let mut q = consumer.queue(&dir);
            let (mut got, mut errors) = (Vec::new(), Vec::new());
            let mut idle = 0;
            while idle < 6 {
                let b = match q.take_batch_timeout(16, Duration::from_millis(500)).await {
                    Ok(b) => b,
                    Err(e) => {
                        errors.push(e);
                        continue;
                    }
                };
                if b.is_empty() {
                    idle += 1;
                } else {
                    idle = 0;
                }
                got.extend(
                    b.into_iter()
                        .map(|i| String::from_utf8(i.data.to_vec()).unwrap()),
                );
            }
            let renewed = consumer.session_id() != first;
            consumer.close().await;
            (got, errors, renewed)
        })
    };
    sleep(Duration::from_millis(150)).await;
    let stopped = std::time::Instant::now();
    if down > Duration::ZERO {
        s.stop().unwrap();
        sleep(down).await;
    }
    s.restart().unwrap();
    let restart = stopped.elapsed();
    let (ok, doubt, put_errors, producer_renewed) = p.join().await;
    let (got, take_errors, consumer_renewed) = c.join().await;
    let rest = drain(&producer, &dir, 64).await;
    let what = format!(
        "{NAME}: server back after {restart:?}, puts failed {put_errors:?} (session renewed: {producer_renewed}), \
         takes failed {take_errors:?} (session renewed: {consumer_renewed}), \
         {} taken, {} late",
        got.len(),
        rest.len()
    );
    // Only a session's end puts a call in doubt, and then it says so.
    for (errors, renewed) in [(&put_errors, producer_renewed), (&take_errors, consumer_renewed)] {
        assert!(errors.is_empty() || renewed, "{what}");
        assert!(errors.iter().all(|e| e.may_have_applied()), "{what}");
    }
    let all: Vec<_> = got.iter().chain(&rest).cloned().collect();
    let set: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(set.len(), all.len(), "no duplicate ({what})");
    let put: BTreeSet<_> = ok.iter().chain(&doubt).cloned().collect();
    assert!(set.is_subset(&put), "nothing taken that was not put ({what})");
    // A take in doubt deleted up to 16 items nobody received (at most once).
    let missing = ok.iter().filter(|i| !set.contains(*i)).count();
    assert!(missing <= 16 * take_errors.len(), "none lost ({what})");
    if put_errors.is_empty() && take_errors.is_empty() {
        assert_eq!(set.len(), 400, "none lost ({what})");
    }
    if down >= session {
        // The scenario reaches what it is about: the producer's session ended under its
        // puts (the consumer, idle while the server is down, may have stopped before).
        assert!(producer_renewed, "{what}");
    }
    producer.close().await;
}

#[test]
fn priority_items_come_lowest_value_first() {
    run(priority_items_come_lowest_value_first_on(&mut server()));
}

#[form]
async fn priority_items_come_lowest_value_first_on(s: &mut TestServer) {
    let root = "";
    let dir = format!("{root}/qp");
    let z = qconnect(&s.connect_string()).await;
    let mut q = z.priority_queue(&dir);
    for (d, p) in [("low", 500u16), ("high", 1), ("mid", 100)] {
        let name = q.put_priority(Bytes::from(d), p).await.unwrap().unwrap();
        assert!(name.starts_with(&format!("entry-{p:03}-")), "{name}");
    }
    let mut got = Vec::new();
    for _ in 0..3 {
        let mut one = q
            .take_batch_timeout(1, Duration::from_secs(5))
            .await
            .unwrap();
        got.push(one.remove(0).data);
    }
    assert_eq!(
        got,
        [Bytes::from("high"), Bytes::from("mid"), Bytes::from("low")]
    );
    z.close().await;
}
