//! Locks for the tokio adapter: exclusive, read and write, with guards.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use zk_recipes::recipe::lock::{LockChange, LockConfig, LockEvent, LockKind, LostReason, REVOKE};

use crate::driver::Command;
use crate::{Client, Error};

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// A fresh random id for one lock node.
fn node_id() -> String {
    zk_recipes::recipe::lock::node_id(crate::random_seed(), crate::random_seed())
}

/// How to take a lock; made by [`Client::lock`], [`Client::read_lock`], [`Client::write_lock`].
#[must_use = "a lock builder does nothing until acquired"]
pub struct LockBuilder {
    client: Client,
    config: LockConfig,
}

/// Cancels (deletes the node of) an attempt that was dropped before finishing.
struct Pending {
    client: Client,
    key: u64,
    armed: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.client.commands.send(Command::Unlock { key: self.key });
        }
    }
}

impl LockBuilder {
    pub(crate) fn new(client: Client, dir: &str, kind: LockKind) -> Self {
        LockBuilder {
            config: LockConfig::new(dir, kind, &node_id()),
            client,
        }
    }

    /// Data stored in our node.
    pub fn data(mut self, data: impl Into<Bytes>) -> Self {
        self.config.data = data.into();
        self
    }

    /// Revocable: `unlock` written into our node is reported as
    /// [`LockChange::RevocationRequested`] (see [`Client::revoke`]).
    pub fn revocable(mut self) -> Self {
        self.config.revocable = true;
        self
    }

    /// Skip the watch on our own node while holding: one request less per acquisition,
    /// but a deletion of our node by someone else goes unnoticed until the session ends.
    pub fn without_own_node_watch(mut self) -> Self {
        self.config.watch_own_node = false;
        self
    }

    /// Waits for the lock. Dropping the future cancels the attempt and deletes our node.
    pub async fn acquire(self) -> Result<LockGuard, Error> {
        match self.start(None).await? {
            Some(g) => Ok(g),
            None => Err(Error::Timeout),
        }
    }

    /// Takes the lock only if it is free now.
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, Error> {
        self.start(Some(Duration::ZERO)).await
    }

    /// Waits at most `timeout` for the lock.
    pub async fn acquire_timeout(self, timeout: Duration) -> Result<Option<LockGuard>, Error> {
        self.start(Some(timeout)).await
    }

    async fn start(self, wait: Option<Duration>) -> Result<Option<LockGuard>, Error> {
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let client = self.client;
        client
            .commands
            .send(Command::Lock {
                key,
                config: self.config,
                wait,
                events: tx,
            })
            .map_err(|_| client.dead())?;
        let mut pending = Pending {
            client: client.clone(),
            key,
            armed: true,
        };
        loop {
            match rx.recv().await {
                Some(LockEvent::Acquired {
                    fencing_token,
                    node,
                }) => {
                    pending.armed = false;
                    return Ok(Some(LockGuard {
                        client,
                        key,
                        events: rx,
                        fencing_token,
                        node,
                        released: false,
                    }));
                }
                // (`pending` still sends the unlock on drop: it frees the driver's entry;
                // the machine already removes any node itself.)
                Some(LockEvent::NotAcquired) => return Ok(None),
                Some(LockEvent::Failed { error }) => return Err(error.into()),
                Some(_) => {}
                None => {
                    pending.armed = false;
                    return Err(client.dead());
                }
            }
        }
    }
}

/// A held lock. Dropping it releases the lock (without waiting).
#[derive(Debug)]
pub struct LockGuard {
    client: Client,
    key: u64,
    events: mpsc::UnboundedReceiver<LockEvent>,
    fencing_token: i64,
    node: String,
    released: bool,
}

impl LockGuard {
    /// The creation zxid of our node: strictly increasing across successive holders.
    /// Hand it to the protected resource, which rejects any token lower than the
    /// highest it has seen.
    pub fn fencing_token(&self) -> i64 {
        self.fencing_token
    }

    /// Our node's name in the lock directory.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The next change while holding; pending forever while nothing happens (use it in
    /// `select!` beside the protected work).
    pub async fn changed(&mut self) -> LockChange {
        loop {
            match self.events.recv().await {
                Some(e) => {
                    if let Some(change) = e.change() {
                        return change;
                    }
                }
                None => return LockChange::Lost(LostReason::SessionClosed),
            }
        }
    }

    /// Releases the lock and waits until our node is deleted.
    pub async fn release(mut self) -> Result<(), Error> {
        self.released = true;
        self.client
            .commands
            .send(Command::Unlock { key: self.key })
            .map_err(|_| self.client.dead())?;
        loop {
            match self.events.recv().await {
                Some(LockEvent::Released)
                | Some(LockEvent::Cancelled)
                | Some(LockEvent::Lost { .. })
                | None => return Ok(()),
                Some(LockEvent::Failed { error }) => return Err(error.into()),
                Some(_) => {}
            }
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.client.commands.send(Command::Unlock { key: self.key });
        }
    }
}

/// A re-entrant lock: nested [`acquire`](ReentrantLock::acquire)s through the same
/// handle join the current hold; the node is released with the last guard. Curator
/// counts per thread; here the handle is the owner, so share a handle only within one
/// logical owner (one task, one request).
#[derive(Clone)]
pub struct ReentrantLock {
    client: Client,
    dir: String,
    state: Arc<tokio::sync::Mutex<(usize, Option<LockGuard>)>>,
}

/// One level of a [`ReentrantLock`] hold.
pub struct ReentrantGuard {
    state: Arc<tokio::sync::Mutex<(usize, Option<LockGuard>)>>,
    fencing_token: i64,
}

impl ReentrantLock {
    pub(crate) fn new(client: Client, dir: &str) -> Self {
        ReentrantLock {
            client,
            dir: dir.into(),
            state: Arc::new(tokio::sync::Mutex::new((0, None))),
        }
    }

    /// Acquires, or joins the hold this handle already has.
    pub async fn acquire(&self) -> Result<ReentrantGuard, Error> {
        let mut s = self.state.lock().await;
        if s.0 == 0 {
            s.1 = Some(self.client.lock(&self.dir).acquire().await?);
        }
        s.0 += 1;
        let fencing_token = s.1.as_ref().map(LockGuard::fencing_token).unwrap_or(0);
        Ok(ReentrantGuard {
            state: self.state.clone(),
            fencing_token,
        })
    }

    /// How many levels are held now.
    pub async fn depth(&self) -> usize {
        self.state.lock().await.0
    }
}

impl ReentrantGuard {
    /// The hold's fencing token.
    pub fn fencing_token(&self) -> i64 {
        self.fencing_token
    }
}

impl Drop for ReentrantGuard {
    fn drop(&mut self) {
        let state = self.state.clone();
        // The last level releases: dropping the inner guard sends the release.
        let release = move |s: &mut (usize, Option<LockGuard>)| {
            s.0 = s.0.saturating_sub(1);
            if s.0 == 0 {
                s.1 = None;
            }
        };
        let done = match state.try_lock() {
            Ok(mut s) => {
                release(&mut s);
                true
            }
            Err(_) => false,
        };
        if !done {
            tokio::spawn(async move { release(&mut *state.lock().await) });
        }
    }
}

impl Client {
    /// An exclusive lock on `dir` (Curator `InterProcessMutex` compatible).
    pub fn lock(&self, dir: &str) -> LockBuilder {
        LockBuilder::new(self.clone(), dir, LockKind::Exclusive)
    }

    /// The read side of a read/write lock on `dir` (Curator `InterProcessReadWriteLock`).
    pub fn read_lock(&self, dir: &str) -> LockBuilder {
        LockBuilder::new(self.clone(), dir, LockKind::Read)
    }

    /// The write side of a read/write lock on `dir`.
    pub fn write_lock(&self, dir: &str) -> LockBuilder {
        LockBuilder::new(self.clone(), dir, LockKind::Write)
    }

    /// A re-entrant exclusive lock on `dir` (explicit opt-in; see [`ReentrantLock`]).
    pub fn reentrant_lock(&self, dir: &str) -> ReentrantLock {
        ReentrantLock::new(self.clone(), dir)
    }

    /// Asks the holder of `node` (a full path) to release by writing `unlock` into it;
    /// with `force_after`, deletes the node if it still exists after that grace period
    /// (the holder then sees `Lost`).
    pub async fn revoke(&self, node: &str, force_after: Option<Duration>) -> Result<(), Error> {
        match self.set_data(node, Bytes::from_static(REVOKE), None).await {
            Err(Error::Server(zk_recipes::proto::ErrorCode::NoNode)) => return Ok(()),
            other => {
                other?;
            }
        }
        if let Some(grace) = force_after {
            tokio::time::sleep(grace).await;
            match self.delete(node, None).await {
                Ok(()) | Err(Error::Server(zk_recipes::proto::ErrorCode::NoNode)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
