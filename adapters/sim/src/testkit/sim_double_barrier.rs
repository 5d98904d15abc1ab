//! The real double barrier ([`DoubleBarrier`]) in the simulator: K clients, each
//! running the full stack (codec → session → client → recipe), entering and leaving one
//! barrier path round after round (`N` between 2 and K), with and without deadlines,
//! under every fault the simulator has.
//!
//! Rounds are read off the server after every event: a *round* is one life of
//! `b/ready`; a member node belongs to the round whose `ready` existed while it did.
//!
//! Safety, after every event:
//! * `ready` is only created after at least `N` member nodes were present together
//!   (since the last round ended);
//! * a participant told `Entered` (with its session alive) has a node that belongs to
//!   a round (nobody passes enter without a round of `N`);
//! * a participant told `Left` (with its session alive) finds no member node of its
//!   round in the barrier and that round's `ready` gone (nobody completes leave while a
//!   participant of the round has not yet left);
//! * no member node belongs to two rounds.
//!
//! Liveness, once faults stop (the quiet stretch, long enough for every client to be
//! back on the server with a session: [`SimConfig::recovery_bound`]): no new deadlines; an idle client
//! joins a new round only while someone is waiting in enter (so the run can end with
//! every round complete). By the end no participation may still be running, every one
//! started in the quiet stretch must have ended with `Left`, no recipe may still be
//! hosted, and the barrier must have no children — except the `ready` of a round whose
//! every member lost its session before leaving (nobody is left to remove it; the next
//! arrival is released into that round as a late participant and removes it when it
//! leaves). Nothing is cancelled to get there.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::recipe::double_barrier::{
    DoubleBarrier, DoubleBarrierConfig, DoubleBarrierEvent, READY,
};
use zk_recipes::time::Instant;

/// The barrier node.
pub const PATH: &str = "/app/barriers/job";

/// What a participant was told, for the checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// `Entered` for the participation with this node id.
    Entered(String),
    /// `Left` for the participation with this node id.
    Left(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Entering,
    Working(Instant),
    Leaving,
}

/// One client's participant.
pub struct Participant {
    me: usize,
    rng: u64,
    count: u32,
    stop_at: Instant,
    /// Who is waiting in enter now (shared by every client: the workload's rule for
    /// ending the run, not the recipe's business).
    waiting: Rc<RefCell<Vec<bool>>>,
    handle: Option<RecipeHandle<DoubleBarrier>>,
    step: Step,
    id: String,
    quiet: bool,
    idle_until: Instant,
    last: Instant,
    /// Entered / Left, in order.
    pub reports: Vec<Report>,
    /// Participations started once faults stopped that did not end with `Left`.
    pub quiet_failures: Vec<String>,
    /// (node id, events) of every participation, for failure reports.
    pub log: Vec<(String, Vec<String>)>,
}

impl Participant {
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo))
    }

    /// Is a participation running (no final event yet)?
    pub fn participating(&self) -> bool {
        self.handle.is_some()
    }

    fn set_waiting(&self, w: bool) {
        if let Some(slot) = self.waiting.borrow_mut().get_mut(self.me) {
            *slot = w;
        }
    }

    fn end(&mut self, now: Instant, left: bool) {
        if self.quiet && !left {
            let id = self.id.clone();
            self.quiet_failures.push(id);
        }
        self.handle = None;
        self.set_waiting(false);
        self.idle_until = now + self.ms(5, 40);
    }

    fn someone_waits(&self) -> bool {
        self.waiting
            .borrow()
            .iter()
            .enumerate()
            .any(|(i, w)| *w && i != self.me)
    }
}

impl Actor for Participant {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        self.last = now;
        for ev in events {
            let ClientEvent::Recipe { id, event } = ev else {
                continue;
            };
            let Some(e) = event.downcast_ref::<DoubleBarrierEvent>() else {
                continue;
            };
            if let Some(l) = self.log.last_mut() {
                l.1.push(format!("{} {e:?}", now.as_micros()));
            }
            if Some(*id) != self.handle.map(|h| h.id()) {
                continue;
            }
            match e {
                DoubleBarrierEvent::Entered { .. } => {
                    self.set_waiting(false);
                    self.reports.push(Report::Entered(self.id.clone()));
                    let work = self.ms(5, 40);
                    self.step = Step::Working(now + work);
                }
                DoubleBarrierEvent::Left => {
                    self.reports.push(Report::Left(self.id.clone()));
                    self.end(now, true);
                }
                DoubleBarrierEvent::Suspended | DoubleBarrierEvent::Reconnected => {}
                _ => self.end(now, false),
            }
        }
        match (self.handle, self.step) {
            (Some(h), Step::Working(until)) if now >= until => {
                self.step = Step::Leaving;
                let deadline = if !self.quiet && self.next() % 8 == 0 {
                    Some(now + self.ms(5, 60))
                } else {
                    None
                };
                client.command(now, h, move |b, now| {
                    let _ = b.leave(now, deadline);
                });
            }
            (Some(_), _) => {}
            (None, _) => {
                let start = if now < self.stop_at {
                    now >= self.idle_until
                } else {
                    // Faults stopped: join only someone who waits, so the run ends.
                    self.someone_waits()
                };
                if start {
                    // Held to `Left`: a participation started once faults stopped, on a
                    // connected session (one still suspended from the faults may expire by
                    // its own estimate: `Failed { SessionExpired }` is then its final
                    // event, which the end check still requires).
                    self.quiet = now >= self.stop_at
                        && client.session().state() == zk_recipes::session::SessionState::Connected;
                    self.id = zk_recipes::recipe::lock::node_id(self.next(), self.next());
                    let deadline = if !self.quiet && self.next() % 5 == 0 {
                        Some(now + self.ms(5, 80))
                    } else {
                        None
                    };
                    self.log.push((
                        self.id.clone(),
                        vec![format!("{} enter, deadline {deadline:?}", now.as_micros())],
                    ));
                    let config = DoubleBarrierConfig::new(PATH, self.count, &self.id);
                    let h = client.add(now, DoubleBarrier::new(config));
                    self.handle = Some(h);
                    self.step = Step::Entering;
                    self.set_waiting(true);
                    client.command(now, h, move |b, now| {
                        let _ = b.enter(now, deadline);
                    });
                }
            }
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        match (self.handle, self.step) {
            (Some(_), Step::Working(until)) => Some(until),
            (Some(_), _) => None, // the recipe's own timers and events drive it
            (None, _) if self.idle_until < self.stop_at => Some(self.idle_until),
            (None, _) => Some(self.last.max(self.stop_at) + Duration::from_millis(10)),
        }
    }

    fn restart(&mut self) {
        self.handle = None;
        self.set_waiting(false);
    }
}

/// Rounds as the server shows them, and the safety invariants.
#[derive(Default)]
pub struct Checker {
    count: usize,
    /// Member node name → the round (ready czxid) it belongs to.
    round_of: BTreeMap<String, i64>,
    /// Members present after the last event.
    members: BTreeSet<String>,
    ready: Option<i64>,
    /// Most member nodes present together since the last round ended.
    forming: usize,
    zxid: i64,
    /// Member node → its session.
    owners: BTreeMap<String, i64>,
    /// The last member to go went with its session (nobody was left to end the round).
    pub gone_with_session: bool,
    seen: Vec<usize>,
}

impl Checker {
    /// A checker for a barrier of `count`.
    pub fn new(count: u32) -> Self {
        Checker {
            count: count as usize,
            ..Self::default()
        }
    }

    /// The safety invariants, after every event.
    pub fn check(&mut self, view: &View<'_, Participant>) -> Result<(), String> {
        let server = view.server;
        if self.zxid != server.zxid() || self.seen.is_empty() {
            self.zxid = server.zxid();
            self.snapshot(server)?;
        }
        self.reports(view)
    }

    fn snapshot(&mut self, server: &crate::sim::SimServer) -> Result<(), String> {
        let ready = server
            .node(&format!("{PATH}/{READY}"))
            .map(|(_, s)| s.czxid);
        let members: BTreeSet<String> = server
            .children(PATH)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c != READY)
            .collect();
        if ready.is_none() {
            if self.ready.is_some() {
                self.forming = 0; // a round ended: the next one forms from scratch
            }
            self.forming = self.forming.max(members.len());
        }
        if let Some(g) = ready {
            if self.ready != Some(g) {
                // A new round: N member nodes were present together since the last
                // round ended (the creator counted them; one may have gone since).
                let now_before = members
                    .iter()
                    .filter(|m| {
                        server
                            .node(&format!("{PATH}/{m}"))
                            .is_some_and(|(_, s)| s.czxid < g)
                    })
                    .count();
                let most = self.forming.max(now_before);
                if most < self.count {
                    return Err(format!(
                        "ready created with at most {most} members present together, N = {}: {members:?}",
                        self.count
                    ));
                }
            }
            for m in &members {
                match self.round_of.get(m) {
                    Some(r) if *r != g => {
                        return Err(format!("member {m} in two rounds ({r} and {g})"));
                    }
                    Some(_) => {}
                    None => {
                        self.round_of.insert(m.clone(), g);
                    }
                }
            }
        }
        // How members go: with their session (expiry, crash) or deleted by a live one.
        for m in self.members.difference(&members) {
            let owner = self.owners.get(m).copied().unwrap_or(0);
            self.gone_with_session = !server.session_alive(owner);
        }
        for m in members.difference(&self.members) {
            if let Some((_, st)) = server.node(&format!("{PATH}/{m}")) {
                self.owners.insert(m.clone(), st.ephemeral_owner);
            }
        }
        self.ready = ready;
        self.members = members;
        Ok(())
    }

    fn reports(&mut self, view: &View<'_, Participant>) -> Result<(), String> {
        self.seen.resize(view.actors.len(), 0);
        for (i, a) in view.actors.iter().enumerate() {
            let live = view.live(i);
            for r in &a.reports[self.seen[i]..] {
                if !live {
                    continue; // told after its session ended: nothing to hold it to
                }
                match r {
                    Report::Entered(id) => {
                        if !self.round_of.contains_key(id) {
                            return Err(format!(
                                "client {i} entered ({id}) without a round of {}",
                                self.count
                            ));
                        }
                    }
                    Report::Left(id) => {
                        let Some(g) = self.round_of.get(id).copied() else {
                            return Err(format!("client {i} left ({id}) without a round"));
                        };
                        if self.ready == Some(g) {
                            return Err(format!("client {i} left while round {g} is on"));
                        }
                        if let Some(m) = self
                            .members
                            .iter()
                            .find(|m| self.round_of.get(*m) == Some(&g))
                        {
                            return Err(format!(
                                "client {i} left ({id}) while {m} of its round is still in"
                            ));
                        }
                    }
                }
            }
            self.seen[i] = a.reports.len();
        }
        Ok(())
    }
}

/// One schedule with every fault (1.5 s of faults, then a quiet stretch long enough for
/// every client to be back with a session and the rounds to finish: see
/// [`run_with`]); returns the number of `Left` reports.
pub fn run(seed: u64, clients: usize) -> Result<usize, String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(4000);
    config.quiet = Duration::from_millis(2500);
    let count = 2 + (seed % (clients.max(2) as u64 - 1)) as u32;
    // Fast without the trace; a failure is replayed (the same seed gives the same
    // schedule) with it, for the report.
    config.trace = false;
    run_with(config.clone(), count).or_else(|_| {
        config.trace = true;
        run_with(config, count)
    })
}

/// What the workload itself needs, once every client is back with a session, to finish
/// the rounds then on: a few round trips, a little work, a server tick.
const WORKLOAD_SETTLE: Duration = Duration::from_secs(1);

/// One schedule with the given settings and barrier size.
///
/// The quiet stretch is lengthened (and the run with it: the faulty stretch stays as
/// configured) to at least [`SimConfig::recovery_bound`] plus the workload's own time.
/// A participant can only be held to finishing once its client can be back on the
/// server: after heavy connection faults a client's reconnect backoff reaches its cap,
/// so a session suspended just before the quiet stretch may expire by its own estimate
/// a session timeout in, and dial its next session up to the backoff cap after that —
/// its participation's requests wait in the session all that time. A shorter quiet
/// stretch would blame the recipe for the client's backoff.
pub fn run_with(mut config: SimConfig, count: u32) -> Result<usize, String> {
    config.quiet_past_recovery(WORKLOAD_SETTLE);
    let seed = config.seed;
    let clients = config.clients;
    let stop_at = Instant::ZERO + config.duration.saturating_sub(config.quiet);
    let waiting = Rc::new(RefCell::new(vec![false; clients]));
    let mut sim = Simulation::new(config, |i| Participant {
        me: i,
        rng: (((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D)
            | 1,
        count,
        stop_at,
        waiting: waiting.clone(),
        handle: None,
        step: Step::Entering,
        id: String::new(),
        quiet: false,
        idle_until: Instant::ZERO,
        last: Instant::ZERO,
        reports: Vec::new(),
        quiet_failures: Vec::new(),
        log: Vec::new(),
    });
    let mut checker = Checker::new(count);
    sim.run(|v| checker.check(v))
        .map_err(|e| format!("N = {count}, {e}"))?;
    // A round whose every member lost its session before leaving keeps its `ready`
    // (nobody is left to remove it): the next arrival is released into that dead round
    // (late) and removes it when it leaves. Only that may be left at the end.
    let dead_round = checker.gone_with_session
        && sim.server().exists(&format!("{PATH}/{READY}"))
        && sim.server().children(PATH).is_some_and(|c| c.len() == 1);
    let mut problems = Vec::new();
    for i in 0..clients {
        let a = &sim.actors()[i];
        if a.participating() {
            let recipe = a.handle.and_then(|h| sim.client(i).recipe(h));
            problems.push(format!(
                "client {i}: participation never ended: {:?}\n  session {:?} 0x{:x}; recipe {recipe:?}",
                a.log.last(),
                sim.client(i).session().state(),
                sim.client(i).session().session_id(),
            ));
        }
        if !a.quiet_failures.is_empty() {
            problems.push(format!(
                "client {i}: quiet participations that did not end with Left: {:?}",
                a.log
                    .iter()
                    .filter(|(id, _)| a.quiet_failures.contains(id))
                    .collect::<Vec<_>>()
            ));
        }
    }
    if !dead_round {
        problems.extend(sim.nodes_left(PATH, |a| &a.log));
    }
    problems.extend(sim.still_hosted());
    super::verdict(
        &format!("seed {seed} (N = {count}): liveness/cleanliness broken once faults stopped"),
        &problems,
    )?;
    Ok(sim
        .actors()
        .iter()
        .flat_map(|a| a.reports.iter())
        .filter(|r| matches!(r, Report::Left(_)))
        .count())
}
