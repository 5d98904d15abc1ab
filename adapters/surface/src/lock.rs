//! Locks: thin typed wrappers over the core [`Lock`]; what each
//! call and event means is decided there (see `zk_recipes::recipe::lock`).

use std::time::{Duration, Instant};

use bytes::Bytes;
use zk_recipes::recipe::lock::{
    Acquire, AcquireWait, HoldState, Lock, LockChange, LockConfig, LockEvent, LockKind, LockStatus,
    Release,
};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Events, Hosted};

/// How to take a lock; made by [`Client::lock`], [`Client::read_lock`],
/// [`Client::write_lock`] and [`ReentrantLock`].
#[must_use = "a lock builder does nothing until acquired"]
#[derive(Clone)]
pub struct LockBuilder {
    client: Client,
    config: LockConfig,
}

#[form]
impl LockBuilder {
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

    /// Skip the watch on our own node while holding: at most one read less per hold
    /// (see `LockConfig::watch_own_node`), but a deletion of our node by someone else
    /// goes unnoticed until the session ends.
    pub fn without_own_node_watch(mut self) -> Self {
        self.config.watch_own_node = false;
        self
    }

    /// Waits until the lock is held, or fails when it cannot be had (the session is
    /// lost, no permission, ...). Cancelling the wait (dropping the future) deletes our
    /// node; [`acquire_timeout`](Self::acquire_timeout) bounds it.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "lock", path = %self.config.dir))]
    pub async fn acquire(self) -> Result<LockGuard, Error> {
        acquire(&Hosted::new(&self.client, Lock::new(self.config))?.0, None)
            .await?
            .ok_or(Error::Finished)
    }

    /// Takes the lock only if it is free now (one look at the directory).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "lock", path = %self.config.dir))]
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, Error> {
        self.acquire_timeout(Duration::ZERO).await
    }

    /// Waits at most `wait` (plus one round trip for a first look) for the lock.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "lock", path = %self.config.dir))]
    pub async fn acquire_timeout(self, wait: Duration) -> Result<Option<LockGuard>, Error> {
        acquire(
            &Hosted::new(&self.client, Lock::new(self.config))?.0,
            Some(wait),
        )
        .await
    }
}

#[form]
async fn acquire(hold: &Hosted<Lock>, wait: Option<Duration>) -> Result<Option<LockGuard>, Error> {
    let (answer, mut events) = hold
        .call_subscribed(move |l, now| l.acquire(now, wait.map(|w| now + w)))
        .await?;
    let (fencing_token, node, status) = match (&answer, AcquireWait::after(&answer)) {
        (
            Acquire::Held {
                fencing_token,
                node,
            },
            _,
        ) => (*fencing_token, node.clone(), LockStatus::held()),
        (_, Some(mut wait)) => match events.outcome(|e| wait.feed(e)).await? {
            Some((token, node)) => (token, node, wait.into_status()),
            None => return Ok(None),
        },
        (Acquire::Failed(e), _) => return Err(e.clone()),
        _ => return Err(Error::Finished),
    };
    Ok(Some(LockGuard {
        hold: hold.clone(),
        events,
        status,
        fencing_token,
        node,
        released: false,
        lost_reported: false,
    }))
}

/// A held lock (or one level of a re-entrant hold). Dropping it releases it without
/// waiting (from any context: it only sends a message to the driver).
pub struct LockGuard {
    hold: Hosted<Lock>,
    events: Events<Lock>,
    status: LockStatus,
    fencing_token: i64,
    node: String,
    released: bool,
    /// `changed` has returned `Lost`: `changed_timeout` has nothing more to say.
    lost_reported: bool,
}

#[form]
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

    fn fold(&mut self) -> &mut LockStatus {
        while let Some(e) = self.events.try_next() {
            self.status.apply(&e);
        }
        &mut self.status
    }

    /// Where the hold stands now.
    pub fn status(&mut self) -> HoldState {
        self.fold().state()
    }

    /// Held with the connection up: check before acting on the protected resource.
    pub fn is_held(&mut self) -> bool {
        self.fold().is_held()
    }

    /// Someone asked for the lock (revocable locks), now or while we waited.
    pub fn revocation_requested(&mut self) -> bool {
        self.fold().revocation_requested()
    }

    /// The next change while holding, none skipped; waits while nothing happens (in
    /// async code, use it in `select!` beside the protected work). Once the hold is
    /// lost it returns `Lost` again at once: nothing more will change.
    pub async fn changed(&mut self) -> LockChange {
        match self.changed_until(None).await {
            Some(c) => c,
            None => rt::forever().await,
        }
    }

    /// The next change while holding, none skipped, waiting at most `timeout`; `None`
    /// if nothing changed (so also after `Lost` was reported: it is reported once).
    pub async fn changed_timeout(&mut self, timeout: Duration) -> Option<LockChange> {
        self.changed_until(Some(Instant::now() + timeout)).await
    }

    async fn changed_until(&mut self, deadline: Option<Instant>) -> Option<LockChange> {
        let change = self.next_change(deadline).await;
        if matches!(change, Some(LockChange::Lost(_))) {
            self.lost_reported = true;
        }
        change
    }

    async fn next_change(&mut self, deadline: Option<Instant>) -> Option<LockChange> {
        loop {
            if let Some(c) = self.fold().next_change() {
                return Some(c);
            }
            match self.events.next_until(deadline).await {
                Ok(Some(e)) => self.status.apply(&e),
                Ok(None) => {
                    return match self.status.state() {
                        HoldState::Lost(r) if deadline.is_none() || !self.lost_reported => {
                            Some(LockChange::Lost(r))
                        }
                        _ if deadline.is_none() => rt::forever().await,
                        _ => None,
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Releases (one level) and waits until our node is deleted (or, for an inner
    /// re-entrant level, at once).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "lock", path = %self.node))]
    pub async fn release(mut self) -> Result<(), Error> {
        self.released = true;
        match self.hold.call(|l, now| l.release(now)).await {
            Ok(Release::Pending) => self
                .events
                .wait(|_| {}, LockEvent::release_outcome)
                .await
                .unwrap_or(Ok(())),
            Ok(Release::StillHeld { .. }) | Ok(Release::Done) | Err(Error::Finished) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.hold.run(|l, now| {
                l.release(now);
            });
        }
    }
}

/// A re-entrant exclusive lock: acquiring through a handle that holds the lock adds a
/// level at once; the node is released with the last level's guard. The handle is the
/// owner (one per logical owner: a task, a request), in both adapters.
pub struct ReentrantLock {
    builder: LockBuilder,
    hold: rt::Mutex<Option<Hosted<Lock>>>,
}

#[form]
impl ReentrantLock {
    /// Acquires, or adds a level to the hold this handle has. Fails if that hold was
    /// lost (while any of its guards lives).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "lock", path = %self.builder.config.dir))]
    pub async fn acquire(&self) -> Result<LockGuard, Error> {
        self.acquire_inner(None).await?.ok_or(Error::Finished)
    }

    /// Levels held now through this handle (0 when it holds nothing).
    pub async fn depth(&self) -> u32 {
        let hold = self.hold.lock().await.clone();
        match hold {
            Some(h) => h.call(|l, _| l.depth()).await.unwrap_or(0),
            None => 0,
        }
    }

    /// Like [`acquire`](Self::acquire), waiting at most `wait` for a new hold.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "lock", path = %self.builder.config.dir))]
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<Option<LockGuard>, Error> {
        self.acquire_inner(Some(wait)).await
    }

    async fn acquire_inner(&self, wait: Option<Duration>) -> Result<Option<LockGuard>, Error> {
        let mut hold = self.hold.lock().await;
        if let Some(h) = hold.as_ref() {
            match acquire(h, wait).await {
                Err(Error::Finished) => {} // that hold is over: start a new one
                other => return other,
            }
        }
        let mut config = self.builder.config.clone();
        config.id = crate::node_id();
        let h = Hosted::new(&self.builder.client, Lock::new(config))?.0;
        // Kept only once it holds: an attempt that times out, fails or is cancelled drops its machine, which abandons the attempt and deletes its node.
        let got = acquire(&h, wait).await;
        if let Ok(Some(_)) = got {
            *hold = Some(h);
        }
        got
    }
}

impl Client {
    fn lock_kind(&self, dir: &str, kind: LockKind) -> LockBuilder {
        LockBuilder {
            client: self.clone(),
            config: LockConfig::new(dir, kind, &crate::node_id()),
        }
    }

    /// An exclusive lock on `dir` (Curator `InterProcessMutex` compatible).
    pub fn lock(&self, dir: &str) -> LockBuilder {
        self.lock_kind(dir, LockKind::Exclusive)
    }

    /// The read side of a read/write lock on `dir` (Curator `InterProcessReadWriteLock`).
    pub fn read_lock(&self, dir: &str) -> LockBuilder {
        self.lock_kind(dir, LockKind::Read)
    }

    /// The write side of a read/write lock on `dir`.
    pub fn write_lock(&self, dir: &str) -> LockBuilder {
        self.lock_kind(dir, LockKind::Write)
    }

    /// A re-entrant exclusive lock on `dir` (see [`ReentrantLock`]).
    pub fn reentrant_lock(&self, dir: &str) -> ReentrantLock {
        let mut builder = self.lock(dir);
        builder.config.reentrant = true;
        ReentrantLock {
            builder,
            hold: rt::Mutex::new(None),
        }
    }
}
