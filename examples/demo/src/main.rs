//! Demo: the tokio adapter against ZooKeeper — raw operations, a watch, a lock and a
//! re-entrant lock, a leader election with a failover, and (on the server the demo
//! starts itself) a connection loss the session survives and a session expiry.
//!
//! `cargo run -p zk-recipes-demo` runs it with nothing installed: it starts the embedded
//! server (`zk-recipes-server`: a ZooKeeper-compatible server in this process, for
//! development and tests) on a free port of 127.0.0.1. With `ZK_ADDR=host:port` it
//! uses that running ZooKeeper instead, works under a fresh path of its own and deletes
//! it at the end.

use std::time::Duration;

use zk_recipes_server::EmbeddedServer;
use zk_recipes_tokio::{
    connect, CreateMode, CreateOptions, LockChange, ObserverEvent, Options, Status,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut own_server = None;
    let connect_string = match std::env::var("ZK_ADDR") {
        Ok(addr) if !addr.is_empty() => {
            println!("using the ZooKeeper at {addr} (ZK_ADDR)");
            addr
        }
        _ => {
            let server = EmbeddedServer::start()?;
            println!(
                "embedded ZooKeeper-compatible server (for development and tests) at {}",
                server.connect_string()
            );
            let cs = server.connect_string();
            own_server = Some(server);
            cs
        }
    };
    let zk = connect(
        &connect_string,
        Options::default()
            .session_timeout(Duration::from_secs(10))
            .renew_on_expiry(true),
    )
    .await?;
    println!("session 0x{:x}: {:?}", zk.session_id(), zk.status());
    // A path of our own, so a shared server's tree is left as it was.
    let root = format!("/zk-recipes-demo-{:x}", zk.session_id());

    zk.create(&root, "hello", &CreateOptions::default()).await?;
    let me = zk
        .create(
            &format!("{root}/member-"),
            "host-a",
            &CreateOptions::mode(CreateMode::EphemeralSequential),
        )
        .await?;
    println!("created {root} and ephemeral {me}");
    let ((data, stat), changed) = zk.get_data_watch(&root).await?;
    println!("{root} = {:?} (version {})", data, stat.version);
    zk.set_data(&root, "world", Some(stat.version)).await?;
    println!("watch fired: {:?}", changed.await?);

    let mut guard = zk.lock(&format!("{root}/locks/job")).acquire().await?;
    let held = guard.is_held();
    println!(
        "lock held: node {} fencing token {} (held: {held})",
        guard.node(),
        guard.fencing_token(),
    );
    guard.release().await?;
    let m = zk.reentrant_lock(&format!("{root}/locks/config"));
    let outer = m.acquire().await?;
    let inner = m.acquire().await?;
    println!("re-entrant lock: {} levels on one node", m.depth().await);
    drop(inner);
    drop(outer);
    // Leader election: two candidates on two sessions; the first leads, acknowledges,
    // and when its session closes the second takes over with a higher fencing token.
    let other = connect(&connect_string, Options::default()).await?;
    let mut first = other
        .election(&format!("{root}/election"), "first")
        .join()
        .await?;
    let t1 = first.elected().await?;
    first.acknowledge().await?;
    let mut second = zk
        .election(&format!("{root}/election"), "second")
        .join()
        .await?;
    let mut observer = zk.election_observer(&format!("{root}/election")).await?;
    // The observer's first view may predate the acknowledgement: then it comes as an event.
    let acknowledged = match observer.acknowledged().await? {
        Some(p) => Some(p),
        None => tokio::time::timeout(
            Duration::from_secs(5),
            observer.wait_for(|e| matches!(e, ObserverEvent::Acknowledged(_))),
        )
        .await
        .ok()
        .flatten()
        .and_then(|e| match e {
            ObserverEvent::Acknowledged(p) => Some(p),
            _ => None,
        }),
    };
    let leader = acknowledged.map(|p| p.id);
    println!("election: first leads (token {t1}), acknowledged leader {leader:?}");
    other.close().await;
    let t2 = second.elected().await?;
    println!("first's session closed: second leads (token {t2} > {t1})");
    second.close().await?;
    drop(first);
    zk.create_all(&format!("{root}/a/b/c"), "deep", &CreateOptions::default())
        .await?;
    zk.delete_all(&format!("{root}/a")).await?;
    println!("created {root}/a/b/c with its parents and deleted the subtree");

    if let Some(server) = own_server.as_ref() {
        println!("dropping every connection (the session survives)...");
        let mut states = zk.status_stream();
        server.drop_connections();
        let suspended = states
            .wait_for(|s| *s == Status::Suspended)
            .await
            .ok_or("client ended")?;
        println!("  client says: {suspended:?}");
        let connected = states
            .wait_for(|s| matches!(s, Status::Connected { .. }))
            .await
            .ok_or("client ended")?;
        println!(
            "  client says: {connected:?} (same session 0x{:x})",
            zk.session_id()
        );
        println!("ephemeral still there: {}", zk.exists(&me).await?.is_some());
        println!("expiring the session...");
        let old = zk.session_id();
        let mut guard = zk.lock(&format!("{root}/locks/job")).acquire().await?;
        server.expire_session(old);
        loop {
            let change = guard.changed().await;
            println!("  lock holder hears: {change:?}");
            if matches!(change, LockChange::Lost(_)) {
                break;
            }
        }
        let renewed = states
            .wait_for(|s| matches!(s, Status::Connected { session_id, .. } if *session_id != old))
            .await
            .ok_or("client ended")?;
        println!("  client says: {renewed:?} (a new session)");
        println!("ephemeral still there: {}", zk.exists(&me).await?.is_some());
        println!("server holds {} znodes", server.stats().znodes);
    } else {
        println!("ZK_ADDR: no faults on a server the demo did not start");
    }
    zk.delete_all(&root).await?;
    println!("deleted {root}");
    zk.close().await;
    Ok(())
}
