//! Interoperability over TLS: a Curator 5.4 `InterProcessMutex` whose ZooKeeper
//! client speaks mutual TLS (the Java client's own properties:
//! `zookeeper.client.secure=true`, `zookeeper.clientCnxnSocket=
//! org.apache.zookeeper.ClientCnxnSocketNetty`, `zookeeper.ssl.keyStore.*` and
//! `zookeeper.ssl.trustStore.*` with ZooKeeper 3.8's `PEM` store type, so the test's
//! PEM files serve as they are) and our lock over TLS take turns on one lock on the
//! secure port of a real server (`ClientAuth::Need`: each side presents a certificate
//! of the test CA).
//!
//! Each side takes the lock 5 times (`CuratorFencedLock.java`, and ours here). In the
//! protected section each creates the ephemeral `inside` node (`NodeExists` there:
//! two holders at once), checks its fencing token (its lock node's `czxid`: ours is
//! [`LockGuard::fencing_token`](zk_recipes_tokio::LockGuard::fencing_token)) against the
//! highest one written to `fence` and writes its own there with a version check (a
//! token not above the highest: a holder out of order).

// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use zk_recipes_testing::{ClientAuth, SecureServer};
use zk_recipes_tokio::{connect, Client, CreateMode, CreateOptions, ErrorCode, Options, Tls};

use crate::support::{self as curator_support, Proc};

const LOCK: &str = "/interop/tls/lock";
const INSIDE: &str = "/interop/tls/inside";
const FENCE: &str = "/interop/tls/fence";
const ROUNDS: usize = 5;
/// The Java client's Netty socket needs Netty's codec (`SslHandler`) and resolver,
/// which Debian's `zookeeper.jar` does not name in its manifest.
const NETTY: &str = "/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar";

/// Our rounds: each one's fencing token, in order.
async fn our_rounds(zk: Client) -> Vec<i64> {
    let mut tokens = Vec::new();
    for _ in 0..ROUNDS {
        let held = zk.lock(LOCK).acquire().await.unwrap();
        let token = held.fencing_token();
        let inside = zk
            .create(INSIDE, "", &CreateOptions::mode(CreateMode::Ephemeral))
            .await;
        if let Err(e) = inside {
            assert_ne!(e.code(), Some(ErrorCode::NodeExists), "two holders at once");
            panic!("{e}");
        }
        let (data, stat) = zk.get_data(FENCE).await.unwrap();
        let highest: i64 = std::str::from_utf8(&data).unwrap().parse().unwrap();
        assert!(token > highest, "our token {token} after {highest}");
        zk.set_data(FENCE, token.to_string(), Some(stat.version))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        zk.delete(INSIDE, None).await.unwrap();
        held.release().await.unwrap();
        tokens.push(token);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokens
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_over_tls_and_ours_share_a_lock() {
    let server = SecureServer::start(ClientAuth::Need, false).unwrap();
    let cs = server.connect_string();
    let (_java, cp) = curator_support::compiled("CuratorFencedLock");

    // PEM files for the Java client: its key store (key, then certificate) and the CA.
    let dir = tempfile::tempdir().unwrap();
    let key_store = dir.path().join("java-client.pem");
    let trust_store = dir.path().join("ca.pem");
    std::fs::write(
        &key_store,
        server.client_cert("java").unwrap().key_store_pem(),
    )
    .unwrap();
    std::fs::write(&trust_store, server.ca.pem()).unwrap();

    let cert = server.client_cert("rust").unwrap();
    let tls = Tls::from_ca_pem(server.ca.pem().as_bytes())
        .unwrap()
        .client_cert_pem(cert.cert_pem.as_bytes(), cert.key_pem.as_bytes())
        .unwrap();
    let zk = connect(&cs, Options::default().tls(tls)).await.unwrap();
    zk.create_all(FENCE, "0", &CreateOptions::default())
        .await
        .unwrap();

    let mut java = {
        let mut cmd = std::process::Command::new("java");
        cmd.arg("-Dzookeeper.client.secure=true")
            .arg("-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty")
            .arg(format!(
                "-Dzookeeper.ssl.keyStore.location={}",
                key_store.display()
            ))
            .arg("-Dzookeeper.ssl.keyStore.type=PEM")
            .arg(format!(
                "-Dzookeeper.ssl.trustStore.location={}",
                trust_store.display()
            ))
            .arg("-Dzookeeper.ssl.trustStore.type=PEM")
            .arg("-cp")
            .arg(format!("{cp}:{NETTY}"))
            .arg("CuratorFencedLock")
            .args([&cs, LOCK, INSIDE, FENCE, &ROUNDS.to_string()]);
        Proc::spawn(cmd)
    };
    java.line("READY");
    let ours = tokio::spawn(our_rounds(zk.clone()));
    let java_lines = tokio::task::spawn_blocking(move || (java.lines_until("DONE"), java))
        .await
        .unwrap()
        .0;
    let ours = ours.await.unwrap();

    // Curator saw no overlap and no token out of order; 5 rounds each.
    assert!(
        java_lines
            .iter()
            .all(|l| !l.starts_with("OVERLAP") && !l.starts_with("STALE")),
        "{java_lines:?}"
    );
    let theirs: Vec<i64> = java_lines
        .iter()
        .filter_map(|l| l.strip_prefix("ROUND "))
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!((theirs.len(), ours.len()), (ROUNDS, ROUNDS));

    // The holders in token order alternate between the sides (they shared the lock,
    // not took it in two runs), and the fence holds the highest token.
    let mut all: Vec<(i64, &str)> = theirs.iter().map(|&t| (t, "java")).collect();
    all.extend(ours.iter().map(|&t| (t, "rust")));
    all.sort();
    let switches = all.windows(2).filter(|w| w[0].1 != w[1].1).count();
    assert!(switches >= 2, "the lock changed sides: {all:?}");
    let (fence, _) = zk.get_data(FENCE).await.unwrap();
    assert_eq!(&fence[..], all.last().unwrap().0.to_string().as_bytes());
    assert!(zk.get_children(LOCK).await.unwrap().is_empty());
    assert!(zk.exists(INSIDE).await.unwrap().is_none());
    zk.close().await;
}
