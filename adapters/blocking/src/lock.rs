//! Locks for the blocking adapter: exclusive, read and write, with guards.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use bytes::Bytes;
use zk_recipes::recipe::lock::{LockChange, LockConfig, LockEvent, LockKind, LostReason, REVOKE};

use crate::driver::Input;
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

impl LockBuilder {
    /// Data stored in our node.
    pub fn data(mut self, data: impl Into<Bytes>) -> Self {
        self.config.data = data.into();
        self
    }

    /// Revocable: `unlock` written into our node is reported.
    pub fn revocable(mut self) -> Self {
        self.config.revocable = true;
        self
    }

    /// Waits for the lock (at most the client's call timeout).
    pub fn acquire(self) -> Result<LockGuard, Error> {
        let timeout = self.client.call_timeout;
        self.start(None, timeout)?.ok_or(Error::Timeout)
    }

    /// Takes the lock only if it is free now.
    pub fn try_acquire(self) -> Result<Option<LockGuard>, Error> {
        let timeout = self.client.call_timeout;
        self.start(Some(Duration::ZERO), timeout)
    }

    /// Waits at most `wait` for the lock.
    pub fn acquire_timeout(self, wait: Duration) -> Result<Option<LockGuard>, Error> {
        let timeout = self.client.call_timeout.max(wait * 2);
        self.start(Some(wait), timeout)
    }

    fn start(self, wait: Option<Duration>, give_up: Duration) -> Result<Option<LockGuard>, Error> {
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let client = self.client;
        client
            .inner
            .inputs
            .send(Input::Lock {
                key,
                config: self.config,
                wait,
                events: tx,
            })
            .map_err(|_| client.dead())?;
        let deadline = std::time::Instant::now() + give_up;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(LockEvent::Acquired {
                    fencing_token,
                    node,
                }) => {
                    return Ok(Some(LockGuard {
                        client,
                        key,
                        events: rx,
                        fencing_token,
                        node,
                        released: false,
                    }));
                }
                // Unlock frees the driver's entry (the machine removes any node itself).
                Ok(LockEvent::NotAcquired) => {
                    let _ = client.inner.inputs.send(Input::Unlock { key });
                    return Ok(None);
                }
                Ok(LockEvent::Failed { error }) => {
                    let _ = client.inner.inputs.send(Input::Unlock { key });
                    return Err(error.into());
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    let _ = client.inner.inputs.send(Input::Unlock { key }); // cancel, delete our node
                    return Err(Error::Timeout);
                }
                Err(RecvTimeoutError::Disconnected) => return Err(client.dead()),
            }
        }
    }
}

/// A held lock. Dropping it releases the lock without blocking.
pub struct LockGuard {
    client: Client,
    key: u64,
    events: Receiver<LockEvent>,
    fencing_token: i64,
    node: String,
    released: bool,
}

impl LockGuard {
    /// The creation zxid of our node: strictly increasing across successive holders.
    pub fn fencing_token(&self) -> i64 {
        self.fencing_token
    }

    /// Our node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The next change while holding, waiting at most `timeout`.
    pub fn changed_timeout(&self, timeout: Duration) -> Option<LockChange> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.events.recv_timeout(left) {
                Ok(e) => {
                    if let Some(change) = e.change() {
                        return Some(change);
                    }
                }
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => {
                    return Some(LockChange::Lost(LostReason::SessionClosed))
                }
            }
        }
    }

    /// Releases and waits (at most the call timeout) until our node is deleted.
    pub fn release(mut self) -> Result<(), Error> {
        self.released = true;
        self.client
            .inner
            .inputs
            .send(Input::Unlock { key: self.key })
            .map_err(|_| self.client.dead())?;
        loop {
            match self.events.recv_timeout(self.client.call_timeout) {
                Ok(LockEvent::Released) | Ok(LockEvent::Cancelled) | Ok(LockEvent::Lost { .. }) => {
                    return Ok(())
                }
                Ok(LockEvent::Failed { error }) => return Err(error.into()),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return Err(Error::Timeout),
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = self
                .client
                .inner
                .inputs
                .send(Input::Unlock { key: self.key });
        }
    }
}

/// A re-entrant exclusive lock, counted per thread like Curator's `InterProcessMutex`:
/// a thread that holds it may acquire again; other threads wait.
#[derive(Clone)]
pub struct ReentrantLock {
    client: Client,
    dir: String,
    state: Arc<Mutex<Option<(ThreadId, usize, LockGuard)>>>,
}

/// One level of a [`ReentrantLock`] hold.
pub struct ReentrantGuard {
    state: Arc<Mutex<Option<(ThreadId, usize, LockGuard)>>>,
    fencing_token: i64,
}

impl ReentrantLock {
    /// Acquires, or joins this thread's hold.
    pub fn acquire(&self) -> Result<ReentrantGuard, Error> {
        let me = std::thread::current().id();
        {
            let mut s = self.state.lock().map_err(|_| Error::Closed)?;
            if let Some((owner, depth, guard)) = s.as_mut() {
                if *owner == me {
                    *depth += 1;
                    return Ok(ReentrantGuard {
                        state: self.state.clone(),
                        fencing_token: guard.fencing_token(),
                    });
                }
            }
        }
        // Another thread (or nobody) holds it: queue in ZooKeeper like anyone else.
        let guard = self.client.lock(&self.dir).acquire()?;
        let fencing_token = guard.fencing_token();
        *self.state.lock().map_err(|_| Error::Closed)? = Some((me, 1, guard));
        Ok(ReentrantGuard {
            state: self.state.clone(),
            fencing_token,
        })
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
        if let Ok(mut s) = self.state.lock() {
            let last = match s.as_mut() {
                Some((_, depth, _)) => {
                    *depth -= 1;
                    *depth == 0
                }
                None => false,
            };
            if last {
                *s = None; // drops the LockGuard, which releases
            }
        }
    }
}

impl Client {
    /// An exclusive lock on `dir` (Curator `InterProcessMutex` compatible).
    pub fn lock(&self, dir: &str) -> LockBuilder {
        self.lock_kind(dir, LockKind::Exclusive)
    }

    /// The read side of a read/write lock on `dir`.
    pub fn read_lock(&self, dir: &str) -> LockBuilder {
        self.lock_kind(dir, LockKind::Read)
    }

    /// The write side of a read/write lock on `dir`.
    pub fn write_lock(&self, dir: &str) -> LockBuilder {
        self.lock_kind(dir, LockKind::Write)
    }

    fn lock_kind(&self, dir: &str, kind: LockKind) -> LockBuilder {
        LockBuilder {
            client: self.clone(),
            config: LockConfig::new(dir, kind, &node_id()),
        }
    }

    /// A re-entrant exclusive lock on `dir`, counted per thread.
    pub fn reentrant_lock(&self, dir: &str) -> ReentrantLock {
        ReentrantLock {
            client: self.clone(),
            dir: dir.into(),
            state: Arc::new(Mutex::new(None)),
        }
    }

    /// Asks the holder of `node` to release (writes `unlock`); with `force_after`,
    /// deletes the node after that grace period if it is still there.
    pub fn revoke(&self, node: &str, force_after: Option<Duration>) -> Result<(), Error> {
        let no_node = Error::Server(zk_recipes::proto::ErrorCode::NoNode);
        match self.set_data(node, Bytes::from_static(REVOKE), None) {
            Err(e) if e == no_node => return Ok(()),
            other => {
                other?;
            }
        }
        if let Some(grace) = force_after {
            std::thread::sleep(grace);
            match self.delete(node, None) {
                Err(e) if e != no_node => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}
