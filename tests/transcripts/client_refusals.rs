//! The client's delivery path with a recipe that sends again at once whenever a request
//! is refused. Found in a CI run: an `OwnedNode` whose read was refused by a closing
//! session (`Closed`, a session-ending error it leaves to the coming session change)
//! sent the read again from the same call, the client refused it again, and the
//! driver's pump never returned. A refusal is delivered once per request, but it does
//! not count as progress: each input moves a recipe's refused requests at most once.
#![allow(clippy::disallowed_methods)]

use std::sync::mpsc;
use std::time::Duration;

use zk_recipes::client::{Client, Error, Options};
use zk_recipes::proto::{PathWatch, Request, Response};
use zk_recipes::recipe::{Machine, OpId, Outbox, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

/// Reads `/x`, and reads it again whenever the read fails: a recipe with no backoff.
#[derive(Default)]
struct Stubborn {
    outbox: Outbox<()>,
    refusals: u64,
}

impl Stubborn {
    fn read(&mut self) {
        self.outbox.send(
            (),
            Request::GetData(PathWatch {
                path: "/x".into(),
                watch: false,
            }),
        );
    }
}

impl Machine for Stubborn {
    fn handle_reply(&mut self, _: Instant, op: OpId, r: Result<Response, Error>) {
        self.outbox.take(op);
        if r.is_err() {
            self.refusals += 1;
            self.read();
        }
    }
    fn handle_watch(&mut self, _: Instant, _: OpId, _: &WatchEvent) {}
    fn handle_session(&mut self, _: Instant, _: SessionChange) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn handle_abandon(&mut self, _: Instant) {}
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.outbox.poll()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn is_done(&self) -> bool {
        false
    }
}

impl Recipe for Stubborn {
    type Event = u64;
    fn poll_event(&mut self) -> Option<u64> {
        None
    }
}

#[test]
fn a_recipe_that_resends_every_refusal_does_not_wedge_the_client() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let t = Instant::ZERO;
        let mut client = Client::new(Options::new("127.0.0.1:1").unwrap(), t);
        client.close(t, t); // every request is refused from now on
        let mut stubborn = Stubborn::default();
        stubborn.read();
        let h = client.add(t, stubborn);
        for i in 1..=10u64 {
            client.handle_timeout(Instant::from_micros(i)); // one input each
        }
        let refusals = client.recipe(h).map(|s| s.refusals).unwrap_or(0);
        let _ = tx.send(refusals);
    });
    let refusals = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the client spun on refusals: no input returned");
    assert!(refusals >= 1, "the refusal is delivered");
    assert!(refusals <= 11, "at most one refusal per input: {refusals}");
}

/// Records the session changes it hears; ends (with an event) when the session does.
#[derive(Default)]
struct Holder {
    heard: Vec<SessionChange>,
    events: std::collections::VecDeque<SessionChange>,
}

impl Machine for Holder {
    fn handle_reply(&mut self, _: Instant, _: OpId, _: Result<Response, Error>) {}
    fn handle_watch(&mut self, _: Instant, _: OpId, _: &WatchEvent) {}
    fn handle_session(&mut self, _: Instant, change: SessionChange) {
        self.heard.push(change);
        self.events.push_back(change);
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn handle_abandon(&mut self, _: Instant) {}
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn is_done(&self) -> bool {
        self.events.is_empty() && self.heard.contains(&SessionChange::Closed)
    }
}

impl Recipe for Holder {
    type Event = SessionChange;
    fn poll_event(&mut self) -> Option<SessionChange> {
        self.events.pop_front()
    }
}

/// A connected client, its handshake answered.
fn connected_client(t: Instant) -> Client {
    use zk_recipes::proto::{encode_connect_response, ConnectResponse};
    let mut client = Client::new(Options::new("127.0.0.1:2181").unwrap(), t);
    assert!(client.poll_transport().is_some(), "it dials");
    client.handle_connected(t);
    let mut out = bytes::BytesMut::new();
    assert!(client.poll_transmit(&mut out), "the connect request");
    let mut answer = bytes::BytesMut::new();
    encode_connect_response(
        &mut answer,
        &ConnectResponse {
            protocol_version: 0,
            timeout_ms: 10_000,
            session_id: 0x42,
            passwd: bytes::Bytes::from_static(&[7; 16]),
            read_only: false,
        },
    );
    client.handle_bytes(t, &answer);
    while client.poll_event().is_some() {}
    client
}

/// Issue 25, item 1: the recipes of a closing client end before closeSession goes out.
/// A lock holder or a leader whose client calls `close()` hears `Closed` (and reports
/// `Lost(SessionClosed)`) at once: the server, which deletes its node once closeSession
/// arrives, may hand the lock to somebody else before the close's reply comes back.
#[test]
fn close_ends_every_hosted_recipe_before_close_session_is_written() {
    let t = Instant::ZERO;
    let mut client = connected_client(t);
    let a = client.add(t, Holder::default());
    let b = client.add(t, Holder::default());
    while client.poll_event().is_some() {}
    client.close(t, Instant::from_micros(5_000_000));
    let mut ended = Vec::new();
    while let Some(event) = client.poll_event() {
        if let zk_recipes::client::ClientEvent::Recipe { id, event } = event {
            let change = event.downcast::<SessionChange>().ok();
            ended.push((id, change));
        }
    }
    assert_eq!(
        ended,
        vec![
            (a.id(), Some(SessionChange::Closed)),
            (b.id(), Some(SessionChange::Closed))
        ],
        "every recipe ended when close() returned, before the server answered"
    );
    let mut out = bytes::BytesMut::new();
    assert!(
        client.poll_transmit(&mut out),
        "closeSession is written after"
    );
    assert_eq!(client.recipes(), 0, "nothing hosted is left");
    // A recipe hosted on the closing client ends at once.
    let c = client.add(t, Holder::default());
    assert!(client.recipe(c).is_none(), "ended at once");
}
