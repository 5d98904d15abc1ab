//! The real lock recipe ([`Lock`]) in the simulator: N clients, each running the full
//! stack (codec → session → client → recipe), taking exclusive or read/write locks with
//! and without deadlines under every fault the simulator has.
//!
//! Safety, after every event: never two live holders of an exclusive lock (or a writer
//! beside anyone); fencing tokens of exclusive grants rise in grant order. With an
//! operator deleting contender nodes ([`run_with_operator`]), a holder whose node is
//! gone holds nothing the server knows of (its fencing token is what protects the
//! resource); it must be told (`Lost`) within the recovery bound when it watches its
//! node, and waiters whose nodes were deleted must still end.
//!
//! Liveness, once faults stop (the last stretch of the run is quiet): clients start no
//! new attempt, but every running attempt goes on — holders release when their work is
//! done, waiters wait. By the end every attempt must have reported its final event, no
//! recipe may still be hosted, and no contender node may be left in the directory.
//! Nothing is cancelled to get there.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::recipe::lock::{Lock, LockConfig, LockEvent, LockKind};
use zk_recipes::time::Instant;

/// The contention directory.
pub const DIR: &str = "/app/locks/job";

/// One client's user of the lock.
pub struct LockUser {
    rng: u64,
    mix_readers: bool,
    kind: LockKind,
    handle: Option<RecipeHandle<Lock>>,
    holding: bool,
    suspended: bool,
    until: Instant,
    idle_until: Instant,
    stop_at: Instant,
    releasing: bool,
    /// The held node's full path (while holding).
    node: Option<String>,
    /// The attempt watches its own node (it hears of the node's deletion).
    watching: bool,
    /// Fencing tokens of every grant, in order, with the lock kind.
    pub grants: Vec<(i64, LockKind)>,
    /// How many of them were handed over by the previous holder (grant on release).
    pub handed: usize,
    /// (node id, events) of every attempt, for failure reports.
    pub log: Vec<(String, Vec<String>)>,
}

impl LockUser {
    /// A user that starts attempts until `stop_at`; `mix_readers` mixes read and write
    /// locks (else exclusive only).
    pub fn new(seed: u64, mix_readers: bool, stop_at: Instant) -> Self {
        LockUser {
            rng: seed | 1,
            mix_readers,
            kind: LockKind::Exclusive,
            handle: None,
            holding: false,
            suspended: false,
            until: Instant::ZERO,
            node: None,
            watching: true,
            idle_until: Instant::ZERO,
            stop_at,
            releasing: false,
            grants: Vec::new(),
            handed: 0,
            log: Vec::new(),
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo))
    }

    /// Does it believe it holds the lock, with the connection up?
    pub fn holds(&self) -> bool {
        self.holding && !self.suspended
    }

    /// Is an attempt still running (no final event yet)?
    pub fn attempting(&self) -> bool {
        self.handle.is_some()
    }

    fn end_attempt(&mut self, now: Instant) {
        self.handle = None;
        self.holding = false;
        self.suspended = false;
        self.releasing = false;
        self.idle_until = now + self.ms(1, 20);
    }
}

impl Actor for LockUser {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        for ev in events {
            let ClientEvent::Recipe { id, event } = ev else {
                continue;
            };
            let Some(e) = event.downcast_ref::<LockEvent>() else {
                continue;
            };
            if let Some(l) = self.log.last_mut() {
                l.1.push(format!("{id:?} {} {e:?}", now.as_micros()));
            }
            if Some(*id) != self.handle.map(|h| h.id()) {
                continue;
            }
            match e {
                LockEvent::Acquired { fencing_token, .. } => {
                    self.holding = true;
                    self.grants.push((*fencing_token, self.kind));
                    let h = self.handle;
                    self.node = h
                        .and_then(|h| client.recipe(h))
                        .and_then(|l| l.node())
                        .map(|n| format!("{DIR}/{n}"));
                    if h.and_then(|h| client.recipe(h))
                        .is_some_and(|l| l.held_by_grant())
                    {
                        self.handed += 1;
                    }
                    self.until = now + self.ms(1, 25);
                }
                LockEvent::Suspended => self.suspended = true,
                LockEvent::Reconnected => self.suspended = false,
                LockEvent::RevocationRequested => {}
                _ => self.end_attempt(now),
            }
        }
        if let Some(h) = self.handle {
            // A holder releases when its work is done, faults or not; a waiter waits.
            if self.holding && !self.releasing && now >= self.until {
                self.releasing = true;
                self.holding = false;
                client.command(now, h, |l, now| l.release(now));
            }
        } else if now >= self.idle_until && now < self.stop_at {
            self.kind = match (self.mix_readers, self.next() % 10) {
                (false, _) => LockKind::Exclusive,
                (true, 0..=6) => LockKind::Read,
                (true, _) => LockKind::Write,
            };
            let id = format!("{:016x}-{:04x}", self.next(), self.next() & 0xffff);
            let deadline = match self.next() % 5 {
                0 => Some(now), // try-lock
                1 => Some(now + self.ms(1, 20)),
                _ => None,
            };
            let mut config = LockConfig::new(DIR, self.kind, &id);
            // One attempt in four without the own-node watch: its waiters watch their
            // blocker's data and take over on its deletion alone once it holds.
            config.watch_own_node = self.next() % 4 != 0;
            self.watching = config.watch_own_node;
            self.log.push((
                id.clone(),
                vec![format!("{} deadline {deadline:?}", now.as_micros())],
            ));
            let h = client.add(now, Lock::new(config));
            self.handle = Some(h);
            self.releasing = false;
            client.command(now, h, |l, now| l.acquire(now, deadline));
        } else if now >= self.stop_at {
            // Past its last start (a restart after `stop_at`): nothing to wake for; a
            // past `idle_until` would have the world wake it every microsecond.
            self.idle_until = self.stop_at;
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        match self.handle {
            Some(_) if self.holding && !self.releasing => Some(self.until),
            Some(_) => None, // the lock's own timers and events drive it
            None if self.idle_until < self.stop_at => Some(self.idle_until),
            None => None,
        }
    }

    fn restart(&mut self) {
        self.handle = None;
        self.holding = false;
        self.suspended = false;
        self.releasing = false;
    }
}

/// Several lock users hosted by one client (one session): their waiters' listings
/// queue behind the session's window and are shared (issue 25).
pub struct Users(pub Vec<LockUser>);

impl Actor for Users {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        for u in &mut self.0 {
            u.step(now, client, events);
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        self.0.iter().filter_map(|u| u.wake_at()).min()
    }

    fn restart(&mut self) {
        for u in &mut self.0 {
            u.restart();
        }
    }
}

/// Checks exclusion and fencing after every event.
#[derive(Default)]
pub struct Checker {
    seen: Vec<usize>,
    max_token: i64,
    /// Per client: since when it holds a node that is gone from the server.
    gone_since: Vec<Option<Instant>>,
    /// How long a watching holder may take to hear its node was deleted.
    notice_bound: Duration,
}

impl Checker {
    /// The safety invariants.
    pub fn check(&mut self, view: &View<'_, LockUser>) -> Result<(), String> {
        let users: Vec<(&LockUser, bool)> = (0..view.actors.len())
            .map(|i| (&view.actors[i], view.live(i)))
            .collect();
        self.check_users(view.now, view.server, &users)
    }

    /// [`check`](Self::check) for several users per client ([`Users`]).
    pub fn check_many(&mut self, view: &View<'_, Users>) -> Result<(), String> {
        let users: Vec<(&LockUser, bool)> = (0..view.actors.len())
            .flat_map(|i| view.actors[i].0.iter().map(move |u| (u, view.live(i))))
            .collect();
        self.check_users(view.now, view.server, &users)
    }

    /// The invariants over every user, each with whether its client's session is live.
    fn check_users(
        &mut self,
        now: Instant,
        server: &crate::sim::SimServer,
        users: &[(&LockUser, bool)],
    ) -> Result<(), String> {
        // A holder whose node is gone (an operator deleted it) holds nothing the server
        // knows of: the next contender may take the lock at once. It must hear so.
        self.gone_since.resize(users.len(), None);
        let mut live_holders = Vec::new();
        for (i, &(a, live)) in users.iter().enumerate() {
            if !(a.holds() && live) {
                self.gone_since[i] = None;
                continue;
            }
            if a.node.as_deref().is_some_and(|p| server.exists(p)) {
                self.gone_since[i] = None;
                live_holders.push(i);
                continue;
            }
            let since = *self.gone_since[i].get_or_insert(now);
            if a.watching && now.saturating_since(since) > self.notice_bound {
                return Err(format!(
                    "client {i} still holds {:?}, deleted {} ms ago",
                    a.node,
                    now.saturating_since(since).as_millis()
                ));
            }
        }
        let writers = live_holders
            .iter()
            .filter(|&&i| users[i].0.kind != LockKind::Read)
            .count();
        if writers > 0 && live_holders.len() > 1 {
            let kinds: Vec<_> = live_holders.iter().map(|&i| (i, users[i].0.kind)).collect();
            return Err(format!("two live holders: exclusion broken {kinds:?}"));
        }
        self.seen.resize(users.len(), 0);
        for (i, &(a, client_live)) in users.iter().enumerate() {
            // A grant that reaches a session the server has already expired is a stale
            // holder (its reply was on the way): exactly what fencing tokens are for —
            // the resource has seen a higher token and rejects it. Live grants rise.
            // So is a grant whose node an operator deleted while the grant was on its
            // way (the next contender may hold already, with a higher token).
            let live = client_live
                && (a.node.is_none() || a.node.as_deref().is_some_and(|p| server.exists(p)));
            for &(token, kind) in &a.grants[self.seen[i]..] {
                if live && kind != LockKind::Read && token <= self.max_token {
                    return Err(format!(
                        "fencing token {token} of client {i} not above {}",
                        self.max_token
                    ));
                }
                self.max_token = self.max_token.max(token);
            }
            self.seen[i] = a.grants.len();
        }
        Ok(())
    }
}

/// One schedule with every fault (2.5 s of faults, then 3 s of quiet); returns the
/// number of acquisitions and how many of them the previous holder handed over.
pub fn run(seed: u64, clients: usize, readers: bool) -> Result<(usize, usize), String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(5500);
    config.quiet = Duration::from_secs(3);
    run_with(config, readers)
}

/// One schedule with every fault and an operator deleting contender nodes (holders',
/// waiters', recovering attempts') now and then.
pub fn run_with_operator(seed: u64, clients: usize) -> Result<(usize, usize), String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(5500);
    config.quiet = Duration::from_secs(3);
    config.delete_node = 100;
    config.delete_under = Some(DIR.into());
    run_with(config, false)
}

/// One schedule with every fault, `per_client` lock users hosted by each client (one
/// session each) and a session window of 2 requests: the users' listings queue and
/// are shared (issue 25) under lost requests and replies, dropped connections,
/// expiries and crashes. The same invariants over every user; once faults stop every
/// attempt ends, nothing is hosted and no node is left. Returns the acquisitions, how
/// many of them the previous holder handed over, and how many listings the clients
/// alive at the end shared.
pub fn run_shared(
    seed: u64,
    clients: usize,
    per_client: usize,
) -> Result<(usize, usize, u64), String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(5500);
    config.quiet = Duration::from_secs(3);
    config.max_in_flight = 2;
    let notice_bound = config.recovery_bound();
    let stop_at = Instant::ZERO + config.duration.saturating_sub(config.quiet);
    let mut sim = Simulation::new(config, |i| {
        Users(
            (0..per_client)
                .map(|k| {
                    let n = (i * per_client + k) as u64;
                    LockUser::new(
                        ((seed << 12) | n).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                            ^ 0x2545_F491_4F6C_DD1D,
                        false,
                        stop_at,
                    )
                })
                .collect(),
        )
    });
    let mut checker = Checker {
        notice_bound,
        ..Checker::default()
    };
    sim.run(|v| checker.check_many(v))?;
    let mut problems = Vec::new();
    for i in 0..clients {
        for (k, a) in sim.actors()[i].0.iter().enumerate() {
            if a.attempting() {
                problems.push(format!(
                    "client {i} user {k}: attempt never ended: {:?}\n    {:?}",
                    a.log.last(),
                    a.handle.and_then(|h| sim.client(i).recipe(h))
                ));
            }
        }
    }
    if let Some(left) = sim.server().children(DIR) {
        if !left.is_empty() {
            problems.push(format!("nodes left: {left:?}"));
        }
    }
    problems.extend(sim.still_hosted());
    super::verdict(
        &format!("seed {seed}: liveness/cleanliness broken once faults stopped"),
        &problems,
    )?;
    let users = sim.actors().iter().flat_map(|a| a.0.iter());
    let acquisitions = users.clone().map(|a| a.grants.len()).sum();
    let shared = (0..clients)
        .map(|i| sim.client(i).counters().listings_shared)
        .sum();
    Ok((acquisitions, users.map(|a| a.handed).sum(), shared))
}

/// One schedule with the given settings. Attempts start until `duration - quiet`;
/// the quiet stretch must be long enough for every attempt to end (longer than the
/// session timeout plus the longest hold and backoff).
pub fn run_with(config: SimConfig, readers: bool) -> Result<(usize, usize), String> {
    let seed = config.seed;
    let notice_bound = config.recovery_bound();
    let clients = config.clients;
    let stop_at = Instant::ZERO + config.duration.saturating_sub(config.quiet);
    let mut sim = Simulation::new(config, |i| {
        LockUser::new(
            ((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D,
            readers,
            stop_at,
        )
    });
    let mut checker = Checker {
        notice_bound,
        ..Checker::default()
    };
    sim.run(|v| checker.check(v))?;
    // Liveness and cleanliness: every attempt ended, nothing hosted, nothing left.
    let mut problems = Vec::new();
    for i in 0..clients {
        let a = &sim.actors()[i];
        if a.attempting() {
            problems.push(format!(
                "client {i}: attempt never ended: {:?}\n    {:?}",
                a.log.last(),
                a.handle.and_then(|h| sim.client(i).recipe(h))
            ));
        }
    }
    problems.extend(sim.nodes_left(DIR, |a| &a.log));
    problems.extend(sim.still_hosted());
    super::verdict(
        &format!("seed {seed}: liveness/cleanliness broken once faults stopped"),
        &problems,
    )?;
    let acquisitions = sim.actors().iter().map(|a| a.grants.len()).sum();
    Ok((acquisitions, sim.actors().iter().map(|a| a.handed).sum()))
}
