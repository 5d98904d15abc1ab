//! Interoperability with Apache Curator 5.4 (Debian's `libcurator-recipes-java`): a Java
//! `InterProcessMutex` and our lock on the same path exclude each other.

mod curator_support;

use std::io::{BufRead, BufReader, Write};

use std::process::{Command, Stdio};
use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Options};

fn curator_try(cp: &str, connect: &str, path: &str) -> String {
    let out = Command::new("java")
        .arg("-cp")
        .arg(cp)
        .arg("CuratorLock")
        .arg(connect)
        .arg(path)
        .arg("try")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_zk_recipes_exclude_each_other() {
    let (_dir, cp) = curator_support::compiled("CuratorLock");
    let server = TestServer::start().unwrap();
    let cs = server.connect_string();
    let zk = connect(&cs, Options::default()).await.unwrap();

    // We hold: Curator cannot get it; once we release, it can.
    let guard = zk.lock("/interop/lock").acquire().await.unwrap();
    assert_eq!(curator_try(&cp, &cs, "/interop/lock"), "BUSY");
    guard.release().await.unwrap();
    assert_eq!(curator_try(&cp, &cs, "/interop/lock"), "ACQUIRED");

    // Curator holds: our try-lock fails, its node has Curator's protected form, and we
    // queue behind it and get the lock when it releases.
    let mut java = Command::new("java")
        .arg("-cp")
        .arg(&cp)
        .arg("CuratorLock")
        .arg(&cs)
        .arg("/interop/lock")
        .arg("hold")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(java.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("ACQUIRED"), "{first}");
    assert!(
        zk.lock("/interop/lock")
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "Curator holds it"
    );
    let kids = zk.get_children("/interop/lock").await.unwrap();
    assert!(
        kids.iter()
            .all(|k| k.starts_with("_c_") && k.contains("-lock-")),
        "{kids:?}"
    );
    let waiting = tokio::spawn({
        let zk = zk.clone();
        async move { zk.lock("/interop/lock").acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "we must wait for Curator");
    java.stdin.take().unwrap().write_all(b"release\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "RELEASED");
    let guard = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("handed over")
        .unwrap()
        .unwrap();
    assert!(guard.fencing_token() > 0);
    let _ = java.wait();
}
