//! A [`GroupMember`], a [`View`] of its group and a rendezvous [`Worker`], all on one
//! session ([`Trio`], hosted on [`ME`] of the model world, [`harness`]),
//! driven by bytes (proptest and libFuzzer share it): the common faults, and the
//! group's actors:
//!
//! * another session adds or removes a member (`a`, `b`; the directory is made by an
//!   operator when missing);
//! * an operator deletes a member (ours too) or rewrites one's data;
//! * another session makes the rendezvous node `/z` (ephemeral), writes an address into
//!   it, or deletes it;
//! * the user changes the member's data.
//!
//! Safety, after every step: the view's events replay exactly to its snapshot (no
//! `Joined` twice, no `Left` of a stranger); at most one watch per machine per node
//! (watches set by requests whose reply was lost with the connection aside: the client
//! never registered them); no event after a final one; the member's `Created` names our
//! node as the client last heard of it (its czxid, owned by the current session) and
//! its `Reconnected` (node verified) only while our node exists as last heard.
//!
//! Liveness and cleanliness, once faults stop (the connection comes back, everything is
//! answered, time passes): the view is synced and equals the server's children with
//! their data; our member node exists, is owned by the current session and holds our
//! data; a worker still waiting holds the latest non-empty address in `/z`. Then the
//! member leaves: it must end with `Removed` and no node of ours may be left.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::group::{
    GroupMember, MemberConfig, MemberEvent, View, ViewConfig, ViewEvent,
};
use zk_recipes::recipe::rendezvous::{RendezvousEvent, Worker};
use zk_recipes::recipe::{Machine, OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

use super::harness::{self, FaultCounts, Harness, Script, ME};
use super::zk::{Happened, Link};

const DIR: &str = "/g";
const MINE: &str = "/g/me";
const ZR: &str = "/z";
/// The client that writes as the other session.
const OTHER: usize = 1;
const NAMES: [&str; 3] = ["a", "b", "me"];

/// The three machines on one session, as one recipe: each one's request ids are tagged
/// with which machine sent it (`op * 4 + who`: 0 member, 1 view, 2 worker).
pub struct Trio {
    /// The group member.
    pub member: GroupMember,
    /// The view of the group.
    pub view: View,
    /// The rendezvous worker.
    pub worker: Worker,
    /// Requests whose reply was lost with the connection (a watch they set on the
    /// server was never registered by the client).
    lost: BTreeSet<OpId>,
}

/// An event of one of the [`Trio`]'s machines.
#[derive(Clone, Debug)]
pub enum TrioEvent {
    /// The member's.
    Member(MemberEvent),
    /// The view's.
    View(ViewEvent),
    /// The worker's.
    Worker(RendezvousEvent),
}

impl Trio {
    fn each(&mut self, mut f: impl FnMut(&mut dyn zk_recipes::recipe::AnyRecipe)) {
        f(&mut self.member);
        f(&mut self.view);
        f(&mut self.worker);
    }

    fn one(&mut self, op: OpId) -> (&mut dyn zk_recipes::recipe::AnyRecipe, OpId) {
        let inner = op / 4;
        match op % 4 {
            0 => (&mut self.member, inner),
            1 => (&mut self.view, inner),
            _ => (&mut self.worker, inner),
        }
    }
}

impl Machine for Trio {
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        if matches!(result, Err(Error::ConnectionLoss)) {
            self.lost.insert(op);
        }
        let (m, inner) = self.one(op);
        m.handle_reply(now, inner, result);
    }
    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        let (m, inner) = self.one(op);
        m.handle_watch(now, inner, event);
    }
    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.each(|m| m.handle_session(now, change));
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.each(|m| {
            if m.poll_timeout().is_some_and(|t| t <= now) {
                m.handle_timeout(now)
            }
        });
    }
    fn handle_abandon(&mut self, now: Instant) {
        self.each(|m| m.handle_abandon(now));
    }
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        if let Some((op, r)) = self.member.poll_request() {
            return Some((op * 4, r));
        }
        if let Some((op, r)) = self.view.poll_request() {
            return Some((op * 4 + 1, r));
        }
        self.worker.poll_request().map(|(op, r)| (op * 4 + 2, r))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        [
            self.member.poll_timeout(),
            self.view.poll_timeout(),
            self.worker.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
    fn is_done(&self) -> bool {
        self.member.is_done() && self.view.is_done() && self.worker.is_done()
    }
}

impl Recipe for Trio {
    type Event = TrioEvent;
    fn poll_event(&mut self) -> Option<TrioEvent> {
        if let Some(e) = self.member.poll_event() {
            return Some(TrioEvent::Member(e));
        }
        if let Some(e) = self.view.poll_event() {
            return Some(TrioEvent::View(e));
        }
        self.worker.poll_event().map(TrioEvent::Worker)
    }
}

stats! {
    /// What a schedule exercised (to show the harness is not vacuous).
    pub struct Stats {
        /// View `Joined` + `Left` + `Changed` events.
        pub view_changes: usize,
        /// View resyncs completed (`Synced` events).
        pub syncs: usize,
        /// Member `Created` events (joins and re-creations).
        pub member_created: usize,
        /// Member `Lost` events.
        pub member_lost: usize,
        /// Member `Reconnected` events (node verified after a reconnect).
        pub member_reconnected: usize,
        /// Worker `Address` events.
        pub addresses: usize,
        /// Worker `Gone` events.
        pub gone: usize,
        /// An operator deleted our member node.
        pub operator_deletes: usize,
        /// The common faults.
        pub faults: FaultCounts,
    }
}

type H = Harness<Trio>;

struct GroupScript {
    stats: Stats,
    member_events: Vec<MemberEvent>,
    view_events: Vec<ViewEvent>,
    worker_events: Vec<RendezvousEvent>,
    /// The view's members replayed from its events.
    shadow: BTreeMap<String, (Bytes, i64)>,
    /// The end-state checks passed and the member was asked to leave.
    leaving: bool,
}

fn write(h: &mut H, by: Option<usize>, req: Request) {
    let line = format!("  {by:?} writes {}", harness::describe(&req));
    let r = h.world.zk.write_as(by, &req);
    h.note(format!("{line}: {r:?}"));
}

fn create(path: &str, data: Bytes, mode: CreateMode) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data,
        acl: Acl::open_unsafe(),
        flags: mode.to_i32(),
    })
}

fn delete(path: &str) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version: -1,
    })
}

fn set(path: &str, data: Bytes) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data,
        version: -1,
    })
}

impl GroupScript {
    fn replay_view(&mut self, e: &ViewEvent) -> Result<(), String> {
        if matches!(
            self.view_events.last(),
            Some(ViewEvent::Failed(_) | ViewEvent::Closed)
        ) {
            return Err(format!("view event after final: {e:?}"));
        }
        let entry = |m: &zk_recipes::recipe::group::Member| (m.data.clone(), m.stat.czxid);
        let (name, had, wants) = match e {
            ViewEvent::Joined(m) => (&m.name, self.shadow.insert(m.name.clone(), entry(m)), false),
            ViewEvent::Left(m) => (&m.name, self.shadow.remove(&m.name), true),
            ViewEvent::Changed(m) => (&m.name, self.shadow.insert(m.name.clone(), entry(m)), true),
            _ => return Ok(()),
        };
        if had.is_some() != wants {
            return Err(format!(
                "{e:?} does not fit the view's events so far ({name})"
            ));
        }
        Ok(())
    }

    /// Our member node as the client last heard of it: its czxid.
    fn heard_mine(h: &H) -> Option<i64> {
        h.world
            .zk
            .children_at_zxid(DIR, h.seen_zxid())
            .into_iter()
            .find(|(n, _)| n == "me")
            .map(|(_, c)| c)
    }

    fn check_member(&mut self, h: &H, e: &MemberEvent) -> Result<(), String> {
        if self.member_events.last().is_some_and(|l| l.is_final()) {
            return Err(format!("member event after final: {e:?}"));
        }
        match e {
            MemberEvent::Created { stat } => {
                self.stats.member_created += 1;
                if stat.ephemeral_owner != h.session_id() {
                    return Err(format!(
                        "Created with owner {:#x}, not our session {:#x}",
                        stat.ephemeral_owner,
                        h.session_id()
                    ));
                }
                match Self::heard_mine(h) {
                    Some(c) if c == stat.czxid => {}
                    c => {
                        return Err(format!(
                            "Created (czxid {}) but our node as last heard is {c:?}",
                            stat.czxid
                        ))
                    }
                }
            }
            MemberEvent::Reconnected => {
                self.stats.member_reconnected += 1;
                if Self::heard_mine(h).is_none() {
                    return Err("member Reconnected while our node is gone as last heard".into());
                }
            }
            MemberEvent::Lost { .. } => self.stats.member_lost += 1,
            _ => {}
        }
        Ok(())
    }

    /// At most one watch per machine per node (the view may hold a child watch and an
    /// exists watch on the directory at once), and the view's snapshot is its events.
    fn check_machines(&self, h: &H) -> Result<(), String> {
        let Some(t) = h.machine() else {
            return Ok(());
        };
        for who in 0..3 {
            let mut per: BTreeMap<&str, usize> = BTreeMap::new();
            for (p, _, op) in h.world.zk.armed(ME) {
                if op % 4 == who && !t.lost.contains(&op) {
                    *per.entry(p).or_default() += 1;
                }
            }
            let limit = |p: &str| if who == 1 && p == DIR { 2 } else { 1 };
            if let Some((p, n)) = per.iter().find(|(p, n)| **n > limit(p)) {
                return Err(format!("machine {who}: {n} watches on {p}"));
            }
        }
        let snap: BTreeMap<String, (Bytes, i64)> = t
            .view
            .members()
            .iter()
            .map(|m| (m.name.clone(), (m.data.clone(), m.stat.czxid)))
            .collect();
        if snap != self.shadow {
            return Err(format!(
                "view snapshot {snap:?} is not its events {:?}",
                self.shadow
            ));
        }
        Ok(())
    }

    /// Nothing on its way and no machine waiting for time.
    fn quiet(h: &H) -> bool {
        let s = &h.world.zk.sessions[ME];
        s.link == Link::Up
            && s.wire.is_empty()
            && s.out.is_empty()
            && h.world.deadline(ME).is_none()
    }

    /// Once faults stopped and all is quiet: the view, our node and the worker are
    /// where they must be.
    fn end_state(&self, h: &H) -> Result<(), String> {
        let Some(t) = h.machine() else {
            return Err("the machines ended before leaving".into());
        };
        let zk = &h.world.zk;
        if !t.view.has_ended() {
            if !t.view.is_synced() {
                return Err(format!("view not synced: {:?}", self.view_events));
            }
            let server: BTreeMap<String, (Bytes, i64)> = zk
                .children(DIR)
                .into_iter()
                .filter_map(|n| {
                    let node = zk.nodes.get(&format!("{DIR}/{n}"))?;
                    Some((n, (node.data.clone(), node.czxid)))
                })
                .collect();
            if server != self.shadow {
                return Err(format!("view {:?} != server {server:?}", self.shadow));
            }
        }
        if !t.member.has_ended() {
            match zk.nodes.get(MINE) {
                Some(n) if n.owner == h.session_id() && n.data == *t.member.data() => {}
                Some(n) if n.owner == zk.sessions[OTHER].id => {} // another session's
                n => {
                    return Err(format!(
                        "member node {n:?}; events {:?}",
                        self.member_events
                    ))
                }
            }
        }
        if !t.worker.is_done() {
            if let Some(n) = zk.nodes.get(ZR) {
                if !n.data.is_empty() && t.worker.address() != Some(&n.data) {
                    return Err(format!(
                        "worker has {:?}, z_r holds {:?}",
                        t.worker.address(),
                        n.data
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Script<Trio> for GroupScript {
    const ACTS: u8 = 4;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        match which {
            0 => {
                // Another session adds or removes a member.
                let path = format!("{DIR}/{}", NAMES[usize::from(arg % 2)]);
                if h.world.zk.nodes.contains_key(&path) {
                    write(h, Some(OTHER), delete(&path));
                } else {
                    if !h.world.zk.nodes.contains_key(DIR) {
                        write(h, None, create(DIR, Bytes::new(), CreateMode::Persistent));
                    }
                    let data = Bytes::from(format!("{arg}"));
                    write(h, Some(OTHER), create(&path, data, CreateMode::Ephemeral));
                }
            }
            1 => {
                // An operator deletes a member (ours too) or rewrites its data.
                let path = format!("{DIR}/{}", NAMES[usize::from(arg % 3)]);
                if arg & 4 != 0 {
                    if path == MINE && h.world.zk.nodes.contains_key(MINE) {
                        self.stats.operator_deletes += 1;
                    }
                    write(h, None, delete(&path));
                } else {
                    write(h, None, set(&path, Bytes::from(format!("w{arg}"))));
                }
            }
            2 => match arg % 3 {
                0 => write(
                    h,
                    Some(OTHER),
                    create(ZR, Bytes::new(), CreateMode::Ephemeral),
                ),
                1 => write(h, Some(OTHER), set(ZR, Bytes::from(format!("addr{arg}")))),
                _ => write(h, Some(OTHER), delete(ZR)),
            },
            _ => {
                let data = Bytes::from(format!("mine{}", arg % 3));
                h.note(format!("  user set_data {data:?}"));
                h.user(self, |t, now| t.member.set_data(now, data))?;
            }
        }
        Ok(())
    }

    fn check(&mut self, h: &H, happened: &[Happened<TrioEvent>]) -> Result<(), String> {
        for x in happened {
            let Happened::Event(e) = x else { continue };
            match e {
                TrioEvent::Member(e) => {
                    self.check_member(h, e)?;
                    self.member_events.push(e.clone());
                }
                TrioEvent::View(e) => {
                    self.replay_view(e)?;
                    match e {
                        ViewEvent::Joined(_) | ViewEvent::Left(_) | ViewEvent::Changed(_) => {
                            self.stats.view_changes += 1
                        }
                        ViewEvent::Synced => self.stats.syncs += 1,
                        _ => {}
                    }
                    self.view_events.push(e.clone());
                }
                TrioEvent::Worker(e) => {
                    if self.worker_events.last().is_some_and(|l| l.is_final()) {
                        return Err(format!("worker event after final: {e:?}"));
                    }
                    match e {
                        RendezvousEvent::Address { .. } => self.stats.addresses += 1,
                        RendezvousEvent::Gone => self.stats.gone += 1,
                        _ => {}
                    }
                    self.worker_events.push(e.clone());
                }
            }
        }
        self.check_machines(h)
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if self.leaving {
            return Ok(h.machine().is_none_or(|t| t.member.is_done()));
        }
        if !Self::quiet(h) {
            if round + 2 >= harness::SETTLE_ROUNDS {
                return Err("no quiescence after faults stopped".into());
            }
            return Ok(false);
        }
        self.end_state(h)?;
        // Leave: the node goes, Removed is reported.
        self.leaving = true;
        h.note("  the member leaves".into());
        h.user(self, |t, now| t.member.leave(now))?;
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if !self.leaving {
            return Err("liveness: never quiet once faults stopped".into());
        }
        match self.member_events.last() {
            Some(MemberEvent::Removed) | Some(MemberEvent::Failed { .. }) => {}
            e => return Err(format!("liveness: leave did not end: {e:?}")),
        }
        if h.machine().is_some_and(|t| !t.member.is_done()) {
            return Err("liveness: member not done after leaving".into());
        }
        let left = h.ours();
        if !left.is_empty() {
            return Err(format!("cleanliness: nodes of ours left behind: {left:?}"));
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the violated invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let mut h: H = Harness::new(2);
    let mut script = GroupScript {
        stats: Stats::default(),
        member_events: Vec::new(),
        view_events: Vec::new(),
        worker_events: Vec::new(),
        shadow: BTreeMap::new(),
        leaving: false,
    };
    let trio = Trio {
        member: GroupMember::new(MemberConfig::new(DIR, "me", "mine")),
        view: View::new(ViewConfig::new(DIR)),
        worker: Worker::new(ZR),
        lost: BTreeSet::new(),
    };
    let started = h.host(&mut script, trio, |t, now| {
        t.member.join(now);
        t.view.start(now);
        t.worker.start(now);
    });
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
