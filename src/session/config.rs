//! The session's settings ([`SessionConfig`]) and their defaults.

use alloc::sync::Arc;
use core::time::Duration;

use super::connect_string::ConnectString;
use super::default_acl::DefaultAcl;
use crate::proto::{DEFAULT_MAX_REPLY, DEFAULT_MAX_REQUEST};
use crate::sasl::Mechanism;

/// Session settings. [`SessionConfig::new`] gives sensible defaults.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// Hosts and chroot.
    pub connect_string: ConnectString,
    /// Requested session timeout (the server clamps it).
    pub session_timeout: Duration,
    /// Accept a read-only server.
    pub read_only: bool,
    /// Seed for host order and backoff jitter.
    pub seed: u64,
    /// Cap on requests in flight plus requests waiting in the session's queue; a
    /// request beyond it is refused ([`SubmitError::TooManyPending`](crate::error::SubmitError::TooManyPending)).
    pub max_pending: usize,
    /// Cap on requests written to the connection and not yet answered (at least 1);
    /// later requests wait in the queue, in order. Pings, auth and SetWatches bypass it.
    pub max_in_flight: usize,
    /// Cap on watch registrations.
    pub max_watches: usize,
    /// Cap on an incoming frame body.
    pub max_reply: usize,
    /// Cap on an outgoing frame body.
    pub max_request: usize,
    /// First backoff after a full round of hosts failed.
    pub backoff_min: Duration,
    /// Longest backoff.
    pub backoff_max: Duration,
    /// A connection that lasted this long counts as healthy: losing it resets the
    /// backoff. One lost sooner (a server that answers the handshake and then fails)
    /// counts as a failed attempt, so such servers are redialled with growing backoff.
    pub stable_after: Duration,
    /// SASL mechanism run on every connection, right after the handshake (default
    /// none); e.g. [`DigestMd5`](crate::sasl::DigestMd5).
    pub sasl: Option<Arc<dyn Mechanism>>,
    /// The ACL of nodes created with "the default" (an empty ACL or
    /// `OPEN_ACL_UNSAFE`, what recipes use unless configured), per path prefix
    /// (default none: such creates go out as given).
    pub default_acl: Option<DefaultAcl>,
    /// Follow the ensemble's membership (`/zookeeper/config`, ZooKeeper 3.5+): the host
    /// list becomes its members' client addresses, rebalanced as the Java client does
    /// (default off: the connect string's hosts, for good).
    pub track_ensemble: bool,
    /// After the session expires, start a new session by itself (as Curator and kazoo
    /// do). Off: `Expired` ends the session for good.
    pub renew_on_expiry: bool,
}

impl SessionConfig {
    /// Defaults: 30 s timeout, no read-only, seed 0, 10,000 pending requests of which
    /// 512 in flight, 100,000 watches, 1 MiB + 64 KiB replies, 0xfffff requests, backoff 50 ms … 2 s, a
    /// connection stable after 2 s, a new session after expiry.
    pub fn new(connect_string: ConnectString) -> Self {
        SessionConfig {
            connect_string,
            session_timeout: Duration::from_secs(30),
            read_only: false,
            seed: 0,
            max_pending: 10_000,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_watches: 100_000,
            max_reply: DEFAULT_MAX_REPLY,
            max_request: DEFAULT_MAX_REQUEST,
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(2),
            stable_after: Duration::from_secs(2),
            renew_on_expiry: true,
            track_ensemble: false,
            sasl: None,
            default_acl: None,
        }
    }
}

/// Default [`SessionConfig::max_in_flight`]: well under ZooKeeper's default global
/// outstanding-request limit (1,000), so one busy session does not make the server stop
/// reading or throttle.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 512;
