//! Dropping a future (a timeout, a `select!`) leaves nothing behind: the recipe it
//! started is abandoned and its nodes deleted. Against a real ZooKeeper 3.8.

use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Client, Options};

async fn client(server: &TestServer) -> Client {
    connect(&server.connect_string(), Options::default())
        .await
        .unwrap()
}

/// Waits until `dir` has `n` children (20 s at most).
async fn children_become(zk: &Client, dir: &str, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let c = zk.get_children(dir).await.unwrap_or_default();
        if c.len() == n || tokio::time::Instant::now() > deadline {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_double_barrier_enter_leaves_no_participant() {
    let server = TestServer::start().unwrap();
    let a = client(&server).await;
    let b = client(&server).await;
    let mut mine = a.double_barrier("/db-cancel", 2);
    // Two are needed; we are alone: the enter waits, and the caller gives up.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), mine.enter())
            .await
            .is_err()
    );
    assert_eq!(
        children_become(&b, "/db-cancel", 0).await,
        Vec::<String>::new(),
        "the cancelled participant's node stays and would count as entered"
    );
    // Another participant alone is not let in by the cancelled one.
    let mut other = b.double_barrier("/db-cancel", 2);
    assert!(!other
        .enter_timeout(Duration::from_millis(500))
        .await
        .unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_take_loses_no_item() {
    let server = TestServer::start().unwrap();
    let a = client(&server).await;
    let b = client(&server).await;
    let mut q = a.queue("/q-cancel");
    // The queue is empty: the take waits, and the caller gives up.
    assert!(tokio::time::timeout(Duration::from_millis(300), q.take())
        .await
        .is_err());
    let mut producer = b.queue("/q-cancel");
    producer.put("item-1").await.unwrap();
    producer.put("item-2").await.unwrap();
    let first = q.take_timeout(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        first.map(|i| i.data),
        Some(bytes::Bytes::from_static(b"item-1")),
        "the cancelled take took item-1 and nobody got it"
    );
    let second = q.take_timeout(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        second.map(|i| i.data),
        Some(bytes::Bytes::from_static(b"item-2"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_counter_call_does_not_shift_the_next_answers() {
    let server = TestServer::start().unwrap();
    let a = client(&server).await;
    let mut c = a
        .counter("/counter-cancel", zk_recipes_tokio::CounterFormat::I64)
        .unwrap();
    assert_eq!(c.add(1).await.unwrap(), 1);
    // Polled once (the addition is sent), then dropped before its answer: it is
    // applied all the same, and its answer must not become the next call's.
    tokio::select! {
        biased;
        _ = c.add(10) => panic!("answered at its first poll"),
        _ = std::future::ready(()) => {}
    }
    assert_eq!(
        c.add(100).await.unwrap(),
        111,
        "the next call got the cancelled call's answer"
    );
    assert_eq!(c.get().await.unwrap(), 111);
}
