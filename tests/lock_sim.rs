//! The lock recipe in the simulator: 8 real clients, every fault, invariants after every
//! event — never two live holders (exclusive), never a writer beside any other holder
//! (read/write), fencing tokens rising in grant order, and no contender node left once
//! everybody released or expired. `SIM_SEED=n` replays one schedule with its trace;
//! `SIM_SEEDS=n` runs more.

use std::time::Duration;

use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::recipe::lock::{Lock, LockConfig, LockEvent, LockKind};
use zk_recipes::recipe::RecipeEvent;
use zk_recipes::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::time::Instant;

const DIR: &str = "/app/locks/job";

struct LockUser {
    rng: u64,
    mix_readers: bool,
    kind: LockKind,
    handle: Option<RecipeHandle>,
    holding: bool,
    suspended: bool,
    until: Instant,
    idle_until: Instant,
    stop_at: Instant,
    releasing: bool,
    /// Fencing tokens of every grant, in order, with the lock kind.
    grants: Vec<(i64, LockKind)>,
    /// (node id, events) of every attempt, for failure reports.
    log: Vec<(String, Vec<String>)>,
}

impl LockUser {
    fn new(seed: u64, mix_readers: bool, stop_at: Instant) -> Self {
        LockUser {
            rng: seed | 1,
            mix_readers,
            kind: LockKind::Exclusive,
            handle: None,
            holding: false,
            suspended: false,
            until: Instant::ZERO,
            idle_until: Instant::ZERO,
            stop_at,
            releasing: false,
            grants: Vec::new(),
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

    fn holds(&self) -> bool {
        self.holding && !self.suspended
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
            let ClientEvent::Recipe {
                handle,
                event: RecipeEvent::Lock(e),
            } = ev
            else {
                continue;
            };
            if let Some(l) = self.log.last_mut() {
                l.1.push(format!("{:?} {} {e:?}", handle, now.as_micros()));
            }
            if Some(*handle) != self.handle {
                continue;
            }
            match e {
                LockEvent::Acquired { fencing_token, .. } => {
                    self.holding = true;
                    self.grants.push((*fencing_token, self.kind));
                    self.until = now + self.ms(1, 25);
                }
                LockEvent::Suspended => self.suspended = true,
                LockEvent::Reconnected => self.suspended = false,
                LockEvent::RevocationRequested => {}
                _ => self.end_attempt(now),
            }
        }
        let quiet = now >= self.stop_at;
        if let Some(h) = self.handle {
            if !self.releasing && ((self.holding && now >= self.until) || quiet) {
                self.releasing = true;
                self.holding = false;
                client.lock_mut(now, h, |l| l.release(now));
            }
        } else if now >= self.idle_until && !quiet {
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
            let config = LockConfig::new(DIR, self.kind, &id);
            self.log.push((
                id.clone(),
                vec![format!("{} deadline {deadline:?}", now.as_micros())],
            ));
            let h = client.add_lock(now, Lock::new(config));
            self.handle = Some(h);
            self.releasing = false;
            client.lock_mut(now, h, |l| l.acquire(now, deadline));
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        match self.handle {
            Some(_) if self.releasing => None, // waiting for Released
            Some(_) if self.holding => Some(self.until.min(self.stop_at)),
            Some(_) => Some(self.stop_at), // waiting: give up at the stop
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

/// Checks exclusion and fencing after every event.
struct Checker {
    seen: Vec<usize>,
    max_token: i64,
}

impl Checker {
    fn check(&mut self, view: &View<'_, LockUser>) -> Result<(), String> {
        let live_holders: Vec<usize> = (0..view.actors.len())
            .filter(|&i| view.actors[i].holds() && view.live(i))
            .collect();
        let writers = live_holders
            .iter()
            .filter(|&&i| view.actors[i].kind != LockKind::Read)
            .count();
        if writers > 0 && live_holders.len() > 1 {
            let kinds: Vec<_> = live_holders
                .iter()
                .map(|&i| (i, view.actors[i].kind))
                .collect();
            return Err(format!("exclusion broken: live holders {kinds:?}"));
        }
        self.seen.resize(view.actors.len(), 0);
        for (i, a) in view.actors.iter().enumerate() {
            for &(token, kind) in &a.grants[self.seen[i]..] {
                if kind != LockKind::Read && token <= self.max_token {
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

fn run(seed: u64, readers: bool) -> Result<usize, String> {
    let mut config = SimConfig::with_faults(seed, 8);
    // 2.5 s of faults, then 2 s of quiet: longer than the session timeout, so dead
    // sessions expire and every node must be gone at the end.
    config.duration = Duration::from_millis(4500);
    config.quiet = Duration::from_secs(2);
    let stop_at = Instant::ZERO + Duration::from_millis(2500);
    let mut sim = Simulation::new(config, |i| {
        LockUser::new(
            ((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D,
            readers,
            stop_at,
        )
    });
    let mut checker = Checker {
        seen: Vec::new(),
        max_token: 0,
    };
    sim.run(|v| checker.check(v))?;
    // Settled: everyone released or expired — no contender node may remain.
    if let Some(left) = sim.server().children(DIR) {
        if !left.is_empty() {
            let owners: Vec<String> = left
                .iter()
                .map(|n| {
                    let owner = sim
                        .server()
                        .node(&format!("{DIR}/{n}"))
                        .map(|(_, s)| s.ephemeral_owner)
                        .unwrap_or(0);
                    let slot = (0..8).find(|&i| sim.client(i).session().session_id() == owner);
                    let state = slot.map(|i| {
                        let a = &sim.actors()[i];
                        format!(
                            "slot {i} session {:?} handle {:?} holding {} releasing {} recipes {}",
                            sim.client(i).session().state(),
                            a.handle,
                            a.holding,
                            a.releasing,
                            sim.client(i).recipes()
                        )
                    });
                    let history: Vec<&(String, Vec<String>)> = sim
                        .actors()
                        .iter()
                        .flat_map(|a| a.log.iter())
                        .filter(|(id, _)| n.contains(id.as_str()))
                        .collect();
                    format!(
                        "{n} owner 0x{owner:x} alive {} {state:?} history {history:?}",
                        sim.server().session_alive(owner)
                    )
                })
                .collect();
            return Err(format!(
                "seed {seed}: contender nodes left at the end: {owners:?}"
            ));
        }
    }
    Ok(sim.actors().iter().map(|a| a.grants.len()).sum())
}

fn seeds(default: u64) -> Vec<u64> {
    match std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => (0..std::env::var("SIM_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default))
            .collect(),
    }
}

fn run_all(seeds: Vec<u64>, readers: bool) -> usize {
    std::thread::scope(|s| {
        let chunks: Vec<Vec<u64>> = (0..2)
            .map(|t| seeds.iter().copied().skip(t).step_by(2).collect())
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|seed| run(seed, readers).unwrap_or_else(|e| panic!("{e}")))
                        .sum::<usize>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

#[test]
fn exclusive_lock_under_every_fault() {
    let seeds = seeds(10_000);
    let n = seeds.len();
    let grants = run_all(seeds, false);
    println!("{n} schedules x 8 clients: {grants} grants, exclusion and fencing held, nothing left behind");
    assert!(grants > n, "the lock must change hands ({grants})");
}

#[test]
fn read_write_lock_under_every_fault() {
    let seeds = seeds(3_000);
    let n = seeds.len();
    let grants = run_all(seeds, true);
    println!("{n} read/write schedules x 8 clients: {grants} grants");
    assert!(grants > n);
}
