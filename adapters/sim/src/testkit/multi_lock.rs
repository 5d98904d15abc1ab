//! Three [`MultiLock`] clients (one session each) in the model world ([`harness`]),
//! driven by bytes (proptest and libFuzzer share it). Their sets overlap in a cycle,
//! given as `[a, b]`, `[b, c]` and `[c, a]`: locks taken in the order given deadlock
//! there (each holds its first path and waits for the next one's first).
//! Client `i` runs attempt after attempt; [`ME`] meets the common faults, and the
//! script's actors give every client the same ones ([`Harness::client_step`]). The
//! recipe's own steps, for a client the bytes pick:
//!
//! * a quiet moment: everything it sent is answered and read;
//! * the client starts an attempt (with or without a deadline); a holder releases, or a
//!   waiter gives up;
//! * an operator deletes a lock node; the server reaps an empty container.
//!
//! Safety, after every step: no path has two clients holding it whose node in it exists
//! on the server (holder = told `Acquired`, not yet a final event); `Acquired` names
//! one node of ours per path, each existing as the client last heard, with its creation
//! zxid as fencing token; one `Acquired` and one final event per attempt, nothing after
//! the final one; `TimedOut`, `Released` and `Cancelled` only once no node of the
//! attempt is left.
//!
//! Liveness, at the end — no cancelling: faults stop, every client reconnects, the
//! server answers everything, holders release what they got, time passes. Within a
//! bounded number of rounds every attempt (those without a deadline included: a
//! deadlock would stall them) must have reported its final event and be done, and no
//! lock node may be left on the server.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use zk_recipes::recipe::multi_lock::{HeldLock, MultiLock, MultiLockConfig, MultiLockEvent};

use super::harness::{self, FaultCounts, Harness, Machines, Script, ME};
use super::zk::{Happened, Link};

const DIRS: [&str; 3] = ["/ml/a", "/ml/b", "/ml/c"];
const CLIENTS: usize = 3;

/// Client `k`'s paths, in the order it gives them.
fn paths(k: usize) -> [&'static str; 2] {
    match k {
        0 => [DIRS[0], DIRS[1]],
        1 => [DIRS[1], DIRS[2]],
        _ => [DIRS[2], DIRS[0]],
    }
}

stats! {
    /// What happened over a run (to show a harness is not vacuous).
    pub struct Stats {
        /// `Acquired` events.
        pub acquired: u32,
        /// Steps at which two paths were held by live holders.
        pub contended: u32,
        /// `TimedOut` events.
        pub timed_out: u32,
        /// `TimedOut` or `Cancelled` events of an attempt that held a lock meanwhile
        /// (what it took released before the event).
        pub gave_up_holding_some: u32,
        /// `Cancelled` events.
        pub cancelled: u32,
        /// `Lost` events.
        pub lost: u32,
        /// `Failed` events.
        pub failed: u32,
        /// `Reconnected` events while holding.
        pub reconnected: u32,
        /// Lock nodes deleted by the operator.
        pub operator_deletes: u32,
        /// The common faults, on every client.
        pub faults: FaultCounts,
    }
}

#[derive(Default)]
struct Client {
    attempts: u32,
    /// Told Acquired, no final event yet: the locks.
    holding: Option<Vec<HeldLock>>,
    acquired: bool,
    /// The most locks the running attempt held before `Acquired`.
    partial: usize,
    finals: u32,
    /// `_c_<id>-` of the running attempt.
    id: String,
}

struct MlScript {
    clients: Vec<Client>,
    stats: Stats,
}

type H = Harness<MultiLock>;

impl MlScript {
    /// Clients holding `dir` whose node in it exists on the server.
    fn live_holders(&self, h: &H, dir: &str) -> usize {
        self.clients
            .iter()
            .filter(|c| {
                c.holding.as_ref().is_some_and(|locks| {
                    locks.iter().any(|l| {
                        l.path == dir && h.world.zk.nodes.contains_key(&format!("{dir}/{}", l.node))
                    })
                })
            })
            .count()
    }

    /// Does `dir/name` exist as client `k` last heard?
    fn heard(h: &H, k: usize, dir: &str, name: &str) -> bool {
        h.world
            .zk
            .children_at_zxid(dir, h.world.zk.sessions[k].seen_zxid)
            .iter()
            .any(|(n, _)| n == name)
    }

    /// A node of client `k`'s attempt on the server, owned by its session.
    fn left_of(h: &H, k: usize, id: &str) -> Option<String> {
        let sid = h.world.zk.sessions[k].id;
        DIRS.iter().find_map(|d| {
            let prefix = format!("{d}/_c_{id}-");
            h.world
                .zk
                .nodes
                .iter()
                .find(|(p, n)| p.starts_with(&prefix) && n.owner == sid)
                .map(|(p, _)| p.clone())
        })
    }

    /// Client `k` starts an attempt (if none runs).
    fn start(&mut self, h: &mut H, k: usize, deadline: Option<Duration>) -> Result<(), String> {
        if h.world.machines[k].is_some() {
            return Ok(());
        }
        let c = &mut self.clients[k];
        c.attempts += 1;
        c.id = format!("m{k}-{}", c.attempts);
        c.holding = None;
        c.acquired = false;
        c.partial = 0;
        c.finals = 0;
        h.note(format!(
            "  client {k} starts an attempt on {:?}, deadline {deadline:?}",
            paths(k)
        ));
        let m = MultiLock::new(MultiLockConfig::new(&paths(k), &c.id));
        let happened = h.world.host(k, m, |m, now| {
            m.acquire(now, deadline.map(|d| now + d));
        });
        self.happened(h, k, happened)
    }

    fn release(&mut self, h: &mut H, k: usize) -> Result<(), String> {
        let now = h.world.now[k];
        if let Some(m) = h.world.machines[k].as_mut() {
            m.release(now);
            h.note(format!("  client {k} releases"));
        }
        let happened = h.world.pump(k);
        self.happened(h, k, happened)
    }

    /// An `Acquired` of client `k`: every lock one of ours, existing as last heard,
    /// its token the node's creation zxid.
    fn check_acquired(&self, h: &H, k: usize, locks: &[HeldLock]) -> Result<(), String> {
        let mut want: Vec<&str> = paths(k).to_vec();
        want.sort_unstable();
        // The set, whatever the order (the order is the transcripts' business; what
        // the order is for, no deadlock, is the liveness check's).
        let mut got: Vec<&str> = locks.iter().map(|l| l.path.as_str()).collect();
        got.sort_unstable();
        if got != want {
            return Err(format!("client {k}: Acquired {got:?}, wanted {want:?}"));
        }
        for l in locks {
            if !l.node.starts_with(&format!("_c_{}-", self.clients[k].id)) {
                return Err(format!("client {k}: {}/{} is not ours", l.path, l.node));
            }
            if !Self::heard(h, k, &l.path, &l.node) {
                return Err(format!(
                    "client {k}: Acquired {}/{}, gone as the client last heard",
                    l.path, l.node
                ));
            }
            let path = format!("{}/{}", l.path, l.node);
            if let Some(n) = h.world.zk.nodes.get(&path) {
                if n.czxid != l.fencing_token {
                    return Err(format!(
                        "client {k}: token {} for {path}, created at {}",
                        l.fencing_token, n.czxid
                    ));
                }
            }
        }
        Ok(())
    }

    fn final_event(&mut self, h: &H, k: usize, e: &MultiLockEvent) -> Result<(), String> {
        let c = &mut self.clients[k];
        c.finals += 1;
        c.holding = None;
        if matches!(e, MultiLockEvent::TimedOut | MultiLockEvent::Cancelled) && c.partial > 0 {
            self.stats.gave_up_holding_some += 1;
        }
        match e {
            MultiLockEvent::TimedOut => self.stats.timed_out += 1,
            MultiLockEvent::Cancelled => self.stats.cancelled += 1,
            MultiLockEvent::Lost { .. } => self.stats.lost += 1,
            MultiLockEvent::Failed { .. } => self.stats.failed += 1,
            _ => {}
        }
        if matches!(
            e,
            MultiLockEvent::TimedOut | MultiLockEvent::Released | MultiLockEvent::Cancelled
        ) {
            if let Some(left) = Self::left_of(h, k, &c.id.clone()) {
                return Err(format!("client {k}: {e:?} while {left} exists"));
            }
        }
        Ok(())
    }
}

impl Machines<MultiLock> for MlScript {
    fn who(&self, k: usize) -> String {
        format!("client {k}")
    }

    fn judge(
        &mut self,
        h: &H,
        k: usize,
        happened: &[Happened<MultiLockEvent>],
    ) -> Result<(), String> {
        for x in happened {
            let Happened::Event(e) = x else {
                continue;
            };
            if self.clients[k].finals > 0 {
                return Err(format!("client {k}: {e:?} after the final event"));
            }
            match e {
                MultiLockEvent::Acquired { locks } => {
                    if self.clients[k].acquired {
                        return Err(format!("client {k}: Acquired twice"));
                    }
                    self.check_acquired(h, k, locks)?;
                    let c = &mut self.clients[k];
                    c.acquired = true;
                    c.holding = Some(locks.clone());
                    self.stats.acquired += 1;
                }
                MultiLockEvent::Reconnected => {
                    if let Some(locks) = &self.clients[k].holding {
                        self.stats.reconnected += 1;
                        if let Some(l) = locks.iter().find(|l| !Self::heard(h, k, &l.path, &l.node))
                        {
                            return Err(format!(
                                "client {k}: Reconnected while {}/{} is gone as last heard",
                                l.path, l.node
                            ));
                        }
                    }
                }
                MultiLockEvent::Suspended => {}
                e => self.final_event(h, k, e)?,
            }
        }
        if let Some(m) = h.world.machines[k].as_ref() {
            let c = &mut self.clients[k];
            if !c.acquired {
                c.partial = c.partial.max(m.held_count());
            }
        }
        let mut holders = 0;
        for dir in DIRS {
            let live = self.live_holders(h, dir);
            if live > 1 {
                return Err(format!("{live} live holders of {dir}"));
            }
            holders += live;
        }
        if holders >= 2 {
            self.stats.contended += 1;
        }
        Ok(())
    }
}

impl Script<MultiLock> for MlScript {
    /// `which % 10` is the kind of step, `which / 10` (mod the clients) the client.
    const ACTS: u8 = 250;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        let k = usize::from(which / 10) % CLIENTS;
        match which % 10 {
            // The common steps, on any client: serve (twice as often), read, break,
            // reconnect, refuse or expire, time.
            0 | 1 => self.serve(h, k),
            w @ 2..=6 => {
                let happened = h.client_step(k, w.saturating_sub(1), arg);
                self.happened(h, k, happened)
            }
            7 => harness::exchange_with(h, self, k),
            8 if h.world.machines[k].is_none() => {
                let deadline = match arg >> 6 {
                    0 | 1 => None,
                    d => Some(Duration::from_millis(u64::from(d) * 500)),
                };
                self.start(h, k, deadline)
            }
            8 => {
                let holding = self.clients[k].holding.is_some();
                // A holder releases; a waiter gives up (rarer).
                if (holding && arg & 0x18 == 0) || (!holding && arg & 0xf8 == 0x40) {
                    self.release(h, k)?;
                }
                Ok(())
            }
            _ => {
                // The operator deletes a lock node; or the server reaps a container.
                let dir = DIRS[usize::from(arg >> 1) % DIRS.len()];
                if h.operator_deletes_a_child_or_reaps(dir, arg, usize::from(arg >> 3)) {
                    self.stats.operator_deletes += 1;
                }
                Ok(())
            }
        }
    }

    fn check(&mut self, h: &H, happened: &[Happened<MultiLockEvent>]) -> Result<(), String> {
        self.judge(h, ME, happened)
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if round == 0 {
            for k in 1..CLIENTS {
                h.world.expire_zombie(k);
            }
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
                if self.clients[k].holding.is_some() {
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
            if let Some(m) = h.world.machines[k].as_ref() {
                return Err(format!(
                    "liveness: client {k}'s attempt not done after faults stopped \
                     (a deadlock?): {m:?}"
                ));
            }
            if c.attempts > 0 && c.finals != 1 {
                return Err(format!("client {k}: done after {} final events", c.finals));
            }
        }
        for dir in DIRS {
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
    let mut script = MlScript {
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
