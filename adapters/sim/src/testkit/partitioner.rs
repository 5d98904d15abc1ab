//! Three [`Partitioner`] members (one session each) dividing five items in the model
//! world ([`harness`]), driven by bytes (proptest and libFuzzer share it). [`ME`] meets
//! the common faults, and the script's actors give every member the same ones
//! ([`Harness::client_step`]). The recipe's own steps, for a member the bytes pick:
//!
//! * a quiet moment: everything it sent is answered and read;
//! * a member joins (a new partitioner on its session, if none runs); a member told
//!   `ReleaseNeeded` releases (often); a member finishes (rarely);
//! * an operator deletes an item's lock node or a party node; the server reaps an
//!   empty container.
//!
//! Safety, after every step: no item has two members holding it whose lock node exists
//! on the server (holder = told `Acquired`, no `Released` or final event since);
//! `Acquired` names lock nodes of ours, existing as the member last heard, with their
//! creation zxid as fencing token, the items in order, no item twice; one final event
//! per member, nothing after it; `Finished` only once no node of that member is left.
//!
//! Liveness, at the end — faults stop, every member reconnects, the server answers
//! everything, members told `ReleaseNeeded` release, time passes: within a bounded
//! number of rounds every running member holds its share and, together, they hold
//! every item exactly once, as kazoo's division of the items among the party says;
//! then every member finishes, must end, and no node of the partitioner may be left.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use zk_recipes::recipe::partitioner::{HeldItem, PartitionEvent, Partitioner, PartitionerConfig};

use super::harness::{self, FaultCounts, Harness, Machines, Script, ME};
use super::zk::{Happened, Link};

const PATH: &str = "/sp";
const ITEMS: [&str; 5] = ["a", "b", "c", "d", "e"];
const CLIENTS: usize = 3;
const BOUNDARY: Duration = Duration::from_millis(100);

stats! {
    /// What happened over a run (to show a harness is not vacuous).
    pub struct Stats {
        /// `Acquired` events.
        pub acquired: u32,
        /// `Acquired` events while another member held items too.
        pub acquired_beside: u32,
        /// `ReleaseNeeded` events.
        pub release_needed: u32,
        /// `Released` events.
        pub released: u32,
        /// `Finished` events.
        pub finished: u32,
        /// `Failed` events.
        pub failed: u32,
        /// Runs whose settling reached a full division held by two members or more.
        pub divided: u32,
        /// Nodes deleted by the operator.
        pub operator_deletes: u32,
        /// The common faults, on every member.
        pub faults: FaultCounts,
    }
}

#[derive(Default)]
struct Member {
    joins: u32,
    /// Told `Acquired`, no `Released` or final event since: the items.
    holding: Option<Vec<HeldItem>>,
    /// Told `ReleaseNeeded` since the last `Acquired`.
    asked: bool,
    finals: u32,
    /// The running partitioner's id.
    id: String,
}

struct PartScript {
    members: Vec<Member>,
    /// The settling saw every item held, as the division says: members finish now.
    covered: bool,
    stats: Stats,
}

type H = Harness<Partitioner>;

fn identifier(k: usize) -> String {
    format!("w{k}")
}

fn lock_dir(item: &str) -> String {
    format!("{PATH}/locks/{item}")
}

impl PartScript {
    /// Members holding `item` whose lock node exists on the server.
    fn live_holders(&self, h: &H, item: &str) -> usize {
        self.members
            .iter()
            .filter(|m| {
                m.holding.as_ref().is_some_and(|held| {
                    held.iter().any(|x| {
                        x.item == item
                            && h.world.zk.nodes.contains_key(&format!(
                                "{}/{}",
                                lock_dir(item),
                                x.node
                            ))
                    })
                })
            })
            .count()
    }

    /// A node of member `k`'s partitioner on the server, owned by its session (a
    /// session the client gave up on takes its nodes along when the server expires it).
    fn left_of(h: &H, k: usize, id: &str) -> Option<String> {
        let hex: String = id.chars().filter(|c| *c != '-').collect();
        let sid = h.world.zk.sessions[k].id;
        h.world
            .zk
            .nodes
            .iter()
            .find(|(p, n)| {
                n.owner == sid
                    && p.starts_with(PATH)
                    && p.rsplit('/').next().is_some_and(|n| n.starts_with(&hex))
            })
            .map(|(p, _)| p.clone())
    }

    fn join(&mut self, h: &mut H, k: usize) -> Result<(), String> {
        if h.world.machines[k].is_some() {
            return Ok(());
        }
        let m = &mut self.members[k];
        m.joins += 1;
        m.id = format!("p{k}n{}", m.joins);
        m.holding = None;
        m.asked = false;
        m.finals = 0;
        h.note(format!("  member {k} joins as {}", m.id));
        let mut c = PartitionerConfig::new(PATH, &ITEMS, &identifier(k), &m.id);
        c.time_boundary = BOUNDARY;
        let happened = h.world.host(k, Partitioner::new(c), |p, now| p.start(now));
        self.happened(h, k, happened)
    }

    fn call(&mut self, h: &mut H, k: usize, finish: bool) -> Result<(), String> {
        h.note(format!(
            "  member {k} {}",
            if finish { "finishes" } else { "releases" }
        ));
        let happened = h.world.call(k, |p, now| {
            if finish {
                p.finish(now)
            } else {
                p.release(now)
            }
        });
        self.happened(h, k, happened)
    }

    fn check_acquired(&self, h: &H, k: usize, items: &[HeldItem]) -> Result<(), String> {
        let names: Vec<&str> = items.iter().map(|x| x.item.as_str()).collect();
        if names.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!(
                "member {k}: Acquired {names:?}, not sorted or twice"
            ));
        }
        let id = &self.members[k].id;
        for x in items {
            let dir = lock_dir(&x.item);
            if !x.node.starts_with(id.as_str()) || !x.node.contains("__lock__") {
                return Err(format!("member {k}: {dir}/{} is not ours", x.node));
            }
            let seen = h.world.zk.sessions[k].seen_zxid;
            if !h
                .world
                .zk
                .children_at_zxid(&dir, seen)
                .iter()
                .any(|(n, _)| *n == x.node)
            {
                return Err(format!(
                    "member {k}: Acquired {dir}/{}, gone as last heard",
                    x.node
                ));
            }
            if let Some(n) = h.world.zk.nodes.get(&format!("{dir}/{}", x.node)) {
                if n.czxid != x.fencing_token {
                    return Err(format!(
                        "member {k}: token {} of {dir}, created at {}",
                        x.fencing_token, n.czxid
                    ));
                }
            }
        }
        Ok(())
    }

    fn on_event(&mut self, h: &H, k: usize, e: &PartitionEvent) -> Result<(), String> {
        if self.members[k].finals > 0 {
            return Err(format!("member {k}: {e:?} after the final event"));
        }
        match e {
            PartitionEvent::Acquired { items } => {
                if self.members[k].holding.is_some() {
                    return Err(format!("member {k}: Acquired while holding"));
                }
                self.check_acquired(h, k, items)?;
                self.stats.acquired += 1;
                if self
                    .members
                    .iter()
                    .any(|m| m.holding.as_ref().is_some_and(|x| !x.is_empty()))
                {
                    self.stats.acquired_beside += 1;
                }
                let m = &mut self.members[k];
                m.holding = Some(items.clone());
                m.asked = false;
            }
            PartitionEvent::ReleaseNeeded => {
                self.stats.release_needed += 1;
                self.members[k].asked = true;
            }
            PartitionEvent::Released => {
                self.stats.released += 1;
                let m = &mut self.members[k];
                if m.holding.take().is_none() {
                    return Err(format!("member {k}: Released while not holding"));
                }
                let id = m.id.clone();
                for item in ITEMS {
                    let dir = lock_dir(item);
                    let ours = h
                        .world
                        .zk
                        .nodes
                        .keys()
                        .any(|p| p.starts_with(&format!("{dir}/{id}")));
                    if ours {
                        return Err(format!(
                            "member {k}: Released while its lock in {dir} exists"
                        ));
                    }
                }
            }
            PartitionEvent::Finished | PartitionEvent::Failed { .. } => {
                let m = &mut self.members[k];
                m.finals += 1;
                m.holding = None;
                if matches!(e, PartitionEvent::Finished) {
                    self.stats.finished += 1;
                    if let Some(left) = Self::left_of(h, k, &m.id.clone()) {
                        return Err(format!("member {k}: Finished while {left} exists"));
                    }
                } else {
                    self.stats.failed += 1;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Every running member holds, nobody is asked to release, and together they hold
    /// every item once, as the division of the items among the running members says.
    fn fully_divided(&self, h: &H) -> bool {
        let running: Vec<usize> = (0..CLIENTS)
            .filter(|k| h.world.machines[*k].is_some())
            .collect();
        if running.is_empty() {
            return false;
        }
        // kazoo's division, written out for these identifiers (`w0` < `w1` < `w2`, items
        // already sorted): the member of rank `r` takes items `r`, `r + m`, ...
        running.iter().enumerate().all(|(rank, k)| {
            let m = &self.members[*k];
            let want: Vec<&str> = ITEMS
                .iter()
                .skip(rank)
                .step_by(running.len())
                .copied()
                .collect();
            !m.asked
                && m.holding.as_ref().is_some_and(|held| {
                    held.iter().map(|x| x.item.as_str()).collect::<Vec<_>>() == want
                })
        }) && ITEMS.iter().all(|i| self.live_holders(h, i) == 1)
    }
}

impl Machines<Partitioner> for PartScript {
    fn who(&self, k: usize) -> String {
        format!("member {k}")
    }

    fn judge(
        &mut self,
        h: &H,
        k: usize,
        happened: &[Happened<PartitionEvent>],
    ) -> Result<(), String> {
        for x in happened {
            if let Happened::Event(e) = x {
                self.on_event(h, k, e)?;
            }
        }
        for item in ITEMS {
            let live = self.live_holders(h, item);
            if live > 1 {
                return Err(format!("{live} live holders of item {item}"));
            }
        }
        Ok(())
    }
}

impl Script<Partitioner> for PartScript {
    /// `which % 10` is the kind of step, `which / 10` (mod the members) the member.
    const ACTS: u8 = 250;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        let k = usize::from(which / 10) % CLIENTS;
        match which % 10 {
            0 | 1 => self.serve(h, k),
            w @ 2..=6 => {
                let happened = h.client_step(k, w.saturating_sub(1), arg);
                self.happened(h, k, happened)
            }
            7 => harness::exchange_with(h, self, k),
            8 if h.world.machines[k].is_none() => self.join(h, k),
            8 => {
                if self.members[k].asked && arg & 0x3 != 0 {
                    self.call(h, k, false)
                } else if arg >= 0xf0 {
                    self.call(h, k, true)
                } else {
                    Ok(())
                }
            }
            _ => {
                // The operator deletes a lock or party node; or the server reaps.
                let dirs: Vec<String> = ITEMS
                    .iter()
                    .map(|i| lock_dir(i))
                    .chain([format!("{PATH}/party")])
                    .collect();
                let dir = &dirs[usize::from(arg >> 1) % dirs.len()];
                if h.operator_deletes_a_child_or_reaps(dir, arg, usize::from(arg >> 4)) {
                    self.stats.operator_deletes += 1;
                }
                Ok(())
            }
        }
    }

    fn check(&mut self, h: &H, happened: &[Happened<PartitionEvent>]) -> Result<(), String> {
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
        if !self.covered && (0..CLIENTS).all(|k| h.world.machines[k].is_none()) {
            // Everyone ended during the faults: one member joins again.
            self.join(h, ME)?;
        }
        for _ in 0..4 {
            for k in 0..CLIENTS {
                harness::exchange_with(h, self, k)?;
                if self.members[k].asked && !self.covered {
                    self.call(h, k, false)?;
                }
            }
        }
        if !self.covered && self.fully_divided(h) {
            self.covered = true;
            let holders = self
                .members
                .iter()
                .filter(|m| m.holding.as_ref().is_some_and(|x| !x.is_empty()));
            if holders.count() >= 2 {
                self.stats.divided += 1;
            }
            h.note("  every item held once: members finish".to_string());
            for k in 0..CLIENTS {
                if h.world.machines[k].is_some() {
                    self.call(h, k, true)?;
                }
            }
        }
        if self.covered && (0..CLIENTS).all(|k| h.world.machines[k].is_none()) {
            return Ok(true);
        }
        self.others_wait(h, CLIENTS, Duration::from_millis(50))?;
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if !self.covered {
            let held: Vec<_> = self
                .members
                .iter()
                .enumerate()
                .map(|(k, m)| {
                    (
                        m.holding.clone(),
                        m.asked,
                        h.world.machines[k].as_ref().map(|p| p.debug_state()),
                    )
                })
                .collect();
            return Err(format!(
                "liveness: the items were never all held once after faults stopped: {held:?}"
            ));
        }
        for (k, m) in self.members.iter().enumerate() {
            if let Some(p) = h.world.machines[k].as_ref() {
                return Err(format!(
                    "liveness: member {k} not done after finishing: {p:?}"
                ));
            }
            if m.joins > 0 && m.finals != 1 {
                return Err(format!("member {k}: ended after {} final events", m.finals));
            }
        }
        let left: Vec<&String> = h
            .world
            .zk
            .nodes
            .iter()
            .filter(|(p, n)| p.starts_with(PATH) && n.owner != 0)
            .map(|(p, _)| p)
            .collect();
        if let Some(p) = left.first() {
            return Err(format!("cleanliness: {p} left behind"));
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the broken invariant (with the last steps).
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut h: H = Harness::new(CLIENTS);
    let mut script = PartScript {
        members: (0..CLIENTS).map(|_| Member::default()).collect(),
        covered: false,
        stats: Stats::default(),
    };
    let started = (0..CLIENTS).try_for_each(|k| script.join(&mut h, k));
    let mut input = schedule.iter().copied();
    started
        .map_err(|e| format!("{e}\nlast steps:\n{}", h.trace().join("\n")))
        .and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
