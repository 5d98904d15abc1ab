//! One scenario, both adapters: a small trait over what the scenarios need, implemented
//! by the blocking adapter directly and by the tokio adapter on a shared runtime. The
//! scenarios (in the test files that include this module) are written once.
#![allow(dead_code)]
// A driver owns the clock.
#![allow(clippy::disallowed_methods)]

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use zk_recipes::client::{Error, Status};
use zk_recipes::recipe::lock::{HoldState, LockChange};
use zk_recipes::recipe::Recipe;

pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// A held lock (one level), either adapter's.
pub trait Guard: Send {
    fn token(&self) -> i64;
    fn node(&self) -> String;
    fn is_held(&mut self) -> bool;
    fn status(&mut self) -> HoldState;
    fn revocation_requested(&mut self) -> bool;
    fn changed(&mut self, within: Duration) -> Option<LockChange>;
    fn release(self: Box<Self>) -> Result<(), Error>;
}

/// A re-entrant lock handle, either adapter's.
pub trait Reentrant: Send + Sync {
    fn acquire(&self) -> Result<Box<dyn Guard>, Error>;
    fn depth(&self) -> u32;
}

/// What the scenarios do with a client.
pub trait Zk: Clone + Send + Sync + 'static {
    const NAME: &'static str;
    fn connect_with(cs: &str, session: Duration, renew: bool) -> Result<Self, Error> {
        Self::connect_within(cs, session, renew, Duration::from_secs(10), false)
    }
    /// `connect_with`, trying for `connect_timeout` (or failing fast).
    fn connect_within(
        cs: &str,
        session: Duration,
        renew: bool,
        connect_timeout: Duration,
        fail_fast: bool,
    ) -> Result<Self, Error>;
    fn connect(cs: &str) -> Result<Self, Error> {
        Self::connect_with(cs, Duration::from_secs(6), true)
    }
    fn status(&self) -> Status;
    /// Waits for a status satisfying `done`, every transition seen.
    fn wait_status(&self, within: Duration, done: fn(&Status) -> bool) -> Option<Status>;
    fn session_id(&self) -> i64;
    fn session_password(&self) -> Vec<u8>;
    fn counters(&self) -> Result<zk_recipes::session::Counters, Error>;
    fn lock(&self, dir: &str, revocable: bool) -> Result<Box<dyn Guard>, Error>;
    /// A lock without the own-node watch (its waiters watch their blocker's data).
    fn lock_unwatched(&self, dir: &str) -> Result<Box<dyn Guard>, Error>;
    fn lock_timeout(&self, dir: &str, wait: Duration) -> Result<Option<Box<dyn Guard>>, Error>;
    fn try_lock(&self, dir: &str) -> Result<Option<Box<dyn Guard>>, Error>;
    fn reentrant(&self, dir: &str) -> Box<dyn Reentrant>;
    fn revoke(&self, node: &str, force_after: Option<Duration>) -> Result<(), Error>;
    fn create_all(&self, path: &str, data: &'static str) -> Result<String, Error>;
    fn delete_all(&self, path: &str) -> Result<(), Error>;
    fn get_children(&self, path: &str) -> Result<Vec<String>, Error>;
    fn exists(&self, path: &str) -> Result<bool, Error>;
    fn delete(&self, path: &str) -> Result<(), Error>;
    fn get_data(&self, path: &str) -> Result<Bytes, Error>;
    /// Starts a setData without waiting for it (on a thread or a task).
    fn fire_set_data(&self, path: &str, data: Bytes);
    /// Hosts any recipe and returns its first event (within `within`).
    fn host_first_event<R: Recipe>(
        &self,
        recipe: R,
        start: fn(&mut R, zk_recipes::time::Instant),
        within: Duration,
    ) -> Option<R::Event>;
    fn close(&self);
}

// ----- blocking -----

use zk_recipes_blocking as zb;

struct BGuard(zb::LockGuard);

impl Guard for BGuard {
    fn token(&self) -> i64 {
        self.0.fencing_token()
    }
    fn node(&self) -> String {
        self.0.node().to_string()
    }
    fn is_held(&mut self) -> bool {
        self.0.is_held()
    }
    fn status(&mut self) -> HoldState {
        self.0.status()
    }
    fn revocation_requested(&mut self) -> bool {
        self.0.revocation_requested()
    }
    fn changed(&mut self, within: Duration) -> Option<LockChange> {
        self.0.changed_timeout(within)
    }
    fn release(self: Box<Self>) -> Result<(), Error> {
        self.0.release()
    }
}

fn boxed_b(g: zb::LockGuard) -> Box<dyn Guard> {
    Box::new(BGuard(g))
}

impl Reentrant for zb::ReentrantLock {
    fn acquire(&self) -> Result<Box<dyn Guard>, Error> {
        zb::ReentrantLock::acquire(self).map(boxed_b)
    }
    fn depth(&self) -> u32 {
        zb::ReentrantLock::depth(self)
    }
}

impl Zk for zb::Client {
    const NAME: &'static str = "blocking";
    fn connect_within(
        cs: &str,
        session: Duration,
        renew: bool,
        connect_timeout: Duration,
        fail_fast: bool,
    ) -> Result<Self, Error> {
        // A short call timeout: raw calls answer fast; recipe waits must not use it.
        zb::connect(
            cs,
            zb::Options::default()
                .session_timeout(session)
                .renew_on_expiry(renew)
                .connect_timeout(connect_timeout)
                .fail_fast(fail_fast)
                .call_timeout(Duration::from_secs(1)),
        )
    }
    fn status(&self) -> Status {
        zb::Client::status(self)
    }
    fn wait_status(&self, within: Duration, done: fn(&Status) -> bool) -> Option<Status> {
        let mut s = self.status_stream();
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            match s.next_timeout(left) {
                Ok(st) if done(&st) => return Some(st),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
    fn session_id(&self) -> i64 {
        zb::Client::session_id(self)
    }
    fn session_password(&self) -> Vec<u8> {
        zb::Client::session_password(self)
    }
    fn counters(&self) -> Result<zk_recipes::session::Counters, Error> {
        zb::Client::counters(self)
    }
    fn lock(&self, dir: &str, revocable: bool) -> Result<Box<dyn Guard>, Error> {
        let b = zb::Client::lock(self, dir);
        let b = if revocable { b.revocable() } else { b };
        b.acquire().map(boxed_b)
    }
    fn lock_unwatched(&self, dir: &str) -> Result<Box<dyn Guard>, Error> {
        zb::Client::lock(self, dir)
            .without_own_node_watch()
            .acquire()
            .map(boxed_b)
    }
    fn lock_timeout(&self, dir: &str, wait: Duration) -> Result<Option<Box<dyn Guard>>, Error> {
        Ok(zb::Client::lock(self, dir)
            .acquire_timeout(wait)?
            .map(boxed_b))
    }
    fn try_lock(&self, dir: &str) -> Result<Option<Box<dyn Guard>>, Error> {
        Ok(zb::Client::lock(self, dir).try_acquire()?.map(boxed_b))
    }
    fn reentrant(&self, dir: &str) -> Box<dyn Reentrant> {
        Box::new(self.reentrant_lock(dir))
    }
    fn revoke(&self, node: &str, force_after: Option<Duration>) -> Result<(), Error> {
        zb::Client::revoke(self, node, force_after)
    }
    fn create_all(&self, path: &str, data: &'static str) -> Result<String, Error> {
        zb::Client::create_all(self, path, data, &zb::CreateOptions::default())
    }
    fn delete_all(&self, path: &str) -> Result<(), Error> {
        zb::Client::delete_all(self, path)
    }
    fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        zb::Client::get_children(self, path)
    }
    fn exists(&self, path: &str) -> Result<bool, Error> {
        Ok(zb::Client::exists(self, path)?.is_some())
    }
    fn delete(&self, path: &str) -> Result<(), Error> {
        zb::Client::delete(self, path, None)
    }
    fn get_data(&self, path: &str) -> Result<Bytes, Error> {
        Ok(zb::Client::get_data(self, path)?.0)
    }
    fn fire_set_data(&self, path: &str, data: Bytes) {
        let (zk, path) = (self.clone(), path.to_string());
        std::thread::spawn(move || zk.set_data(&path, data, None));
    }
    fn host_first_event<R: Recipe>(
        &self,
        recipe: R,
        start: fn(&mut R, zk_recipes::time::Instant),
        within: Duration,
    ) -> Option<R::Event> {
        let (hold, mut events) = self.host(recipe).ok()?;
        hold.run(start).ok()?;
        events.next_timeout(within).ok().flatten()
    }
    fn close(&self) {
        zb::Client::close(self)
    }
}

// ----- tokio -----

use zk_recipes_tokio as zt;

struct TGuard(Option<zt::LockGuard>);

impl Guard for TGuard {
    fn token(&self) -> i64 {
        self.0.as_ref().map(|g| g.fencing_token()).unwrap_or(0)
    }
    fn node(&self) -> String {
        self.0
            .as_ref()
            .map(|g| g.node().to_string())
            .unwrap_or_default()
    }
    fn is_held(&mut self) -> bool {
        self.0.as_mut().is_some_and(|g| g.is_held())
    }
    fn status(&mut self) -> HoldState {
        self.0
            .as_mut()
            .map(|g| g.status())
            .unwrap_or(HoldState::Ended)
    }
    fn revocation_requested(&mut self) -> bool {
        self.0.as_mut().is_some_and(|g| g.revocation_requested())
    }
    fn changed(&mut self, within: Duration) -> Option<LockChange> {
        let g = self.0.as_mut()?;
        runtime().block_on(async { tokio::time::timeout(within, g.changed()).await.ok() })
    }
    fn release(mut self: Box<Self>) -> Result<(), Error> {
        let g = self.0.take().ok_or(Error::Finished)?;
        runtime().block_on(g.release())
    }
}

impl Drop for TGuard {
    fn drop(&mut self) {
        // Dropped on a plain thread, outside any runtime: must not panic.
        drop(self.0.take());
    }
}

fn boxed_t(g: zt::LockGuard) -> Box<dyn Guard> {
    Box::new(TGuard(Some(g)))
}

impl Reentrant for zt::ReentrantLock {
    fn acquire(&self) -> Result<Box<dyn Guard>, Error> {
        runtime()
            .block_on(zt::ReentrantLock::acquire(self))
            .map(boxed_t)
    }
    fn depth(&self) -> u32 {
        runtime().block_on(zt::ReentrantLock::depth(self))
    }
}

impl Zk for zt::Client {
    const NAME: &'static str = "tokio";
    fn connect_within(
        cs: &str,
        session: Duration,
        renew: bool,
        connect_timeout: Duration,
        fail_fast: bool,
    ) -> Result<Self, Error> {
        runtime().block_on(zt::connect(
            cs,
            zt::Options::default()
                .session_timeout(session)
                .renew_on_expiry(renew)
                .connect_timeout(connect_timeout)
                .fail_fast(fail_fast),
        ))
    }
    fn status(&self) -> Status {
        zt::Client::status(self)
    }
    fn wait_status(&self, within: Duration, done: fn(&Status) -> bool) -> Option<Status> {
        let mut s = self.status_stream();
        runtime().block_on(async {
            tokio::time::timeout(within, s.wait_for(done))
                .await
                .ok()
                .flatten()
        })
    }
    fn session_id(&self) -> i64 {
        zt::Client::session_id(self)
    }
    fn session_password(&self) -> Vec<u8> {
        zt::Client::session_password(self)
    }
    fn counters(&self) -> Result<zk_recipes::session::Counters, Error> {
        runtime().block_on(zt::Client::counters(self))
    }
    fn lock(&self, dir: &str, revocable: bool) -> Result<Box<dyn Guard>, Error> {
        let b = zt::Client::lock(self, dir);
        let b = if revocable { b.revocable() } else { b };
        runtime().block_on(b.acquire()).map(boxed_t)
    }
    fn lock_unwatched(&self, dir: &str) -> Result<Box<dyn Guard>, Error> {
        runtime()
            .block_on(
                zt::Client::lock(self, dir)
                    .without_own_node_watch()
                    .acquire(),
            )
            .map(boxed_t)
    }
    fn lock_timeout(&self, dir: &str, wait: Duration) -> Result<Option<Box<dyn Guard>>, Error> {
        Ok(runtime()
            .block_on(zt::Client::lock(self, dir).acquire_timeout(wait))?
            .map(boxed_t))
    }
    fn try_lock(&self, dir: &str) -> Result<Option<Box<dyn Guard>>, Error> {
        Ok(runtime()
            .block_on(zt::Client::lock(self, dir).try_acquire())?
            .map(boxed_t))
    }
    fn reentrant(&self, dir: &str) -> Box<dyn Reentrant> {
        Box::new(self.reentrant_lock(dir))
    }
    fn revoke(&self, node: &str, force_after: Option<Duration>) -> Result<(), Error> {
        runtime().block_on(zt::Client::revoke(self, node, force_after))
    }
    fn create_all(&self, path: &str, data: &'static str) -> Result<String, Error> {
        runtime().block_on(zt::Client::create_all(
            self,
            path,
            data,
            &zt::CreateOptions::default(),
        ))
    }
    fn delete_all(&self, path: &str) -> Result<(), Error> {
        runtime().block_on(zt::Client::delete_all(self, path))
    }
    fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        runtime().block_on(zt::Client::get_children(self, path))
    }
    fn exists(&self, path: &str) -> Result<bool, Error> {
        Ok(runtime()
            .block_on(zt::Client::exists(self, path))?
            .is_some())
    }
    fn delete(&self, path: &str) -> Result<(), Error> {
        runtime().block_on(zt::Client::delete(self, path, None))
    }
    fn get_data(&self, path: &str) -> Result<Bytes, Error> {
        Ok(runtime().block_on(zt::Client::get_data(self, path))?.0)
    }
    fn fire_set_data(&self, path: &str, data: Bytes) {
        let (zk, path) = (self.clone(), path.to_string());
        runtime().spawn(async move { zk.set_data(&path, data, None).await });
    }
    fn host_first_event<R: Recipe>(
        &self,
        recipe: R,
        start: fn(&mut R, zk_recipes::time::Instant),
        within: Duration,
    ) -> Option<R::Event> {
        let (hold, mut events) = self.host(recipe).ok()?;
        hold.run(start).ok()?;
        runtime().block_on(async { tokio::time::timeout(within, events.next()).await.ok()? })
    }
    fn close(&self) {
        runtime().block_on(zt::Client::close(self))
    }
}
