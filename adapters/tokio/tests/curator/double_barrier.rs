//! Interoperability with Apache Curator 5.4's `DistributedDoubleBarrier` (Debian's
//! `libcurator-recipes-java`): Java and Rust participants share one double barrier —
//! the same member nodes (named by a UUID), the same `ready` node, the same order.

use crate::support as curator_support;

use std::io::{BufRead, BufReader, Lines, Write};

use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Client, Options};

/// A Java participant driven line by line.
struct Java {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Java {
    fn start(cp: &str, cs: &str, path: &str, n: u32) -> Java {
        let mut child = Command::new("java")
            .arg("-cp")
            .arg(cp)
            .arg("CuratorDoubleBarrier")
            .arg(cs)
            .arg(path)
            .arg(n.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "READY");
        Java { child, lines }
    }

    fn send(&mut self, cmd: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{cmd}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends `cmd` and answers on a thread (the answer may take a while).
    fn ask(mut self, cmd: &str) -> std::thread::JoinHandle<(Java, String)> {
        self.send(cmd);
        std::thread::spawn(move || {
            let answer = self.lines.next().unwrap().unwrap();
            (self, answer)
        })
    }

    fn quit(mut self) {
        self.send("quit");
        let _ = self.child.wait();
    }
}

async fn rust(cs: &str) -> Client {
    connect(cs, Options::default()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_participants_share_one_double_barrier() {
    let (_dir, cp) = curator_support::compiled("CuratorDoubleBarrier");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let path = "/interop/db";
    let (a, b) = (rust(&cs).await, rust(&cs).await);
    let watcher = rust(&cs).await;

    for round in 0..2 {
        // Two Java and two Rust participants, N = 4.
        let j1 = Java::start(&cp, &cs, path, 4).ask("enter 20000");
        let j2 = Java::start(&cp, &cs, path, 4).ask("enter 20000");
        let mut ra = a.double_barrier(path, 4);
        let mut rb = b.double_barrier(path, 4);
        let (ea, eb) = tokio::join!(
            ra.enter_timeout(Duration::from_secs(20)),
            rb.enter_timeout(Duration::from_secs(20))
        );
        assert!(ea.unwrap() && eb.unwrap(), "round {round}: Rust entered");
        let (j1, r1) = j1.join().unwrap();
        let (j2, r2) = j2.join().unwrap();
        assert_eq!((r1.as_str(), r2.as_str()), ("ENTERED", "ENTERED"));
        // Curator's layout: four UUID-named members and `ready`.
        let mut kids = watcher.get_children(path).await.unwrap();
        kids.sort();
        assert_eq!(kids.len(), 5, "{kids:?}");
        assert!(kids.contains(&"ready".to_string()));
        assert!(
            kids.iter()
                .filter(|k| *k != "ready")
                .all(|k| k.len() == 36 && k.matches('-').count() == 4),
            "{kids:?}"
        );
        // Everyone leaves: Java first, then Rust.
        let j1 = j1.ask("leave 20000");
        let j2 = j2.ask("leave 20000");
        let (la, lb) = tokio::join!(
            ra.leave_timeout(Duration::from_secs(20)),
            rb.leave_timeout(Duration::from_secs(20))
        );
        assert!(la.unwrap() && lb.unwrap(), "round {round}: Rust left");
        let (j1, r1) = j1.join().unwrap();
        let (j2, r2) = j2.join().unwrap();
        assert_eq!((r1.as_str(), r2.as_str()), ("LEFT", "LEFT"));
        j1.quit();
        j2.quit();
        // Nothing of the round is left (our last leaver removes `b`; Curator's removes
        // `ready`).
        let left = watcher.get_children(path).await.unwrap_or_default();
        assert!(left.is_empty(), "round {round}: {left:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_participant_arriving_late_to_a_curator_round_is_released() {
    let (_dir, cp) = curator_support::compiled("CuratorDoubleBarrier");
    let server = TestServer::shared().unwrap();
    let cs = server.connect_string();
    let path = "/interop/late";
    // Two Java participants make the round (N = 2); a Rust one arrives after `ready`.
    let j1 = Java::start(&cp, &cs, path, 2).ask("enter 20000");
    let j2 = Java::start(&cp, &cs, path, 2).ask("enter 20000");
    let (j1, r1) = j1.join().unwrap();
    let (j2, r2) = j2.join().unwrap();
    assert_eq!((r1.as_str(), r2.as_str()), ("ENTERED", "ENTERED"));
    let zk = rust(&cs).await;
    let mut late = zk.double_barrier(path, 2);
    assert!(late.enter_timeout(Duration::from_secs(5)).await.unwrap());
    assert_eq!(late.entered_late(), Some(true));
    let j1 = j1.ask("leave 20000");
    let j2 = j2.ask("leave 20000");
    assert!(late.leave_timeout(Duration::from_secs(20)).await.unwrap());
    let (j1, _) = j1.join().unwrap();
    let (j2, _) = j2.join().unwrap();
    j1.quit();
    j2.quit();
}
