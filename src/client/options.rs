//! [`Options`]: the settings a [`Client`](super::Client) starts with.

use alloc::sync::Arc;
use core::time::Duration;

use crate::error::ConnectStringError;
use crate::sasl::Mechanism;
use crate::session::{ConnectString, DefaultAcl, SessionConfig};

/// Client options: the session settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// Session settings.
    pub session: SessionConfig,
}

impl Options {
    /// Options for a connection string (`host:port,...[/chroot]`) with default settings.
    pub fn new(connect_string: &str) -> Result<Options, ConnectStringError> {
        Ok(Options {
            session: SessionConfig::new(connect_string.parse::<ConnectString>()?),
        })
    }

    /// Sets the requested session timeout.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session.session_timeout = timeout;
        self
    }

    /// Sets the seed for host order and jitter (drivers pass real entropy).
    pub fn seed(mut self, seed: u64) -> Self {
        self.session.seed = seed;
        self
    }

    /// Accept read-only servers.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.session.read_only = read_only;
        self
    }

    /// Follow the ensemble's membership (`/zookeeper/config`) and rebalance over it
    /// (default off); see [`SessionConfig::track_ensemble`].
    pub fn track_ensemble(mut self, track: bool) -> Self {
        self.session.track_ensemble = track;
        self
    }

    /// Start a new session by itself after an expiry (default on).
    pub fn renew_on_expiry(mut self, renew: bool) -> Self {
        self.session.renew_on_expiry = renew;
        self
    }

    /// Cap on requests in flight plus requests queued in the session; beyond it a
    /// request is refused with [`Error::Overloaded`](crate::error::Error::Overloaded) (recipes back off and retry).
    pub fn max_pending(mut self, n: usize) -> Self {
        self.session.max_pending = n;
        self
    }

    /// Cap on requests on the wire awaiting their reply (default 512); later ones wait
    /// in the session's queue in order.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.session.max_in_flight = n;
        self
    }

    /// Cap on watch registrations.
    pub fn max_watches(mut self, n: usize) -> Self {
        self.session.max_watches = n;
        self
    }

    /// Authenticates every connection with this SASL mechanism, right after the
    /// handshake (e.g. [`DigestMd5`](crate::sasl::DigestMd5)); the driver must then
    /// supply random bytes ([`Client::handle_random`](super::Client::handle_random)).
    pub fn sasl(mut self, mechanism: Arc<dyn Mechanism>) -> Self {
        self.session.sasl = Some(mechanism);
        self
    }

    /// The ACL of every node created with "the default" (an empty ACL or
    /// `OPEN_ACL_UNSAFE`: what recipes use unless configured), per path prefix.
    pub fn default_acl(mut self, acl: DefaultAcl) -> Self {
        self.session.default_acl = Some(acl);
        self
    }

    /// Reconnect backoff: first delay and cap.
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.session.backoff_min = min;
        self.session.backoff_max = max;
        self
    }
}
