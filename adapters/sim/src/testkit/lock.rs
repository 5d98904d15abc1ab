//! A [`Lock`] in the model world ([`harness`]), driven by bytes
//! (proptest and libFuzzer share it). The first bytes choose the lock (kind, deadline,
//! revocable, re-entrant, own-node watch) and the directory at the start (missing, a
//! missing chroot, a parent we may not create, lower contenders of another session, a
//! node with our prefix owned by another session); then the common faults, and the
//! lock's actors:
//!
//! * another session adds a contender, or one leaves (a leaving holder may grant the
//!   lock to the next contender: one transaction writes the grant and deletes it);
//! * an operator deletes our node, or a revoker writes `unlock` into it, or
//!   `__REVOKE__` into another contender's node;
//! * the user releases a level (granting when it knows a successor) or re-enters.
//!
//! Safety, after every step: `Acquired` at most once per attempt, only when no lower
//! blocking node exists in the directory as the client last heard of it, with our
//! node's real czxid as fencing token, and (with the own-node watch) not on a deleted
//! node; `Reconnected` only while our node exists as last heard and existed when the
//! session reconnected (a re-check after `sync` sees that); one final event per
//! attempt and nothing after it; `Released`/`Cancelled` only when our node is really
//! gone; no request but cleanup after the final event.
//!
//! Liveness, at the end — no cancel: faults stop, the connection comes back, other
//! contenders leave one by one, a holder releases what it holds, time passes. The
//! attempt must have reported its final event, the machine must be done, and no node
//! of our session may be left in the directory.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::proto::*;
use zk_recipes::recipe::contender;
use zk_recipes::recipe::lock::{Acquire, Lock, LockConfig, LockEvent, LockKind};
use zk_recipes::recipe::Machine;

use super::harness::{self, FaultCounts, Harness, Script, ME};
use super::zk::Happened;

const DIR: &str = "/l";
/// The client that writes as the other session.
const OTHER: usize = 1;
const ID: &str = "fuzz";

fn seq_of(name: &str) -> String {
    contender::Contender::parse(name)
        .map(|c| c.sequence)
        .unwrap_or_default()
}

fn path(name: &str) -> String {
    format!("{DIR}/{name}")
}

fn blocks(kind: LockKind, other: &str) -> bool {
    kind != LockKind::Read
        || !matches!(contender::Contender::parse(other).map(|c| c.marker), Some(m) if m == contender::READ)
}

stats! {
    /// What a run saw, to show the harness is not vacuous.
    pub struct Stats {
        /// `Acquired` events.
        pub acquired: u32,
        /// `Lost` events.
        pub lost: u32,
        /// `Released` events.
        pub released: u32,
        /// `NotAcquired` events.
        pub not_acquired: u32,
        /// `Failed` events.
        pub failed: u32,
        /// `Reconnected` events.
        pub reconnected: u32,
        /// An operator deleted our node.
        pub operator_deletes: u32,
        /// Another session left granting the lock on.
        pub grants: u32,
        /// The common faults.
        pub faults: FaultCounts,
    }
}

struct LockScript {
    stats: Stats,
    kind: LockKind,
    watch_own_node: bool,
    reentrant: bool,
    /// Final events so far (must end at 1).
    finals: u32,
    acquired: u32,
    /// Re-entrant levels the user holds.
    levels: u32,
    holding: bool,
    /// Our node, once acquired.
    node: Option<String>,
}

type H = Harness<Lock>;

impl LockScript {
    /// Another session's contender nodes, in sequence order.
    fn others(h: &H) -> Vec<String> {
        let other = h.world.zk.sessions[OTHER].id;
        let mut v: Vec<String> = h
            .world
            .zk
            .owned_by(other)
            .into_iter()
            .map(|p| p.rsplit('/').next().unwrap_or("").to_string())
            .collect();
        v.sort_by_key(|n| seq_of(n));
        v
    }

    fn add_other(h: &mut H, prefix: &str) {
        let r = h.world.zk.write_as(
            Some(OTHER),
            &Request::Create2(CreateRequest {
                path: path(prefix),
                data: Bytes::new(),
                acl: Acl::open_unsafe(),
                flags: CreateMode::EphemeralSequential.to_i32(),
            }),
        );
        h.note(format!("  another session adds {prefix}: {r:?}"));
    }

    fn delete(h: &mut H, by: Option<usize>, name: &str) {
        let r = h.world.zk.write_as(
            by,
            &Request::Delete(DeleteRequest {
                path: path(name),
                version: -1,
            }),
        );
        h.note(format!("  {by:?} deletes {name}: {r:?}"));
    }

    fn set(h: &mut H, name: &str, data: &'static [u8]) {
        let r = h.world.zk.write_as(
            None,
            &Request::SetData(SetDataRequest {
                path: path(name),
                data: Bytes::from_static(data),
                version: -1,
            }),
        );
        h.note(format!("  a revoker writes {data:?} into {name}: {r:?}"));
    }

    /// The lowest contender leaves as a granting holder would: one transaction writes
    /// the grant into the next contender (if it has version 0) and deletes the leaver.
    /// An exclusive leaver followed by exclusive contenders also writes a notice into
    /// the one after the next ("the next holds now") and, if `told` (the next heard of
    /// its turn from our own predecessor's notice), no grant into the next.
    fn leave_granting(h: &mut H, leaver: &str, told: bool) {
        let zk = &h.world.zk;
        let mut order: Vec<(String, i32)> = zk
            .children(DIR)
            .into_iter()
            .filter_map(|n| zk.nodes.get(&path(&n)).map(|x| (n, x.version)))
            .collect();
        order.sort_by_key(|(n, _)| seq_of(n));
        let at = order.iter().position(|(n, _)| n == leaver);
        let grantable = |n: &&(String, i32)| n.1 == 0 && contender::may_be_granted(&n.0);
        let next = at
            .and_then(|i| order.get(i + 1))
            .filter(grantable)
            .map(|n| n.0.clone());
        let exclusive = |name: &str| name.contains(contender::LOCK);
        let after = at
            .and_then(|i| order.get(i + 2))
            .filter(grantable)
            .map(|n| n.0.clone())
            .filter(|a| {
                exclusive(leaver) && exclusive(a) && next.as_deref().is_some_and(exclusive)
            });
        let mut ops = Vec::new();
        if let Some(next) = &next {
            if !told || after.is_none() {
                ops.push(MultiOp::SetData(SetDataRequest {
                    path: path(next),
                    data: Bytes::from_static(zk_recipes::recipe::lock::GRANT),
                    version: -1,
                }));
            }
            if let Some(after) = &after {
                let mut notice = zk_recipes::recipe::lock::NOTICE.to_vec();
                notice.push(b'\n');
                notice.extend_from_slice(next.as_bytes());
                ops.push(MultiOp::SetData(SetDataRequest {
                    path: path(after),
                    data: Bytes::from(notice),
                    version: -1,
                }));
            }
        }
        ops.push(MultiOp::Delete(DeleteRequest {
            path: path(leaver),
            version: -1,
        }));
        let r = h.world.zk.write_as(Some(OTHER), &Request::Multi(ops));
        h.note(format!("  {leaver} leaves granting: {r:?}"));
    }

    fn release_one(&mut self, h: &mut H) -> Result<(), String> {
        if self.levels > 0 {
            self.levels -= 1;
            let r = h.user(self, |l, now| l.release(now))?;
            h.note(format!("  user release -> {r:?}"));
        }
        Ok(())
    }

    /// The directory as the client last heard of it: (name, czxid).
    fn heard(h: &H) -> Vec<(String, i64)> {
        h.world.zk.children_at_zxid(DIR, h.seen_zxid())
    }
}

impl Script<Lock> for LockScript {
    const ACTS: u8 = 6;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        match which {
            0 => {
                if h.world.zk.nodes.contains_key(DIR) {
                    Self::add_other(h, "_c_n-lock-");
                }
            }
            1 => {
                // Another contender leaves; the lowest, a writer, may hand the lock on.
                let others = Self::others(h);
                let Some(n) = others.get(usize::from(arg >> 2) % others.len().max(1)) else {
                    return Ok(());
                };
                let lowest = h.world.zk.children(DIR).iter().map(|c| seq_of(c)).min();
                let writer = contender::Contender::parse(n).is_some_and(|c| c.is_writer());
                if arg & 2 != 0 && writer && lowest == Some(seq_of(n)) {
                    self.stats.grants += 1;
                    Self::leave_granting(h, &n.clone(), arg & 8 != 0);
                } else {
                    Self::delete(h, Some(OTHER), &n.clone());
                }
            }
            2 => {
                // A revoker writes into another contender's node (a successor our grant
                // must then leave alone: its version is no longer 0).
                let others = Self::others(h);
                if let Some(n) = others.get(usize::from(arg) % others.len().max(1)) {
                    Self::set(h, &n.clone(), b"__REVOKE__");
                }
            }
            3 => {
                // An operator deletes our node, or a revoker writes `unlock` into it.
                let ours = h.ours();
                if let Some(p) = ours.first() {
                    let name = p.rsplit('/').next().unwrap_or("").to_string();
                    if arg & 1 == 0 {
                        self.stats.operator_deletes += 1;
                        Self::delete(h, None, &name);
                    } else {
                        Self::set(h, &name, b"unlock");
                    }
                }
            }
            4 => self.release_one(h)?,
            _ => {
                // The user re-enters a re-entrant hold.
                if self.reentrant && self.holding {
                    let r = h.user(self, |l, now| l.acquire(now, None))?;
                    match r {
                        Some(
                            Acquire::Held { .. } | Acquire::Pending | Acquire::Suspended { .. },
                        ) => {
                            self.levels += 1; // a join: the reconnect verification decides
                        }
                        other => h.note(format!("  re-entry -> {other:?}")),
                    }
                }
            }
        }
        Ok(())
    }

    fn check(&mut self, h: &H, happened: &[Happened<LockEvent>]) -> Result<(), String> {
        for x in happened {
            let e = match x {
                Happened::Sent(req) => {
                    if self.finals > 0
                        && !matches!(
                            req,
                            Request::Delete(_)
                                | Request::Sync(_)
                                | Request::GetChildren(_)
                                | Request::Exists(_)
                        )
                    {
                        return Err(format!("request {req:?} after the attempt ended"));
                    }
                    continue;
                }
                Happened::Event(e) => e,
            };
            match e {
                LockEvent::Lost { .. } => self.stats.lost += 1,
                LockEvent::Released => self.stats.released += 1,
                LockEvent::NotAcquired => self.stats.not_acquired += 1,
                LockEvent::Failed { .. } => self.stats.failed += 1,
                LockEvent::Reconnected => self.stats.reconnected += 1,
                _ => {}
            }
            match e {
                LockEvent::Acquired {
                    fencing_token,
                    node,
                } => {
                    self.acquired += 1;
                    self.stats.acquired += 1;
                    if self.acquired > 1 {
                        return Err("Acquired twice in one attempt".into());
                    }
                    // Judged against the directory as the client last heard of it:
                    // later changes may still be on their way.
                    let heard = Self::heard(h);
                    match heard.iter().find(|(n, _)| n == node) {
                        Some((_, czxid)) if czxid != fencing_token => {
                            return Err(format!(
                                "fencing token {fencing_token} is not our czxid {czxid}"
                            ));
                        }
                        None if self.watch_own_node => {
                            return Err(format!("Acquired on {node}, which was deleted"));
                        }
                        _ => {}
                    }
                    let ours = (seq_of(node), node.as_str());
                    if let Some((b, _)) = heard.iter().find(|(n, _)| {
                        n != node
                            && (seq_of(n), n.as_str()) < (ours.0.clone(), ours.1)
                            && blocks(self.kind, n)
                            && contender::Contender::parse(n).is_some()
                    }) {
                        return Err(format!("Acquired while lower blocker {b} exists"));
                    }
                    self.holding = true;
                    self.levels = 1;
                    self.node = Some(node.clone());
                }
                LockEvent::Reconnected => {
                    if self.finals > 0 {
                        return Err("Reconnected after the final event".into());
                    }
                    // Gone as last heard, or deleted before the reconnect (a re-check
                    // after a sync would have seen that).
                    if let Some(node) = &self.node {
                        let at = h.world.zk.children_at_zxid(DIR, h.reconnected_at);
                        if !Self::heard(h).iter().any(|(n, _)| n == node)
                            || !at.iter().any(|(n, _)| n == node)
                        {
                            return Err(format!("Reconnected while our node {node} is gone"));
                        }
                    }
                }
                e if e.ends_attempt() => {
                    self.finals += 1;
                    if self.finals > 1 {
                        return Err(format!("second final event {e:?}"));
                    }
                    self.holding = false;
                    // (A session the client gave up on takes its nodes with it.)
                    let left = h.ours_now();
                    if matches!(e, LockEvent::Released | LockEvent::Cancelled) && !left.is_empty() {
                        return Err(format!("{e:?} reported while our nodes {left:?} exist"));
                    }
                }
                _ => {
                    if self.finals > 0 {
                        return Err(format!("{e:?} after the final event"));
                    }
                }
            }
        }
        Ok(())
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if h.machine().is_none() {
            return Ok(true);
        }
        if round == 0 {
            // Everything sent has been answered and told, and what waited for a backoff
            // has gone and been answered too: a holder whose node is gone knows it (with
            // the own-node watch, or the directory watch standing in).
            for _ in 0..64 {
                let waiting = h
                    .machine()
                    .is_some_and(|l| l.is_held() && l.poll_timeout().is_some());
                if !waiting {
                    break;
                }
                h.advance(self, Duration::from_millis(50))?;
                h.exchange(self)?;
            }
            let node = h
                .machine()
                .filter(|l| l.is_held())
                .and_then(|l| l.node().map(String::from));
            if let Some(node) = node {
                let gone = !h.world.zk.nodes.contains_key(&path(&node));
                if self.watch_own_node && h.connected() && gone {
                    return Err(format!("a holder did not notice that {node} was deleted"));
                }
            }
        }
        // A holder finishes its work (every guard goes); other contenders leave, one
        // per round.
        while self.levels > 0 {
            self.release_one(h)?;
        }
        if !self.holding && round % 2 == 1 {
            if let Some(n) = Self::others(h).first() {
                Self::delete(h, Some(OTHER), &n.clone());
            }
        }
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        if self.finals != 1 {
            return Err(format!(
                "liveness: the attempt did not end ({} final events) once faults stopped",
                self.finals
            ));
        }
        if h.machine().is_some() {
            return Err(format!(
                "liveness: the machine is not done after its final event settled: {:?}",
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

/// Runs one schedule; `Err` describes the broken invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    run_stats(schedule).map(|_| ())
}

/// [`run`], and what the run saw.
pub fn run_stats(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let a = input.next().unwrap_or(0);
    let b = input.next().unwrap_or(0);
    let kind = match a % 3 {
        0 => LockKind::Exclusive,
        1 => LockKind::Read,
        _ => LockKind::Write,
    };
    let mut config = LockConfig::new(DIR, kind, ID);
    config.revocable = a & 4 != 0;
    config.reentrant = a & 8 != 0;
    config.watch_own_node = a & 16 == 0;
    let mut h: H = Harness::new(2);
    if b & 8 == 0 {
        let _ = h.world.zk.write_as(
            None,
            &Request::CreateContainer(CreateRequest {
                path: DIR.into(),
                data: Bytes::new(),
                acl: Acl::open_unsafe(),
                flags: CreateMode::Container.to_i32(),
            }),
        );
        // Lower contenders of another session, and perhaps a node with our prefix that
        // is not ours (it must never be adopted).
        for i in 0..(b >> 4) % 4 {
            let marker = match (a >> (5 + i)) & 3 {
                0 => "_c_o-__READ__",
                1 => "_c_o-__WRIT__",
                _ => "_c_o-lock-",
            };
            LockScript::add_other(&mut h, marker);
        }
        if a & 128 != 0 {
            let prefix = format!(
                "{}{}",
                contender::protected_prefix(ID),
                match kind {
                    LockKind::Exclusive => contender::LOCK,
                    LockKind::Read => contender::READ,
                    LockKind::Write => contender::WRITE,
                    LockKind::Latch => contender::LATCH,
                    LockKind::Lease { .. } => contender::LEASE,
                }
            );
            LockScript::add_other(&mut h, &prefix);
        }
        let zxid = h.world.zk.zxid;
        h.world.zk.sessions[ME].seen_zxid = zxid;
    }
    match b % 8 {
        6 => h.world.zk.refused.push((DIR.into(), ErrorCode::NoNode)), // chroot missing
        7 => h.world.zk.refused.push((DIR.into(), ErrorCode::NoAuth)),
        _ => {}
    }
    let mut script = LockScript {
        stats: Stats::default(),
        kind,
        watch_own_node: config.watch_own_node,
        reentrant: config.reentrant,
        finals: 0,
        acquired: 0,
        levels: 0,
        holding: false,
        node: None,
    };
    let deadline = match input.next().unwrap_or(0) % 4 {
        0 => Some(Duration::ZERO), // try-lock
        1 => Some(Duration::from_millis(300)),
        _ => None,
    };
    h.note(format!("acquire deadline {deadline:?}"));
    let started = h.host(&mut script, Lock::new(config), |l, now| {
        let _ = l.acquire(now, deadline.map(|d| now + d));
    });
    started.and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
