//! Host rotation and backoff: the order the hosts are tried in (shuffled from the
//! configured seed), which one is in use, how many attempts failed since the last
//! stable connection, how long to wait before the next one, and — until a first
//! session — each host's last failure, for [`SessionEvent::Unreachable`].
//!
//! Owns: the seeded generator (host shuffle, jitter), the order and position, the
//! failure count, when the current connection's handshake completed, the last failure.
//! A new host list (a reconfiguration) is this part's to take: nothing else holds one.
//! It starts as the connect string's and changes only through
//! [`replace`](Hosts::replace) (the ensemble tracker's rebalancing, `ensemble.rs`).

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use super::event::SessionEvent;
use super::rng::Rng;
use crate::error::{DisconnectReason, HostFailures};
use crate::time::Instant;

/// Which host, in which order, and how long to wait before dialling again.
#[derive(Debug)]
pub(super) struct Hosts {
    rng: Rng,
    /// The hosts (`host:port`): the connect string's, or the ensemble's latest.
    list: Vec<String>,
    /// Host order (indices into `list`) and position in it.
    order: Vec<usize>,
    position: usize,
    /// Failed connection attempts since the last stable connection (a connection lost
    /// within `stable_after` of its handshake counts as failed), for backoff.
    failures: u32,
    /// When the current connection's handshake completed.
    connected_at: Instant,
    /// Why the last connection attempt failed (for `Unreachable` and logs).
    last_failure: Option<DisconnectReason>,
    /// Before the first session: each host's last failure, by host index.
    host_failures: Vec<Option<DisconnectReason>>,
    /// A session was ever established (on this session id or an earlier one).
    ever_connected: bool,
}

impl Hosts {
    /// `list` in an order shuffled from `seed`, the first one next.
    pub(super) fn new(list: Vec<String>, seed: u64, now: Instant) -> Hosts {
        let mut rng = Rng::new(seed);
        let mut order: Vec<usize> = (0..list.len()).collect();
        rng.shuffle(&mut order);
        Hosts {
            rng,
            list,
            order,
            position: 0,
            failures: 0,
            connected_at: now,
            last_failure: None,
            host_failures: Vec::new(),
            ever_connected: false,
        }
    }

    /// Index of the host being used or dialled.
    pub(super) fn current(&self) -> usize {
        self.order.get(self.position).copied().unwrap_or(0)
    }

    /// The hosts `Transport::Connect` indexes.
    pub(super) fn list(&self) -> &[String] {
        &self.list
    }

    /// The seeded generator (the rebalancing draws from it too).
    pub(super) fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// A new host list and the order to try it in (a permutation of its indices), the
    /// first one next; what failed on the old list is forgotten.
    pub(super) fn replace(&mut self, list: Vec<String>, order: Vec<usize>) {
        self.list = list;
        self.order = order;
        self.position = 0;
        self.host_failures.clear();
    }

    /// Why the last connection attempt failed, if one did.
    pub(super) fn last_failure(&self) -> Option<&DisconnectReason> {
        self.last_failure.as_ref()
    }

    /// Hosts in one round (at least 1).
    fn round(&self) -> u32 {
        u32::try_from(self.order.len().max(1)).unwrap_or(u32::MAX)
    }

    /// One attempt's time to connect and handshake: the session timeout shared among
    /// the hosts, and at most a third of it, so that even with one host a server that
    /// accepts and never answers (ZooKeeper 3.8 does this to a connection accepted while
    /// it starts) leaves time for two more attempts before the expiry estimate.
    pub(super) fn connect_timeout(&self, session_timeout: Duration) -> Duration {
        let hosts = u32::try_from(self.order.len().max(3)).unwrap_or(u32::MAX);
        (session_timeout / hosts).max(Duration::from_millis(1))
    }

    /// The handshake on the current host completed at `now`.
    pub(super) fn connected(&mut self, now: Instant) {
        self.connected_at = now;
        self.ever_connected = true;
    }

    /// The connection (or the attempt) on the current host was lost at `now`: a
    /// connection that lasted `stable_after` resets the failures, anything shorter is
    /// one more. True if it was stable.
    pub(super) fn lost(
        &mut self,
        now: Instant,
        was_connected: bool,
        stable_after: Duration,
    ) -> bool {
        let stable = was_connected && now.saturating_since(self.connected_at) >= stable_after;
        if stable {
            self.failures = 0;
        } else {
            self.failures = self.failures.saturating_add(1);
        }
        stable
    }

    /// The session expired: a failed attempt, so that a server that keeps expiring new
    /// sessions is redialled with backoff, not in a loop.
    pub(super) fn expired(&mut self) {
        self.failures = self.failures.saturating_add(1);
    }

    /// The next host in the order becomes the current one.
    pub(super) fn advance(&mut self) {
        self.position = (self.position + 1) % self.order.len().max(1);
    }

    /// Notes why the last attempt failed (after [`failed_attempt`](Self::failed_attempt)).
    pub(super) fn set_last_failure(&mut self, reason: DisconnectReason) {
        self.last_failure = Some(reason);
    }

    /// Before the first session, notes the failure of an attempt on the current host;
    /// once every host has failed (the failures count this attempt), the
    /// [`SessionEvent::Unreachable`] to report.
    pub(super) fn failed_attempt(&mut self, reason: &DisconnectReason) -> Option<SessionEvent> {
        if self.ever_connected {
            return None;
        }
        let hosts = &self.list;
        self.host_failures.resize(hosts.len(), None);
        let host = self.current();
        if let Some(slot) = self.host_failures.get_mut(host) {
            *slot = Some(reason.clone());
        }
        if self.failures < self.round() {
            return None;
        }
        let hosts = hosts
            .iter()
            .cloned()
            .zip(self.host_failures.iter().cloned())
            .collect();
        Some(SessionEvent::Unreachable {
            reason: reason.clone(),
            hosts: HostFailures {
                last: reason.clone(),
                hosts,
            },
        })
    }

    /// How long to wait before dialling the next host. After a stable connection: a
    /// short random delay in `[0, backoff_min]`, so that the clients of a restarted
    /// server do not all come back at once. Otherwise the first round of hosts is tried
    /// at once, and each later round waits twice as long as the one before (up to
    /// `backoff_max`), with jitter in `[base / 2, base]`.
    pub(super) fn dial_delay(
        &mut self,
        after_stable: bool,
        backoff_min: Duration,
        backoff_max: Duration,
    ) -> Duration {
        let hosts = self.round();
        if after_stable {
            Duration::from_micros(self.rng.next_u64() % (micros(backoff_min) + 1))
        } else if self.failures < hosts {
            Duration::ZERO
        } else {
            let rounds = self.failures / hosts - 1;
            let cap = backoff_max.max(backoff_min);
            let base = backoff_min.saturating_mul(1 << rounds.min(16)).min(cap);
            let half = base / 2;
            half + Duration::from_micros(self.rng.next_u64() % (micros(half) + 1))
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
