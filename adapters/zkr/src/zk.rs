//! Everything zkr asks of ZooKeeper, in one place: the only module that names the
//! blocking adapter's API (`zk_recipes_blocking`), so a rename there is a change here
//! only. Errors leave this module as strings that name the path they concern.

use std::path::Path;
use std::time::Duration;

use zk_recipes_blocking::{
    connect as adapter_connect, AddWatchMode, Candidate, Client, CounterFormat, CreateOptions,
    DoubleBarrier, ElectionEvent, Error, ErrorCode, EventType, LockChange, LockGuard, LostReason,
    Options, Tls, WatchStream,
};

/// A failure of a ZooKeeper call, worded for the user (it names the path).
#[derive(Debug)]
pub struct ZkError {
    /// What zkr was doing, and why it failed.
    pub message: String,
    /// The node concerned does not exist (zkr exits 1 for that, see `docs/zkr.md`).
    pub no_node: bool,
}

impl ZkError {
    fn at(what: &str, path: &str, e: Error) -> ZkError {
        ZkError {
            no_node: e.code() == Some(ErrorCode::NoNode),
            message: match e {
                // The error names the node already.
                Error::Node { .. } => format!("{what}: {e}"),
                _ => format!("{what} {path}: {e}"),
            },
        }
    }
}

impl std::fmt::Display for ZkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
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
}

/// One session to ZooKeeper. Clones share it.
#[derive(Clone)]
pub struct Zk {
    client: Client,
}

/// Connects and waits for a session. An expired session is not renewed: zkr is
/// short-lived, and whatever it held ended with the session.
pub fn connect(settings: &Settings<'_>) -> Result<Zk, ZkError> {
    let mut options = Options::default()
        .session_timeout(settings.session_timeout)
        .connect_timeout(settings.connect_timeout)
        .renew_on_expiry(false);
    let tls_error = |e: std::io::Error| ZkError {
        message: format!("TLS settings: {e}"),
        no_node: false,
    };
    match (settings.tls_ca, settings.tls_client) {
        (Some(ca), client) => {
            let mut tls = Tls::from_ca_file(ca).map_err(tls_error)?;
            if let Some((cert, key)) = client {
                tls = tls.client_cert_files(cert, key).map_err(tls_error)?;
            }
            options = options.tls(tls);
        }
        (None, Some(_)) => {
            return Err(ZkError {
                message: "--tls-cert and --tls-key need --tls-ca".into(),
                no_node: false,
            })
        }
        (None, None) => {}
    }
    adapter_connect(settings.servers, options)
        .map(|client| Zk { client })
        .map_err(|e| ZkError {
            message: format!("connect to {}: {e}", settings.servers),
            no_node: false,
        })
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
        LostReason::SessionExpired => "the session expired",
        LostReason::SessionClosed => "the session was closed",
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
        .map_err(|e| ZkError::at("enter barrier", &self.path, e))
    }

    /// Leaves; `Ok(false)` if others were still in the barrier when `timeout` passed.
    pub fn leave(&mut self, timeout: Option<Duration>) -> Result<bool, ZkError> {
        match timeout {
            Some(t) => self.barrier.leave_timeout(t),
            None => self.barrier.leave().map(|()| true),
        }
        .map_err(|e| ZkError::at("leave barrier", &self.path, e))
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
}

impl Zk {
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
        .map_err(|e| ZkError::at("lock", path, e))?;
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
        let err = |e| ZkError::at("elect", path, e);
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
        let err = |e| ZkError::at("leader", path, e);
        let observer = self.client.election_observer(path).map_err(err)?;
        Ok(observer.leader().map_err(err)?.map(|p| p.id))
    }

    /// A participant of the double barrier `path` for `count` participants.
    pub fn barrier(&self, path: &str, count: u32) -> BarrierSeat {
        BarrierSeat {
            barrier: self.client.double_barrier(path, count),
            path: path.to_string(),
        }
    }

    /// Puts `data` into the FIFO queue `path`; the item's node name when known.
    pub fn queue_put(&self, path: &str, data: Vec<u8>) -> Result<Option<String>, ZkError> {
        self.client
            .queue(path)
            .put(data)
            .map_err(|e| ZkError::at("queue put", path, e))
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
        .map_err(|e| ZkError::at("queue take", path, e))
    }

    /// The shared counter in `path` (`wide`: 8 bytes, Curator's `DistributedAtomicLong`;
    /// else 4 bytes, `SharedCount`), after adding `add` if given.
    pub fn counter(&self, path: &str, wide: bool, add: Option<i64>) -> Result<i64, ZkError> {
        let format = if wide {
            CounterFormat::I64
        } else {
            CounterFormat::I32
        };
        let err = |e| ZkError::at("counter", path, e);
        let mut counter = self.client.counter(path, format).map_err(err)?;
        match add {
            Some(n) => counter.add(n),
            None => counter.get(),
        }
        .map_err(err)
    }

    /// The data of node `path`.
    pub fn get(&self, path: &str) -> Result<Vec<u8>, ZkError> {
        self.client
            .get_data(path)
            .map(|(data, _)| data.to_vec())
            .map_err(|e| ZkError::at("get", path, e))
    }

    /// Sets the data of node `path`, creating it (and missing parents) if needed.
    pub fn set(&self, path: &str, data: Vec<u8>) -> Result<(), ZkError> {
        let err = |e| ZkError::at("set", path, e);
        loop {
            match self.client.set_data(path, data.clone(), None) {
                Ok(_) => return Ok(()),
                Err(e) if e.code() == Some(ErrorCode::NoNode) => {}
                Err(e) => return Err(err(e)),
            }
            match self
                .client
                .create_all(path, data.clone(), &CreateOptions::default())
            {
                Ok(_) => return Ok(()),
                Err(e) if e.code() == Some(ErrorCode::NodeExists) => {} // created meanwhile: set it
                Err(e) => return Err(err(e)),
            }
        }
    }

    /// The names of the children of `path`, sorted.
    pub fn ls(&self, path: &str) -> Result<Vec<String>, ZkError> {
        let mut names = self
            .client
            .get_children(path)
            .map_err(|e| ZkError::at("ls", path, e))?;
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
                Err(e) => return Err(ZkError::at("tree", &node, e)),
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
            .map_err(|e| ZkError::at("watch", path, e))
    }
}
