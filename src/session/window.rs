//! The request window: xids, the requests on the wire in the order they were written,
//! and how many may be there at once.
//!
//! Normal requests get xids 1, 2, … (wrapping back to 1); ZooKeeper answers one
//! session's requests in order, so a reply must answer the oldest request on the wire
//! (FIFO matching). At most `max_in_flight` are on the wire; within that bound the
//! window adapts to a throttling server (AIMD): a `Throttled` reply halves it, at most
//! once per window of replies, and a window's worth of other replies grows it by one.
//!
//! Owns: the next xid, the requests in flight, the window and its reply counts.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::event::{Counters, Token};
use super::watches::After;
use crate::hash::shed_queue;
use crate::proto::OpCode;

/// What a request carries from its submission to its answer, queued or on the wire:
/// its opcode, the token its answer goes back under, and what the answer does besides.
#[derive(Debug)]
pub(super) struct Ticket {
    pub(super) op: OpCode,
    pub(super) token: Token,
    pub(super) after: After,
}

/// A request written and not yet answered.
#[derive(Debug)]
pub(super) struct InFlight {
    pub(super) xid: i32,
    pub(super) ticket: Ticket,
    /// The other requesters a shared read answers (see `Session::submit_from`).
    pub(super) more: Vec<Token>,
}

/// The requests on the wire.
#[derive(Debug)]
pub(super) struct Window {
    next_xid: i32,
    in_flight: VecDeque<InFlight>,
    /// How many requests may be on the wire now (at most `max_in_flight`): halved when
    /// the server answers `Throttled` (at most once per window of replies), grown by
    /// one per window of replies that were not (AIMD), so a session finds a throttling
    /// server's limit by itself.
    window: usize,
    /// Replies since the window was last cut, and since it last grew.
    since_cut: usize,
    since_grow: usize,
}

impl Window {
    /// An empty window of `max_in_flight` (at least 1).
    pub(super) fn new(max_in_flight: usize) -> Window {
        Window {
            next_xid: 1,
            in_flight: VecDeque::new(),
            window: max_in_flight.max(1),
            since_cut: usize::MAX,
            since_grow: 0,
        }
    }

    /// Requests on the wire.
    pub(super) fn len(&self) -> usize {
        self.in_flight.len()
    }

    /// Is there room on the wire for one more request?
    pub(super) fn has_room(&self, max_in_flight: usize) -> bool {
        self.in_flight.len() < self.window.min(max_in_flight).max(1)
    }

    /// The xid the next request written gets.
    pub(super) fn next_xid(&self) -> i32 {
        self.next_xid
    }

    /// A request was written under [`next_xid`](Self::next_xid): it waits for its reply.
    pub(super) fn push(&mut self, ticket: Ticket, more: Vec<Token>) {
        let xid = self.next_xid;
        self.next_xid = if xid == i32::MAX { 1 } else { xid + 1 };
        self.in_flight.push_back(InFlight { xid, ticket, more });
    }

    /// The oldest request on the wire: the one the next reply must answer.
    pub(super) fn head(&self) -> Option<&InFlight> {
        self.in_flight.front()
    }

    /// The oldest request was answered.
    pub(super) fn pop(&mut self) -> Option<InFlight> {
        let done = self.in_flight.pop_front();
        shed_queue(&mut self.in_flight);
        done
    }

    /// The request on the wire with `xid`, answered out of order (see
    /// `Session::on_reply`: a read-only server's refusal).
    pub(super) fn take(&mut self, xid: i32) -> Option<InFlight> {
        let at = self.in_flight.iter().position(|r| r.xid == xid)?;
        let done = self.in_flight.remove(at);
        shed_queue(&mut self.in_flight);
        done
    }

    /// Every request on the wire, oldest first (the connection is gone).
    pub(super) fn drain(&mut self) -> impl Iterator<Item = InFlight> + '_ {
        self.in_flight.drain(..)
    }

    /// The window after a reply: cut on `Throttled`, grown otherwise.
    pub(super) fn adapt(&mut self, throttled: bool, max_in_flight: usize, counters: &mut Counters) {
        let max = max_in_flight.max(1);
        self.since_cut = self.since_cut.saturating_add(1);
        if throttled {
            counters.throttled += 1;
            // Once per window: the replies of requests sent before the cut say nothing
            // about the new window.
            if self.since_cut > self.window {
                self.window = (self.window / 2).max(1);
                self.since_cut = 0;
                self.since_grow = 0;
            }
        } else if self.window < max {
            self.since_grow += 1;
            if self.since_grow >= self.window {
                self.window += 1;
                self.since_grow = 0;
            }
        }
    }
}
