//! Pings, timeouts and the expiry estimate: every deadline of the session, what
//! [`poll_timeout`](Session::poll_timeout) reports and what
//! [`handle_timeout`](Session::handle_timeout) fires.
//!
//! * A ping goes out after `readTimeout / 2` without sending (`readTimeout` = 2/3 of
//!   the negotiated timeout); `readTimeout` without a whole frame received drops the
//!   connection.
//! * Dialling and the handshake together get the connect timeout (see
//!   `Hosts::connect_timeout`); a close waits for its answer until its deadline.
//! * Disconnected for the session timeout (counted from the last frame received) ⇒
//!   `Expired` locally, before any server confirms it.
//! * Connected to a read-only server: the next probe for a read-write one (see
//!   `Hosts::probe_due`).
//!
//! Owns no state: the deadlines derive from the phase, the [`Link`](super::link::Link)'s
//! last send and receive, and the [`Identity`](super::identity::Identity)'s timeout.

use core::time::Duration;

use super::event::Transport;
use super::{Phase, Session};
use crate::error::{DisconnectReason, SessionEnd};
use crate::proto::{xid, Request};
use crate::time::Instant;

impl Session {
    fn timeout(&self) -> Duration {
        self.identity.timeout(&self.config)
    }

    fn read_timeout(&self) -> Duration {
        (self.timeout() * 2 / 3).max(Duration::from_millis(1))
    }

    fn ping_interval(&self) -> Duration {
        (self.read_timeout() / 2).max(Duration::from_millis(1))
    }

    /// One attempt's time to connect and handshake.
    pub(super) fn connect_timeout(&self) -> Duration {
        self.hosts.connect_timeout(self.timeout())
    }

    /// When the client gives the session up while disconnected.
    fn expiry_estimate(&self) -> Option<Instant> {
        match self.phase {
            Phase::Idle { .. }
            | Phase::Dialing { .. }
            | Phase::Handshaking { .. }
            | Phase::Authenticating { .. }
                if self.identity.suspended =>
            {
                Some(self.link.last_recv + self.timeout())
            }
            _ => None,
        }
    }

    /// The earliest deadline: the phase's, or the expiry estimate.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let last_recv = self.link.last_recv;
        let phase = match self.phase {
            Phase::Idle { dial_at } => Some(dial_at),
            Phase::Dialing { deadline }
            | Phase::Handshaking { deadline }
            | Phase::Authenticating { deadline } => Some(deadline),
            Phase::Connected => {
                let due = (last_recv + self.read_timeout())
                    .min(self.link.last_send + self.ping_interval());
                Some(self.hosts.probe_at().map_or(due, |probe| due.min(probe)))
            }
            Phase::Closing { deadline } => Some(deadline.min(last_recv + self.read_timeout())),
            Phase::Ended(_) => None,
        };
        match (phase, self.expiry_estimate()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires one deadline that is due at `now`; false if none was.
    pub(super) fn fire_due(&mut self, now: Instant) -> bool {
        if let Some(at) = self.expiry_estimate() {
            if at <= now {
                self.expire(now, false);
                return true;
            }
        }
        let read_timeout_due = self.link.last_recv + self.read_timeout() <= now;
        match self.phase {
            Phase::Idle { dial_at } if dial_at <= now => {
                self.dial();
                true
            }
            Phase::Dialing { deadline } if deadline <= now => {
                self.connection_lost(now, DisconnectReason::ConnectTimeout);
                true
            }
            Phase::Handshaking { deadline } | Phase::Authenticating { deadline }
                if deadline <= now =>
            {
                self.connection_lost(now, DisconnectReason::NoHandshakeReply);
                true
            }
            Phase::Connected | Phase::Closing { .. } if read_timeout_due => {
                self.connection_lost(now, DisconnectReason::ReadTimeout);
                true
            }
            Phase::Closing { deadline } if deadline <= now => {
                self.end(SessionEnd::Closed, false);
                true
            }
            Phase::Connected if self.link.last_send + self.ping_interval() <= now => {
                self.link
                    .write_control(now, xid::PING, &Request::Ping, &mut self.counters);
                true
            }
            Phase::Connected if self.hosts.probe_at().is_some_and(|at| at <= now) => {
                if let Some(host) = self.hosts.probe_due(now) {
                    self.transport.push_back(Transport::Probe { host });
                }
                true
            }
            _ => false,
        }
    }
}
