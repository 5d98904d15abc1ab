//! Interoperability with Apache Curator 5.4 (Debian's `libcurator-recipes-java`): a Java
//! `InterProcessMutex` and our lock on the same path exclude each other.

use crate::support as curator_support;

use std::io::{BufRead, BufReader, Write};

use std::process::{Command, Stdio};
use std::time::Duration;

use zk_recipes_testing::{EmbeddedServer, TestServer};
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
    let server = TestServer::shared().unwrap();
    exclude_each_other_on(&cp, &server.connect_string()).await;
}

/// The same against the embedded server (issue 37).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_zk_recipes_exclude_each_other_on_the_embedded_server() {
    let (_dir, cp) = curator_support::compiled("CuratorLock");
    let server = EmbeddedServer::start().unwrap();
    exclude_each_other_on(&cp, &server.connect_string()).await;
}

async fn exclude_each_other_on(cp: &str, cs: &str) {
    let (cp, cs) = (cp.to_string(), cs.to_string());
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

/// A Curator `hold` process: its stdout lines arrive on a channel (read on a thread of
/// its own), so the test can look without blocking.
struct CuratorHolder {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl CuratorHolder {
    fn start(cp: &str, connect: &str, path: &str) -> CuratorHolder {
        let mut child = Command::new("java")
            .arg("-cp")
            .arg(cp)
            .arg("CuratorLock")
            .arg(connect)
            .arg(path)
            .arg("hold")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        CuratorHolder { child, lines }
    }

    fn acquired(&self) -> bool {
        matches!(self.lines.try_recv(), Ok(l) if l.starts_with("ACQUIRED"))
    }

    fn wait_acquired(&self) {
        let line = self.lines.recv_timeout(Duration::from_secs(20)).unwrap();
        assert!(line.starts_with("ACQUIRED"), "{line}");
    }

    fn release(&mut self) {
        self.child
            .stdin
            .take()
            .unwrap()
            .write_all(b"release\n")
            .unwrap();
        let line = self.lines.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(line, "RELEASED");
        let _ = self.child.wait();
    }
}

/// Grant on release among Curator contenders: ours (holding) → Curator → ours → Curator
/// → ours, all queued on one path. Each gets the lock in queue order and alone. Our
/// holder that listed the queue hands the lock to the Curator node behind it (the grant
/// lands in that node's data); Curator ignores the data and takes the lock on our
/// node's deletion, as it always does; our waiter behind a Curator holder, never
/// granted, lists again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_queue_with_curator_passes_the_lock_in_order() {
    let (_dir, cp) = curator_support::compiled("CuratorLock");
    let server = TestServer::shared().unwrap();
    mixed_queue_on(&cp, &server.connect_string()).await;
}

/// The same against the embedded server (issue 37).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_queue_with_curator_passes_the_lock_in_order_on_the_embedded_server() {
    let (_dir, cp) = curator_support::compiled("CuratorLock");
    let server = EmbeddedServer::start().unwrap();
    mixed_queue_on(&cp, &server.connect_string()).await;
}

async fn mixed_queue_on(cp: &str, cs: &str) {
    let (cp, cs) = (cp.to_string(), cs.to_string());
    let zk = connect(&cs, Options::default()).await.unwrap();
    let path = "/interop/mixed";
    let queued = |n: usize| {
        let zk = zk.clone();
        async move {
            for _ in 0..400 {
                if zk.get_children(path).await.map(|k| k.len()).unwrap_or(0) >= n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("{n} contenders never queued");
        }
    };
    let spawn_ours = || {
        let zk = zk.clone();
        tokio::spawn(async move { zk.lock(path).acquire().await.unwrap() })
    };
    let h = zk.lock(path).acquire().await.unwrap();
    let mut c1 = CuratorHolder::start(&cp, &cs, path);
    queued(2).await;
    let b = spawn_ours();
    queued(3).await;
    let mut c2 = CuratorHolder::start(&cp, &cs, path);
    queued(4).await;
    let d = spawn_ours();
    queued(5).await;
    let mut kids = zk.get_children(path).await.unwrap();
    kids.sort_by_key(|k| k[k.len() - 10..].to_string());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!c1.acquired() && !b.is_finished() && !d.is_finished());

    // Our first holder listed nothing behind it: a plain delete; Curator takes over.
    h.release().await.unwrap();
    c1.wait_acquired();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !b.is_finished() && !c2.acquired() && !d.is_finished(),
        "one holder"
    );

    // Behind a Curator holder we are never granted: B lists again, holds, and learns
    // who follows it (Curator's C2, then D).
    c1.release();
    let b = tokio::time::timeout(Duration::from_secs(20), b)
        .await
        .expect("B takes over from Curator")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!c2.acquired() && !d.is_finished(), "one holder");

    // B hands the lock to C2 with one multi: the grant is written into Curator's node,
    // and Curator still takes the lock on B's deletion.
    b.release().await.unwrap();
    c2.wait_acquired();
    let (data, stat) = zk.get_data(&format!("{path}/{}", kids[3])).await.unwrap();
    assert!(data.starts_with(b"__GRANT__"), "{data:?}");
    assert!(
        data.ends_with(kids[4].as_bytes()),
        "the grant names D after C2"
    );
    assert_eq!(stat.version, 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!d.is_finished(), "one holder");

    c2.release();
    let d = tokio::time::timeout(Duration::from_secs(20), d)
        .await
        .expect("D takes over from Curator")
        .unwrap();
    d.release().await.unwrap();
    assert!(zk.get_children(path).await.unwrap().is_empty());
}

/// Issue 25: many of our waiters on one session, their listings shared (a window of 2
/// requests makes them queue: one listing answers several waiters), with Curator
/// contenders queued among them: every contender gets the lock, one at a time, the
/// Curator ones included, and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_listings_keep_a_mixed_queue_with_curator_exclusive() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    let (_dir, cp) = curator_support::compiled("CuratorLock");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let zk = connect(&cs, Options::default().max_in_flight(2))
        .await
        .unwrap();
    let path = "/interop/shared";
    let queued = |n: usize| {
        let zk = zk.clone();
        async move {
            for _ in 0..800 {
                if zk.get_children(path).await.map(|k| k.len()).unwrap_or(0) >= n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("{n} contenders never queued");
        }
    };
    let inside = Arc::new(AtomicUsize::new(0));
    let spawn_ours = |n: usize| {
        (0..n)
            .map(|_| {
                let zk = zk.clone();
                let inside = inside.clone();
                tokio::spawn(async move {
                    let g = zk.lock(path).acquire().await.unwrap();
                    assert_eq!(inside.fetch_add(1, SeqCst), 0, "two holders");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, SeqCst);
                    g.release().await.unwrap();
                })
            })
            .collect::<Vec<_>>()
    };
    let before = zk.counters().await.unwrap();
    let h = zk.lock(path).acquire().await.unwrap();
    let mut ours = spawn_ours(20);
    queued(21).await;
    let mut c1 = CuratorHolder::start(&cp, &cs, path);
    queued(22).await;
    ours.extend(spawn_ours(20));
    queued(42).await;
    let mut c2 = CuratorHolder::start(&cp, &cs, path);
    queued(43).await;
    h.release().await.unwrap();
    for c in [&mut c1, &mut c2] {
        tokio::task::block_in_place(|| c.wait_acquired());
        assert_eq!(inside.fetch_add(1, SeqCst), 0, "Curator beside one of ours");
        tokio::time::sleep(Duration::from_millis(50)).await;
        inside.fetch_sub(1, SeqCst);
        tokio::task::block_in_place(|| c.release());
    }
    for t in ours {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("every waiter of ours acquires")
            .unwrap();
    }
    assert!(zk.get_children(path).await.unwrap().is_empty());
    let after = zk.counters().await.unwrap();
    assert!(
        after.listings_shared > before.listings_shared,
        "our waiters shared listings"
    );
}
