//! Interoperability with Apache Curator 5.4: each path of our multi-lock is an ordinary
//! lock, so a Java `InterProcessMutex` on one of the paths blocks our multi-lock until
//! it releases (while the multi-lock waits, the paths before it are ours), and while we
//! hold the multi-lock Curator cannot take any of its paths.

use crate::support as curator_support;

use std::io::{BufRead, BufReader, Write};

use std::process::{Command, Stdio};
use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Options};

fn curator_try(cp: &str, connect: &str, path: &str) -> String {
    let out = Command::new("java")
        .args(["-cp", cp, "CuratorLock", connect, path, "try"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curator_mutex_on_one_path_blocks_our_multi_lock_until_it_releases() {
    let (_dir, cp) = curator_support::compiled("CuratorLock");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let zk = connect(&cs, Options::default()).await.unwrap();
    const A: &str = "/interop/multi/a";
    const B: &str = "/interop/multi/b";

    // Curator holds b.
    let mut java = Command::new("java")
        .args(["-cp", &cp, "CuratorLock", &cs, B, "hold"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(java.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("ACQUIRED"), "{first}");

    // Our multi-lock over {b, a}: it takes a, then queues behind Curator's node in b.
    let waiting = tokio::spawn({
        let zk = zk.clone();
        async move { zk.multi_lock(&[B, A]).acquire().await }
    });
    let mut queued = false;
    for _ in 0..100 {
        if zk.get_children(B).await.map(|k| k.len()) == Ok(2) {
            queued = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(queued, "our node queues in b behind Curator's");
    let a_kids = zk.get_children(A).await.unwrap();
    assert_eq!(
        a_kids.len(),
        1,
        "a (sorted first) is ours meanwhile: {a_kids:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "Curator's mutex on b blocks us");

    // Curator releases: we hold both.
    java.stdin.take().unwrap().write_all(b"release\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "RELEASED");
    let _ = java.wait();
    let held = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("handed over")
        .unwrap()
        .unwrap();
    let paths: Vec<&str> = held.locks().iter().map(|l| l.path.as_str()).collect();
    assert_eq!(paths, [A, B]);
    for l in held.locks() {
        assert!(
            l.node.starts_with("_c_") && l.node.contains("-lock-"),
            "Curator's node form: {}",
            l.node
        );
    }

    // We hold both: Curator can take neither; once we release, it can.
    assert_eq!(curator_try(&cp, &cs, A), "BUSY");
    assert_eq!(curator_try(&cp, &cs, B), "BUSY");
    held.release().await.unwrap();
    assert_eq!(curator_try(&cp, &cs, A), "ACQUIRED");
    assert_eq!(curator_try(&cp, &cs, B), "ACQUIRED");
    for p in [A, B] {
        assert_eq!(zk.get_children(p).await.unwrap(), Vec::<String>::new());
    }
}
