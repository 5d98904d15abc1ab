//! `zkr inspect` against a real server, with Apache Curator 5.4's `InterProcessMutex`
//! and `LeaderLatch` (a Java program, `tests/curator/CuratorHolders.java`) holding the
//! lock and leading the election, zkr processes waiting behind them, and the library's
//! read/write lock, semaphore, queue claim and double barrier beside them: each reads
//! as what it is, as text and as JSON; `--watch` prints again when the lock changes
//! hands.

use super::*;
use std::io::Write;

use serde_json::Value;
use zk_recipes_testing::CuratorProgram;

/// Waits (20 s at most) until `dir` has `n` children.
fn children_become(zk: &Client, dir: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while zk.get_children(dir).map(|c| c.len()).unwrap_or(0) != n {
        assert!(Instant::now() < deadline, "{dir} never had {n} children");
        thread::sleep(Duration::from_millis(20));
    }
}

fn inspect_json(server: &TestServer, path: &str) -> Value {
    let o = run(server, &["inspect", "--json", path]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The recipe at `path` in an `inspect --json` answer.
fn recipe<'a>(v: &'a Value, path: &str) -> &'a Value {
    v["recipes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == path)
        .unwrap_or_else(|| panic!("no {path} in {v}"))
}

#[test]
fn inspect_tells_curator_and_our_recipes_apart() {
    let server = TestServer::start().unwrap();
    let zk = client(&server);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/curator/CuratorHolders.java");
    let java = CuratorProgram::compile(&src);
    let mut curator = Proc(
        Command::new("java")
            .args(["-cp", &java.classpath, "CuratorHolders"])
            .args([
                &server.connect_string(),
                "/app/locks/job",
                "/app/election",
                "curator",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut from_curator = BufReader::new(curator.0.stdout.take().unwrap()).lines();
    let ready = from_curator.next().unwrap().unwrap();
    let curator_session = format!("0x{}", ready.strip_prefix("READY ").unwrap());

    // zkr behind Curator: a lock waiter (it runs its command once it holds) and a
    // candidate.
    let dir = tempfile::tempdir().unwrap();
    let (mark, done) = (dir.path().join("ran"), dir.path().join("done"));
    let mut waiter = Proc(
        zkr(&server)
            .args(["lock", "/app/locks/job", "--", "sh", "-c"])
            .arg(format!(
                "echo $ZK_FENCING_TOKEN > {}; while [ ! -e {} ]; do sleep 0.05; done",
                mark.display(),
                done.display()
            ))
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut candidate = Proc(
        zkr(&server)
            .args(["elect", "/app/election", "--id", "zkr", "--", "true"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The library's read/write lock (two readers, a writer waiting), a semaphore lease,
    // a queue of two with one claimed, one member of a double barrier for three.
    let other = client(&server);
    let r1 = zk.read_lock("/app/rw").acquire().unwrap();
    let r2 = other.read_lock("/app/rw").acquire().unwrap();
    let w = other.clone();
    let writer = thread::spawn(move || {
        w.write_lock("/app/rw")
            .acquire_timeout(Duration::from_secs(30))
            .unwrap()
    });
    let lease = zk.semaphore("/app/sem", 3).acquire().unwrap();
    let mut q = zk.queue("/app/q");
    q.put("first").unwrap();
    q.put("second").unwrap();
    let claim = other.queue("/app/q").take_claimed().unwrap();
    let b = other.clone();
    let member = thread::spawn(move || {
        b.double_barrier("/app/bar", 3)
            .enter_timeout(Duration::from_secs(30))
    });
    children_become(&zk, "/app/locks/job", 2);
    children_become(&zk, "/app/election", 2);
    children_become(&zk, "/app/rw", 3);
    children_become(&zk, "/app/bar", 1);

    let v = inspect_json(&server, "/app");
    assert_eq!(v["truncated"], false);
    let kinds: Vec<(&str, &str)> = v["recipes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["path"].as_str().unwrap(), r["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("/app/bar", "double barrier"),
            ("/app/election", "election"),
            ("/app/locks/job", "lock"),
            ("/app/q", "queue"),
            ("/app/rw", "read-write lock"),
            ("/app/sem", "semaphore"),
        ]
    );
    // Curator holds the lock: its session, and the client address Curator stores as
    // the node's data; zkr waits behind it with a higher fencing token.
    let lock = recipe(&v, "/app/locks/job");
    assert_eq!(lock["holder"]["session"], curator_session.as_str());
    assert!(
        lock["holder"]["label"]
            .as_str()
            .is_some_and(|a| !a.is_empty()),
        "{lock}"
    );
    let waiters = lock["waiters"].as_array().unwrap();
    assert_eq!(waiters.len(), 1);
    assert_ne!(waiters[0]["session"], curator_session.as_str());
    assert!(waiters[0]["fencing_token"].as_i64() > lock["holder"]["fencing_token"].as_i64());
    // Curator's latch leads under its id; zkr's candidate is next.
    let election = recipe(&v, "/app/election");
    assert_eq!(election["leader"]["label"], "curator");
    assert_eq!(election["leader"]["session"], curator_session.as_str());
    assert_eq!(election["candidates"][0]["label"], "zkr");
    // The others.
    let rw = recipe(&v, "/app/rw");
    assert_eq!(rw["holders"].as_array().unwrap().len(), 2);
    assert_eq!(rw["holders"][0]["read"], true);
    assert_eq!(rw["waiters"][0]["read"], false);
    assert_eq!(
        recipe(&v, "/app/sem")["leases"].as_array().unwrap().len(),
        1
    );
    let queue = recipe(&v, "/app/q");
    assert_eq!(
        (
            queue["items"].clone(),
            queue["oldest"]["data_length"].clone()
        ),
        (2.into(), 5.into())
    );
    assert_eq!(queue["claims"].as_array().unwrap().len(), 1);
    let bar = recipe(&v, "/app/bar");
    assert_eq!(
        (
            bar["ready"].clone(),
            bar["members"].as_array().unwrap().len()
        ),
        (false.into(), 1)
    );

    // The same as text.
    let text = stdout(&run(&server, &["inspect", "/app"]));
    for says in [
        format!("/app/locks/job: lock held by session {curator_session}, 1 waiting"),
        format!("/app/election: election led by \"curator\" (session {curator_session}), 1 other candidate"),
        "/app/rw: read-write lock, 2 holding, 1 waiting".to_string(),
        "/app/sem: semaphore, 1 lease taken, 0 queued".to_string(),
        "/app/bar: double barrier, 1 entered, filling (no ready node yet)".to_string(),
    ] {
        assert!(text.contains(&says), "{says:?} not in:\n{text}");
    }
    assert!(
        text.contains("/app/q: queue, 2 items, the oldest "),
        "{text}"
    );
    assert!(text.contains(", 1 claimed"), "{text}");
    let missing = run(&server, &["inspect", "/nope"]);
    assert_eq!(missing.status.code(), Some(1));

    // --watch: a look now, another once Curator releases and zkr takes the lock.
    let mut watch = Proc(
        zkr(&server)
            .args(["inspect", "--watch", "--json", "/app/locks/job"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut looks = BufReader::new(watch.0.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&looks.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        recipe(&first, "/app/locks/job")["holder"]["session"],
        curator_session.as_str()
    );
    let stdin = curator.0.stdin.as_mut().unwrap();
    writeln!(stdin, "release").unwrap();
    assert_eq!(from_curator.next().unwrap().unwrap(), "RELEASED");
    let next = loop {
        let look: Value = serde_json::from_str(&looks.next().unwrap().unwrap()).unwrap();
        if look["recipes"] == serde_json::json!([]) {
            continue; // between Curator's release and zkr's node being read: empty
        }
        let holder = &recipe(&look, "/app/locks/job")["holder"];
        if holder["session"] != curator_session.as_str() {
            break look;
        }
    };
    let zkr_holder = &recipe(&next, "/app/locks/job")["holder"];
    assert_eq!(
        zkr_holder["node"], waiters[0]["node"],
        "zkr's waiter took over"
    );
    wait_for(&mark, "\n", Duration::from_secs(10));
    fs::write(&done, "").unwrap();
    assert!(wait_exit(&mut waiter.0, Duration::from_secs(20)).success());
    let token = fs::read_to_string(&mark).unwrap();
    assert_eq!(token.trim(), zkr_holder["fencing_token"].to_string());
    drop(watch);

    drop(curator.0.stdin.take()); // Curator closes its latch: zkr's candidate leads
    assert!(wait_exit(&mut curator.0, Duration::from_secs(20)).success());
    assert!(wait_exit(&mut candidate.0, Duration::from_secs(20)).success());
    r1.release().unwrap();
    r2.release().unwrap();
    writer.join().unwrap().unwrap().release().unwrap();
    lease.release().unwrap();
    claim.release().unwrap();
    zk.close();
    other.close(); // the member's wait ends with its session
    assert!(
        !matches!(member.join().unwrap(), Ok(true)),
        "the barrier for three never filled"
    );
}
