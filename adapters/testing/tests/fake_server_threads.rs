//! The fake server leaves no thread behind. A test binary of its own, so that no other
//! test's servers run in the same process while the threads are counted.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use zk_recipes::proto::*;
use zk_recipes_testing::{FakeServer, Misbehaviour, MAX_LIVE_CONNECTIONS};

/// Threads of this process whose name starts with `fake-zk` (Linux only).
fn fake_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("fake-zk"))
        .count()
}

/// The `fake-zk` threads still listed a moment after a stop. The stop joins every thread,
/// but a joined thread's `/proc` entry goes a little after the join returns (the kernel
/// wakes the joiner before it reaps the task; a CI run on a loaded machine saw one left):
/// wait up to two seconds for the count to reach zero. A thread truly left running stays.
fn fake_threads_after_stop() -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let left = fake_threads();
        if left == 0 || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn every_thread_ends_on_stop() {
    let mut hello = BytesMut::new();
    encode_connect(
        &mut hello,
        &ConnectRequest {
            timeout_ms: 6000,
            passwd: Bytes::from_static(&[0; 16]),
            ..Default::default()
        },
    );
    for mode in Misbehaviour::ALL {
        let server = FakeServer::start(mode).unwrap();
        let clients: Vec<TcpStream> = (0..4)
            .map(|_| {
                let mut s = TcpStream::connect(server.addr()).unwrap();
                let _ = s.write_all(&hello);
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        if cfg!(target_os = "linux") {
            assert!(fake_threads() >= 1, "{mode:?}");
        }
        drop(server);
        assert_eq!(fake_threads_after_stop(), 0, "{mode:?}: threads left after stop");
        drop(clients);
    }

    // A client reconnecting in a loop cannot grow the server past its cap: connections
    // beyond it are counted and closed at once.
    let server = FakeServer::start(Misbehaviour::NoHandshake).unwrap();
    let extra = 5;
    let mut clients: Vec<TcpStream> = (0..MAX_LIVE_CONNECTIONS + extra)
        .map(|_| TcpStream::connect(server.addr()).unwrap())
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.connections() < clients.len() {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    if cfg!(target_os = "linux") {
        // A just-spawned thread names itself when it first runs: give it a moment.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while fake_threads() < 1 + MAX_LIVE_CONNECTIONS && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(fake_threads(), 1 + MAX_LIVE_CONNECTIONS);
    }
    for s in &mut clients[MAX_LIVE_CONNECTIONS..] {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        assert_eq!(std::io::Read::read(s, &mut [0u8; 8]).unwrap(), 0);
    }
    drop(server);
    assert_eq!(fake_threads_after_stop(), 0);
}
