//! `zkr serve`: the embedded server from the command line. It prints its connect
//! string, serves other zkr processes (and any client), and stops on SIGTERM or SIGINT
//! with exit code 0.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

fn zkr(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zkr"));
    c.args(args);
    c
}

#[test]
fn serve_prints_its_address_serves_and_stops_on_a_signal() {
    for sig in ["-TERM", "-INT"] {
        let mut server = zkr(&["serve", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(server.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let cs = first.trim().to_string();
        assert!(cs.starts_with("127.0.0.1:"), "{cs:?}");

        // Other zkr processes use it as they would a ZooKeeper.
        let set = zkr(&["-s", &cs, "set", "/app/config", "v1"]).output().unwrap();
        assert!(set.status.success(), "{set:?}");
        let get = zkr(&["-s", &cs, "get", "/app/config"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&get.stdout).trim(), "v1", "{get:?}");

        assert!(Command::new("kill")
            .arg(sig)
            .arg(server.id().to_string())
            .status()
            .unwrap()
            .success());
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = server.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "zkr serve did not stop on {sig}");
            thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(0), "{sig}");
        // Stopped: nothing serves there any more.
        let addr: std::net::SocketAddr = cs.parse().unwrap();
        assert!(std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
    }
}

#[test]
fn serve_on_a_taken_port_fails_clearly() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = zkr(&["serve", "--port", &port]).output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("serve on 127.0.0.1:{port}")), "{err}");
}
