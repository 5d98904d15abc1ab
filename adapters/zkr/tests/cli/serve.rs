//! `zkr serve`: the embedded server from the command line. It prints its connect
//! string, says it is for development and tests, serves other zkr processes (and any
//! client), and stops on SIGTERM or SIGINT with exit code 0 (a process killed any other
//! way has no exit code, so it cannot pass).

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{signal, wait_exit, Proc};

fn zkr(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zkr"));
    c.env_remove("ZK_SERVERS").args(args);
    c
}

#[test]
fn serve_prints_its_address_serves_and_stops_on_a_signal() {
    for sig in ["-TERM", "-INT"] {
        if sig == "-INT" && super::sigint_ignored_here() {
            continue; // ignored in this run (a background job): zkr keeps it ignored
        }
        let mut server = Proc(
            zkr(&["serve", "--port", "0"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut first = String::new();
        BufReader::new(server.0.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let cs = first.trim().to_string();
        assert!(cs.starts_with("127.0.0.1:"), "{cs:?}");

        // Other zkr processes use it as they would a ZooKeeper.
        let set = zkr(&["-s", &cs, "set", "/app/config", "v1"])
            .output()
            .unwrap();
        assert!(set.status.success(), "{set:?}");
        let get = zkr(&["-s", &cs, "get", "/app/config"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&get.stdout).trim(), "v1", "{get:?}");

        signal(&server.0, sig);
        let status = wait_exit(&mut server.0, Duration::from_secs(30));
        assert_eq!(status.code(), Some(0), "{sig}: {status:?}");
        let mut err = String::new();
        server
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(err.contains("for development and tests"), "{err}");
        // Stopped: nothing serves there any more.
        let addr: SocketAddr = cs.parse().unwrap();
        assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
    }
}

#[test]
fn serve_on_a_taken_port_fails_clearly() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = zkr(&["serve", "--port", &port]).output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("serve on 127.0.0.1:{port}")), "{err}");
}
