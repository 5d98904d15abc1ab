//! The plumbing every recipe needs, written once: [`Kit`].
//!
//! A recipe embeds one `Kit` and keeps only its protocol. The kit holds:
//!
//! * the **outbox** ([`Outbox`]): each request's purpose, so a reply finds its reason,
//!   and the fresh-read rule (a read behind a failed `sync` reads as lost:
//!   [`answer`](Kit::answer));
//! * the **retry** ([`Retry`]): what failed with a retryable error waits for the
//!   reconnect while the session is suspended, else for a jittered backoff;
//! * the **events** the recipe reports, in order;
//! * the **session** the recipe was started on (its id: the `ephemeralOwner` of the
//!   nodes it creates);
//! * the **parent-creation rounds** ([`ParentStep`]): a node whose parent is missing
//!   creates its ancestors (as containers, as Curator does) in the same pipeline and
//!   is sent again, at most [`MAX_PARENT_ROUNDS`] times; an ancestor that cannot be
//!   created ends the attempt with the error that names it.
//!
//! It also writes the common [`Machine`] and [`Recipe`] method bodies: a recipe's
//! `poll_request` is [`Kit::poll_request`], its `poll_event` [`Kit::poll_event`], the
//! retry part of its `poll_timeout` [`Kit::timeout`], its `yields`
//! [`Kit::yields`], and its `handle_session` starts with [`Kit::session`].
//!
//! ```
//! use zk_recipes::proto::{PathWatch, Request};
//! use zk_recipes::recipe::kit::Kit;
//! use zk_recipes::recipe::SessionChange;
//! use zk_recipes::time::Instant;
//!
//! #[derive(Debug, PartialEq)]
//! enum Purpose { Read }
//! let mut kit: Kit<Purpose, &str> = Kit::new("my-id");
//! kit.session(SessionChange::Connected { session_id: 7 });
//! let op = kit.send(Purpose::Read, Request::GetData(PathWatch { path: "/a".into(), watch: false }));
//! assert_eq!(kit.poll_request().map(|(id, _)| id), Some(op));
//! assert_eq!(kit.answer(op, Err(zk_recipes::client::Error::ConnectionLoss)).map(|(p, _)| p), Some(Purpose::Read));
//! kit.failed(Instant::ZERO); // a retryable failure: back off
//! assert!(kit.timeout(None, true).is_some());
//! kit.emit("done");
//! assert_eq!(kit.poll_event(), Some("done"));
//! assert_eq!(kit.session_id(), 7);
//! ```

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use core::fmt;

use super::{Machine, OpId, Outbox, Recipe, Retry, SessionChange, SharedListing};
use crate::error::Error;
use crate::proto::{
    parent, Acl, CreateMode, CreateRequest, ErrorCode, PathRequest, Request, Response,
};
use crate::session::WatchEvent;
use crate::time::Instant;

/// A reply to one of a recipe's requests, as [`Machine::handle_reply`] takes it.
pub type Reply = Result<Response, Error>;

/// How many times a recipe creates the missing ancestors of a node before giving up.
pub const MAX_PARENT_ROUNDS: u8 = 2;

/// `dir/name` (no doubled `/` when `dir` is the root).
///
/// ```
/// assert_eq!(zk_recipes::recipe::kit::join("/a", "b"), "/a/b");
/// assert_eq!(zk_recipes::recipe::kit::join("/", "b"), "/b");
/// ```
pub fn join(dir: &str, name: &str) -> String {
    let mut s = String::with_capacity(dir.len() + name.len() + 1);
    s.push_str(dir);
    if !dir.ends_with('/') {
        s.push('/');
    }
    s.push_str(name);
    s
}

/// [`validate_path`](crate::proto::validate_path), with the error a recipe reports:
/// [`Error::InvalidPath`], which names the path.
///
/// ```
/// use zk_recipes::recipe::kit::valid_path;
/// assert!(valid_path("/a/b").is_ok());
/// assert!(matches!(valid_path("a"), Err(zk_recipes::client::Error::InvalidPath { path, .. }) if path == "a"));
/// ```
pub fn valid_path(path: &str) -> Result<(), Error> {
    crate::proto::validate_path(path).map_err(|error| Error::InvalidPath {
        path: path.to_string(),
        error,
    })
}

/// The parent of `path` (`/` for a top-level node).
///
/// ```
/// assert_eq!(zk_recipes::recipe::kit::parent_of("/a/b"), "/a");
/// assert_eq!(zk_recipes::recipe::kit::parent_of("/a"), "/");
/// ```
pub fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last component of `path`.
///
/// ```
/// assert_eq!(zk_recipes::recipe::kit::name_of("/a/b"), "b");
/// ```
pub fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}

/// The ancestors of `path`, top down (`/a`, `/a/b` for `/a/b/c`).
///
/// ```
/// let a: Vec<&str> = zk_recipes::recipe::path::ancestors("/a/b/c").collect();
/// assert_eq!(a, ["/a", "/a/b"]);
/// assert_eq!(zk_recipes::recipe::path::ancestors("/a").count(), 0);
/// ```
pub fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .map(|(i, _)| i)
        .filter(|&i| i > 0)
        .map(move |i| &path[..i])
}

/// Creates for every ancestor of `path`, top down, in `mode` (containers for recipe
/// directories, as Curator does; persistent for [`CreateAll`](super::path::CreateAll) by default).
pub fn ancestor_creates(path: &str, acl: &[Acl], mode: CreateMode) -> Vec<(String, Request)> {
    ancestors(path)
        .map(|p| {
            let req = CreateRequest::new(p, Bytes::new(), acl.to_vec(), mode);
            let request = if mode == CreateMode::Container {
                Request::CreateContainer(req)
            } else {
                Request::Create(req)
            };
            (p.to_string(), request)
        })
        .collect()
}

/// The answer to creating ancestor `path`: `None` if it exists now; a retryable error
/// (throttled, connection lost...) as it is, to retry; otherwise the error that names
/// it. A top-level node that cannot be created for lack of a parent
/// means the chroot does not exist (`/` always does).
pub fn ancestor_result(path: &str, result: &Reply) -> Option<Error> {
    match result {
        Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => None,
        Err(Error::Server(ErrorCode::NoNode)) if parent(path) == Some("/") => {
            Some(Error::ChrootMissing)
        }
        // Not applied, or not known to be (throttled, timed out...): the caller retries.
        Err(e @ Error::Server(_)) if e.is_retryable() => Some(e.clone()),
        Err(Error::Server(code)) => Some(Error::NoParent {
            path: path.to_string(),
            code: *code,
        }),
        Err(e) => Some(e.clone()),
    }
}

/// What a recipe does when the create of a node answered `NoNode` (its parent is
/// missing): see [`Kit::parents_missing`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParentStep {
    /// An ancestor's create was refused or lost: create the ancestors and the node
    /// again after the backoff ([`Kit::failed`]).
    Again,
    /// Another round: create the ancestors and the node again now.
    Create,
    /// Give up: an ancestor cannot be created (the error names it), or the rounds are
    /// used up.
    Fail(Error),
}

/// The parent-creation rounds of one node (kept boxed: most recipes never need them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Parents {
    rounds: u8,
    /// The first error an ancestor's create answered that names it.
    error: Option<Error>,
    /// An ancestor's create was refused or lost: send the round again.
    again: bool,
}

/// A recipe's events waiting to be polled, in order: the event queue of a [`Kit`], and
/// all a recipe built of other machines (which send its requests) needs of one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Events<E>(VecDeque<E>);

impl<E> Default for Events<E> {
    fn default() -> Self {
        Events(VecDeque::new())
    }
}

impl<E> Events<E> {
    /// Reports `event` (after those reported before it).
    pub fn emit(&mut self, event: E) {
        self.0.push_back(event);
    }

    /// [`Recipe::poll_event`]: the next event.
    pub fn poll(&mut self) -> Option<E> {
        if self.0.is_empty() {
            // Drained: a recipe that waits holds no buffer while it waits.
            if self.0.capacity() > 0 {
                self.0 = VecDeque::new();
            }
            return None;
        }
        self.0.pop_front()
    }

    /// No event waits to be polled.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops the events not polled yet (the owner went away).
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// The plumbing every recipe embeds; see the [module docs](self). `P` is the recipe's
/// own "purpose" type (what each request is for), `E` its event type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Kit<P, E> {
    outbox: Outbox<P>,
    retry: Retry,
    events: Events<E>,
    parents: Option<Box<Parents>>,
}

impl<P, E> Default for Kit<P, E> {
    /// A kit whose backoffs are not jittered apart from other machines built this way
    /// ([`Retry::default`]); prefer [`Kit::new`] with the machine's unique id.
    fn default() -> Self {
        Kit::with_retry(Retry::default())
    }
}

impl<P, E> Kit<P, E> {
    /// A kit whose backoffs are jittered by `id` (the machine's unique id:
    /// [`Retry::for_id`]), so that machines refused together come back apart.
    pub fn new(id: &str) -> Self {
        Kit::with_retry(Retry::for_id(id))
    }

    /// A kit with this retry helper.
    pub fn with_retry(retry: Retry) -> Self {
        Kit {
            outbox: Outbox::default(),
            retry,
            events: Events::default(),
            parents: None,
        }
    }

    // ----- the session -----

    /// Follows a session change (call it first in `handle_session`): the retry waits
    /// while suspended and goes at once when the session is back; the session id is
    /// the new one. An expired session's requests were never answered, so a round of
    /// parent creates it carried proves nothing: the next session counts its rounds
    /// afresh.
    pub fn session(&mut self, change: SessionChange) {
        self.retry.session(change);
        if change == SessionChange::Expired {
            self.parents = None;
        }
    }

    /// The id of the session the recipe last heard of (0 before one): the
    /// `ephemeralOwner` of the nodes it creates.
    pub fn session_id(&self) -> i64 {
        self.retry.session_id()
    }

    // ----- requests -----

    /// Queues `request` for `purpose`; returns its op id.
    pub fn send(&mut self, purpose: P, request: Request) -> OpId {
        self.outbox.send(purpose, request)
    }

    /// Queues a `sync` of `path` for `purpose`: the reads sent behind it, until it
    /// answers, come from a server as up to date as the leader
    /// ([`answer`](Self::answer) reads them as lost if it fails).
    pub fn sync(&mut self, purpose: P, path: &str) -> OpId {
        self.send(purpose, Request::Sync(PathRequest { path: path.into() }))
    }

    /// See [`Outbox::answer`]: the purpose of `op`, removed, and its reply as the
    /// recipe should read it (a read behind a failed `sync` reads as lost).
    pub fn answer(&mut self, op: OpId, result: Reply) -> Option<(P, Result<Response, Error>)> {
        self.outbox.answer(op, result)
    }

    /// See [`Outbox::answer_armed`].
    pub fn answer_armed(
        &mut self,
        op: OpId,
        result: Reply,
    ) -> Option<(P, Result<Response, Error>, Option<bool>)> {
        self.outbox.answer_armed(op, result)
    }

    /// See [`Outbox::take`].
    pub fn take(&mut self, op: OpId) -> Option<P> {
        self.outbox.take(op)
    }

    /// See [`Outbox::take_unsynced`].
    pub fn take_unsynced(&mut self, op: OpId) -> Option<(P, bool)> {
        self.outbox.take_unsynced(op)
    }

    /// The purpose of request `op`, if it is in flight.
    pub fn purpose(&self, op: OpId) -> Option<&P> {
        self.outbox.get(op)
    }

    /// Is a request whose purpose matches `f` in flight?
    pub fn any(&self, f: impl Fn(&P) -> bool) -> bool {
        self.outbox.any(f)
    }

    /// How many requests are in flight.
    pub fn in_flight(&self) -> usize {
        self.outbox.len()
    }

    /// Nothing in flight and nothing queued.
    pub fn is_quiet(&self) -> bool {
        self.outbox.is_empty()
    }

    /// Forgets every request (the session ended: every request was answered).
    pub fn clear_requests(&mut self) {
        self.outbox.clear();
    }

    /// [`Machine::poll_request`]: the next request to send.
    pub fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.outbox.poll()
    }

    /// [`Machine::yields`]: does request `op` serve a purpose
    /// that `f` says may yield?
    pub fn yields(&self, op: OpId, f: impl Fn(&P) -> bool) -> bool {
        self.outbox.get(op).is_some_and(f)
    }

    // ----- retries -----

    /// A retryable failure at `now`: the next attempt waits for the backoff (or, while
    /// suspended, for the reconnect).
    pub fn failed(&mut self, now: Instant) {
        self.retry.failed(now);
    }

    /// Something worked: the next failure waits the shortest time again.
    pub fn succeeded(&mut self) {
        self.retry.succeeded();
    }

    /// A wait for someone else (a race lost): see [`Retry::back_off`].
    pub fn back_off(&mut self, now: Instant, span: Duration) {
        self.retry.back_off(now, span);
    }

    /// May the recipe send its retries at `now`?
    pub fn allows(&self, now: Instant) -> bool {
        self.retry.allows(now)
    }

    /// Is the session suspended (as far as this recipe heard)?
    pub fn is_suspended(&self) -> bool {
        self.retry.is_suspended()
    }

    /// When the backoff ends (none while suspended or not backing off).
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry.deadline()
    }

    /// May the recipe send at `now` ([`allows`](Self::allows))? `waiting` says whether
    /// it now waits for the end of a backoff (its deadline: [`retry_at`](Self::retry_at)),
    /// not for a suspension to end (the reconnect drives it again).
    pub fn gate(&self, now: Instant, waiting: &mut bool) -> bool {
        let allows = self.allows(now);
        *waiting = !allows && !self.is_suspended();
        allows
    }

    /// The retry part of [`Machine::poll_timeout`]: the
    /// earlier of the recipe's own `deadline` and, if it is `retrying` (something
    /// waits to be sent again), the end of the backoff.
    pub fn timeout(&self, deadline: Option<Instant>, retrying: bool) -> Option<Instant> {
        let retry = if retrying { self.retry_at() } else { None };
        match (deadline, retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    // ----- events -----

    /// Reports `event` (after those reported before it).
    pub fn emit(&mut self, event: E) {
        self.events.emit(event);
    }

    /// Ends the recipe once: moves `state` to `done` and reports `event`, unless `state`
    /// is `done` already (then nothing: a recipe reports one final event).
    pub fn end<S: PartialEq>(&mut self, state: &mut S, done: S, event: E) {
        if *state != done {
            *state = done;
            self.emit(event);
        }
    }

    /// [`Recipe::poll_event`]: the next event.
    pub fn poll_event(&mut self) -> Option<E> {
        self.events.poll()
    }

    /// No event waits to be polled.
    pub fn no_events(&self) -> bool {
        self.events.is_empty()
    }

    /// Drops the events not polled yet (the owner went away).
    pub fn clear_events(&mut self) {
        self.events.clear();
    }

    /// Nothing in flight, nothing queued, no event left: with its own work over, the
    /// recipe is done.
    pub fn is_idle(&self) -> bool {
        self.is_quiet() && self.no_events()
    }

    // ----- parents -----

    /// Queues the creates of `node`'s missing ancestors (in `mode`, top down), each
    /// for `purpose(ancestor)`, ahead of the node's own create: a new round.
    pub fn send_parents(
        &mut self,
        node: &str,
        acl: &[Acl],
        mode: CreateMode,
        purpose: impl Fn(String) -> P,
    ) {
        let parents = self.parents.get_or_insert_with(Box::default);
        parents.error = None;
        parents.again = false;
        for (p, req) in ancestor_creates(node, acl, mode) {
            self.outbox.send(purpose(p), req);
        }
    }

    /// The create of `ancestor` answered `result` (the ancestor exists now, was
    /// refused or lost, or cannot be created).
    pub fn parent_answered(&mut self, ancestor: &str, result: &Reply) {
        if let Some(e) = ancestor_result(ancestor, result) {
            let parents = self.parents.get_or_insert_with(Box::default);
            if e.is_retryable() {
                parents.again = true;
            } else if !e.ends_session() && parents.error.is_none() {
                parents.error = Some(e);
            }
        }
    }

    /// The node's create answered `NoNode`: what now ([`ParentStep`]). `dir` is the
    /// node's parent, named by the error when the rounds are used up.
    pub fn parents_missing(&mut self, dir: &str) -> ParentStep {
        let parents = self.parents.get_or_insert_with(Box::default);
        if parents.again {
            return ParentStep::Again;
        }
        if let Some(e) = parents.error.take() {
            return ParentStep::Fail(e);
        }
        if parents.rounds >= MAX_PARENT_ROUNDS {
            let missing = Err(Error::Server(ErrorCode::NoNode));
            return ParentStep::Fail(
                ancestor_result(dir, &missing).unwrap_or(Error::Server(ErrorCode::NoNode)),
            );
        }
        parents.rounds += 1;
        ParentStep::Create
    }

    /// Was an ancestor's create of the last round refused or lost (send the round
    /// again)? For a recipe that counts its rounds itself; others use
    /// [`parents_missing`](Self::parents_missing).
    pub fn parents_refused(&self) -> bool {
        self.parents.as_ref().is_some_and(|p| p.again)
    }

    /// The error that names an ancestor that cannot be created, taken (see
    /// [`parents_refused`](Self::parents_refused)).
    pub fn take_parent_error(&mut self) -> Option<Error> {
        self.parents.as_mut().and_then(|p| p.error.take())
    }

    /// Forgets the parent-creation rounds (the node exists: a later create starts
    /// afresh).
    pub fn reset_parents(&mut self) {
        self.parents = None;
    }

    /// Parent-creation rounds so far.
    pub fn parent_rounds(&self) -> u8 {
        self.parents.as_ref().map_or(0, |p| p.rounds)
    }
}

/// What the [`Machine`] and [`Recipe`] impls of a [`Protocol`] take from its [`Kit`]:
/// object-safe, so that a recipe's purpose type stays its own.
pub trait Plumbing<E> {
    /// [`Kit::poll_request`].
    fn poll_request(&mut self) -> Option<(OpId, Request)>;
    /// [`Kit::poll_event`].
    fn poll_event(&mut self) -> Option<E>;
    /// [`Kit::session`].
    fn session(&mut self, change: SessionChange);
}

impl<P, E> Plumbing<E> for Kit<P, E> {
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        Kit::poll_request(self)
    }

    fn poll_event(&mut self) -> Option<E> {
        Kit::poll_event(self)
    }

    fn session(&mut self, change: SessionChange) {
        Kit::session(self, change)
    }
}

/// A recipe written on the [`Kit`]: its protocol, nothing else. Every `Protocol` is a
/// [`Machine`] and a [`Recipe`] (the impls below): the kit answers `poll_request` and
/// `poll_event`, follows every session change ([`Kit::session`]) before
/// [`on_session`](Self::on_session) sees it, and in debug builds (every test,
/// simulator, property and model-check run) calls [`check`](Self::check) at the end
/// of each input. Drive such a recipe through [`Machine`] (its `handle_*`), not through
/// these methods. Inside this crate the head every impl repeats (`type Event`, `kit`,
/// and the `on_reply` that finds each reply's purpose in the kit) is written by the
/// crate's `protocol_head!` macro, which hands each answer to the recipe's own
/// `on_answer(now, op, purpose, result)`.
pub trait Protocol: Send + 'static {
    /// What the recipe reports to its user.
    type Event: Clone + fmt::Debug + Send + 'static;
    /// Its kit.
    fn kit(&mut self) -> &mut dyn Plumbing<Self::Event>;
    /// [`Machine::handle_reply`].
    fn on_reply(&mut self, now: Instant, op: OpId, result: Reply);
    /// [`Machine::handle_shared_reply`]; by default a copy goes to
    /// [`on_reply`](Self::on_reply).
    fn on_shared_reply(
        &mut self,
        now: Instant,
        op: OpId,
        result: &Reply,
        shared: &mut SharedListing,
    ) {
        let _ = shared;
        self.on_reply(now, op, result.clone())
    }
    /// [`Machine::handle_watch`]; by default nothing (a recipe that sets no watch).
    fn on_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        let _ = (now, op, event);
    }
    /// [`Machine::handle_session`], after the kit followed the change.
    fn on_session(&mut self, now: Instant, change: SessionChange);
    /// [`Machine::handle_timeout`].
    fn on_timeout(&mut self, now: Instant);
    /// [`Machine::handle_abandon`].
    fn on_abandon(&mut self, now: Instant);
    /// [`Machine::poll_timeout`] ([`Kit::timeout`] adds the end of a backoff).
    fn deadline(&self) -> Option<Instant>;
    /// [`Machine::is_done`].
    fn finished(&self) -> bool;
    /// [`Machine::yields`] (see [`Kit::yields`]); by default, no.
    fn may_yield(&self, op: OpId) -> bool {
        let _ = op;
        false
    }
    /// The rules that span the recipe's fields, as `debug_assert!`s: called at the end
    /// of every input in debug builds. By default none.
    fn check(&self) {}
}

impl<T: Protocol> Machine for T {
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Reply) {
        self.on_reply(now, op, result);
        checked(self);
    }

    fn handle_shared_reply(
        &mut self,
        now: Instant,
        op: OpId,
        result: &Reply,
        shared: &mut SharedListing,
    ) {
        self.on_shared_reply(now, op, result, shared);
        checked(self);
    }

    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        self.on_watch(now, op, event);
        checked(self);
    }

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.kit().session(change);
        self.on_session(now, change);
        checked(self);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.on_timeout(now);
        checked(self);
    }

    fn handle_abandon(&mut self, now: Instant) {
        self.on_abandon(now);
        checked(self);
    }

    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.kit().poll_request()
    }

    fn yields(&self, op: OpId) -> bool {
        self.may_yield(op)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.deadline()
    }

    fn is_done(&self) -> bool {
        self.finished()
    }
}

impl<T: Protocol> Recipe for T {
    type Event = T::Event;

    fn poll_event(&mut self) -> Option<T::Event> {
        self.kit().poll_event()
    }
}

/// The head every `impl` [`Protocol`] on a [`Kit`] writes, once: the event type, the
/// kit (the field `kit`, or the path named last), and the step of `on_reply` that finds
/// each reply's purpose in the kit and hands both to the recipe's own
/// `on_answer(now, op, purpose, result)` (an inherent method: the purpose type stays
/// the recipe's own). The second word says how the kit reads a reply:
///
/// * `answer`: [`Kit::answer`] (a read behind a failed `sync` reads as lost);
/// * `armed`: [`Kit::answer_armed`], and `on_answer` takes last whether the request's
///   watch is set (`armed: bool`);
/// * `watch`: the same, but `on_answer` takes the `watch` itself (`Option<bool>`: none
///   asked for, or whether the server left it);
/// * `take`: [`Kit::take`], the reply as it came.
///
/// A reply whose op is not in the kit (answered before, or forgotten) goes nowhere.
///
/// ```text
/// impl Protocol for Barrier {
///     protocol_head!(BarrierEvent, answer);
///     fn on_session(&mut self, now: Instant, change: SessionChange) { /* ... */ }
///     // ...
/// }
/// ```
macro_rules! protocol_head {
    ($event:ty, $how:ident) => {
        $crate::recipe::kit::protocol_head!($event, $how, kit);
    };
    ($event:ty, $how:ident, $($kit:ident).+) => {
        type Event = $event;

        fn kit(&mut self) -> &mut dyn $crate::recipe::kit::Plumbing<Self::Event> {
            &mut self.$($kit).+
        }

        fn on_reply(
            &mut self,
            now: $crate::time::Instant,
            op: $crate::recipe::OpId,
            result: Result<$crate::proto::Response, $crate::error::Error>,
        ) {
            $crate::recipe::kit::protocol_head!(@$how self, now, op, result, $($kit).+);
        }
    };
    (@answer $self:ident, $now:ident, $op:ident, $result:ident, $($kit:ident).+) => {
        if let Some((purpose, result)) = $self.$($kit).+.answer($op, $result) {
            $self.on_answer($now, $op, purpose, result);
        }
    };
    (@armed $self:ident, $now:ident, $op:ident, $result:ident, $($kit:ident).+) => {
        if let Some((purpose, result, watch)) = $self.$($kit).+.answer_armed($op, $result) {
            $self.on_answer($now, $op, purpose, result, watch == Some(true));
        }
    };
    (@watch $self:ident, $now:ident, $op:ident, $result:ident, $($kit:ident).+) => {
        if let Some((purpose, result, watch)) = $self.$($kit).+.answer_armed($op, $result) {
            $self.on_answer($now, $op, purpose, result, watch);
        }
    };
    (@take $self:ident, $now:ident, $op:ident, $result:ident, $($kit:ident).+) => {
        if let Some(purpose) = $self.$($kit).+.take($op) {
            $self.on_answer($now, $op, purpose, $result);
        }
    };
}
pub(crate) use protocol_head;

/// The `on_timeout` of a [`Protocol`] whose only deadline is its kit's backoff: the time
/// is up, so `self.drive(now)` sends what waited for it. Use it inside the `impl`;
/// `timeout_drives!(abandon => close)` also writes an `on_abandon` that is
/// `self.close(now)` (the method named).
macro_rules! timeout_drives {
    () => {
        fn on_timeout(&mut self, now: $crate::time::Instant) {
            self.drive(now);
        }
    };
    (abandon => $abandon:ident) => {
        $crate::recipe::kit::timeout_drives!();

        fn on_abandon(&mut self, now: $crate::time::Instant) {
            self.$abandon(now);
        }
    };
}
pub(crate) use timeout_drives;

/// The end of an input: the recipe's rules hold (debug builds only).
fn checked<T: Protocol>(recipe: &T) {
    if cfg!(debug_assertions) {
        recipe.check();
    }
}

/// The [`Recipe`] impl of a machine whose [`Machine`] methods are written apart (by
/// [`follow_part!`], [`forward_parts!`], [`own_and_parts!`] or by hand): its event type,
/// and the field and method `poll_event` reads them from: `events.poll` (an [`Events`]),
/// `kit.poll_event` (its [`Kit`]), or `$part.poll_event` (the part it follows).
///
/// ```text
/// impl Machine for Counter {
///     forward_parts!(pump; handle_reply, handle_timeout, poll_request, poll_timeout);
///     // ...
/// }
///
/// recipe_events!(Counter => CounterEvent, events.poll);
/// ```
macro_rules! recipe_events {
    ($machine:ty => $event:ty, $from:ident . $poll:ident) => {
        impl $crate::recipe::Recipe for $machine {
            type Event = $event;

            fn poll_event(&mut self) -> Option<$event> {
                self.$from.$poll()
            }
        }
    };
}
pub(crate) use recipe_events;

/// The [`Machine`] methods of a machine built on one part machine (`$part`) that reads
/// the part's events after every input (`$pump`) and reports its own from `self.events`
/// (an [`Events`]: `recipe_events!(.., events.poll)`): every input goes to the part and
/// then to `$pump`; requests, deadline and end are the part's. Only `handle_abandon`
/// is written by the machine itself.
///
/// `follow_part!($part)` alone: a machine that is its part under another name (its
/// events too: `recipe_events!(.., $part.poll_event)`); every method is the part's.
macro_rules! follow_part {
    ($part:ident) => {
        $crate::recipe::kit::follow_part!(@inputs $part);

        fn handle_abandon(&mut self, now: $crate::time::Instant) {
            self.$part.handle_abandon(now)
        }

        fn poll_request(&mut self) -> Option<($crate::recipe::OpId, $crate::proto::Request)> {
            self.$part.poll_request()
        }

        fn poll_timeout(&self) -> Option<$crate::time::Instant> {
            self.$part.poll_timeout()
        }

        fn is_done(&self) -> bool {
            self.$part.is_done()
        }
    };
    ($part:ident, $pump:ident) => {
        $crate::recipe::kit::follow_part!(@inputs $part, $pump);

        fn poll_request(&mut self) -> Option<($crate::recipe::OpId, $crate::proto::Request)> {
            self.$part.poll_request()
        }

        fn poll_timeout(&self) -> Option<$crate::time::Instant> {
            self.$part.poll_timeout()
        }

        fn is_done(&self) -> bool {
            self.$part.is_done() && self.events.is_empty()
        }
    };
    // Every input goes to the part, then (if named) to `$pump`.
    (@inputs $part:ident $(, $pump:ident)?) => {
        $crate::recipe::kit::follow_part!(@input $part $(, $pump)?; handle_reply(
            op: $crate::recipe::OpId,
            result: Result<$crate::proto::Response, $crate::error::Error>,
        ));
        $crate::recipe::kit::follow_part!(@input $part $(, $pump)?; handle_watch(
            op: $crate::recipe::OpId,
            event: &$crate::session::WatchEvent,
        ));
        $crate::recipe::kit::follow_part!(@input $part $(, $pump)?; handle_session(
            change: $crate::recipe::SessionChange,
        ));
        $crate::recipe::kit::follow_part!(@input $part $(, $pump)?; handle_timeout());
    };
    (@input $part:ident $(, $pump:ident)?; $method:ident($($arg:ident: $ty:ty),* $(,)?)) => {
        fn $method(&mut self, now: $crate::time::Instant $(, $arg: $ty)*) {
            self.$part.$method(now $(, $arg)*);
            $(self.$pump();)?
        }
    };
}
pub(crate) use follow_part;

/// The public calls of a [`follow_part!`] machine with a `$pump` that only pass on to
/// the part: each `name` (with its doc) becomes `pub fn name(&mut self, now)`, which
/// calls the part's `name` and then reads its events (`self.$pump()`).
macro_rules! part_calls {
    ($part:ident, $pump:ident; $($(#[$doc:meta])* $name:ident),+ $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $name(&mut self, now: $crate::time::Instant) {
                self.$part.$name(now);
                self.$pump();
            }
        )+
    };
}
pub(crate) use part_calls;

/// A machine built of part machines of one type (a multi-lock's locks, a semaphore's
/// mutex and lease, a counter's update): what `forward_parts!` needs to write the
/// [`Machine`] methods that only pass an input on to the parts. Part `i`'s op `op` is
/// the machine's op `op * count + i`, so each reply finds its part.
pub trait Parts {
    /// The parts' machine.
    type Part: Machine;
    /// How many parts there are (a session change goes to each).
    fn count(&self) -> usize;
    /// Parts `0..started()` run: they are timed, polled for requests and deadlines,
    /// and their replies routed; by default all of them.
    fn started(&self) -> usize {
        self.count()
    }
    /// Part `i`.
    fn part(&self, i: usize) -> &Self::Part;
    /// Part `i`, to drive.
    fn part_mut(&mut self, i: usize) -> &mut Self::Part;
    /// The machine's own deadline, besides its parts'.
    fn own_deadline(&self) -> Option<Instant> {
        None
    }
    /// The machine's op id of part `i`'s op `op`.
    fn encode(&self, i: usize, op: OpId) -> OpId {
        op.saturating_mul(self.count() as u64)
            .saturating_add(i as u64)
    }
    /// The running part of the machine's op `op`, and the part's own op id.
    fn route(&self, op: OpId) -> Option<(usize, OpId)> {
        let n = (self.count() as u64).max(1);
        let i = usize::try_from(op % n).ok()?;
        (i < self.started()).then_some((i, op / n))
    }
}

/// The `count`, `part` and `part_mut` of a [`Parts`] machine with one part, the field
/// `$field` (a counter's update, a lease's lock). Use it inside the `impl Parts`.
macro_rules! one_part {
    ($field:ident) => {
        fn count(&self) -> usize {
            1
        }

        fn part(&self, _: usize) -> &Self::Part {
            &self.$field
        }

        fn part_mut(&mut self, _: usize) -> &mut Self::Part {
            &mut self.$field
        }
    };
}
pub(crate) use one_part;

/// Inputs and outputs of a [`Parts`] machine that only concern its parts, written once.
pub mod to_parts {
    use super::{Machine, Parts, Reply};
    use crate::proto::Request;
    use crate::recipe::{OpId, SessionChange, SharedListing};
    use crate::session::WatchEvent;
    use crate::time::Instant;

    /// A reply goes to the part whose op it answers.
    pub fn reply<T: Parts>(t: &mut T, now: Instant, op: OpId, result: Reply) {
        if let Some((i, op)) = t.route(op) {
            t.part_mut(i).handle_reply(now, op, result);
        }
    }

    /// A shared listing goes to the part whose op it answers.
    pub fn shared_reply<T: Parts>(
        t: &mut T,
        now: Instant,
        op: OpId,
        result: &Reply,
        shared: &mut SharedListing,
    ) {
        if let Some((i, op)) = t.route(op) {
            t.part_mut(i).handle_shared_reply(now, op, result, shared);
        }
    }

    /// A watch event goes to the part that set the watch.
    pub fn watch<T: Parts>(t: &mut T, now: Instant, op: OpId, event: &WatchEvent) {
        if let Some((i, op)) = t.route(op) {
            t.part_mut(i).handle_watch(now, op, event);
        }
    }

    /// A session change goes to every part, running or not (a part started later
    /// needs the session id).
    pub fn session<T: Parts>(t: &mut T, now: Instant, change: SessionChange) {
        for i in 0..t.count() {
            t.part_mut(i).handle_session(now, change);
        }
    }

    /// A timeout goes to every running part.
    pub fn timeout<T: Parts>(t: &mut T, now: Instant) {
        for i in 0..t.started() {
            t.part_mut(i).handle_timeout(now);
        }
    }

    /// Every running part is abandoned.
    pub fn abandon<T: Parts>(t: &mut T, now: Instant) {
        for i in 0..t.started() {
            t.part_mut(i).handle_abandon(now);
        }
    }

    /// The first running part's next request, as the machine's.
    pub fn poll_request<T: Parts>(t: &mut T) -> Option<(OpId, Request)> {
        for i in 0..t.started() {
            if let Some((op, request)) = t.part_mut(i).poll_request() {
                return Some((t.encode(i, op), request));
            }
        }
        None
    }

    /// Does the part's request yield?
    pub fn yields<T: Parts>(t: &T, op: OpId) -> bool {
        t.route(op).is_some_and(|(i, op)| t.part(i).yields(op))
    }

    /// The earliest deadline of the running parts and of the machine itself.
    pub fn poll_timeout<T: Parts>(t: &T) -> Option<Instant> {
        (0..t.started())
            .filter_map(|i| t.part(i).poll_timeout())
            .chain(t.own_deadline())
            .min()
    }

    /// Every running part is done.
    pub fn all_done<T: Parts>(t: &T) -> bool {
        (0..t.started()).all(|i| t.part(i).is_done())
    }
}

/// The [`Machine`] methods of a [`Parts`] machine that only pass an input on to its
/// parts (then call `self.$after(now)`, the machine's own step after each input) or
/// read their outputs: list the methods to write; the machine writes the others,
/// which carry logic of its own (they may call [`to_parts`] for the part they pass
/// on). Its events: [`recipe_events!`].
macro_rules! forward_parts {
    ($after:ident; $($method:ident),+ $(,)?) => {
        $( $crate::recipe::kit::forward_parts!(@ $method $after); )+
    };
    (@ handle_reply $after:ident) => {
        $crate::recipe::kit::forward_parts!(@input $after; handle_reply => reply(
            op: $crate::recipe::OpId,
            result: Result<$crate::proto::Response, $crate::error::Error>,
        ));
    };
    (@ handle_shared_reply $after:ident) => {
        $crate::recipe::kit::forward_parts!(@input $after; handle_shared_reply => shared_reply(
            op: $crate::recipe::OpId,
            result: &Result<$crate::proto::Response, $crate::error::Error>,
            shared: &mut $crate::recipe::SharedListing,
        ));
    };
    (@ handle_watch $after:ident) => {
        $crate::recipe::kit::forward_parts!(@input $after; handle_watch => watch(
            op: $crate::recipe::OpId,
            event: &$crate::session::WatchEvent,
        ));
    };
    (@ handle_session $after:ident) => {
        $crate::recipe::kit::forward_parts!(@input $after; handle_session => session(
            change: $crate::recipe::SessionChange,
        ));
    };
    (@ handle_timeout $after:ident) => {
        $crate::recipe::kit::forward_parts!(@input $after; handle_timeout => timeout());
    };
    // An input: to the parts (`to_parts::$to`), then `self.$after(now)`.
    (@input $after:ident; $method:ident => $to:ident($($arg:ident: $ty:ty),* $(,)?)) => {
        fn $method(&mut self, now: $crate::time::Instant $(, $arg: $ty)*) {
            $crate::recipe::kit::to_parts::$to(self, now $(, $arg)*);
            self.$after(now);
        }
    };
    (@ poll_request $after:ident) => {
        fn poll_request(&mut self) -> Option<($crate::recipe::OpId, $crate::proto::Request)> {
            $crate::recipe::kit::to_parts::poll_request(self)
        }
    };
    (@ yields $after:ident) => {
        fn yields(&self, op: $crate::recipe::OpId) -> bool {
            $crate::recipe::kit::to_parts::yields(self, op)
        }
    };
    (@ poll_timeout $after:ident) => {
        fn poll_timeout(&self) -> Option<$crate::time::Instant> {
            $crate::recipe::kit::to_parts::poll_timeout(self)
        }
    };
}
pub(crate) use forward_parts;

/// How a [`Parts`] machine with requests of its own on a [`Kit`] (the lease, the set
/// partitioner) numbers them: of every `slots` op ids, slot `own` is the machine's own
/// (its kit's op `op` is `op * slots + own`); its [`Parts::encode`] and
/// [`Parts::route`] keep the other slots for its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnSlot {
    /// How many slots.
    pub slots: u64,
    /// The machine's own slot (below `slots`).
    pub own: u64,
}

impl OwnSlot {
    /// The machine's op id of its kit's op `op`.
    pub fn op(self, op: OpId) -> OpId {
        op.saturating_mul(self.slots).saturating_add(self.own)
    }

    /// The kit's op of the machine's op `op`, if it is one of its own.
    pub fn own(self, op: OpId) -> Option<OpId> {
        (op % self.slots == self.own).then_some(op / self.slots)
    }
}

/// The [`Machine`] methods of a [`Parts`] machine that also sends requests of its own
/// from `self.kit` (a [`Kit`]; the set partitioner, the lease), numbered by `$own` (an
/// [`OwnSlot`]). Every input ends with `self.after_input(now)` (the machine's step: it
/// drives, then checks its rules); its own replies go to `self.on_own_reply(now, op,
/// result)` (`op` its kit's), its own watches to `self.on_own_watch(now, event)`, the
/// others to its parts. A session change goes to the kit, then to every part, then to
/// `self.on_own_session(now, change)`; an abandon drops the events nobody will read,
/// then calls `self.on_own_abandon(now)` (the machine's cleanup: it abandons or releases
/// its parts). Its events are its kit's (`recipe_events!(.., kit.poll_event)`). The
/// machine writes `is_done`.
macro_rules! own_and_parts {
    ($own:path) => {
        fn handle_reply(
            &mut self,
            now: $crate::time::Instant,
            op: $crate::recipe::OpId,
            result: Result<$crate::proto::Response, $crate::error::Error>,
        ) {
            match $own.own(op) {
                Some(op) => self.on_own_reply(now, op, result),
                None => $crate::recipe::kit::to_parts::reply(self, now, op, result),
            }
            self.after_input(now);
        }

        fn handle_watch(
            &mut self,
            now: $crate::time::Instant,
            op: $crate::recipe::OpId,
            event: &$crate::session::WatchEvent,
        ) {
            match $own.own(op) {
                Some(_) => self.on_own_watch(now, event),
                None => $crate::recipe::kit::to_parts::watch(self, now, op, event),
            }
            self.after_input(now);
        }

        fn handle_session(&mut self, now: $crate::time::Instant, change: $crate::recipe::SessionChange) {
            self.kit.session(change);
            $crate::recipe::kit::to_parts::session(self, now, change);
            self.on_own_session(now, change);
            self.after_input(now);
        }

        fn handle_abandon(&mut self, now: $crate::time::Instant) {
            // Nobody listens any more: no event, only the cleanup.
            self.kit.clear_events();
            self.on_own_abandon(now);
            self.after_input(now);
        }

        $crate::recipe::kit::forward_parts!(after_input; handle_timeout, poll_timeout);

        fn poll_request(&mut self) -> Option<($crate::recipe::OpId, $crate::proto::Request)> {
            if let Some((op, request)) = self.kit.poll_request() {
                return Some(($own.op(op), request));
            }
            $crate::recipe::kit::to_parts::poll_request(self)
        }

        fn yields(&self, op: $crate::recipe::OpId) -> bool {
            $own.own(op).is_none() && $crate::recipe::kit::to_parts::yields(self, op)
        }
    };
}
pub(crate) use own_and_parts;
