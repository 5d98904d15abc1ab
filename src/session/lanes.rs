//! The queue: requests waiting for a connection or for room in the window, encoded
//! with a zero xid that is patched as they are written. Two lanes and shared listings:
//!
//! * The main lane keeps submission order. The **yielding** lane
//!   (`Session::submit_from` with `yields`: a hosted recipe's entry, which nobody else waits for)
//!   is written only once the main lane is empty, so requests other requesters submit
//!   later go before it. A requester's own requests are never reordered: while one of
//!   its yielding requests is queued, its later ones queue behind it, whatever their
//!   kind. A close waits at the back of the yielding lane, behind everything.
//! * A listing (`getChildren`, `getChildren2`) of a requester may be **shared**
//!   (`Session::submit_from`): an identical queued listing near the back of its lane
//!   whose members submitted nothing since moves to the back and answers the newcomer
//!   too, so one request and one reply serve them all.
//!
//! Owns: both lanes, each requester's count of yielding requests, and the shared
//! listings' bookkeeping (each requester's latest one, the ones that may no longer move).

use alloc::boxed::Box;
use alloc::collections::{BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::BytesMut;

use super::event::{Counters, Token};
use super::watches::After;
use super::window::Ticket;
use crate::hash::{shed_map, shed_queue, HashMap};
use crate::proto::{OpCode, Request};

/// A request waiting for a connection; its frame has a zero xid to patch.
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) frame: BytesMut,
    pub(super) ticket: Ticket,
    /// A read other requesters' identical reads may join (see `Session::submit_from`).
    pub(super) share: Option<Box<Share>>,
    /// Who submitted it (0: nobody in particular, a raw request).
    pub(super) requester: u64,
}

impl Queued {
    /// A request the session writes by itself, that nobody shares.
    pub(super) fn own(frame: BytesMut, ticket: Ticket) -> Queued {
        Queued {
            frame,
            ticket,
            share: None,
            requester: 0,
        }
    }
}

/// A queued listing that answers every requester that joined it.
#[derive(Debug)]
pub(super) struct Share {
    /// Which shared read (the same while it moves back in the queue).
    id: u64,
    op: OpCode,
    /// As sent (chroot applied).
    path: String,
    watch: bool,
    /// Who it answers, the queued request's own token first: (token, requester).
    members: Vec<(Token, u64)>,
}

/// How far from the back of the queue a listing looks for an identical one to join
/// (a waiter's create sits between two waiters' listings).
const SHARE_LOOKBACK: usize = 8;

/// The two lanes of waiting requests.
#[derive(Debug, Default)]
pub(super) struct Lanes {
    /// Requests waiting for a connection or for room on the wire, written in order
    /// before any of the yielding lane's.
    queued: VecDeque<Queued>,
    /// The yielding lane, written once `queued` is empty; a close waits at its back.
    yielding: VecDeque<Queued>,
    /// How many requests each requester has in the yielding lane (a shared listing
    /// counts for each of its members): its later requests queue there too.
    yielders: HashMap<u64, u32>,
    /// Shared reads: the next id; each requester's latest queued shared read; the
    /// shared reads a member of which submitted something after them (they stay put).
    next_share: u64,
    sharing: HashMap<u64, u64>,
    sealed: BTreeSet<u64>,
}

impl Lanes {
    /// Requests waiting, both lanes.
    pub(super) fn len(&self) -> usize {
        self.queued.len() + self.yielding.len()
    }

    /// Nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.queued.is_empty() && self.yielding.is_empty()
    }

    /// Queues `request` (encoded as `frame`, zero xid) for `requester`, in the yielding
    /// lane if it `yields` or its requester has a yielding request queued; a listing
    /// joins an identical one it may share.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push(
        &mut self,
        frame: BytesMut,
        request: &Request,
        token: Token,
        after: After,
        requester: u64,
        yields: bool,
        counters: &mut Counters,
    ) {
        let op = request.op_code();
        if requester != 0 {
            // Whatever this requester sent before keeps its place from now on.
            if let Some(id) = self.sharing.remove(&requester) {
                self.sealed.insert(id);
            }
        }
        // Behind its own yielding requests, a requester's request yields too.
        let lane_yields =
            requester != 0 && (yields || self.yielders.get(&requester).is_some_and(|n| *n > 0));
        let share = match request {
            Request::GetChildren(r) | Request::GetChildren2(r) if requester != 0 => {
                let joined = self.join_shared(op, &r.path, r.watch, token, requester, lane_yields);
                if joined {
                    counters.listings_shared += 1;
                    return;
                }
                let id = self.next_share;
                self.next_share += 1;
                self.sharing.insert(requester, id);
                Some(Box::new(Share {
                    id,
                    op,
                    path: r.path.clone(),
                    watch: r.watch,
                    members: alloc::vec![(token, requester)],
                }))
            }
            _ => None,
        };
        let q = Queued {
            frame,
            ticket: Ticket { op, token, after },
            share,
            requester,
        };
        if lane_yields {
            *self.yielders.entry(requester).or_insert(0) += 1;
            self.yielding.push_back(q);
        } else {
            self.queued.push_back(q);
        }
    }

    /// A close goes behind everything, the yielding lane included.
    pub(super) fn push_last(&mut self, q: Queued) {
        self.yielding.push_back(q);
    }

    /// Joins an identical queued listing near the back of the queue that may still
    /// move (no member submitted anything after it): it moves to the back, answering
    /// `token` too. False if there is none.
    fn join_shared(
        &mut self,
        op: OpCode,
        path: &str,
        watch: bool,
        token: Token,
        requester: u64,
        yielding: bool,
    ) -> bool {
        let lane = if yielding {
            &mut self.yielding
        } else {
            &mut self.queued
        };
        let len = lane.len();
        let sealed = &self.sealed;
        let found = (len.saturating_sub(SHARE_LOOKBACK)..len).rev().find(|&i| {
            lane[i].share.as_ref().is_some_and(|s| {
                s.op == op && s.watch == watch && s.path == path && !sealed.contains(&s.id)
            })
        });
        let Some(mut q) = found.and_then(|i| lane.remove(i)) else {
            return false;
        };
        if let Some(s) = q.share.as_mut() {
            s.members.push((token, requester));
            self.sharing.insert(requester, s.id);
        }
        lane.push_back(q);
        if yielding {
            *self.yielders.entry(requester).or_insert(0) += 1;
        }
        true
    }

    /// The next request to write, if any may go: the main lane's while there is
    /// `room`, then (once it is empty) the yielding lane's — a close at its front goes
    /// without room (nothing follows it).
    pub(super) fn next_to_write(&mut self, room: bool) -> Option<Queued> {
        if room {
            if let Some(q) = self.queued.pop_front() {
                return Some(q);
            }
        }
        if !self.queued.is_empty() {
            return None;
        }
        let close_first = self
            .yielding
            .front()
            .is_some_and(|q| q.ticket.op == OpCode::CloseSession);
        if !(room || close_first) {
            return None;
        }
        let q = self.yielding.pop_front()?;
        self.leave_yielding(&q);
        Some(q)
    }

    /// Gives back the room of a burst once the lanes have drained.
    pub(super) fn shed(&mut self) {
        shed_queue(&mut self.queued);
        shed_queue(&mut self.yielding);
    }

    /// A request leaves the yielding lane (written or failed): its requesters' counts.
    fn leave_yielding(&mut self, q: &Queued) {
        let mut one = |requester: u64| {
            if let Some(n) = self.yielders.get_mut(&requester) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.yielders.remove(&requester);
                }
            }
        };
        match &q.share {
            Some(share) => share.members.iter().for_each(|(_, r)| one(*r)),
            None => one(q.requester),
        }
        shed_map(&mut self.yielders);
    }

    /// A queued request leaves the queue (written or failed): its shared read's
    /// bookkeeping goes; the other tokens it answers.
    pub(super) fn unshare(&mut self, share: Option<Box<Share>>) -> Vec<Token> {
        let Some(share) = share else {
            return Vec::new();
        };
        self.sealed.remove(&share.id);
        for (_, requester) in &share.members {
            if self.sharing.get(requester) == Some(&share.id) {
                self.sharing.remove(requester);
            }
        }
        shed_map(&mut self.sharing);
        share.members.iter().skip(1).map(|(t, _)| *t).collect()
    }

    /// Empties both lanes (the main one first), telling `failed` every token a request
    /// answers (a close answers none).
    pub(super) fn fail_all(&mut self, mut failed: impl FnMut(Token)) {
        self.yielders.clear();
        shed_map(&mut self.yielders);
        let yielding = core::mem::take(&mut self.yielding);
        let queued = core::mem::take(&mut self.queued);
        for q in queued.into_iter().chain(yielding) {
            let more = self.unshare(q.share);
            if matches!(q.ticket.after, After::Close) {
                continue;
            }
            core::iter::once(q.ticket.token)
                .chain(more)
                .for_each(&mut failed);
        }
    }
}
