//! Several [`Semaphore`] clients (one session each, `N = 2`) in the model world
//! ([`harness`]), driven by bytes (proptest and libFuzzer share it).
//! Client `i` runs attempt after attempt; [`ME`] meets the common faults, and the
//! script's actors give every client the same ones ([`Harness::client_step`]). The
//! recipe's own steps, for a client the bytes pick:
//!
//! * a quiet moment: everything it sent is answered and read;
//! * the client's next lease create (served by the script's steps) is applied and the
//!   connection breaks before the reply (CURATOR-315's situation);
//! * the client starts an attempt (with or without a deadline); a holder releases, or a
//!   waiter gives up;
//! * an operator deletes a lease node; the server reaps an empty container.
//!
//! Safety, after every step: at most `N` clients hold a lease whose node exists on the
//! server (holder = told `Acquired`, not yet a final event); `Acquired` only on our own
//! lease node and only while it exists as the client last heard; `Reconnected` while
//! holding only while the lease node exists as last heard; one `Acquired` and one final
//! event per attempt, nothing after the final one; `Released` only once the attempt's
//! lease node is gone.
//!
//! Liveness, at the end — no cancelling: faults stop, every client reconnects, the
//! server answers everything, holders release what they got, time passes. Within a
//! bounded number of rounds every attempt must have reported its final event and be
//! done, and no lock or lease node may be left on the server.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use zk_recipes::proto::*;
use zk_recipes::recipe::semaphore::{Semaphore, SemaphoreConfig, SemaphoreEvent};

use super::harness::{self, FaultCounts, Harness, Machines, Script, ME};
use super::zk::{Happened, Link};

const PATH: &str = "/sem";
const LEASES: &str = "/sem/leases";
const LOCKS: &str = "/sem/locks";
const N: u32 = 2;
const CLIENTS: usize = 3;

stats! {
    /// What happened over a run (to show a harness is not vacuous).
    pub struct Stats {
        /// `Acquired` events.
        pub acquired: u32,
        /// Steps at which `N` clients held at once.
        pub full: u32,
        /// `TimedOut` events.
        pub timed_out: u32,
        /// `Lost` events.
        pub lost: u32,
        /// `Failed` events.
        pub failed: u32,
        /// `Reconnected` events while holding.
        pub reconnected: u32,
        /// Lease creates applied whose reply was lost.
        pub lost_lease_creates: u32,
        /// Lease nodes deleted by the operator.
        pub operator_deletes: u32,
        /// Attempts that started over with a new lease node after such a deletion.
        pub restarts: u32,
        /// The common faults, on every client.
        pub faults: FaultCounts,
    }
}

#[derive(Default)]
struct Client {
    attempts: u32,
    /// Told Acquired, no final event yet.
    holding: bool,
    acquired: bool,
    finals: u32,
    lease_prefix: String,
    /// The running attempt's restarts, as last seen.
    restarts: u32,
    /// The reply to this client's next lease create is lost (applied, then the
    /// connection breaks): CURATOR-315's situation.
    lose_lease_create: bool,
}

struct SemScript {
    clients: Vec<Client>,
    stats: Stats,
}

type H = Harness<Semaphore>;

fn is_lease_create(r: Option<&Request>) -> bool {
    matches!(r, Some(Request::Create2(c) | Request::Create(c)) if c.path.starts_with(LEASES))
}

impl SemScript {
    /// Holders whose lease node exists on the server.
    fn live_holders(&self, h: &H) -> usize {
        (0..CLIENTS)
            .filter(|&k| {
                self.clients[k].holding
                    && h.world.machines[k]
                        .as_ref()
                        .and_then(|s| s.lease())
                        .is_some_and(|l| h.world.zk.nodes.contains_key(l))
            })
            .count()
    }

    /// Does `lease` (a full path) exist as client `k` last heard?
    fn heard(h: &H, k: usize, lease: &str) -> bool {
        let name = lease.rsplit('/').next().unwrap_or("");
        h.world
            .zk
            .children_at_zxid(LEASES, h.world.zk.sessions[k].seen_zxid)
            .iter()
            .any(|(n, _)| n == name)
    }

    /// Client `k` starts an attempt (if none runs).
    fn start(&mut self, h: &mut H, k: usize, deadline: Option<Duration>) -> Result<(), String> {
        if h.world.machines[k].is_some() {
            return Ok(());
        }
        let c = &mut self.clients[k];
        c.attempts += 1;
        let m = format!("m{k}-{}", c.attempts);
        let l = format!("l{k}-{}", c.attempts);
        c.lease_prefix = format!("{LEASES}/_c_{l}-");
        c.holding = false;
        c.acquired = false;
        c.finals = 0;
        c.restarts = 0;
        h.note(format!(
            "  client {k} starts an attempt, deadline {deadline:?}"
        ));
        let sem = Semaphore::new(SemaphoreConfig::new(PATH, N, &m, &l));
        let happened = h.world.host(k, sem, |s, now| {
            s.acquire(now, deadline.map(|d| now + d));
        });
        self.happened(h, k, happened)
    }

    fn release(&mut self, h: &mut H, k: usize) -> Result<(), String> {
        let now = h.world.now[k];
        if let Some(s) = h.world.machines[k].as_mut() {
            s.release(now);
            h.note(format!("  client {k} releases"));
        }
        let happened = h.world.pump(k);
        self.happened(h, k, happened)
    }
}

impl Machines<Semaphore> for SemScript {
    fn who(&self, k: usize) -> String {
        format!("client {k}")
    }

    fn judge(
        &mut self,
        h: &H,
        k: usize,
        happened: &[Happened<SemaphoreEvent>],
    ) -> Result<(), String> {
        for x in happened {
            let Happened::Event(e) = x else {
                continue;
            };
            let c = &mut self.clients[k];
            if c.finals > 0 {
                return Err(format!("client {k}: {e:?} after the final event"));
            }
            match e {
                SemaphoreEvent::Acquired { lease } => {
                    if c.acquired {
                        return Err(format!("client {k}: Acquired twice"));
                    }
                    if !lease.starts_with(&c.lease_prefix) {
                        return Err(format!("client {k}: lease {lease} is not ours"));
                    }
                    if !Self::heard(h, k, lease) {
                        return Err(format!(
                            "client {k}: Acquired on {lease}, gone as the client last heard"
                        ));
                    }
                    c.acquired = true;
                    c.holding = true;
                    self.stats.acquired += 1;
                }
                SemaphoreEvent::Reconnected => {
                    if c.holding {
                        self.stats.reconnected += 1;
                        let lease = h.world.machines[k].as_ref().and_then(|s| s.lease());
                        if !lease.is_some_and(|l| Self::heard(h, k, l)) {
                            return Err(format!(
                                "client {k}: Reconnected while its lease {lease:?} is gone as \
                                 last heard"
                            ));
                        }
                    }
                }
                SemaphoreEvent::Suspended => {}
                e => {
                    c.finals += 1;
                    c.holding = false;
                    self.stats.restarts += c.restarts;
                    c.restarts = 0;
                    match e {
                        SemaphoreEvent::TimedOut => self.stats.timed_out += 1,
                        SemaphoreEvent::Lost { .. } => self.stats.lost += 1,
                        SemaphoreEvent::Failed { .. } => self.stats.failed += 1,
                        _ => {}
                    }
                    if matches!(e, SemaphoreEvent::Released) {
                        let sid = h.world.zk.sessions[k].id;
                        let prefix = c.lease_prefix.clone();
                        if let Some(left) = h
                            .world
                            .zk
                            .nodes
                            .iter()
                            .find(|(p, n)| p.starts_with(&prefix) && n.owner == sid)
                        {
                            return Err(format!("client {k}: Released while {} exists", left.0));
                        }
                    }
                }
            }
        }
        if let Some(s) = h.world.machines[k].as_ref() {
            self.clients[k].restarts = s.restarts();
        }
        let live = self.live_holders(h);
        if live > N as usize {
            return Err(format!("{live} live holders > {N}"));
        }
        if live == N as usize {
            self.stats.full += 1;
        }
        Ok(())
    }

    /// The server answers client `k`'s oldest request; a lease create loses its reply
    /// with the connection if asked.
    fn serve(&mut self, h: &mut H, k: usize) -> Result<(), String> {
        let s = &h.world.zk.sessions[k];
        let create = is_lease_create(s.wire.front().map(|(_, r)| r));
        if self.clients[k].lose_lease_create && create && s.link == Link::Up {
            self.clients[k].lose_lease_create = false;
            self.stats.lost_lease_creates += 1;
            h.faults.lost_replies += 1;
            h.note(format!(
                "  client {k}'s lease create is applied, its reply lost"
            ));
            h.world.zk.serve(k);
            let happened = h.world.drop_connection(k);
            return self.happened(h, k, happened);
        }
        let happened = h.client_step(k, 0, 0);
        self.happened(h, k, happened)
    }
}

impl Script<Semaphore> for SemScript {
    /// `which % 10` is the kind of step, `which / 10` (mod the clients) the client.
    const ACTS: u8 = 250;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        let k = usize::from(which / 10) % CLIENTS;
        match which % 10 {
            // The common steps, on any client: serve (twice as often), read, break,
            // reconnect, refuse or expire, time.
            0 | 1 => self.serve(h, k),
            w @ 2..=6 => {
                if w == 3 && arg & 1 == 0 {
                    let s = &h.world.zk.sessions[k];
                    if s.link == Link::Up && is_lease_create(s.wire.front().map(|(_, r)| r)) {
                        self.stats.lost_lease_creates += 1;
                    }
                }
                let happened = h.client_step(k, w.saturating_sub(1), arg);
                self.happened(h, k, happened)
            }
            7 if arg & 1 == 0 => harness::exchange_with(h, self, k),
            7 => {
                self.clients[k].lose_lease_create = true;
                Ok(())
            }
            8 if h.world.machines[k].is_none() => {
                let deadline = match arg >> 6 {
                    0 => None,
                    d => Some(Duration::from_millis(u64::from(d) * 700)),
                };
                self.start(h, k, deadline)
            }
            8 => {
                let holding = self.clients[k].holding;
                if (holding && arg & 0x18 == 0) || arg & 0xf8 == 0x40 {
                    self.release(h, k)?;
                }
                Ok(())
            }
            _ => {
                // The operator deletes a lease node; or the server reaps a container.
                if h.operator_deletes_a_child_or_reaps(LEASES, arg, usize::from(arg >> 1)) {
                    self.stats.operator_deletes += 1;
                }
                Ok(())
            }
        }
    }

    fn check(&mut self, h: &H, happened: &[Happened<SemaphoreEvent>]) -> Result<(), String> {
        self.judge(h, ME, happened)
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if round == 0 {
            for k in 1..CLIENTS {
                h.world.expire_zombie(k);
            }
        }
        for c in &mut self.clients {
            c.lose_lease_create = false;
        }
        for k in 1..CLIENTS {
            if h.world.zk.sessions[k].link != Link::Up {
                let happened = h.world.reconnect(k, false);
                self.happened(h, k, happened)?;
            }
        }
        for _ in 0..4 {
            for k in 0..CLIENTS {
                harness::exchange_with(h, self, k)?;
                if self.clients[k].holding {
                    self.release(h, k)?;
                }
            }
        }
        if (0..CLIENTS).all(|k| h.world.machines[k].is_none()) {
            return Ok(true);
        }
        self.others_wait(h, CLIENTS, Duration::from_millis(50))?;
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        for (k, c) in self.clients.iter().enumerate() {
            if let Some(s) = h.world.machines[k].as_ref() {
                return Err(format!(
                    "liveness: client {k}'s attempt not done after faults stopped: {s:?}"
                ));
            }
            if c.attempts > 0 && c.finals != 1 {
                return Err(format!("client {k}: done after {} final events", c.finals));
            }
        }
        for dir in [LEASES, LOCKS] {
            if h.world.zk.nodes.contains_key(dir) {
                if let Some(left) = h.world.zk.children(dir).first() {
                    return Err(format!("cleanliness: {dir}/{left} left behind"));
                }
            }
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the broken invariant (with the last steps).
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut h: H = Harness::new(CLIENTS);
    let mut script = SemScript {
        clients: (0..CLIENTS).map(|_| Client::default()).collect(),
        stats: Stats::default(),
    };
    let started = (0..CLIENTS).try_for_each(|k| script.start(&mut h, k, None));
    let mut input = schedule.iter().copied();
    started
        .map_err(|e| format!("{e}\nlast steps:\n{}", h.trace().join("\n")))
        .and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
