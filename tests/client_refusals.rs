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
use zk_recipes::recipe::{OpId, Outbox, Recipe, SessionChange};
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

impl Recipe for Stubborn {
    type Event = u64;
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
    fn poll_event(&mut self) -> Option<u64> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn is_done(&self) -> bool {
        false
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
