//! tokio driver for [`zk_recipes`]: a real ZooKeeper session over TCP, with the whole
//! raw API as async methods.
//!
//! One driver task per session owns the sans-IO core, the socket and the timer; a
//! [`Client`] is a cheap, cloneable, `Send + Sync` handle to it. Dropping any future is
//! safe: the session is not affected, the reply is simply discarded. A recipe call
//! dropped midway (a timeout, a `select!`) leaves nothing behind: a lock or
//! re-entrant lock attempt, a double barrier `enter` is abandoned and its node deleted;
//! a queue `take` is given up, and the items it had already taken go to the next
//! `take`; a counter operation still applies once, and its answer is not taken for the
//! next call's. (A dropped `NodeHandle::set_data` still writes; the next one may report
//! the earlier write's Stat.) When the last handle drops, the session is closed.
//!
//! ```no_run
//! # async fn demo() -> Result<(), zk_recipes_tokio::Error> {
//! use zk_recipes_tokio::{connect, CreateOptions, Options};
//! let zk = connect("127.0.0.1:2181/app", Options::default()).await?;
//! zk.create("/config", "v1", &CreateOptions::default()).await?;
//! let ((data, stat), changed) = zk.get_data_watch("/config").await?;
//! println!("{:?} at version {}", data, stat.version);
//! zk.set_data("/config", "v2", None).await?;
//! println!("watch fired: {:?}", changed.await?);
//! zk.close().await;
//! # Ok(()) }
//! ```
//!
//! Every type this crate's calls take or return is reachable from it alone, so a
//! program needs no other crate of ours (the core is there too, as [`zk_recipes`]):
//!
//! ```
//! use zk_recipes_tokio::{
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

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
pub use zk_recipes::client::ops::CreateOptions;
use zk_recipes::client::ops::{self, Raw};
pub use zk_recipes::client::{Error, Status};
use zk_recipes::proto::Request;
pub use zk_recipes::proto::{perms, Acl, ErrorCode, Id};
pub use zk_recipes::proto::{
    AddWatchMode, ClientInfo, CreateMode, EventType, MultiOp, MultiResult, ReadOp, Stat,
    WatcherType,
};
use zk_recipes::recipe::lock::Revoke;
use zk_recipes::recipe::path::{CreateAll, CreateAllEvent, DeleteAll};
pub use zk_recipes::session::{Counters, WatchEvent};

use driver::{Command, Published, ReplyTx, Routed, StatusTx, WatchTx};

/// Connection options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Requested session timeout (the server clamps it; default 30 s).
    pub session_timeout: Duration,
    /// How long [`connect`] keeps trying every host for the first session (default
    /// 30 s), as Curator's `blockUntilConnected` and kazoo's `start(timeout)` do: a
    /// server that is still starting (it closes connections, or accepts and does not
    /// answer) is tried again with backoff until then.
    pub connect_timeout: Duration,
    /// Give up [`connect`] as soon as every host has failed once, with the reasons,
    /// instead of trying until `connect_timeout` (default off).
    pub fail_fast: bool,
    /// Accept read-only servers.
    pub read_only: bool,
    /// Seed for host order and jitter; default: random per client.
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

/// Entropy for the session's seed, from std's per-process random hasher keys.
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
///
/// How long calls wait: a request in flight ends with `ConnectionLoss` once the
/// connection is declared dead (no complete frame for 2/3 of the session timeout); one
/// waiting for a connection ends when the session is back or expired (the session
/// timeout at most). Bound a single call further with `tokio::time::timeout`.
pub async fn connect(connect_string: &str, options: Options) -> Result<Client, Error> {
    let core_options = zk_recipes::client::Options::new(connect_string)?
        .session_timeout(options.session_timeout)
        .read_only(options.read_only)
        .renew_on_expiry(options.renew_on_expiry)
        .max_pending(options.max_pending)
        .max_in_flight(options.max_in_flight)
        .seed(options.seed.unwrap_or_else(random_seed));
    let core = zk_recipes::client::Client::new(core_options, zk_recipes::time::Instant::ZERO);
    let (tx, rx) = mpsc::unbounded_channel();
    let (published_tx, mut published) = watch::channel(Published {
        status: Status::Connecting,
        session_id: 0,
        password: Vec::new(),
        unreachable: None,
    });
    tokio::spawn(driver::run(core, rx, published_tx));
    let client = Client {
        commands: tx,
        published: published.clone(),
    };
    let fail_fast = options.fail_fast;
    let wait = async {
        published
            .wait_for(|p| p.status != Status::Connecting || (fail_fast && p.unreachable.is_some()))
            .await
            .map(|p| p.clone())
    };
    match tokio::time::timeout(options.connect_timeout, wait).await {
        // A session exists (it may already be suspended again: still a session).
        Ok(Ok(p)) if p.status.is_connected() || p.session_id != 0 => Ok(client),
        Ok(Ok(p)) => Err(match p.unreachable {
            Some(hosts) => Error::Unreachable(hosts),
            None => p.status.error(),
        }),
        Ok(Err(_)) => Err(Error::Closed),
        Err(_) => Err(match published.borrow().unreachable.clone() {
            Some(hosts) => Error::Unreachable(hosts),
            None => Error::Timeout,
        }),
    }
}

/// A handle to one ZooKeeper session. Clone it freely.
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) commands: mpsc::UnboundedSender<Command>,
    published: watch::Receiver<Published>,
}

/// A one-shot watch: resolves with the event that fired it.
#[derive(Debug)]
pub struct Watch(oneshot::Receiver<WatchEvent>);

impl Future for Watch {
    type Output = Result<WatchEvent, Error>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map_err(|_| Error::WatchEnded))
    }
}

/// Every status change of a session, in order.
#[derive(Debug)]
pub struct StatusStream(mpsc::UnboundedReceiver<Status>);

impl StatusStream {
    /// The next status; `None` once the client has ended.
    pub async fn next(&mut self) -> Option<Status> {
        self.0.recv().await
    }

    /// The first status from here on that satisfies `done`; `None` if the client ended
    /// first.
    pub async fn wait_for(&mut self, done: impl Fn(&Status) -> bool) -> Option<Status> {
        loop {
            let s = self.next().await?;
            if done(&s) {
                return Some(s);
            }
        }
    }
}

/// Events of a persistent (recursive) watch, until removed or the session ends.
#[derive(Debug)]
pub struct WatchStream(mpsc::UnboundedReceiver<WatchEvent>);

impl WatchStream {
    /// The next event; `None` once the watch is removed or the session ended.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        self.0.recv().await
    }
}

impl Client {
    /// The current session status.
    pub fn status(&self) -> Status {
        self.published.borrow().status
    }

    /// Every status change from now on, none dropped (the current status first). The
    /// stream ends when the client does.
    pub fn status_stream(&self) -> StatusStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = self
            .commands
            .send(Command::Route(Routed::Statuses(StatusTx(tx))));
        StatusStream(rx)
    }

    /// The session id (0 until the first session is established).
    pub fn session_id(&self) -> i64 {
        self.published.borrow().session_id
    }

    /// The session password (with [`session_id`](Self::session_id), enough to resume
    /// the session from another process — or to end it, as tests do).
    pub fn session_password(&self) -> Vec<u8> {
        self.published.borrow().password.clone()
    }

    pub(crate) fn dead(&self) -> Error {
        let s = self.status();
        if s.is_terminal() {
            s.error()
        } else {
            Error::Closed
        }
    }

    async fn raw(&self, request: Request, watch: Option<WatchTx>) -> Raw {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Route(Routed::Submit {
                request,
                reply: ReplyTx(Some(tx)),
                watch: watch.map(|w| {
                    let mode = w.mode();
                    (w, mode)
                }),
            }))
            .map_err(|_| self.dead())?;
        rx.await.map_err(|_| self.dead())?
    }

    async fn call<T>(
        &self,
        request: Request,
        read: fn(Raw) -> Result<T, Error>,
    ) -> Result<T, Error> {
        read(self.raw(request, None).await)
    }

    async fn call_watch<T>(
        &self,
        request: Request,
        read: fn(Raw) -> Result<T, Error>,
    ) -> Result<(T, Watch), Error> {
        let (tx, rx) = oneshot::channel();
        let value = read(self.raw(request, Some(WatchTx::Once(Some(tx)))).await)?;
        Ok((value, Watch(rx)))
    }

    /// Creates a node; returns its final path (with any sequence suffix).
    pub async fn create(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        opts: &CreateOptions,
    ) -> Result<String, Error> {
        self.call(ops::create(path, data.into(), opts), ops::read_path)
            .await
    }

    /// Creates a node; returns its final path and Stat.
    pub async fn create2(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        opts: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        self.call(ops::create2(path, data.into(), opts), ops::read_path_stat)
            .await
    }

    /// Deletes a node (`None` = any version).
    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<(), Error> {
        self.call(ops::delete(path, version), ops::read_unit).await
    }

    /// The node's Stat, or `None` if it does not exist.
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>, Error> {
        self.call(ops::exists(path, false), ops::read_exists).await
    }

    /// Like [`exists`](Self::exists), leaving a watch that fires on create, change or
    /// delete (set even when the node is missing).
    pub async fn exists_watch(&self, path: &str) -> Result<(Option<Stat>, Watch), Error> {
        self.call_watch(ops::exists(path, true), ops::read_exists)
            .await
    }

    /// The node's data and Stat.
    pub async fn get_data(&self, path: &str) -> Result<(Bytes, Stat), Error> {
        self.call(ops::get_data(path, false), ops::read_data).await
    }

    /// Like [`get_data`](Self::get_data), leaving a watch for change or delete.
    pub async fn get_data_watch(&self, path: &str) -> Result<((Bytes, Stat), Watch), Error> {
        self.call_watch(ops::get_data(path, true), ops::read_data)
            .await
    }

    /// Replaces the node's data (`None` = any version); returns the new Stat.
    pub async fn set_data(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        self.call(ops::set_data(path, data.into(), version), ops::read_stat)
            .await
    }

    /// Child names (unsorted).
    pub async fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        self.call(ops::get_children(path, false), ops::read_children)
            .await
    }

    /// Like [`get_children`](Self::get_children), leaving a watch for child changes.
    pub async fn get_children_watch(&self, path: &str) -> Result<(Vec<String>, Watch), Error> {
        self.call_watch(ops::get_children(path, true), ops::read_children)
            .await
    }

    /// Child names and the parent's Stat.
    pub async fn get_children2(&self, path: &str) -> Result<(Vec<String>, Stat), Error> {
        self.call(ops::get_children2(path, false), ops::read_children2)
            .await
    }

    /// The node's ACL and Stat.
    pub async fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat), Error> {
        self.call(ops::get_acl(path), ops::read_acl).await
    }

    /// Replaces the node's ACL (`None` = any ACL version).
    pub async fn set_acl(
        &self,
        path: &str,
        acl: Vec<Acl>,
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        self.call(ops::set_acl(path, acl, version), ops::read_stat)
            .await
    }

    /// Makes the connected server catch up with the leader.
    pub async fn sync(&self, path: &str) -> Result<String, Error> {
        self.call(ops::sync(path), ops::read_path).await
    }

    /// An atomic transaction: one result per op. If it failed, nothing was applied and
    /// the results are error results (see [`zk_recipes::proto::first_error`]).
    pub async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<MultiResult>, Error> {
        self.call(Request::Multi(ops), ops::read_multi).await
    }

    /// A batch of reads, each succeeding or failing on its own.
    pub async fn multi_read(&self, ops: Vec<ReadOp>) -> Result<Vec<MultiResult>, Error> {
        self.call(Request::MultiRead(ops), ops::read_multi).await
    }

    /// Adds a persistent (recursive) watch; events arrive on the stream until removed.
    pub async fn add_watch(&self, path: &str, mode: AddWatchMode) -> Result<WatchStream, Error> {
        let (tx, rx) = mpsc::unbounded_channel();
        ops::read_unit(
            self.raw(ops::add_watch(path, mode), Some(WatchTx::Stream(tx)))
                .await,
        )?;
        Ok(WatchStream(rx))
    }

    /// Removes this session's watches of a kind on a path; their receivers end.
    pub async fn remove_watches(&self, path: &str, which: WatcherType) -> Result<(), Error> {
        self.call(ops::remove_watches(path, which), ops::read_unit)
            .await
    }

    /// This session's ephemeral nodes whose path starts with `prefix` (`/` = all).
    pub async fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>, Error> {
        self.call(ops::get_ephemerals(prefix), ops::read_children)
            .await
    }

    /// The number of all descendants of a node.
    pub async fn get_all_children_number(&self, path: &str) -> Result<i32, Error> {
        self.call(ops::get_all_children_number(path), ops::read_count)
            .await
    }

    /// The identities this connection is authenticated as.
    pub async fn who_am_i(&self) -> Result<Vec<ClientInfo>, Error> {
        self.call(Request::WhoAmI, ops::read_who_am_i).await
    }

    /// Adds credentials (e.g. `("digest", b"user:password")`); replayed on reconnect.
    /// Wrong credentials end the session with [`Error::AuthFailed`].
    pub async fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<(), Error> {
        self.call(ops::add_auth(scheme, auth), ops::read_unit).await
    }

    /// Creates `path` and any missing parents (persistent, same ACL) in one round
    /// trip; returns the final path. An ancestor that cannot be created is named in
    /// [`Error::NoParent`] (or [`Error::ChrootMissing`]).
    pub async fn create_all(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        opts: &CreateOptions,
    ) -> Result<String, Error> {
        let recipe = CreateAll::new(path, data.into(), opts.clone());
        let (hold, mut events) = self.host(recipe)?;
        hold.run(|r, now| r.start(now))?;
        match events.next().await {
            Some(CreateAllEvent::Created { path, .. }) => Ok(path),
            Some(CreateAllEvent::Failed(e)) => Err(e),
            None => Err(self.dead()),
        }
    }

    /// Deletes `path` and everything below it.
    pub async fn delete_all(&self, path: &str) -> Result<(), Error> {
        let (hold, mut events) = self.host(DeleteAll::new(path))?;
        hold.run(|r, now| r.start(now))?;
        events.next().await.unwrap_or_else(|| Err(self.dead()))
    }

    /// Asks the holder of lock node `node` (a full path) to release by writing
    /// `unlock` into it; with `force_after`, deletes the node if it still exists after
    /// that grace period (its holder then sees `Lost`).
    pub async fn revoke(&self, node: &str, force_after: Option<Duration>) -> Result<(), Error> {
        let (hold, mut events) = self.host(Revoke::new(node, force_after))?;
        hold.run(|r, now| r.start(now))?;
        events.next().await.unwrap_or_else(|| Err(self.dead()))
    }

    /// What the session has sent and received so far (requests, bytes), counted by the
    /// core session across reconnects.
    pub async fn counters(&self) -> Result<Counters, Error> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Counters(tx))
            .map_err(|_| self.dead())?;
        rx.await.map_err(|_| self.dead())
    }

    /// Closes the session (waits up to 5 s for the server to confirm).
    pub async fn close(&self) {
        let (tx, rx) = oneshot::channel();
        if self
            .commands
            .send(Command::Close {
                timeout: Duration::from_secs(5),
                done: tx,
            })
            .is_ok()
        {
            let _ = rx.await;
        }
    }
}

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
