//! What only the async form has: a call's future dropped midway (the blocking form's
//! counterpart, a `_timeout` call, is in the scenarios written once).

use std::time::Duration;

use zk_recipes_tokio as zt;

use crate::shared::tokio_form::connect;
use crate::tokio_rt::{run, sleep};

/// Dropping a pending `acquire()` future gives up and deletes our nodes.
#[test]
fn dropping_a_pending_semaphore_acquire_deletes_its_nodes() {
    let server = crate::common::server();
    let cs = server.connect_string();
    run(async {
        let a = connect(&cs).await;
        let held = a
            .semaphore("/sem/drop", 1)
            .acquire()
            .await
            .expect("the free lease");
        let b = connect(&cs).await;
        let sem = zt::Client::semaphore(&b, "/sem/drop", 1);
        let pending = tokio::time::timeout(Duration::from_millis(300), sem.acquire()).await;
        assert!(pending.is_err(), "the lease is held: still waiting");
        // Only the holder's lease and no mutex node remain once the abandoned attempt
        // cleaned up.
        let mut clean = false;
        for _ in 0..100 {
            let leases = a.get_children("/sem/drop/leases").await.expect("leases");
            let locks = a.get_children("/sem/drop/locks").await.expect("locks");
            if leases.len() == 1 && locks.is_empty() {
                clean = true;
                break;
            }
            sleep(Duration::from_millis(20)).await;
        }
        assert!(clean, "the dropped attempt left nodes behind");
        held.release().await.expect("released");
    });
}

/// A real 3.8 server with TTL nodes off answers `createTTL` with `Unimplemented`: the
/// TTL node ends with `TtlNodesDisabled`, naming the node and the server flag.
#[test]
fn a_ttl_node_on_a_server_with_ttl_nodes_off_fails_naming_the_cause() {
    let opts = zk_recipes_testing::Options {
        ttl_nodes: false,
        ..zk_recipes_testing::Options::default()
    };
    let server = zk_recipes_testing::TestServer::start_with(opts).expect("a real ZooKeeper");
    let cs = server.connect_string();
    run(async {
        let a = connect(&cs).await;
        let raw = a
            .create(
                "/off-raw",
                Vec::new(),
                &zt::CreateOptions::mode(zt::CreateMode::PersistentWithTtl)
                    .ttl(Duration::from_secs(1)),
            )
            .await
            .unwrap_err();
        assert_eq!(raw.code(), Some(zt::ErrorCode::Unimplemented), "{raw}");
        let mut node = a.ttl_node("/off/n", "x", Duration::from_secs(1)).unwrap();
        let err = node.present(Duration::from_secs(10)).await.unwrap_err();
        assert_eq!(
            err,
            zt::Error::TtlNodesDisabled {
                path: "/off/n/touch".into()
            }
        );
        assert!(err.to_string().contains("extendedTypesEnabled"), "{err}");
        a.close().await;
    });
}
