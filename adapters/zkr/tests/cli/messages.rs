//! What zkr says when something is wrong (issue 36's findings): the missing chroot by
//! name, where CMD goes, what it tries while no server answers, a bad path refused
//! before connecting, what a `--timeout` waited for, a counter that would overflow,
//! and one wording for a session that ended, whichever command noticed.

use super::*;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `zkr ARGS` against a closed port: what can be refused before connecting is refused
/// at once (a connect would take the 10 s given, and say so).
fn unconnected(args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_zkr"))
        .env("ZK_SERVERS", "127.0.0.1:1")
        .args(["--connect-timeout", "10s"])
        .args(args)
        .output()
        .unwrap();
    (o, started.elapsed())
}

#[test]
fn refused_before_connecting() {
    // A bad path (was: checked only once connected).
    let (o, took) = unconnected(&["get", "/bad//path"]);
    assert_eq!(o.status.code(), Some(125));
    assert_eq!(
        stderr(&o),
        "zkr: invalid path \"/bad//path\": path has an empty segment ('//')\n"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    // CMD without `--`: clap's error, then where CMD goes.
    for args in [&["lock", "/x", "echo", "hi"][..], &["lock", "/x"][..]] {
        let (o, _) = unconnected(args);
        assert_eq!(o.status.code(), Some(125), "{args:?}");
        assert!(
            stderr(&o).contains("hint: the command to run goes after `--`: zkr lock PATH"),
            "{args:?}: {o:?}"
        );
    }
    // An ephemeral create (it would end as zkr exits), a 4-byte counter's add out of
    // range, a recursive delete of /.
    for (args, says) in [
        (
            &["create", "-e", "/e"][..],
            "an ephemeral node ends with zkr's session",
        ),
        (
            &["counter", "--int32", "/c", "add", "3000000000"][..],
            "3000000000 does not fit a 4-byte counter (--int32)",
        ),
        (&["rm", "-r", "/"][..], "refusing to delete /"),
    ] {
        let (o, took) = unconnected(args);
        assert_eq!(o.status.code(), Some(125), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {o:?}");
        assert!(took < Duration::from_secs(5), "{args:?}: {took:?}");
    }
}

/// No server: after a second zkr says what it tries and for how long; at the end, for
/// how long it tried (was: silent for the whole connect timeout).
#[test]
fn an_unreachable_server_says_what_is_tried() {
    let o = Command::new(env!("CARGO_BIN_EXE_zkr"))
        .env("ZK_SERVERS", "127.0.0.1:1")
        .args(["--connect-timeout", "2s", "ls", "/"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    assert_eq!(
        stderr(&o),
        "zkr: no session yet with 127.0.0.1:1; trying for up to 2s (--connect-timeout)\n\
         zkr: connect to 127.0.0.1:1 (tried for 2s, --connect-timeout): no ZooKeeper server \
         reachable: 127.0.0.1:1: connection refused\n"
    );
}

#[test]
fn messages_name_the_chroot_the_timeout_and_the_overflow() {
    let server = TestServer::start().unwrap();
    // A missing chroot, by name (was: "ZooKeeper error on /: node does not exist").
    let o = zkr(&server)
        .args(["-s", &format!("{}/tenant", server.connect_string())])
        .args(["get", "/x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    assert_eq!(
        stderr(&o),
        format!(
            "zkr: the chroot /tenant of --server {cs}/tenant does not exist on the server; \
             create it first: zkr --server {cs} create --parents /tenant\n",
            cs = server.connect_string()
        )
    );
    // A working server prints nothing while connecting.
    let o = run(&server, &["ls", "/"]);
    assert_eq!(stderr(&o), "");

    // What each --timeout waited for (was: "timed out").
    let zk = client(&server);
    let held = zk.lock("/locks/busy").acquire().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["lock", "/locks/busy", "--timeout", "300ms", "--", "true"],
            "zkr: timed out after 300ms waiting for the lock /locks/busy (--timeout)\n",
        ),
        (
            &["queue", "take", "/q", "--timeout", "300ms"],
            "zkr: timed out after 300ms waiting for an item: queue /q stayed empty (--timeout)\n",
        ),
        (
            &["barrier", "/bar", "--count", "2", "--timeout", "300ms"],
            "zkr: timed out after 300ms entering barrier /bar: fewer than 2 participants came \
             (--timeout)\n",
        ),
        (
            &[
                "elect",
                "/el",
                "--id",
                "b",
                "--timeout",
                "300ms",
                "--",
                "true",
            ],
            "",
        ),
    ];
    let leader = zk.election("/el", "a").join().unwrap();
    for (args, says) in cases {
        let o = run(&server, args);
        assert_eq!(o.status.code(), Some(124), "{args:?}: {o:?}");
        if says.is_empty() {
            assert_eq!(
                stderr(&o),
                "zkr: timed out after 300ms waiting to lead the election /el as \"b\" \
                 (--timeout)\n"
            );
        } else {
            assert_eq!(stderr(&o), says, "{args:?}");
        }
    }
    leader.close().unwrap();
    held.release().unwrap();

    // A counter add that would overflow: refused, nothing written (was: wrapped).
    assert_eq!(stdout(&run(&server, &["counter", "/n", "add", "3"])), "3\n");
    let o = run(&server, &["counter", "/n", "add", "9223372036854775807"]);
    assert_eq!(o.status.code(), Some(125));
    assert_eq!(
        stderr(&o),
        "zkr: counter /n: adding 9223372036854775807 to the counter's 3 leaves its 64-bit \
         range; nothing was written\n"
    );
    assert_eq!(stdout(&run(&server, &["counter", "/n"])), "3\n");
    let o = run(&server, &["counter", "--int32", "/m", "add", "2147483647"]);
    assert_eq!(stdout(&o), "2147483647\n");
    let o = run(&server, &["counter", "--int32", "/m", "add", "1"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(stderr(&o).contains("leaves its 32-bit range"), "{o:?}");
}

/// The server gone: a waiting `queue take` and a `watch` end with the same words for
/// the same cause (were: "client closed" and "the session ended").
#[test]
fn a_session_that_ended_reads_the_same_everywhere() {
    let mut server = TestServer::start().unwrap();
    let spawn = |args: &[&str]| {
        Proc(
            zkr(&server)
                .args(["--session-timeout", "2s"])
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        )
    };
    let mut take = spawn(&["queue", "take", "/q"]);
    let mut watch = spawn(&["watch", "/w"]);
    let mut ready = String::new();
    BufReader::new(watch.0.stderr.as_mut().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready, "zkr: watching /w\n");
    thread::sleep(Duration::from_millis(300)); // the take is waiting
    server.kill().unwrap();
    for (p, what) in [(&mut take, "queue take /q"), (&mut watch, "watch /w")] {
        assert_eq!(
            wait_exit(&mut p.0, Duration::from_secs(15)).code(),
            Some(125)
        );
        let mut rest = String::new();
        std::io::Read::read_to_string(p.0.stderr.as_mut().unwrap(), &mut rest).unwrap();
        assert_eq!(
            rest,
            format!("zkr: {what}: the ZooKeeper session expired\n"),
            "{what}"
        );
    }
}
