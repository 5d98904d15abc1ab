//! The lock's inputs: what each reply, notification, session change and timeout does
//! ([`Protocol`]), and the rules that span its fields, checked after each of them.

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::mem;

use super::machine::{search_of, Lock};
use super::phase::{Finish, Leaving, Need, Node, Ours, OwnWatch, Phase, Purpose, Search, Watching};
use super::types::{LockEvent, LockKind, LostReason};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::contender;
use crate::recipe::kit::{name_of, protocol_head, ParentStep, Protocol, Reply};
use crate::recipe::{OpId, SessionChange, SharedListing};
use crate::session::WatchEvent;
use crate::time::Instant;

/// The children of a listing reply.
fn children(result: &Reply) -> Option<&Vec<String>> {
    match result {
        Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => Some(c),
        _ => None,
    }
}

impl Lock {
    fn on_create(&mut self, now: Instant, result: Reply) {
        let leaving = matches!(self.phase, Phase::Leaving(_));
        let created = matches!(result, Ok(Response::PathStat { .. }));
        if let (Phase::Entering(e), false) = (&mut self.phase, created) {
            // Answered: no create in flight (what comes next is decided below).
            e.ours = Ours::Send { parents: false };
        }
        match result {
            Ok(Response::PathStat { path, stat }) => {
                self.kit.succeeded();
                let node = Node {
                    name: name_of(&path).to_string(),
                    czxid: stat.czxid,
                };
                match &mut self.phase {
                    Phase::Entering(e) => e.ours = Ours::Known(node),
                    Phase::Leaving(l) => {
                        l.ours = Ours::Known(node);
                        l.send = true;
                    }
                    _ => {}
                }
                if !leaving {
                    self.arm_own(); // revocable waiters hear revocation too
                }
                // The paired listing follows and decides.
            }
            Ok(_) => self.fail(Error::UnexpectedReply, now),
            Err(Error::Server(ErrorCode::NoNode)) if leaving => self.done(),
            Err(Error::Server(ErrorCode::NoNode)) => {
                let step = self.kit.parents_missing(&self.config.dir);
                if let ParentStep::Fail(e) = step {
                    return self.fail(e, now);
                }
                self.set_ours(Ours::Send { parents: true });
                if step == ParentStep::Again {
                    self.retry_later(now);
                }
            }
            Err(e) if e.may_have_applied() => {
                // Did it land? Look for our prefix once connected again.
                self.set_ours(Ours::InDoubt(Box::new(Search {
                    send: true,
                    ..Search::default()
                })));
                self.retry_later(now);
            }
            // Refused: never applied.
            Err(e) if e.is_retryable() && leaving => self.done(),
            Err(e) if e.is_retryable() => {
                self.set_ours(Ours::Send { parents: false });
                self.retry_later(now);
            }
            // The session change decides; nothing is sent meanwhile.
            Err(e) if e.ends_session() => self.set_ours(Ours::Sent),
            Err(_) if leaving => self.done(),
            Err(e) => self.fail(e, now),
        }
    }

    /// What we know of our node, entering or leaving.
    fn set_ours(&mut self, ours: Ours) {
        match &mut self.phase {
            Phase::Entering(e) => e.ours = ours,
            Phase::Leaving(l) => l.ours = ours,
            _ => {}
        }
    }

    fn on_list(&mut self, now: Instant, watched: bool, result: Reply) {
        if !self.attempting() {
            return; // we are leaving
        }
        if self.our_node().is_none() {
            // The listing paired with our create. Refused by the session while the
            // create went out (never applied, create's answer still to come): list again
            // after a backoff; it executes after the create and shows our node. Any other
            // answer comes with the create's own, which decides.
            if result
                .as_ref()
                .is_err_and(|e| e.is_retryable() && !e.may_have_applied())
            {
                self.stand_in_refused |= watched;
                self.again(now, Need::LIST);
            }
            return;
        }
        if let Some(c) = children(&result) {
            self.kit.succeeded();
            self.dir_armed = watched;
            return self.evaluate(c, None, now);
        }
        match result {
            Ok(_) => self.fail(Error::UnexpectedReply, now),
            Err(e) if e.is_retryable() => {
                // Refused (the session may be at its watch limit): list without the
                // directory watch from now on; a holder then reads its own node.
                self.stand_in_refused |= watched && !e.may_have_applied();
                self.again(now, Need::LIST)
            }
            Err(Error::Server(ErrorCode::NoNode)) => self.own_node_gone(now),
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e, now),
        }
    }

    /// [`on_list`](Self::on_list) for a listing shared with other waiters of the
    /// session: read in place, looked up in the sorted listing the first one built.
    fn on_shared_list(
        &mut self,
        now: Instant,
        watched: bool,
        unsynced: bool,
        children: &[String],
        shared: &mut SharedListing,
    ) {
        if !self.attempting() || self.our_node().is_none() {
            return; // leaving; or the create's answer decides (see `on_list`)
        }
        if unsynced {
            return self.again(now, Need::LIST); // possibly stale (see `Outbox::answer`)
        }
        self.kit.succeeded();
        self.dir_armed = watched;
        self.evaluate(children, Some(shared), now);
    }

    fn on_recover(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(Response::Children(children)) | Ok(Response::Children2 { children, .. }) => {
                let prefix = self.prefix();
                for name in children.into_iter().filter(|c| c.starts_with(&prefix)) {
                    let path = self.dir_path(&name);
                    let exists = Request::Exists(PathWatch { path, watch: false });
                    self.kit.send(Purpose::Adopt(name), exists);
                }
            }
            Err(Error::Server(ErrorCode::NoNode)) => {} // no directory, no node of ours
            Err(e) if e.is_retryable() => self.search_again(),
            Err(e) if e.ends_session() => {}
            Err(e) => {
                // We cannot look: our node (if any) stays until the session ends.
                if matches!(self.phase, Phase::Leaving(_)) {
                    self.done();
                } else {
                    self.set_ours(Ours::Send { parents: false });
                    self.fail(e, now);
                }
            }
            Ok(_) => self.search_again(),
        }
        self.recovery_step(now);
    }

    fn search_again(&mut self) {
        if let Some(search) = self.search() {
            search.again = true;
        }
    }

    fn on_adopt(&mut self, now: Instant, name: String, result: Reply) {
        let session_id = self.kit.session_id();
        match result {
            Ok(Response::Stat(stat)) if stat.ephemeral_owner == session_id && session_id != 0 => {
                let seq = |n: &str| contender::Contender::parse(n).map(|c| c.sequence);
                let node = Node {
                    name,
                    czxid: stat.czxid,
                };
                if let Some(search) = search_of(&mut self.phase) {
                    // Keep the lower one (our place in line); the other is an orphan.
                    match search.adopted.take() {
                        Some(prev) if seq(&prev.name) <= seq(&node.name) => {
                            self.orphans.push(node.name);
                            search.adopted = Some(prev);
                        }
                        Some(prev) => {
                            self.orphans.push(prev.name);
                            search.adopted = Some(node);
                        }
                        None => search.adopted = Some(node),
                    }
                }
            }
            Err(e) if e.is_retryable() => self.search_again(),
            // Another session's (not ours), or gone.
            _ => {}
        }
        self.recovery_step(now);
    }

    /// Concludes a recovery once every answer is in.
    fn recovery_step(&mut self, now: Instant) {
        if self
            .kit
            .any(|p| matches!(p, Purpose::Recover | Purpose::Adopt(_)))
        {
            return;
        }
        let Some(search) = self.search() else {
            return;
        };
        if mem::take(&mut search.again) {
            search.send = true;
            return self.retry_later(now);
        }
        let adopted = search.adopted.take();
        match (&mut self.phase, adopted) {
            (Phase::Leaving(l), Some(node)) => {
                l.ours = Ours::Known(node);
                l.send = true;
            }
            (Phase::Leaving(_), None) => self.done(),
            (Phase::Entering(e), Some(node)) => {
                e.ours = Ours::Known(node);
                self.need.add(Need::LIST);
                self.arm_own();
            }
            (Phase::Entering(e), None) => e.ours = Ours::Send { parents: false },
            _ => {}
        }
    }

    /// Did `event_type`, heard through `op`, use up the watch on our blocker without
    /// its deletion: a data change seen by a data watch, or a watch removed?
    fn blocker_watch_spent(&self, op: OpId, event_type: EventType) -> bool {
        let Phase::Waiting(w) = &self.phase else {
            return false;
        };
        match w.blocker.watch {
            Some(Watching::Data(current, _)) if current == op => matches!(
                event_type,
                EventType::NodeDataChanged | EventType::DataWatchRemoved
            ),
            Some(Watching::Op(current, _) | Watching::Both(current, _)) if current == op => {
                event_type == EventType::ChildWatchRemoved
            }
            _ => false,
        }
    }

    fn on_blocker(&mut self, now: Instant, op: OpId, result: Reply) {
        let Phase::Waiting(w) = &mut self.phase else {
            return;
        };
        if w.blocker.watch.as_ref().and_then(Watching::op) != Some(op) {
            return; // an older blocker
        }
        let both = matches!(w.blocker.watch, Some(Watching::Both(..)));
        match result {
            Ok(Response::Data { data, stat }) => {
                self.kit.succeeded(); // armed: wait for the watch
                self.blocker_data(&data, &stat);
            }
            Ok(_) => {
                self.kit.succeeded(); // armed: wait for the watch
                if both && self.own == OwnWatch::Asked {
                    // Both watches are on the server now (unless one fired at once:
                    // its event follows this reply, and clears this).
                    self.own = OwnWatch::Live;
                }
            }
            Err(Error::Server(ErrorCode::NoNode)) => self.blocker_gone(op),
            Err(e) if e.is_retryable() => {
                w.blocker.watch = None;
                if both {
                    self.own = OwnWatch::Off; // nothing was armed
                }
                self.again(now, Need::LIST);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e, now),
        }
    }

    fn on_verify(&mut self, now: Instant, result: Reply) {
        let session_id = self.kit.session_id();
        let Phase::Held(h) = &mut self.phase else {
            return; // lost or released meanwhile
        };
        match result {
            Ok(Response::Stat(stat)) if stat.ephemeral_owner == session_id => {
                if mem::take(&mut h.suspended) {
                    h.depth += mem::take(&mut h.joining);
                    self.kit.emit(LockEvent::Reconnected);
                }
                self.arm_own();
            }
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => self.lost(LostReason::NodeDeleted),
            Err(e) if e.is_retryable() => {
                h.verify = true;
                self.retry_later(now);
            }
            Err(_) => {} // the session change decides
        }
    }

    /// The turn read: granted, or (the only blocker gone) held, or list again.
    fn on_turn(&mut self, now: Instant, watch: Option<bool>, result: Reply) {
        let waiting = matches!(self.phase, Phase::Waiting(_));
        match result {
            Ok(Response::Data { data, stat }) => {
                self.kit.succeeded();
                self.own_data(&data, &stat);
                if let Phase::Waiting(w) = &self.phase {
                    if matches!(w.blocker.watch, None | Some(Watching::Gone(_))) {
                        self.turn_decided();
                    }
                }
            }
            _ if !waiting => {}
            Ok(_) => self.fail(Error::UnexpectedReply, now),
            Err(Error::Server(ErrorCode::NoNode)) => self.own_node_gone(now),
            Err(e) if e.is_retryable() => {
                self.lost_own_read(watch);
                self.again(now, Need::TURN);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.fail(e, now),
        }
    }

    /// An own-node read failed: the watch it asked for was not left (`Some(false)`); one
    /// left by an earlier read stays (an answer read as lost behind a failed sync,
    /// `Outbox::answer_armed`).
    fn lost_own_read(&mut self, watch: Option<bool>) {
        if watch == Some(false) {
            self.own = OwnWatch::Off;
        }
    }

    /// The release that hands on: done, or (successor gone or written meanwhile) a
    /// plain delete.
    fn on_grant(&mut self, now: Instant, result: Reply) {
        // Our delete is the last op.
        let last = match &result {
            Ok(Response::Multi(results)) => results.len().saturating_sub(1),
            _ => usize::MAX,
        };
        match (multi_failure(&result), result) {
            (None, Ok(Response::Multi(_))) => self.done(),
            (None, Err(e)) if e.is_retryable() || e.ends_session() => self.on_delete(now, Err(e)),
            // Our own delete failed (nothing applied): as a plain delete's answer.
            (Some((at, code)), _) if at == last => self.on_delete(now, Err(Error::Server(code))),
            _ => {
                if let Phase::Leaving(Leaving { finish, send, .. }) = &mut self.phase {
                    if let Finish::Released(handoff) = finish {
                        handoff.refused = true;
                    }
                    *send = true;
                }
            }
        }
    }

    fn on_own(&mut self, now: Instant, watch: Option<bool>, result: Reply) {
        let went = matches!(&self.phase,
            Phase::Waiting(w) if matches!(w.blocker.watch, Some(Watching::Gone(_))));
        match result {
            Ok(Response::Data { data, stat }) => {
                self.own_data(&data, &stat);
                if went && matches!(self.phase, Phase::Waiting(_)) {
                    // Our blocker went while this read was on its way (after the event,
                    // on the same server): our node is there.
                    self.turn_decided();
                }
            }
            Ok(_) => {}
            Err(Error::Server(ErrorCode::NoNode)) => self.own_node_gone(now),
            Err(e) if e.is_retryable() => {
                self.lost_own_read(watch);
                // Our blocker went meanwhile: the turn read decides (after a sync if the
                // refusal came with a new server), else the next read of our node.
                self.again(now, if went { Need::TURN } else { Need::OWN });
            }
            Err(e) if went && !e.ends_session() => {
                self.own = OwnWatch::Off;
                if let Phase::Waiting(w) = &mut self.phase {
                    w.blocker.watch = None;
                }
                self.need.add(Need::LIST);
            }
            Err(_) => self.own = OwnWatch::Off, // the session change decides
        }
    }

    fn on_delete(&mut self, now: Instant, result: Reply) {
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => self.done(),
            Err(e) if e.is_retryable() => {
                if let Phase::Leaving(l) = &mut self.phase {
                    l.send = true;
                }
                self.retry_later(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => {
                // Refused for good (no permission): the node stays; say so.
                if let Phase::Leaving(l) = &mut self.phase {
                    l.finish = Finish::Failed(Box::new(e));
                }
                self.done();
            }
        }
    }

    fn on_orphan(&mut self, now: Instant, name: String, result: Reply) {
        if let Err(e) = result {
            if e.is_retryable() {
                self.orphans.push(name);
                self.retry_later(now);
            }
        }
    }

    fn on_session_end(&mut self, reason: LostReason) {
        self.kit.clear_requests();
        self.need = Need::default();
        self.orphans.clear();
        match self.phase {
            Phase::Held(_) => self.lost(reason),
            Phase::Done(_) => {}
            Phase::Leaving(_) => self.done(), // the node went with the session
            Phase::Idle | Phase::Entering(_) | Phase::Waiting(_) => {
                self.phase = Phase::Done(Default::default());
                self.kit.emit(LockEvent::Failed {
                    error: reason.error(),
                });
            }
        }
    }

    /// A watch on the directory, on our node or on our blocker fired (or went).
    fn watched(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        let is_ours = self.our_path().as_ref() == Some(&event.path);
        let waiting = matches!(self.phase, Phase::Waiting(_));
        match event.event_type {
            // The directory's children watch fired, or went (removeWatches, the
            // directory deleted): it no longer stands in for the own-node watch.
            t if event.path == self.config.dir => {
                self.dir_armed = false;
                if matches!(self.phase, Phase::Held(_)) {
                    self.arm_own(); // was it our node? watch that from now on
                } else if t == EventType::NodeChildrenChanged
                    && waiting
                    && matches!(self.config.kind, LockKind::Lease { .. })
                {
                    self.need.add(Need::LIST); // a lease may have gone: look again
                }
            }
            EventType::NodeDeleted if is_ours => self.own_node_gone(now),
            EventType::NodeDeleted => self.blocker_gone(op),
            // Our data watch fired, or was removed (removeWatches): arm it again; the
            // data tells whether it is a revocation.
            EventType::NodeDataChanged | EventType::DataWatchRemoved if is_ours => {
                self.own = OwnWatch::Off;
                self.arm_own();
                if waiting && self.notified_waiting() {
                    self.need.add(Need::OWN); // a grant, or a notice? read it (and watch again)
                }
            }
            // Our blocker's data changed (a grant: does it hold now?), or the watch on
            // it was removed (removeWatches): watch it, and read it, again.
            t if waiting && self.blocker_watch_spent(op, t) => {
                if let Phase::Waiting(w) = &mut self.phase {
                    w.blocker.watch = Some(Watching::on(name_of(&event.path)));
                }
            }
            _ => {}
        }
    }
}

impl Lock {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(
        &mut self,
        now: Instant,
        op: OpId,
        purpose: Purpose,
        result: Reply,
        watch: Option<bool>,
    ) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again,
        // without asking for a second watch on our node if the first was left.
        match purpose {
            Purpose::Parent(p) => self.kit.parent_answered(&p, &result),
            Purpose::Sync => {}
            Purpose::Create => self.on_create(now, result),
            Purpose::List(watched) => self.on_list(now, watched, result),
            Purpose::Recover => self.on_recover(now, result),
            Purpose::Adopt(name) => self.on_adopt(now, name, result),
            Purpose::Blocker => self.on_blocker(now, op, result),
            Purpose::Own => self.on_own(now, watch, result),
            Purpose::Verify => self.on_verify(now, result),
            Purpose::Delete => self.on_delete(now, result),
            Purpose::Grant => self.on_grant(now, result),
            Purpose::Turn => self.on_turn(now, watch, result),
            Purpose::Orphan(name) => self.on_orphan(now, name, result),
        }
        self.drive(now);
    }
}

impl Protocol for Lock {
    protocol_head!(LockEvent, watch);

    fn on_shared_reply(
        &mut self,
        now: Instant,
        op: OpId,
        result: &Reply,
        shared: &mut SharedListing,
    ) {
        let listing = matches!(self.kit.purpose(op), Some(Purpose::List(_)));
        let Some(children) = children(result).filter(|_| listing) else {
            return self.on_reply(now, op, result.clone());
        };
        if let Some((Purpose::List(watched), unsynced)) = self.kit.take_unsynced(op) {
            self.on_shared_list(now, watched, unsynced, children, shared);
        }
        self.drive(now);
    }

    fn on_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        self.watched(now, op, event);
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Connected { .. } => {} // the kit keeps the session id
            SessionChange::Suspended => {
                if let Phase::Held(h) = &mut self.phase {
                    if !h.suspended {
                        h.suspended = true;
                        self.kit.emit(LockEvent::Suspended);
                    }
                }
            }
            SessionChange::Reconnected { .. } => {
                self.sync_next = true;
                if let Phase::Held(h) = &mut self.phase {
                    // Still ours? (The session re-armed our watches itself.)
                    h.verify = true;
                }
            }
            SessionChange::Expired => self.on_session_end(LostReason::SessionExpired),
            SessionChange::Closed => self.on_session_end(LostReason::SessionClosed),
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        let entering = matches!(self.phase, Phase::Entering(_));
        let first_listing_on_its_way = entering
            && !self.kit.is_suspended()
            && !self.pending()
            && self.kit.any(|p| matches!(p, Purpose::List(_)));
        let grace = self.config.try_grace;
        let mut stop = false;
        if let Some(attempt) = self.attempt_mut() {
            if let Some(d) = attempt.deadline.filter(|d| now >= *d) {
                attempt.deadline = None;
                if first_listing_on_its_way {
                    // A try-lock deserves one look at the directory, but not forever.
                    attempt.grace = Some(d + grace);
                } else {
                    stop = true;
                }
            }
            stop |= entering && attempt.grace.is_some_and(|t| now >= t);
        }
        if stop {
            self.stop_with(Finish::NotAcquired, now);
        }
        self.drive(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        let finish = match &mut self.phase {
            Phase::Held(h) => {
                h.depth = 0;
                Finish::Released(Default::default())
            }
            Phase::Done(e) => {
                e.depth = 0;
                Finish::Cancelled
            }
            _ => Finish::Cancelled,
        };
        self.stop_with(finish, now);
        self.drive(now);
    }

    fn deadline(&self) -> Option<Instant> {
        let deadline = match &self.phase {
            Phase::Entering(e) => e.attempt.deadline.or(e.attempt.grace),
            Phase::Waiting(w) => w.attempt.deadline.or(w.attempt.grace),
            _ => None,
        };
        // Nothing is retried once the attempt is over, but the orphans' deletes.
        let retrying = self.pending() && !self.has_ended() || !self.orphans.is_empty();
        self.kit.timeout(deadline, retrying)
    }

    fn finished(&self) -> bool {
        self.has_ended()
            && self.kit.is_idle()
            && self.orphans.is_empty()
            && (!self.config.reentrant || self.depth() == 0)
    }

    /// A waiter's entry — its create (and the directory's ancestors) and the listing
    /// sent with it — yields to other recipes' later requests while queued: nobody
    /// waits for it, and a holder's release must not wait behind thousands of them.
    fn may_yield(&self, op: OpId) -> bool {
        self.kit.yields(op, |purpose| match (purpose, &self.phase) {
            (Purpose::Create | Purpose::Parent(_) | Purpose::List(_), Phase::Entering(e)) => {
                !matches!(e.ours, Ours::InDoubt(_))
            }
            // Arming the watches of a waiter deep in the queue: the lock reaches it
            // only after a few handoffs (and a late `SetWatches2` fires at once for
            // what changed since our node's creation).
            (Purpose::Blocker, Phase::Waiting(w)) => w.blockers > 2,
            _ => false,
        })
    }

    /// The rules the phases cannot spell, checked after every input in debug builds.
    fn check(&self) {
        let kind = self.config.kind;
        match &self.phase {
            Phase::Entering(e) => {
                debug_assert!(
                    !matches!(e.ours, Ours::Send { .. })
                        || !self.kit.any(|p| *p == Purpose::Create),
                    "a create to send while one is in flight"
                );
            }
            Phase::Waiting(w) => {
                debug_assert!(
                    w.attempt.grace.is_none(),
                    "a waiter past its try-lock grace"
                );
                debug_assert!(
                    w.blockers >= 1 || matches!(kind, LockKind::Lease { .. }),
                    "a waiter with no blocker"
                );
                debug_assert!(
                    w.blocker.watch.is_none() || !matches!(kind, LockKind::Lease { .. }),
                    "a lease waiter watching one blocker"
                );
                debug_assert!(!w.blocker.holds || kind.is_granted_to());
                debug_assert!(w.successors.is_empty() || kind.grants());
            }
            Phase::Held(h) => {
                debug_assert!(h.depth >= 1, "a hold with no level");
                debug_assert!(h.successors.is_empty() || kind.grants());
                debug_assert!(!h.by_grant || kind.is_granted_to());
            }
            Phase::Leaving(l) => {
                debug_assert!(
                    !matches!(l.ours, Ours::Send { .. }),
                    "leaving with no node and no create to wait for"
                );
                debug_assert!(!l.send || matches!(l.ours, Ours::Known(_)));
            }
            Phase::Idle => debug_assert!(self.need.is_empty(), "reads to send with no attempt"),
            Phase::Done(_) => {}
        }
        debug_assert!(!self.revocation_told || self.config.revocable);
    }
}
