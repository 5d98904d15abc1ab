//! Multi-locks: a thin wrapper over the core
//! [`MultiLock`](zk_recipes::recipe::multi_lock::MultiLock) machine; what each call and
//! event means is decided there (see `zk_recipes::recipe::multi_lock`: Curator
//! `InterProcessMultiLock` over Curator-compatible locks, all or none, taken in sorted
//! order so that two multi-locks over overlapping sets cannot deadlock).

use std::time::Duration;

use bytes::Bytes;
use zk_recipes::recipe::lock::LostReason;
use zk_recipes::recipe::multi_lock::{
    HeldLock, MultiLock as Machine, MultiLockConfig, MultiLockEvent,
};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// Several exclusive locks taken as one, all or none. Made by [`Client::multi_lock`].
#[must_use = "a multi-lock does nothing until acquired"]
#[derive(Clone)]
pub struct MultiLock {
    client: Client,
    paths: Vec<String>,
    data: Bytes,
}

/// Where a held multi-lock stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultiLockState {
    /// Every lock held, connection up.
    Held,
    /// Held as far as we know, but the connection is down: do not act.
    Suspended,
    /// A lock is gone (the session ended or its node was deleted): the others are
    /// being released.
    Lost {
        /// The path of the lock lost.
        path: String,
        /// Why.
        reason: LostReason,
    },
}

#[form]
impl MultiLock {
    /// Data stored in each of our lock nodes.
    pub fn data(mut self, data: impl Into<Bytes>) -> Self {
        self.data = data.into();
        self
    }

    /// Waits until every lock is held, or fails when one cannot be had (the session is
    /// lost, no permission, an invalid path, ...); every node taken meanwhile is
    /// deleted before the error returns. Cancelling the wait (dropping the future)
    /// gives up and deletes our nodes.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "multi_lock", paths = ?self.paths))]
    pub async fn acquire(&self) -> Result<MultiLockGuard, Error> {
        self.acquire_inner(None).await?.ok_or(Error::Finished)
    }

    /// Waits at most `wait` for every lock: `Ok(None)` if they did not all come in
    /// time — then the locks taken meanwhile are released already.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "multi_lock", paths = ?self.paths))]
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<Option<MultiLockGuard>, Error> {
        self.acquire_inner(Some(wait)).await
    }

    async fn acquire_inner(&self, wait: Option<Duration>) -> Result<Option<MultiLockGuard>, Error> {
        let mut config = MultiLockConfig::new(&self.paths, &crate::node_id());
        config.data = self.data.clone();
        let mut hold = Handle::host(&self.client, Machine::new(config))?;
        hold.hosted
            .call(move |m, now| m.acquire(now, wait.map(|w| now + w)))
            .await?;
        match hold.outcome(MultiLockEvent::acquire_outcome).await? {
            Some(locks) => Ok(Some(MultiLockGuard {
                hold,
                locks,
                state: MultiLockState::Held,
                released: false,
            })),
            None => Ok(None),
        }
    }
}

/// Every lock of a multi-lock, held. Dropping it releases them without waiting (from
/// any context: it only sends a message); [`release`](Self::release) waits until every
/// node is deleted.
pub struct MultiLockGuard {
    hold: Handle<Machine>,
    locks: Vec<HeldLock>,
    state: MultiLockState,
    released: bool,
}

#[form]
impl MultiLockGuard {
    /// The locks held (sorted by path), each with its node and fencing token.
    pub fn locks(&self) -> &[HeldLock] {
        &self.locks
    }

    /// The fencing token of the lock at `path`, if it is one of ours.
    pub fn fencing_token(&self, path: &str) -> Option<i64> {
        self.locks
            .iter()
            .find(|l| l.path == path)
            .map(|l| l.fencing_token)
    }

    /// Where the hold stands now.
    pub fn state(&mut self) -> MultiLockState {
        while let Some(e) = self.hold.try_next() {
            match e {
                MultiLockEvent::Suspended if self.state == MultiLockState::Held => {
                    self.state = MultiLockState::Suspended
                }
                MultiLockEvent::Reconnected if self.state == MultiLockState::Suspended => {
                    self.state = MultiLockState::Held
                }
                MultiLockEvent::Lost { path, reason } => {
                    self.state = MultiLockState::Lost { path, reason }
                }
                _ => {}
            }
        }
        self.state.clone()
    }

    /// Every lock held with the connection up: check before acting.
    pub fn is_held(&mut self) -> bool {
        self.state() == MultiLockState::Held
    }

    /// Releases every lock and waits until every node is deleted (the nodes of a lost
    /// hold are released already, or being released).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "multi_lock"))]
    pub async fn release(mut self) -> Result<(), Error> {
        self.released = true;
        if let MultiLockState::Lost { .. } = self.state() {
            return Ok(());
        }
        match self.hold.hosted.call(|m, now| m.release(now)).await {
            Ok(()) => self
                .hold
                .events
                .wait(|_| {}, MultiLockEvent::release_outcome)
                .await
                .unwrap_or(Ok(())),
            Err(Error::Finished) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for MultiLockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.hold.hosted.run(|m, now| m.release(now));
        }
    }
}

#[form]
impl Client {
    /// A multi-lock over `paths` (Curator `InterProcessMultiLock(client, paths)`
    /// compatible: each path is an exclusive lock that excludes a Curator
    /// `InterProcessMutex` on it). Taken in sorted order, repeats ignored.
    pub fn multi_lock<S: AsRef<str>>(&self, paths: &[S]) -> MultiLock {
        MultiLock {
            client: self.clone(),
            paths: paths.iter().map(|p| p.as_ref().to_string()).collect(),
            data: Bytes::new(),
        }
    }
}
