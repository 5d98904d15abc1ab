//! Recipes: coordination primitives as sans-IO state machines, hosted by
//! [`Client`](crate::client::Client).
//!
//! # The recipe contract
//!
//! Every recipe is a state machine with the same shape ([`Recipe`]):
//!
//! * **Input** — [`handle_reply`](Recipe::handle_reply) for a request it issued (by its
//!   own [`OpId`]), [`handle_watch`](Recipe::handle_watch) for a watch one of its
//!   requests set, [`handle_session`](Recipe::handle_session) for every session state
//!   change, [`handle_timeout`](Recipe::handle_timeout).
//! * **Commands** — plain methods on the concrete type (`acquire`, `release`, `cancel`,
//!   ...). They only change state and queue output; they never block or do I/O.
//! * **Output** — [`poll_request`](Recipe::poll_request) (requests to send, tagged with
//!   the recipe's own op ids), [`poll_event`](Recipe::poll_event) (the recipe's typed
//!   events), [`poll_timeout`](Recipe::poll_timeout) (its next deadline).
//!
//! The host (normally [`Client`](crate::client::Client)) polls in this order after every
//! input or command: `poll_request` until empty (submitting each to the session, and
//! feeding a refusal straight back as an error reply), then `poll_event` until empty;
//! then `poll_timeout`. Requests a recipe issues back to back are sent back to back:
//! ZooKeeper executes one session's requests in order, which recipes use to pipeline.
//!
//! A recipe never sees another recipe's replies or watches, and never reads a clock:
//! `now` comes with every input. Randomness (node ids) comes in its configuration.

pub mod contender;
pub mod lock;

use crate::proto::{ErrorCode, Response};
use crate::session::WatchEvent;
use crate::time::Instant;

/// A recipe's own name for one of its requests.
pub type OpId = u64;

/// A session state change, as recipes see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionChange {
    /// A session was established (the first connection).
    Connected {
        /// Its id: the `ephemeralOwner` of nodes this session creates.
        session_id: i64,
    },
    /// The connection dropped; the session may be alive. Ephemeral nodes are in doubt.
    Suspended,
    /// The same session is back; watches were re-armed by the session.
    Reconnected {
        /// Its id.
        session_id: i64,
    },
    /// The session expired (server-confirmed or the client-side estimate). Terminal.
    Expired,
    /// The session was closed or authentication failed. Terminal.
    Closed,
}

/// The contract every recipe implements; see the [module docs](self).
pub trait Recipe {
    /// A reply to request `op`.
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, ErrorCode>);
    /// A watch set by request `op` fired.
    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent);
    /// The session's state changed.
    fn handle_session(&mut self, now: Instant, change: SessionChange);
    /// Time passed (call at or after `poll_timeout`).
    fn handle_timeout(&mut self, now: Instant);
    /// The next request to send.
    fn poll_request(&mut self) -> Option<(OpId, crate::proto::Request)>;
    /// The next event for the application.
    fn poll_event(&mut self) -> Option<RecipeEvent>;
    /// The next deadline.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Finished: nothing in flight, nothing more will happen; the host may drop it.
    fn is_done(&self) -> bool;
}

/// Events of every recipe kind, as the host surfaces them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecipeEvent {
    /// From a [`lock::Lock`].
    Lock(lock::LockEvent),
}

impl RecipeEvent {
    /// The recipe will report nothing after this event (it may still clean up).
    pub fn is_final(&self) -> bool {
        match self {
            RecipeEvent::Lock(e) => e.ends_attempt(),
        }
    }
}
