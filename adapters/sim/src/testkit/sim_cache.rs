//! The tree cache ([`TreeCache`]) in the simulator: client 0 creates, changes and
//! deletes nodes of a small subtree (the root included) with raw requests, fire and
//! forget; the other clients cache the subtree (client 1 with one-shot watches, as
//! against a 3.5 server, the others with a persistent recursive watch), under every
//! fault the simulator has.
//!
//! Safety, after every event: each cache's events, replayed in order from an empty map
//! (`Created` of a node not held, `Changed` and `Deleted` of a node held, nothing else),
//! give exactly the cache's contents (paths, data and Stats): no event lost, none
//! invented, none out of order; and every node a cache reports is a state the server
//! had (the data the mutator wrote at that `mzxid`).
//!
//! Once faults stop the mutator stops; a little before the end every cache must equal
//! the server's subtree (paths, data, versions, `czxid`/`mzxid`) and be synced; then the
//! caches are closed and no recipe may be hosted.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::client::ops::{create, delete, set_data, CreateOptions};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::proto::Stat;
use zk_recipes::recipe::cache::{CacheConfig, CacheEvent, TreeCache};
use zk_recipes::time::Instant;

/// The cached subtree's root.
pub const ROOT: &str = "/app/tree";
/// Every path the mutator touches (parents before children).
pub const PATHS: [&str; 8] = [
    "/app/tree",
    "/app/tree/a",
    "/app/tree/b",
    "/app/tree/c",
    "/app/tree/a/x",
    "/app/tree/a/y",
    "/app/tree/b/z",
    "/app/tree/a/x/deep",
];

/// A node as compared: data, version, czxid, mzxid.
pub type NodeState = (Bytes, i32, i64, i64);

fn state(data: &Bytes, stat: &Stat) -> NodeState {
    (data.clone(), stat.version, stat.czxid, stat.mzxid)
}

/// One client: the mutator (slot 0) or a cache user.
pub struct CacheUser {
    slot: usize,
    rng: u64,
    /// Must-fail variant: the replay forgets `Changed` events.
    naive: bool,
    stop_at: Instant,
    close_at: Instant,
    idle_until: Instant,
    now: Instant,
    writes: u64,
    cache: Option<RecipeHandle<TreeCache>>,
    replay: BTreeMap<String, NodeState>,
    closed: bool,
    /// Nodes reported (path, state), to check against the server's history.
    pub reported: Vec<(String, NodeState)>,
    /// Replay violations.
    pub errors: Vec<String>,
    /// At close: the cache's contents and whether it was synced.
    pub at_close: Option<(BTreeMap<String, NodeState>, bool)>,
    /// Events handled.
    pub events: usize,
    /// Events, for failure reports.
    pub log: Vec<String>,
}

impl CacheUser {
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn mutate(&mut self, now: Instant, client: &mut Client) {
        let path = PATHS[(self.next() % PATHS.len() as u64) as usize];
        self.writes += 1;
        let data = Bytes::from(format!("{}:{}", path, self.writes));
        let req = match self.next() % 4 {
            0 => {
                if path == ROOT {
                    // Its parent first (`NodeExists` after the first time).
                    let parent = create("/app", Bytes::new(), &CreateOptions::default());
                    let _ = client.submit(now, parent);
                }
                create(path, data, &CreateOptions::default())
            }
            1 => delete(path, None),
            _ => set_data(path, data, None),
        };
        // Fire and forget: the outcome does not matter, the caches must follow the server.
        let _ = client.submit(now, req);
        self.idle_until = now + Duration::from_millis(1 + self.next() % 15);
    }

    fn apply(&mut self, e: &CacheEvent) {
        let err = match e {
            CacheEvent::Created { path, data, stat } => {
                self.reported.push((path.clone(), state(data, stat)));
                self.replay
                    .insert(path.clone(), state(data, stat))
                    .map(|old| format!("Created {path}, already held as {old:?}"))
            }
            CacheEvent::Changed { path, data, stat } => {
                self.reported.push((path.clone(), state(data, stat)));
                match self.replay.get_mut(path) {
                    Some(_) if self.naive => None,
                    Some(s) => {
                        *s = state(data, stat);
                        None
                    }
                    None => Some(format!("Changed {path}, not held")),
                }
            }
            CacheEvent::Deleted { path } => match self.replay.remove(path) {
                Some(_) => None,
                None => Some(format!("Deleted {path}, not held")),
            },
            _ => None,
        };
        self.errors.extend(err);
    }
}

/// A cache's contents as compared.
fn contents(cache: &TreeCache) -> BTreeMap<String, NodeState> {
    cache
        .nodes()
        .map(|(p, n)| (String::from(p), state(&n.data, &n.stat)))
        .collect()
}

impl Actor for CacheUser {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        self.now = now;
        let mut mine = false;
        for ev in events {
            let ClientEvent::Recipe { id, event } = ev else {
                continue;
            };
            let Some(e) = event.downcast_ref::<CacheEvent>() else {
                continue;
            };
            if Some(*id) != self.cache.map(|h| h.id()) {
                continue;
            }
            mine = true;
            self.events += 1;
            self.log.push(format!("{} {e:?}", now.as_micros()));
            self.apply(e);
            if e.is_final() {
                self.cache = None;
            }
        }
        if mine {
            if let Some(cache) = self.cache.and_then(|h| client.recipe(h)) {
                let held = contents(cache);
                if held != self.replay {
                    self.errors.push(format!(
                        "the events replayed give {:?}, the cache holds {held:?}",
                        self.replay
                    ));
                }
            }
        }
        if self.closed {
            return;
        }
        if now >= self.close_at {
            self.closed = true;
            if let Some(h) = self.cache {
                let held = client
                    .recipe(h)
                    .map(|c| (contents(c), c.is_synced()))
                    .unwrap_or_default();
                self.at_close = Some(held);
                client.command(now, h, |c, now| c.close(now));
            } else if self.slot != 0 {
                self.at_close = None;
            }
            return;
        }
        if self.slot == 0 {
            if now < self.stop_at && now >= self.idle_until {
                self.mutate(now, client);
            }
        } else if self.cache.is_none() {
            let mut config = CacheConfig::tree(ROOT);
            config.persistent_watch = self.slot != 1;
            config.max_in_flight = 4;
            let h = client.add(now, TreeCache::new(config));
            self.cache = Some(h);
            self.replay.clear();
            client.command(now, h, |c, now| c.start(now));
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        if self.closed {
            None
        } else if self.slot == 0 && self.idle_until > self.now && self.idle_until < self.stop_at {
            Some(self.idle_until)
        } else {
            Some(self.close_at)
        }
    }

    fn restart(&mut self) {
        self.cache = None;
        self.replay.clear();
        self.log.push(String::from("restart"));
    }
}

/// The safety invariants.
#[derive(Default)]
pub struct Checker {
    /// (path, mzxid) → (data, version, czxid) of every state the server had.
    history: BTreeMap<(String, i64), (Bytes, i32, i64)>,
    zxid: i64,
    seen: Vec<usize>,
}

impl Checker {
    /// After every event.
    pub fn check(&mut self, view: &View<'_, CacheUser>) -> Result<(), String> {
        let zxid = view.server.zxid();
        if zxid != self.zxid {
            self.zxid = zxid;
            for (p, (d, v, c, m)) in server_tree(view.server) {
                self.history.entry((p, m)).or_insert((d, v, c));
            }
        }
        self.seen.resize(view.actors.len(), 0);
        for (i, a) in view.actors.iter().enumerate() {
            if let Some(e) = a.errors.first() {
                return Err(format!("client {i}: {e}"));
            }
            for (p, (d, v, c, m)) in &a.reported[self.seen[i]..] {
                match self.history.get(&(p.clone(), *m)) {
                    Some(h) if *h == (d.clone(), *v, *c) => {}
                    other => {
                        return Err(format!(
                            "client {i}: cache reported {p} = {d:?} v{v} czxid {c} mzxid {m}, \
                             the server had {other:?}"
                        ))
                    }
                }
            }
            self.seen[i] = a.reported.len();
        }
        Ok(())
    }
}

/// The server's subtree at [`ROOT`].
fn server_tree(server: &crate::sim::SimServer) -> BTreeMap<String, NodeState> {
    let mut out = BTreeMap::new();
    let mut todo = alloc::vec![String::from(ROOT)];
    while let Some(p) = todo.pop() {
        let Some((d, s)) = server.node(&p) else {
            continue;
        };
        out.insert(p.clone(), state(&d, &s));
        for c in server.children(&p).unwrap_or_default() {
            todo.push(format!("{p}/{c}"));
        }
    }
    out
}

/// Totals of one schedule.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    /// Cache events handled.
    pub events: usize,
    /// Nodes in the subtree at the end.
    pub nodes: usize,
}

/// Heavier settings: 3 s of faults (every fault several times as likely as in
/// [`SimConfig::with_faults`]; `stale` per mille of reconnects land on a lagging
/// follower), then 4 s of quiet. They found the one-shot cache's unwatched node.
pub fn heavy(seed: u64, clients: usize, stale: u32) -> SimConfig {
    let mut c = SimConfig::with_faults(seed, clients);
    c.duration = Duration::from_millis(7000);
    c.quiet = Duration::from_millis(4000);
    c.lose_request = 15;
    c.lose_reply = 15;
    c.drop_connection = 80;
    c.expire_session = 15;
    c.crash_client = 10;
    c.pause_server = 8;
    c.stale_reconnect = stale;
    c
}

/// One schedule with every fault (1.5 s of faults, then 3 s of quiet).
pub fn run(seed: u64, clients: usize, naive: bool) -> Result<Totals, String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(4500);
    config.quiet = Duration::from_secs(3);
    config.trace = false;
    run_with(config.clone(), naive).or_else(|_| {
        config.trace = true;
        run_with(config, naive)
    })
}

/// One schedule with the given settings; `naive`: the replay forgets `Changed` events
/// (the must-fail variant).
pub fn run_with(config: SimConfig, naive: bool) -> Result<Totals, String> {
    let seed = config.seed;
    let stop_at = Instant::ZERO + config.duration.saturating_sub(config.quiet);
    let close_at = Instant::ZERO + config.duration.saturating_sub(Duration::from_millis(200));
    let mut sim = Simulation::new(config, |i| CacheUser {
        slot: i,
        rng: (((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D)
            | 1,
        naive,
        stop_at,
        close_at,
        idle_until: Instant::ZERO,
        now: Instant::ZERO,
        writes: 0,
        cache: None,
        replay: BTreeMap::new(),
        closed: false,
        reported: Vec::new(),
        errors: Vec::new(),
        at_close: None,
        events: 0,
        log: Vec::new(),
    });
    let mut checker = Checker::default();
    sim.run(|v| checker.check(v))?;
    let server = server_tree(sim.server());
    let mut problems = Vec::new();
    let mut t = Totals {
        nodes: server.len(),
        ..Totals::default()
    };
    for (i, a) in sim.actors().iter().enumerate() {
        t.events += a.events;
        if i > 0 {
            let tail = || a.log.iter().rev().take(12).collect::<Vec<_>>();
            match &a.at_close {
                None => problems.push(format!("client {i}: no cache at the end: {:?}", tail())),
                Some((held, synced)) if *held != server || !synced => problems.push(format!(
                    "client {i}: cache (synced {synced}) holds {held:?}, the server has {server:?}: {:?}",
                    tail()
                )),
                Some(_) => {}
            }
        }
    }
    problems.extend(sim.still_hosted());
    super::verdict(
        &format!("seed {seed}: broken once faults stopped"),
        &problems,
    )?;
    Ok(t)
}
