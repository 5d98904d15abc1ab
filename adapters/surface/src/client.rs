//! The session handle, written once for both forms: the raw ZooKeeper API, the status,
//! watches, close. The driver (an adapter's I/O) sits behind [`Driver`].

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zk_recipes::client::ops::{self, CreateOptions, Raw, Reconfig};
use zk_recipes::client::{Error, Sink, Status, WatchMode};
use zk_recipes::proto::{
    Acl, AddWatchMode, ClientInfo, EnsembleConfig, MultiOp, MultiResult, ReadOp, Request,
    Response, Stat, WatcherType, CONFIG_NODE,
};
use zk_recipes::recipe::lock::Revoke;
use zk_recipes::recipe::path::{CreateAll, CreateAllEvent, DeleteAll};
use zk_recipes::recipe::AnyEvent;
use zk_recipes::session::{Counters, WatchEvent};

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::Handle;
use crate::common::{Options, Published};

/// Where a raw request's reply goes.
pub struct ReplyTx(pub Option<rt::OnceTx<Result<Response, Error>>>);

impl Sink<Result<Response, Error>> for ReplyTx {
    fn send(&mut self, value: Result<Response, Error>) -> bool {
        self.0.take().is_some_and(|tx| tx.send(value))
    }
}

/// Where a watch's events go: one (a standard watch) or all (a persistent one).
pub enum WatchTx {
    /// A standard watch.
    Once(Option<rt::OnceTx<WatchEvent>>),
    /// A persistent watch.
    Stream(rt::Tx<WatchEvent>),
}

impl WatchTx {
    fn mode(&self) -> WatchMode {
        match self {
            WatchTx::Once(_) => WatchMode::Once,
            WatchTx::Stream(_) => WatchMode::Persistent,
        }
    }
}

impl Sink<WatchEvent> for WatchTx {
    fn send(&mut self, value: WatchEvent) -> bool {
        match self {
            WatchTx::Once(tx) => tx.take().is_some_and(|tx| tx.send(value)),
            WatchTx::Stream(tx) => tx.send(value),
        }
    }
}

/// Where a hosted recipe's events go.
pub struct EventTx(pub rt::Tx<AnyEvent>);

impl Sink<AnyEvent> for EventTx {
    fn send(&mut self, value: AnyEvent) -> bool {
        self.0.send(value)
    }
}

/// Where status changes go.
pub struct StatusTx(pub rt::Tx<Status>);

impl Sink<Status> for StatusTx {
    fn send(&mut self, value: Status) -> bool {
        self.0.send(value)
    }
}

/// What the core's routes carry in this form.
pub type Routed = zk_recipes::client::Command<ReplyTx, WatchTx, EventTx, StatusTx>;

/// What a handle asks of the driver.
pub enum Command {
    /// Submit, host, run, abandon, subscribe: carried out by the core's `Routes`.
    Route(Routed),
    /// Close the session, waiting at most `timeout` for the server; then `done`.
    Close {
        /// How long to wait for the server's answer.
        timeout: Duration,
        /// Told when closed.
        done: rt::OnceTx<()>,
    },
    /// What the session has sent and received so far.
    Counters(rt::OnceTx<Counters>),
    /// The last handle is gone: close and end.
    Shutdown,
}

/// The driver has ended: it takes no more commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended;

/// An adapter's I/O side: takes the handles' commands (and wakes itself for them).
pub trait Driver: Send + Sync + 'static {
    /// Hands `command` to the driver; `Err` if it has ended.
    fn send(&self, command: Command) -> Result<(), Ended>;
}

struct Inner {
    driver: Box<dyn Driver>,
    board: rt::BoardRx,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: close the session.
        let _ = self.driver.send(Command::Shutdown);
    }
}

/// A handle to one ZooKeeper session. Clone it freely (`Send + Sync`); when the last
/// clone drops, the session is closed.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    call_timeout: Duration,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("session_id", &self.session_id())
            .field("status", &self.status())
            .finish()
    }
}

/// A one-shot watch: [`wait`](Self::wait) for the event that fires it (in the async
/// form it is also a future of that event).
#[derive(Debug)]
pub struct Watch(Option<rt::OnceRx<WatchEvent>>);

#[form]
impl Watch {
    /// Waits for the event.
    pub async fn wait(mut self) -> Result<WatchEvent, Error> {
        match self.0.take() {
            Some(rx) => rx.recv().await.ok_or(Error::WatchEnded),
            None => Err(Error::WatchEnded),
        }
    }

    /// Waits for the event at most `timeout`.
    pub async fn wait_timeout(mut self, timeout: Duration) -> Result<WatchEvent, Error> {
        match self.0.take() {
            Some(rx) => match rx.recv_until(Some(Instant::now() + timeout)).await {
                Ok(Some(e)) => Ok(e),
                Ok(None) => Err(Error::WatchEnded),
                Err(_) => Err(Error::Timeout),
            },
            None => Err(Error::WatchEnded),
        }
    }
}

#[only_async]
impl std::future::Future for Watch {
    type Output = Result<WatchEvent, Error>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let Some(rx) = self.0.as_mut() else {
            return std::task::Poll::Ready(Err(Error::WatchEnded));
        };
        rx.poll_recv(cx).map(|r| r.ok_or(Error::WatchEnded))
    }
}

/// Every status change of a session, in order.
#[derive(Debug)]
pub struct StatusStream(rt::Rx<Status>);

#[form]
impl StatusStream {
    /// The next status; `None` once the client has ended.
    pub async fn next(&mut self) -> Option<Status> {
        self.0.recv().await
    }

    /// The next status within `timeout`.
    pub async fn next_timeout(&mut self, timeout: Duration) -> Result<Status, Error> {
        match self.0.recv_until(Some(Instant::now() + timeout)).await {
            Ok(Some(s)) => Ok(s),
            Ok(None) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout),
        }
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
pub struct WatchStream(rt::Rx<WatchEvent>);

#[form]
impl WatchStream {
    /// The next event; `None` once the watch is removed or the session ended.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        self.0.recv().await
    }

    /// The next event within `timeout`.
    pub async fn next_timeout(&mut self, timeout: Duration) -> Result<WatchEvent, Error> {
        match self.0.recv_until(Some(Instant::now() + timeout)).await {
            Ok(Some(e)) => Ok(e),
            Ok(None) => Err(Error::WatchEnded),
            Err(_) => Err(Error::Timeout),
        }
    }
}

#[form]
impl Client {
    /// Waits for the first session on a started driver: the end of every adapter's
    /// `connect` (see the adapters' docs for what it waits for).
    #[doc(hidden)]
    pub async fn connected(
        driver: Box<dyn Driver>,
        board: rt::BoardRx,
        options: &Options,
    ) -> Result<Client, Error> {
        let client = Client {
            inner: Arc::new(Inner { driver, board }),
            call_timeout: options.call_timeout,
        };
        let fail_fast = options.fail_fast;
        let deadline = Instant::now() + options.connect_timeout;
        let mut board = client.inner.board.clone();
        let seen = board
            .wait_until(
                |p| p.status != Status::Connecting || (fail_fast && p.unreachable.is_some()),
                deadline,
            )
            .await;
        let unreachable = |p: &Published, otherwise: Error| match &p.unreachable {
            Some(hosts) => Error::Unreachable(hosts.clone()),
            None => otherwise,
        };
        match seen {
            // A session exists (it may already be suspended again: still a session).
            Ok(p) if p.status.is_connected() || (p.session_id != 0 && !p.status.is_terminal()) => {
                Ok(client)
            }
            Ok(p) if p.stopped && !p.status.is_terminal() => Err(unreachable(&p, Error::Closed)),
            Ok(p) => Err(unreachable(&p, p.status.error())),
            Err(p) => Err(unreachable(&p, Error::Timeout)),
        }
    }

    /// Waits up to `timeout` for a status that satisfies `done`; returns it, or `None`.
    pub async fn wait_status(
        &self,
        timeout: Duration,
        done: impl Fn(Status) -> bool,
    ) -> Option<Status> {
        let mut board = self.inner.board.clone();
        match board
            .wait_until(|p| done(p.status), Instant::now() + timeout)
            .await
        {
            Ok(p) if done(p.status) => Some(p.status),
            _ => None,
        }
    }

    async fn raw(&self, request: Request, watch: Option<WatchTx>) -> Raw {
        let (tx, rx) = rt::oneshot();
        self.inner
            .driver
            .send(Command::Route(Routed::Submit {
                request,
                reply: ReplyTx(Some(tx)),
                watch: watch.map(|w| {
                    let mode = w.mode();
                    (w, mode)
                }),
            }))
            .map_err(|_| self.dead())?;
        match rx
            .recv_until(Some(Instant::now() + self.call_timeout))
            .await
        {
            Ok(Some(r)) => r,
            Ok(None) => Err(self.dead()),
            Err(_) => Err(Error::Timeout),
        }
    }

    /// A call concerning no one node (multi, whoAmI, auth).
    async fn call<T>(
        &self,
        request: Request,
        read: fn(Raw) -> Result<T, Error>,
    ) -> Result<T, Error> {
        read(self.raw(request, None).await)
    }

    /// A call on `path`: a server error names it.
    async fn call_on<T>(
        &self,
        path: &str,
        request: Request,
        read: fn(Raw) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.call(request, read).await.map_err(|e| e.at(path))
    }

    async fn call_watch<T>(
        &self,
        path: &str,
        request: Request,
        read: fn(Raw) -> Result<T, Error>,
    ) -> Result<(T, Watch), Error> {
        let (tx, rx) = rt::oneshot();
        let value = read(self.raw(request, Some(WatchTx::Once(Some(tx)))).await)
            .map_err(|e| e.at(path))?;
        Ok((value, Watch(Some(rx))))
    }

    /// Creates a node; returns its final path (with any sequence suffix).
    pub async fn create(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        opts: &CreateOptions,
    ) -> Result<String, Error> {
        self.call_on(path, ops::create(path, data.into(), opts), ops::read_path)
            .await
    }

    /// Creates a node; returns its final path and Stat.
    pub async fn create2(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        opts: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        self.call_on(path, ops::create2(path, data.into(), opts), ops::read_path_stat)
            .await
    }

    /// Deletes a node (`None` = any version).
    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<(), Error> {
        self.call_on(path, ops::delete(path, version), ops::read_unit).await
    }

    /// The node's Stat, or `None` if it does not exist.
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>, Error> {
        self.call_on(path, ops::exists(path, false), ops::read_exists).await
    }

    /// Like [`exists`](Self::exists), leaving a watch that fires on create, change or
    /// delete (set even when the node is missing).
    pub async fn exists_watch(&self, path: &str) -> Result<(Option<Stat>, Watch), Error> {
        self.call_watch(path, ops::exists(path, true), ops::read_exists)
            .await
    }

    /// The node's data and Stat.
    pub async fn get_data(&self, path: &str) -> Result<(Bytes, Stat), Error> {
        self.call_on(path, ops::get_data(path, false), ops::read_data).await
    }

    /// Like [`get_data`](Self::get_data), leaving a watch for change or delete.
    pub async fn get_data_watch(&self, path: &str) -> Result<((Bytes, Stat), Watch), Error> {
        self.call_watch(path, ops::get_data(path, true), ops::read_data)
            .await
    }

    /// Replaces the node's data (`None` = any version); returns the new Stat.
    pub async fn set_data(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        self.call_on(path, ops::set_data(path, data.into(), version), ops::read_stat)
            .await
    }

    /// Child names (unsorted).
    pub async fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        self.call_on(path, ops::get_children(path, false), ops::read_children)
            .await
    }

    /// Like [`get_children`](Self::get_children), leaving a watch for child changes.
    pub async fn get_children_watch(&self, path: &str) -> Result<(Vec<String>, Watch), Error> {
        self.call_watch(path, ops::get_children(path, true), ops::read_children)
            .await
    }

    /// Child names and the parent's Stat.
    pub async fn get_children2(&self, path: &str) -> Result<(Vec<String>, Stat), Error> {
        self.call_on(path, ops::get_children2(path, false), ops::read_children2)
            .await
    }

    /// The node's ACL and Stat.
    pub async fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat), Error> {
        self.call_on(path, ops::get_acl(path), ops::read_acl).await
    }

    /// Replaces the node's ACL (`None` = any ACL version).
    pub async fn set_acl(
        &self,
        path: &str,
        acl: Vec<Acl>,
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        self.call_on(path, ops::set_acl(path, acl, version), ops::read_stat)
            .await
    }

    /// Makes the connected server catch up with the leader.
    pub async fn sync(&self, path: &str) -> Result<String, Error> {
        self.call_on(path, ops::sync(path), ops::read_path).await
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
        let (tx, rx) = rt::channel();
        ops::read_unit(
            self.raw(ops::add_watch(path, mode), Some(WatchTx::Stream(tx)))
                .await,
        )
        .map_err(|e| e.at(path))?;
        Ok(WatchStream(rx))
    }

    /// Removes this session's watches of a kind on a path; their receivers end.
    pub async fn remove_watches(&self, path: &str, which: WatcherType) -> Result<(), Error> {
        self.call_on(path, ops::remove_watches(path, which), ops::read_unit)
            .await
    }

    /// This session's ephemeral nodes whose path starts with `prefix` (`/` = all).
    pub async fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>, Error> {
        self.call_on(prefix, ops::get_ephemerals(prefix), ops::read_children)
            .await
    }

    /// The number of all descendants of a node.
    pub async fn get_all_children_number(&self, path: &str) -> Result<i32, Error> {
        self.call_on(path, ops::get_all_children_number(path), ops::read_count)
            .await
    }

    /// The ensemble's configuration (`/zookeeper/config`, read outside any chroot):
    /// its members and version (ZooKeeper 3.5+; `NoNode` from older servers).
    pub async fn get_config(&self) -> Result<(EnsembleConfig, Stat), Error> {
        self.call_on(CONFIG_NODE, ops::get_config(false), ops::read_config)
            .await
    }

    /// Like [`get_config`](Self::get_config), leaving a watch that fires when the
    /// configuration changes.
    pub async fn get_config_watch(&self) -> Result<((EnsembleConfig, Stat), Watch), Error> {
        self.call_watch(CONFIG_NODE, ops::get_config(true), ops::read_config)
            .await
    }

    /// Changes the ensemble's membership; returns the new configuration. Refused with
    /// `ReconfigDisabled` by an ensemble without `reconfigEnabled=true`, `NoAuth` for a
    /// caller who may not write `/zookeeper/config` (not a superuser, on a server
    /// without `skipACL`), `BadVersion` when `from_config` is stale (see
    /// [`ops::reconfig`]).
    pub async fn reconfig(&self, change: &Reconfig) -> Result<(EnsembleConfig, Stat), Error> {
        self.call_on(CONFIG_NODE, ops::reconfig(change), ops::read_config)
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
        let mut create = Handle::start(self, recipe, |r, now| r.start(now))?;
        match create.next().await {
            Some(CreateAllEvent::Created { path, .. }) => Ok(path),
            Some(CreateAllEvent::Failed(e)) => Err(e),
            None => Err(self.dead()),
        }
    }

    /// Deletes `path` and everything below it.
    pub async fn delete_all(&self, path: &str) -> Result<(), Error> {
        let mut delete = Handle::start(self, DeleteAll::new(path), |r, now| r.start(now))?;
        delete.next().await.unwrap_or_else(|| Err(self.dead()))
    }

    /// Asks the holder of lock node `node` (a full path) to release by writing
    /// `unlock` into it; with `force_after`, deletes the node if it still exists after
    /// that grace period (its holder then sees `Lost`).
    pub async fn revoke(&self, node: &str, force_after: Option<Duration>) -> Result<(), Error> {
        let recipe = Revoke::new(node, force_after);
        let mut revoke = Handle::start(self, recipe, |r, now| r.start(now))?;
        revoke.next().await.unwrap_or_else(|| Err(self.dead()))
    }

    /// What the session has sent and received so far (requests, bytes), counted by the
    /// core session across reconnects.
    pub async fn counters(&self) -> Result<Counters, Error> {
        let (tx, rx) = rt::oneshot();
        self.inner
            .driver
            .send(Command::Counters(tx))
            .map_err(|_| self.dead())?;
        rx.recv().await.ok_or_else(|| self.dead())
    }

    /// Closes the session (waits up to 5 s for the server to confirm). Every recipe
    /// hosted on it ends first, with its final event.
    pub async fn close(&self) {
        let (tx, rx) = rt::oneshot();
        let sent = self.inner.driver.send(Command::Close {
            timeout: Duration::from_secs(5),
            done: tx,
        });
        if sent.is_ok() {
            let _ = rx
                .recv_until(Some(Instant::now() + Duration::from_secs(10)))
                .await;
        }
    }
}

impl Client {
    /// A handle on the same session whose raw calls wait at most `timeout` for their
    /// reply.
    pub fn with_call_timeout(&self, timeout: Duration) -> Client {
        Client {
            inner: self.inner.clone(),
            call_timeout: timeout,
        }
    }

    /// The current session status.
    pub fn status(&self) -> Status {
        self.inner.board.read(|p| p.status)
    }

    /// Every status change from now on, none dropped (the current status first). The
    /// stream ends when the client does.
    pub fn status_stream(&self) -> StatusStream {
        let (tx, rx) = rt::channel();
        let _ = self
            .inner
            .driver
            .send(Command::Route(Routed::Statuses(StatusTx(tx))));
        StatusStream(rx)
    }

    /// The hosts the session uses: the connect string's, or — with
    /// [`Options::track_ensemble`] — the ensemble's latest members.
    pub fn hosts(&self) -> Vec<String> {
        self.inner.board.read(|p| p.hosts.clone())
    }

    /// The server (`host:port`) the session is connected to, or dialling.
    pub fn server(&self) -> String {
        self.inner.board.read(|p| p.host.clone())
    }

    /// The session id (0 until the first session is established).
    pub fn session_id(&self) -> i64 {
        self.inner.board.read(|p| p.session_id)
    }

    /// The session password (with [`session_id`](Self::session_id), enough to resume
    /// the session from another process — or to end it, as tests do).
    pub fn session_password(&self) -> Vec<u8> {
        self.inner.board.read(|p| p.password.clone())
    }

    /// The error a call gets when the driver is gone: the session's end if it ended,
    /// else `Closed`.
    pub(crate) fn dead(&self) -> Error {
        let s = self.status();
        if s.is_terminal() {
            s.error()
        } else {
            Error::Closed
        }
    }

    pub(crate) fn send(&self, command: Command) -> Result<(), Error> {
        self.inner.driver.send(command).map_err(|_| self.dead())
    }
}
