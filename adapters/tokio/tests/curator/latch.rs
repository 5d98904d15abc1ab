//! Interoperability with Apache Curator 5.4's `LeaderLatch` (Debian's
//! `libcurator-recipes-java`): a Java latch and our candidates on the same path elect one
//! leader between them, and each side sees the other's participant id.
//!
//! What Curator does (checked in its source, `LeaderLatch`, `LockInternals`,
//! `StandardLockInternalsDriver`, `LeaderSelector`, `ProtectedUtils`): a latch creates
//! `<path>/latch-` as `EPHEMERAL_SEQUENTIAL` with protection, so the node is
//! `_c_<uuid>-latch-<10-digit seq>`, holding the participant id (UTF-8). Children are
//! sorted by the text after the last `latch-` (the whole name if there is none); the
//! first leads. `getParticipants`/`getLeader` list every child of the path in that order
//! and read each one's data as the id, the first marked leader.

// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use crate::support as curator_support;

const PATH: &str = "/interop/latch";

use std::io::{BufRead, BufReader, Lines, Write};

use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use zk_recipes_testing::{EmbeddedServer, TestServer};
use zk_recipes_tokio::{connect, Options};

/// A Java process holding one `LeaderLatch`, answering one line per command.
struct Latch {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Latch {
    fn start(cp: &str, connect: &str, id: &str) -> Latch {
        let mut child = Command::new("java")
            .arg("-cp")
            .arg(cp)
            .arg("CuratorLatch")
            .arg(connect)
            .arg(PATH)
            .arg(id)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "READY");
        Latch {
            child,
            stdin,
            lines,
        }
    }

    fn ask(&mut self, cmd: &str) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        self.lines.next().expect("an answer").unwrap()
    }

    /// Asks until `want` accepts the answer (Curator starts and reads in the background).
    fn ask_until(&mut self, cmd: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let a = self.ask(cmd);
            if want(&a) || Instant::now() > deadline {
                return a;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Latch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `_c_<uuid>-latch-<10 digits>`.
fn is_latch_node(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("_c_") else {
        return false;
    };
    if rest.len() < 36 {
        return false;
    }
    let (uuid, tail) = rest.split_at(36);
    let uuid_ok = uuid.split('-').map(str::len).eq([8, 4, 4, 4, 12])
        && uuid.chars().all(|c| c == '-' || c.is_ascii_hexdigit());
    let seq = tail.strip_prefix("-latch-").unwrap_or("");
    uuid_ok && seq.len() == 10 && seq.chars().all(|c| c.is_ascii_digit())
}

fn within<F: std::future::Future>(
    rt: &tokio::runtime::Runtime,
    ms: u64,
    f: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    rt.block_on(async { tokio::time::timeout(Duration::from_millis(ms), f).await })
}

#[test]
fn curator_leader_latch_and_our_candidates_elect_one_leader() {
    let (_dir, cp) = curator_support::compiled("CuratorLatch");
    let server = TestServer::shared().unwrap();
    elect_one_leader_on(&cp, &server.connect_string());
}

/// The same against the embedded server (issue 37).
#[test]
fn curator_leader_latch_and_our_candidates_elect_one_leader_on_the_embedded_server() {
    let (_dir, cp) = curator_support::compiled("CuratorLatch");
    let server = EmbeddedServer::start().unwrap();
    elect_one_leader_on(&cp, &server.connect_string());
}

fn elect_one_leader_on(cp: &str, cs: &str) {
    let (cp, cs) = (cp.to_string(), cs.to_string());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let zk = rt.block_on(connect(&cs, Options::default())).unwrap();

    // Java leads first; we wait behind it.
    let mut java = Latch::start(&cp, &cs, "java-1");
    assert_eq!(java.ask("await 15000"), "LEADER");
    let mut ours = rt.block_on(zk.election(PATH, "rust-1").join()).unwrap();
    assert!(
        within(&rt, 500, ours.elected()).is_err(),
        "we must wait for Curator's leader"
    );
    assert!(!ours.is_leader());
    let observer = rt.block_on(zk.election_observer(PATH)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let parts = loop {
        let parts = rt.block_on(observer.participants()).unwrap();
        if parts.len() == 2 || Instant::now() > deadline {
            break parts;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ids: Vec<&str> = parts.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        ids,
        ["java-1", "rust-1"],
        "our observer lists the Java participant"
    );
    assert_eq!(
        rt.block_on(observer.leader()).unwrap().map(|p| p.id),
        Some("java-1".to_string())
    );
    // Both nodes have the protected latch form; Curator's node is the one it reports.
    let kids = rt.block_on(zk.get_children(PATH)).unwrap();
    assert_eq!(kids.len(), 2, "{kids:?}");
    assert!(kids.iter().all(|k| is_latch_node(k)), "{kids:?}");
    let java_path = java.ask("path");
    assert_eq!(java_path, format!("{PATH}/{}", parts[0].node));
    // Curator sees us too, in the same order.
    assert_eq!(java.ask("participants"), "java-1,rust-1");
    assert_eq!(java.ask("leader"), "java-1 true");
    assert_eq!(java.ask("has"), "true");

    // Java closes: we lead.
    assert_eq!(java.ask("close"), "CLOSED");
    let token = within(&rt, 15_000, ours.elected())
        .expect("we lead after Curator's close")
        .unwrap();
    assert!(token > parts[0].fencing_token);
    assert!(ours.is_leader());
    // Our acknowledgement lives outside the latch path: Curator does not count it.
    assert_eq!(within(&rt, 15_000, ours.acknowledge()).unwrap(), Ok(token));

    // A new Java latch waits behind us and names us as the leader.
    let mut java2 = Latch::start(&cp, &cs, "java-2");
    assert_eq!(java2.ask("await 500"), "WAITING");
    assert_eq!(java2.ask("has"), "false");
    assert_eq!(java2.ask("leader"), "rust-1 true");
    assert_eq!(
        java2.ask_until("participants", |a| a == "rust-1,java-2"),
        "rust-1,java-2"
    );
    assert!(ours.is_leader(), "still ours");
    let kids = rt.block_on(zk.get_children(PATH)).unwrap();
    assert!(kids.iter().all(|k| is_latch_node(k)), "{kids:?}");

    // We close: Java leads.
    rt.block_on(ours.close()).unwrap();
    assert_eq!(java2.ask("await 15000"), "LEADER");
    assert_eq!(java2.ask("leader"), "java-2 true");
    let deadline = Instant::now() + Duration::from_secs(15);
    while rt
        .block_on(observer.leader())
        .unwrap()
        .is_none_or(|p| p.id != "java-2")
    {
        assert!(
            Instant::now() < deadline,
            "our observer follows Curator's leader"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(java2.ask("close"), "CLOSED");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !rt.block_on(zk.get_children(PATH)).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "nodes left");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Our acknowledgement went with our candidacy (the directory is a container).
    assert!(rt
        .block_on(zk.get_children("/interop/latch-leader"))
        .unwrap_or_default()
        .is_empty());
    rt.block_on(zk.close());
}
