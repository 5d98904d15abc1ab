//! Following the ensemble's membership ([`SessionConfig::track_ensemble`]): on every
//! connection, and whenever its watch fires, the session reads `/zookeeper/config`
//! (outside any chroot) with a watch, under a token of its own
//! ([`Token::SESSION`]: its reply and failure never reach the caller); a membership
//! whose client addresses differ from the hosts in use replaces them, and the session
//! rebalances as ZooKeeper's Java client does (`StaticHostProvider.updateServerList`,
//! ZOOKEEPER-1355), with draws from the session's seeded generator:
//!
//! * the server in use was removed: move at once — to an added server if the ensemble
//!   grew, else to a kept one with the probability that leaves every remaining server
//!   the same expected load (`kept·(old−new) / (new·(old−kept))`), else to an added
//!   one;
//! * the server in use stays and the ensemble grew from `old` to `new` servers: move
//!   to an added server with probability `(new−old)/new`, so that the added servers
//!   end up with their share;
//! * otherwise stay (with the new list, for later reconnections).
//!
//! A move drops the connection as a connection loss does (requests in flight fail
//! with `ConnectionLoss`, the session is `Suspended` with
//! [`DisconnectReason::Rebalanced`]) and dials the chosen host at once; the session
//! resumes there, watches re-armed.
//!
//! Owns: whether a read is on the wire, the last version applied.

use alloc::string::String;
use alloc::vec::Vec;

use super::event::{SessionEvent, Token};
use super::rebalance::rebalance;
use super::watches::After;
use super::window::Ticket;
use super::{Phase, Session};
use crate::error::{DisconnectReason, Error};
use crate::proto::{
    encode_request, EnsembleConfig, EventType, OpCode, PathWatch, Request, Response, CONFIG_NODE,
};
use crate::time::Instant;

impl Session {
    /// The hosts [`Transport::Connect`](super::Transport::Connect) indexes: the
    /// connect string's, or the ensemble's latest when tracking it.
    pub fn hosts(&self) -> &[String] {
        self.hosts.list()
    }

    /// Host `i` of [`hosts`](Self::hosts) (`""` if there is none).
    pub fn host(&self, i: usize) -> &str {
        self.hosts.list().get(i).map(String::as_str).unwrap_or("")
    }

    /// The version of the last ensemble configuration the session applied (when
    /// tracking it).
    pub fn ensemble_version(&self) -> Option<i64> {
        self.ensemble.version
    }

    /// Reads the configuration node with a watch, if tracking, connected and no such
    /// read is on the wire. Written at once, past the window (like a ping).
    pub(super) fn read_ensemble(&mut self, now: Instant) {
        if !self.config.track_ensemble || self.ensemble.reading || self.phase != Phase::Connected {
            return;
        }
        let request = Request::GetData(PathWatch {
            path: CONFIG_NODE.into(),
            watch: true,
        });
        let xid = self.window.next_xid();
        if encode_request(&mut self.link.tx, xid, &request, self.config.max_request).is_err() {
            return;
        }
        self.counters.requests_sent += 1;
        let ticket = Ticket {
            op: OpCode::GetData,
            token: Token::SESSION,
            after: After::Nothing,
        };
        self.window.push(ticket, Vec::new());
        self.link.last_send = now;
        self.ensemble.reading = true;
    }

    /// A notification on `server_path`: the configuration changed, read it again.
    pub(super) fn ensemble_notified(&mut self, now: Instant, server_path: &str, kind: EventType) {
        if server_path == CONFIG_NODE && kind == EventType::NodeDataChanged {
            self.read_ensemble(now);
        }
    }

    /// The session's read failed (the connection went): the next connection reads again.
    pub(super) fn ensemble_read_failed(&mut self) {
        self.ensemble.reading = false;
    }

    /// The answer to the session's read of the configuration node.
    pub(super) fn on_ensemble(&mut self, now: Instant, result: Result<Response, Error>) {
        self.ensemble.reading = false;
        // A refusal or a config that does not parse leaves the hosts as they are (the
        // node is readable by anyone; a server older than 3.5 answers NoNode).
        let Ok(Response::Data { data, .. }) = result else {
            return;
        };
        let Ok(config) = EnsembleConfig::from_data(&data) else {
            return;
        };
        let new = config.client_hosts();
        if new.is_empty() || self.ensemble.version == Some(config.version) {
            return;
        }
        self.ensemble.version = Some(config.version);
        let old = self.hosts.list().to_vec();
        if same_members(&old, &new) {
            return;
        }
        let current = String::from(self.host(self.hosts.current()));
        let decision = rebalance(&old, &current, &new, self.hosts.rng());
        self.hosts.replace(new.clone(), decision.order);
        self.events.push_back(SessionEvent::EnsembleChanged {
            hosts: new,
            version: config.version,
            moving: decision.leave,
        });
        if decision.leave && self.phase == Phase::Connected {
            self.leave_for_rebalance(now);
        }
    }

    /// Leaves the current server for the host the rebalancing chose (the current one
    /// of the new order), at once.
    fn leave_for_rebalance(&mut self, now: Instant) {
        self.transport.push_back(super::Transport::Close);
        self.link.reset();
        self.fail_in_flight(Error::ConnectionLoss);
        self.identity.suspended = true;
        self.events.push_back(SessionEvent::Suspended {
            reason: DisconnectReason::Rebalanced,
        });
        // Not a failure: no backoff, and the chosen host is dialled now.
        self.hosts.lost(now, true, core::time::Duration::ZERO);
        self.dial();
    }
}

fn same_members(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|h| b.contains(h))
}
