//! The real counting semaphore ([`Semaphore`], Curator's `InterProcessSemaphoreV2`
//! protocol) in the simulator: N clients take leases of one semaphore of `max` leases,
//! with and without deadlines, under every fault the simulator has.
//!
//! Safety, after every event: never more than `max` holders that believe they hold a
//! lease with the connection up and a session the server still has (the lock
//! simulator's count); each of them has its lease node on the server, owned by its
//! session.
//!
//! Liveness, once faults stop (the last stretch of the run is quiet): clients start no
//! new attempt; holders release when their work is done, waiters wait. By the end every
//! attempt must have reported its final event, no recipe may still be hosted, and no
//! node may be left in the lease or mutex directory — a lease node left behind (an
//! orphan, CURATOR-315) would count as held forever. Nothing is cancelled to get there.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::recipe::semaphore::{Semaphore, SemaphoreConfig, SemaphoreEvent};
use zk_recipes::time::Instant;

/// The semaphore's path.
pub const PATH: &str = "/app/sem/pool";
/// Its lease directory.
pub const LEASES: &str = "/app/sem/pool/leases";
/// Its mutex directory.
pub const LOCKS: &str = "/app/sem/pool/locks";

/// One client's user of the semaphore.
pub struct SemUser {
    rng: u64,
    max: u32,
    handle: Option<RecipeHandle<Semaphore>>,
    lease: Option<String>,
    suspended: bool,
    until: Instant,
    idle_until: Instant,
    /// The time of the last step.
    now: Instant,
    stop_at: Instant,
    releasing: bool,
    /// Leases acquired.
    pub grants: usize,
    /// (id prefix, events) of every attempt, for failure reports.
    pub log: Vec<(String, Vec<String>)>,
}

impl SemUser {
    /// A user of a semaphore of `max` leases that starts attempts until `stop_at`.
    pub fn new(seed: u64, max: u32, stop_at: Instant) -> Self {
        SemUser {
            rng: seed | 1,
            max,
            handle: None,
            lease: None,
            suspended: false,
            until: Instant::ZERO,
            idle_until: Instant::ZERO,
            now: Instant::ZERO,
            stop_at,
            releasing: false,
            grants: 0,
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

    /// The lease node it believes it holds with the connection up.
    pub fn holds(&self) -> Option<&str> {
        match self.suspended || self.releasing {
            true => None,
            false => self.lease.as_deref(),
        }
    }

    /// Is an attempt still running (no final event yet)?
    pub fn attempting(&self) -> bool {
        self.handle.is_some()
    }

    fn end_attempt(&mut self, now: Instant) {
        self.handle = None;
        self.lease = None;
        self.suspended = false;
        self.releasing = false;
        self.idle_until = now + self.ms(1, 20);
    }
}

impl Actor for SemUser {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        self.now = now;
        for ev in events {
            let ClientEvent::Recipe { id, event } = ev else {
                continue;
            };
            let Some(e) = event.downcast_ref::<SemaphoreEvent>() else {
                continue;
            };
            if Some(*id) != self.handle.map(|h| h.id()) {
                continue;
            }
            if let Some(l) = self.log.last_mut() {
                l.1.push(format!("{} {e:?}", now.as_micros()));
            }
            match e {
                SemaphoreEvent::Acquired { lease } => {
                    self.lease = Some(lease.clone());
                    self.grants += 1;
                    self.until = now + self.ms(1, 25);
                }
                SemaphoreEvent::Suspended => self.suspended = true,
                SemaphoreEvent::Reconnected => self.suspended = false,
                _ => self.end_attempt(now),
            }
        }
        if let Some(h) = self.handle {
            // A holder releases when its work is done, faults or not; a waiter waits.
            if self.lease.is_some() && !self.releasing && now >= self.until {
                self.releasing = true;
                client.command(now, h, |s, now| s.release(now));
            }
        } else if now >= self.idle_until && now < self.stop_at {
            let key = format!("{:016x}", self.next());
            let mutex_id = format!("{key}-m");
            let lease_id = format!("{key}-l");
            let deadline = match self.next() % 5 {
                0 => Some(now), // try-acquire
                1 => Some(now + self.ms(1, 30)),
                _ => None,
            };
            self.log.push((
                key,
                vec![format!("{} deadline {deadline:?}", now.as_micros())],
            ));
            let config = SemaphoreConfig::new(PATH, self.max, &mutex_id, &lease_id);
            let h = client.add(now, Semaphore::new(config));
            self.handle = Some(h);
            self.releasing = false;
            client.command(now, h, |s, now| s.acquire(now, deadline));
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        match self.handle {
            Some(_) if self.lease.is_some() && !self.releasing => Some(self.until),
            Some(_) => None, // the semaphore's own timers and events drive it
            None if self.now < self.idle_until && self.idle_until < self.stop_at => {
                Some(self.idle_until)
            }
            None => None,
        }
    }

    fn restart(&mut self) {
        self.handle = None;
        self.lease = None;
        self.suspended = false;
        self.releasing = false;
    }
}

/// Checks the lease count after every event.
pub struct Checker {
    /// The most holders allowed (the checker's belief; the recipe's `max` may differ in
    /// the must-fail test).
    pub max: usize,
    /// The most live holders seen at once.
    pub peak: usize,
}

impl Checker {
    /// The safety invariants.
    pub fn check(&mut self, view: &View<'_, SemUser>) -> Result<(), String> {
        let holders: Vec<(usize, &str)> = (0..view.actors.len())
            .filter(|&i| view.live(i))
            .filter_map(|i| view.actors[i].holds().map(|l| (i, l)))
            .collect();
        self.peak = self.peak.max(holders.len());
        if holders.len() > self.max {
            return Err(format!(
                "{} live holders of a semaphore of {}: {holders:?}",
                holders.len(),
                self.max
            ));
        }
        for &(i, lease) in &holders {
            let (sid, _) = view.session(i);
            match view.server.node(lease) {
                Some((_, stat)) if stat.ephemeral_owner == sid => {}
                other => {
                    return Err(format!(
                        "client {i} holds {lease}, but the server has {:?} (session 0x{sid:x})",
                        other.map(|(_, s)| s.ephemeral_owner)
                    ))
                }
            }
        }
        Ok(())
    }
}

/// Outcome of one schedule.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// Leases acquired.
    pub grants: usize,
    /// The most live holders at once.
    pub peak: usize,
}

/// The settings of [`run`]: every fault for 1.5 s, then 3 s of quiet.
pub fn config(seed: u64, clients: usize) -> SimConfig {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(4500);
    config.quiet = Duration::from_secs(3);
    config
}

/// One schedule with every fault ([`config`]), `max` leases.
pub fn run(seed: u64, clients: usize, max: u32) -> Result<Outcome, String> {
    let mut config = config(seed, clients);
    config.trace = false;
    run_with(config.clone(), max, max as usize).or_else(|_| {
        config.trace = true;
        run_with(config, max, max as usize)
    })
}

/// One schedule with the given settings: the recipe uses `max` leases, the checker
/// allows `allowed` holders (less than `max` only to prove the checker can fail).
pub fn run_with(config: SimConfig, max: u32, allowed: usize) -> Result<Outcome, String> {
    let seed = config.seed;
    let clients = config.clients;
    let stop_at = Instant::ZERO + config.duration.saturating_sub(config.quiet);
    let mut sim = Simulation::new(config, |i| {
        SemUser::new(
            ((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D,
            max,
            stop_at,
        )
    });
    let mut checker = Checker {
        max: allowed,
        peak: 0,
    };
    sim.run(|v| checker.check(v))?;
    let mut problems = Vec::new();
    for i in 0..clients {
        let a = &sim.actors()[i];
        if a.attempting() {
            problems.push(format!(
                "client {i}: attempt never ended: {:?}",
                a.log.last()
            ));
        }
    }
    for dir in [LEASES, LOCKS] {
        problems.extend(sim.nodes_left(dir, |a| &a.log));
    }
    problems.extend(sim.still_hosted());
    super::verdict(
        &format!("seed {seed}: liveness/cleanliness broken once faults stopped"),
        &problems,
    )?;
    Ok(Outcome {
        grants: sim.actors().iter().map(|a| a.grants).sum(),
        peak: checker.peak,
    })
}
