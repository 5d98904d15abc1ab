//! A service-discovery [`Registration`] and a [`ServiceCache`] of its service, both on
//! one session ([`Duo`], hosted on [`ME`] of the model world, [`harness`]), driven by
//! bytes (proptest and libFuzzer share it): the common faults, and discovery's actors:
//!
//! * another session registers or unregisters an instance (`a`, `b`; enabled or not;
//!   the service node is made by an operator when missing);
//! * an operator deletes an instance (ours too) or rewrites one's data: another valid
//!   instance, or data that is not an instance;
//! * the user updates our instance, or picks one from the cache and may report it
//!   failing (the down-instance policy; time passes between steps).
//!
//! Safety, after every step: the cache's events replay exactly to its snapshot (no
//! `Added` twice, no `Updated`/`Removed` of a stranger, an unreadable node is not
//! cached); at most one watch per machine per node (the cache may hold a child watch
//! and an `exists` watch on the service node; watches of requests whose reply was lost
//! aside); no event after a final one; the registration's `Created` names our node as
//! the client last heard of it (owned by the current session) and its `Reconnected`
//! only while our node exists as last heard; a pick is a cached instance, enabled and
//! not down.
//!
//! Liveness and cleanliness, once faults stop: the cache is synced and equals the
//! server's readable instances; our instance node exists, is owned by the current
//! session and holds our instance's JSON. Then we unregister: it must end with
//! `Removed` and no node of ours may be left.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::discovery::{
    DownPolicy, Registration, RegistrationEvent, ServiceCache, ServiceCacheEvent, ServiceInstance,
    Strategy,
};
use zk_recipes::recipe::{Machine, OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

use super::harness::{self, FaultCounts, Harness, Script, ME};
use super::zk::{Happened, Link};

const BASE: &str = "/s";
const SERVICE: &str = "/s/web";
const MINE: &str = "/s/web/me";
/// The client that writes as the other session.
const OTHER: usize = 1;
const NAMES: [&str; 3] = ["a", "b", "me"];

/// The two machines on one session, as one recipe: request ids are tagged with the
/// machine that sent it (`op * 2 + who`: 0 registration, 1 cache).
pub struct Duo {
    /// Our instance's registration.
    pub registration: Registration,
    /// The cache of its service.
    pub cache: ServiceCache,
    /// Requests whose reply was lost with the connection.
    lost: BTreeSet<OpId>,
}

/// An event of one of the [`Duo`]'s machines.
#[derive(Clone, Debug)]
pub enum DuoEvent {
    /// The registration's.
    Registration(RegistrationEvent),
    /// The cache's.
    Cache(ServiceCacheEvent),
}

impl Duo {
    fn one(&mut self, op: OpId) -> (&mut dyn zk_recipes::recipe::AnyRecipe, OpId) {
        if op % 2 == 0 {
            (&mut self.registration, op / 2)
        } else {
            (&mut self.cache, op / 2)
        }
    }
}

impl Machine for Duo {
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
        self.registration.handle_session(now, change);
        self.cache.handle_session(now, change);
    }
    fn handle_timeout(&mut self, now: Instant) {
        if self.registration.poll_timeout().is_some_and(|t| t <= now) {
            self.registration.handle_timeout(now);
        }
        if self.cache.poll_timeout().is_some_and(|t| t <= now) {
            self.cache.handle_timeout(now);
        }
    }
    fn handle_abandon(&mut self, now: Instant) {
        self.registration.handle_abandon(now);
        self.cache.handle_abandon(now);
    }
    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        if let Some((op, r)) = self.registration.poll_request() {
            return Some((op * 2, r));
        }
        self.cache.poll_request().map(|(op, r)| (op * 2 + 1, r))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        [self.registration.poll_timeout(), self.cache.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }
    fn is_done(&self) -> bool {
        self.registration.is_done() && self.cache.is_done()
    }
}

impl Recipe for Duo {
    type Event = DuoEvent;
    fn poll_event(&mut self) -> Option<DuoEvent> {
        if let Some(e) = self.registration.poll_event() {
            return Some(DuoEvent::Registration(e));
        }
        self.cache.poll_event().map(DuoEvent::Cache)
    }
}

stats! {
    /// What a schedule exercised (to show the harness is not vacuous).
    pub struct Stats {
        /// Cache `Added` events.
        pub added: usize,
        /// Cache `Updated` events.
        pub updated: usize,
        /// Cache `Removed` events.
        pub removed: usize,
        /// Cache `Unreadable` events.
        pub unreadable: usize,
        /// Cache `Synced` events.
        pub syncs: usize,
        /// Registration `Created` events (registrations and re-creations).
        pub created: usize,
        /// Registration `Lost` events.
        pub lost: usize,
        /// Registration `Reconnected` events.
        pub reconnected: usize,
        /// Picks that returned an instance.
        pub picks: usize,
        /// Picks made while some cached instance was down.
        pub picks_around_down: usize,
        /// An operator deleted our instance node.
        pub operator_deletes: usize,
        /// The common faults.
        pub faults: FaultCounts,
    }
}

type H = Harness<Duo>;

struct DiscoveryScript {
    stats: Stats,
    registration_events: Vec<RegistrationEvent>,
    cache_events: Vec<ServiceCacheEvent>,
    /// The cache's instances replayed from its events, by id.
    shadow: BTreeMap<String, ServiceInstance>,
    /// Our instance as last given.
    mine: ServiceInstance,
    /// The end-state checks passed and we were asked to unregister.
    leaving: bool,
}

fn write(h: &mut H, by: Option<usize>, req: Request) {
    let line = format!("  {by:?} writes {}", harness::describe(&req));
    let r = h.world.zk.write_as(by, &req);
    h.note(format!("{line}: {r:?}"));
}

fn instance(id: &str, arg: u8) -> ServiceInstance {
    let mut i = ServiceInstance::new("web", id, "10.0.0.1", i32::from(arg));
    i.enabled = arg & 8 == 0;
    i.payload = (arg & 16 != 0).then(|| format!("{{\"w\":[{arg},\"x\\\"y\"]}}"));
    i
}

fn delete(path: &str) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version: -1,
    })
}

fn json(i: &ServiceInstance) -> Bytes {
    Bytes::from(i.to_json().expect("a valid payload"))
}

impl DiscoveryScript {
    fn replay_cache(&mut self, e: &ServiceCacheEvent) -> Result<(), String> {
        if self.cache_events.last().is_some_and(|l| l.is_final()) {
            return Err(format!("cache event after final: {e:?}"));
        }
        let (id, had, wants) = match e {
            ServiceCacheEvent::Added(i) => {
                self.stats.added += 1;
                (&i.id, self.shadow.insert(i.id.clone(), i.clone()), false)
            }
            ServiceCacheEvent::Updated(i) => {
                self.stats.updated += 1;
                (&i.id, self.shadow.insert(i.id.clone(), i.clone()), true)
            }
            ServiceCacheEvent::Removed(i) => {
                self.stats.removed += 1;
                (&i.id, self.shadow.remove(&i.id), true)
            }
            ServiceCacheEvent::Unreadable { id, .. } => {
                self.stats.unreadable += 1;
                (id, self.shadow.get(id).cloned(), false)
            }
            ServiceCacheEvent::Synced => {
                self.stats.syncs += 1;
                return Ok(());
            }
            _ => return Ok(()),
        };
        if had.is_some() != wants {
            return Err(format!(
                "{e:?} does not fit the cache's events so far ({id})"
            ));
        }
        Ok(())
    }

    /// Our instance node as the client last heard of it: its czxid.
    fn heard_mine(h: &H) -> Option<i64> {
        h.world
            .zk
            .children_at_zxid(SERVICE, h.seen_zxid())
            .into_iter()
            .find(|(n, _)| n == "me")
            .map(|(_, c)| c)
    }

    fn check_registration(&mut self, h: &H, e: &RegistrationEvent) -> Result<(), String> {
        if self
            .registration_events
            .last()
            .is_some_and(|l| l.is_final())
        {
            return Err(format!("registration event after final: {e:?}"));
        }
        match e {
            RegistrationEvent::Created { stat } => {
                self.stats.created += 1;
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
            RegistrationEvent::Reconnected => {
                self.stats.reconnected += 1;
                if Self::heard_mine(h).is_none() {
                    return Err("Reconnected while our node is gone as last heard".into());
                }
            }
            RegistrationEvent::Lost { .. } => self.stats.lost += 1,
            _ => {}
        }
        Ok(())
    }

    /// At most one watch per machine per node, and the cache's snapshot is its events.
    fn check_machines(&self, h: &H) -> Result<(), String> {
        let Some(d) = h.machine() else {
            return Ok(());
        };
        for who in 0..2 {
            let mut per: BTreeMap<&str, usize> = BTreeMap::new();
            for (p, _, op) in h.world.zk.armed(ME) {
                if op % 2 == who && !d.lost.contains(&op) {
                    *per.entry(p).or_default() += 1;
                }
            }
            let limit = |p: &str| if who == 1 && p == SERVICE { 2 } else { 1 };
            if let Some((p, n)) = per.iter().find(|(p, n)| **n > limit(p)) {
                return Err(format!("machine {who}: {n} watches on {p}"));
            }
        }
        let snap: Vec<&ServiceInstance> = d.cache.instances().iter().collect();
        let shadow: Vec<&ServiceInstance> = self.shadow.values().collect();
        if snap != shadow {
            return Err(format!("cache {snap:?} is not its events {shadow:?}"));
        }
        Ok(())
    }

    /// The user picks an instance (and maybe reports it failing).
    fn pick(&mut self, h: &mut H, arg: u8) -> Result<(), String> {
        let picked = h.user(self, |d, now| {
            let down = d
                .cache
                .instances()
                .iter()
                .any(|i| d.cache.provider().is_down(&i.id));
            let p = d.cache.pick(now);
            let picked_down = p
                .as_ref()
                .is_some_and(|i| d.cache.provider().is_down(&i.id));
            if let Some(i) = &p {
                if arg & 1 != 0 {
                    d.cache.note_error(now, &i.id);
                }
            }
            (p, down, picked_down)
        })?;
        let Some((Some(p), down, picked_down)) = picked else {
            return Ok(());
        };
        h.note(format!("  user picked {} (port {:?})", p.id, p.port));
        self.stats.picks += 1;
        self.stats.picks_around_down += usize::from(down);
        let d = h.machine().ok_or("picked from a machine that is gone")?;
        if !d.cache.instances().contains(&p) || !p.enabled || picked_down {
            return Err(format!("picked {p:?}: not a cached, enabled, up instance"));
        }
        Ok(())
    }

    fn quiet(h: &H) -> bool {
        let s = &h.world.zk.sessions[ME];
        s.link == Link::Up
            && s.wire.is_empty()
            && s.out.is_empty()
            && h.world.deadline(ME).is_none()
    }

    /// Once faults stopped and all is quiet: the cache and our node are where they
    /// must be.
    fn end_state(&self, h: &H) -> Result<(), String> {
        let Some(d) = h.machine() else {
            return Err("the machines ended before unregistering".into());
        };
        let zk = &h.world.zk;
        if !d.cache.has_ended() {
            if !d.cache.is_synced() {
                return Err(format!("cache not synced: {:?}", self.cache_events));
            }
            let server: BTreeMap<String, ServiceInstance> = zk
                .children(SERVICE)
                .into_iter()
                .filter_map(|n| {
                    let node = zk.nodes.get(&format!("{SERVICE}/{n}"))?;
                    Some((n, ServiceInstance::from_json(&node.data).ok()?))
                })
                .collect();
            if server != self.shadow {
                return Err(format!("cache {:?} != server {server:?}", self.shadow));
            }
        }
        if !d.registration.has_ended() {
            match zk.nodes.get(MINE) {
                Some(n) if n.owner == h.session_id() && n.data == *d.registration.data() => {}
                n => {
                    return Err(format!(
                        "instance node {n:?}; events {:?}",
                        self.registration_events
                    ))
                }
            }
            if d.registration.data() != &json(&self.mine) {
                return Err("the registration keeps other data than our instance".into());
            }
        }
        Ok(())
    }
}

impl Script<Duo> for DiscoveryScript {
    const ACTS: u8 = 4;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        match which {
            0 => {
                // Another session registers or unregisters an instance.
                let id = NAMES[usize::from(arg % 2)];
                let path = format!("{SERVICE}/{id}");
                if h.world.zk.nodes.contains_key(&path) {
                    write(h, Some(OTHER), delete(&path));
                } else {
                    for dir in [BASE, SERVICE] {
                        if !h.world.zk.nodes.contains_key(dir) {
                            write(
                                h,
                                None,
                                harness::create_request(dir, CreateMode::Persistent),
                            );
                        }
                    }
                    let req = CreateRequest::new(
                        &path,
                        json(&instance(id, arg)),
                        Acl::open_unsafe(),
                        CreateMode::Ephemeral,
                    );
                    write(h, Some(OTHER), Request::Create(req));
                }
            }
            1 => {
                // An operator deletes an instance (ours too) or rewrites its data.
                let id = NAMES[usize::from(arg % 3)];
                let path = format!("{SERVICE}/{id}");
                if arg & 4 != 0 {
                    if path == MINE && h.world.zk.nodes.contains_key(MINE) {
                        self.stats.operator_deletes += 1;
                    }
                    write(h, None, delete(&path));
                } else {
                    let data = if arg & 32 != 0 {
                        Bytes::from_static(b"{\"name\":\"web\",\"id\":")
                    } else {
                        json(&instance(id, arg))
                    };
                    let req = SetDataRequest {
                        path,
                        data,
                        version: -1,
                    };
                    write(h, None, Request::SetData(req));
                }
            }
            2 => {
                let mut mine = self.mine.clone();
                mine.port = Some(i32::from(arg));
                h.note(format!("  user updates our port to {arg}"));
                let r = h.user(self, |d, now| d.registration.update(now, &mine))?;
                if let Some(Err(r)) = r {
                    return Err(format!("update refused: {r:?}"));
                }
                self.mine = mine;
            }
            _ => self.pick(h, arg)?,
        }
        Ok(())
    }

    fn check(&mut self, h: &H, happened: &[Happened<DuoEvent>]) -> Result<(), String> {
        for x in happened {
            let Happened::Event(e) = x else { continue };
            match e {
                DuoEvent::Registration(e) => {
                    self.check_registration(h, e)?;
                    self.registration_events.push(e.clone());
                }
                DuoEvent::Cache(e) => {
                    self.replay_cache(e)?;
                    self.cache_events.push(e.clone());
                }
            }
        }
        self.check_machines(h)
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if self.leaving {
            return Ok(h.machine().is_none_or(|d| d.registration.is_done()));
        }
        if !Self::quiet(h) {
            if round + 2 >= harness::SETTLE_ROUNDS {
                return Err("no quiescence after faults stopped".into());
            }
            return Ok(false);
        }
        self.end_state(h)?;
        self.leaving = true;
        h.note("  we unregister".into());
        h.user(self, |d, now| d.registration.unregister(now))?;
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if !self.leaving {
            return Err("liveness: never quiet once faults stopped".into());
        }
        match self.registration_events.last() {
            Some(RegistrationEvent::Removed) | Some(RegistrationEvent::Failed { .. }) => {}
            e => return Err(format!("liveness: unregister did not end: {e:?}")),
        }
        if h.machine().is_some_and(|d| !d.registration.is_done()) {
            return Err("liveness: registration not done after unregistering".into());
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
    let mine = ServiceInstance::new("web", "me", "127.0.0.1", 8080);
    let mut script = DiscoveryScript {
        stats: Stats::default(),
        registration_events: Vec::new(),
        cache_events: Vec::new(),
        shadow: BTreeMap::new(),
        mine: mine.clone(),
        leaving: false,
    };
    let policy = DownPolicy {
        timeout: core::time::Duration::from_millis(300),
        threshold: 1,
    };
    let duo = Duo {
        registration: Registration::new(BASE, &mine).map_err(|e| format!("{e}"))?,
        cache: ServiceCache::new(BASE, "web", Strategy::RoundRobin, policy),
        lost: BTreeSet::new(),
    };
    let started = h.host(&mut script, duo, |d, now| {
        d.registration.register(now);
        d.cache.start(now);
    });
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
