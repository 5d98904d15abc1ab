//! One of two recipe machines as one [`Recipe`], so a [`ModelWorld`](super::zk::ModelWorld)
//! (which hosts one machine type) can host either kind on any client: a coordinator or
//! a site, a configuration writer or a reader (the property harnesses and the model
//! checker share it).

use zk_recipes::error::Error;
use zk_recipes::proto::{Request, Response};
use zk_recipes::recipe::{Machine, OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

/// A machine of kind `A` or of kind `B` (and, as its event, an event of either).
// A handful of machines per run: boxing the larger would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Either<A, B> {
    /// The first kind.
    A(A),
    /// The second kind.
    B(B),
}

macro_rules! either {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            Either::A($m) => $e,
            Either::B($m) => $e,
        }
    };
}

impl<A, B> Either<A, B> {
    /// The first kind, if it is one.
    pub fn a(&self) -> Option<&A> {
        match self {
            Either::A(a) => Some(a),
            Either::B(_) => None,
        }
    }

    /// The second kind, if it is one.
    pub fn b(&self) -> Option<&B> {
        match self {
            Either::A(_) => None,
            Either::B(b) => Some(b),
        }
    }
}

impl<A: Machine, B: Machine> Machine for Either<A, B> {
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        either!(self, m => m.handle_reply(now, op, result))
    }
    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        either!(self, m => m.handle_watch(now, op, event))
    }
    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        either!(self, m => m.handle_session(now, change))
    }
    fn handle_timeout(&mut self, now: Instant) {
        either!(self, m => m.handle_timeout(now))
    }
    fn handle_abandon(&mut self, now: Instant) {
        either!(self, m => m.handle_abandon(now))
    }
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        either!(self, m => m.poll_request())
    }
    fn poll_timeout(&self) -> Option<Instant> {
        either!(self, m => m.poll_timeout())
    }
    fn is_done(&self) -> bool {
        either!(self, m => m.is_done())
    }
}

impl<A: Recipe, B: Recipe> Recipe for Either<A, B> {
    type Event = Either<A::Event, B::Event>;
    fn poll_event(&mut self) -> Option<Self::Event> {
        match self {
            Either::A(m) => m.poll_event().map(Either::A),
            Either::B(m) => m.poll_event().map(Either::B),
        }
    }
}
