//! Blocking driver for [`zk_recipes`]: a real ZooKeeper session over TCP for plain
//! threaded code. Exactly one I/O thread per session, waiting in `mio` for the socket,
//! commands and the core's deadlines at once (a write that cannot proceed never holds
//! up reads, pings or timers); bytes read go straight into the core. Raw calls wait at
//! most the call timeout; recipe calls wait as the recipe decides (a lock's
//! `acquire_timeout(w)` returns within `w` plus one round trip, in both adapters);
//! watches arrive on channels.
//!
//! ```no_run
//! use zk_recipes_blocking::{connect, CreateOptions, Options};
//! let zk = connect("127.0.0.1:2181", Options::default())?;
//! zk.create("/config", "v1", &CreateOptions::default())?;
//! let ((data, _stat), changed) = zk.get_data_watch("/config")?;
//! zk.set_data("/config", "v2", None)?;
//! println!("{data:?} then {:?}", changed.wait()?);
//! zk.close();
//! # Ok::<(), zk_recipes_blocking::Error>(())
//! ```
//!
//! Every type this crate's calls take or return is reachable from it alone, so a
//! program needs no other crate of ours (the core is there too, as [`zk_recipes`]):
//!
//! ```
//! use zk_recipes_blocking::{
//!     Bytes, HostFailures, Master, Member, MemberConfig, NodeWatchEvent, OwnedNodeConfig,
//!     OwnedNodeEvent, RendezvousEvent, ResolveConfig, UpdateConfig, ViewConfig, ViewEvent,
//!     Worker,
//! };
//! let data: Bytes = Bytes::from_static(b"v1");
//! # let _ = data;
//! ```

mod barrier;
mod cache;
mod config;
mod driver;
mod election;
mod group;
pub mod hosted;
mod lock;
mod naming;
mod queue;
mod semaphore;
mod two_phase;
mod value;

pub use barrier::{Barrier, DoubleBarrier};
pub use cache::{CacheConfig, CacheEvent, CachedNode, TreeCacheHandle};
pub use config::{
    ConfigMode, ConfigReaderHandle, ConfigSnapshot, ReaderConfig, ReaderEvent, WriterConfig,
};
pub use election::{Candidate, ElectionBuilder, ElectionObserver};
pub use group::{GroupMemberHandle, GroupView, NodeHandle, NodeWatchHandle, RendezvousHandle};
pub use hosted::{Events, Hosted};
pub use lock::{LockBuilder, LockGuard, ReentrantLock};
pub use naming::IdGenerator;
pub use queue::{Claimed, Queue};
pub use semaphore::{Lease, LeaseState, Semaphore};
pub use two_phase::{Transaction, TransactionBuilder, TransactionSite};
pub use value::{CounterFormat, CounterHandle, CounterWatchEvent, CounterWatchHandle};
pub use zk_recipes::recipe::barrier::BarrierEvent;
pub use zk_recipes::recipe::double_barrier::DoubleBarrierEvent;
pub use zk_recipes::recipe::election::observer::{ObserverEvent, Participant};
pub use zk_recipes::recipe::election::{ElectionEvent, Leadership};
pub use zk_recipes::recipe::lock::{HoldState, LockChange, LostReason};
pub use zk_recipes::recipe::queue::Item as QueueItem;
pub use zk_recipes::recipe::two_phase::{CoordinatorEvent, Outcome, Variant, Vote, VoteOutcome};
pub use zk_recipes::recipe::Recipe;
// Every type in this crate's signatures is reachable from it alone (issue 27).
pub use bytes::Bytes;
/// The sans-IO core this adapter drives (its machines, for the `*_with` calls and for
/// recipes of your own).
pub use zk_recipes;
pub use zk_recipes::recipe::group::{Member, MemberConfig, ViewConfig, ViewEvent};
pub use zk_recipes::recipe::naming::ResolveConfig;
pub use zk_recipes::recipe::node::{NodeWatchEvent, OwnedNodeConfig, OwnedNodeEvent};
pub use zk_recipes::recipe::rendezvous::{Master, RendezvousEvent, Worker};
pub use zk_recipes::recipe::value::UpdateConfig;
pub use zk_recipes::session::HostFailures;

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

pub use zk_recipes::client::ops::CreateOptions;
use zk_recipes::client::ops::{self, Raw};
use zk_recipes::client::WatchMode;
pub use zk_recipes::client::{Error, Status};
use zk_recipes::proto::Request;
pub use zk_recipes::proto::{
    perms, Acl, AddWatchMode, ClientInfo, CreateMode, ErrorCode, EventType, Id, MultiOp,
    MultiResult, ReadOp, Stat, WatcherType,
};
use zk_recipes::recipe::lock::Revoke;
use zk_recipes::recipe::path::{CreateAll, CreateAllEvent, DeleteAll};
pub use zk_recipes::session::{Counters, WatchEvent};

use driver::{Input, Inputs, ReplyTx, Routed, Shared, StatusTx, WatchTx};

/// Connection options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Requested session timeout (default 30 s).
    pub session_timeout: Duration,
    /// How long [`connect`] keeps trying every host for the first session (default
    /// 30 s), as Curator's `blockUntilConnected` and kazoo's `start(timeout)` do: a
    /// server that is still starting (it closes connections, or accepts and does not
    /// answer) is tried again with backoff until then.
    pub connect_timeout: Duration,
    /// Give up [`connect`] as soon as every host has failed once, with the reasons,
    /// instead of trying until `connect_timeout` (default off).
    pub fail_fast: bool,
    /// How long each call waits for its reply (default 30 s).
    pub call_timeout: Duration,
    /// Accept read-only servers.
    pub read_only: bool,
    /// Seed for host order and jitter; default: random.
    pub seed: Option<u64>,
    /// Start a new session by itself after an expiry (default on, as Curator and kazoo
    /// do); off: `Expired` ends the client.
    pub renew_on_expiry: bool,
    /// Cap on requests in flight plus requests queued in the session (default
    /// 10,000); beyond it a call fails with [`Error::Overloaded`] (never applied;
    /// recipes back off and retry by themselves).
    pub max_pending: usize,
    /// Cap on requests on the wire awaiting their reply (default 512); later ones wait
    /// in the session's queue, in order, so one client with thousands of waiters does
    /// not trip the server's throttle.
    pub max_in_flight: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            session_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
            fail_fast: false,
            call_timeout: Duration::from_secs(30),
            read_only: false,
            seed: None,
            renew_on_expiry: true,
            max_pending: 10_000,
            max_in_flight: zk_recipes::session::DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

impl Options {
    /// Sets the session timeout.
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.session_timeout = t;
        self
    }

    /// Sets how long [`connect`] keeps trying for the first session.
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }

    /// Makes [`connect`] fail once every host has failed once (see
    /// [`Options::fail_fast`]).
    pub fn fail_fast(mut self, fail_fast: bool) -> Self {
        self.fail_fast = fail_fast;
        self
    }

    /// Sets how long each raw call waits for its reply.
    pub fn call_timeout(mut self, t: Duration) -> Self {
        self.call_timeout = t;
        self
    }

    /// Accept read-only servers.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Sets the seed for host order and jitter.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Start a new session after an expiry, or not.
    pub fn renew_on_expiry(mut self, renew: bool) -> Self {
        self.renew_on_expiry = renew;
        self
    }

    /// Sets the cap on requests pending in the session (in flight plus queued).
    pub fn max_pending(mut self, n: usize) -> Self {
        self.max_pending = n;
        self
    }

    /// Sets the cap on requests on the wire awaiting their reply.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }
}

pub(crate) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Connects and waits for a session, trying every host with backoff until
/// `options.connect_timeout`. Fails then with [`Error::Unreachable`], naming every host
/// and what happened to it last (refused, reset, closed before the handshake, not a
/// ZooKeeper server, no handshake answer, ...), or [`Error::Timeout`] if some host was
/// not tried to the end; with `options.fail_fast`, as soon as every host has failed
/// once.
pub fn connect(connect_string: &str, options: Options) -> Result<Client, Error> {
    let core_options = zk_recipes::client::Options::new(connect_string)?
        .session_timeout(options.session_timeout)
        .read_only(options.read_only)
        .renew_on_expiry(options.renew_on_expiry)
        .max_pending(options.max_pending)
        .max_in_flight(options.max_in_flight)
        .seed(options.seed.unwrap_or_else(random_seed));
    let core = zk_recipes::client::Client::new(core_options, zk_recipes::time::Instant::ZERO);
    let (inputs, io) = driver::channel().map_err(|_| Error::Closed)?;
    let shared = Arc::new(Shared::new());
    let driver_shared = shared.clone();
    thread::Builder::new()
        .name("zk-session".into())
        .spawn(move || driver::run(core, io, driver_shared))
        .map_err(|_| Error::Closed)?;
    let client = Client {
        inner: Arc::new(Inner { inputs, shared }),
        call_timeout: options.call_timeout,
    };
    let deadline = Instant::now() + options.connect_timeout;
    let mut state = client
        .inner
        .shared
        .state
        .lock()
        .map_err(|_| Error::Closed)?;
    loop {
        // A session exists (it may already be suspended again: still a session).
        if state.status.is_connected() || (state.session_id != 0 && !state.status.is_terminal()) {
            return Ok(client.clone());
        }
        if let Some(hosts) = state.unreachable.as_ref().filter(|_| options.fail_fast) {
            return Err(Error::Unreachable(hosts.clone()));
        }
        if state.status.is_terminal() || state.stopped {
            return Err(match &state.unreachable {
                Some(hosts) => Error::Unreachable(hosts.clone()),
                None => state.status.error(),
            });
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Err(match &state.unreachable {
                Some(hosts) => Error::Unreachable(hosts.clone()),
                None => Error::Timeout,
            });
        };
        state = client
            .inner
            .shared
            .changed
            .wait_timeout(state, left)
            .map_err(|_| Error::Closed)?
            .0;
    }
}

pub(crate) struct Inner {
    pub(crate) inputs: Inputs,
    shared: Arc<Shared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: close the session.
        let _ = self.inputs.send(Input::Shutdown);
    }
}

/// A handle to one session; clone it to share it between threads.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
    pub(crate) call_timeout: Duration,
}

/// Every status change of a session, in order.
#[derive(Debug)]
pub struct StatusStream(Receiver<Status>);

impl StatusStream {
    /// The next status; `None` once the client has ended.
    pub fn next(&self) -> Option<Status> {
        self.0.recv().ok()
    }

    /// The next status within `timeout`.
    pub fn next_timeout(&self, timeout: Duration) -> Result<Status, Error> {
        self.0.recv_timeout(timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => Error::Timeout,
            RecvTimeoutError::Disconnected => Error::Closed,
        })
    }
}

/// A one-shot watch.
#[derive(Debug)]
pub struct Watch(Receiver<WatchEvent>);

impl Watch {
    /// Waits for the event.
    pub fn wait(&self) -> Result<WatchEvent, Error> {
        self.0.recv().map_err(|_| Error::WatchEnded)
    }
    /// Waits for the event at most `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<WatchEvent, Error> {
        self.0.recv_timeout(timeout).map_err(watch_error)
    }
}

/// Events of a persistent (recursive) watch.
#[derive(Debug)]
pub struct WatchStream(Receiver<WatchEvent>);

impl WatchStream {
    /// The next event; `None` once the watch is removed or the session ended.
    pub fn next(&self) -> Option<WatchEvent> {
        self.0.recv().ok()
    }
    /// The next event within `timeout`.
    pub fn next_timeout(&self, timeout: Duration) -> Result<WatchEvent, Error> {
        self.0.recv_timeout(timeout).map_err(watch_error)
    }
}

fn watch_error(e: RecvTimeoutError) -> Error {
    match e {
        RecvTimeoutError::Timeout => Error::Timeout,
        RecvTimeoutError::Disconnected => Error::WatchEnded,
    }
}

impl Client {
    /// A handle whose calls wait at most `timeout` for their reply.
    pub fn with_call_timeout(&self, timeout: Duration) -> Client {
        Client {
            inner: self.inner.clone(),
            call_timeout: timeout,
        }
    }

    /// The current session status.
    pub fn status(&self) -> Status {
        self.inner
            .shared
            .state
            .lock()
            .map(|s| s.status)
            .unwrap_or(Status::Closed)
    }

    /// Every status change from now on, none dropped (the current status first). The
    /// stream ends when the client does.
    pub fn status_stream(&self) -> StatusStream {
        let (tx, rx) = mpsc::channel();
        let _ = self
            .inner
            .inputs
            .send(Input::Route(Routed::Statuses(StatusTx(tx))));
        StatusStream(rx)
    }

    /// Waits up to `timeout` for a status that satisfies `done`; returns it, or `None`.
    pub fn wait_status(&self, timeout: Duration, done: impl Fn(Status) -> bool) -> Option<Status> {
        let deadline = Instant::now() + timeout;
        let mut state = self.inner.shared.state.lock().ok()?;
        loop {
            let s = state.status;
            if done(s) {
                return Some(s);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            state = self.inner.shared.changed.wait_timeout(state, left).ok()?.0;
        }
    }

    /// The session id (0 until the first session is established).
    pub fn session_id(&self) -> i64 {
        self.inner
            .shared
            .state
            .lock()
            .map(|s| s.session_id)
            .unwrap_or(0)
    }

    /// The session password.
    pub fn session_password(&self) -> Vec<u8> {
        self.inner
            .shared
            .state
            .lock()
            .map(|s| s.password.clone())
            .unwrap_or_default()
    }

    pub(crate) fn dead(&self) -> Error {
        let s = self.status();
        if s.is_terminal() {
            s.error()
        } else {
            Error::Closed
        }
    }

    fn raw(&self, request: Request, watch: Option<WatchTx>) -> Raw {
        let (tx, rx) = mpsc::sync_channel(1);
        self.inner
            .inputs
            .send(Input::Route(Routed::Submit {
                request,
                reply: ReplyTx(tx),
                watch: watch.map(|w| {
                    let mode = w.1;
                    (w, mode)
                }),
            }))
            .map_err(|_| self.dead())?;
        match rx.recv_timeout(self.call_timeout) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(self.dead()),
        }
    }

    fn call<T>(&self, request: Request, read: fn(Raw) -> Result<T, Error>) -> Result<T, Error> {
        read(self.raw(request, None))
    }

    fn call_watch<T>(
        &self,
        request: Request,
        read: fn(Raw) -> Result<T, Error>,
    ) -> Result<(T, Watch), Error> {
        let (tx, rx) = mpsc::channel();
        let value = read(self.raw(request, Some(WatchTx(tx, WatchMode::Once))))?;
        Ok((value, Watch(rx)))
    }

    /// Creates a node; returns its final path.
    pub fn create(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        opts: &CreateOptions,
    ) -> Result<String, Error> {
        self.call(ops::create(path, data.into(), opts), ops::read_path)
    }

    /// Creates a node; returns its final path and Stat.
    pub fn create2(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        opts: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        self.call(ops::create2(path, data.into(), opts), ops::read_path_stat)
    }

    /// Deletes a node (`None` = any version).
    pub fn delete(&self, path: &str, version: Option<i32>) -> Result<(), Error> {
        self.call(ops::delete(path, version), ops::read_unit)
    }

    /// The node's Stat, or `None`.
    pub fn exists(&self, path: &str) -> Result<Option<Stat>, Error> {
        self.call(ops::exists(path, false), ops::read_exists)
    }

    /// Like `exists`, leaving a watch (set even when the node is missing).
    pub fn exists_watch(&self, path: &str) -> Result<(Option<Stat>, Watch), Error> {
        self.call_watch(ops::exists(path, true), ops::read_exists)
    }

    /// Data and Stat.
    pub fn get_data(&self, path: &str) -> Result<(Bytes, Stat), Error> {
        self.call(ops::get_data(path, false), ops::read_data)
    }

    /// Like `get_data`, leaving a watch.
    pub fn get_data_watch(&self, path: &str) -> Result<((Bytes, Stat), Watch), Error> {
        self.call_watch(ops::get_data(path, true), ops::read_data)
    }

    /// Replaces the data (`None` = any version).
    pub fn set_data(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        self.call(ops::set_data(path, data.into(), version), ops::read_stat)
    }

    /// Child names.
    pub fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        self.call(ops::get_children(path, false), ops::read_children)
    }

    /// Like `get_children`, leaving a watch.
    pub fn get_children_watch(&self, path: &str) -> Result<(Vec<String>, Watch), Error> {
        self.call_watch(ops::get_children(path, true), ops::read_children)
    }

    /// Child names and the parent's Stat.
    pub fn get_children2(&self, path: &str) -> Result<(Vec<String>, Stat), Error> {
        self.call(ops::get_children2(path, false), ops::read_children2)
    }

    /// ACL and Stat.
    pub fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat), Error> {
        self.call(ops::get_acl(path), ops::read_acl)
    }

    /// Replaces the ACL (`None` = any ACL version).
    pub fn set_acl(&self, path: &str, acl: Vec<Acl>, version: Option<i32>) -> Result<Stat, Error> {
        self.call(ops::set_acl(path, acl, version), ops::read_stat)
    }

    /// sync.
    pub fn sync(&self, path: &str) -> Result<String, Error> {
        self.call(ops::sync(path), ops::read_path)
    }

    /// Atomic transaction: one result per op (error results if it failed).
    pub fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiResult>, Error> {
        self.call(Request::Multi(ops), ops::read_multi)
    }

    /// Batch of reads.
    pub fn multi_read(&self, ops: Vec<ReadOp>) -> Result<Vec<MultiResult>, Error> {
        self.call(Request::MultiRead(ops), ops::read_multi)
    }

    /// Adds a persistent (recursive) watch.
    pub fn add_watch(&self, path: &str, mode: AddWatchMode) -> Result<WatchStream, Error> {
        let (tx, rx) = mpsc::channel();
        ops::read_unit(self.raw(
            ops::add_watch(path, mode),
            Some(WatchTx(tx, WatchMode::Persistent)),
        ))?;
        Ok(WatchStream(rx))
    }

    /// Removes this session's watches of a kind on a path.
    pub fn remove_watches(&self, path: &str, which: WatcherType) -> Result<(), Error> {
        self.call(ops::remove_watches(path, which), ops::read_unit)
    }

    /// This session's ephemerals under a prefix.
    pub fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>, Error> {
        self.call(ops::get_ephemerals(prefix), ops::read_children)
    }

    /// Number of all descendants.
    pub fn get_all_children_number(&self, path: &str) -> Result<i32, Error> {
        self.call(ops::get_all_children_number(path), ops::read_count)
    }

    /// Identities of this connection.
    pub fn who_am_i(&self) -> Result<Vec<ClientInfo>, Error> {
        self.call(Request::WhoAmI, ops::read_who_am_i)
    }

    /// Adds credentials; replayed on reconnect.
    pub fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<(), Error> {
        self.call(ops::add_auth(scheme, auth), ops::read_unit)
    }

    /// Creates `path` and any missing parents (persistent, same ACL) in one round
    /// trip; returns the final path. An ancestor that cannot be created is named in
    /// [`Error::NoParent`] (or [`Error::ChrootMissing`]).
    pub fn create_all(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        opts: &CreateOptions,
    ) -> Result<String, Error> {
        let recipe = CreateAll::new(path, data.into(), opts.clone());
        let (hold, mut events) = self.host(recipe)?;
        hold.run(|r, now| r.start(now))?;
        match events.next() {
            Some(CreateAllEvent::Created { path, .. }) => Ok(path),
            Some(CreateAllEvent::Failed(e)) => Err(e),
            None => Err(self.dead()),
        }
    }

    /// Deletes `path` and everything below it.
    pub fn delete_all(&self, path: &str) -> Result<(), Error> {
        let (hold, mut events) = self.host(DeleteAll::new(path))?;
        hold.run(|r, now| r.start(now))?;
        events.next().unwrap_or_else(|| Err(self.dead()))
    }

    /// Asks the holder of lock node `node` (a full path) to release by writing
    /// `unlock` into it; with `force_after`, deletes the node if it still exists after
    /// that grace period (its holder then sees `Lost`).
    pub fn revoke(&self, node: &str, force_after: Option<Duration>) -> Result<(), Error> {
        let (hold, mut events) = self.host(Revoke::new(node, force_after))?;
        hold.run(|r, now| r.start(now))?;
        events.next().unwrap_or_else(|| Err(self.dead()))
    }

    /// What the session has sent and received so far (requests, bytes), counted by the
    /// core session across reconnects.
    pub fn counters(&self) -> Result<Counters, Error> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.inner
            .inputs
            .send(Input::Counters(tx))
            .map_err(|_| Error::Closed)?;
        rx.recv().map_err(|_| Error::Closed)
    }

    /// Closes the session, waiting up to 5 s for the server.
    pub fn close(&self) {
        let (tx, rx) = mpsc::sync_channel(1);
        if self
            .inner
            .inputs
            .send(Input::Close {
                timeout: Duration::from_secs(5),
                done: tx,
            })
            .is_ok()
        {
            let _ = rx.recv_timeout(Duration::from_secs(10));
        }
    }
}

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
