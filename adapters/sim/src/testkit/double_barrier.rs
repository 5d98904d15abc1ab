//! A [`DoubleBarrier`] participant in the model world ([`harness`]),
//! driven by bytes (proptest and libFuzzer share it). The first bytes choose `N`, an
//! enter deadline, and whether the barrier node `b` exists at the start (a container,
//! as participants make it); then the common faults, and the barrier's actors:
//!
//! * peers (another session) arrive: one that finds `N` members makes `ready`;
//! * peers leave: the last one removes `ready` and `b` with its node in one
//!   transaction, as ours does;
//! * an operator deletes `ready`, or our node (while we enter too);
//! * the user leaves, after `Entered` (with or without a deadline).
//!
//! Safety, after every step: `ready` is only ever created after `N` members were
//! present together since the last `ready` was gone (one an operator deleted ended no
//! round); `Entered` only if `ready` and our
//! node existed together at some point the client had heard of; `Left` only when, as
//! the client last heard of `b`, our node is gone and the round is over (`ready` gone,
//! or no member in `b`); one final event per participation and nothing after it; after
//! the final event no request but the deletion of our node; `poll_timeout` never in
//! the past after `handle_timeout`. (Its `Reconnected` claims nothing about a node: the
//! machine looks again, and what it then reports is judged.)
//!
//! Liveness, at the end — no cancel: faults stop, the connection comes back, peers
//! arrive until `N` and leave (one or two a round) once we have entered, the user
//! leaves, time passes. The participation must have ended, the machine must be done,
//! and no node of ours may be left.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use zk_recipes::proto::*;
use zk_recipes::recipe::double_barrier::{DoubleBarrier, DoubleBarrierConfig, DoubleBarrierEvent};

use super::harness::{self, FaultCounts, Harness, Script};
use super::zk::Happened;

const P: &str = "/p";
const B: &str = "/p/b";
const READY: &str = "/p/b/ready";
const READY_NAME: &str = "ready";
const ID: &str = "55555555-0000-4000-8000-000000000000";
/// The client that writes as the peers' session.
const PEERS: usize = 1;

type H = Harness<DoubleBarrier>;

fn child(name: &str) -> String {
    format!("{B}/{name}")
}

stats! {
    /// What a run saw, to show the harness is not vacuous.
    pub struct Stats {
        /// `Entered` events.
        pub entered: u32,
        /// `Left` events.
        pub left: u32,
        /// `NotEntered` and `NotLeft` events.
        pub timed_out: u32,
        /// `Failed` events.
        pub failed: u32,
        /// `Reconnected` events.
        pub reconnected: u32,
        /// Peers that arrived.
        pub peers_arrived: u32,
        /// Peers that left.
        pub peers_left: u32,
        /// An operator deleted our node or `ready`.
        pub operator_deletes: u32,
        /// The common faults.
        pub faults: FaultCounts,
    }
}

struct BarrierScript {
    stats: Stats,
    n: usize,
    finals: u32,
    entered: bool,
    leave_called: bool,
    /// Peers made so far (for their names).
    peers: u32,
    /// The czxids of the `ready` nodes judged so far.
    readies: Vec<i64>,
    /// The czxids of the `ready` nodes an operator deleted.
    operator_readies: Vec<i64>,
}

impl BarrierScript {
    /// The peers' member nodes, by name.
    fn peer_names(h: &H) -> Vec<String> {
        let id = h.world.zk.sessions[PEERS].id;
        h.world
            .zk
            .children(B)
            .into_iter()
            .filter(|n| {
                h.world
                    .zk
                    .nodes
                    .get(&child(n))
                    .is_some_and(|x| x.owner == id)
            })
            .collect()
    }

    fn members(h: &H) -> usize {
        h.world
            .zk
            .children(B)
            .iter()
            .filter(|n| *n != READY_NAME)
            .count()
    }

    fn write(h: &mut H, by: Option<usize>, req: &Request) {
        let r = h.world.zk.write_as(by, req);
        h.note(format!("  {by:?} {}: {r:?}", harness::describe(req)));
    }

    fn create(h: &mut H, by: Option<usize>, path: &str, mode: CreateMode) {
        Self::write(h, by, &harness::create_request(path, mode));
    }

    fn delete(h: &mut H, by: Option<usize>, path: &str) {
        Self::write(
            h,
            by,
            &Request::Delete(DeleteRequest {
                path: path.into(),
                version: -1,
            }),
        );
    }

    /// A peer arrives (making `b` if it is missing); one that finds `N` members makes
    /// `ready`.
    fn peer_arrives(&mut self, h: &mut H) {
        if !h.world.zk.nodes.contains_key(B) {
            Self::create(h, Some(PEERS), B, CreateMode::Container);
        }
        self.peers += 1;
        self.stats.peers_arrived += 1;
        let name = format!("{:08x}-peer", self.peers.wrapping_mul(0x9E37_79B9));
        Self::create(h, Some(PEERS), &child(&name), CreateMode::Ephemeral);
        self.peer_makes_ready(h);
    }

    fn peer_makes_ready(&mut self, h: &mut H) {
        let ready = h.world.zk.nodes.contains_key(READY);
        if !ready && h.world.zk.nodes.contains_key(B) && Self::members(h) >= self.n {
            Self::create(h, Some(PEERS), READY, CreateMode::Persistent);
        }
    }

    /// A peer in leave deletes its node; the last one removes `ready` and `b` with it
    /// in one transaction.
    fn peer_leaves(&mut self, h: &mut H, pick: u8) {
        let peers = Self::peer_names(h);
        let Some(name) = peers.get(usize::from(pick) % peers.len().max(1)) else {
            return;
        };
        self.stats.peers_left += 1;
        if Self::members(h) == 1 && h.world.zk.nodes.contains_key(READY) {
            let del = |path: &str| {
                MultiOp::Delete(DeleteRequest {
                    path: path.into(),
                    version: -1,
                })
            };
            let ops = alloc::vec![del(&child(name)), del(READY), del(B)];
            Self::write(h, Some(PEERS), &Request::Multi(ops));
        } else {
            Self::delete(h, Some(PEERS), &child(name));
        }
    }

    /// The user leaves (after `Entered`).
    fn leave(&mut self, h: &mut H, deadline: Option<Duration>) -> Result<(), String> {
        if self.entered && !self.leave_called {
            self.leave_called = true;
            let r = h.user(self, |m, now| m.leave(now, deadline.map(|d| now + d)))?;
            h.note(format!("  user leave -> {r:?}"));
        }
        Ok(())
    }

    /// Judges every `ready` on the server once: `N` members were present together
    /// between the last `ready`'s deletion and its creation.
    fn judge_ready(&mut self, h: &H) -> Result<(), String> {
        let Some(czxid) = h.world.zk.nodes.get(READY).map(|n| n.czxid) else {
            return Ok(());
        };
        if self.readies.contains(&czxid) {
            return Ok(());
        }
        self.readies.push(czxid);
        let mut most = 0;
        for z in (0..czxid).rev() {
            let kids = h.world.zk.children_at_zxid(B, z);
            // A `ready` an operator deleted ended no round: count on through it.
            match kids.iter().find(|(n, _)| n == READY_NAME) {
                Some((_, c)) if !self.operator_readies.contains(c) => break,
                Some(_) => most = most.max(kids.len() - 1),
                None => most = most.max(kids.len()),
            }
        }
        if most < self.n {
            return Err(format!(
                "ready created at zxid {czxid} with at most {most} members present \
                 together, N = {}",
                self.n
            ));
        }
        Ok(())
    }
}

impl Script<DoubleBarrier> for BarrierScript {
    const ACTS: u8 = 5;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        match which {
            0 | 1 => self.peer_arrives(h),
            2 => self.peer_leaves(h, arg),
            3 => {
                // An operator deletes our node (entering or entered), or `ready`
                // (rarely: it ends a round).
                let ours = arg & 4 == 0;
                if arg & 3 == 0 {
                    self.stats.operator_deletes += 1;
                    let path = if ours { child(ID) } else { READY.into() };
                    if let Some(n) = h.world.zk.nodes.get(READY).filter(|_| !ours) {
                        self.operator_readies.push(n.czxid);
                    }
                    Self::delete(h, None, &path);
                }
            }
            _ => {
                let d = (arg & 0x80 != 0).then(|| Duration::from_millis(40));
                self.leave(h, d)?;
            }
        }
        Ok(())
    }

    fn check(&mut self, h: &H, happened: &[Happened<DoubleBarrierEvent>]) -> Result<(), String> {
        self.judge_ready(h)?;
        for x in happened {
            let e = match x {
                Happened::Sent(req) => {
                    let cleanup = matches!(req, Request::Delete(d) if d.path == child(ID));
                    if self.finals > 0 && !cleanup {
                        return Err(format!("request {req:?} after the final event"));
                    }
                    continue;
                }
                Happened::Event(e) => e,
            };
            if self.finals > 0 {
                return Err(format!("{e:?} after the final event"));
            }
            // Judged against `b` as the client last heard of it.
            let seen = h.seen_zxid();
            match e {
                DoubleBarrierEvent::Entered { .. } => {
                    self.stats.entered += 1;
                    let together = (0..=seen).any(|z| {
                        let kids = h.world.zk.children_at_zxid(B, z);
                        kids.iter().any(|(n, _)| n == READY_NAME)
                            && kids.iter().any(|(n, _)| n == ID)
                    });
                    if !together {
                        return Err("Entered without ready and our node together".into());
                    }
                    self.entered = true;
                }
                DoubleBarrierEvent::Left => {
                    self.stats.left += 1;
                    let kids = h.world.zk.children_at_zxid(B, seen);
                    let ours = kids.iter().any(|(n, _)| n == ID);
                    let ready = kids.iter().any(|(n, _)| n == READY_NAME);
                    let members = kids.len() - usize::from(ready);
                    if ours || (ready && members > 0) {
                        return Err(format!(
                            "Left while the round is on as last heard: {kids:?}"
                        ));
                    }
                }
                DoubleBarrierEvent::NotEntered | DoubleBarrierEvent::NotLeft => {
                    self.stats.timed_out += 1
                }
                DoubleBarrierEvent::Failed { .. } => self.stats.failed += 1,
                DoubleBarrierEvent::Reconnected => self.stats.reconnected += 1,
                _ => {}
            }
            if e.is_final() {
                self.finals += 1;
            }
        }
        Ok(())
    }

    fn settle(&mut self, h: &mut H, _round: u32) -> Result<bool, String> {
        if h.machine().is_none() && self.finals > 0 {
            return Ok(true);
        }
        let ready = h.world.zk.nodes.contains_key(READY);
        if !self.entered && !ready && Self::members(h) < self.n {
            self.peer_arrives(h);
        }
        self.peer_makes_ready(h);
        self.leave(h, None)?;
        if self.leave_called {
            // Peers leave, one or two a round (a schedule may have brought hundreds).
            self.peer_leaves(h, 0);
            if Self::peer_names(h).len() > 100 {
                self.peer_leaves(h, 0);
            }
        }
        h.advance(self, Duration::from_millis(450))?;
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if self.finals != 1 || h.machine().is_some() {
            return Err(format!(
                "liveness: the participation never ended ({} final events): {:?}",
                self.finals,
                h.machine()
            ));
        }
        let left = h.ours();
        if !left.is_empty() {
            return Err(format!("cleanliness: nodes of ours left behind: {left:?}"));
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` describes a broken invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    run_stats(schedule).map(|_| ())
}

/// [`run`], and what the run saw.
pub fn run_stats(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let n = 1 + u32::from(input.next().unwrap_or(1) % 4);
    let enter_deadline = match input.next().unwrap_or(0) % 4 {
        0 => Some(Duration::from_millis(50)),
        _ => None,
    };
    let mut h: H = Harness::new(2);
    BarrierScript::create(&mut h, None, P, CreateMode::Persistent);
    if input.next().unwrap_or(0) % 2 == 0 {
        BarrierScript::create(&mut h, None, B, CreateMode::Container);
    }
    let zxid = h.world.zk.zxid;
    for s in &mut h.world.zk.sessions {
        s.seen_zxid = zxid;
    }
    let mut script = BarrierScript {
        stats: Stats::default(),
        n: n as usize,
        finals: 0,
        entered: false,
        leave_called: false,
        peers: 0,
        readies: Vec::new(),
        operator_readies: Vec::new(),
    };
    h.note(format!("N {n}, enter deadline {enter_deadline:?}"));
    let machine = DoubleBarrier::new(DoubleBarrierConfig::new(B, n, ID));
    let mut entered = Ok(());
    let started = h.host(&mut script, machine, |m, now| {
        entered = m.enter(now, enter_deadline.map(|d| now + d));
    });
    entered.map_err(|e| format!("enter: {e}"))?;
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
