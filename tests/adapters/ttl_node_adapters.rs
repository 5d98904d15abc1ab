// The TTL node (Curator's PersistentTtlNode format) against a real ZooKeeper 3.8 with
// TTL nodes on and a 100 ms container check, in each form: an owner's node is a
// container holding its data with a TTL `touch` child; it outlives its owner's
// session (a restart within the TTL: a new owner on a new session finds it and keeps
// it); kept touched, it outlives its TTL; once the owner stops, it is gone within
// the TTL plus the check interval.

use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_millis(1000);

/// A server with TTL nodes on whose container manager runs every 100 ms (60 s by
/// default), so a lapsed node goes within the test's time.
fn ttl_server() -> zk_recipes_testing::TestServer {
    let opts = zk_recipes_testing::Options {
        jvm_flags: vec!["-Dznode.container.checkIntervalMs=100".into()],
        ..zk_recipes_testing::Options::default()
    };
    zk_recipes_testing::TestServer::start_with(opts).expect("a real ZooKeeper")
}

#[test]
fn a_ttl_node_outlives_its_owners_session_and_lapses_after_it_stops() {
    run(ttl_node_on(&ttl_server(), "/ttl/a"));
}

#[form]
async fn ttl_node_on(s: &zk_recipes_testing::TestServer, path: &str) {
    let cs = s.connect_string();
    let touch = format!("{path}/touch");
    let first = connect(&cs).await;
    let mut node = first.ttl_node(path, "v1", TTL).unwrap();
    node.present(Duration::from_secs(10)).await.unwrap();
    let (data, _) = first.get_data(path).await.unwrap();
    assert_eq!(&data[..], b"v1", "{NAME}: the container holds the data");
    // The touch child (a real 3.8 shows a TTL node's ephemeralOwner as 0 to clients).
    let child = first.exists(&touch).await.unwrap().expect("the touch child");
    assert_eq!(child.ephemeral_owner, 0, "{NAME}: {child:?}");
    // The owner's process ends (its session closed): the node stays within its TTL,
    // and a new owner on a new session keeps it (its data written in).
    drop(node);
    first.close().await;
    let second = connect(&cs).await;
    assert!(second.exists(path).await.unwrap().is_some(), "{NAME}: gone with the session");
    let mut node = second.ttl_node(path, "v2", TTL).unwrap();
    node.present(Duration::from_secs(10)).await.unwrap();
    // Kept touched, it outlives its TTL and then some.
    sleep(TTL * 2).await;
    assert!(node.is_present().await.unwrap(), "{NAME}");
    assert!(second.exists(&touch).await.unwrap().is_some(), "{NAME}: lapsed while touched");
    assert_eq!(&second.get_data(path).await.unwrap().0[..], b"v2");
    // The owner stops: the child lapses after the TTL, then the container is reaped.
    node.close().await.unwrap();
    let stopped = Instant::now();
    loop {
        if second.exists(path).await.unwrap().is_none() {
            break;
        }
        assert!(
            stopped.elapsed() < TTL * 5,
            "{NAME}: still there {:?} after the owner stopped",
            stopped.elapsed()
        );
        sleep(Duration::from_millis(50)).await;
    }
    println!("{NAME}: gone {:?} after the owner stopped (TTL {TTL:?})", stopped.elapsed());
    second.close().await;
}
