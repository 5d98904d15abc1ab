//! The core driven by a hand-written single-threaded loop over a std non-blocking
//! `TcpStream`: no tokio, no adapter crate. It takes a lock against a real ZooKeeper,
//! holds it briefly and releases it — what an embedded executor, io_uring or a game
//! loop would do with `zk-recipes`.
//!
//! `cargo run --example custom_runtime` starts a server with the test support; with
//! `ZK_ADDR=host:port` it uses that one instead.
// A test (or example) is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant as StdInstant};

use bytes::{Buf, BytesMut};
use zk_recipes::client::{Client, ClientEvent, Options};
use zk_recipes::recipe::lock::{Lock, LockConfig, LockEvent, LockKind};
use zk_recipes::session::{Transport, TransportError};
use zk_recipes::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::var("ZK_ADDR") {
        Ok(addr) => run(&addr),
        Err(_) => {
            let server = zk_recipes_testing::TestServer::start()?;
            run(&server.connect_string())
        }
    }
}

/// Takes and releases the lock `/demo/lock` on the server at `addr` (the test command runs
/// this from `tests/quickstart.rs`).
pub fn run(addr: &str) -> Result<(), Box<dyn std::error::Error>> {
    // The driver owns the clock and the entropy; the core gets both as arguments.
    let epoch = StdInstant::now();
    let now = || Instant::from_micros(epoch.elapsed().as_micros() as u64);
    let entropy = || {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .elapsed()
                .map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    };
    let mut client = Client::new(Options::new(addr)?.seed(entropy()), now());
    let id = zk_recipes::recipe::lock::node_id(entropy(), entropy());
    let lock = client.add(
        now(),
        Lock::new(LockConfig::new("/demo/lock", LockKind::Exclusive, &id)),
    );
    client.command(now(), lock, |l, t| {
        l.acquire(t, Some(t + Duration::from_secs(10)))
    });

    let mut socket: Option<TcpStream> = None;
    let mut out = BytesMut::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut release_at = None;
    let mut released = false;
    loop {
        // 1. Everything the core wants done: dial/close, bytes to write, events.
        while let Some(t) = client.poll_transport() {
            socket = None;
            out.clear();
            if let Transport::Connect { host } = t {
                let target = client.host(host).to_string();
                let dialled = target
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut a| a.next())
                    .ok_or(TransportError::Unreachable)
                    .and_then(|a| {
                        TcpStream::connect_timeout(&a, Duration::from_secs(2))
                            .map_err(|e| TransportError::from(&e))
                    });
                // TLS goes here, in the driver: the core only ever sees plaintext.
                // Wrap the connected socket (e.g. `rustls::ClientConnection` with
                // `rustls::StreamOwned`), finish the handshake, and only then call
                // `handle_connected`; read and write through the TLS stream below, and
                // report a handshake failure as `TransportError::Tls(TlsFailure::..)`
                // (the adapters' feature `tls` does exactly this; see docs/tls.md).
                match dialled {
                    Ok(s) => {
                        s.set_nonblocking(true)?;
                        s.set_nodelay(true)?;
                        socket = Some(s);
                        client.handle_connected(now());
                    }
                    Err(e) => client.handle_transport_error(now(), e),
                }
            }
        }
        if socket.is_some() {
            client.poll_transmit(&mut out);
        }
        while let Some(event) = client.poll_event() {
            match event {
                ClientEvent::Recipe { id, event } if id == lock.id() => {
                    match event.downcast::<LockEvent>() {
                        Ok(LockEvent::Acquired {
                            fencing_token,
                            node,
                        }) => {
                            println!("acquired {node} (fencing token {fencing_token})");
                            release_at = Some(now() + Duration::from_millis(200));
                        }
                        Ok(LockEvent::Released) => {
                            println!("released");
                            released = true;
                        }
                        Ok(other) => println!("lock: {other:?}"),
                        Err(e) => println!("unexpected event {e:?}"),
                    }
                }
                ClientEvent::RecipeDone { id } if id == lock.id() => {
                    client.close(now(), now() + Duration::from_secs(2));
                }
                ClientEvent::Session(e) if e.is_state_change() => println!("session: {e}"),
                _ => {}
            }
        }
        if client.is_ended() {
            return match released {
                true => Ok(()),
                false => Err("the lock ended without being taken and released".into()),
            };
        }
        // 2. Write what the socket takes; read what it has. Never block.
        if let Some(s) = socket.as_mut() {
            while !out.is_empty() {
                match s.write(&out) {
                    Ok(n) => out.advance(n),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        client.handle_transport_error(now(), TransportError::from(&e));
                        break;
                    }
                }
            }
        }
        if let Some(s) = socket.as_mut() {
            match s.read(&mut buf) {
                Ok(0) => client.handle_transport_error(now(), TransportError::Closed),
                Ok(n) => client.handle_bytes(now(), &buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => client.handle_transport_error(now(), TransportError::from(&e)),
            }
        }
        // 3. Time: the core's deadlines, and our own (release after holding 200 ms).
        if release_at.is_some_and(|t| now() >= t) {
            release_at = None;
            client.command(now(), lock, |l, t| l.release(t));
        }
        if client.poll_timeout().is_some_and(|t| now() >= t) {
            client.handle_timeout(now());
        }
        std::thread::sleep(Duration::from_millis(1)); // a real runtime would poll
    }
}
