//! Submitting and writing requests: what a submitted request must pass (the session
//! is live, the request is one a caller may send, `max_pending`, ZooKeeper's path
//! rules, `max_watches`, the frame limit), the chroot applied, and where it goes — to
//! the wire at once when nothing waits and the [`Window`](super::window::Window) has
//! room, else into the [`Lanes`](super::lanes::Lanes) — and the writing of queued
//! requests as room comes back (their zero xid patched). On a read-only server a recipe's
//! `sync` is answered here instead (see `sync_read_only`).
//!
//! Owns no state: it moves requests between the lanes, the window and the link.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};

use super::event::Token;
use super::lanes::Queued;
use super::watches::After;
use super::window::{InFlight, Ticket};
use super::{Phase, Session};
use crate::error::{SessionEnd, SubmitError};
use crate::proto::{
    encode_request, validate_path, validate_sequential_prefix, xid, AuthPacket, OpCode,
    PathRequest, PathRole, Request, Response, Wire,
};
use crate::time::Instant;

impl Session {
    /// [`submit`](Self::submit) for one of several independent `requester`s (nonzero;
    /// a host passes each hosted recipe's id), whose queued requests are **shared** and
    /// may **yield**:
    ///
    /// * Shared: a listing (`getChildren`, `getChildren2`) waiting in the queue behind a
    ///   full window is shared with the identical listing (same path, same watch flag)
    ///   another requester submits later: the earlier one moves back to the later one's
    ///   place, and one request on the wire answers both as one
    ///   [`SessionEvent::SharedReply`](super::SessionEvent::SharedReply), its watch
    ///   registered for each. A read answered later than asked is still a read after
    ///   everything its requester submitted before it; a listing whose requester
    ///   submitted anything after it (or requester 0) never moves, so each requester's
    ///   replies keep its own order. Without a backlog nothing is shared (the request
    ///   is written at once). Listings of a directory that thousands of waiters of one
    ///   session join at once thus cost one request and one reply, not one each
    ///   (issue 25).
    /// * Yielding (`yields`): while it waits in the queue (behind a full window or for a
    ///   connection), requests other requesters submit later are written before it. For
    ///   what nobody else waits for — a lock waiter's create and first listing, say — so
    ///   that what others do wait for (a holder's release) does not wait behind
    ///   thousands of entries. Yielding requests keep their order among themselves, and
    ///   a requester's own requests are never reordered: while this one is queued,
    ///   everything `requester` submits queues behind it. Requester 0 (raw requests)
    ///   never yields. Requests already on the wire are answered in order as always
    ///   (ZooKeeper runs one session's requests in order).
    pub fn submit_from(
        &mut self,
        now: Instant,
        request: Request,
        token: Token,
        requester: u64,
        yields: bool,
    ) -> Result<(), SubmitError> {
        let now = self.tick(now);
        let (request, after) = self.admit(request)?;
        if let Request::Auth(packet) = request {
            return self.submit_auth(now, packet, token);
        }
        if self.phase == Phase::Connected
            && self.lanes.is_empty()
            && self.window.has_room(self.config.max_in_flight)
        {
            if let Request::Sync(PathRequest { path }) = &request {
                if requester != 0 && self.identity.read_only_server() {
                    let path = path.clone();
                    self.sync_read_only(token, after, Vec::new(), path);
                    return Ok(());
                }
            }
            // Straight into the transmit buffer with its real xid (nothing is written
            // if it is too large).
            let xid = self.window.next_xid();
            encode_request(&mut self.link.tx, xid, &request, self.config.max_request)
                .map_err(SubmitError::TooLarge)?;
            self.counters.requests_sent += 1;
            self.watches.arm_at_write(token, &after);
            let op = request.op_code();
            self.window.push(Ticket { op, token, after }, Vec::new());
            self.link.last_send = now;
        } else {
            let mut frame = BytesMut::new();
            encode_request(&mut frame, 0, &request, self.config.max_request)
                .map_err(SubmitError::TooLarge)?;
            self.lanes.push(
                frame,
                &request,
                token,
                after,
                requester,
                yields,
                &mut self.counters,
            );
        }
        Ok(())
    }

    /// Checks a request before anything is queued or sent, and applies the chroot: the
    /// request as it goes to the server, and what its reply will do to the watches.
    fn admit(&self, mut request: Request) -> Result<(Request, After), SubmitError> {
        match self.phase {
            Phase::Ended(end) => return Err(SubmitError::Ended(end)),
            Phase::Closing { .. } => return Err(SubmitError::Ended(SessionEnd::Closed)),
            _ => {}
        }
        if matches!(
            request,
            Request::Ping | Request::SetWatches(_) | Request::CloseSession
        ) {
            return Err(SubmitError::NotAllowed(request.op_code()));
        }
        if self.pending() >= self.config.max_pending {
            return Err(SubmitError::TooManyPending);
        }
        let mut invalid = None;
        request.for_each_path_mut(|role, path| {
            let check = match role {
                PathRole::Node => validate_path(path),
                PathRole::SequentialPrefix => validate_sequential_prefix(path),
                PathRole::Prefix => Ok(()),
            };
            if let Err(error) = check {
                invalid.get_or_insert(SubmitError::InvalidPath {
                    path: path.clone(),
                    error,
                });
            }
        });
        if let Some(e) = invalid {
            return Err(e);
        }
        let after = After::reply_to(&request);
        let arming = after.registrations();
        if arming > 0 && self.watches.len() + arming > self.config.max_watches {
            return Err(SubmitError::TooManyWatches);
        }
        if let Some(default_acl) = &self.config.default_acl {
            default_acl.apply(&mut request);
        }
        let chroot = self.config.connect_string.chroot();
        // The configuration node is read outside the chroot (as getConfig does).
        if chroot.root().is_some() && !super::rebalance::reads_config(&request) {
            request.for_each_path_mut(|_, path| *path = chroot.prefix(path));
        }
        Ok((request, after))
    }

    /// An auth packet: written now if connected, replayed on every connection.
    fn submit_auth(
        &mut self,
        now: Instant,
        packet: AuthPacket,
        token: Token,
    ) -> Result<(), SubmitError> {
        // Same size rule as every request (auth packets are tiny in practice).
        encode_request(
            &mut BytesMut::new(),
            xid::AUTH,
            &Request::Auth(packet.clone()),
            self.config.max_request,
        )
        .map_err(SubmitError::TooLarge)?;
        let connected = self.phase == Phase::Connected;
        self.auth.add(
            &mut self.link,
            now,
            packet,
            token,
            connected,
            &mut self.counters,
        );
        Ok(())
    }

    /// Writes queued requests while there is room on the wire: the queue in order,
    /// then the yielding lane in order (a close at its back goes regardless).
    pub(super) fn flush_queued(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Connected | Phase::Closing { .. }) {
            return;
        }
        while let Some(q) = self
            .lanes
            .next_to_write(self.window.has_room(self.config.max_in_flight))
        {
            self.write(now, q);
        }
        self.lanes.shed();
    }

    /// Writes a queued request under the next xid.
    pub(super) fn write(&mut self, now: Instant, q: Queued) {
        let more = self.lanes.unshare(q.share);
        if q.ticket.op == OpCode::Sync && q.requester != 0 && self.identity.read_only_server() {
            // The frame: length, xid, type, then the path.
            let path = PathRequest::decode(&mut Bytes::copy_from_slice(&q.frame[12..]))
                .map(|r| r.path)
                .unwrap_or_default();
            return self.sync_read_only(q.ticket.token, q.ticket.after, more, path);
        }
        self.counters.requests_sent += 1;
        let mut frame = q.frame;
        frame[4..8].copy_from_slice(&self.window.next_xid().to_be_bytes());
        self.link.tx.extend_from_slice(&frame);
        self.watches.arm_at_write(q.ticket.token, &q.ticket.after);
        self.window.push(q.ticket, more);
        self.link.last_send = now;
    }

    /// A recipe's `sync` on a read-only server: answered here, never sent. The server
    /// would refuse it (NotReadOnly), though there is no leader to catch up with: it
    /// serves what it has, and `Connected { read_only: true }` says so. Readers (caches,
    /// watched values, config readers) sync before a load; they carry on. A caller's
    /// own `sync` (requester 0, the raw API) goes to the server and gets its refusal.
    fn sync_read_only(&mut self, token: Token, after: After, more: Vec<Token>, path: String) {
        self.counters.requests_sent += 1;
        self.counters.replies_received += 1;
        let done = InFlight {
            xid: 0,
            ticket: Ticket {
                op: OpCode::Sync,
                token,
                after,
            },
            more,
        };
        let zxid = self.identity.last_zxid;
        self.complete(done, zxid, Ok(Response::Path(path)));
    }
}
