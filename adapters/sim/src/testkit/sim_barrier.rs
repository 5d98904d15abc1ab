//! The real barrier ([`Barrier`]) in the simulator: client 0 sets and removes the
//! barrier node over and over; every other client waits on it, with and without
//! deadlines, under every fault the simulator has.
//!
//! Safety, after every event: a waiter told `Released` (with its session alive) saw a
//! barrier that really was down at some moment since its wait began (the server's
//! state is read after every event); `Set` / `Removed` are told only when the node
//! really exists / is gone.
//!
//! Liveness, once faults stop: waiters start no new waits; the controller removes the
//! barrier for good. By the end every wait must have ended (those without a deadline
//! with `Released`), no recipe may still be hosted and the barrier node must be gone.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::recipe::barrier::{Barrier, BarrierConfig, BarrierEvent};
use zk_recipes::time::Instant;

/// The barrier node.
pub const PATH: &str = "/app/gates/job";

/// What a client was told, for the checker: (what, when its command began).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// A wait begun at this time was released.
    Released(Instant),
    /// `Set` answered.
    Set,
    /// `Remove` answered.
    Removed,
}

/// One client: the controller (client 0) or a waiter.
pub struct User {
    controller: bool,
    rng: u64,
    stop_at: Instant,
    handle: Option<RecipeHandle<Barrier>>,
    began: Instant,
    /// Controller: the next command sets (else removes).
    set_next: bool,
    waiting_forever: bool,
    idle_until: Instant,
    /// What it was told.
    pub reports: Vec<Report>,
    /// Quiet waits (no deadline) that did not end with `Released`.
    pub quiet_failures: Vec<String>,
    /// Events, for failure reports.
    pub log: Vec<String>,
}

impl User {
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo))
    }

    /// Is a command running?
    pub fn busy(&self) -> bool {
        self.handle.is_some()
    }

    /// Has the controller still to remove the barrier for good?
    pub fn must_remove(&self) -> bool {
        self.controller && !self.set_next
    }
}

impl Actor for User {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        for ev in events {
            let ClientEvent::Recipe { id, event } = ev else {
                continue;
            };
            let Some(e) = event.downcast_ref::<BarrierEvent>() else {
                continue;
            };
            if Some(*id) != self.handle.map(|h| h.id()) {
                continue;
            }
            self.log.push(format!("{} {e:?}", now.as_micros()));
            if e.outcome().is_none() {
                continue; // Suspended / Reconnected
            }
            match e {
                BarrierEvent::Released => self.reports.push(Report::Released(self.began)),
                BarrierEvent::Set => {
                    self.reports.push(Report::Set);
                    self.set_next = false;
                }
                BarrierEvent::Removed => {
                    self.reports.push(Report::Removed);
                    self.set_next = true;
                }
                // A set that failed may have landed (reply lost, then the session went):
                // remove next.
                BarrierEvent::Failed { .. } if self.controller => self.set_next = false,
                // A wait without a deadline ends with Released, or with its session.
                BarrierEvent::Failed {
                    error:
                        zk_recipes::error::Error::SessionExpired | zk_recipes::error::Error::Closed,
                } => {}
                _ if self.waiting_forever => self
                    .quiet_failures
                    .push(format!("{} {e:?}", now.as_micros())),
                _ => {}
            }
            self.handle = None;
            self.idle_until = now + self.ms(10, 80);
        }
        if self.handle.is_some() || now < self.idle_until {
            return;
        }
        let quiet = now >= self.stop_at;
        let config = BarrierConfig::new(PATH);
        let machine = if self.controller {
            if quiet && self.set_next {
                return; // removed for good
            }
            if self.set_next {
                Barrier::set(config)
            } else {
                Barrier::remove(config)
            }
        } else {
            if quiet {
                return;
            }
            let deadline = match self.next() % 3 {
                0 => Some(now + self.ms(1, 100)),
                _ => None,
            };
            self.waiting_forever = deadline.is_none();
            Barrier::wait(config, deadline)
        };
        self.began = now;
        self.log
            .push(format!("{} start {:?}", now.as_micros(), machine.command()));
        let h = client.add(now, machine);
        self.handle = Some(h);
        client.command(now, h, |b, now| b.start(now));
    }

    fn wake_at(&self) -> Option<Instant> {
        let more = if self.controller {
            !self.set_next || self.idle_until < self.stop_at
        } else {
            self.idle_until < self.stop_at
        };
        match self.handle {
            None if more => Some(self.idle_until),
            _ => None,
        }
    }

    fn restart(&mut self) {
        if self.controller {
            self.set_next = false; // whatever was in flight may have landed
        }
        if self.handle.take().is_some() && self.waiting_forever {
            self.waiting_forever = false; // the process crashed: not the barrier's fault
        }
    }
}

/// The safety invariants.
#[derive(Default)]
pub struct Checker {
    /// The last moment (after an event) the node was absent.
    last_absent: Option<Instant>,
    seen: Vec<usize>,
}

impl Checker {
    /// After every event.
    pub fn check(&mut self, view: &View<'_, User>) -> Result<(), String> {
        let exists = view.server.exists(PATH);
        if !exists {
            self.last_absent = Some(view.now);
        }
        self.seen.resize(view.actors.len(), 0);
        for (i, a) in view.actors.iter().enumerate() {
            let live = view.live(i);
            for r in &a.reports[self.seen[i]..] {
                if !live {
                    continue;
                }
                match r {
                    Report::Released(began) if self.last_absent.is_none_or(|t| t < *began) => {
                        return Err(format!(
                            "client {i} released from a wait begun at {} us, but the barrier has been up since",
                            began.as_micros()
                        ));
                    }
                    Report::Set if !exists => {
                        return Err(format!("client {i} told Set, but the node is gone"));
                    }
                    Report::Removed if exists => {
                        return Err(format!("client {i} told Removed, but the node exists"));
                    }
                    _ => {}
                }
            }
            self.seen[i] = a.reports.len();
        }
        Ok(())
    }
}

/// One schedule with every fault (1.5 s of faults, then 2.5 s of quiet); returns the
/// number of releases.
pub fn run(seed: u64, clients: usize) -> Result<usize, String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(4000);
    config.quiet = Duration::from_millis(2500);
    config.trace = false;
    run_with(config.clone()).or_else(|_| {
        config.trace = true;
        run_with(config)
    })
}

/// One schedule with the given settings.
pub fn run_with(config: SimConfig) -> Result<usize, String> {
    let seed = config.seed;
    let clients = config.clients;
    let stop_at = Instant::ZERO + config.duration.saturating_sub(config.quiet);
    let mut sim = Simulation::new(config, |i| User {
        controller: i == 0,
        rng: (((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D)
            | 1,
        stop_at,
        handle: None,
        began: Instant::ZERO,
        set_next: true,
        waiting_forever: false,
        idle_until: Instant::ZERO,
        reports: Vec::new(),
        quiet_failures: Vec::new(),
        log: Vec::new(),
    });
    let mut checker = Checker::default();
    sim.run(|v| checker.check(v))?;
    let mut problems = Vec::new();
    for i in 0..clients {
        let a = &sim.actors()[i];
        if a.busy() || a.must_remove() {
            problems.push(format!(
                "client {i}: command never ended: {:?}",
                a.log.iter().rev().take(4).collect::<Vec<_>>()
            ));
        }
        if !a.quiet_failures.is_empty() {
            problems.push(format!(
                "client {i}: waits without deadline that ended without Released: {:?}",
                a.quiet_failures
            ));
        }
    }
    if sim.server().exists(PATH) {
        problems.push("the barrier node is left".into());
    }
    problems.extend(sim.still_hosted());
    super::verdict(
        &format!("seed {seed}: liveness/cleanliness broken once faults stopped"),
        &problems,
    )?;
    Ok(sim
        .actors()
        .iter()
        .flat_map(|a| a.reports.iter())
        .filter(|r| matches!(r, Report::Released(_)))
        .count())
}
