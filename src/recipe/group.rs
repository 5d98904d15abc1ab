//! Group membership (ZooKeeper paper: "group membership"), Curator-compatible: a
//! [`GroupMember`] keeps an ephemeral member node in the group directory; a [`View`]
//! follows the directory and reports who is in the group, with each member's data.
//!
//! # Member ([`GroupMember`]): Curator's `GroupMember` layout
//!
//! 1. The member node is `<dir>/<member-id>`, `EPHEMERAL`, no protection prefix, the
//!    payload as its data (what Curator's `GroupMember` makes with a `PersistentNode`
//!    at `ZKPaths.makePath(membershipPath, thisId)`); missing parents are created as
//!    containers. A Java member and a Rust member can share a group.
//! 2. It is an [`OwnedNode`]: kept in place while joined. Deleted by someone else while
//!    our session lives, or gone with an expired session, it is re-created (after the
//!    next `Connected` for an expiry) unless [`MemberConfig::recreate`] is off; a node
//!    of ours found at our path (a lost create reply) is adopted and its data set if
//!    it differs; another session's node at our path is waited out
//!    ([`MemberEvent::Blocked`]).
//! 3. [`leave`](GroupMember::leave) deletes it (only if it is ours).
//!
//! # View ([`View`])
//!
//! 1. `getChildren(<dir>, watch)`; every member not in the view yet is read with
//!    `getData(<dir>/<name>, watch)` (all pipelined behind the listing's answer).
//!    A missing directory is an empty group: `exists(<dir>, watch)` waits for it.
//! 2. The child watch firing lists again; the difference to the view is reported:
//!    [`ViewEvent::Left`] for names gone, [`ViewEvent::Joined`] once a new name's data
//!    is read. A data watch firing re-reads that member: [`ViewEvent::Changed`]. A
//!    member node deleted and re-created under the same name is `Left` then `Joined`.
//! 3. [`ViewEvent::Synced`] once a listing and the reads it asked for are all answered:
//!    the first complete view, and again after each resync.
//! 4. After a reconnect (or a new session after an expiry) the view is resynchronised:
//!    `sync`, list again, re-read members whose data watch is not registered, and
//!    report only the real differences. Nothing is lost or invented: the events are
//!    exactly the differences between what was reported and what the server has.
//!
//! At most one watch is registered per node (the directory's child watch, one data
//! watch per member, and an `exists` watch while the directory is missing), however
//! often the group changes.
//!
//! ```
//! use zk_recipes::recipe::group::{View, ViewConfig};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::time::Instant;
//!
//! let mut view = View::new(ViewConfig::new("/services/web"));
//! view.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! view.start(Instant::ZERO);
//! let (_, list) = view.poll_request().unwrap();
//! assert_eq!(list.op_code(), zk_recipes::proto::OpCode::GetChildren);
//! assert!(!view.is_synced());
//! ```

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;

use super::kit::{join, protocol_head, valid_path, Kit, Protocol, Reply};
use super::node::{node_commands, OwnedNode, OwnedNodeConfig, OwnedNodeEvent};
use super::watcher::{watcher_calls, watcher_protocol, Need, Watcher};
use super::{Machine, OpId, SessionChange};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

// ======================================================================================
// GroupMember
// ======================================================================================

/// How to join a group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemberConfig {
    /// The group directory (Curator's `membershipPath`).
    pub dir: String,
    /// This member's id, unique in the group (Curator's `thisId`): the node's name.
    pub id: String,
    /// The member's data (Curator's payload).
    pub data: Bytes,
    /// ACL of the member node and of parents created for it.
    pub acl: Vec<Acl>,
    /// Re-create the member node after a session expiry (once a new session is up) or
    /// a deletion by someone else (default: on, as Curator's `PersistentNode`).
    pub recreate: bool,
}

impl MemberConfig {
    /// Member `id` of group `dir` with `data`, open ACL, re-created.
    pub fn new(dir: &str, id: &str, data: impl Into<Bytes>) -> Self {
        MemberConfig {
            dir: dir.into(),
            id: id.into(),
            data: data.into(),
            acl: Acl::open_unsafe(),
            recreate: true,
        }
    }
}

/// What a [`GroupMember`] reports: its node's life. `Created` means joined (again),
/// `Lost` left involuntarily (followed by `Created` once re-created, or by `Failed`),
/// `Removed` left after [`GroupMember::leave`] (final), `Failed` final.
pub type MemberEvent = OwnedNodeEvent;

/// A member of a group; see the [module docs](self).
///
/// ```
/// use zk_recipes::recipe::group::{GroupMember, MemberConfig};
/// use zk_recipes::recipe::{Machine, Recipe, SessionChange};
/// use zk_recipes::time::Instant;
///
/// let mut m = GroupMember::new(MemberConfig::new("/services/web", "host-1", "10.0.0.1:80"));
/// m.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
/// m.join(Instant::ZERO);
/// let (_, create) = m.poll_request().unwrap(); // create2 /services/web/host-1 ...
/// let (_, read) = m.poll_request().unwrap();   // ... and getData(watch) right behind it
/// assert_eq!(create.op_code(), zk_recipes::proto::OpCode::Create2);
/// assert_eq!(read.op_code(), zk_recipes::proto::OpCode::GetData);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupMember {
    node: OwnedNode,
    id: String,
}

impl GroupMember {
    /// A member that does nothing until [`join`](Self::join).
    pub fn new(config: MemberConfig) -> Self {
        let mut path = join(&config.dir, &config.id);
        if config.id.contains('/') {
            // An id is one node name: a trailing slash makes `join` fail with
            // `InvalidPath` naming it.
            path.push('/');
        }
        let mut node = OwnedNodeConfig::new(&path, config.data);
        node.acl = config.acl;
        node.recreate = config.recreate;
        GroupMember {
            node: OwnedNode::new(node),
            id: config.id,
        }
    }

    /// This member's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The member node's path.
    pub fn path(&self) -> &str {
        &self.node.config().path
    }

    /// Joined (our node is in place and the connection is up)?
    pub fn is_joined(&self) -> bool {
        self.node.is_present()
    }

    /// The data we keep in our node.
    pub fn data(&self) -> &Bytes {
        &self.node.config().data
    }

    /// Has it ended (left or failed)?
    pub fn has_ended(&self) -> bool {
        self.node.has_ended()
    }

    /// Joins: creates our member node and keeps it in place.
    pub fn join(&mut self, now: Instant) {
        self.node.create(now)
    }

    /// Leaves: deletes our member node; [`MemberEvent::Removed`] once it is gone.
    pub fn leave(&mut self, now: Instant) {
        self.node.delete(now)
    }

    /// Changes our data (Curator's `setThisData`); [`MemberEvent::DataSet`] once
    /// written.
    pub fn set_data(&mut self, now: Instant, data: Bytes) {
        self.node.set_data(now, data)
    }
}

node_commands!(GroupMember: join, leave, set_data);

impl Machine for GroupMember {
    super::kit::follow_part!(node);
}

super::kit::recipe_events!(GroupMember => MemberEvent, node.poll_event);

// ======================================================================================
// View
// ======================================================================================

/// One member of a group as the [`View`] sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// The member node's name (the member id).
    pub name: String,
    /// Its data.
    pub data: Bytes,
    /// Its Stat.
    pub stat: Stat,
}

/// What a [`View`] follows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ViewConfig {
    /// The group directory.
    pub dir: String,
    /// Watch each member's data and report [`ViewEvent::Changed`] (default: on). Off,
    /// members are read once when they join (and again on a resync).
    pub watch_data: bool,
}

impl ViewConfig {
    /// A view of `dir`, member data watched.
    pub fn new(dir: &str) -> Self {
        ViewConfig {
            dir: dir.into(),
            watch_data: true,
        }
    }
}

/// What a [`View`] reports. `Failed` and `Closed` are final; `Joined`, `Left` and
/// `Changed` are edges in the order the server's answers reveal them; `Synced` marks
/// a complete view.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ViewEvent {
    /// The view is complete: the first time, and after each resync.
    Synced,
    /// A member joined (its data read).
    Joined(Member),
    /// A member left (as last seen).
    Left(Member),
    /// A member's data changed (the new version).
    Changed(Member),
    /// The connection dropped (or the session expired): the view may be stale.
    Suspended,
    /// A session is back; a resync is under way (`Synced` when it is done).
    Reconnected,
    /// Ended: the directory cannot be read (`NoAuth`, an invalid path), or the session
    /// was closed. Final.
    Failed(Error),
    /// Ended by [`close`](View::close). Final.
    Closed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ViewOp {
    Sync,
    List,
    Exists,
    Read(String),
}

/// A listing of the directory (with its child watch if none is registered).
const LIST: Need = Need::bit(0);
/// `exists(<dir>, watch)`: the directory is missing.
const EXISTS: Need = Need::bit(1);
/// The next listing re-reads members without a registered data watch.
const REREAD: Need = Need::bit(2);
/// A `sync` before the next listing (a reconnect may land on a lagging follower).
const SYNC: Need = Need::bit(3);
/// `Synced` is owed once the listing and the reads it asked for are answered.
const REPORT: Need = Need::bit(4);

/// The members of a group, kept up to date; see the [module docs](self).
///
/// | before | after |
/// | --- | --- |
/// | `running`, `done` | `watcher`'s life (`Idle`, `Running`, `Done`) |
/// | `live`, `waiting` | `watcher`'s link (`Down`, `Up`, `BackingOff`) |
/// | `suspended` | `watcher`: `Suspended` reported, `Reconnected` not yet |
/// | `need_list`, `need_exists`, `reread`, `sync_next`, `resyncing` | `need`: `LIST`, `EXISTS`, `REREAD`, `SYNC`, `REPORT` |
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct View {
    config: ViewConfig,
    watcher: Watcher,
    /// The view, sorted by name.
    members: Vec<Member>,
    /// Listed, data not read yet.
    awaiting: BTreeSet<String>,
    /// Names to (re)read.
    to_read: BTreeSet<String>,
    /// Names with a read in flight.
    reading: BTreeSet<String>,
    /// Registered data watches by member name.
    data_watch: BTreeMap<String, OpId>,
    child_watch: Option<OpId>,
    dir_watch: Option<OpId>,
    need: Need,
    /// `Synced` reported, no `Suspended` since.
    synced: bool,
    kit: Kit<ViewOp, ViewEvent>,
}

impl View {
    /// A view that does nothing until [`start`](Self::start).
    pub fn new(config: ViewConfig) -> Self {
        View {
            config,
            watcher: Watcher::default(),
            members: Vec::new(),
            awaiting: BTreeSet::new(),
            to_read: BTreeSet::new(),
            reading: BTreeSet::new(),
            data_watch: BTreeMap::new(),
            child_watch: None,
            dir_watch: None,
            need: Need::default(),
            synced: false,
            kit: Kit::default(),
        }
    }

    // ----- getters -----

    /// The configuration.
    pub fn config(&self) -> &ViewConfig {
        &self.config
    }

    /// The members as reported so far, sorted by name (a full snapshot).
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// One member by name.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.position(name).ok().map(|i| &self.members[i])
    }

    /// Names listed whose data is not read yet (not among [`members`](Self::members)
    /// until it is), sorted.
    pub fn unread(&self) -> impl Iterator<Item = &str> {
        self.awaiting.iter().map(String::as_str)
    }

    /// Is the view complete and the connection up (`Synced` reported, no `Suspended`
    /// since)?
    pub fn is_synced(&self) -> bool {
        self.synced && !self.watcher.is_done()
    }

    /// Has it ended?
    pub fn has_ended(&self) -> bool {
        self.watcher.is_done()
    }

    // ----- commands -----

    watcher_calls!(ViewEvent, "following the group"; resync);

    // ----- internals -----

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.members.binary_search_by(|m| m.name.as_str().cmp(name))
    }

    fn finish(&mut self, e: ViewEvent) {
        self.watcher.end();
        self.synced = false;
        self.kit.clear_requests();
        self.child_watch = None;
        self.dir_watch = None;
        self.data_watch.clear();
        self.kit.emit(e);
    }

    fn valid(&self) -> Result<(), Error> {
        valid_path(&self.config.dir)
    }

    fn resync(&mut self) {
        self.need.add(LIST);
        self.need.add(REREAD);
        self.need.add(REPORT);
        for n in &self.awaiting {
            if !self.reading.contains(n) {
                self.to_read.insert(n.clone());
            }
        }
    }

    fn again(&mut self, now: Instant) {
        self.need.add(SYNC);
        self.kit.failed(now);
    }

    fn drive(&mut self, now: Instant) {
        if !self.watcher.gate(&self.kit, now) {
            return;
        }
        let dir = self.config.dir.clone();
        if self.need.has(LIST) && !self.kit.any(|p| *p == ViewOp::List) {
            self.need.take(LIST);
            if self.need.take(SYNC) {
                self.kit.send(
                    ViewOp::Sync,
                    Request::Sync(PathRequest { path: dir.clone() }),
                );
            }
            let watch = self.child_watch.is_none();
            let op = self.kit.send(
                ViewOp::List,
                Request::GetChildren(PathWatch {
                    path: dir.clone(),
                    watch,
                }),
            );
            if watch {
                self.child_watch = Some(op);
            }
        }
        if self.need.has(EXISTS) && self.dir_watch.is_none() {
            self.need.take(EXISTS);
            let op = self.kit.send(
                ViewOp::Exists,
                Request::Exists(PathWatch {
                    path: dir.clone(),
                    watch: true,
                }),
            );
            self.dir_watch = Some(op);
        }
        if !self.to_read.is_empty() {
            let names: Vec<String> = self
                .to_read
                .iter()
                .filter(|n| !self.reading.contains(*n))
                .cloned()
                .collect();
            for name in names {
                self.to_read.remove(&name);
                self.reading.insert(name.clone());
                let watch = self.config.watch_data && !self.data_watch.contains_key(&name);
                let path = join(&dir, &name);
                let op = self.kit.send(
                    ViewOp::Read(name.clone()),
                    Request::GetData(PathWatch { path, watch }),
                );
                if watch {
                    self.data_watch.insert(name, op);
                }
            }
        }
        self.check_synced();
    }

    fn check_synced(&mut self) {
        if self.need.has(REPORT)
            && self.watcher.is_live()
            && !self.need.has(LIST)
            && !self.kit.any(|p| *p == ViewOp::List)
            && self.awaiting.is_empty()
            && self.to_read.is_empty()
            && self.reading.is_empty()
        {
            self.need.take(REPORT);
            self.synced = true;
            self.kit.emit(ViewEvent::Synced);
        }
    }

    fn apply_listing(&mut self, names: Vec<String>) {
        let listed: BTreeSet<String> = names.into_iter().collect();
        let mut left = Vec::new();
        for m in core::mem::take(&mut self.members) {
            if listed.contains(&m.name) {
                self.members.push(m);
            } else {
                self.to_read.remove(&m.name);
                left.push(m);
            }
        }
        self.awaiting.retain(|n| listed.contains(n));
        self.to_read.retain(|n| listed.contains(n));
        for m in left {
            self.kit.emit(ViewEvent::Left(m));
        }
        for n in listed {
            if self.position(&n).is_err() && self.awaiting.insert(n.clone()) {
                self.to_read.insert(n);
            }
        }
        if self.need.take(REREAD) {
            for m in &self.members {
                if !self.data_watch.contains_key(&m.name) {
                    self.to_read.insert(m.name.clone());
                }
            }
        }
    }

    fn on_list(&mut self, now: Instant, op: OpId, armed: bool, result: Reply) {
        if self.child_watch == Some(op) && !armed {
            self.child_watch = None;
        }
        match result {
            Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => {
                self.kit.succeeded();
                self.apply_listing(c);
            }
            Ok(_) => self.finish(ViewEvent::Failed(Error::UnexpectedReply)),
            Err(Error::Server(ErrorCode::NoNode)) => {
                // No directory: an empty group until it appears.
                self.kit.succeeded();
                self.apply_listing(Vec::new());
                self.need.add(EXISTS);
            }
            Err(e) if e.is_retryable() => {
                self.need.add(LIST);
                self.again(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.finish(ViewEvent::Failed(e)),
        }
    }

    fn on_read(&mut self, now: Instant, op: OpId, armed: bool, name: String, result: Reply) {
        self.reading.remove(&name);
        if !armed && self.data_watch.get(&name) == Some(&op) {
            self.data_watch.remove(&name);
        }
        match result {
            Ok(Response::Data { data, stat }) => {
                self.kit.succeeded();
                let member = Member {
                    name: name.clone(),
                    data,
                    stat,
                };
                if self.awaiting.remove(&name) {
                    if let Err(i) = self.position(&name) {
                        self.members.insert(i, member.clone());
                        self.kit.emit(ViewEvent::Joined(member));
                    }
                } else if let Ok(i) = self.position(&name) {
                    let old = &self.members[i];
                    if old.stat.czxid != stat.czxid {
                        // Deleted and re-created under the same name meanwhile.
                        let old = core::mem::replace(&mut self.members[i], member.clone());
                        self.kit.emit(ViewEvent::Left(old));
                        self.kit.emit(ViewEvent::Joined(member));
                    } else if stat.mzxid > old.stat.mzxid
                        || (stat.mzxid == old.stat.mzxid && old.data != member.data)
                    {
                        self.members[i] = member.clone();
                        self.kit.emit(ViewEvent::Changed(member));
                    }
                }
                // Otherwise a newer listing dropped the name already.
            }
            Ok(_) => self.finish(ViewEvent::Failed(Error::UnexpectedReply)),
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.awaiting.remove(&name);
                if let Ok(i) = self.position(&name) {
                    let m = self.members.remove(i);
                    self.kit.emit(ViewEvent::Left(m));
                }
            }
            Err(e) if e.is_retryable() => {
                if self.awaiting.contains(&name) || self.position(&name).is_ok() {
                    self.to_read.insert(name);
                }
                self.again(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.finish(ViewEvent::Failed(e)),
        }
    }

    fn on_exists(&mut self, now: Instant, op: OpId, armed: bool, result: Reply) {
        match result {
            Ok(_) => {
                // The directory appeared meanwhile: list it (the exists watch stays
                // registered as a data watch; it fires at most once more).
                self.kit.succeeded();
                self.need.add(LIST);
            }
            Err(Error::Server(ErrorCode::NoNode)) => self.kit.succeeded(), // armed
            Err(e) if e.is_retryable() => {
                if self.dir_watch == Some(op) && !armed {
                    self.dir_watch = None;
                }
                self.need.add(EXISTS);
                self.again(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.finish(ViewEvent::Failed(e)),
        }
    }
}

impl View {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, op: OpId, purpose: ViewOp, result: Reply, armed: bool) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again,
        // without asking for a second watch if the first was left.
        if self.watcher.is_done() {
            return;
        }
        match purpose {
            ViewOp::Sync => {}
            ViewOp::List => self.on_list(now, op, armed, result),
            ViewOp::Exists => self.on_exists(now, op, armed, result),
            ViewOp::Read(name) => self.on_read(now, op, armed, name, result),
        }
        self.drive(now);
    }

    /// A notification of a watch of ours (`on_watch`: `watcher_protocol!`): false if it
    /// is not a registration we hold.
    fn on_notice(&mut self, op: OpId, event: &WatchEvent) -> bool {
        if self.child_watch == Some(op) {
            self.child_watch = None;
            self.need.add(LIST);
        } else if self.dir_watch == Some(op) {
            self.dir_watch = None;
            self.need.add(LIST);
        } else {
            let name = event.path.rsplit('/').next().unwrap_or("").to_string();
            if self.data_watch.get(&name) != Some(&op) {
                return false; // not a registration we hold
            }
            self.data_watch.remove(&name);
            match event.event_type {
                EventType::NodeDeleted => {
                    self.awaiting.remove(&name);
                    self.to_read.remove(&name);
                    if let Ok(i) = self.position(&name) {
                        let m = self.members.remove(i);
                        self.kit.emit(ViewEvent::Left(m));
                    }
                }
                _ => {
                    if self.awaiting.contains(&name) || self.position(&name).is_ok() {
                        self.to_read.insert(name);
                    }
                }
            }
        }
        true
    }

    /// A session is back (`on_session`: `watcher_protocol!`).
    fn on_resync(&mut self, _: bool) {
        // A reconnect may land on a lagging follower.
        self.need.add(SYNC);
        if self.watcher.resume() {
            self.kit.emit(ViewEvent::Reconnected);
        }
        self.resync();
    }

    fn on_suspend(&mut self) {
        self.synced = false;
        self.kit.emit(ViewEvent::Suspended);
    }

    /// The session expired: its watches and reads went with it.
    fn forget(&mut self) {
        self.child_watch = None;
        self.dir_watch = None;
        self.data_watch.clear();
        self.reading.clear();
    }
}

impl Protocol for View {
    protocol_head!(ViewEvent, armed);

    watcher_protocol!(ViewEvent);

    fn check(&self) {
        debug_assert!(
            self.members.windows(2).all(|w| w[0].name < w[1].name),
            "the view is sorted by name, each name once"
        );
        debug_assert!(
            self.awaiting.iter().all(|n| self.position(n).is_err()),
            "a name awaiting its first read is not a member yet"
        );
        debug_assert!(
            !self.synced || self.watcher.is_running(),
            "only a running view is synced"
        );
        debug_assert!(
            self.watcher.is_live() || (self.reading.is_empty() && self.kit.is_quiet()),
            "without a session nothing is in flight"
        );
        debug_assert!(
            !self.watcher.is_done()
                || (self.child_watch.is_none()
                    && self.dir_watch.is_none()
                    && self.data_watch.is_empty()),
            "an ended view holds no watch"
        );
    }
}
