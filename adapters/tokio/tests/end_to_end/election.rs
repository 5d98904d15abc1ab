//! Leader election through the tokio adapter against a real ZooKeeper.

use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, ElectionEvent, ObserverEvent, Options};

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_then_the_next_acknowledged_and_observed() {
    let server = TestServer::start().unwrap();
    let cs = server.connect_string();
    let a = connect(&cs, Options::default()).await.unwrap();
    let b = connect(&cs, Options::default()).await.unwrap();
    let watcher = connect(&cs, Options::default()).await.unwrap();
    let mut observer = watcher.election_observer("/app/election").await.unwrap();

    let mut first = a.election("/app/election", "a").join().await.unwrap();
    let t1 = within(first.elected()).await.unwrap();
    let mut second = b.election("/app/election", "b").join().await.unwrap();
    assert!(!second.is_leader());

    let seen = within(observer.wait_for(|e| matches!(e, ObserverEvent::Leader(Some(_))))).await;
    let Some(ObserverEvent::Leader(Some(leader))) = seen else {
        panic!("{seen:?}")
    };
    assert_eq!((leader.id.as_str(), leader.fencing_token), ("a", t1));

    assert_eq!(within(first.acknowledge()).await.unwrap(), t1);
    let acked = within(observer.wait_for(|e| matches!(e, ObserverEvent::Acknowledged(_)))).await;
    assert!(
        matches!(acked, Some(ObserverEvent::Acknowledged(ref p)) if p.id == "a"),
        "{acked:?}"
    );
    assert_eq!(
        watcher
            .get_data(&format!("/app/election-leader/{t1}"))
            .await
            .unwrap()
            .0
            .as_ref(),
        b"a"
    );
    let parts = observer.participants().await.unwrap();
    assert_eq!(
        parts.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );

    // The leader's session closes: the next one leads with a higher token.
    a.close().await;
    let t2 = within(second.elected()).await.unwrap();
    assert!(t2 > t1);
    // Every event is reported, none skipped: in line, then elected.
    assert!(matches!(
        second.changed().await,
        Some(ElectionEvent::Joined { .. })
    ));
    assert!(matches!(
        second.changed().await,
        Some(ElectionEvent::Elected { .. })
    ));
    // The old acknowledgement went with its session; the new leader acknowledges.
    assert_eq!(within(second.acknowledge()).await.unwrap(), t2);
    second.close().await.unwrap();
    assert!(watcher
        .get_children("/app/election")
        .await
        .unwrap()
        .is_empty());
    assert!(watcher
        .get_children("/app/election-leader")
        .await
        .unwrap()
        .is_empty());
}
