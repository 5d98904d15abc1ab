//! kazoo's `NonBlockingLease`: one call over the core
//! [`Lease`](zk_recipes::recipe::lease::Lease); what it decides and when is decided
//! there (see `zk_recipes::recipe::lease`). The surface supplies the wall clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_recipes::client::Error;
use zk_recipes::recipe::lease::{Lease, LeaseConfig, LeaseEvent, LeaseOutcome};

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// The wall clock: time since the Unix epoch (UTC), as kazoo's `utcnow`.
fn wall_clock() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

#[form]
impl Client {
    /// Tries for the lease at `path` for `duration`, as `identifier` (kazoo's
    /// `NonBlockingLease(path, duration, identifier)`, same nodes, same protocol):
    /// [`LeaseOutcome::Granted`] with its end if no one else holds it (or we do: a
    /// renewal), [`LeaseOutcome::Refused`] naming the holder and its end otherwise.
    /// It waits for kazoo's lock on `path` (held only around a read and a write), not
    /// for the lease. Ends are the wall clock's (`SystemTime`, UTC, whole seconds):
    /// the holders' clocks must agree. Dropping the call (tokio) deletes our lock
    /// node.
    pub async fn try_lease(
        &self,
        path: &str,
        duration: Duration,
        identifier: &str,
    ) -> Result<LeaseOutcome, Error> {
        let config = LeaseConfig::new(path, duration, identifier, &crate::node_id());
        self.try_lease_with(config, None).await
    }

    /// [`try_lease`](Self::try_lease) with a full configuration (ACL) and, if given, a
    /// limit on the wait for kazoo's lock: `Err(Timeout)` after it (our lock node is
    /// deleted; a decision made meanwhile stands).
    pub async fn try_lease_with(
        &self,
        config: LeaseConfig,
        timeout: Option<Duration>,
    ) -> Result<LeaseOutcome, Error> {
        let lease = Lease::new(config);
        let mut handle = Handle::start(self, lease, |m, now| m.start(now, wall_clock()))?;
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        match handle
            .events
            .wait_until(|_| {}, LeaseEvent::outcome, deadline)
            .await
        {
            Ok(Some(outcome)) => outcome,
            Ok(None) => Err(Error::Finished),
            Err(_) => Err(Error::Timeout),
        }
    }
}
