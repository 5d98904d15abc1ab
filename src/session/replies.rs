//! Reading the server's frames on a live connection: watch notifications (to the
//! [`Watches`](super::watches::Watches)), ping and SetWatches answers (nothing to do),
//! auth answers (to [`Auth`](super::auth::Auth)'s waiter; a rejection ends the
//! session; so does `SessionClosedRequireSaslAuth` on any frame: the server requires
//! SASL and this session has none), and replies, which must answer the oldest request on the wire (anything
//! else is a protocol error that drops the connection; one exception: a read-only
//! server's `NotReadOnly`, which may overtake replies to earlier reads). A reply completes its request:
//! the watches it set or removed, the chroot stripped from the paths it carries, then
//! the [`Reply`] (or a [`SharedReply`] for a shared listing) and any notification held
//! back for it.
//!
//! Owns no state.

use bytes::Bytes;

use super::event::{Reply, SessionEvent, SharedReply, Token};
use super::watches::After;
use super::window::{InFlight, Ticket};
use super::Session;
use crate::error::{AuthFailure, DisconnectReason, Error, SessionEnd};
use crate::proto::{
    decode_exact, decode_reply, xid, ErrorCode, MultiResult, OpCode, ReplyHeader, Response,
    WatcherEvent,
};
use crate::time::Instant;

impl Session {
    /// One frame of a live connection (after the handshake).
    pub(super) fn on_frame(&mut self, now: Instant, frame: Bytes) -> Result<(), DisconnectReason> {
        let (header, body) = decode_reply(frame).map_err(DisconnectReason::Decode)?;
        if header.err == ErrorCode::SessionClosedRequireSaslAuth.to_i32() {
            // The server requires SASL and closes the connection: every reconnection
            // would end the same way, so the session ends here, once.
            self.end(SessionEnd::AuthFailed(AuthFailure::SaslRequired), false);
            return Ok(());
        }
        match header.xid {
            xid::NOTIFICATION => {
                let event: WatcherEvent = decode_exact(body).map_err(DisconnectReason::Decode)?;
                self.counters.notifications_received += 1;
                if let Some(event_type) = event.kind() {
                    self.ensemble_notified(now, &event.path, event_type);
                    let path = self.config.connect_string.chroot().strip(&event.path);
                    self.watches.notify(&mut self.events, path, event_type);
                }
                Ok(())
            }
            xid::PING | xid::SET_WATCHES => Ok(()),
            xid::AUTH => {
                self.on_auth_answer(&header);
                Ok(())
            }
            got => self.on_reply(now, got, &header, body),
        }
    }

    fn on_auth_answer(&mut self, header: &ReplyHeader) {
        let token = self.auth.answered();
        if header.err == ErrorCode::AuthFailed.to_i32() {
            return self.end(SessionEnd::AuthFailed(AuthFailure::Rejected), false);
        }
        if let Some(token) = token {
            let result = if header.err == 0 {
                Ok(Response::Empty)
            } else {
                Err(Error::from(ErrorCode::from_i32(header.err)))
            };
            self.events.push_back(SessionEvent::Reply(Reply {
                token,
                zxid: header.zxid,
                result,
                watch: None,
            }));
        }
    }

    /// The reply with xid `got`: it must answer the oldest request on the wire.
    fn on_reply(
        &mut self,
        now: Instant,
        got: i32,
        header: &ReplyHeader,
        body: Bytes,
    ) -> Result<(), DisconnectReason> {
        let Some((head_xid, head_op)) = self.window.head().map(|h| (h.xid, h.ticket.op)) else {
            return Err(DisconnectReason::UnexpectedXid { expected: 0, got });
        };
        if head_xid != got {
            // ZooKeeper 3.8's read-only server refuses a write from the first step of
            // its pipeline, ahead of the replies to reads sent before it, still on
            // their way through the rest: that refusal completes its request alone.
            if header.err == ErrorCode::NotReadOnly.to_i32() && self.identity.read_only_server() {
                if let Some(done) = self.window.take(got) {
                    self.counters.replies_received += 1;
                    self.complete(done, header.zxid, Err(Error::from(ErrorCode::NotReadOnly)));
                    self.flush_queued(now);
                    return Ok(());
                }
            }
            return Err(DisconnectReason::UnexpectedXid {
                expected: head_xid,
                got,
            });
        }
        let result = if header.err == 0 {
            Ok(Response::decode(head_op, body).map_err(DisconnectReason::Decode)?)
        } else {
            Err(Error::from(ErrorCode::from_i32(header.err)))
        };
        let done = self.window.pop().expect("head checked above");
        let throttled = header.err == ErrorCode::Throttled.to_i32();
        self.window
            .adapt(throttled, self.config.max_in_flight, &mut self.counters);
        self.identity.saw_zxid(header.zxid);
        self.counters.replies_received += 1;
        if done.ticket.token == Token::SESSION {
            self.on_ensemble(now, result);
        } else {
            self.complete(done, header.zxid, result);
        }
        // Room on the wire again: the next queued request goes out.
        self.flush_queued(now);
        Ok(())
    }

    /// A request's answer: its watches, then its reply, then what was held back for it.
    pub(super) fn complete(
        &mut self,
        req: InFlight,
        zxid: i64,
        mut result: Result<Response, Error>,
    ) {
        let InFlight {
            ticket: Ticket { op, token, after },
            more,
            ..
        } = req;
        if matches!(after, After::Close) {
            // On a read-only stand-in the answer is about the stand-in, not the session.
            let confirmed = !self.identity.stand_in();
            return self.end(SessionEnd::Closed, confirmed);
        }
        let watch = self
            .watches
            .on_reply(&mut self.events, after, token, &more, &result);
        if let Ok(resp) = &mut result {
            self.strip_chroot(op, resp);
        }
        if more.is_empty() {
            self.events.push_back(SessionEvent::Reply(Reply {
                token,
                zxid,
                result,
                watch,
            }));
        } else {
            let mut tokens = more;
            tokens.insert(0, token);
            self.events
                .push_back(SessionEvent::SharedReply(SharedReply {
                    tokens,
                    zxid,
                    result,
                    watch,
                }));
        }
        self.watches.release_deferred(&mut self.events, token);
    }

    fn strip_chroot(&self, op: OpCode, resp: &mut Response) {
        let chroot = self.config.connect_string.chroot();
        if chroot.root().is_none() {
            return;
        }
        match resp {
            Response::Path(p) | Response::PathStat { path: p, .. } => *p = chroot.strip(p),
            Response::Children(paths) if op == OpCode::GetEphemerals => {
                for p in paths.iter_mut() {
                    *p = chroot.strip(p);
                }
            }
            Response::Multi(results) => {
                for r in results {
                    if let MultiResult::Create(p) | MultiResult::Create2 { path: p, .. } = r {
                        *p = chroot.strip(p);
                    }
                }
            }
            _ => {}
        }
    }
}
