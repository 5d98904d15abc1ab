//! The lock machine: its state ([`Phase`] and the independent flags), its commands,
//! the decisions every input leads to, and `drive`, which sends what is due.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::mem;

use super::data::{grant_data, notice_data, parse_grant, parse_notice};
use super::phase::{
    Attempt, Blocker, Ended, Entering, Finish, Handoff, Holder, Leaving, Need, Node, Ours,
    OwnWatch, Phase, Purpose, Search, Waiter, Watching,
};
use super::types::{Acquire, LockConfig, LockEvent, LockKind, LostReason, Naming, Release};
use super::types::{CURATOR_REVOKE, MAX_SUCCESSORS, REVOKE};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::contender;
use crate::recipe::kit::{join, valid_path, Kit};
use crate::recipe::{OpId, SharedListing};
use crate::time::Instant;

/// The lock state machine. See the [module docs](super).
///
/// Its state is a `Phase` — idle, entering, waiting, held, leaving,
/// done — whose variants carry the data that exists only in them (a waiter's blocker
/// and its watch, a holder's node and fencing token, a create in doubt's search, a
/// release's handoff); beside it only what is independent of the phase: the watch on
/// our own node, the reads to send again, the orphans a recovery found, and four flags.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lock {
    pub(super) config: LockConfig,
    pub(super) phase: Phase,
    pub(super) kit: Kit<Purpose, LockEvent>,
    /// The data watch on our own node.
    pub(super) own: OwnWatch,
    /// Reads to send again when the session allows.
    pub(super) need: Need,
    /// Nodes of ours a recovery found besides the one adopted: to delete.
    pub(super) orphans: Vec<String>,
    /// The next read after a reconnect or a failure goes after a `sync`.
    pub(super) sync_next: bool,
    /// The children watch on the directory set by the listing that decided is armed
    /// (nothing fired it since): while we hold, it stands in for the own-node watch.
    pub(super) dir_armed: bool,
    /// A listing with that directory watch was refused: list without it from now on.
    pub(super) stand_in_refused: bool,
    /// `RevocationRequested` was reported (once per attempt).
    pub(super) revocation_told: bool,
}

impl Lock {
    /// A lock that does nothing until [`acquire`](Self::acquire).
    pub fn new(config: LockConfig) -> Lock {
        // Backoffs jittered by our id: waiters refused together come back apart.
        let kit = Kit::new(&config.id);
        Lock {
            config,
            phase: Phase::Idle,
            kit,
            own: OwnWatch::Off,
            need: Need::default(),
            orphans: Vec::new(),
            sync_next: false,
            dir_armed: false,
            stand_in_refused: false,
            revocation_told: false,
        }
    }

    // ----- getters -----

    /// The configuration.
    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    /// Do we hold the lock (and is the connection up)?
    pub fn is_held(&self) -> bool {
        matches!(&self.phase, Phase::Held(h) if !h.suspended)
    }

    /// Held, connection up, and nothing heard since that could mean our node is gone:
    /// no verification after a reconnect pending or on its way, no read of our node on
    /// its way, and our node watched — the listing's directory watch standing in has
    /// not fired, or the own-node watch is armed (a holder whose directory changed
    /// reads its node first). What a composite of locks
    /// ([`multi_lock`](crate::recipe::multi_lock)) waits for before it reports the whole
    /// as held: a hold decided earlier must not be vouched for on a node the client may
    /// have heard go.
    pub fn is_held_unquestioned(&self) -> bool {
        match &self.phase {
            Phase::Held(h) => {
                let reading = self
                    .kit
                    .any(|p| matches!(p, Purpose::Own | Purpose::Verify | Purpose::Sync));
                !h.suspended
                    && !h.verify
                    && !reading
                    && (!self.config.watch_own_node || self.dir_armed || self.own != OwnWatch::Off)
            }
            _ => false,
        }
    }

    /// Our node's name, once created.
    pub fn node(&self) -> Option<&str> {
        self.our_node().map(|n| n.name.as_str())
    }

    /// Our node and its fencing token while held.
    pub fn held_node(&self) -> Option<(i64, String)> {
        match &self.phase {
            Phase::Held(h) => Some((h.node.czxid, h.node.name.clone())),
            _ => None,
        }
    }

    /// Was the current hold (or the one being released) handed to us by the previous
    /// holder — its grant or a notice read in our node, or (read and write locks
    /// without the own-node watch) a grant in our blocker's before it went — rather
    /// than decided from a listing or a blocker's deletion alone?
    pub fn held_by_grant(&self) -> bool {
        match &self.phase {
            Phase::Held(h) => h.by_grant,
            Phase::Leaving(Leaving {
                finish: Finish::Released(handoff),
                ..
            }) => handoff.by_grant,
            _ => false,
        }
    }

    /// Re-entrant levels held.
    pub fn depth(&self) -> u32 {
        match &self.phase {
            Phase::Held(h) => h.depth,
            Phase::Done(e) => e.depth,
            _ => 0,
        }
    }

    /// Has the attempt ended (held no more, nothing to wait for)?
    pub fn has_ended(&self) -> bool {
        matches!(self.phase, Phase::Done(_))
    }

    // ----- commands -----

    /// Starts acquiring; `deadline` bounds the wait (`Some(now)` is a try-lock). On a
    /// re-entrant lock that is held, adds a level. See [`Acquire`].
    pub fn acquire(&mut self, now: Instant, deadline: Option<Instant>) -> Acquire {
        let reentrant = self.config.reentrant;
        match &mut self.phase {
            Phase::Idle => {
                if let Err(error) = valid_path(&self.config.dir) {
                    self.phase = Phase::Done(Ended::default());
                    self.kit.emit(LockEvent::Failed { error });
                    return Acquire::Pending;
                }
                self.phase = Phase::Entering(Entering {
                    ours: Ours::Send { parents: false },
                    attempt: Attempt {
                        deadline,
                        grace: None,
                        joining: 1,
                    },
                });
                self.drive(now);
                Acquire::Pending
            }
            Phase::Held(h) if reentrant && !h.suspended => {
                h.depth += 1;
                Acquire::Held {
                    fencing_token: h.node.czxid,
                    node: h.node.name.clone(),
                }
            }
            Phase::Held(h) if reentrant => {
                h.joining += 1;
                Acquire::Suspended {
                    fencing_token: h.node.czxid,
                    node: h.node.name.clone(),
                }
            }
            Phase::Entering(Entering { attempt, .. }) | Phase::Waiting(Waiter { attempt, .. })
                if reentrant =>
            {
                attempt.joining += 1;
                Acquire::Pending
            }
            Phase::Done(e) if reentrant && e.depth > 0 => match e.lost {
                Some(reason) => Acquire::Failed(reason.error()),
                None => Acquire::Ended,
            },
            _ => Acquire::Ended,
        }
    }

    /// Releases one level of a held lock, or cancels an attempt. See [`Release`].
    pub fn release(&mut self, now: Instant) -> Release {
        let answer = self.release_level(now);
        self.drive(now);
        answer
    }

    fn release_level(&mut self, now: Instant) -> Release {
        match &mut self.phase {
            Phase::Held(h) if h.depth > 1 => {
                h.depth -= 1;
                Release::StillHeld { depth: h.depth }
            }
            Phase::Held(h) => {
                h.depth = 0;
                self.stop_with(Finish::Released(Handoff::default()), now);
                Release::Pending
            }
            Phase::Entering(Entering { attempt, .. }) | Phase::Waiting(Waiter { attempt, .. })
                if attempt.joining > 1 =>
            {
                attempt.joining -= 1;
                Release::StillHeld {
                    depth: attempt.joining,
                }
            }
            Phase::Idle | Phase::Entering(_) | Phase::Waiting(_) => {
                self.stop_with(Finish::Cancelled, now);
                if self.has_ended() {
                    Release::Done
                } else {
                    Release::Pending
                }
            }
            Phase::Leaving(_) => Release::Pending,
            Phase::Done(e) => {
                e.depth = e.depth.saturating_sub(1);
                Release::Done
            }
        }
    }

    /// Gives up an attempt (or releases a held lock): [`release`](Self::release).
    pub fn cancel(&mut self, now: Instant) -> Release {
        self.release(now)
    }

    // ----- where things are -----

    /// Our node, if we know it.
    pub(super) fn our_node(&self) -> Option<&Node> {
        match &self.phase {
            Phase::Entering(Entering {
                ours: Ours::Known(node),
                ..
            })
            | Phase::Leaving(Leaving {
                ours: Ours::Known(node),
                ..
            }) => Some(node),
            Phase::Waiting(w) => Some(&w.node),
            Phase::Held(h) => Some(&h.node),
            _ => None,
        }
    }

    /// The attempt of an entering or waiting lock.
    pub(super) fn attempt_mut(&mut self) -> Option<&mut Attempt> {
        match &mut self.phase {
            Phase::Entering(Entering { attempt, .. }) | Phase::Waiting(Waiter { attempt, .. }) => {
                Some(attempt)
            }
            _ => None,
        }
    }

    /// Is `phase` entering or waiting (an attempt not decided yet)?
    pub(super) fn attempting(&self) -> bool {
        matches!(self.phase, Phase::Entering(_) | Phase::Waiting(_))
    }

    /// What every node of this lock starts with: `_c_<id>-<marker>`, or kazoo's
    /// `<id>__lock__` (made when needed: a waiter keeps no copy).
    pub(super) fn prefix(&self) -> String {
        match self.config.naming {
            Naming::Curator => {
                let mut prefix = contender::protected_prefix(&self.config.id);
                prefix.push_str(self.config.kind.marker());
                prefix
            }
            Naming::Kazoo => alloc::format!("{}{}", self.config.id, contender::KAZOO_LOCK),
        }
    }

    /// The ACL to create with (see [`LockConfig::acl`]).
    fn acl(&self) -> Vec<Acl> {
        if self.config.acl.is_empty() {
            Acl::open_unsafe()
        } else {
            self.config.acl.clone()
        }
    }

    pub(super) fn our_path(&self) -> Option<String> {
        self.our_node().map(|n| self.dir_path(&n.name))
    }

    pub(super) fn dir_path(&self, name: &str) -> String {
        join(&self.config.dir, name)
    }

    /// Do reads of our own node set a watch on it (a holder keeps one armed)?
    pub(super) fn watches_own(&self) -> bool {
        self.config.watch_own_node || self.config.revocable
    }

    /// Waiting without an own-node watch, a waiter watches its blocker's data: once a
    /// read of it shows a grant, the blocker's deletion alone hands us the lock — one
    /// write and one notification per handoff, no turn read (which today also arms the
    /// own-node watch: with that watch, the turn read stays).
    fn fast_handoff(&self) -> bool {
        !self.watches_own()
            && self.config.kind.is_granted_to()
            && self.config.kind != LockKind::Exclusive
    }

    /// An exclusive waiter (not revocable: that one watches its node from creation)
    /// arms the watch on its blocker and a data watch on its own node in one request,
    /// and hears through the latter the grant or the notice a holder's release writes.
    pub(super) fn notified_waiting(&self) -> bool {
        self.config.kind == LockKind::Exclusive && !self.config.revocable
    }

    /// Is a watch on our own node wanted now? A holder's (unless disabled), to notice
    /// its deletion or a revocation. A waiter's only if revocable, or of a kind that is
    /// never granted (latches, leases): the others read their node when their blocker
    /// goes (the turn read: granted? still there?), which is all a waiter needs — a
    /// blocker's deletion never hands us a lock unless that read finds our node.
    fn wants_own_watch(&self) -> bool {
        match self.phase {
            Phase::Held(_) => self.watches_own(),
            Phase::Waiting(_) | Phase::Entering(_) => {
                self.config.revocable
                    || (self.config.watch_own_node && !self.config.kind.is_granted_to())
            }
            _ => false,
        }
    }

    pub(super) fn arm_own(&mut self) {
        let stood_in = matches!(self.phase, Phase::Held(_)) && self.dir_armed;
        if self.own == OwnWatch::Off && !stood_in && self.wants_own_watch() {
            self.need.add(Need::OWN);
        }
    }

    /// Marks `need` for a retry after a retryable failure at `now`.
    pub(super) fn again(&mut self, now: Instant, need: Need) {
        self.need.add(need);
        self.retry_later(now);
    }

    /// A retryable failure at `now`: what was marked goes after the backoff, behind a
    /// `sync`.
    pub(super) fn retry_later(&mut self, now: Instant) {
        self.sync_next = true;
        self.kit.failed(now);
    }

    // ----- decisions -----

    /// Decides from a listing: held, or wait for the nearest blocker.
    /// A listing shared with other waiters is looked up in its sorted form, built once.
    pub(super) fn evaluate(
        &mut self,
        children: &[String],
        shared: Option<&mut SharedListing>,
        now: Instant,
    ) {
        let Some(ours) = self.our_node().map(|n| n.name.clone()) else {
            return;
        };
        let kind = self.config.kind;
        let reader = kind == LockKind::Read;
        let sorted =
            shared.and_then(|s| s.get_or_build(|| contender::SortedListing::new(children)));
        let found = match sorted {
            Some(sorted) => sorted.blockers(children, &ours, reader),
            None => contender::blockers(children, &ours, reader),
        };
        // Who follows us, if we hold now or when our only blocker goes (a later listing
        // or a grant tells more otherwise).
        let mut successors = Vec::new();
        if kind.grants() && matches!(found, Some((0 | 1, _))) {
            successors = match sorted {
                Some(sorted) => sorted.successors(children, &ours, MAX_SUCCESSORS),
                None => contender::successors(children, &ours, MAX_SUCCESSORS),
            };
        }
        let past_deadline = self.attempt_mut().is_some_and(|a| a.grace.is_some());
        match found {
            // Our node is gone while we wait: deleted by someone else.
            None => self.node_deleted(now),
            Some((_, None)) => self.acquired(successors, false),
            Some((count, _)) if matches!(kind, LockKind::Lease { max } if count < max as usize) => {
                self.acquired(successors, false)
            }
            Some(_) if past_deadline => self.stop_with(Finish::NotAcquired, now),
            Some((count, _)) if matches!(kind, LockKind::Lease { .. }) => {
                // The listing that told us set a children watch: it fires on the change.
                self.wait(count, None, successors);
                self.arm_own();
            }
            Some((count, Some(nearest))) => {
                let watch = Watching::on(nearest);
                self.wait(count, Some(watch), successors);
                self.arm_own();
            }
        }
    }

    /// Waits behind `blockers` contenders, watching the nearest (`watch`, to send).
    fn wait(&mut self, blockers: usize, watch: Option<Watching>, successors: Vec<String>) {
        let (node, attempt) = match mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Entering(Entering {
                ours: Ours::Known(node),
                attempt,
            }) => (node, attempt),
            Phase::Waiting(w) => (w.node, w.attempt),
            other => {
                self.phase = other;
                return;
            }
        };
        self.phase = Phase::Waiting(Waiter {
            node,
            blockers,
            blocker: Blocker {
                watch,
                holds: false,
            },
            successors,
            attempt,
        });
    }

    /// We hold: `successors` follow us; `by_grant` if the previous holder handed the
    /// lock to us.
    pub(super) fn acquired(&mut self, successors: Vec<String>, by_grant: bool) {
        let (node, joining) = match mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Entering(Entering {
                ours: Ours::Known(node),
                attempt,
            }) => (node, attempt.joining),
            Phase::Waiting(w) => (w.node, w.attempt.joining),
            other => {
                self.phase = other;
                return;
            }
        };
        self.kit.emit(LockEvent::Acquired {
            fencing_token: node.czxid,
            node: node.name.clone(),
        });
        self.phase = Phase::Held(Holder {
            node,
            successors,
            depth: joining.max(1),
            joining: 0,
            by_grant,
            suspended: false,
            verify: false,
        });
        self.arm_own();
    }

    /// Held by a grant found in our node: its tail names our own successors.
    fn granted(&mut self, tail: Vec<String>) {
        let successors = if self.config.kind.grants() {
            tail
        } else {
            Vec::new() // a kind that never grants keeps none
        };
        self.acquired(successors, true);
    }

    /// The blocker watched by `op` is gone; only the one we watch now matters.
    pub(super) fn blocker_gone(&mut self, op: OpId) {
        let live = self.own == OwnWatch::Live;
        let own_known = live || !self.watches_own();
        let reading = self.kit.any(|p| *p == Purpose::Own);
        let granted_to = self.config.kind.is_granted_to();
        let Phase::Waiting(w) = &mut self.phase else {
            return;
        };
        if w.blocker.watch.as_ref().and_then(Watching::op) != Some(op) {
            return;
        }
        let seq = w.blocker.watch.take().and_then(|x| x.seq()).unwrap_or(-1);
        if (w.blockers == 1 || w.blocker.holds) && own_known {
            // Lower sequence numbers never come back; handed on by a holder if it held.
            let (successors, holds) = (mem::take(&mut w.successors), w.blocker.holds);
            self.acquired(successors, holds);
        } else if reading {
            // Our node's data changed (a notice, a grant?) and the read is on its way:
            // it decides.
            w.blocker.watch = Some(Watching::Gone(seq));
        } else if granted_to && !live {
            // Its holder may have granted us the lock (a grant written with the
            // deletion would have fired a live own-node watch first): read our node.
            self.need.add(Need::TURN);
        } else {
            // More blockers; or our own node went unwatched for a while (a watch fired
            // or a read was lost): it may have been deleted unseen, so list.
            self.need.add(Need::LIST);
        }
    }

    /// Our blocker went and a read showed our node there: held if that blocker held
    /// (a notice named it) or was the only one, else list again.
    pub(super) fn turn_decided(&mut self) {
        let Phase::Waiting(w) = &mut self.phase else {
            return;
        };
        w.blocker.watch = None;
        if w.blocker.holds || w.blockers == 1 {
            // Lower sequence numbers never come back.
            let (successors, holds) = (mem::take(&mut w.successors), w.blocker.holds);
            self.acquired(successors, holds);
        } else {
            self.need.add(Need::LIST);
        }
    }

    /// Our blocker's data, read with its watch (fast handoff): a grant there means it
    /// holds (only a holder's release writes one, into its successor: every node below
    /// it was gone, and lower sequence numbers never come back), so its deletion will
    /// hand us the lock. The grant names the contenders after it: if we come first,
    /// the rest follow us, and we hand the lock on to them in turn.
    pub(super) fn blocker_data(&mut self, data: &[u8], stat: &Stat) {
        let grants = self.config.kind.grants();
        let Phase::Waiting(w) = &mut self.phase else {
            return;
        };
        let Some(Watching::Data(_, name)) = &w.blocker.watch else {
            return;
        };
        let Some(tail) = parse_grant(data, stat.version, name) else {
            return;
        };
        w.blocker.holds = true;
        if grants && tail.first() == Some(&w.node.name) {
            w.successors = tail[1..].to_vec();
        }
    }

    /// Our node's data: a revocation, or a grant (then we hold), or a notice (then our
    /// blocker holds).
    pub(super) fn own_data(&mut self, data: &[u8], stat: &Stat) {
        if self.own == OwnWatch::Asked {
            self.own = OwnWatch::Live;
        }
        self.check_revocation(data);
        let kind = self.config.kind;
        if !self.attempting() {
            return;
        }
        let ours = self.our_node().map(|n| n.name.clone());
        if kind.is_granted_to() {
            if let Some(tail) = ours
                .as_deref()
                .and_then(|o| parse_grant(data, stat.version, o))
            {
                return self.granted(tail);
            }
        }
        if kind != LockKind::Exclusive {
            return;
        }
        let notice = ours.and_then(|o| parse_notice(data, stat.version, &o));
        // Only about the blocker we wait for (or that just went): the notice's writer
        // deleted itself as it wrote, so that blocker holds from then on.
        if let (Some((holder, tail)), Phase::Waiting(w)) = (notice, &mut self.phase) {
            if w.blocker.watch.as_ref().and_then(Watching::seq) == Some(holder) {
                w.blocker.holds = true;
                w.successors = tail;
            }
        }
    }

    fn check_revocation(&mut self, data: &[u8]) {
        let live = matches!(
            self.phase,
            Phase::Entering(_) | Phase::Waiting(_) | Phase::Held(_)
        );
        if self.config.revocable
            && live
            && !self.revocation_told
            && (data == REVOKE || data == CURATOR_REVOKE)
        {
            self.revocation_told = true;
            self.kit.emit(LockEvent::RevocationRequested);
        }
    }

    // ----- endings -----

    pub(super) fn fail(&mut self, error: Error, now: Instant) {
        self.stop_with(Finish::Failed(Box::new(error)), now);
    }

    /// Ends the attempt: delete our node if we have one (or may have one), then report.
    pub(super) fn stop_with(&mut self, finish: Finish, _now: Instant) {
        self.leave(finish, false);
    }

    /// Our node is gone while we enter or wait: deleted by someone else.
    fn node_deleted(&mut self, _now: Instant) {
        self.leave(
            Finish::Failed(Box::new(Error::Server(ErrorCode::NoNode))),
            true,
        );
    }

    /// [`stop_with`](Self::stop_with); `gone`: our node is known to be gone already.
    fn leave(&mut self, mut finish: Finish, gone: bool) {
        match self.phase {
            Phase::Done(_) | Phase::Leaving(_) => return, // keep the first reason
            Phase::Idle => {
                self.phase = Phase::Done(Ended::default());
                return self.report(finish);
            }
            _ => {}
        }
        if finish == Finish::NotAcquired {
            self.kit.emit(LockEvent::NotAcquired); // tell the caller now; clean up after
        }
        let ours = match mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Entering(e) => e.ours,
            Phase::Waiting(w) => Ours::Known(w.node),
            Phase::Held(h) => {
                if let Finish::Released(handoff) = &mut finish {
                    handoff.successors = h.successors;
                    handoff.by_grant = h.by_grant;
                }
                Ours::Known(h.node)
            }
            _ => return,
        };
        self.need = Need::default();
        let (ours, send) = match ours {
            _ if gone => (Ours::Send { parents: false }, false),
            Ours::Known(node) => (Ours::Known(node), true),
            ours => (ours, false),
        };
        let created = !matches!(ours, Ours::Send { .. });
        self.phase = Phase::Leaving(Leaving { ours, finish, send });
        if !created {
            self.done(); // nothing was created
        }
        // Otherwise the create's answer, or the search for it, leads to the delete.
    }

    fn report(&mut self, finish: Finish) {
        match finish {
            Finish::Released(_) => self.kit.emit(LockEvent::Released),
            Finish::Cancelled => self.kit.emit(LockEvent::Cancelled),
            Finish::NotAcquired => {}
            Finish::Failed(error) => self.kit.emit(LockEvent::Failed { error: *error }),
        }
    }

    /// Our node is deleted (or was never made): report why we left.
    pub(super) fn done(&mut self) {
        let left = mem::replace(&mut self.phase, Phase::Done(Ended::default()));
        self.need = Need::default();
        if let Phase::Leaving(l) = left {
            self.report(l.finish);
        }
    }

    /// The hold is lost.
    pub(super) fn lost(&mut self, reason: LostReason) {
        if let Phase::Held(h) = &self.phase {
            let depth = h.depth;
            self.kit.emit(LockEvent::Lost { reason });
            self.phase = Phase::Done(Ended {
                depth,
                lost: Some(reason),
            });
            self.need = Need::default();
        }
    }

    /// Our node is gone while we wait or hold.
    pub(super) fn own_node_gone(&mut self, now: Instant) {
        match self.phase {
            Phase::Held(_) => self.lost(LostReason::NodeDeleted),
            Phase::Entering(_) | Phase::Waiting(_) => self.node_deleted(now),
            _ => {}
        }
    }

    /// The search for a create in doubt, if one is on.
    pub(super) fn search(&mut self) -> Option<&mut Search> {
        search_of(&mut self.phase)
    }

    // ----- sending -----

    /// Is something waiting to be sent (when the session allows)?
    pub(super) fn pending(&self) -> bool {
        let in_phase = match &self.phase {
            Phase::Entering(e) => match &e.ours {
                Ours::Send { .. } => true,
                Ours::InDoubt(s) => s.send,
                _ => false,
            },
            Phase::Waiting(w) => matches!(w.blocker.watch, Some(Watching::Name(_))),
            Phase::Held(h) => h.verify,
            Phase::Leaving(l) => l.send || matches!(&l.ours, Ours::InDoubt(s) if s.send),
            _ => false,
        };
        in_phase || !self.need.is_empty() || !self.orphans.is_empty()
    }

    /// Sends what is due, if the session allows it now: a search first when a create
    /// is in doubt (nothing else makes sense until we know whether it landed), else
    /// the create, a listing, the blocker's watch, a holder's verification, an own-node
    /// read, the turn read, the release, and the orphans' deletes, in that order.
    pub(super) fn drive(&mut self, now: Instant) {
        if !self.pending() || !self.kit.allows(now) {
            return;
        }
        if self.search().is_some() {
            return self.send_search();
        }
        let need = mem::take(&mut self.need);
        self.send_entry();
        if need.has(Need::LIST) && self.attempting() {
            self.list(true);
        }
        self.send_blocker_watch();
        self.send_verify();
        let notified = matches!(self.phase, Phase::Waiting(_)) && self.notified_waiting();
        if need.has(Need::OWN) && (self.wants_own_watch() || notified) {
            self.read_own(Purpose::Own);
        }
        if need.has(Need::TURN) && matches!(self.phase, Phase::Waiting(_)) {
            if self.sync_next {
                self.sync();
            }
            self.read_own(Purpose::Turn);
        }
        self.send_release();
        self.send_orphans();
    }

    /// The search for a create in doubt: `sync`, then list the directory for our prefix.
    fn send_search(&mut self) {
        if self
            .kit
            .any(|p| matches!(p, Purpose::Recover | Purpose::Adopt(_)))
        {
            return; // the search is on; its end decides
        }
        self.need = Need::default();
        if let Some(search) = self.search() {
            *search = Search::default();
        }
        self.sync();
        let path = self.config.dir.clone();
        let list = Request::GetChildren(PathWatch { path, watch: false });
        self.kit.send(Purpose::Recover, list);
    }

    /// The create (behind the directory's ancestors if they were missing), and the
    /// listing that decides right behind it.
    fn send_entry(&mut self) {
        let Phase::Entering(e) = &mut self.phase else {
            return;
        };
        let Ours::Send { parents } = e.ours else {
            return;
        };
        e.ours = Ours::Sent;
        let node = self.dir_path(&self.prefix());
        let acl = self.acl();
        if parents {
            self.kit
                .send_parents(&node, &acl, CreateMode::Container, Purpose::Parent);
        }
        let data = self.config.data.clone();
        let create = CreateRequest::new(node, data, acl, CreateMode::EphemeralSequential);
        self.kit.send(Purpose::Create, Request::Create2(create));
        // Executed after the create: the listing contains our node.
        self.list(false);
    }

    /// The watch on the blocker a waiter waits for.
    fn send_blocker_watch(&mut self) {
        let Phase::Waiting(w) = &self.phase else {
            return;
        };
        let Some(Watching::Name(b)) = &w.blocker.watch else {
            return;
        };
        let (name, seq) = (b.clone(), Watching::seq_of(b));
        let path = self.dir_path(&name);
        let (own, czxid) = (self.dir_path(&w.node.name), w.node.czxid);
        let watch = if self.notified_waiting() {
            // One request arms both watches: the blocker's deletion (a children watch)
            // and our own node's data (a grant or a notice lands there), each firing
            // at once if it changed after our node's creation.
            let op = self.kit.send(
                Purpose::Blocker,
                Request::SetWatches2(SetWatches2 {
                    relative_zxid: czxid,
                    data_watches: alloc::vec![own],
                    child_watches: alloc::vec![path],
                    ..SetWatches2::default()
                }),
            );
            self.own = OwnWatch::Asked; // until the server answers
            Watching::Both(op, seq)
        } else if self.fast_handoff() {
            // A data watch: the grant written into our blocker wakes us (we read it
            // while the blocker holds), and then its deletion alone hands the lock on.
            let read = Request::GetData(PathWatch { path, watch: true });
            Watching::Data(self.kit.send(Purpose::Blocker, read), name)
        } else {
            // A children watch on the blocker (it has none: the reply is an empty list)
            // fires on its deletion only, never on a write to its data: a grant handed
            // to our blocker, or a revocation aimed at it, does not wake us for nothing.
            let list = Request::GetChildren(PathWatch { path, watch: true });
            Watching::Op(self.kit.send(Purpose::Blocker, list), seq)
        };
        if let Phase::Waiting(w) = &mut self.phase {
            w.blocker.watch = Some(watch);
        }
    }

    /// A holder's check after a reconnect: is our node still ours?
    fn send_verify(&mut self) {
        let Phase::Held(h) = &mut self.phase else {
            return;
        };
        if !mem::take(&mut h.verify) {
            return;
        }
        let path = join(&self.config.dir, &h.node.name);
        self.sync();
        let exists = Request::Exists(PathWatch { path, watch: false });
        self.kit.send(Purpose::Verify, exists);
    }

    /// The delete of our node; a release hands the lock on in the same `multi`.
    fn send_release(&mut self) {
        let Phase::Leaving(l) = &mut self.phase else {
            return;
        };
        if !mem::take(&mut l.send) {
            return;
        }
        let Ours::Known(node) = &l.ours else {
            return;
        };
        let path = join(&self.config.dir, &node.name);
        let ops = match &self.phase {
            Phase::Leaving(Leaving {
                finish: Finish::Released(handoff),
                ..
            }) if !handoff.refused => self.handoff_ops(handoff),
            _ => Vec::new(),
        };
        let delete = DeleteRequest { path, version: -1 };
        if ops.is_empty() {
            self.kit.send(Purpose::Delete, Request::Delete(delete));
        } else {
            let mut ops = ops;
            ops.push(MultiOp::Delete(delete));
            self.kit.send(Purpose::Grant, Request::Multi(ops));
        }
    }

    /// The writes that hand the lock on: the grant into our successor (unless we were
    /// handed the lock ourselves, exclusive: the same write told our successor) and, for
    /// an exclusive lock, the notice into the contender after it.
    fn handoff_ops(&self, handoff: &Handoff) -> Vec<MultiOp> {
        let mut ops = Vec::new();
        let exclusive = self.config.kind == LockKind::Exclusive;
        let successors = &handoff.successors;
        let Some(next) = successors.first() else {
            return ops;
        };
        if !(exclusive && handoff.by_grant) {
            ops.push(MultiOp::SetData(SetDataRequest {
                path: self.dir_path(next),
                data: grant_data(&successors[1..]),
                version: 0,
            }));
        }
        if let (true, Some(after)) = (exclusive, successors.get(1)) {
            ops.push(MultiOp::SetData(SetDataRequest {
                path: self.dir_path(after),
                data: notice_data(next, &successors[2..]),
                version: 0,
            }));
        }
        ops
    }

    fn send_orphans(&mut self) {
        for name in mem::take(&mut self.orphans) {
            let path = self.dir_path(&name);
            let delete = Request::Delete(DeleteRequest { path, version: -1 });
            self.kit.send(Purpose::Orphan(name), delete);
        }
    }

    /// getData on our own node, with a watch if we keep one on it and none is left
    /// there already.
    pub(super) fn read_own(&mut self, purpose: Purpose) {
        if let Some(path) = self.our_path() {
            let watch = self.watches_own() && self.own == OwnWatch::Off;
            if watch {
                self.own = OwnWatch::Asked;
            }
            self.kit
                .send(purpose, Request::GetData(PathWatch { path, watch }));
        }
    }

    fn sync(&mut self) {
        self.sync_next = false;
        self.kit.sync(Purpose::Sync, &self.config.dir);
    }

    fn list(&mut self, may_sync: bool) {
        if may_sync && self.sync_next {
            self.sync();
        }
        // A lease waiter is let in by whichever holder goes: watch the whole listing.
        let lease = matches!(self.config.kind, LockKind::Lease { .. });
        // If this listing makes us holder, its children watch on the directory stands
        // in for the own-node watch (it fires on our node's deletion; on any other
        // change we arm the real one): an uncontended hold costs no read of its own.
        let stand_in = self.config.watch_own_node
            && !self.config.revocable
            && self.config.kind.is_granted_to()
            && self.own == OwnWatch::Off
            && !self.stand_in_refused;
        let path = self.config.dir.clone();
        self.kit.send(
            Purpose::List(stand_in),
            Request::GetChildren(PathWatch {
                path,
                watch: lease || stand_in,
            }),
        );
    }
}

/// The search for a create in doubt in `phase`, if one is on (entering or leaving).
pub(super) fn search_of(phase: &mut Phase) -> Option<&mut Search> {
    match phase {
        Phase::Entering(Entering {
            ours: Ours::InDoubt(search),
            ..
        })
        | Phase::Leaving(Leaving {
            ours: Ours::InDoubt(search),
            ..
        }) => Some(search),
        _ => None,
    }
}
