//! Closing and ending: the closeSession request (after everything submitted before
//! it), the session's end (`Closed`, `Expired` without renewal, `AuthFailed`: terminal),
//! an expiry with renewal (a new session is dialled), and what every pending request
//! hears when a connection or the session goes — each request in flight, queued or
//! waiting for an auth answer fails exactly once, never reported as a success.
//!
//! Owns no state: it ends the other parts' requests.

use bytes::BytesMut;

use super::event::{Reply, SessionEvent, Token, Transport};
use super::lanes::Queued;
use super::watches::After;
use super::window::{InFlight, Ticket};
use super::{Phase, Session};
use crate::error::{DisconnectReason, Error, SessionEnd};
use crate::proto::{encode_request, OpCode, Request};
use crate::time::Instant;

impl Session {
    /// See [`close`](Session::close).
    pub(super) fn begin_close(&mut self, now: Instant, deadline: Instant) {
        match self.phase {
            Phase::Connected => {
                let mut frame = BytesMut::new();
                let _ = encode_request(&mut frame, 0, &Request::CloseSession, usize::MAX);
                let close = Queued::own(
                    frame,
                    Ticket {
                        op: OpCode::CloseSession,
                        token: Token::CLOSE,
                        after: After::Close,
                    },
                );
                if self.lanes.is_empty() {
                    // The close itself is not held back by the bound: nothing follows it.
                    self.write(now, close);
                } else {
                    // After everything, the yielding lane included.
                    self.lanes.push_last(close);
                }
                self.phase = Phase::Closing {
                    deadline: deadline.max(now),
                };
            }
            Phase::Idle { .. }
            | Phase::Dialing { .. }
            | Phase::Handshaking { .. }
            | Phase::Authenticating { .. } => self.end(SessionEnd::Closed, false),
            Phase::Closing { .. } | Phase::Ended(_) => {}
        }
    }

    /// The session is gone. With `renew_on_expiry`, fail what it had and start a new one.
    pub(super) fn expire(&mut self, now: Instant, confirmed: bool) {
        if !self.config.renew_on_expiry {
            return self.end(SessionEnd::Expired, confirmed);
        }
        if !matches!(self.phase, Phase::Idle { .. }) {
            self.transport.push_back(Transport::Close);
        }
        self.fail_everything(Error::SessionExpired);
        // A session that ends this way is a failed attempt: a server that keeps
        // expiring new sessions is redialled with backoff, not in a loop.
        self.hosts.expired();
        if self.identity.session_id == 0 {
            // Not even a first session: the server refuses us one.
            self.failed_attempt(&DisconnectReason::SessionRefused);
        } else {
            self.events.push_back(SessionEvent::Expired {
                confirmed,
                renewing: true,
            });
        }
        self.identity.forget();
        self.link.reset();
        self.hosts.advance();
        self.schedule_dial(now, false);
    }

    /// The session ends for good, this way.
    pub(super) fn end(&mut self, end: SessionEnd, confirmed: bool) {
        if matches!(self.phase, Phase::Ended(_)) {
            return;
        }
        if !matches!(self.phase, Phase::Idle { .. }) {
            self.transport.push_back(Transport::Close);
        }
        self.phase = Phase::Ended(end);
        self.identity.suspended = false;
        self.link.tx.clear();
        self.fail_everything(end.into());
        self.auth.clear();
        self.events.push_back(match end {
            SessionEnd::Expired => SessionEvent::Expired {
                confirmed,
                renewing: false,
            },
            SessionEnd::Closed => SessionEvent::Closed { confirmed },
            SessionEnd::AuthFailed(why) => SessionEvent::AuthFailed(why),
        });
    }

    /// The connection is gone: every request written on it fails with `error` (the
    /// server may or may not have applied it), every SetWatches2 armed nothing, every
    /// auth answer awaited fails.
    pub(super) fn fail_in_flight(&mut self, error: Error) {
        let mut session_read = false;
        for InFlight { ticket, more, .. } in self.window.drain() {
            if ticket.token == Token::SESSION {
                session_read = true;
                continue;
            }
            if matches!(ticket.after, After::Arm(_)) {
                self.watches.armed(ticket.token, false);
            }
            if !matches!(ticket.after, After::Close) {
                for token in core::iter::once(ticket.token).chain(more) {
                    self.events.push_back(failed(token, &error));
                }
            }
        }
        for token in self.auth.take_waiters() {
            self.events.push_back(failed(token, &error));
        }
        if session_read {
            self.ensemble_read_failed();
        }
    }

    /// The session is gone: every request in flight, queued, or waiting for an auth
    /// answer fails with `error`, and every watch registration goes.
    fn fail_everything(&mut self, error: Error) {
        self.fail_in_flight(error.clone());
        let events = &mut self.events;
        self.lanes
            .fail_all(|token| events.push_back(failed(token, &error)));
        for token in self.auth.take_unsent() {
            self.events.push_back(failed(token, &error));
        }
        self.watches.clear();
    }
}

/// The answer of a request that failed locally.
fn failed(token: Token, error: &Error) -> SessionEvent {
    SessionEvent::Reply(Reply {
        token,
        zxid: 0,
        result: Err(error.clone()),
        watch: None,
    })
}
