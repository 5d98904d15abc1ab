//! Double barrier (ZooKeeper recipe "Double Barriers"; paper: "Double Barrier"):
//! participants enter together once `N` have arrived and leave together once all have
//! finished. Interoperates with Curator's `DistributedDoubleBarrier` on the same path.
//!
//! # Layout (Curator's)
//!
//! Under the barrier node `b`: one `EPHEMERAL` member node per participant, named by its
//! id (a UUID, as Curator's `UUID.randomUUID()`), and the persistent `b/ready` node.
//! Every child but `ready` counts as a member; members are ordered by name (Curator sorts
//! the names the same way), so lowest and highest are the same for every participant.
//!
//! # Enter (one round trip)
//!
//! `createContainer(b)` (the last leaver of the previous round removed it; `NodeExists`
//! is the usual answer), `exists(b/ready, watch)`, `create(b/<id>)`, `getChildren(b)`
//! go out back to back (the server runs them in this order). Then, from the listing (it
//! was taken after our node existed):
//! * it shows `ready`: **entered** (a late arrival: the round is on);
//! * `N` or more members: `multi(check(b/<id>), create(b/ready))` (`NodeExists` for
//!   `ready` is fine; the check keeps a `ready` from being made with too few members
//!   when our node was deleted after the listing) with `exists(b/<id>)` right behind
//!   it: our node still there, **entered**;
//! * else wait for the creation of `ready`. A `NodeCreated` heard *after* our create's
//!   answer releases us even if `ready` is gone again by then (Curator 5.4 counts the
//!   children again at that point and can hang forever, ignoring its timeout) — once an
//!   `exists(b/<id>)` sent after it finds our node. One heard before it is about an
//!   older `ready` and only makes us look again.
//!
//! Our node deleted by someone else (an operator) while we enter: the listing, or the
//! `exists` after `ready` was created, finds it gone and the participation ends with
//! `Failed { NoNode }` — never `Entered` on a node that is gone (Curator's
//! `DistributedDoubleBarrier` does not look at its node in enter, only in leave). A
//! create of `ready` whose reply was lost is not sent again blindly: the round may have
//! ended without us meanwhile; we look again (synced), and a `ready` found then
//! reports `Entered { late: true }`.
//!
//! A missing `b` (and its ancestors) is created as containers in the same pipeline, and
//! the triple sent again (bounded). A create whose reply was lost is sent again
//! (`NodeExists` means ours: the name is unique). After a reconnect the waiter syncs
//! and looks again (`exists` + listing): a `ready` created while the connection was down
//! releases it.
//!
//! # Leave (the documents' lowest/highest rule)
//!
//! Repeat: `L = getChildren(b)` minus `ready`, sorted.
//! * no `ready`: left. `ready` goes only together with the round's last member node, so
//!   the round is over and whoever is in `b` now belongs to the next round (waiting for
//!   them would deadlock both rounds). (Curator's leave removes `ready` early; if our node
//!   is still there then, we delete it and go too.)
//! * `L` empty: left (a `ready` left over by a crashed last leaver is removed with `b`
//!   in one `multi` first).
//! * only ours: `multi(delete b/<id>, delete b/ready, delete b)`: left. The `multi` fails
//!   if anyone arrived meanwhile (`NotEmpty`): then look again.
//! * ours is the lowest: `exists(highest, watch)`; wait for its deletion.
//! * otherwise: `delete(b/<id>)` if it is still there and, in the same breath,
//!   `exists(lowest, watch)`; wait for its deletion.
//!
//! Each deletion wakes one participant (the lowest, watching the highest), except the
//! lowest's, which ends the round for everyone. A participant that crashes takes its
//! node along with its session, so nobody is stuck waiting for it.
//!
//! # Rounds: reusing the path
//!
//! A round lasts from the creation of `ready` until its last participant leaves: that
//! one deletes its node, `ready` and `b` in one atomic `multi`, which only succeeds if
//! nobody else is in `b`. The path is then clean and the next round starts from scratch.
//!
//! * A participant whose node is created while `ready` exists — after `ready` was
//!   created, even after some have left — sees `Entered { late: true }` at once. It is a
//!   member of that round: the others' leave waits for it (its node is in `L`, and the
//!   last leaver's `multi` fails while it is there).
//! * A participant of a round that arrives after the round's last participant left is a
//!   participant of the next round: it waits for `N` arrivals there. What it heard of
//!   the old round (an `exists` that saw the old `ready`, a notification about it) never
//!   releases it — only a listing taken after its own node exists or a creation of
//!   `ready` heard after that — so a straggler can never pass into the next round alone,
//!   nor make it pass with fewer than `N` nodes of the round present at once.
//!
//! # Events
//!
//! `Entered { late }` ends `enter`, `Left` ends `leave`; `NotEntered` / `NotLeft` say a
//! deadline passed (our node is deleted after that, so the others go on); `Failed` ends
//! the machine (session expired or closed, our node deleted by someone else, no
//! permission, ...). `Suspended` / `Reconnected` are edges while the connection is down.
//! [`DoubleBarrierEvent::enter_outcome`] and [`DoubleBarrierEvent::leave_outcome`] say
//! which event ends each call.
//!
//! ```
//! use zk_recipes::recipe::double_barrier::{DoubleBarrier, DoubleBarrierConfig};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::proto::OpCode;
//! use zk_recipes::time::Instant;
//!
//! let id = zk_recipes::recipe::lock::node_id(1, 2);
//! let mut b = DoubleBarrier::new(DoubleBarrierConfig::new("/jobs/db", 3, &id));
//! b.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! b.enter(Instant::ZERO, None).unwrap();
//! let ops: Vec<OpCode> = std::iter::from_fn(|| b.poll_request()).map(|(_, r)| r.op_code()).collect();
//! assert_eq!(ops, [OpCode::CreateContainer, OpCode::Exists, OpCode::Create, OpCode::GetChildren]);
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::kit::{join, name_of, protocol_head, Kit, ParentStep, Protocol, Reply};
use super::{OpId, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

mod phase;
mod send;

pub use phase::Phase;
use phase::*;

/// The name of the node that says the round is on (Curator's `READY_NODE`).
pub const READY: &str = "ready";

/// How to take part in a double barrier.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DoubleBarrierConfig {
    /// The barrier node `b`.
    pub path: String,
    /// How many participants must have entered before anyone passes (`N`, at least 1).
    pub count: u32,
    /// Our member node's name: a fresh UUID string per participation, from the
    /// driver's entropy (see [`node_id`](super::lock::node_id)). Must be unique.
    pub id: String,
    /// Data of our member node.
    pub data: Bytes,
    /// ACL of our nodes and of parents we create.
    pub acl: Vec<Acl>,
}

impl DoubleBarrierConfig {
    /// A barrier at `path` for `count` participants, our node named `id`.
    pub fn new(path: &str, count: u32, id: &str) -> Self {
        DoubleBarrierConfig {
            path: path.into(),
            count,
            id: id.into(),
            data: Bytes::new(),
            acl: Acl::open_unsafe(),
        }
    }
}

/// What a double barrier participant reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DoubleBarrierEvent {
    /// We passed enter. `late`: the round was already on when our node appeared
    /// (`ready` existed); we are a member of it all the same.
    Entered {
        /// We arrived after `ready` was created.
        late: bool,
    },
    /// Enter's deadline passed first; our node is being removed. Final.
    NotEntered,
    /// We left: no participant of the round is left in the barrier. Final.
    Left,
    /// Leave's deadline passed first; our node is being removed (the others go on
    /// without us). Final.
    NotLeft,
    /// The connection dropped; our node may be gone if the session expires.
    Suspended,
    /// The same session is back.
    Reconnected,
    /// The participation ended (session expired or closed, our node deleted by
    /// someone else, no permission, ...). Final.
    Failed {
        /// The cause.
        error: Error,
    },
}

impl DoubleBarrierEvent {
    /// Does this event end the participation?
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            DoubleBarrierEvent::NotEntered
                | DoubleBarrierEvent::Left
                | DoubleBarrierEvent::NotLeft
                | DoubleBarrierEvent::Failed { .. }
        )
    }

    /// For a caller waiting in `enter`: `Some` when this event ends the wait —
    /// `Ok(true)` entered, `Ok(false)` the deadline passed, `Err` the failure.
    pub fn enter_outcome(&self) -> Option<Result<bool, Error>> {
        match self {
            DoubleBarrierEvent::Entered { .. } => Some(Ok(true)),
            DoubleBarrierEvent::NotEntered => Some(Ok(false)),
            DoubleBarrierEvent::Failed { error } => Some(Err(error.clone())),
            DoubleBarrierEvent::Left | DoubleBarrierEvent::NotLeft => Some(Err(Error::Finished)),
            DoubleBarrierEvent::Suspended | DoubleBarrierEvent::Reconnected => None,
        }
    }

    /// For a caller waiting in `leave`: `Some` when this event ends the wait —
    /// `Ok(true)` left, `Ok(false)` the deadline passed, `Err` the failure.
    pub fn leave_outcome(&self) -> Option<Result<bool, Error>> {
        match self {
            DoubleBarrierEvent::Left => Some(Ok(true)),
            DoubleBarrierEvent::NotLeft => Some(Ok(false)),
            DoubleBarrierEvent::Failed { error } => Some(Err(error.clone())),
            DoubleBarrierEvent::NotEntered => Some(Err(Error::Finished)),
            _ => None,
        }
    }
}

/// A double barrier participant: one `enter` and one `leave`. See the
/// [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DoubleBarrier {
    config: DoubleBarrierConfig,
    node_path: String,
    ready_path: String,
    stage: Stage,
    need: Need,
    /// Our node is deleted (by us in leave, or by someone else).
    deleted_own: bool,
    /// Deleting `b` is refused for good (no permission, or it is `/`): leave it.
    keep_dir: bool,
    /// The next read is synced first (after a reconnect or a failure).
    sync_next: bool,
    /// `Suspended` was reported: `Reconnected` follows when the session is back.
    suspended: bool,
    deadline: Option<Instant>,
    kit: Kit<Purpose, DoubleBarrierEvent>,
}

impl DoubleBarrier {
    /// A participant that does nothing until [`enter`](Self::enter).
    pub fn new(config: DoubleBarrierConfig) -> Self {
        let node_path = join(&config.path, &config.id);
        let ready_path = join(&config.path, READY);
        let keep_dir = config.path == "/";
        DoubleBarrier {
            config,
            node_path,
            ready_path,
            stage: Stage::Idle,
            need: Need::NONE,
            deleted_own: false,
            keep_dir,
            sync_next: false,
            suspended: false,
            deadline: None,
            kit: Kit::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &DoubleBarrierConfig {
        &self.config
    }

    /// Our member node's full path.
    pub fn node_path(&self) -> &str {
        &self.node_path
    }

    /// Where we stand.
    pub fn phase(&self) -> Phase {
        self.stage.phase()
    }

    /// What we know while entering (nothing outside it).
    fn enter_state(&self) -> Entering {
        match &self.stage {
            Stage::Entering(e) => *e,
            _ => Entering::default(),
        }
    }

    /// Changes what we know while entering (nothing outside it).
    fn set_enter(&mut self, f: impl FnOnce(&mut Entering)) {
        if let Stage::Entering(e) = &mut self.stage {
            f(e);
        }
    }

    /// Changes what we know while leaving (nothing outside it).
    fn set_leave(&mut self, f: impl FnOnce(&mut Leaving)) {
        if let Stage::Leaving(l) = &mut self.stage {
            f(l);
        }
    }

    /// Leave: the member we wait for.
    fn watching(&self) -> Option<&str> {
        match &self.stage {
            Stage::Leaving(l) => l.watching.as_deref(),
            _ => None,
        }
    }

    /// Starts entering; `deadline` bounds the wait. `Err(Error::Finished)` if enter was
    /// called before; a path or count that cannot work fails at once.
    pub fn enter(&mut self, now: Instant, deadline: Option<Instant>) -> Result<(), Error> {
        if self.phase() != Phase::Idle {
            return Err(Error::Finished);
        }
        let bad_id =
            self.config.id.is_empty() || self.config.id == READY || self.config.id.contains('/');
        let path_error = validate_path(&self.config.path)
            .err()
            .or_else(|| validate_path(&self.node_path).err());
        if let Some(error) = path_error {
            self.stage = Stage::Done;
            return Err(Error::InvalidPath {
                path: self.node_path.clone(),
                error,
            });
        }
        if bad_id || self.config.count == 0 {
            self.stage = Stage::Done;
            return Err(Error::Server(ErrorCode::BadArguments));
        }
        self.stage = Stage::Entering(Entering::default());
        self.deadline = deadline;
        self.need |= ENTER;
        self.on_timeout(now);
        Ok(())
    }

    /// Starts leaving (after `Entered`); `deadline` bounds the wait.
    /// `Err(Error::Finished)` if we have not entered (or already left).
    pub fn leave(&mut self, now: Instant, deadline: Option<Instant>) -> Result<(), Error> {
        if self.phase() != Phase::Entered {
            return Err(Error::Finished);
        }
        self.stage = Stage::Leaving(Leaving::default());
        self.deadline = deadline;
        self.need |= LIST;
        self.on_timeout(now);
        Ok(())
    }

    fn emit(&mut self, event: DoubleBarrierEvent) {
        self.kit.emit(event);
    }

    fn again(&mut self, now: Instant, need: Need) {
        self.need |= need;
        self.sync_next = true;
        self.kit.failed(now);
    }

    /// The names a listing found (none if the directory is gone), or `None` when it
    /// failed: retried for `need`, the barrier failed, or the session ended.
    fn listed(&mut self, now: Instant, result: Reply, need: Need) -> Option<Vec<String>> {
        let children = match result {
            Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => c,
            Ok(_) => {
                self.fail(Error::UnexpectedReply);
                return None;
            }
            Err(Error::Server(ErrorCode::NoNode)) => Vec::new(),
            Err(e) if e.is_retryable() => {
                self.again(now, need);
                return None;
            }
            Err(e) if e.ends_session() => return None,
            Err(e) => {
                self.fail(e);
                return None;
            }
        };
        self.kit.succeeded();
        Some(children)
    }

    fn in_flight(&self, f: impl Fn(&Purpose) -> bool) -> bool {
        self.kit.any(f)
    }

    fn fail(&mut self, error: Error) {
        match self.phase() {
            Phase::Done | Phase::Stopping => {}
            _ => {
                self.emit(DoubleBarrierEvent::Failed { error });
                self.stop();
            }
        }
    }

    /// Ends the participation: our node (if any, or if it may exist) is deleted.
    fn stop(&mut self) {
        self.deadline = None;
        self.need = Need::NONE;
        // In doubt too: a create in flight or lost is followed by our delete (FIFO).
        let may_exist = !self.deleted_own && self.phase() != Phase::Idle;
        if may_exist {
            self.stage = Stage::Stopping;
            self.need = STOP_DELETE;
        } else {
            self.stage = Stage::Done;
        }
    }

    fn entered(&mut self, late: bool) {
        if self.phase() != Phase::Entering {
            return;
        }
        self.stage = Stage::Entered;
        self.deadline = None;
        self.need = Need::NONE;
        self.kit.succeeded();
        self.emit(DoubleBarrierEvent::Entered { late });
    }

    fn left(&mut self) {
        if self.phase() != Phase::Leaving {
            return;
        }
        self.stage = Stage::Done;
        self.deadline = None;
        self.need = Need::NONE;
        self.deleted_own = true;
        self.emit(DoubleBarrierEvent::Left);
    }

    fn on_create(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => {
                // NodeExists: our earlier create landed (the name is unique).
                self.set_enter(|e| e.created = true);
                self.kit.succeeded();
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                match self.kit.parents_missing(&self.config.path) {
                    ParentStep::Again => self.again(now, ENTER | PARENTS),
                    ParentStep::Create => self.need |= ENTER | PARENTS,
                    ParentStep::Fail(e) => self.fail(e),
                }
            }
            Err(e) if e.is_retryable() => self.again(now, ENTER),
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e),
        }
    }

    fn on_ready_exists(&mut self, now: Instant, result: Reply) {
        match result {
            // A watch on an existing `ready` fires on its deletion, not a creation.
            Ok(_) => self.set_enter(|e| e.ready_armed = false),
            Err(Error::Server(ErrorCode::NoNode)) => self.set_enter(|e| e.ready_armed = true),
            Err(e) if e.is_retryable() => {
                self.set_enter(|e| e.ready_armed = false);
                // The listing paired with it decides whether to look again.
                self.sync_next = true;
                self.kit.failed(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e),
        }
    }

    fn on_list_enter(&mut self, now: Instant, result: Reply) {
        if self.enter_state().ready_seen {
            return; // `ready` was created: the look at our node decides
        }
        if !self.enter_state().created || self.need.has(ENTER) {
            // The listing paired with our create. Refused by the session while the
            // create went out (never applied; a refusal comes before the replies to
            // requests sent earlier): look again after a backoff, behind the create.
            // Any other answer comes with the create's own, which decides.
            let create_on_its_way = !self.enter_state().created && !self.need.has(ENTER);
            let refused = result
                .as_ref()
                .is_err_and(|e| e.is_retryable() && !e.may_have_applied());
            if create_on_its_way && refused {
                self.again(now, ARM);
            }
            return;
        }
        let Some(children) = self.listed(now, result, ARM) else {
            return;
        };
        if !children.contains(&self.config.id) {
            // Our node is gone while we enter: deleted by someone else.
            self.set_enter(|e| e.created = false);
            return self.fail(Error::Server(ErrorCode::NoNode));
        }
        let has_ready = children.iter().any(|c| c == READY);
        let members = children.len() - usize::from(has_ready);
        if has_ready {
            self.entered(true);
        } else if members >= self.config.count as usize {
            if !self.in_flight(|p| *p == Purpose::ReadyCreate) {
                self.need |= READY_CREATE;
            }
        } else if !self.enter_state().ready_armed && !self.in_flight(|p| *p == Purpose::ReadyExists)
        {
            // The watch we have (if any) is about an older `ready`: arm a creation watch.
            self.need |= ARM;
        }
    }

    fn on_ready_create(&mut self, now: Instant, result: Reply) {
        match (multi_failure(&result), result) {
            // `ready` exists now: the `exists` of our node sent behind it decides.
            (None, Ok(Response::Multi(_))) | (Some((1, ErrorCode::NodeExists)), _) => {
                self.set_enter(|e| e.ready_seen = true);
                // The look at our node sent behind it was answered first (refused by
                // the session at once) and set aside: look again.
                if !self.in_flight(|p| *p == Purpose::Confirm) {
                    self.need |= CONFIRM;
                }
            }
            // Our node is gone (deleted by someone else): `ready` was not made.
            (Some((0, ErrorCode::NoNode)), _) => {
                self.set_enter(|e| e.created = false);
                self.deleted_own = true;
                self.fail(Error::Server(ErrorCode::NoNode));
            }
            _ if self.enter_state().ready_seen => {} // heard of its creation: the look at our node decides
            (Some((_, ErrorCode::NoNode)), _) => self.again(now, ARM),
            (Some((_, code)), _) => self.fail(Error::Server(code)),
            (None, Ok(_)) => self.fail(Error::UnexpectedReply),
            (None, Err(Error::Server(ErrorCode::NoNode))) => self.again(now, ARM),
            // Not sent again blindly: by the time it could go, the round may have ended
            // without us (our node deleted by someone else, the others gone) and a
            // `ready` made then would open the next round with too few members. Look
            // again (synced): the listing decides, as the first time.
            (None, Err(e)) if e.is_retryable() => self.again(now, ARM),
            (None, Err(e)) if e.ends_session() => {}
            (None, Err(e)) => self.fail(e),
        }
    }

    /// The look at our node after `ready` was created: there, entered; gone (deleted by
    /// someone else), the participation fails — never `Entered` on a node that is gone.
    fn on_confirm(&mut self, now: Instant, result: Reply) {
        if !self.enter_state().ready_seen {
            return; // its `ready` create failed: what that answer chose goes on
        }
        match result {
            Ok(Response::Stat(_)) => self.entered(false),
            Ok(_) => self.fail(Error::UnexpectedReply),
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.set_enter(|e| e.created = false);
                self.deleted_own = true;
                self.fail(Error::Server(ErrorCode::NoNode));
            }
            Err(e) if e.is_retryable() => self.again(now, CONFIRM),
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e),
        }
    }

    /// Decides from a listing in leave.
    fn on_list_leave(&mut self, now: Instant, result: Reply) {
        let Some(children) = self.listed(now, result, LIST) else {
            return;
        };
        let saw_ready = children.iter().any(|c| c == READY);
        self.set_leave(|l| l.saw_ready = saw_ready);
        let mut members: Vec<String> = children.into_iter().filter(|c| c != READY).collect();
        members.sort_unstable();
        let ours = self.config.id.as_str();
        let mine = members.iter().any(|m| m == ours);
        if !mine {
            self.deleted_own = true;
        }
        if !saw_ready {
            // `ready` goes only with the round's last member (in one `multi`), so the
            // round is over: whoever is in `b` now belongs to the next round.
            if mine {
                // Only if someone removed `ready` early (Curator's leave does): go too.
                self.need |= DELETE_OWN | LIST;
            } else {
                self.left();
            }
            return;
        }
        match (members.first(), members.last()) {
            (None, _) => {
                if saw_ready {
                    self.need |= CLEANUP; // a crashed last leaver's `ready`
                } else {
                    self.left();
                }
            }
            (Some(low), Some(high)) if low == high && mine => self.need |= FINAL,
            (Some(low), Some(high)) if low == ours => {
                self.set_leave(|l| l.watching = Some(high.clone()));
                self.need |= WAIT;
            }
            (Some(low), _) => {
                self.set_leave(|l| l.watching = Some(low.clone()));
                if mine {
                    self.need |= DELETE_OWN;
                }
                self.need |= WAIT;
            }
        }
    }

    fn on_wait(&mut self, now: Instant, name: String, result: Reply) {
        if self.watching() != Some(name.as_str()) {
            return;
        }
        match result {
            Ok(_) => {} // armed: wait for its deletion
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.set_leave(|l| l.watching = None);
                self.need |= LIST;
            }
            Err(e) if e.is_retryable() => {
                self.set_leave(|l| l.watching = None);
                self.again(now, LIST);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e),
        }
    }

    fn on_delete_own(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => self.deleted_own = true,
            Err(e) if e.is_retryable() => self.again(now, DELETE_OWN),
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e),
        }
    }

    /// The answer to the last leaver's (or the cleanup's) `multi`.
    fn on_final(&mut self, now: Instant, result: Reply, dir_at: Option<usize>) {
        match result {
            Ok(Response::Multi(results)) => {
                let failure = results.iter().enumerate().find_map(|(i, r)| match r {
                    MultiResult::Error(c)
                        if !c.is_ok() && *c != ErrorCode::RuntimeInconsistency =>
                    {
                        Some((i, *c))
                    }
                    _ => None,
                });
                match failure {
                    None => self.left(),
                    Some((i, code)) => {
                        let refused_for_good =
                            !matches!(code, ErrorCode::NotEmpty | ErrorCode::NoNode);
                        if Some(i) == dir_at && refused_for_good {
                            self.keep_dir = true; // leave `b` (no permission)
                        } else if refused_for_good {
                            return self.fail(Error::Server(code));
                        }
                        // Someone arrived, or something is gone already: look again.
                        self.need |= LIST;
                    }
                }
            }
            Ok(_) => self.fail(Error::UnexpectedReply),
            Err(e) if e.is_retryable() => self.again(now, LIST),
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e),
        }
    }

    fn on_stop_delete(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => {
                // Any create of ours was sent before this delete: it is answered.
                self.deleted_own = true;
                self.stage = Stage::Done;
            }
            Err(e) if e.is_retryable() => self.again(now, STOP_DELETE),
            // Refused for good: the node stays until the session ends.
            Err(_) => self.stage = Stage::Done,
        }
    }
}

impl DoubleBarrier {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, purpose: Purpose, result: Reply) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again.
        let phase = self.phase();
        match purpose {
            Purpose::Parent(p) => self.kit.parent_answered(&p, &result),
            Purpose::Dir => {}
            Purpose::Sync => {}
            Purpose::Create if phase == Phase::Entering => self.on_create(now, result),
            Purpose::ReadyExists if phase == Phase::Entering => self.on_ready_exists(now, result),
            Purpose::List if phase == Phase::Entering => self.on_list_enter(now, result),
            Purpose::List if phase == Phase::Leaving => self.on_list_leave(now, result),
            Purpose::ReadyCreate if phase == Phase::Entering => self.on_ready_create(now, result),
            Purpose::Confirm if phase == Phase::Entering => self.on_confirm(now, result),
            Purpose::Wait(name) if phase == Phase::Leaving => self.on_wait(now, name, result),
            Purpose::DeleteOwn if phase == Phase::Leaving => self.on_delete_own(now, result),
            Purpose::DeleteOwn => {
                if matches!(result, Ok(_) | Err(Error::Server(ErrorCode::NoNode))) {
                    self.deleted_own = true;
                }
            }
            Purpose::Final {
                with_ready,
                with_dir,
            } if phase == Phase::Leaving => {
                let dir_at = with_dir.then_some(1 + usize::from(with_ready));
                self.on_final(now, result, dir_at)
            }
            Purpose::Cleanup { with_dir } if phase == Phase::Leaving => {
                self.on_final(now, result, with_dir.then_some(1))
            }
            Purpose::StopDelete => self.on_stop_delete(now, result),
            _ => {} // an answer for a phase that is over
        }
        self.drive(now);
    }
}

impl Protocol for DoubleBarrier {
    protocol_head!(DoubleBarrierEvent, answer);

    fn on_watch(&mut self, now: Instant, _op: OpId, event: &WatchEvent) {
        match self.phase() {
            Phase::Entering if event.path == self.ready_path && !self.enter_state().ready_seen => {
                match event.event_type {
                    // Created after our node existed: the round is on — if our node is
                    // still there (an operator may have deleted it): look at it first.
                    EventType::NodeCreated
                        if self.enter_state().created && !self.need.has(ENTER) =>
                    {
                        self.set_enter(|e| e.ready_seen = true);
                        if !self.in_flight(|p| *p == Purpose::Confirm) {
                            self.need |= CONFIRM;
                        }
                    }
                    _ => {
                        // About an older `ready` (heard before our create's answer), or
                        // a deletion: look again unless a look is on its way.
                        self.set_enter(|e| e.ready_armed = false);
                        if self.enter_state().created
                            && !self.need.has(ENTER)
                            && !self.in_flight(|p| matches!(p, Purpose::List | Purpose::Create))
                        {
                            self.need |= ARM;
                        }
                    }
                }
            }
            Phase::Leaving => {
                let name = name_of(&event.path);
                if self.watching() == Some(name) {
                    match event.event_type {
                        EventType::NodeDeleted => {
                            self.set_leave(|l| l.watching = None);
                            self.need |= LIST;
                        }
                        _ => self.need |= WAIT, // still there: watch on
                    }
                }
            }
            _ => {}
        }
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if let Some(error) = change.end_error() {
            self.kit.clear_requests();
            self.need = Need::NONE;
            match self.phase() {
                Phase::Entering | Phase::Entered | Phase::Leaving => {
                    self.emit(DoubleBarrierEvent::Failed { error })
                }
                _ => {} // the node went with the session
            }
            self.stage = Stage::Done;
            return;
        }
        let active = matches!(
            self.phase(),
            Phase::Entering | Phase::Entered | Phase::Leaving
        );
        match change {
            SessionChange::Suspended if active && !self.suspended => {
                self.suspended = true;
                self.emit(DoubleBarrierEvent::Suspended);
            }
            SessionChange::Reconnected { .. } => {
                if core::mem::take(&mut self.suspended) && active {
                    self.emit(DoubleBarrierEvent::Reconnected);
                }
                self.sync_next = true;
                // Look again (synced): a change while the connection was down counts.
                match self.phase() {
                    // `ready` was created: only the look at our node is left.
                    Phase::Entering
                        if self.enter_state().ready_seen
                            && !self.in_flight(|p| *p == Purpose::Confirm) =>
                    {
                        self.need |= CONFIRM;
                    }
                    Phase::Entering
                        if self.enter_state().created
                            && !self.enter_state().ready_seen
                            && !self.need.has(ENTER)
                            && !self.in_flight(|p| {
                                matches!(p, Purpose::List | Purpose::ReadyExists)
                            }) =>
                    {
                        self.need |= ARM;
                    }
                    Phase::Leaving if !self.in_flight(|p| matches!(p, Purpose::List)) => {
                        self.set_leave(|l| l.watching = None);
                        self.need.remove(WAIT);
                        self.need |= LIST;
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        if self.deadline.is_some_and(|d| now >= d) {
            match self.phase() {
                Phase::Entering => {
                    self.emit(DoubleBarrierEvent::NotEntered);
                    self.stop();
                }
                Phase::Leaving => {
                    self.emit(DoubleBarrierEvent::NotLeft);
                    self.stop();
                }
                _ => self.deadline = None,
            }
        }
        self.drive(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        if !matches!(self.phase(), Phase::Done | Phase::Stopping) {
            self.stop();
        }
        self.kit.clear_events();
        self.drive(now);
    }

    fn deadline(&self) -> Option<Instant> {
        let deadline = match self.phase() {
            Phase::Entering | Phase::Leaving => self.deadline,
            _ => None,
        };
        self.kit.timeout(
            deadline,
            !self.need.is_empty() && self.phase() != Phase::Done,
        )
    }

    fn finished(&self) -> bool {
        self.phase() == Phase::Done && self.kit.is_idle()
    }

    fn check(&self) {
        // Each stage asks only for its own requests (none outside entering, leaving
        // and stopping); nothing is sent before `enter`.
        debug_assert!(
            self.need.within(self.phase()),
            "{:?} asked for in {:?}",
            self.need,
            self.phase()
        );
        match &self.stage {
            Stage::Idle => debug_assert!(self.kit.is_quiet(), "a request before enter"),
            // `ready` counts only once our node exists.
            Stage::Entering(e) => debug_assert!(
                !e.ready_seen || e.created,
                "ready heard of before our node existed"
            ),
            _ => {}
        }
    }
}
