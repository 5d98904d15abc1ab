//! Connection and handshake: dialling the current host (now, or after the backoff
//! [`Hosts`](super::hosts::Hosts) computes), the handshake (only the `ConnectRequest`
//! is written until the server answers it; the answer is read into the
//! [`Identity`](super::identity::Identity)), priming a new connection (auth replay,
//! then the watches re-armed on a resumed session, then the queued requests), and
//! losing the connection (requests in flight fail with `ConnectionLoss`, the session
//! is `Suspended`, the next host is dialled).
//!
//! A step between the server's answer and the priming, the SASL exchange, is a phase
//! of its own (`Authenticating`), run by `authenticate.rs`; [`established`](Session::established)
//! follows it.

use bytes::Bytes;

use super::event::{SessionEvent, Transport};
use super::{Phase, Session};
use crate::error::{DisconnectReason, Error, SessionEnd};
use crate::proto::{encode_connect, xid, ConnectResponse, ErrorCode, ReplyHeader, Wire};
use crate::time::Instant;

impl Session {
    /// Asks the driver to connect to the current host, within the connect timeout.
    pub(super) fn dial(&mut self) {
        let deadline = self.now + self.connect_timeout();
        self.phase = Phase::Dialing { deadline };
        self.transport.push_back(Transport::Connect {
            host: self.hosts.current(),
        });
    }

    /// Dials the next host now or after the backoff (see `Hosts::dial_delay`).
    pub(super) fn schedule_dial(&mut self, now: Instant, after_stable: bool) {
        let delay = self.hosts.dial_delay(
            after_stable,
            self.config.backoff_min,
            self.config.backoff_max,
        );
        if delay.is_zero() {
            self.dial();
        } else {
            self.phase = Phase::Idle {
                dial_at: now + delay,
            };
        }
    }

    /// The socket is up: the handshake's request goes out, alone.
    pub(super) fn start_handshake(&mut self, now: Instant, deadline: Instant) {
        self.phase = Phase::Handshaking { deadline };
        self.link.reset();
        // `last_recv` stays: only the server's words count as hearing from it.
        let stand_in = self.hosts.stand_in_here();
        let req = self.identity.connect_request(&self.config, stand_in);
        encode_connect(&mut self.link.tx, &req);
        self.counters.control_sent += 1;
        self.link.last_send = now;
    }

    /// The server's answer to the handshake.
    pub(super) fn on_handshake(
        &mut self,
        now: Instant,
        mut frame: Bytes,
    ) -> Result<(), DisconnectReason> {
        // A bare reply header (16 bytes: shorter than any ConnectResponse) carrying an
        // error: the server refuses the handshake (3.8's read-only server, NotReadOnly).
        if frame.len() == ReplyHeader::MIN_SIZE {
            if let Ok(header) = ReplyHeader::decode(&mut frame.clone()) {
                if header.err != 0 {
                    return Err(DisconnectReason::HandshakeRefused {
                        code: ErrorCode::from_i32(header.err),
                    });
                }
            }
        }
        let resp =
            ConnectResponse::decode(&mut frame).map_err(|_| DisconnectReason::NotZooKeeper)?;
        if self.identity.stand_in() {
            // A stand-in is a read-only server's session, never an answer about the
            // session itself (kept for the next read-write server).
            if resp.is_expired() {
                return Err(DisconnectReason::SessionRefused);
            }
            if !resp.read_only {
                return Err(DisconnectReason::StandInNotReadOnly);
            }
        }
        if resp.is_expired() {
            self.expire(now, true);
            return Ok(());
        }
        let resumed = self.identity.accept(resp);
        if let Phase::Handshaking { deadline } = self.phase {
            if let Some(mechanism) = self.config.sasl.clone() {
                return self.begin_sasl(now, deadline, mechanism, resumed);
            }
        }
        self.established(now, resumed);
        Ok(())
    }

    /// The session is usable on this connection (after the handshake, and the SASL
    /// exchange if there is one): say so, then prime the connection.
    pub(super) fn established(&mut self, now: Instant, resumed: bool) {
        self.phase = Phase::Connected;
        let announced = core::mem::replace(&mut self.sasl.announced, self.identity.session_id);
        let announce_resumed = resumed && announced == self.identity.session_id;
        self.hosts.connected(now);
        let read_only = self.identity.read_only_server();
        self.hosts.set_read_only(now, read_only);
        self.events.push_back(if announce_resumed {
            SessionEvent::Reconnected { read_only }
        } else {
            SessionEvent::Connected {
                session_id: self.identity.session_id,
                timeout: self.identity.negotiated.unwrap_or_default(),
                read_only,
            }
        });
        self.identity.suspended = false;
        self.prime(now, resumed);
    }

    /// A new connection's first writes: auth, then watches, then whatever waited for
    /// this connection.
    fn prime(&mut self, now: Instant, resumed: bool) {
        self.auth.replay(&mut self.link, now, &mut self.counters);
        if resumed {
            let chroot = self.config.connect_string.chroot();
            for request in self.watches.rearm(self.identity.last_zxid, chroot) {
                self.link
                    .write_control(now, xid::SET_WATCHES, &request, &mut self.counters);
            }
        }
        self.flush_queued(now);
    }

    /// The connection (or the attempt) ended for `reason`.
    pub(super) fn connection_lost(&mut self, now: Instant, reason: DisconnectReason) {
        let was_connected = matches!(self.phase, Phase::Connected | Phase::Closing { .. });
        let closing = matches!(self.phase, Phase::Closing { .. });
        // Read-only mode: a server that closes a handshake presenting this session
        // unanswered may be a read-only one refusing it (ZooKeeper 3.8: "Refusing
        // global session reconnection in RO mode"), or one not serving at all. A probe
        // tells them apart; "ro" makes it the host of a read-only stand-in
        // (`handle_probe`). A stand-in that ended is asked for again only after
        // another refusal and probe.
        let refused = matches!(self.phase, Phase::Handshaking { .. })
            && matches!(reason, DisconnectReason::ClosedBeforeHandshake(_))
            && self.config.read_only
            && !self.identity.stand_in()
            && self.identity.presents_session();
        if self.identity.end_stand_in() {
            self.hosts.end_stand_in();
        }
        self.transport.push_back(Transport::Close);
        if refused {
            let host = self.hosts.current();
            self.hosts.check_read_only(host);
            self.transport.push_back(Transport::Probe { host });
        }
        self.link.reset();
        self.fail_in_flight(Error::ConnectionLoss);
        if closing {
            return self.end(SessionEnd::Closed, false);
        }
        if was_connected {
            self.identity.suspended = true;
            self.events.push_back(SessionEvent::Suspended {
                reason: reason.clone(),
            });
        }
        let stable = self
            .hosts
            .lost(now, was_connected, self.config.stable_after);
        self.failed_attempt(&reason);
        self.hosts.set_last_failure(reason);
        self.hosts.advance();
        self.schedule_dial(now, stable);
    }

    /// Before the first session, notes the failure of an attempt on the current host;
    /// once every host has failed, reports [`SessionEvent::Unreachable`].
    pub(super) fn failed_attempt(&mut self, reason: &DisconnectReason) {
        let hosts = self.config.connect_string.hosts();
        if let Some(event) = self.hosts.failed_attempt(reason, hosts) {
            self.events.push_back(event);
        }
    }
}
