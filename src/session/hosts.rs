//! Host rotation and backoff: the order the hosts are tried in (shuffled from the
//! configured seed), which one is in use, how many attempts failed since the last
//! stable connection, how long to wait before the next one, and — until a first
//! session — each host's last failure, for [`SessionEvent::Unreachable`].
//!
//! Owns: the seeded generator (host shuffle, jitter), the order and position, the
//! failure count, when the current connection's handshake completed, the last failure.
//! A new host list (a reconfiguration) is this part's to take: nothing else holds one.
//!
//! Also owns the search for a read-write server while connected to a read-only one
//! (the Java client's `pingRwServer`): which host to probe next and when, the wait
//! doubling from [`PROBE_MIN`] to [`PROBE_MAX`], and a host a probe found read-write,
//! dialled next; and, while disconnected, a host that closed a handshake presenting
//! the session, probed, and if found read-only the host of a read-only stand-in.

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use super::event::SessionEvent;
use super::rng::Rng;
use crate::error::{DisconnectReason, HostFailures};
use crate::time::Instant;

/// The first wait before probing for a read-write server (the Java client's
/// `minPingRwTimeout`); each probe doubles it, up to [`PROBE_MAX`].
pub(super) const PROBE_MIN: Duration = Duration::from_millis(100);
/// The longest wait between two probes (the Java client waits up to 60 s; a probe is
/// one small TCP exchange, and a client on a read-only server cannot write).
pub(super) const PROBE_MAX: Duration = Duration::from_secs(10);

/// The search for a read-write server: when the next probe goes out, the wait after
/// it, and how far along the host order it is.
#[derive(Debug, Clone, Copy)]
struct Probing {
    at: Instant,
    wait: Duration,
    /// Offset from the current host in the order of the next host to probe.
    step: usize,
}

/// Which host, in which order, and how long to wait before dialling again.
#[derive(Debug)]
pub(super) struct Hosts {
    rng: Rng,
    /// Host order (indices into the connect string) and position in it.
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
    /// Connected to a read-only server: the search for a read-write one.
    probing: Option<Probing>,
    /// A probe found this host read-write: it is dialled next.
    preferred: Option<usize>,
    /// This host closed a handshake presenting the session: a probe asks whether it
    /// is read-only.
    checking: Option<usize>,
    /// A probe found this host read-only after it refused the session: a handshake
    /// there asks for a read-only stand-in.
    stand_in: Option<usize>,
}

impl Hosts {
    /// `hosts` hosts in an order shuffled from `seed`, the first one next.
    pub(super) fn new(hosts: usize, seed: u64, now: Instant) -> Hosts {
        let mut rng = Rng::new(seed);
        let mut order: Vec<usize> = (0..hosts).collect();
        rng.shuffle(&mut order);
        Hosts {
            rng,
            order,
            position: 0,
            failures: 0,
            connected_at: now,
            last_failure: None,
            host_failures: Vec::new(),
            ever_connected: false,
            probing: None,
            preferred: None,
            checking: None,
            stand_in: None,
        }
    }

    /// Index of the host being used or dialled.
    pub(super) fn current(&self) -> usize {
        self.order.get(self.position).copied().unwrap_or(0)
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
        self.checking = None;
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

    /// The next host in the order becomes the current one (or the host a probe found
    /// read-write). Probing stops: it is for a connection to a read-only server.
    pub(super) fn advance(&mut self) {
        self.probing = None;
        let preferred = self
            .preferred
            .take()
            .and_then(|host| self.order.iter().position(|&h| h == host));
        self.position = match preferred {
            Some(position) => position,
            None => (self.position + 1) % self.order.len().max(1),
        };
    }

    /// The connection on the current host is established, on a read-only server if
    /// `read_only`: with other hosts to ask, probing starts (after [`PROBE_MIN`]);
    /// on a read-write server it stops.
    pub(super) fn set_read_only(&mut self, now: Instant, read_only: bool) {
        self.probing = (read_only && self.order.len() > 1).then_some(Probing {
            at: now + PROBE_MIN,
            wait: PROBE_MIN,
            step: 1,
        });
    }

    /// `host` closed a handshake presenting the session: a probe of it is on its way.
    pub(super) fn check_read_only(&mut self, host: usize) {
        self.checking = Some(host);
    }

    /// A probe found `host` read-only: if it is the host that refused the session,
    /// it becomes the stand-in host, dialled next (at once in place of the current
    /// host if `idle`, waiting to dial, else after the current attempt). True if so.
    pub(super) fn found_read_only(&mut self, host: usize, idle: bool) -> bool {
        if self.checking != Some(host) {
            return false;
        }
        self.checking = None;
        self.stand_in = Some(host);
        match self.order.iter().position(|&h| h == host) {
            Some(position) if idle => self.position = position,
            Some(_) => self.preferred = Some(host),
            None => return false,
        }
        true
    }

    /// The handshake on the current host asks for a read-only stand-in.
    pub(super) fn stand_in_here(&self) -> bool {
        self.stand_in == Some(self.current())
    }

    /// A stand-in connection (or the attempt) ended: the next handshake there
    /// presents the session again.
    pub(super) fn end_stand_in(&mut self) {
        self.stand_in = None;
    }

    /// When the next probe is due, while probing.
    pub(super) fn probe_at(&self) -> Option<Instant> {
        self.probing.map(|p| p.at)
    }

    /// The host to probe if a probe is due at `now` (the others in turn, never the
    /// current one); the next probe is scheduled after twice the last wait.
    pub(super) fn probe_due(&mut self, now: Instant) -> Option<usize> {
        let hosts = self.order.len();
        let current = self.position;
        let p = self.probing.as_mut().filter(|p| p.at <= now)?;
        let host = self.order.get((current + p.step) % hosts.max(1)).copied();
        p.step = p.step % (hosts.max(2) - 1) + 1;
        p.wait = (p.wait * 2).min(PROBE_MAX);
        p.at = now + p.wait;
        host
    }

    /// A probe found `host` read-write: if still probing, it is the host dialled
    /// next; true if so (the caller then drops the read-only connection).
    pub(super) fn found_read_write(&mut self, host: usize) -> bool {
        if self.probing.is_none() || !self.order.contains(&host) || host == self.current() {
            return false;
        }
        self.preferred = Some(host);
        true
    }

    /// Notes why the last attempt failed (after [`failed_attempt`](Self::failed_attempt)).
    pub(super) fn set_last_failure(&mut self, reason: DisconnectReason) {
        self.last_failure = Some(reason);
    }

    /// Before the first session, notes the failure of an attempt on the current host
    /// (`hosts`: the connect string's); once every host has failed (the failures count
    /// this attempt), the [`SessionEvent::Unreachable`] to report.
    pub(super) fn failed_attempt(
        &mut self,
        reason: &DisconnectReason,
        hosts: &[String],
    ) -> Option<SessionEvent> {
        if self.ever_connected {
            return None;
        }
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
