//! `status()` and the status stream agree: once a status stream has delivered a
//! status, `Client::status()` (the driver's published board) says that status or a
//! later one, never an earlier one.
//!
//! Deterministic: the hub is driven by hand on this thread (a core fed a handshake, no
//! socket), while a reader thread holds the board the way `status()` reads it and waits
//! for the stream meanwhile. A hub that hands the new status to the stream before it
//! publishes it on the board lets the reader hear `Connected` on the stream while the
//! board it holds still says `Suspended`; a hub that publishes first cannot reach the
//! stream while the reader holds the board.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant as StdInstant};

use bytes::{Bytes, BytesMut};
use zk_recipes::client::{Client as Core, Options as CoreOptions};
use zk_recipes::proto::{encode_connect_response, ConnectResponse};
use zk_recipes::session::Transport;
use zk_recipes::time::Instant;
use zk_recipes_surface::blocking::hub::Hub;
use zk_recipes_surface::blocking::{rt, Command, Routed, Status, StatusTx};

const SESSION: i64 = 0x5e55;

fn at(ms: u64) -> Instant {
    Instant::from_micros(ms * 1000)
}

/// The core dials (as a driver would, after its backoff if it has one) and is told the
/// socket is up; the time it did.
fn dial(core: &mut Core, mut t: Instant) -> Instant {
    for _ in 0..100 {
        while let Some(transport) = core.poll_transport() {
            if let Transport::Connect { .. } = transport {
                core.handle_connected(t);
                return t;
            }
        }
        t = core.poll_timeout().expect("a reconnect is due").max(t);
        core.handle_timeout(t);
    }
    panic!("the core never dialled");
}

/// The server's answer to the handshake: the session `SESSION`.
fn accept(core: &mut Core, t: Instant) {
    let mut out = BytesMut::new();
    assert!(core.poll_transmit(&mut out), "the core sends its handshake");
    let mut reply = BytesMut::new();
    encode_connect_response(
        &mut reply,
        &ConnectResponse {
            protocol_version: 0,
            timeout_ms: 10_000,
            session_id: SESSION,
            passwd: Bytes::from_static(&[7; 16]),
            read_only: false,
        },
    );
    core.handle_bytes(t, &reply);
}

/// Every status the stream has now.
fn drain(stream: &mut rt::Rx<Status>) -> Vec<Status> {
    std::iter::from_fn(|| stream.try_recv()).collect()
}

#[test]
fn the_board_says_a_status_before_the_stream_delivers_it() {
    let (board, view) = rt::board();
    let mut hub = Hub::new(board);
    let mut core = Core::new(
        CoreOptions::new("127.0.0.1:2181")
            .unwrap()
            .session_timeout(Duration::from_secs(10)),
        at(0),
    );
    let (tx, mut stream) = rt::channel();
    hub.handle(
        &mut core,
        at(0),
        Command::Route(Routed::Statuses(StatusTx(tx))),
    );
    let mut out = BytesMut::new();

    // Connected, then the connection drops: Suspended, on the board and the stream.
    let t = dial(&mut core, at(1));
    accept(&mut core, t);
    hub.flush(&mut core, &mut out, true);
    hub.flush(&mut core, &mut out, true);
    core.handle_disconnect(at(3));
    hub.flush(&mut core, &mut out, false);
    let seen = drain(&mut stream);
    assert!(
        matches!(seen.last(), Some(Status::Suspended)),
        "stream so far: {seen:?}"
    );
    assert_eq!(view.read(|p| p.status), Status::Suspended);

    // The same session back on a new connection: the core has `Reconnected` to give.
    let t = dial(&mut core, at(4));
    accept(&mut core, t);

    // A reader holds the board (as `status()` does while it reads) and meanwhile waits
    // a while for the stream. Whatever the stream gives it then must not be newer than
    // the board it holds.
    let (locked_tx, locked) = mpsc::channel();
    let status_after = view.clone();
    let reader = thread::spawn(move || {
        view.read(|p| {
            locked_tx.send(()).unwrap();
            let heard = stream
                .recv_until(Some(StdInstant::now() + Duration::from_millis(500)))
                .ok()
                .flatten();
            (p.status, heard, stream)
        })
    });
    locked.recv().unwrap();
    // Delivers `Reconnected`: to the stream and to the board, in the hub's order.
    hub.flush(&mut core, &mut out, true);
    let (board_then, heard, mut stream) = reader.join().unwrap();
    if let Some(status) = heard {
        assert_ne!(
            board_then,
            Status::Suspended,
            "the stream delivered {status:?} while the board (status()) still said Suspended"
        );
    }
    // Afterwards both say Connected, with the same session.
    let mut later = heard.into_iter().collect::<Vec<_>>();
    later.extend(drain(&mut stream));
    assert!(
        matches!(
            later.as_slice(),
            [Status::Connected {
                session_id: SESSION,
                ..
            }]
        ),
        "the stream after the reconnect: {later:?}"
    );
    assert!(matches!(
        status_after.read(|p| p.status),
        Status::Connected {
            session_id: SESSION,
            ..
        }
    ));
}
