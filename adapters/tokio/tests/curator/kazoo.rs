//! kazoo's `Lock` (Debian's `python3-kazoo` 2.8, `tests/curator/kazoo_lock.py`) against
//! the embedded server, next to our locks on the same server: three kazoo processes and
//! two of our clients contend, each holder creating an ephemeral marker node that only
//! a sole holder can create. (kazoo's lock nodes are `<uuid>__lock__<seq>`, Curator's
//! and ours `_c_<uuid>-lock-<seq>`: each counts only its own kind, so the two do not
//! share a path; Curator and ours do, in `lock.rs`.)

use std::process::{Command, Stdio};
use std::time::Duration;

use zk_recipes_testing::EmbeddedServer;
use zk_recipes_tokio::{connect, CreateMode, CreateOptions, Options};

/// Debian's Python, which has `python3-kazoo` (a `python3` earlier on PATH may not).
const PYTHON: &str = "/usr/bin/python3";
const ROUNDS: usize = 10;

fn kazoo_contender(cs: &str, path: &str, marker: &str) -> std::process::Child {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/curator/kazoo_lock.py");
    Command::new(PYTHON)
        .arg(script)
        .arg(cs)
        .arg(path)
        .arg(marker)
        .arg(ROUNDS.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 with kazoo (`apt-get install -y python3-kazoo`)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_locks_exclude_each_other_on_the_embedded_server_next_to_ours() {
    let server = EmbeddedServer::start().unwrap();
    let cs = server.connect_string();
    let kazoo: Vec<_> = (0..3)
        .map(|_| kazoo_contender(&cs, "/interop/kazoo-lock", "/interop/kazoo-holder"))
        .collect();
    // Ours, at the same time, on a path of their own with the same check.
    let ours: Vec<_> = (0..2)
        .map(|_| {
            let cs = cs.clone();
            tokio::spawn(async move {
                let zk = connect(&cs, Options::default()).await.unwrap();
                let mut violations = 0;
                for _ in 0..ROUNDS {
                    let guard = zk.lock("/interop/our-lock").acquire().await.unwrap();
                    let marker = zk
                        .create(
                            "/interop/our-holder",
                            "ours",
                            &CreateOptions::mode(CreateMode::Ephemeral),
                        )
                        .await;
                    if marker.is_err() {
                        violations += 1;
                    } else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        zk.delete("/interop/our-holder", None).await.unwrap();
                    }
                    guard.release().await.unwrap();
                }
                zk.close().await;
                violations
            })
        })
        .collect();
    for child in kazoo {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "kazoo failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout.trim(), format!("DONE {ROUNDS}"), "kazoo: {stdout}");
    }
    for task in ours {
        assert_eq!(task.await.unwrap(), 0, "our holders overlapped");
    }
    // Nothing left behind: every lock node and marker went with its holder.
    let zk = connect(&cs, Options::default()).await.unwrap();
    for dir in ["/interop/kazoo-lock", "/interop/our-lock"] {
        assert_eq!(
            zk.get_children(dir).await.unwrap(),
            Vec::<String>::new(),
            "{dir}"
        );
    }
    zk.close().await;
}
