//! Demo: start a real ZooKeeper with the test support and use it through the tokio
//! adapter — raw operations, a watch, a lock and a re-entrant lock, and a server
//! restart the session survives.
//! `scripts/demo` runs it.

use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, CreateMode, CreateOptions, Options, Status};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut server = TestServer::start()?;
    println!("ZooKeeper 3.8 running at {}", server.connect_string());
    let zk = connect(
        &server.connect_string(),
        Options::default().session_timeout(Duration::from_secs(10)),
    )
    .await?;
    println!("session 0x{:x}: {:?}", zk.session_id(), zk.status());

    zk.create("/demo", "hello", &CreateOptions::default())
        .await?;
    let me = zk
        .create(
            "/demo/member-",
            "host-a",
            &CreateOptions::mode(CreateMode::EphemeralSequential),
        )
        .await?;
    println!("created /demo and ephemeral {me}");
    let ((data, stat), changed) = zk.get_data_watch("/demo").await?;
    println!("/demo = {:?} (version {})", data, stat.version);
    zk.set_data("/demo", "world", Some(stat.version)).await?;
    println!("watch fired: {:?}", changed.await?);

    let mut guard = zk.lock("/demo/locks/job").acquire().await?;
    let held = guard.is_held();
    println!(
        "lock held: node {} fencing token {} (held: {held})",
        guard.node(),
        guard.fencing_token(),
    );
    guard.release().await?;
    let m = zk.reentrant_lock("/demo/locks/config");
    let outer = m.acquire().await?;
    let inner = m.acquire().await?;
    println!("re-entrant lock: {} levels on one node", m.depth().await);
    drop(inner);
    drop(outer);
    // Leader election: two candidates on two sessions; the first leads, acknowledges,
    // and when its session closes the second takes over with a higher fencing token.
    let other = connect(&server.connect_string(), Options::default()).await?;
    let mut first = other.election("/demo/election", "first").join().await?;
    let t1 = first.elected().await?;
    first.acknowledge().await?;
    let mut second = zk.election("/demo/election", "second").join().await?;
    let observer = zk.election_observer("/demo/election").await?;
    let leader = observer.acknowledged().await?.map(|p| p.id);
    println!("election: first leads (token {t1}), acknowledged leader {leader:?}");
    other.close().await;
    let t2 = second.elected().await?;
    println!("first's session closed: second leads (token {t2} > {t1})");
    second.close().await?;
    drop(first);
    zk.create_all("/demo/a/b/c", "deep", &CreateOptions::default())
        .await?;
    zk.delete_all("/demo/a").await?;
    println!("created /demo/a/b/c with its parents and deleted the subtree");

    println!("killing the server and restarting it on the same port...");
    let mut states = zk.status_stream();
    server.kill()?;
    states
        .wait_for(|s| *s == Status::Suspended)
        .await
        .ok_or("client ended")?;
    println!("  client says: {:?}", zk.status());
    server.restart()?;
    states
        .wait_for(|s| matches!(s, Status::Connected { .. }))
        .await
        .ok_or("client ended")?;
    println!(
        "  client says: {:?} (same session 0x{:x})",
        zk.status(),
        zk.session_id()
    );
    println!("ephemeral still there: {}", zk.exists(&me).await?.is_some());
    println!(
        "server counted {} znodes",
        server.mntr_value("zk_znode_count")?
    );
    zk.close().await;
    Ok(())
}
