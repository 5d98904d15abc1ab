//! The real two-phase commit recipe ([`Coordinator`], [`Site`]) in the simulator: slot
//! 0 coordinates [`TRANSACTIONS`] transactions one after the other, every other slot is
//! a site of each (its own session), joining at a random time (sometimes long after the
//! decision), voting commit or abort, under every fault the simulator has (lost
//! replies after apply, dropped connections, server pauses, expiry, crashes — a crashed
//! slot restarts with a new session, the same site name and the same transaction).
//!
//! Safety, after every event, from the server's nodes and what the actors learned: an
//! outcome, once written, never changes; `commit` only if every vote node holds
//! `commit`; a vote, once written, never changes; every outcome an actor learned is the
//! one in the transaction node (so no two learn different outcomes).
//!
//! Liveness, once faults stop (nothing is cancelled): every transaction is decided,
//! every site and the coordinator have learned every outcome, no recipe is still
//! hosted, and no presence node (`alive/*`, `coordinator`) is left.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::error::Error;
use zk_recipes::proto::{Request, SetDataRequest};
use zk_recipes::recipe::two_phase::{
    alive_dir, coordinator_path, vote_path, Coordinator, CoordinatorConfig, CoordinatorEvent,
    Outcome, Site, SiteConfig, SiteEvent, Variant, Vote,
};
use zk_recipes::time::Instant;

/// Transactions per schedule.
pub const TRANSACTIONS: usize = 3;

/// The path of transaction `k`.
pub fn tx_path(k: usize) -> String {
    format!("/app/2pc/tx-{k}")
}

fn site_name(slot: usize) -> String {
    format!("s{slot}")
}

enum Handle {
    Coordinator(RecipeHandle<Coordinator>),
    Site(RecipeHandle<Site>),
}

/// One slot: the coordinator (slot 0) or a site.
pub struct TxUser {
    slot: usize,
    sites: usize,
    variant: Variant,
    rng: u64,
    /// No new transaction (coordinator) and no late joining (sites) from here on: the
    /// quiet stretch is for settling.
    stop_at: Instant,
    /// The coordinator started transaction `k` (a restart resumes it, even when quiet).
    started_k: bool,
    /// The transaction we work on (kept across crashes: the application's own record).
    k: usize,
    handle: Option<Handle>,
    wake: Instant,
    vote_at: Option<Instant>,
    /// Outcomes learned, by transaction.
    pub learned: Vec<(usize, Outcome)>,
    /// Event log, for failure reports.
    pub log: Vec<String>,
    /// Test the harness: the coordinator also writes `commit` unconditionally (an
    /// unversioned `setData`, no checks) as soon as its transaction exists.
    sabotage: bool,
}

impl TxUser {
    fn new(slot: usize, sites: usize, variant: Variant, seed: u64, stop_at: Instant) -> Self {
        TxUser {
            slot,
            sites,
            variant,
            rng: seed | 1,
            stop_at,
            started_k: false,
            k: 0,
            handle: None,
            wake: Instant::ZERO,
            vote_at: None,
            learned: Vec::new(),
            log: Vec::new(),
            sabotage: false,
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

    /// The transaction it is at (it learned the outcomes of all before).
    pub fn at(&self) -> usize {
        self.k
    }

    /// Is a recipe of it running?
    pub fn running(&self) -> bool {
        self.handle.is_some()
    }

    fn learn(&mut self, now: Instant, outcome: Outcome) {
        self.learned.push((self.k, outcome));
        self.k += 1;
        self.started_k = false;
        self.handle = None;
        self.vote_at = None;
        // Usually soon; sometimes long after (a late site).
        let pause = if self.next() % 10 == 0 && now < self.stop_at {
            self.ms(200, 800)
        } else {
            self.ms(0, 30)
        };
        self.wake = now + pause;
    }

    fn start(&mut self, now: Instant, client: &mut Client) {
        let tx = tx_path(self.k);
        self.log
            .push(format!("{} start tx-{}", now.as_micros(), self.k));
        if self.slot == 0 {
            let names: Vec<String> = (1..=self.sites).map(site_name).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            // The same id for the same transaction: a restarted coordinator finds its own.
            let mut config = CoordinatorConfig::new(&tx, &names, self.variant, (7, self.k as u64));
            config.deadline = Duration::from_millis(300);
            config.payload = bytes::Bytes::from(format!("payload {}", self.k));
            self.started_k = true;
            let h = client.add(now, Coordinator::new(config));
            client.command(now, h, |c, now| c.start(now));
            self.handle = Some(Handle::Coordinator(h));
        } else {
            let config = SiteConfig::new(&tx, &site_name(self.slot), self.variant);
            let h = client.add(now, Site::new(config));
            client.command(now, h, |s, now| s.start(now));
            self.handle = Some(Handle::Site(h));
        }
    }

    /// A final event that is not an outcome: try again (the same transaction).
    fn retry(&mut self, now: Instant, error: &Error) {
        self.log
            .push(format!("{} failed {error:?}", now.as_micros()));
        self.handle = None;
        self.vote_at = None;
        self.wake = now + Duration::from_millis(20);
    }
}

impl Actor for TxUser {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        for ev in events {
            let ClientEvent::Recipe { id, event } = ev else {
                continue;
            };
            let ours = match &self.handle {
                Some(Handle::Coordinator(h)) => h.id() == *id,
                Some(Handle::Site(h)) => h.id() == *id,
                None => false,
            };
            if !ours {
                continue;
            }
            if let Some(e) = event.downcast_ref::<CoordinatorEvent>() {
                self.log.push(format!("{} {e:?}", now.as_micros()));
                match e {
                    CoordinatorEvent::Started if self.sabotage => {
                        let tx = tx_path(self.k);
                        let data = Outcome::Commit.data();
                        let write = SetDataRequest {
                            path: tx,
                            data,
                            version: -1,
                        };
                        let _ = client.submit(now, Request::SetData(write));
                    }
                    CoordinatorEvent::Decided { outcome } => self.learn(now, *outcome),
                    CoordinatorEvent::Failed { error } => self.retry(now, error),
                    _ => {}
                }
            } else if let Some(e) = event.downcast_ref::<SiteEvent>() {
                self.log.push(format!("{} {e:?}", now.as_micros()));
                match e {
                    SiteEvent::Ready { voted: None, .. } => {
                        self.vote_at = Some(now + self.ms(0, 40));
                    }
                    SiteEvent::Decided { outcome } => self.learn(now, *outcome),
                    SiteEvent::Failed { error } => self.retry(now, error),
                    _ => {}
                }
            }
        }
        if let (Some(Handle::Site(h)), Some(at)) = (&self.handle, self.vote_at) {
            if now >= at {
                let h = *h;
                self.vote_at = None;
                let vote = if self.next() % 100 < 12 {
                    Vote::Abort
                } else {
                    Vote::Commit
                };
                self.log.push(format!("{} vote {vote:?}", now.as_micros()));
                client.command(now, h, |s, now| s.vote(now, vote));
            }
        }
        let may_start = self.slot != 0 || self.started_k || now < self.stop_at;
        if self.handle.is_none() && self.k < TRANSACTIONS && now >= self.wake && may_start {
            self.start(now, client);
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        match (&self.handle, self.vote_at) {
            (Some(_), Some(at)) => Some(at),
            (Some(_), None) => None,
            (None, _) if self.k < TRANSACTIONS && (self.slot != 0 || self.started_k) => {
                Some(self.wake)
            }
            (None, _) if self.k < TRANSACTIONS && self.wake < self.stop_at => Some(self.wake),
            (None, _) => None,
        }
    }

    fn restart(&mut self) {
        self.log.push(String::from("restart"));
        self.handle = None;
        self.vote_at = None;
    }
}

/// What the checker remembers about the server's nodes.
#[derive(Default)]
pub struct Checker {
    outcomes: Vec<Option<(bytes::Bytes, i32)>>,
    votes: Vec<Vec<Option<(bytes::Bytes, i32)>>>,
    seen: Vec<usize>,
}

impl Checker {
    /// The safety invariants.
    pub fn check(&mut self, view: &View<'_, TxUser>) -> Result<(), String> {
        let sites = view.actors.len() - 1;
        self.outcomes.resize(TRANSACTIONS, None);
        self.votes.resize(TRANSACTIONS, vec![None; sites]);
        for k in 0..TRANSACTIONS {
            let tx = tx_path(k);
            let mut votes = Vec::with_capacity(sites);
            for s in 1..=sites {
                let node = view.server.node(&vote_path(&tx, &site_name(s)));
                let node = node.map(|(d, st)| (d, st.version));
                let slot = &mut self.votes[k][s - 1];
                if let (Some(old), Some(new)) = (slot.as_ref(), node.as_ref()) {
                    if old.1 >= 1 && old != new {
                        return Err(format!("tx-{k}: vote of s{s} changed {old:?} -> {new:?}"));
                    }
                }
                if node.as_ref().is_some_and(|n| n.1 >= 1) && slot.is_none() {
                    *slot = node.clone();
                }
                votes.push(node);
            }
            let Some((data, stat)) = view.server.node(&tx) else {
                continue;
            };
            if stat.version >= 1 {
                let now = (data.clone(), stat.version);
                match &self.outcomes[k] {
                    Some(first) if *first != now => {
                        return Err(format!("tx-{k}: outcome changed {first:?} -> {now:?}"));
                    }
                    Some(_) => {}
                    None => {
                        if Outcome::read(&data, stat.version) == Some(Outcome::Commit) {
                            let all = votes.iter().all(|v| {
                                v.as_ref().is_some_and(|(d, ver)| {
                                    Vote::read(d, *ver) == Some(Vote::Commit)
                                })
                            });
                            if !all {
                                return Err(format!(
                                    "tx-{k}: commit without every vote commit: {votes:?}"
                                ));
                            }
                        }
                        self.outcomes[k] = Some(now);
                    }
                }
            }
        }
        self.seen.resize(view.actors.len(), 0);
        for (i, a) in view.actors.iter().enumerate() {
            for &(k, learned) in &a.learned[self.seen[i]..] {
                let written = self.outcomes[k]
                    .as_ref()
                    .and_then(|(d, v)| Outcome::read(d, *v));
                if written != Some(learned) {
                    return Err(format!(
                        "slot {i} learned {learned:?} for tx-{k}, the node says {written:?}"
                    ));
                }
            }
            self.seen[i] = a.learned.len();
        }
        Ok(())
    }
}

/// One schedule with every fault (2.5 s of faults, then a quiet stretch of at least
/// 3 s, long enough for every client to be back: see [`run_with`]) and `clients` slots (the coordinator and `clients - 1` sites); returns (commits, aborts).
pub fn run(seed: u64, clients: usize) -> Result<(usize, usize), String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(5500);
    config.quiet = Duration::from_secs(3);
    run_with(config)
}

/// One schedule with the given settings (the quiet stretch lengthened to at least
/// [`SimConfig::recovery_bound`] plus the transactions' own time); the variant
/// alternates with the seed.
pub fn run_with(config: SimConfig) -> Result<(usize, usize), String> {
    run_inner(config, false)
}

/// [`run`] with a coordinator that commits unconditionally (a raw, unversioned write):
/// the checker must catch it.
pub fn run_sabotaged(seed: u64) -> Result<(usize, usize), String> {
    let mut config = SimConfig::with_faults(seed, 5);
    config.duration = Duration::from_millis(5500);
    config.quiet = Duration::from_secs(3);
    run_inner(config, true)
}

/// What the transactions need, once every client is back with a session, to settle:
/// the coordinator's outcome write (or a site's), the sites' reads of it, the presence
/// nodes' deletes — a few round trips.
const WORKLOAD_SETTLE: Duration = Duration::from_secs(1);

/// Runs one schedule. The quiet stretch is lengthened (and the run with it) to at least
/// [`SimConfig::recovery_bound`] plus [`WORKLOAD_SETTLE`]: a coordinator whose session
/// was suspended just before the quiet stretch, after faults had grown its reconnect
/// backoff to the cap, is back on the server only after its session's expiry estimate
/// and one more capped backoff; liveness is required of it from then on, not before.
fn run_inner(mut config: SimConfig, sabotage: bool) -> Result<(usize, usize), String> {
    config.quiet_past_recovery(WORKLOAD_SETTLE);
    let seed = config.seed;
    let clients = config.clients.max(2);
    let variant = if seed % 2 == 0 {
        Variant::Coordinator
    } else {
        Variant::Peers
    };
    let stop_at = Instant::ZERO + config.duration.saturating_sub(config.quiet);
    let mut sim = Simulation::new(config, |i| {
        let mut a = TxUser::new(
            i,
            clients - 1,
            variant,
            ((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D,
            stop_at,
        );
        a.sabotage = sabotage && i == 0;
        a
    });
    let mut checker = Checker::default();
    sim.run(|v| checker.check(v))?;
    // Liveness and cleanliness: every transaction the coordinator made is decided and
    // known to everyone; only sites waiting for a transaction never made still run.
    let made = (0..TRANSACTIONS)
        .take_while(|&k| sim.server().exists(&tx_path(k)))
        .count();
    let mut problems = Vec::new();
    for (i, a) in sim.actors().iter().enumerate() {
        let waiting = i != 0 && a.running() && a.at() == made;
        if a.at() != made || (a.running() && !waiting) {
            problems.push(format!(
                "slot {i} at tx-{} of {made} made: {:?}",
                a.at(),
                a.log
            ));
        }
        let hosted = sim.client(i).recipes();
        if hosted > usize::from(waiting) {
            problems.push(format!("slot {i}: {hosted} recipes still hosted"));
        }
    }
    let (mut commits, mut aborts) = (0, 0);
    for k in 0..made {
        let tx = tx_path(k);
        match sim
            .server()
            .node(&tx)
            .and_then(|(d, s)| Outcome::read(&d, s.version))
        {
            Some(Outcome::Commit) => commits += 1,
            Some(Outcome::Abort) => aborts += 1,
            None => problems.push(format!("tx-{k} undecided")),
        }
        if let Some(left) = sim.server().children(&alive_dir(&tx)) {
            if !left.is_empty() {
                problems.push(format!("tx-{k}: presence nodes left {left:?}"));
            }
        }
        if sim.server().exists(&coordinator_path(&tx)) {
            problems.push(format!("tx-{k}: coordinator node left"));
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "seed {seed} ({variant:?}): liveness/cleanliness broken once faults stopped:\n{}",
            problems.join("\n")
        ));
    }
    Ok((commits, aborts))
}
