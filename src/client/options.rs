//! [`Options`]: the settings a [`Client`](super::Client) starts with.

use alloc::sync::Arc;
use core::time::Duration;

use crate::error::ConnectStringError;
use crate::sasl::Mechanism;
use crate::session::{ConnectString, DefaultAcl, SessionConfig};

/// Builder methods that each set one session setting: `name(arg: T) => field`
/// writes `pub fn name(mut self, arg: T) -> Self` (with its doc).
macro_rules! session_setters {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) => $field:ident;)+) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.session.$field = $arg;
                self
            }
        )+
    };
}

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

    session_setters! {
        /// Sets the requested session timeout.
        session_timeout(timeout: Duration) => session_timeout;
        /// Sets the seed for host order and jitter (drivers pass real entropy).
        seed(seed: u64) => seed;
        /// Accept read-only servers.
        read_only(read_only: bool) => read_only;
        /// Follow the ensemble's membership (`/zookeeper/config`) and rebalance over it
        /// (default off); see [`SessionConfig::track_ensemble`].
        track_ensemble(track: bool) => track_ensemble;
        /// Start a new session by itself after an expiry (default on).
        renew_on_expiry(renew: bool) => renew_on_expiry;
        /// Cap on requests in flight plus requests queued in the session; beyond it a
        /// request is refused with [`Error::Overloaded`](crate::error::Error::Overloaded) (recipes back off and retry).
        max_pending(n: usize) => max_pending;
        /// Cap on requests on the wire awaiting their reply (default 512); later ones wait
        /// in the session's queue in order.
        max_in_flight(n: usize) => max_in_flight;
        /// Cap on watch registrations.
        max_watches(n: usize) => max_watches;
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
