//! `zkr` as a user runs it: separate processes against a real ZooKeeper 3.8 started on
//! 127.0.0.1 by the test support. The modules: `signals` (what reaches a command run
//! directly), `nodes` (the node verbs), `messages` (what zkr says when something is
//! wrong), `inspect` (`zkr inspect`, with Curator's lock and latch among the nodes),
//! `serve` (`zkr serve`: the embedded server, no JVM), `discovery` (`zkr register`,
//! `zkr discover`).

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use zk_recipes_blocking::{connect, Client, Options};
use zk_recipes_testing::TestServer;

mod discovery;
mod inspect;
mod messages;
mod nodes;
mod serve;
mod signals;

fn zkr(server: &TestServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zkr"));
    // The servers come from ZK_SERVERS, as a user would set them once.
    c.env("ZK_SERVERS", server.connect_string());
    c
}

fn run(server: &TestServer, args: &[&str]) -> Output {
    zkr(server).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn client(server: &TestServer) -> Client {
    connect(&server.connect_string(), Options::default()).unwrap()
}

/// Waits until `file` contains `text` (panics after `within`).
fn wait_for(file: &Path, text: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while !fs::read_to_string(file).unwrap_or_default().contains(text) {
        assert!(
            Instant::now() < deadline,
            "{} never contained {text:?}",
            file.display()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// A zkr process that is killed if the test ends before it (the commands the tests run
/// under it end by themselves within 30 s).
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits for `child` at most `within`; kills it and panics if it is still running.
fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("zkr still running after {within:?}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Does this test process ignore SIGINT (and hand that down to the zkr it starts)?
fn sigint_ignored_here() -> bool {
    signals::ignored_here() & signals::mask(&[2]) != 0
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .arg(sig)
        .arg(child.id().to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {}", child.id());
}

/// A shell command that records its run in `log`: `begin <token> <pid>`, a pause, then
/// `end <token> <pid>`.
fn marked_run(log: &Path, pause: &str) -> String {
    format!(
        "echo \"begin $ZK_FENCING_TOKEN $$\" >> {log}; sleep {pause}; \
         echo \"end $ZK_FENCING_TOKEN $$\" >> {log}",
        log = log.display()
    )
}

/// The runs recorded in a log, checked never to overlap: every `begin` is followed by
/// its own `end` before any other line. Returns each run's fencing token, in order.
fn runs_in_order(log: &str) -> Result<Vec<String>, String> {
    let lines: Vec<&str> = log.lines().collect();
    lines
        .chunks(2)
        .map(|pair| match pair {
            [begin, end]
                if begin.strip_prefix("begin ").is_some()
                    && begin.strip_prefix("begin ") == end.strip_prefix("end ") =>
            {
                Ok(begin.split(' ').nth(1).unwrap_or_default().to_string())
            }
            _ => Err(format!("runs overlap: {pair:?} in {lines:?}")),
        })
        .collect()
}

#[test]
fn four_lock_processes_never_overlap_and_tokens_increase() {
    let server = TestServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");

    // The check can fail: the same runs without the lock do overlap.
    let control = dir.path().join("control");
    let unlocked: Vec<Child> = (0..4)
        .map(|_| {
            Command::new("sh")
                .arg("-c")
                .arg(marked_run(&control, "0.2"))
                .env("ZK_FENCING_TOKEN", "0")
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in unlocked {
        assert!(c.wait().unwrap().success());
    }
    let err = runs_in_order(&fs::read_to_string(&control).unwrap()).unwrap_err();
    assert!(err.contains("overlap"), "{err}");

    let runs_each = 3;
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let mut cmd = zkr(&server);
            cmd.args(["lock", "/locks/file", "--", "sh", "-c"])
                .arg(marked_run(&log, "0.05"));
            thread::spawn(move || {
                (0..runs_each)
                    .map(|_| cmd.status().unwrap().code())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for w in workers {
        assert_eq!(w.join().unwrap(), vec![Some(0); runs_each]);
    }
    let tokens = runs_in_order(&fs::read_to_string(&log).unwrap()).unwrap();
    assert_eq!(tokens.len(), 4 * runs_each);
    let tokens: Vec<i64> = tokens.iter().map(|t| t.parse().unwrap()).collect();
    assert!(tokens[0] > 0, "{tokens:?}");
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    // Every run released its lock.
    assert!(client(&server)
        .get_children("/locks/file")
        .unwrap()
        .is_empty());
}

/// Starts `zkr lock PATH` over a shell command that writes `started` to `mark`, then loops
/// until signalled; `on_term` is its SIGTERM trap.
fn holder(server: &TestServer, extra: &[&str], path: &str, mark: &Path, on_term: &str) -> Proc {
    let script = format!(
        "trap '{on_term}' TERM; echo started >> {m}; for i in $(seq 600); do sleep 0.05; done",
        m = mark.display()
    );
    let mut c = zkr(server);
    c.args(["lock", path])
        .args(extra)
        .args(["--", "sh", "-c", &script]);
    started(c, mark)
}

/// Starts `zkr` (its standard error dropped) and waits until its command has written
/// `started` to `mark`.
fn started(mut zkr: Command, mark: &Path) -> Proc {
    let child = Proc(zkr.stderr(Stdio::null()).spawn().unwrap());
    wait_for(mark, "started", Duration::from_secs(20));
    child
}

/// Deletes the one node in `dir` (a lock's or an election's), as an operator would.
fn delete_lock_node(zk: &Client, dir: &str) {
    let nodes = zk.get_children(dir).unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    zk.delete(&format!("{dir}/{}", nodes[0]), None).unwrap();
}

#[test]
fn a_lost_lock_stops_cmd_with_sigterm_then_sigkill() {
    let server = TestServer::start().unwrap();
    let zk = client(&server);
    let dir = tempfile::tempdir().unwrap();

    // Lost (its node deleted): SIGTERM; CMD's status is zkr's.
    let mark = dir.path().join("a");
    let mut child = holder(
        &server,
        &[],
        "/locks/a",
        &mark,
        &format!("echo term >> {}; exit 7", mark.display()),
    );
    delete_lock_node(&zk, "/locks/a");
    assert_eq!(
        wait_exit(&mut child.0, Duration::from_secs(30)).code(),
        Some(7)
    );
    wait_for(&mark, "term", Duration::ZERO);

    // CMD exits 0 on SIGTERM: a run that lost its lock still does not read as success.
    let mark = dir.path().join("b");
    let mut child = holder(&server, &[], "/locks/b", &mark, "exit 0");
    delete_lock_node(&zk, "/locks/b");
    assert_eq!(
        wait_exit(&mut child.0, Duration::from_secs(30)).code(),
        Some(125)
    );

    // CMD ignores SIGTERM: SIGKILL after the grace (exit 128 + 9).
    let mark = dir.path().join("c");
    let mut child = holder(&server, &["--grace", "500ms"], "/locks/c", &mark, "");
    let lost_at = Instant::now();
    delete_lock_node(&zk, "/locks/c");
    assert_eq!(
        wait_exit(&mut child.0, Duration::from_secs(30)).code(),
        Some(137)
    );
    assert!(lost_at.elapsed() >= Duration::from_millis(500));
}

#[test]
fn a_dead_server_ends_the_session_and_stops_cmd() {
    let mut server = TestServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let trap = |m: &Path| format!("echo term >> {}; exit 9", m.display());
    // Waits for the session to be over (3 s without the server).
    let a = dir.path().join("a");
    let mut waits = holder(
        &server,
        &["--session-timeout", "3s"],
        "/locks/a",
        &a,
        &trap(&a),
    );
    // Stops at the first sign of trouble, long before its 30 s session would end.
    let b = dir.path().join("b");
    let mut eager = holder(
        &server,
        &["--session-timeout", "30s", "--stop-on-suspend"],
        "/locks/b",
        &b,
        &trap(&b),
    );
    let killed_at = Instant::now();
    server.kill().unwrap();
    assert_eq!(
        wait_exit(&mut eager.0, Duration::from_secs(20)).code(),
        Some(9)
    );
    let eager_after = killed_at.elapsed();
    assert_eq!(
        wait_exit(&mut waits.0, Duration::from_secs(20)).code(),
        Some(9)
    );
    let waits_after = killed_at.elapsed();
    wait_for(&a, "term", Duration::ZERO);
    wait_for(&b, "term", Duration::ZERO);
    // Far sooner than its session could end (30 s).
    assert!(eager_after < Duration::from_secs(10), "{eager_after:?}");
    // Not at the outage itself but once the session is over: 3 s after the last byte
    // from the server, which came at most a ping interval (1 s here) before the kill.
    assert!(waits_after >= Duration::from_secs(2), "{waits_after:?}");
    assert!(waits_after > eager_after, "{waits_after:?} {eager_after:?}");
    eprintln!("stopped after the server died: {eager_after:?} (--stop-on-suspend), {waits_after:?} (3 s session)");
}

#[test]
fn elect_leader_and_signals() {
    let server = TestServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let script = format!(
        "echo $ZK_FENCING_TOKEN > {}; sleep 30",
        token_file.display()
    );
    let mut alpha = Proc(
        zkr(&server)
            .args([
                "elect",
                "/election",
                "--id",
                "alpha",
                "--",
                "sh",
                "-c",
                &script,
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(&token_file, "\n", Duration::from_secs(20));
    let alpha_token: i64 = fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let leader = run(&server, &["leader", "/election"]);
    assert_eq!(stdout(&leader), "alpha\n");
    // Not leader within the timeout: 124, CMD never ran.
    let beta = run(
        &server,
        &[
            "elect",
            "/election",
            "--id",
            "beta",
            "--timeout",
            "300ms",
            "--",
            "false",
        ],
    );
    assert_eq!(beta.status.code(), Some(124));
    // zkr passes SIGTERM on to CMD's group: `sh` dies of it (128 + 15).
    signal(&alpha.0, "-TERM");
    assert_eq!(
        wait_exit(&mut alpha.0, Duration::from_secs(30)).code(),
        Some(143)
    );
    assert_eq!(
        run(&server, &["leader", "/election"]).status.code(),
        Some(1)
    );
    let beta = run(
        &server,
        &[
            "elect",
            "/election",
            "--id",
            "beta",
            "--",
            "sh",
            "-c",
            "echo $ZK_FENCING_TOKEN",
        ],
    );
    assert!(beta.status.success());
    let beta_token: i64 = stdout(&beta).trim().parse().unwrap();
    assert!(beta_token > alpha_token, "{beta_token} after {alpha_token}");
    assert_eq!(
        run(&server, &["leader", "/no-election"]).status.code(),
        Some(1)
    );

    // Leadership lost (its candidate node deleted): the loss rule, as for a lock.
    let zk = client(&server);
    let mark = dir.path().join("gamma");
    let script = format!(
        "trap 'echo term >> {m}; exit 7' TERM; echo started >> {m}; \
         for i in $(seq 600); do sleep 0.05; done",
        m = mark.display()
    );
    let mut gamma = Proc(
        zkr(&server)
            .args([
                "elect",
                "/election",
                "--id",
                "gamma",
                "--",
                "sh",
                "-c",
                &script,
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(&mark, "started", Duration::from_secs(20));
    delete_lock_node(&zk, "/election");
    assert_eq!(
        wait_exit(&mut gamma.0, Duration::from_secs(30)).code(),
        Some(7)
    );
    wait_for(&mark, "term", Duration::ZERO);

    // A wait for the lock interrupted by Ctrl-C: exit 130, its waiting node removed.
    let held = zk.lock("/locks/busy").acquire().unwrap();
    let timed_out = run(
        &server,
        &["lock", "/locks/busy", "--timeout", "300ms", "--", "true"],
    );
    assert_eq!(timed_out.status.code(), Some(124));
    let mut waiter = Proc(
        zkr(&server)
            .args(["lock", "/locks/busy", "--", "true"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while zk.get_children("/locks/busy").unwrap().len() < 2 {
        assert!(Instant::now() < deadline, "the waiter never queued");
        thread::sleep(Duration::from_millis(20));
    }
    // Ctrl-C; SIGTERM where this run ignores SIGINT (started in the background by a
    // shell without job control): zkr keeps an ignored signal ignored.
    let (sig, code) = if sigint_ignored_here() {
        ("-TERM", 143)
    } else {
        ("-INT", 130)
    };
    signal(&waiter.0, sig);
    assert_eq!(
        wait_exit(&mut waiter.0, Duration::from_secs(15)).code(),
        Some(code)
    );
    assert_eq!(zk.get_children("/locks/busy").unwrap().len(), 1);
    held.release().unwrap();
    // CMD not found: 127, as a shell says.
    let missing = run(&server, &["lock", "/locks/busy", "--", "/nonexistent/cmd"]);
    assert_eq!(missing.status.code(), Some(127));
}

#[test]
fn queue_counter_barrier_and_nodes() {
    let server = TestServer::start().unwrap();

    // Queue: put then take, in order; an empty queue times out.
    let put = run(&server, &["queue", "put", "/q", "hello world"]);
    assert!(put.status.success());
    assert!(stdout(&put).starts_with("qn-"), "{}", stdout(&put));
    let mut from_stdin = zkr(&server)
        .args(["queue", "put", "/q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    from_stdin
        .stdin
        .take()
        .unwrap()
        .write_all(b"second")
        .unwrap();
    assert!(from_stdin.wait().unwrap().success());
    assert_eq!(
        stdout(&run(&server, &["queue", "take", "/q"])),
        "hello world\n"
    );
    assert_eq!(stdout(&run(&server, &["queue", "take", "/q"])), "second\n");
    let empty = run(&server, &["queue", "take", "/q", "--timeout", "300ms"]);
    assert_eq!(empty.status.code(), Some(124));

    // Counter.
    assert_eq!(stdout(&run(&server, &["counter", "/hits"])), "0\n");
    assert_eq!(
        stdout(&run(&server, &["counter", "/hits", "add", "5"])),
        "5\n"
    );
    assert_eq!(
        stdout(&run(&server, &["counter", "/hits", "add", "-2"])),
        "3\n"
    );
    assert_eq!(stdout(&run(&server, &["counter", "/hits"])), "3\n");

    // Nodes: set creates parents, get, ls, tree; missing nodes exit 1.
    assert!(run(&server, &["set", "/cfg/a/b", "v1"]).status.success());
    assert_eq!(stdout(&run(&server, &["get", "/cfg/a/b"])), "v1\n");
    assert!(run(&server, &["set", "/cfg/a/b", "v2"]).status.success());
    assert_eq!(stdout(&run(&server, &["get", "/cfg/a/b"])), "v2\n");
    assert!(run(&server, &["set", "/cfg/c", "x"]).status.success());
    assert_eq!(stdout(&run(&server, &["ls", "/cfg"])), "a\nc\n");
    assert_eq!(
        stdout(&run(&server, &["tree", "/cfg"])),
        "/cfg\n/cfg/a\n/cfg/a/b\n/cfg/c\n"
    );
    // --server wins over ZK_SERVERS (here a closed port).
    let flag = zkr(&server)
        .env("ZK_SERVERS", "127.0.0.1:1")
        .args(["--server", &server.connect_string(), "get", "/cfg/a/b"])
        .output()
        .unwrap();
    assert_eq!(stdout(&flag), "v2\n");
    let unreachable = zkr(&server)
        .env("ZK_SERVERS", "127.0.0.1:1")
        .args(["--connect-timeout", "500ms", "get", "/cfg/a/b"])
        .output()
        .unwrap();
    assert_eq!(unreachable.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("127.0.0.1:1"));
    let missing = run(&server, &["get", "/nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nope"));
    assert_eq!(run(&server, &["ls", "/nope"]).status.code(), Some(1));

    // Watch: one line per change until killed.
    let mut watch = Proc(
        zkr(&server)
            .args(["watch", "/cfg/a/b"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut ready = String::new();
    BufReader::new(watch.0.stderr.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready, "zkr: watching /cfg/a/b\n");
    assert!(run(&server, &["set", "/cfg/a/b", "v3"]).status.success());
    let mut lines = BufReader::new(watch.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "changed /cfg/a/b");
    drop(watch);

    // Double barrier: two participants meet, each runs its CMD between enter and leave.
    let dir = tempfile::tempdir().unwrap();
    let log: PathBuf = dir.path().join("log");
    let script = format!("echo in >> {}", log.display());
    let parts: Vec<Proc> = (0..2)
        .map(|_| {
            Proc(
                zkr(&server)
                    .args(["barrier", "/bar", "--count", "2", "--", "sh", "-c", &script])
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    for mut p in parts {
        assert!(wait_exit(&mut p.0, Duration::from_secs(20)).success());
    }
    assert_eq!(fs::read_to_string(&log).unwrap(), "in\nin\n");
    let alone = run(
        &server,
        &["barrier", "/bar", "--count", "2", "--timeout", "300ms"],
    );
    assert_eq!(alone.status.code(), Some(124));
}

/// `--tls-ca`, `--tls-cert`, `--tls-key` reach a secure client port with mutual TLS; a
/// CA that did not sign the server's certificate is refused, naming the reason.
#[test]
fn tls_flags_reach_a_secure_port() {
    use zk_recipes_testing::{ClientAuth, SecureServer, TestCa};
    let server = SecureServer::start(ClientAuth::Need, false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cert = server.client_cert("zkr").unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (ca, crt, key) = (
        file("ca.pem", server.ca.pem()),
        file("client.pem", &cert.cert_pem),
        file("client.key", &cert.key_pem),
    );
    // A first TLS handshake with a fresh JVM can take a while on a loaded machine: the
    // run that should connect gets 20 s, the refused one 2 s (it fails at once anyway).
    let zkr_tls = |ca: &str, wait: &str| {
        Command::new(env!("CARGO_BIN_EXE_zkr"))
            .env("ZK_SERVERS", server.connect_string())
            .args([
                "--connect-timeout",
                wait,
                "--tls-ca",
                ca,
                "--tls-cert",
                &crt,
            ])
            .args(["--tls-key", &key, "ls", "/"])
            .output()
            .unwrap()
    };
    let ok = zkr_tls(&ca, "20s");
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    assert!(stdout(&ok).contains("zookeeper"), "{ok:?}");
    let other = file("other-ca.pem", TestCa::new("another CA").unwrap().pem());
    let refused = zkr_tls(&other, "2s");
    assert_eq!(refused.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("unknown issuer"),
        "{refused:?}"
    );
}

/// `--sasl-user` and `--sasl-password-file` reach a server that enforces SASL: the right
/// password lists and writes nodes as the authenticated user; a wrong one fails (125)
/// naming the mechanism and the cause, and no command runs without SASL.
#[test]
fn sasl_flags_reach_a_server_that_enforces_sasl() {
    use zk_recipes_testing::{Options as ServerOptions, SaslUsers};
    let server = TestServer::start_with(ServerOptions {
        sasl: Some(SaslUsers::new(&[("alice", "alice-secret")], true)),
        ..ServerOptions::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good"), dir.path().join("bad"));
    fs::write(&good, "alice-secret\n").unwrap();
    fs::write(&bad, "not-her-secret\n").unwrap();
    let as_alice = |password: &Path, args: &[&str]| {
        zkr(&server)
            .args(["--connect-timeout", "10s", "--sasl-user", "alice"])
            .arg("--sasl-password-file")
            .arg(password)
            .args(args)
            .output()
            .unwrap()
    };
    let set = as_alice(&good, &["set", "/over-sasl", "yes"]);
    assert_eq!(set.status.code(), Some(0), "{set:?}");
    let got = as_alice(&good, &["get", "/over-sasl"]);
    assert_eq!(stdout(&got), "yes\n", "{got:?}");
    let listed = as_alice(&good, &["ls", "/"]);
    assert!(stdout(&listed).contains("over-sasl"), "{listed:?}");

    let refused = as_alice(&bad, &["get", "/over-sasl"]);
    assert_eq!(refused.status.code(), Some(125), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("DIGEST-MD5") && said.contains("wrong user or password"),
        "{said}"
    );
    assert!(stdout(&refused).is_empty(), "{refused:?}");
    // Without the flags the server refuses the client, and zkr says SASL is needed.
    let without = run(&server, &["get", "/over-sasl"]);
    assert_eq!(without.status.code(), Some(125), "{without:?}");
    assert!(
        String::from_utf8_lossy(&without.stderr).contains("SASL"),
        "{without:?}"
    );
}
