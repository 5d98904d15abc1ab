//! The TTL node (Curator's `PersistentTtlNode` format) in the model world: one owner
//! ([`ME`]) keeps `/app/lease` (a container) and its `touch` child (a TTL node, 200 ms)
//! alive, under every common fault (lost replies after apply, dropped connections,
//! lagging followers, refusals, throttling, expiries, reaps) and time passing by up to
//! a second at once, so the touch child lapses and the server's TTL check reaps it.
//! The script's actors: an operator deletes the touch child or the container, the
//! server's TTL/container check runs, the user closes the node.
//!
//! Safety, after every step:
//!
//! * `Present` is reported only after a touch the server applied (a create or
//!   `setData` of the child by [`ME`], from the server's journal) since the last
//!   `Present`, and only while the node is there: the container and its child exist
//!   in the tree, unless an operator deleted one since that touch (a lapse is no excuse:
//!   a touch answered later than its TTL must not be reported);
//! * nothing after a final event; no `Failed` (TTL nodes are on).
//!
//! Liveness, once faults stop: the node is reported `Present` with both nodes in
//! place; then the user closes it, `Closed` ends the machine, and once its TTL passes
//! the server's check reaps the touch child, then the container: nothing is left
//! behind.

use alloc::format;
use alloc::string::String;
use core::time::Duration;

use zk_recipes::proto::*;
use zk_recipes::recipe::ttl_node::{TtlNode, TtlNodeConfig, TtlNodeEvent};

use super::harness::{self, FaultCounts, Harness, Script, ME};
use super::zk::{Happened, Link};

const PATH: &str = "/app/lease";
const TOUCH: &str = "/app/lease/touch";
/// The node's TTL.
pub const TTL: Duration = Duration::from_millis(200);

type H = Harness<TtlNode>;

/// What a run did, to show the harness is not vacuous.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `Present` reported.
    pub presents: u32,
    /// `Gone` reported (a touch found the node gone and created it again).
    pub gones: u32,
    /// Touches (creates or `setData` of the child) the server applied.
    pub touches: u32,
    /// Times the node was found gone from the tree while the machine ran (lapsed and
    /// reaped, or deleted by the operator).
    pub vanished: u32,
    /// Of those, lapses: gone with no operator delete since the last applied touch
    /// (the touch child outlived its TTL and the server reaped it).
    pub lapses: u32,
    /// Operator deletes of our nodes.
    pub operator_deletes: u32,
    /// Runs the user closed before faults stopped.
    pub early_closes: u32,
    /// The common faults.
    pub faults: FaultCounts,
}

impl core::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Self) {
        self.presents += o.presents;
        self.gones += o.gones;
        self.touches += o.touches;
        self.vanished += o.vanished;
        self.lapses += o.lapses;
        self.operator_deletes += o.operator_deletes;
        self.early_closes += o.early_closes;
        self.faults += o.faults;
    }
}

/// The TTL node's script.
struct TtlScript {
    stats: Stats,
    /// Journal entries read so far.
    journal_read: usize,
    /// Touches applied since the last `Present`.
    unreported: u32,
    /// An operator deleted our node since the last applied touch.
    operator_deleted: bool,
    /// The node was in the tree at the last check.
    was_there: bool,
    /// The final event, once reported.
    ended: Option<TtlNodeEvent>,
}

fn there(h: &H) -> bool {
    let nodes = &h.world.zk.nodes;
    nodes.contains_key(PATH) && nodes.contains_key(TOUCH)
}

fn write(h: &mut H, req: Request) {
    let line = format!("  operator writes {}", harness::describe(&req));
    let r = h.world.zk.write_as(None, &req);
    h.note(format!("{line}: {r:?}"));
}

impl TtlScript {
    /// Reads the server's journal: [`ME`]'s applied touches.
    fn read_journal(&mut self, h: &H) {
        let journal = h.world.zk.journal.as_deref().unwrap_or(&[]);
        for a in &journal[self.journal_read.min(journal.len())..] {
            if a.session == ME && a.path == TOUCH && a.after.is_some() {
                self.stats.touches += 1;
                self.unreported += 1;
                self.operator_deleted = false;
            }
        }
        self.journal_read = journal.len();
    }

    fn on_event(&mut self, h: &H, e: &TtlNodeEvent) -> Result<(), String> {
        if let Some(end) = &self.ended {
            return Err(format!("event {e:?} after the final {end:?}"));
        }
        match e {
            TtlNodeEvent::Present => {
                self.stats.presents += 1;
                if self.unreported == 0 {
                    return Err("Present with no touch applied since the last one".into());
                }
                self.unreported = 0;
                if !there(h) && !self.operator_deleted {
                    return Err("Present while the node is gone (lapsed)".into());
                }
            }
            TtlNodeEvent::Gone => self.stats.gones += 1,
            TtlNodeEvent::Failed { error } => {
                return Err(format!("Failed with TTL nodes on: {error}"));
            }
            TtlNodeEvent::Closed => self.ended = Some(e.clone()),
            TtlNodeEvent::Suspended => {}
            other => return Err(format!("unknown event {other:?}")),
        }
        Ok(())
    }

    /// Faults stopped and the machine runs: is the node up and everything answered?
    fn up_and_quiet(h: &H) -> bool {
        let s = &h.world.zk.sessions[ME];
        let quiet = s.link == Link::Up && s.wire.is_empty() && s.out.is_empty();
        quiet && h.machine().is_some_and(|m| m.is_present()) && there(h)
    }
}

impl Script<TtlNode> for TtlScript {
    const ACTS: u8 = 4;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        match which {
            0 | 1 if arg < 64 => {
                // An operator deletes the touch child, or the container (refused while
                // it has its child).
                let path = if which == 0 { TOUCH } else { PATH };
                if h.world.zk.nodes.contains_key(path) {
                    self.stats.operator_deletes += 1;
                    self.operator_deleted = true;
                }
                let req = Request::Delete(DeleteRequest {
                    path: path.into(),
                    version: -1,
                });
                write(h, req);
            }
            0..=2 => {
                h.note("  the server's TTL and container check".into());
                h.world.zk.reap_all();
            }
            _ if arg > 250 && self.ended.is_none() => {
                self.stats.early_closes += 1;
                h.note("  the user closes the node".into());
                h.user(self, |m, now| m.close(now))?;
            }
            _ => {}
        }
        Ok(())
    }

    fn check(&mut self, h: &H, happened: &[Happened<TtlNodeEvent>]) -> Result<(), String> {
        self.read_journal(h);
        let now_there = there(h);
        if self.was_there && !now_there && self.ended.is_none() {
            self.stats.vanished += 1;
            if !self.operator_deleted {
                self.stats.lapses += 1;
            }
        }
        self.was_there = now_there;
        for x in happened {
            if let Happened::Event(e) = x {
                self.on_event(h, e)?;
            }
        }
        Ok(())
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if self.ended.is_some() {
            // The owner stopped: time passes (the settle round's 50 ms), the server's
            // check runs; done once nothing of ours is left.
            h.world.zk.reap_all();
            let left = [PATH, TOUCH]
                .iter()
                .any(|p| h.world.zk.nodes.contains_key(*p));
            return Ok(!left);
        }
        if !Self::up_and_quiet(h) {
            if round + 2 >= harness::SETTLE_ROUNDS {
                return Err("liveness: the node never came up once faults stopped".into());
            }
            return Ok(false);
        }
        h.note("  the user closes the node".into());
        h.user(self, |m, now| m.close(now))?;
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if self.ended != Some(TtlNodeEvent::Closed) {
            return Err(format!("liveness: not closed at the end: {:?}", self.ended));
        }
        if h.machine().is_some() {
            return Err("liveness: the machine still runs after Closed".into());
        }
        // The parent directory is not ours: a container made for us that never got
        // its child (our create refused after it) stays, as with every recipe's
        // parents (and Curator's).
        let left: alloc::vec::Vec<&str> = [PATH, TOUCH]
            .into_iter()
            .filter(|p| h.world.zk.nodes.contains_key(*p))
            .collect();
        if !left.is_empty() {
            return Err(format!(
                "cleanliness: left behind after the owner stopped and the TTL passed: {left:?}"
            ));
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the violated invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let mut h: H = Harness::new(1);
    h.world.zk.journal = Some(alloc::vec::Vec::new());
    h.world.zk.clock_ms = Some(0);
    let mut script = TtlScript {
        stats: Stats::default(),
        journal_read: 0,
        unreported: 0,
        operator_deleted: false,
        was_there: false,
        ended: None,
    };
    let node = TtlNode::new(TtlNodeConfig::new(PATH, "me", TTL));
    let started = h.host(&mut script, node, |m, now| m.start(now));
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}

/// One run on a server with TTL nodes off: the machine ends with
/// [`Error::TtlNodesDisabled`](zk_recipes::error::Error::TtlNodesDisabled) naming the
/// touch child, and leaves only the empty container (which was never a parent: the
/// server keeps it, as ZooKeeper does). Returns the events.
pub fn ttl_nodes_off() -> alloc::vec::Vec<TtlNodeEvent> {
    let mut h: H = Harness::new(1);
    h.world.zk.ttl_nodes = false;
    let node = TtlNode::new(TtlNodeConfig::new(PATH, "me", TTL));
    let mut all = h.world.host(ME, node, |m, now| m.start(now));
    for _ in 0..16 {
        while h.world.zk.serve(ME) {}
        while !h.world.zk.sessions[ME].out.is_empty() {
            all.extend(h.world.deliver(ME));
        }
    }
    all.into_iter()
        .filter_map(|x| match x {
            Happened::Event(e) => Some(e),
            Happened::Sent(_) => None,
        })
        .collect()
}
