//! Counting semaphores: a thin wrapper over the core
//! [`Semaphore`](zk_recipes::recipe::semaphore::Semaphore) machine; what each call and
//! event means is decided there (see `zk_recipes::recipe::semaphore`: Curator
//! `InterProcessSemaphoreV2`-compatible nodes, herd-free waiting, no orphaned lease).

use std::time::Duration;

use bytes::Bytes;
use zk_recipes::recipe::lock::LostReason;
use zk_recipes::recipe::semaphore::{Semaphore as Machine, SemaphoreConfig, SemaphoreEvent};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// A counting semaphore at a path: at most `max_leases` holders of a [`Lease`] at once,
/// across all processes using the same path and number. Made by [`Client::semaphore`].
#[derive(Clone)]
pub struct Semaphore {
    client: Client,
    path: String,
    max_leases: u32,
    data: Bytes,
}

/// Where a lease stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// Held, connection up.
    Held,
    /// Held as far as we know, but the connection is down: do not act.
    Suspended,
    /// Gone (the session ended or the node was deleted).
    Lost(LostReason),
}

#[form]
impl Semaphore {
    /// Data stored in each lease node (Curator's `setNodeData`).
    pub fn data(mut self, data: impl Into<Bytes>) -> Self {
        self.data = data.into();
        self
    }

    /// The number of leases.
    pub fn max_leases(&self) -> u32 {
        self.max_leases
    }

    /// Waits until a lease is ours, or fails when none can be had (the session is
    /// lost, no permission, ...). Cancelling the wait (dropping the future) gives up
    /// and deletes our nodes.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "semaphore", path = %self.path))]
    pub async fn acquire(&self) -> Result<Lease, Error> {
        self.acquire_inner(None).await?.ok_or(Error::Finished)
    }

    /// Waits at most `wait` for a lease: `Ok(None)` if none came in time.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "semaphore", path = %self.path))]
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<Option<Lease>, Error> {
        self.acquire_inner(Some(wait)).await
    }

    async fn acquire_inner(&self, wait: Option<Duration>) -> Result<Option<Lease>, Error> {
        let mut config = SemaphoreConfig::new(&self.path, self.max_leases, &crate::node_id(), &crate::node_id());
        config.data = self.data.clone();
        let mut hold = Handle::host(&self.client, Machine::new(config))?;
        hold.hosted
            .call(move |s, now| s.acquire(now, wait.map(|w| now + w)))
            .await?;
        match hold.outcome(SemaphoreEvent::acquire_outcome).await? {
            Some(path) => Ok(Some(Lease {
                hold,
                path,
                state: LeaseState::Held,
                released: false,
            })),
            None => Ok(None),
        }
    }
}

/// A held lease. Dropping it releases it without waiting (from any context: it only
/// sends a message); [`release`](Self::release) waits until the node is deleted.
pub struct Lease {
    hold: Handle<Machine>,
    path: String,
    state: LeaseState,
    released: bool,
}

#[form]
impl Lease {
    /// The lease node's full path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Where the lease stands now.
    pub fn state(&mut self) -> LeaseState {
        while let Some(e) = self.hold.try_next() {
            match e {
                SemaphoreEvent::Suspended if self.state == LeaseState::Held => {
                    self.state = LeaseState::Suspended
                }
                SemaphoreEvent::Reconnected if self.state == LeaseState::Suspended => {
                    self.state = LeaseState::Held
                }
                SemaphoreEvent::Lost { reason } => self.state = LeaseState::Lost(reason),
                _ => {}
            }
        }
        self.state
    }

    /// Held with the connection up: check before acting.
    pub fn is_held(&mut self) -> bool {
        self.state() == LeaseState::Held
    }

    /// Releases the lease and waits until its node is deleted (a lost lease is
    /// released already).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "semaphore", path = %self.path))]
    pub async fn release(mut self) -> Result<(), Error> {
        self.released = true;
        if let LeaseState::Lost(_) = self.state() {
            return Ok(());
        }
        match self.hold.hosted.call(|s, now| s.release(now)).await {
            Ok(()) => self
                .hold
                .events
                .wait(|_| {}, SemaphoreEvent::release_outcome)
                .await
                .unwrap_or(Ok(())),
            Err(Error::Finished) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.hold.hosted.run(|s, now| s.release(now));
        }
    }
}

#[form]
impl Client {
    /// A counting semaphore at `path` with `max_leases` leases (Curator
    /// `InterProcessSemaphoreV2(client, path, max_leases)` compatible).
    pub fn semaphore(&self, path: &str, max_leases: u32) -> Semaphore {
        Semaphore {
            client: self.clone(),
            path: path.into(),
            max_leases,
            data: Bytes::new(),
        }
    }
}
