//! Recipes: coordination primitives as sans-IO state machines, hosted by
//! [`Client`](crate::client::Client).
//!
//! # The recipe contract
//!
//! Every recipe is a state machine with the same shape: a [`Machine`] (what the host
//! drives) and a [`Recipe`] (the events it reports):
//!
//! * **Input** — [`handle_reply`](Machine::handle_reply) for a request it issued (by its
//!   own [`OpId`]), [`handle_watch`](Machine::handle_watch) for a watch one of its
//!   requests set, [`handle_session`](Machine::handle_session) for every session state
//!   change, [`handle_timeout`](Machine::handle_timeout), and
//!   [`handle_abandon`](Machine::handle_abandon) when its owner went away.
//! * **Commands** — plain methods on the concrete type (`acquire`, `release`, ...). They
//!   only change state and queue output; they never block or do I/O. A command that
//!   answers at once returns its answer; one that needs the server reports its outcome
//!   as an event, and the recipe's module says which events end which command.
//! * **Output** — [`poll_request`](Machine::poll_request) (requests to send, tagged with
//!   the recipe's own op ids), [`poll_event`](Recipe::poll_event) (the recipe's typed
//!   events), [`poll_timeout`](Machine::poll_timeout) (its next deadline).
//!
//! The host (normally [`Client`](crate::client::Client)) polls in this order after every
//! input or command: `poll_request` until empty (submitting each to the session, and
//! feeding a refusal straight back as an error reply), then `poll_event` until empty;
//! then `poll_timeout`. Requests a recipe issues back to back are sent back to back:
//! ZooKeeper executes one session's requests in order, which recipes use to pipeline.
//!
//! A recipe never sees another recipe's replies or watches, and never reads a clock:
//! `now` comes with every input. Randomness (node ids) comes in its configuration.
//!
//! A recipe of this crate embeds a [`kit::Kit`] (its outbox, retry, events, session
//! and parent-creation rounds) and implements [`kit::Protocol`], which makes it a
//! `Machine` and a `Recipe`: the plumbing is written once there (see `docs/design.md`, "Adding a
//! recipe").
//!
//! # Rules every recipe keeps (and the helpers here that make them easy)
//!
//! * **Liveness.** Every request that fails with a retryable error
//!   ([`Error::is_retryable`]: connection loss, a local or server refusal) is retried —
//!   after [`Reconnected`](SessionChange::Reconnected) when the session is suspended,
//!   else after a backoff ([`Retry`]) — or the recipe reports a final event. A refusal is never
//!   taken for success. The [`Outbox`] keeps each request's purpose so a reply always
//!   finds its reason.
//! * **Fresh reads.** A read that must not come from a lagging follower (after a
//!   reconnect, or to decide recovery) is sent right behind a `sync`. If that `sync`
//!   fails, the read's answer may be stale: [`Outbox::answer`] turns it into a
//!   connection loss (read again), once, for every recipe. (A `sync` brings the whole
//!   server up to date, whatever its path; so every read of the recipe sent while it
//!   is unanswered counts as behind it. The server left the watch of a watched one:
//!   the lock's own-node reads, the group view and the node watcher see that in
//!   [`Outbox::answer_armed`] and ask for no second; elsewhere the read made again may
//!   leave a second registration, harmless: its events are heard twice.)
//! * **Cleanliness.** A recipe that ends has deleted what it created (or its session
//!   ended, taking its ephemeral nodes along). The host forgets its watch registrations.
//! * **Session semantics.** `Closed` ends every recipe with a final event; so does
//!   `Expired`, unless the recipe is made to carry on into the next session (then it
//!   waits for `Connected`, and `Closed` follows `Expired` when none will come).

pub mod barrier;
pub mod cache;
pub mod config;
pub mod contender;
pub mod delay_queue;
pub mod discovery;
pub mod double_barrier;
pub mod election;
pub mod group;
pub mod inspect;
pub mod kit;
pub mod lease;
pub mod lock;
pub mod multi_lock;
pub mod naming;
pub mod node;
pub mod partitioner;
pub mod path;
pub mod queue;
pub mod rendezvous;
pub mod semaphore;
pub mod ttl_node;
pub mod two_phase;
pub mod value;
pub(crate) mod watcher;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::any::Any;
use core::fmt;
use core::time::Duration;

use crate::error::Error;
use crate::proto::{ErrorCode, Request, Response};
use crate::session::WatchEvent;
use crate::time::Instant;

/// A recipe's own name for one of its requests.
pub type OpId = u64;

/// A session state change, as recipes see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionChange {
    /// A session was established (the first connection, or a new session after an
    /// expiry). Also given to a recipe when it is hosted on a live session.
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
    /// The session expired (server-confirmed or the client-side estimate): its
    /// ephemeral nodes and watches are gone. Recipes bound to the session end; a
    /// recipe that carries on into the next session (an election candidate that
    /// re-joins, a group member re-created) waits for the next `Connected`. If no new
    /// session follows, `Closed` comes right after.
    Expired,
    /// The session was closed or authentication failed. Terminal.
    Closed,
}

impl SessionChange {
    /// The error a recipe still running ends with when the session ends this way.
    pub fn end_error(self) -> Option<Error> {
        match self {
            SessionChange::Expired => Some(Error::SessionExpired),
            SessionChange::Closed => Some(Error::Closed),
            _ => None,
        }
    }
}

/// What the recipes answered by one shared listing derive from it, built by the first
/// that needs it and read by the others (one value of any type; a recipe that finds
/// another type there replaces it).
#[derive(Default)]
pub struct SharedListing {
    derived: Option<Box<dyn Any>>,
}

impl fmt::Debug for SharedListing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedListing")
            .field("derived", &self.derived.is_some())
            .finish()
    }
}

impl SharedListing {
    /// The value of type `T` derived from the listing, built by `build` if there is none
    /// yet (or one of another type). Always `Some` (an `Option` only to stay total).
    pub fn get_or_build<T: Any>(&mut self, build: impl FnOnce() -> T) -> Option<&T> {
        if !self.derived.as_ref().is_some_and(|d| d.is::<T>()) {
            self.derived = Some(Box::new(build()));
        }
        self.derived.as_ref().and_then(|d| d.downcast_ref::<T>())
    }
}

/// What a host drives in every recipe: its inputs (`handle_*`) and every output but its
/// events (`poll_request`, `yields`, `poll_timeout`, `is_done`); see the
/// [module docs](self). Object-safe: a host stores recipes of every type as
/// [`AnyRecipe`], whose supertrait this is. A recipe implements it beside [`Recipe`]
/// (its events); import it to drive a recipe by hand.
pub trait Machine: Send + 'static {
    /// A reply to request `op`: the server's answer, or the error it failed with
    /// (`ConnectionLoss`, a local refusal such as `Overloaded` or `Closed`, ...).
    /// Replies come in the order the requests were sent, except a local refusal: it
    /// comes at once, before the replies to requests sent earlier.
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>);
    /// A reply to request `op` (a listing) that answers other hosted recipes' identical
    /// requests too (see [`Session::submit_from`](crate::session::Session::submit_from)):
    /// read in place; `shared` keeps what one recipe derives from it for the next ones
    /// (see [`SharedListing`]). By default a copy goes to
    /// [`handle_reply`](Self::handle_reply).
    fn handle_shared_reply(
        &mut self,
        now: Instant,
        op: OpId,
        result: &Result<Response, Error>,
        shared: &mut SharedListing,
    ) {
        let _ = shared;
        self.handle_reply(now, op, result.clone())
    }
    /// A watch set by request `op` fired.
    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent);
    /// The session's state changed.
    fn handle_session(&mut self, now: Instant, change: SessionChange);
    /// Time passed (called at or after `poll_timeout`, possibly earlier).
    fn handle_timeout(&mut self, now: Instant);
    /// The owner went away (a dropped guard, handle or future): clean up what was
    /// created and end.
    fn handle_abandon(&mut self, now: Instant);
    /// The next request to send.
    fn poll_request(&mut self) -> Option<(OpId, Request)>;
    /// May request `op` (just polled) **yield**: wait, while it is queued in the
    /// session, behind requests other recipes submit later (see
    /// [`Session::submit_from`](crate::session::Session::submit_from))? For
    /// requests nobody else waits for, such as a lock waiter's entry: then a holder's
    /// release is not queued behind thousands of them. A recipe's own requests keep
    /// their order whatever it answers. By default, no.
    fn yields(&self, op: OpId) -> bool {
        let _ = op;
        false
    }
    /// The next deadline.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Finished: nothing in flight, nothing more will happen; the host drops it.
    fn is_done(&self) -> bool;
}

/// The contract every recipe implements: a [`Machine`] (what the host drives) that
/// reports typed events; see the [module docs](self).
///
/// Any type implementing it can be hosted by a [`Client`](crate::client::Client) and
/// by both adapters, including recipes written outside this crate.
pub trait Recipe: Machine {
    /// What the recipe reports to its user.
    type Event: Clone + fmt::Debug + Send + 'static;
    /// The next event for the application.
    fn poll_event(&mut self) -> Option<Self::Event>;
}

/// The form of [`Recipe`] a host stores (object-safe: events come out type-erased as
/// [`AnyEvent`]); implemented for every `Recipe` (never implement it yourself). The
/// host drives it through its supertrait [`Machine`].
pub trait AnyRecipe: Machine {
    /// [`Recipe::poll_event`], boxed.
    fn poll_any_event(&mut self) -> Option<AnyEvent>;
    /// The concrete recipe, for commands.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// The concrete recipe, for getters.
    fn as_any(&self) -> &dyn Any;
}

impl<R: Recipe> AnyRecipe for R {
    fn poll_any_event(&mut self) -> Option<AnyEvent> {
        self.poll_event().map(AnyEvent::new)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

trait EventBox: Any + Send + fmt::Debug {
    fn clone_box(&self) -> Box<dyn EventBox>;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    fn as_any(&self) -> &dyn Any;
}

impl<E: Clone + fmt::Debug + Send + 'static> EventBox for E {
    fn clone_box(&self) -> Box<dyn EventBox> {
        Box::new(self.clone())
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A recipe event with its type erased, as the host carries it; the recipe's owner
/// knows the type and gets it back with [`downcast`](AnyEvent::downcast).
///
/// ```
/// use zk_recipes::recipe::AnyEvent;
/// let e = AnyEvent::new(42u32);
/// assert_eq!(e.downcast_ref::<u32>(), Some(&42));
/// assert_eq!(e.downcast::<u32>().ok(), Some(42));
/// ```
pub struct AnyEvent(Box<dyn EventBox>);

impl AnyEvent {
    /// Wraps an event.
    pub fn new<E: Clone + fmt::Debug + Send + 'static>(event: E) -> Self {
        AnyEvent(Box::new(event))
    }

    /// The event, if it is an `E`.
    pub fn downcast<E: 'static>(self) -> Result<E, AnyEvent> {
        if self.0.as_any().is::<E>() {
            match self.0.into_any().downcast::<E>() {
                Ok(e) => Ok(*e),
                // Unreachable (checked above); an event is never lost all the same.
                Err(_) => Err(AnyEvent::new(())),
            }
        } else {
            Err(self)
        }
    }

    /// A reference to the event, if it is an `E`.
    pub fn downcast_ref<E: 'static>(&self) -> Option<&E> {
        self.0.as_any().downcast_ref::<E>()
    }
}

impl Clone for AnyEvent {
    fn clone(&self) -> Self {
        AnyEvent(self.0.clone_box())
    }
}

impl fmt::Debug for AnyEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The requests a recipe has issued and what each was for: every recipe's
/// bookkeeping, written once. `P` is the recipe's own "purpose" type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Outbox<P> {
    next: OpId,
    in_flight: Vec<InFlight<P>>,
    queue: VecDeque<(OpId, Request)>,
    /// The `sync`s in flight, oldest first (rarely more than one).
    syncs: Vec<OpId>,
}

/// One request of an [`Outbox`] waiting for its reply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct InFlight<P> {
    id: OpId,
    purpose: P,
    /// What kind of request it is, for [`Outbox::answer`].
    kind: Kind,
    /// A read that leaves a watch (`exists`: also on a missing node).
    watch: bool,
    exists: bool,
    /// A read sent while a `sync` of this outbox was unanswered: that sync's op.
    behind: Option<OpId>,
    /// That sync failed: this read's answer may come from a lagging follower.
    unsynced: bool,
}

/// Requests as [`Outbox::answer`] tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Sync,
    /// Answered by the server the session is connected to, from its own state (which
    /// a follower may have from before a write the client already saw).
    Read,
    Other,
}

impl Kind {
    fn of(request: &Request) -> Kind {
        match request {
            Request::Sync(_) => Kind::Sync,
            Request::Exists(_)
            | Request::GetData(_)
            | Request::GetChildren(_)
            | Request::GetChildren2(_)
            | Request::GetAllChildrenNumber(_)
            | Request::GetEphemerals(_)
            | Request::GetAcl(_)
            | Request::MultiRead(_) => Kind::Read,
            _ => Kind::Other,
        }
    }
}

impl<P> Default for Outbox<P> {
    fn default() -> Self {
        Outbox {
            next: 1,
            in_flight: Vec::new(),
            queue: VecDeque::new(),
            syncs: Vec::new(),
        }
    }
}

impl<P> Outbox<P> {
    /// Queues `request` for `purpose`; returns its op id.
    pub fn send(&mut self, purpose: P, request: Request) -> OpId {
        let id = self.next;
        self.next += 1;
        let kind = Kind::of(&request);
        let exists = matches!(request, Request::Exists(_));
        let watch = match &request {
            Request::Exists(r)
            | Request::GetData(r)
            | Request::GetChildren(r)
            | Request::GetChildren2(r) => r.watch,
            _ => false,
        };
        // Replies come in the order requests were sent: a read queued after a sync
        // still unanswered is answered after it, from the state the sync brought.
        let behind = match kind {
            Kind::Read => self.syncs.last().copied(),
            Kind::Sync => {
                self.syncs.push(id);
                None
            }
            Kind::Other => None,
        };
        self.in_flight.push(InFlight {
            id,
            purpose,
            kind,
            watch,
            exists,
            behind,
            unsynced: false,
        });
        self.queue.push_back((id, request));
        id
    }

    /// The purpose of `op`, removed (its reply arrived). `None` for an op this outbox
    /// does not know (a late reply after [`clear`](Self::clear)). Prefer
    /// [`answer`](Self::answer), which also reads a reply behind a failed `sync` as
    /// lost; `take` suits a recipe that judges such replies itself (a cache's load, a
    /// configuration reader's round).
    pub fn take(&mut self, op: OpId) -> Option<P> {
        self.remove(op).map(|f| f.purpose)
    }

    /// The purpose of `op`, removed, and its reply as the recipe should read it: the
    /// answer to a read sent while a `sync` of this outbox was unanswered, if that
    /// `sync` failed (refused by the
    /// session, lost with its connection) may come from a follower that lags behind
    /// what this client already saw, so a node found (or found missing) there reads as
    /// [`Error::ConnectionLoss`]: not known, read again (after a `sync` that works).
    /// Other errors are kept: they do not depend on the follower's state. Every
    /// recipe that syncs before a read it relies on takes its replies here, so none
    /// keeps its own "the last sync failed" flag.
    pub fn answer(
        &mut self,
        op: OpId,
        result: Result<Response, Error>,
    ) -> Option<(P, Result<Response, Error>)> {
        self.answer_armed(op, result).map(|(p, r, _)| (p, r))
    }

    /// [`answer`](Self::answer), and what became of the watch the request asked for:
    /// `None` if it asked for none, else whether the server left it (an answer read as
    /// lost may still have left one: a recipe that keeps track of its watches reads it
    /// here, and does not ask for a second).
    pub fn answer_armed(
        &mut self,
        op: OpId,
        result: Result<Response, Error>,
    ) -> Option<(P, Result<Response, Error>, Option<bool>)> {
        let f = self.remove(op)?;
        if f.kind == Kind::Sync && result.is_err() {
            for behind in self.in_flight.iter_mut().filter(|b| b.behind == Some(op)) {
                behind.unsynced = true;
            }
        }
        let missing = result == Err(Error::Server(ErrorCode::NoNode));
        // `exists` of a missing node watches for its creation; other reads of it fail.
        let armed = f.watch.then_some(result.is_ok() || (missing && f.exists));
        let stale = f.unsynced && (result.is_ok() || missing);
        let result = if stale {
            Err(Error::ConnectionLoss)
        } else {
            result
        };
        Some((f.purpose, result, armed))
    }

    /// [`take`](Self::take) for a reply a recipe reads in place (a listing shared
    /// with other requesters): its purpose, and whether it was sent behind a `sync`
    /// that failed (then [`answer`](Self::answer) would read it as lost).
    pub fn take_unsynced(&mut self, op: OpId) -> Option<(P, bool)> {
        self.remove(op).map(|f| (f.purpose, f.unsynced))
    }

    fn remove(&mut self, op: OpId) -> Option<InFlight<P>> {
        let at = self.in_flight.iter().position(|f| f.id == op)?;
        let f = self.in_flight.swap_remove(at);
        if f.kind == Kind::Sync {
            self.syncs.retain(|&s| s != op);
            if self.syncs.is_empty() {
                self.syncs = Vec::new(); // as `in_flight` below
            }
        }
        if self.in_flight.is_empty() {
            // Nothing in flight: give the buffer back (see `poll`).
            self.in_flight = Vec::new();
        }
        Some(f)
    }

    /// The purpose of `op`, left in place.
    pub fn get(&self, op: OpId) -> Option<&P> {
        self.in_flight
            .iter()
            .find(|f| f.id == op)
            .map(|f| &f.purpose)
    }

    /// Is a request whose purpose matches `f` in flight?
    pub fn any(&self, f: impl Fn(&P) -> bool) -> bool {
        self.in_flight.iter().any(|i| f(&i.purpose))
    }

    /// How many requests are in flight.
    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    /// Nothing in flight and nothing queued.
    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty() && self.queue.is_empty()
    }

    /// Forgets everything (the session ended: every request was answered).
    pub fn clear(&mut self) {
        self.in_flight.clear();
        self.queue.clear();
        self.syncs.clear();
    }

    /// The next request to send (for [`Machine::poll_request`]).
    pub fn poll(&mut self) -> Option<(OpId, Request)> {
        if self.queue.is_empty() {
            // Drained: give the buffer back. A recipe spends most of its life waiting
            // with nothing to send; thousands of them hosted by one client would
            // otherwise each keep room for a few requests.
            if self.queue.capacity() > 0 {
                self.queue = VecDeque::new();
            }
            return None;
        }
        // Popped last, straight into the caller's place (a request is 128 bytes).
        self.queue.pop_front()
    }
}

/// When a recipe may retry what failed with a retryable error: while the session is
/// suspended, not until `Reconnected` (the session would only queue the request);
/// while connected (a refusal: too many requests pending, throttled), after a backoff
/// of 10 ms doubling up to 2 s, reset by [`succeeded`](Retry::succeeded).
///
/// Each backoff is jittered into `[base / 2, base]` so that many machines refused at
/// the same moment (thousands of waiters on one throttled session) do not all come
/// back at the same moment. The core has no random source: the jitter is a hash of
/// the machine's id ([`for_id`](Retry::for_id)), the session id and the attempt
/// number, so a run is reproducible and different machines spread out.
///
/// ```
/// use zk_recipes::recipe::{Retry, SessionChange};
/// use zk_recipes::time::Instant;
/// let mut r = Retry::for_id("3f2a-contender");
/// let t = Instant::from_micros(1_000);
/// r.failed(t);
/// assert!(!r.allows(t));
/// let at = r.deadline().unwrap();
/// assert!(at >= Instant::from_micros(6_000) && at <= Instant::from_micros(11_000));
/// r.session(SessionChange::Suspended);
/// assert_eq!(r.deadline(), None); // wait for the reconnect, not the clock
/// r.session(SessionChange::Reconnected { session_id: 1 });
/// assert!(r.allows(t)); // at once
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Retry {
    failures: u32,
    at: Option<Instant>,
    suspended: bool,
    /// The machine's id, hashed: spreads the backoffs of machines in one session.
    salt: u64,
    /// The session the machine last heard of (0 before one).
    session_id: i64,
    /// Waits drawn by [`back_off`](Retry::back_off): each draw differs.
    draws: u32,
}

impl Retry {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(2);

    /// A retry helper whose jitter is derived from `id` (the machine's unique
    /// contender id, say). [`Retry::default`] has a fixed salt: machines built that way
    /// in one session back off in step.
    pub fn for_id(id: &str) -> Retry {
        use core::hash::Hasher;
        let mut h = crate::hash::FxHasher::default();
        h.write(id.as_bytes());
        Retry {
            salt: h.finish(),
            ..Retry::default()
        }
    }

    /// A retryable failure at `now`: the next attempt waits `base` (10 ms doubling per
    /// failure, at most 2 s) jittered into `[base / 2, base]`.
    pub fn failed(&mut self, now: Instant) {
        let base = Self::FIRST
            .saturating_mul(1 << self.failures.min(10))
            .min(Self::MAX);
        let half = base / 2;
        let span = u64::try_from(half.as_micros()).unwrap_or(u64::MAX);
        let jitter = self.mix() % span.saturating_add(1);
        self.failures = self.failures.saturating_add(1);
        self.at = Some(now + half + Duration::from_micros(jitter));
    }

    /// A helper whose jitter is derived from `seed` (entropy from the driver).
    pub fn with_seed(seed: u64) -> Retry {
        Retry {
            salt: seed,
            ..Retry::default()
        }
    }

    /// Not a failure, a wait for someone else (a compare-and-set race lost): the next
    /// attempt waits a delay drawn in `[span / 2, span]` from the salt, the session id
    /// and the number of draws so far. Failures count on unchanged.
    pub fn back_off(&mut self, now: Instant, span: Duration) {
        let half = span / 2;
        let width = u64::try_from((span - half).as_micros()).unwrap_or(u64::MAX);
        self.draws = self.draws.wrapping_add(1);
        let mut z = self.mix() ^ u64::from(self.draws).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let jitter = z % width.saturating_add(1);
        self.at = Some(now + half + Duration::from_micros(jitter));
    }

    /// SplitMix64's finaliser over the salt, the session id and the attempt number.
    fn mix(&self) -> u64 {
        let mut z = self
            .salt
            .wrapping_add((self.session_id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .wrapping_add(u64::from(self.failures).wrapping_mul(0xD1B5_4A32_D192_ED03));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Something worked: the next failure waits the shortest time again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// Follows the session: suspended ⇒ wait; back ⇒ retry at once.
    pub fn session(&mut self, change: SessionChange) {
        match change {
            SessionChange::Suspended => self.suspended = true,
            SessionChange::Connected { session_id } | SessionChange::Reconnected { session_id } => {
                self.suspended = false;
                self.at = None;
                self.session_id = session_id;
            }
            SessionChange::Expired | SessionChange::Closed => {}
        }
    }

    /// The id of the session last heard of (0 before one).
    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// Is the session suspended (as far as this recipe heard)?
    pub fn is_suspended(&self) -> bool {
        self.suspended
    }

    /// May the recipe send its retries at `now`?
    pub fn allows(&self, now: Instant) -> bool {
        !self.suspended && self.at.is_none_or(|at| now >= at)
    }

    /// When the backoff ends (none while suspended or not backing off).
    pub fn deadline(&self) -> Option<Instant> {
        if self.suspended {
            None
        } else {
            self.at
        }
    }
}

#[cfg(test)]
mod retry_tests {
    use super::{Retry, SessionChange};
    use crate::time::Instant;
    use alloc::vec::Vec;

    /// The deadlines of `n` consecutive failures, each at the previous deadline.
    fn deadlines(mut r: Retry, n: usize) -> Vec<Instant> {
        r.session(SessionChange::Connected { session_id: 0x42 });
        let mut t = Instant::from_micros(1_000);
        (0..n)
            .map(|_| {
                r.failed(t);
                t = r.deadline().unwrap();
                t
            })
            .collect()
    }

    #[test]
    fn machines_with_different_ids_back_off_at_different_times() {
        let a = deadlines(Retry::for_id("aaaa-1"), 5);
        let b = deadlines(Retry::for_id("bbbb-2"), 5);
        assert_ne!(a[0], b[0], "the first retries come at different times");
        assert!(a.iter().zip(&b).filter(|(x, y)| x != y).count() >= 4);
        // The same id in the same session: the same schedule (deterministic).
        assert_eq!(a, deadlines(Retry::for_id("aaaa-1"), 5));
        // Many ids spread over the window instead of landing on one instant.
        let firsts: alloc::collections::BTreeSet<Instant> = (0..100)
            .map(|i| deadlines(Retry::for_id(&alloc::format!("id-{i}")), 1)[0])
            .collect();
        assert!(firsts.len() > 90, "{} distinct of 100", firsts.len());
    }

    #[test]
    fn each_backoff_stays_within_half_to_all_of_its_base() {
        for i in 0..50 {
            let mut r = Retry::for_id(&alloc::format!("m{i}"));
            let mut t = Instant::from_micros(0);
            for k in 0..12u32 {
                r.failed(t);
                let at = r.deadline().unwrap();
                let base = (10_000u64 << k.min(10)).min(2_000_000);
                let waited = at.saturating_since(t).as_micros() as u64;
                assert!(
                    waited >= base / 2 && waited <= base,
                    "{k}: {waited} of {base}"
                );
                t = at;
            }
            r.succeeded();
            r.failed(t);
            assert!(r.deadline().unwrap().saturating_since(t).as_micros() <= 10_000);
        }
    }

    /// Two lock waiters in one session, both refused (`Throttled`: never applied) at
    /// the same instant: neither fails, and they come back at different times.
    #[test]
    fn throttled_lock_waiters_back_off_apart_and_do_not_fail() {
        use crate::error::Error;
        use crate::proto::ErrorCode;
        use crate::recipe::lock::{Lock, LockConfig, LockKind};
        use crate::recipe::{Machine, Recipe};
        let t = Instant::from_micros(5_000);
        let mut deadlines = Vec::new();
        for id in ["0000aaaa-1111", "0000bbbb-2222"] {
            let mut l = Lock::new(LockConfig::new("/locks/x", LockKind::Exclusive, id));
            l.handle_session(t, SessionChange::Connected { session_id: 0x42 });
            l.acquire(t, None);
            let sent: Vec<_> = core::iter::from_fn(|| l.poll_request()).collect();
            assert!(!sent.is_empty());
            for (op, _) in sent {
                l.handle_reply(t, op, Err(Error::Server(ErrorCode::Throttled)));
            }
            assert!(l.poll_event().is_none(), "a refusal is not a failure");
            assert!(l.poll_request().is_none(), "backing off");
            let at = l.poll_timeout().expect("a retry is scheduled");
            // Two refusals (the create and the listing sent with it): the second
            // backoff, 20 ms jittered into [10, 20] ms.
            assert!(at > t && at <= Instant::from_micros(25_000), "{at:?}");
            l.handle_timeout(at);
            assert!(l.poll_request().is_some(), "sent again after the backoff");
            deadlines.push(at);
        }
        assert_ne!(deadlines[0], deadlines[1]);
    }

    /// The rule every recipe's fresh reads rely on: a read sent behind a `sync` that
    /// failed is read as lost (found or missing alike), once; a read behind a `sync`
    /// that worked, a read sent before the sync, a write, and an error that does not
    /// depend on the follower's state are kept.
    #[test]
    fn a_read_behind_a_failed_sync_is_read_as_lost() {
        use crate::error::Error;
        use crate::proto::{ErrorCode, PathRequest, PathWatch, Request, Response, Stat};
        use crate::recipe::Outbox;
        let read = |p: &str| {
            Request::GetData(PathWatch {
                path: p.into(),
                watch: false,
            })
        };
        let sync = |p: &str| Request::Sync(PathRequest { path: p.into() });
        let found = || Ok(Response::Stat(Stat::default()));
        let missing = || Err(Error::Server(ErrorCode::NoNode));
        let lost = Err(Error::ConnectionLoss);

        let mut out = Outbox::default();
        let before = out.send("before", read("/a"));
        let s1 = out.send("sync", sync("/a"));
        let r1 = out.send("read", read("/a"));
        let r2 = out.send("read too", read("/b"));
        let w = out.send(
            "write",
            Request::Delete(crate::proto::DeleteRequest {
                path: "/a/x".into(),
                version: -1,
            }),
        );
        let r3 = out.send("refused read", read("/a"));
        assert_eq!(out.answer(before, found()), Some(("before", found())));
        assert_eq!(
            out.answer(s1, Err(Error::Server(ErrorCode::Throttled)))
                .unwrap()
                .0,
            "sync"
        );
        assert_eq!(out.answer(r1, found()), Some(("read", lost.clone())));
        assert_eq!(out.answer(r2, missing()), Some(("read too", lost.clone())));
        assert_eq!(out.answer(w, missing()), Some(("write", missing())));
        let noauth = Err(Error::Server(ErrorCode::NoAuth));
        assert_eq!(
            out.answer(r3, noauth.clone()),
            Some(("refused read", noauth))
        );
        // Read again behind a sync that works: kept.
        let s2 = out.send("sync", sync("/a"));
        let r4 = out.send("read", read("/a"));
        assert_eq!(out.answer(s2, found()).unwrap().0, "sync");
        assert_eq!(out.answer(r4, missing()), Some(("read", missing())));
        // A read sent after the failed sync was answered is not behind it.
        let s3 = out.send("sync", sync("/a"));
        assert!(out.answer(s3, lost.clone()).is_some());
        let r5 = out.send("read", read("/a"));
        assert_eq!(out.take_unsynced(r5), Some(("read", false)));
        // `take_unsynced` tells the same as `answer`, for a reply read in place.
        let s4 = out.send("sync", sync("/a"));
        let r6 = out.send("read", read("/a"));
        assert!(out.answer(s4, lost.clone()).is_some());
        assert_eq!(out.take_unsynced(r6), Some(("read", true)));
        assert!(out.answer(r6, found()).is_none(), "answered once");
        // A watched read read as lost may still have left its watch: `answer_armed`
        // says so (`exists` watches a missing node too; `getData` of one does not).
        let watched = |p: &str| {
            Request::GetData(PathWatch {
                path: p.into(),
                watch: true,
            })
        };
        let exists = |p: &str| {
            Request::Exists(PathWatch {
                path: p.into(),
                watch: true,
            })
        };
        let s5 = out.send("sync", sync("/a"));
        let (r7, r8, r9) = (
            out.send("read", watched("/a")),
            out.send("exists", exists("/a")),
            out.send("missing", watched("/a")),
        );
        assert!(out
            .answer(s5, Err(Error::Server(ErrorCode::Throttled)))
            .is_some());
        assert_eq!(
            out.answer_armed(r7, found()),
            Some(("read", lost.clone(), Some(true)))
        );
        assert_eq!(
            out.answer_armed(r8, missing()),
            Some(("exists", lost.clone(), Some(true)))
        );
        assert_eq!(
            out.answer_armed(r9, missing()),
            Some(("missing", lost, Some(false)))
        );
        let r10 = out.send("read", watched("/a"));
        assert_eq!(
            out.answer_armed(r10, Err(Error::ConnectionLoss)),
            Some(("read", Err(Error::ConnectionLoss), Some(false)))
        );
        let r11 = out.send("unwatched", read("/a"));
        assert_eq!(
            out.answer_armed(r11, found()),
            Some(("unwatched", found(), None))
        );
    }

    #[test]
    fn the_session_id_changes_the_schedule() {
        let mut a = Retry::for_id("same");
        let mut b = Retry::for_id("same");
        a.session(SessionChange::Connected { session_id: 1 });
        b.session(SessionChange::Connected { session_id: 2 });
        let t = Instant::from_micros(0);
        a.failed(t);
        b.failed(t);
        assert_ne!(a.deadline(), b.deadline());
    }
}
