//! Everything zkr asks of ZooKeeper, in one place: the only module that names the
//! blocking adapter's API (`zk_recipes_blocking`), so a rename there is a change here
//! only. Errors leave this module worded for the user, naming the path they concern.

use std::path::Path;
use std::time::Duration;

use zk_recipes_blocking::zk_recipes::proto::validate_path;
use zk_recipes_blocking::zk_recipes::session::ConnectString;
use zk_recipes_blocking::{
    connect as adapter_connect, AddWatchMode, Candidate, Client, CounterFormat, CreateMode,
    CreateOptions, DoubleBarrier, ElectionEvent, Error, ErrorCode, EventType, LockChange,
    LockGuard, LostReason, Options, OwnedNodeEvent, ServiceCacheHandle, ServiceRegistration,
    Status, Tls, WatchStream,
};
pub use zk_recipes_blocking::{Bytes, Description, InspectedNode, Shape, Stat, Survey};
pub use zk_recipes_blocking::{ServiceCacheEvent, ServiceInstance};

use crate::duration::show;

/// What kind of failure an error is, for zkr's exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The node concerned does not exist (exit 1).
    NotFound,
    /// The node exists already, its version differs from `--version`, or it has
    /// children (exit 2).
    Conflict,
    /// Anything else (exit 125).
    Failed,
}

/// A failure, worded for the user (it names the path).
#[derive(Debug)]
pub struct ZkError {
    /// What zkr was doing, and why it failed.
    pub message: String,
    /// Which exit code it calls for.
    pub cause: Cause,
}

impl ZkError {
    /// A failure of zkr's own (usage, settings).
    pub fn failed(message: impl Into<String>) -> ZkError {
        ZkError {
            message: message.into(),
            cause: Cause::Failed,
        }
    }
}

impl std::fmt::Display for ZkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Checks a path before anything is sent (before connecting).
pub fn check_path(path: &str) -> Result<(), ZkError> {
    validate_path(path).map_err(|e| ZkError::failed(format!("invalid path {path:?}: {e}")))
}

/// How to reach ZooKeeper.
pub struct Settings<'a> {
    /// `HOST:PORT[,HOST:PORT...][/chroot]`.
    pub servers: &'a str,
    /// The session timeout asked of the server (it bounds how long a dead connection
    /// goes unnoticed by a lock holder).
    pub session_timeout: Duration,
    /// How long to keep trying the servers for the first session.
    pub connect_timeout: Duration,
    /// TLS: the CA certificates (PEM file) the servers' certificates are checked against.
    pub tls_ca: Option<&'a Path>,
    /// Mutual TLS: the client certificate chain and key (PEM files).
    pub tls_client: Option<(&'a Path, &'a Path)>,
    /// SASL DIGEST-MD5: the user and the file holding the password.
    pub sasl: Option<(&'a str, &'a Path)>,
    /// Accept a read-only server (one cut off from its quorum): reads work, writes
    /// fail with "server is read-only".
    pub read_only: bool,
    /// Follow the ensemble's membership (`/zookeeper/config`) and rebalance over it.
    pub track_ensemble: bool,
}

/// One session to ZooKeeper. Clones share it.
#[derive(Clone)]
pub struct Zk {
    client: Client,
}

/// Checks the connection string (before connecting): its chroot, if any.
pub fn chroot_of(servers: &str) -> Result<Option<(String, String)>, ZkError> {
    let cs: ConnectString = servers
        .parse()
        .map_err(|e| ZkError::failed(format!("--server {servers:?}: {e}")))?;
    Ok(cs
        .chroot()
        .root()
        .map(|root| (cs.hosts().join(","), root.to_string())))
}

/// Connects and waits for a session. An expired session is not renewed: zkr is
/// short-lived, and whatever it held ended with the session. While no session has
/// come after a second, says (on standard error) what it is trying and for how long.
pub fn connect(settings: &Settings<'_>) -> Result<Zk, ZkError> {
    let chroot = chroot_of(settings.servers)?;
    let mut options = Options::default()
        .session_timeout(settings.session_timeout)
        .connect_timeout(settings.connect_timeout)
        .renew_on_expiry(false)
        .read_only(settings.read_only)
        .track_ensemble(settings.track_ensemble);
    let tls_error = |e: std::io::Error| ZkError::failed(format!("TLS settings: {e}"));
    match (settings.tls_ca, settings.tls_client) {
        (Some(ca), client) => {
            let mut tls = Tls::from_ca_file(ca).map_err(tls_error)?;
            if let Some((cert, key)) = client {
                tls = tls.client_cert_files(cert, key).map_err(tls_error)?;
            }
            options = options.tls(tls);
        }
        (None, Some(_)) => return Err(ZkError::failed("--tls-cert and --tls-key need --tls-ca")),
        (None, None) => {}
    }
    if let Some((user, file)) = settings.sasl {
        let text = std::fs::read_to_string(file).map_err(|e| {
            ZkError::failed(format!("--sasl-password-file {}: {e}", file.display()))
        })?;
        let password = text.lines().next().unwrap_or("");
        options = options.sasl_digest(user, password);
    }
    // Told (dropped) once connect returned.
    let (done, waiting) = std::sync::mpsc::channel::<()>();
    let (servers, within) = (settings.servers.to_string(), settings.connect_timeout);
    let progress = std::thread::spawn(move || {
        let slow = waiting.recv_timeout(Duration::from_secs(1))
            == Err(std::sync::mpsc::RecvTimeoutError::Timeout);
        if slow && within > Duration::from_secs(1) {
            eprintln!(
                "zkr: no session yet with {servers}; trying for up to {} (--connect-timeout)",
                show(within)
            );
        }
    });
    let connected = adapter_connect(settings.servers, options);
    drop(done);
    let _ = progress.join();
    let client = connected.map_err(|e| {
        ZkError::failed(match e {
            Error::Timeout => format!(
                "connect to {}: no session within {} (--connect-timeout)",
                settings.servers,
                show(settings.connect_timeout)
            ),
            Error::Unreachable(_) => format!(
                "connect to {} (tried for {}, --connect-timeout): {e}",
                settings.servers,
                show(settings.connect_timeout)
            ),
            e => format!("connect to {}: {e}", settings.servers),
        })
    })?;
    let zk = Zk { client };
    if let Some((hosts, root)) = chroot {
        // Every path is under the chroot: say so once, by name, rather than as a
        // missing node on the first call.
        match zk.client.exists("/") {
            Ok(Some(_)) => {}
            Ok(None) | Err(Error::ChrootMissing) => {
                return Err(ZkError::failed(format!(
                    "the chroot {root} of --server {} does not exist on the server; create it \
                     first: zkr --server {hosts} create --parents {root}",
                    settings.servers
                )))
            }
            Err(e) => return Err(zk.err("connect", "/", e)),
        }
    }
    Ok(zk)
}

/// Something held on ZooKeeper while a command runs: a lock or a leadership.
pub trait Hold {
    /// The fencing token of this hold (strictly increasing across holders).
    fn token(&self) -> i64;
    /// Waits at most `wait` for the hold to end: `Some(why)` once it has (and on every
    /// call after that), `None` while it is still held.
    fn wait_loss(&mut self, wait: Duration) -> Option<String>;
    /// Gives the hold up and waits until that is done on the server.
    fn release(self: Box<Self>) -> Result<(), String>;
}

fn lost_reason(r: LostReason) -> &'static str {
    match r {
        LostReason::SessionExpired => "the ZooKeeper session expired",
        LostReason::SessionClosed => "the ZooKeeper session was closed",
        LostReason::NodeDeleted => "its node was deleted",
    }
}

const SUSPENDED: &str = "the connection to ZooKeeper dropped (--stop-on-suspend)";

/// A held lock.
struct LockHold {
    guard: LockGuard,
    path: String,
    stop_on_suspend: bool,
    lost: Option<String>,
}

impl Hold for LockHold {
    fn token(&self) -> i64 {
        self.guard.fencing_token()
    }

    fn wait_loss(&mut self, wait: Duration) -> Option<String> {
        if self.lost.is_none() {
            self.lost = match self.guard.changed_timeout(wait) {
                Some(LockChange::Lost(r)) => Some(lost_reason(r).to_string()),
                Some(LockChange::Suspended) if self.stop_on_suspend => Some(SUSPENDED.into()),
                _ => None,
            };
        }
        self.lost.clone()
    }

    fn release(self: Box<Self>) -> Result<(), String> {
        if self.lost.is_some() {
            return Ok(()); // nothing left to give up
        }
        let path = self.path;
        self.guard
            .release()
            .map_err(|e| format!("release lock {path}: {e}"))
    }
}

/// A leadership.
struct Leadership {
    candidate: Candidate,
    token: i64,
    stop_on_suspend: bool,
    lost: Option<String>,
}

impl Hold for Leadership {
    fn token(&self) -> i64 {
        self.token
    }

    fn wait_loss(&mut self, wait: Duration) -> Option<String> {
        if self.lost.is_none() {
            self.lost = match self.candidate.changed_timeout(wait) {
                Some(ElectionEvent::Lost { reason }) => Some(lost_reason(reason).to_string()),
                Some(ElectionEvent::Suspended) if self.stop_on_suspend => Some(SUSPENDED.into()),
                Some(ElectionEvent::Failed { error }) => {
                    Some(format!("the candidacy failed: {error}"))
                }
                Some(ElectionEvent::Closed) => Some("the candidacy was closed".into()),
                _ => None,
            };
        }
        self.lost.clone()
    }

    fn release(self: Box<Self>) -> Result<(), String> {
        self.candidate
            .close()
            .map_err(|e| format!("resign leadership: {e}"))
    }
}

/// A participant of a double barrier.
pub struct BarrierSeat {
    zk: Zk,
    barrier: DoubleBarrier,
    path: String,
}

impl BarrierSeat {
    /// Enters; `Ok(false)` if `timeout` passed first.
    pub fn enter(&mut self, timeout: Option<Duration>) -> Result<bool, ZkError> {
        match timeout {
            Some(t) => self.barrier.enter_timeout(t),
            None => self.barrier.enter().map(|()| true),
        }
        .map_err(|e| self.zk.err("enter barrier", &self.path, e))
    }

    /// Leaves; `Ok(false)` if others were still in the barrier when `timeout` passed.
    pub fn leave(&mut self, timeout: Option<Duration>) -> Result<bool, ZkError> {
        match timeout {
            Some(t) => self.barrier.leave_timeout(t),
            None => self.barrier.leave().map(|()| true),
        }
        .map_err(|e| self.zk.err("leave barrier", &self.path, e))
    }
}

/// A change seen by `zkr watch`.
pub struct Change {
    /// `created`, `deleted`, `changed` (data) or `children`.
    pub kind: &'static str,
    /// The node it concerns.
    pub path: String,
}

/// A running persistent watch.
pub struct Watching {
    stream: WatchStream,
}

impl Watching {
    /// The next change; `None` once the watch has ended (the session ended).
    pub fn next(&mut self) -> Option<Change> {
        loop {
            let e = self.stream.next()?;
            let kind = match e.event_type {
                EventType::NodeCreated => "created",
                EventType::NodeDeleted => "deleted",
                EventType::NodeDataChanged => "changed",
                EventType::NodeChildrenChanged => "children",
                EventType::PersistentWatchRemoved => return None,
                _ => continue,
            };
            return Some(Change { kind, path: e.path });
        }
    }

    /// Waits at most `wait` for a change: `Some(true)` if one came, `Some(false)` if
    /// none did, `None` once the watch has ended (the session ended).
    pub fn changed_within(&mut self, wait: Duration) -> Option<bool> {
        match self.stream.next_timeout(wait) {
            Ok(e) => (e.event_type != EventType::PersistentWatchRemoved).then_some(true),
            Err(Error::Timeout) => Some(false),
            Err(_) => None,
        }
    }
}

/// How a node is created (`zkr create`).
pub struct NewNode {
    /// A sequential node (the server appends a 10-digit number).
    pub sequential: bool,
    /// A container (the server deletes it once its last child is gone).
    pub container: bool,
    /// A TTL node: deleted this long after its last change once it has no children.
    pub ttl: Option<Duration>,
    /// Create missing parents (persistent).
    pub parents: bool,
}

impl Zk {
    /// The error `e` of `what` on `path`, worded once for each cause: a session that
    /// ended reads the same whichever call noticed it.
    pub fn err(&self, what: &str, path: &str, e: Error) -> ZkError {
        let cause = match e.code() {
            Some(ErrorCode::NoNode) => Cause::NotFound,
            Some(ErrorCode::NodeExists | ErrorCode::BadVersion | ErrorCode::NotEmpty) => {
                Cause::Conflict
            }
            _ => Cause::Failed,
        };
        let message = match e {
            e if e.ends_session() || matches!(e, Error::Finished) => {
                format!("{what} {path}: {}", self.session_end(&e))
            }
            // The error names the node already.
            Error::Node { .. } => format!("{what}: {e}"),
            _ => format!("{what} {path}: {e}"),
        };
        ZkError { message, cause }
    }

    /// The error of `what` on `path` that saw its watch end: the session ended.
    pub fn ended(&self, what: &str, path: &str) -> ZkError {
        self.err(what, path, Error::Closed)
    }

    /// Why the session ended, as the client's status tells it (a call that noticed
    /// may only have seen the client close).
    pub fn session_end(&self, seen: &Error) -> String {
        // The call may hear of the end before the status says it: wait for that a
        // moment.
        let status = self
            .client
            .wait_status(Duration::from_secs(2), |s| s.is_terminal())
            .unwrap_or_else(|| self.client.status());
        match status {
            Status::Expired { .. } => "the ZooKeeper session expired".into(),
            Status::AuthFailed(why) => Error::AuthFailed(why).to_string(),
            Status::Closed => "the ZooKeeper session was closed".into(),
            _ => seen.to_string(),
        }
    }

    /// Closes the session (waits a few seconds at most for the server).
    pub fn close(&self) {
        self.client.close();
    }

    /// Takes the exclusive lock `path` (Curator `InterProcessMutex` compatible);
    /// `Ok(None)` if `timeout` passed first.
    pub fn lock(
        &self,
        path: &str,
        timeout: Option<Duration>,
        stop_on_suspend: bool,
    ) -> Result<Option<Box<dyn Hold>>, ZkError> {
        let builder = self.client.lock(path);
        let guard = match timeout {
            Some(t) => builder.acquire_timeout(t),
            None => builder.acquire().map(Some),
        }
        .map_err(|e| self.err("lock", path, e))?;
        Ok(guard.map(|guard| {
            Box::new(LockHold {
                guard,
                path: path.to_string(),
                stop_on_suspend,
                lost: None,
            }) as Box<dyn Hold>
        }))
    }

    /// Stands for election in `path` as `id` and waits to lead (Curator `LeaderLatch`
    /// compatible); `Ok(None)` if `timeout` passed first (the candidacy is withdrawn).
    pub fn elect(
        &self,
        path: &str,
        id: &str,
        timeout: Option<Duration>,
        stop_on_suspend: bool,
    ) -> Result<Option<Box<dyn Hold>>, ZkError> {
        let err = |e| self.err("elect", path, e);
        let mut candidate = self
            .client
            .election(path, id)
            .without_rejoin()
            .join()
            .map_err(err)?;
        let token = match timeout {
            Some(t) => candidate.elected_timeout(t).map_err(err)?,
            None => Some(candidate.elected().map_err(err)?),
        };
        let Some(token) = token else {
            candidate.close().map_err(err)?;
            return Ok(None);
        };
        Ok(Some(Box::new(Leadership {
            candidate,
            token,
            stop_on_suspend,
            lost: None,
        })))
    }

    /// The id of the current leader of the election in `path`, if any.
    pub fn leader(&self, path: &str) -> Result<Option<String>, ZkError> {
        let err = |e| self.err("leader", path, e);
        let observer = self.client.election_observer(path).map_err(err)?;
        Ok(observer.leader().map_err(err)?.map(|p| p.id))
    }

    /// A participant of the double barrier `path` for `count` participants.
    pub fn barrier(&self, path: &str, count: u32) -> BarrierSeat {
        BarrierSeat {
            zk: self.clone(),
            barrier: self.client.double_barrier(path, count),
            path: path.to_string(),
        }
    }

    /// Puts `data` into the FIFO queue `path`; the item's node name when known.
    pub fn queue_put(&self, path: &str, data: Vec<u8>) -> Result<Option<String>, ZkError> {
        self.client
            .queue(path)
            .put(data)
            .map_err(|e| self.err("queue put", path, e))
    }

    /// Takes the next item of the FIFO queue `path` (deleting it); `Ok(None)` if
    /// `timeout` passed first.
    pub fn queue_take(
        &self,
        path: &str,
        timeout: Option<Duration>,
    ) -> Result<Option<Vec<u8>>, ZkError> {
        let mut queue = self.client.queue(path);
        match timeout {
            Some(t) => queue.take_timeout(t),
            None => queue.take().map(Some),
        }
        .map(|item| item.map(|i| i.data.to_vec()))
        .map_err(|e| self.err("queue take", path, e))
    }

    /// The shared counter in `path` (`wide`: 8 bytes, Curator's `DistributedAtomicLong`;
    /// else 4 bytes, `SharedCount`), after adding `add` if given.
    pub fn counter(&self, path: &str, wide: bool, add: Option<i64>) -> Result<i64, ZkError> {
        let format = if wide {
            CounterFormat::I64
        } else {
            CounterFormat::I32
        };
        let err = |e| self.err("counter", path, e);
        let mut counter = self.client.counter(path, format).map_err(err)?;
        match add {
            Some(n) => counter.add(n),
            None => counter.get(),
        }
        .map_err(err)
    }

    /// The data and Stat of node `path`.
    pub fn get(&self, path: &str) -> Result<(Bytes, Stat), ZkError> {
        self.client
            .get_data(path)
            .map_err(|e| self.err("get", path, e))
    }

    /// The Stat of node `path`.
    pub fn stat(&self, path: &str) -> Result<Stat, ZkError> {
        match self.client.exists(path) {
            Ok(Some(stat)) => Ok(stat),
            Ok(None) => Err(self.err("stat", path, Error::Server(ErrorCode::NoNode).at(path))),
            Err(e) => Err(self.err("stat", path, e)),
        }
    }

    /// Sets the data of node `path`: with `version`, only if the node is at that
    /// version (a missing node is an error); without, creating it (and missing
    /// parents) if needed. The node's new Stat.
    pub fn set(&self, path: &str, data: Vec<u8>, version: Option<i32>) -> Result<Stat, ZkError> {
        let err = |e| self.err("set", path, e);
        if version.is_some() {
            return self.client.set_data(path, data, version).map_err(err);
        }
        loop {
            match self.client.set_data(path, data.clone(), None) {
                Ok(stat) => return Ok(stat),
                Err(e) if e.code() == Some(ErrorCode::NoNode) => {}
                Err(e) => return Err(err(e)),
            }
            match self
                .client
                .create_all(path, data.clone(), &CreateOptions::default())
            {
                Ok(_) => return self.stat(path),
                Err(e) if e.code() == Some(ErrorCode::NodeExists) => {} // created meanwhile: set it
                Err(e) => return Err(err(e)),
            }
        }
    }

    /// Creates node `path` as `how` says; its final path (with the sequence number).
    pub fn create(&self, path: &str, data: Vec<u8>, how: &NewNode) -> Result<String, ZkError> {
        let mode = match (how.container, how.ttl.is_some(), how.sequential) {
            (true, _, _) => CreateMode::Container,
            (false, true, true) => CreateMode::PersistentSequentialWithTtl,
            (false, true, false) => CreateMode::PersistentWithTtl,
            (false, false, true) => CreateMode::PersistentSequential,
            (false, false, false) => CreateMode::Persistent,
        };
        let mut opts = CreateOptions::mode(mode);
        if let Some(ttl) = how.ttl {
            opts = opts.ttl(ttl);
        }
        let err = |e: Error| {
            if e.code() == Some(ErrorCode::NoNode) && !how.parents {
                return ZkError {
                    message: format!(
                        "create {path}: its parent does not exist (--parents creates it)"
                    ),
                    cause: Cause::NotFound,
                };
            }
            let mut z = self.err("create", path, e.clone());
            if e.code() == Some(ErrorCode::Unimplemented) && how.ttl.is_some() {
                z.message.push_str(
                    " (TTL nodes need the server started with -Dzookeeper.extendedTypesEnabled=true)",
                );
            }
            z
        };
        if how.parents {
            self.client.create_all(path, data, &opts).map_err(err)
        } else {
            self.client.create(path, data, &opts).map_err(err)
        }
    }

    /// Deletes node `path` (at `version` if given); with `recursive`, everything below
    /// it first.
    pub fn delete(&self, path: &str, version: Option<i32>, recursive: bool) -> Result<(), ZkError> {
        let err = |e| self.err("delete", path, e);
        if recursive {
            self.client.delete_all(path).map_err(|e| err(e.at(path)))
        } else {
            self.client.delete(path, version).map_err(err)
        }
    }

    /// The names of the children of `path`, sorted.
    pub fn ls(&self, path: &str) -> Result<Vec<String>, ZkError> {
        let mut names = self
            .client
            .get_children(path)
            .map_err(|e| self.err("ls", path, e))?;
        names.sort();
        Ok(names)
    }

    /// The full paths of `path` and every node below it, depth first, sorted (nodes
    /// deleted during the walk are left out).
    pub fn tree(&self, path: &str) -> Result<Vec<String>, ZkError> {
        // The root must exist; below it, a node gone meanwhile is skipped.
        let mut out = Vec::new();
        let mut stack = vec![path.to_string()];
        while let Some(node) = stack.pop() {
            let mut names = match self.client.get_children(&node) {
                Ok(names) => names,
                Err(e) if e.code() == Some(ErrorCode::NoNode) && node != path => continue,
                Err(e) => return Err(self.err("tree", &node, e)),
            };
            names.sort();
            let prefix = if node.ends_with('/') {
                node.clone()
            } else {
                format!("{node}/")
            };
            stack.extend(names.iter().rev().map(|n| format!("{prefix}{n}")));
            out.push(node);
        }
        Ok(out)
    }

    /// Watches `path` (and, `recursive`, every node below it) until the session ends.
    pub fn watch(&self, path: &str, recursive: bool) -> Result<Watching, ZkError> {
        let mode = if recursive {
            AddWatchMode::PersistentRecursive
        } else {
            AddWatchMode::Persistent
        };
        self.client
            .add_watch(path, mode)
            .map(|stream| Watching { stream })
            .map_err(|e| self.err("watch", path, e))
    }

    /// What the recipe nodes at or below `path` mean (see the library's `describe`).
    pub fn inspect(&self, path: &str) -> Result<Survey, ZkError> {
        self.client
            .describe_below(path)
            .map_err(|e| self.err("inspect", path, e))
    }
}

/// A registered service instance (kept, and re-registered after an expiry, while CMD
/// runs).
struct Registered {
    handle: ServiceRegistration,
    path: String,
    token: i64,
    stop_on_suspend: bool,
    lost: Option<String>,
}

impl Hold for Registered {
    fn token(&self) -> i64 {
        self.token
    }

    fn wait_loss(&mut self, wait: Duration) -> Option<String> {
        if self.lost.is_none() {
            self.lost = match self.handle.next_timeout(wait) {
                Ok(Some(OwnedNodeEvent::Failed { error })) => {
                    Some(format!("the registration failed: {error}"))
                }
                Ok(Some(OwnedNodeEvent::Suspended)) if self.stop_on_suspend => {
                    Some(SUSPENDED.into())
                }
                Ok(None) => Some("the registration ended".into()),
                _ => None,
            };
        }
        self.lost.clone()
    }

    fn release(self: Box<Self>) -> Result<(), String> {
        if self.lost.is_some() {
            return Ok(());
        }
        let path = self.path;
        self.handle
            .unregister()
            .map_err(|e| format!("unregister {path}: {e}"))
    }
}

/// One instance as a line: `<id> <address>:<port>` (and `ssl=<port>`, `disabled`).
pub fn instance_line(i: &ServiceInstance) -> String {
    let mut s = format!(
        "{} {}:{}",
        i.id,
        i.address.as_deref().unwrap_or("-"),
        i.port.map_or_else(|| "-".into(), |p| p.to_string())
    );
    if let Some(p) = i.ssl_port {
        s.push_str(&format!(" ssl={p}"));
    }
    if !i.enabled {
        s.push_str(" disabled");
    }
    s
}

impl Zk {
    /// Registers `instance` under `base` (Curator `ServiceDiscovery` compatible) and
    /// waits until it is in place; the hold's token is the node's creation zxid.
    pub fn register(
        &self,
        base: &str,
        instance: &ServiceInstance,
        stop_on_suspend: bool,
    ) -> Result<Box<dyn Hold>, ZkError> {
        let path = format!("{base}/{}/{}", instance.name, instance.id);
        if let Err(e) = instance.to_json() {
            return Err(ZkError::failed(format!("register {path}: --payload: {e}")));
        }
        let mut handle = self
            .client
            .register_service(base, instance)
            .map_err(|e| self.err("register", &path, e))?;
        let stat = handle
            .created()
            .map_err(|e| self.err("register", &path, e))?;
        Ok(Box::new(Registered {
            handle,
            path,
            token: stat.czxid,
            stop_on_suspend,
            lost: None,
        }))
    }

    /// Follows service `name` under `base`: its instances once complete.
    pub fn discover(
        &self,
        base: &str,
        name: &str,
    ) -> Result<(ServiceCacheHandle, Vec<ServiceInstance>), ZkError> {
        let path = format!("{base}/{name}");
        let mut cache = self
            .client
            .service_cache(base, name)
            .map_err(|e| self.err("discover", &path, e))?;
        let now = cache.synced().map_err(|e| self.err("discover", &path, e))?;
        Ok((cache, now))
    }
}
