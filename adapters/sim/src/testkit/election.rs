//! One to three [`Election`] machines in the model world ([`harness`]),
//! driven by bytes (proptest and libFuzzer share it). Each machine has its own session:
//! the machine under test on [`ME`] meets the common faults; the others are peers on
//! clients 1 and 2 that the election's own steps drive. The first byte chooses how
//! many machines there are, which of them rejoin by themselves, and whether the
//! candidates' directory and the acknowledgement directory exist at the start; then
//! the common faults, and the election's actors:
//!
//! * an operator deletes a candidate node;
//! * the users: join, resign (with and without rejoin), close, acknowledge (on any
//!   machine);
//! * a peer's server answers its oldest request, or applies it and the peer's
//!   connection breaks (reply lost); a peer's connection breaks or comes back (half the
//!   time to a lagging follower); a peer's request is refused or throttled; a peer's
//!   session expires (on the server, or a zombie the client gave up on); a peer's time
//!   passes to its deadline.
//!
//! Safety, after every step: at most one machine leads among those whose candidate
//! node still exists and is its current session's (leading: `Elected` folded with
//! [`Leadership::after`], not resigned or closed since); `Elected` only on our node as
//! the client last heard of the directory, with its czxid as the token and no lower
//! candidate; `Acknowledged` and `Reconnected` only while the leadership's candidate
//! node exists as the client last heard of it (with the token as czxid), and
//! `Acknowledged` with the acknowledgement node on the server, its session's, carrying
//! its token; an acknowledgement on the server carries the czxid of a candidate node
//! its session owned, which existed when the acknowledgement was written, and if that
//! node still exists it is the lowest; one final event
//! per machine and nothing (no request either) after it; `Closed` only when no node of
//! its session is left; `Failed` never for a machine that rejoins; `poll_timeout` never
//! in the past after `handle_timeout`.
//!
//! Liveness, at the end: faults stop, every session comes back, every machine that has
//! not ended stands for election. Within a bounded number of rounds exactly one of them
//! leads, it owns the lowest node, the directory holds exactly one node per candidate
//! (the node its machine reports) and nothing else, and the leader's acknowledgement is
//! written. Then everyone closes: every machine must end, be done, and leave no node.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::proto::*;
use zk_recipes::recipe::contender::Contender;
use zk_recipes::recipe::election::{
    default_ack_dir, parse_ack_node, Election, ElectionConfig, ElectionEvent, Leadership,
};

use super::harness::{self, FaultCounts, Harness, Script, ME};
use super::zk::{Happened, Link};

const DIR: &str = "/e";

type H = Harness<Election>;

fn seq_of(name: &str) -> String {
    Contender::parse(name)
        .map(|c| c.sequence)
        .unwrap_or_default()
}

fn path(name: &str) -> String {
    format!("{DIR}/{name}")
}

stats! {
    /// What a run saw, to show the harness is not vacuous.
    pub struct Stats {
        /// `Elected` events.
        pub elected: u32,
        /// `Acknowledged` events.
        pub acknowledged: u32,
        /// `Lost` events.
        pub lost: u32,
        /// `Reconnected` events.
        pub reconnected: u32,
        /// `Resigned` events.
        pub resigned: u32,
        /// An operator deleted a candidate node.
        pub operator_deletes: u32,
        /// Faults the election's own steps gave the peers.
        pub peer_faults: u32,
        /// The common faults (of the machine under test).
        pub faults: FaultCounts,
    }
}

/// What the script knows of one machine from its events and the user's calls.
#[derive(Clone, Debug, Default)]
struct Machine {
    rejoin: bool,
    leadership: Option<Leadership>,
    stepped_down: bool,
    /// Our node while leading (from `Elected`): (token, name).
    leading_node: Option<(i64, String)>,
    joined: bool,
    closing: bool,
    finals: u32,
}

impl Machine {
    fn leads(&self) -> bool {
        self.leadership == Some(Leadership::Leading) && !self.stepped_down
    }
}

struct ElectionScript {
    stats: Stats,
    ms: Vec<Machine>,
    ack_dir: String,
    /// Every candidate node seen on the server: (czxid, name, owner).
    history: Vec<(i64, String, i64)>,
    /// The settle round at which everyone was told to close.
    closed_at: Option<u32>,
}

impl ElectionScript {
    /// Records the candidate nodes on the server now.
    fn record(&mut self, h: &H) {
        for name in h.world.zk.children(DIR) {
            if let Some(n) = h.world.zk.nodes.get(&path(&name)) {
                if !self.history.iter().any(|(c, _, _)| *c == n.czxid) {
                    self.history.push((n.czxid, name, n.owner));
                }
            }
        }
    }

    /// The lowest candidate node on the server.
    fn lowest(h: &H) -> Option<String> {
        h.world
            .zk
            .children(DIR)
            .into_iter()
            .min_by(|a, b| (seq_of(a), a).cmp(&(seq_of(b), b)))
    }

    /// The directory as client `c` last heard of it: (name, czxid).
    fn heard(h: &H, c: usize) -> Vec<(String, i64)> {
        h.world
            .zk
            .children_at_zxid(DIR, h.world.zk.sessions[c].seen_zxid)
    }

    /// Checks what machine `c` sent and reported.
    fn observe(
        &mut self,
        h: &H,
        c: usize,
        happened: &[Happened<ElectionEvent>],
    ) -> Result<(), String> {
        self.record(h);
        let sid = h.world.zk.sessions[c].id;
        for x in happened {
            let e = match x {
                Happened::Sent(req) => {
                    if self.ms[c].finals > 0 {
                        return Err(format!("m{c}: request {req:?} after its final event"));
                    }
                    continue;
                }
                Happened::Event(e) => e,
            };
            if self.ms[c].finals > 0 {
                return Err(format!("m{c}: {e:?} after its final event"));
            }
            let m = &mut self.ms[c];
            m.leadership = Some(m.leadership.unwrap_or(Leadership::Follower).after(e));
            match e {
                ElectionEvent::Elected {
                    fencing_token,
                    node,
                } => {
                    self.stats.elected += 1;
                    let m = &mut self.ms[c];
                    m.stepped_down = false;
                    m.leading_node = Some((*fencing_token, node.clone()));
                    // Judged against the directory as the client last heard of it.
                    let heard = Self::heard(h, c);
                    let Some((_, czxid)) = heard.iter().find(|(n, _)| n == node) else {
                        return Err(format!("m{c}: Elected on {node}, which was deleted"));
                    };
                    if czxid != fencing_token {
                        return Err(format!(
                            "m{c}: Elected with token {fencing_token}, our czxid {czxid}"
                        ));
                    }
                    if let Some((low, _)) = heard.iter().find(|(n, _)| {
                        n != node
                            && (seq_of(n), n.as_str()) < (seq_of(node), node.as_str())
                            && Contender::parse(n).is_some()
                    }) {
                        return Err(format!("m{c}: Elected on {node} while {low} is lower"));
                    }
                }
                ElectionEvent::Acknowledged { fencing_token } => {
                    self.stats.acknowledged += 1;
                    let node = self.ms[c].leading_node.clone();
                    if node.as_ref().map(|(t, _)| *t) != Some(*fencing_token) {
                        return Err(format!(
                            "m{c}: Acknowledged {{ {fencing_token} }} leading {node:?}"
                        ));
                    }
                    let name = node.map(|(_, n)| n).unwrap_or_default();
                    let heard = Self::heard(h, c);
                    if !heard.iter().any(|(n, z)| *n == name && z == fencing_token) {
                        return Err(format!(
                            "m{c}: Acknowledged {{ {fencing_token} }} while its candidate \
                             {name} is gone as last heard: {heard:?}"
                        ));
                    }
                    let ack = format!("{}/{fencing_token}", self.ack_dir);
                    let owner = h.world.zk.nodes.get(&ack).map(|n| n.owner);
                    let zombie = h.world.zk.sessions[c].zombie;
                    if owner != Some(sid) && (owner.is_none() || owner != zombie) {
                        return Err(format!(
                            "m{c}: Acknowledged {{ {fencing_token} }} but {ack} is {owner:?}"
                        ));
                    }
                }
                ElectionEvent::Reconnected => {
                    self.stats.reconnected += 1;
                    if let Some((t, name)) = &self.ms[c].leading_node {
                        if !Self::heard(h, c).iter().any(|(n, z)| n == name && z == t) {
                            return Err(format!("m{c}: Reconnected while its node {name} is gone"));
                        }
                    }
                }
                ElectionEvent::Lost { .. } => {
                    self.stats.lost += 1;
                    // Without rejoin a lost candidacy is not made again until joined.
                    if !self.ms[c].rejoin {
                        self.ms[c].joined = false;
                    }
                }
                ElectionEvent::Resigned => self.stats.resigned += 1,
                ElectionEvent::Failed { error } if self.ms[c].rejoin => {
                    // Nothing here makes a candidacy impossible: one that ends by
                    // itself is made again.
                    return Err(format!("m{c}: Failed {{ {error:?} }} though it rejoins"));
                }
                ElectionEvent::Closed => {
                    let left = h.world.zk.owned_by(sid);
                    if !left.is_empty() {
                        return Err(format!("m{c}: Closed while {left:?} of its session exist"));
                    }
                }
                _ => {}
            }
            let m = &mut self.ms[c];
            if matches!(m.leadership, Some(Leadership::Follower | Leadership::Ended)) {
                m.leading_node = None;
            }
            if e.is_final() {
                m.finals += 1;
                m.joined = false;
            }
        }
        Ok(())
    }

    /// Invariants over every machine and the tree.
    fn global(&self, h: &H) -> Result<(), String> {
        let zk = &h.world.zk;
        let leaders: Vec<usize> = (0..self.ms.len())
            .filter(|&c| {
                self.ms[c].leads()
                    && self.ms[c].leading_node.as_ref().is_some_and(|(_, n)| {
                        zk.nodes
                            .get(&path(n))
                            .is_some_and(|x| x.owner == zk.sessions[c].id)
                    })
            })
            .collect();
        if leaders.len() > 1 {
            return Err(format!("two leaders at once: {leaders:?}"));
        }
        let lowest = Self::lowest(h);
        for name in zk.children(&self.ack_dir) {
            let Some(token) = parse_ack_node(&name) else {
                continue;
            };
            let (owner, written) = zk
                .nodes
                .get(&format!("{}/{name}", self.ack_dir))
                .map_or((0, 0), |n| (n.owner, n.czxid));
            // Its candidate existed when it was written (the write checks it, in one
            // transaction).
            if !zk
                .children_at_zxid(DIR, written)
                .iter()
                .any(|(_, z)| *z == token)
            {
                return Err(format!(
                    "acknowledgement {name} written at zxid {written}, when its candidate \
                     was gone"
                ));
            }
            let Some((_, cand, _)) = self
                .history
                .iter()
                .find(|(z, _, o)| *z == token && *o == owner)
            else {
                return Err(format!(
                    "acknowledgement {name} of session {owner:#x} does not carry a \
                     candidate of its session"
                ));
            };
            let live = zk.nodes.contains_key(&path(cand));
            if live && lowest.as_deref() != Some(cand.as_str()) {
                return Err(format!(
                    "acknowledgement of {cand} while {lowest:?} is the lowest"
                ));
            }
        }
        Ok(())
    }

    fn check_all(
        &mut self,
        h: &H,
        c: usize,
        happened: &[Happened<ElectionEvent>],
    ) -> Result<(), String> {
        self.observe(h, c, happened)?;
        self.global(h)
    }

    /// A user call on machine `c`: 0 join, 1 resign and rejoin, 2 resign, 3 close,
    /// else acknowledge.
    fn user(&mut self, h: &mut H, c: usize, what: u8) -> Result<(), String> {
        if self.ms[c].finals > 0 || h.world.machines[c].is_none() {
            return Ok(());
        }
        let m = &mut self.ms[c];
        match what % 6 {
            0 => m.joined = true,
            1 | 2 => m.joined = what % 6 == 1,
            3 => {
                m.closing = true;
                m.stepped_down = true;
            }
            _ => {}
        }
        let call = move |e: &mut Election, now| match what % 6 {
            0 => e.join(now) != zk_recipes::recipe::election::Join::Ended,
            1 | 2 => e.resign(now, what % 6 == 1),
            3 => {
                e.close(now);
                true
            }
            _ => e.acknowledge(now),
        };
        let r = if c == ME {
            h.user(self, call)?.unwrap_or(false)
        } else {
            let mut r = false;
            let happened = h.world.call(c, |e, now| r = call(e, now));
            self.peer_after(h, c, happened)?;
            r
        };
        if matches!(what % 6, 1 | 2) && r {
            self.ms[c].stepped_down = true;
        }
        h.note(format!("  m{c} user {} -> {r}", what % 6));
        Ok(())
    }

    /// Checks what peer `c` did, and its deadline.
    fn peer_after(
        &mut self,
        h: &mut H,
        c: usize,
        happened: Vec<Happened<ElectionEvent>>,
    ) -> Result<(), String> {
        for x in &happened {
            let line = match x {
                Happened::Sent(r) => format!("  m{c} sent {}", harness::describe(r)),
                Happened::Event(e) => format!("  m{c} event {e:?}"),
            };
            h.note(line);
        }
        self.check_all(h, c, &happened)?;
        if h.world.deadline(c).is_some_and(|t| t <= h.world.now[c]) {
            return Err(format!("m{c}: deadline not after now after handle_timeout"));
        }
        Ok(())
    }

    /// A step of peer `c`'s server, connection or time.
    fn peer_step(&mut self, h: &mut H, c: usize, which: u8, arg: u8) -> Result<(), String> {
        let w = &mut h.world;
        let happened = match which {
            0 => {
                w.zk.serve(c);
                Vec::new()
            }
            1 => w.deliver(c),
            2 => {
                if w.zk.sessions[c].link == Link::Up && !w.zk.sessions[c].wire.is_empty() {
                    self.stats.peer_faults += 1;
                }
                w.zk.serve(c);
                w.drop_connection(c)
            }
            3 => w.drop_connection(c),
            4 => {
                let stale = arg & 128 != 0 && w.zk.sessions[c].link == Link::Down;
                if stale {
                    self.stats.peer_faults += 1;
                }
                w.reconnect(c, stale)
            }
            5 if arg & 128 == 0 => {
                if !w.zk.sessions[c].wire.is_empty() {
                    self.stats.peer_faults += 1;
                }
                w.refuse(c)
            }
            5 => {
                if w.zk.throttle(c) {
                    self.stats.peer_faults += 1;
                }
                Vec::new()
            }
            6 if arg & 128 != 0 => {
                self.stats.peer_faults += 1;
                let mut happened = w.drop_connection(c);
                if arg & 64 == 0 {
                    h.note(format!("  m{c}'s session expires on the server"));
                    h.world.expire_on_server(c);
                } else {
                    h.note(format!("  m{c} gives up on its session"));
                    happened.extend(h.world.expire_locally(c));
                }
                happened
            }
            6 => {
                if w.expire_zombie(c) {
                    h.note(format!("  m{c}'s zombie session expires"));
                }
                Vec::new()
            }
            _ => w.tick(c),
        };
        self.peer_after(h, c, happened)
    }

    /// Peer `c` reconnects, is served and reads until nothing is on its way, and its
    /// time passes by `by`.
    fn peer_settle(&mut self, h: &mut H, c: usize, by: Duration) -> Result<(), String> {
        if h.world.zk.sessions[c].link != Link::Up {
            let happened = h.world.reconnect(c, false);
            self.peer_after(h, c, happened)?;
        }
        for _ in 0..64 {
            let s = &h.world.zk.sessions[c];
            if s.link != Link::Up || (s.wire.is_empty() && s.out.is_empty()) {
                break;
            }
            while !h.world.zk.sessions[c].wire.is_empty() {
                h.world.zk.serve(c);
            }
            while !h.world.zk.sessions[c].out.is_empty() {
                let happened = h.world.deliver(c);
                self.peer_after(h, c, happened)?;
            }
        }
        h.world.now[c] = h.world.now[c] + by;
        let happened = h.world.pump(c);
        self.peer_after(h, c, happened)
    }

    /// Exactly one leader among the candidates, exactly their nodes, its
    /// acknowledgement.
    fn standing(&self, h: &H) -> Result<(), String> {
        let zk = &h.world.zk;
        let candidates: Vec<usize> = (0..self.ms.len())
            .filter(|&c| self.ms[c].finals == 0 && !self.ms[c].closing)
            .collect();
        let mut expected: Vec<(String, i64)> = Vec::new();
        for &c in &candidates {
            match h.world.machines[c].as_ref().and_then(|e| e.node()) {
                Some(n) => expected.push((n.to_string(), zk.sessions[c].id)),
                None => return Err(format!("m{c} has no candidate node")),
            }
        }
        let mut actual: Vec<(String, i64)> = zk
            .children(DIR)
            .into_iter()
            .map(|n| {
                let owner = zk.nodes.get(&path(&n)).map_or(0, |x| x.owner);
                (n, owner)
            })
            .collect();
        expected.sort();
        actual.sort();
        if expected != actual {
            return Err(format!(
                "directory {actual:?}, candidates' nodes {expected:?}"
            ));
        }
        let leaders: Vec<usize> = (0..self.ms.len()).filter(|&c| self.ms[c].leads()).collect();
        if candidates.is_empty() {
            return if leaders.is_empty() {
                Ok(())
            } else {
                Err(format!("leaders {leaders:?} without candidates"))
            };
        }
        let [l] = leaders[..] else {
            return Err(format!("{} leaders: {leaders:?}", leaders.len()));
        };
        let lowest = Self::lowest(h).and_then(|n| zk.nodes.get(&path(&n)).map(|x| x.owner));
        if lowest != Some(zk.sessions[l].id) {
            return Err(format!("leader m{l} does not own the lowest node"));
        }
        let ours = self.ms[l].leading_node.as_ref().map(|(t, _)| *t);
        let token = ours.filter(|t| {
            zk.nodes
                .get(&format!("{}/{t}", self.ack_dir))
                .is_some_and(|n| n.owner == zk.sessions[l].id)
        });
        let acked = h.world.machines[l]
            .as_ref()
            .is_some_and(|e| e.is_acknowledged());
        if token.is_none() || !acked {
            return Err(format!(
                "leader m{l} (token {ours:?}) not acknowledged: acknowledgement {token:?}"
            ));
        }
        Ok(())
    }
}

impl Script<Election> for ElectionScript {
    const ACTS: u8 = 12;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        let n = self.ms.len();
        match which {
            0 => {
                // An operator deletes a candidate node: half the time the lowest (the
                // leader's, or the next leader's).
                let names = h.world.zk.children(DIR);
                let pick = match arg & 1 {
                    0 => Self::lowest(h),
                    _ => names
                        .get(usize::from(arg >> 1) % names.len().max(1))
                        .cloned(),
                };
                if let Some(name) = &pick {
                    self.stats.operator_deletes += 1;
                    let r = h.world.zk.write_as(
                        None,
                        &Request::Delete(DeleteRequest {
                            path: path(name),
                            version: -1,
                        }),
                    );
                    h.note(format!("  an operator deletes {name}: {r:?}"));
                }
                self.global(h)
            }
            1..=4 => self.user(h, usize::from(arg) % n, arg >> 2),
            _ if n > 1 => {
                let c = 1 + usize::from(arg) % (n - 1);
                h.note(format!("  peer m{c} step {}", which - 5));
                self.peer_step(h, c, which - 5, arg)
            }
            _ => Ok(()),
        }
    }

    fn check(&mut self, h: &H, happened: &[Happened<ElectionEvent>]) -> Result<(), String> {
        self.check_all(h, ME, happened)
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        let n = self.ms.len();
        if round == 0 {
            for c in 1..n {
                h.world.expire_zombie(c);
            }
        }
        match self.closed_at {
            None => {
                for c in 0..n {
                    let m = &self.ms[c];
                    if m.finals == 0 && !m.closing && !m.joined {
                        self.user(h, c, 0)?;
                    }
                    let acked = h.world.machines[c]
                        .as_ref()
                        .is_some_and(|e| e.is_acknowledged());
                    if self.ms[c].leads() && round % 4 == 3 && !acked {
                        self.user(h, c, 5)?;
                    }
                }
                for c in 1..n {
                    self.peer_settle(h, c, Duration::from_millis(50))?;
                }
                if round >= 8 && self.standing(h).is_ok() {
                    h.note("close all".into());
                    self.closed_at = Some(round);
                    for c in 0..n {
                        self.user(h, c, 3)?;
                    }
                } else if round >= 200 {
                    return Err(format!(
                        "liveness: no settled leadership once faults stopped: {}",
                        self.standing(h).err().unwrap_or_default()
                    ));
                }
                Ok(false)
            }
            Some(at) => {
                for c in 1..n {
                    self.peer_settle(h, c, Duration::from_millis(50))?;
                }
                Ok((0..n).all(|c| h.world.machines[c].is_none()) || round > at + 150)
            }
        }
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if self.closed_at.is_none() {
            return Err(format!(
                "liveness: no settled leadership once faults stopped: {}",
                self.standing(h).err().unwrap_or_default()
            ));
        }
        for (c, m) in self.ms.iter().enumerate() {
            if m.finals != 1 {
                return Err(format!("liveness: m{c} never reported its final event"));
            }
            if h.world.machines[c].is_some() {
                return Err(format!("liveness: m{c} is not done after its final event"));
            }
        }
        let left = h.world.zk.children(DIR);
        let acks = h.world.zk.children(&self.ack_dir);
        if !left.is_empty() || !acks.is_empty() {
            return Err(format!(
                "cleanliness: left behind {left:?}, acknowledgements {acks:?}"
            ));
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` describes the broken invariant and the last steps taken.
/// Nothing is tolerated: a leader deposed by an operator deleting its node still
/// withdraws its acknowledgement (its name is unique to its leadership).
pub fn run(schedule: &[u8]) -> Result<(), String> {
    run_stats(schedule).map(|_| ())
}

/// [`run`], and what the run saw.
pub fn run_stats(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let a = input.next().unwrap_or(0);
    let count = 1 + usize::from(a % 3);
    let mut h: H = Harness::new(count);
    let ack_dir = default_ack_dir(DIR);
    for (dir, bit) in [(DIR, 64u8), (ack_dir.as_str(), 128)] {
        if a & bit == 0 {
            let _ = h.world.zk.write_as(
                None,
                &Request::Create(CreateRequest {
                    path: dir.into(),
                    data: Bytes::new(),
                    acl: Acl::open_unsafe(),
                    flags: CreateMode::Persistent.to_i32(),
                }),
            );
        }
    }
    let zxid = h.world.zk.zxid;
    for s in &mut h.world.zk.sessions {
        s.seen_zxid = zxid;
    }
    let mut script = ElectionScript {
        stats: Stats::default(),
        ms: (0..count)
            .map(|i| Machine {
                rejoin: a & (8 << i) == 0,
                joined: true,
                ..Machine::default()
            })
            .collect(),
        ack_dir,
        history: Vec::new(),
        closed_at: None,
    };
    let machine = |i: usize| {
        let mut config = ElectionConfig::new(DIR, &format!("p{i}"), (i as u64 + 1, 42));
        config.rejoin = a & (8 << i) == 0;
        Election::new(config)
    };
    let join = |e: &mut Election, now| {
        let _ = e.join(now);
    };
    for c in 1..count {
        let happened = h.world.host(c, machine(c), join);
        script.peer_after(&mut h, c, happened)?;
    }
    let started = h.host(&mut script, machine(ME), join);
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
