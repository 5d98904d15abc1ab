//! The node verbs operators use daily (as `zkCli.sh` has them): data kept byte for
//! byte through `get --raw` and `set`, the encodings and JSON, `stat`, versions checked
//! by `set --version` and `delete --version`, `create` in each mode, `delete`/`rm -r`.

use super::*;
use std::io::Write;

/// `zkr ARGS` with `input` on standard input.
fn with_stdin(server: &TestServer, args: &[&str], input: &[u8]) -> Output {
    let mut child = zkr(server)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"))
}

/// Issue 36: three `get`→`set` round trips turned `abc` into `abc\n\n\n\n`, and binary
/// data could not be read back. `set` stores standard input exactly, `get --raw` prints
/// exactly what is stored: any bytes, any number of round trips. Plain `get` adds one
/// newline for the terminal (documented).
/// The node verbs, on one server (each server costs a JVM start).
#[test]
fn node_verbs() {
    let server = TestServer::start().unwrap();
    data_goes_through_get_raw_and_set_unchanged(&server);
    stat_versions_create_and_delete(&server);
    super::discovery::register_while_cmd_runs_and_discover(&server);
}

fn data_goes_through_get_raw_and_set_unchanged(server: &TestServer) {
    let data: &[u8] = b"abc\n\x00\xff\r\n";
    assert!(with_stdin(server, &["set", "/d"], data).status.success());
    for _ in 0..3 {
        let got = run(server, &["get", "--raw", "/d"]);
        assert!(with_stdin(server, &["set", "/d"], &got.stdout)
            .status
            .success());
    }
    assert_eq!(run(server, &["get", "--raw", "/d"]).stdout, data);
    assert_eq!(run(server, &["get", "/d"]).stdout, [data, b"\n"].concat());
    assert_eq!(
        stdout(&run(server, &["get", "--hex", "/d"])),
        "6162630a00ff0d0a\n"
    );
    assert_eq!(
        stdout(&run(server, &["get", "--base64", "/d"])),
        "YWJjCgD/DQo=\n"
    );
    let v = json(&run(server, &["get", "--json", "/d"]));
    assert_eq!(v["path"], "/d");
    assert_eq!(v["data"], serde_json::Value::Null, "not UTF-8");
    assert_eq!(v["data_base64"], "YWJjCgD/DQo=");
    assert_eq!(v["stat"]["version"], 3);
    assert_eq!(v["stat"]["data_length"], 8);
    assert!(run(server, &["set", "/t", "text"]).status.success());
    assert_eq!(json(&run(server, &["get", "--json", "/t"]))["data"], "text");
    let both = run(server, &["get", "--raw", "--hex", "/t"]);
    assert_eq!(both.status.code(), Some(125), "one encoding at a time");
}

fn stat_versions_create_and_delete(server: &TestServer) {
    assert!(run(server, &["set", "/v", "one"]).status.success());

    // stat: zkCli's names, times in UTC; --json.
    let text = stdout(&run(server, &["stat", "/v"]));
    let keys: Vec<&str> = text
        .lines()
        .map(|l| l.split(" = ").next().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "cZxid",
            "ctime",
            "mZxid",
            "mtime",
            "pZxid",
            "cversion",
            "dataVersion",
            "aclVersion",
            "ephemeralOwner",
            "dataLength",
            "numChildren"
        ]
    );
    assert!(text.contains("dataVersion = 0\n") && text.contains("dataLength = 3\n"));
    assert!(
        text.contains("ctime = 20") && text.contains("Z\n"),
        "{text}"
    );
    let v = json(&run(server, &["stat", "--json", "/v"]));
    assert_eq!(
        (v["path"].clone(), v["version"].clone()),
        ("/v".into(), 0.into())
    );
    assert_eq!(run(server, &["stat", "/none"]).status.code(), Some(1));

    // set --version: applied at that version only (exit 2 otherwise, 1 if missing).
    let stale = run(server, &["set", "--version", "7", "/v", "two"]);
    assert_eq!(stale.status.code(), Some(2), "{stale:?}");
    assert!(stderr(&stale).contains("version"), "{stale:?}");
    assert!(run(server, &["set", "--version", "0", "/v", "two"])
        .status
        .success());
    assert_eq!(stdout(&run(server, &["get", "/v"])), "two\n");
    let missing = run(server, &["set", "--version", "0", "/none", "x"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        run(server, &["stat", "/none"]).status.code(),
        Some(1),
        "not created"
    );

    // create: each mode; an existing node (2), a missing parent (1, named), --parents.
    assert_eq!(stdout(&run(server, &["create", "/c", "x"])), "/c\n");
    assert_eq!(run(server, &["create", "/c"]).status.code(), Some(2));
    let orphan = run(server, &["create", "/p/q/r"]);
    assert_eq!(orphan.status.code(), Some(1));
    assert!(stderr(&orphan).contains("--parents"), "{orphan:?}");
    assert_eq!(
        stdout(&run(server, &["create", "--parents", "/p/q/r", "deep"])),
        "/p/q/r\n"
    );
    let seq = stdout(&run(server, &["create", "--sequential", "/p/job-", "a"]));
    assert!(
        seq.starts_with("/p/job-") && seq.trim_end().len() == "/p/job-".len() + 10,
        "{seq}"
    );
    assert!(run(server, &["create", "--container", "/box"])
        .status
        .success());
    assert!(run(server, &["create", "--ttl", "1h", "/leased"])
        .status
        .success());
    assert!(
        run(server, &["create", "--container", "--ttl", "1h", "/bad"])
            .status
            .code()
            == Some(125)
    );

    // delete: version-checked (2), not empty (2), missing (1); rm -r takes the subtree.
    assert_eq!(
        run(server, &["delete", "--version", "5", "/c"])
            .status
            .code(),
        Some(2)
    );
    assert!(run(server, &["delete", "--version", "0", "/c"])
        .status
        .success());
    assert_eq!(run(server, &["delete", "/c"]).status.code(), Some(1));
    let full = run(server, &["delete", "/p"]);
    assert_eq!(full.status.code(), Some(2), "{full:?}");
    assert_eq!(
        json(&run(server, &["tree", "--json", "/p"])),
        serde_json::json!(["/p", seq.trim_end(), "/p/q", "/p/q/r"])
    );
    assert!(run(server, &["rm", "-r", "/p"]).status.success());
    assert_eq!(run(server, &["ls", "/p"]).status.code(), Some(1));
    assert_eq!(
        json(&run(server, &["ls", "--json", "/"])),
        serde_json::json!(["box", "d", "leased", "t", "v", "zookeeper"])
    );
}
