// The delay queue against a real ZooKeeper 3.8, in each form: a producer session puts
// items due at different times (one past, two ahead, in the wrong order); a consumer
// on another session takes them earliest first and none before its time (checked on
// the wall clock both sessions read); a take that waits less than the earliest item's
// delay comes back empty; at least once, a claimed item is completed; nothing is left.

use std::time::{Duration, SystemTime};

#[test]
fn items_are_taken_earliest_first_and_none_before_its_time() {
    run(items_on(&server(), "/dq/a"));
}

#[form]
async fn items_on(s: &zk_recipes_testing::TestServer, dir: &str) {
    let cs = s.connect_string();
    let producer = connect(&cs).await;
    let consumer = connect(&cs).await;
    let mut p = producer.delay_queue(dir);
    let t0 = SystemTime::now();
    let due = [
        ("late", t0 + Duration::from_millis(900)),
        ("past", t0 - Duration::from_secs(60)),
        ("soon", t0 + Duration::from_millis(450)),
    ];
    let names = p.put_many_at(due).await.unwrap();
    assert!(
        names
            .iter()
            .all(|n| n.as_deref().is_some_and(|n| n.starts_with("queue-|"))),
        "{NAME}: {names:?}"
    );
    let mut q = consumer.delay_queue(dir);
    for (want, at) in [due[1], due[2]] {
        let item = q.take().await.unwrap();
        assert!(SystemTime::now() >= at, "{NAME}: {want} taken before its time");
        assert_eq!(&item.data[..], want.as_bytes(), "{NAME}: earliest first");
    }
    // "late" is due about 450 ms from now: a 100 ms take finds nothing due.
    let none = q.take_timeout(Duration::from_millis(100)).await.unwrap();
    assert!(none.is_none(), "{NAME}: {none:?} taken before its time");
    // At least once: claimed when due, then completed.
    let claimed = q.take_claimed().await.unwrap();
    assert!(SystemTime::now() >= due[0].1, "{NAME}: late taken early");
    assert_eq!(&claimed.data()[..], b"late");
    claimed.complete().await.unwrap();
    assert!(consumer.get_children(dir).await.unwrap().is_empty());
    drop(q);
    drop(p);
    consumer.close().await;
    producer.close().await;
}
