//! Two [`IdGenerator`]s on two sessions drawing ids from one directory, in the model
//! world ([`harness`]), driven by bytes (proptest and libFuzzer share
//! it). The model names sequential nodes as the server does: the parent's `cversion`
//! (a signed 32-bit counter bumped by every child create and delete), `%010d`, wrapping
//! negative after 2^31 - 1. The first byte picks the start: no directory yet, a
//! directory whose counter is a few steps from the wrap, or a fresh one. Then the
//! common faults for [`ME`] (generator 0), and the script's actors:
//!
//! * the common steps for either generator ([`Harness::client_step`]): serve, read,
//!   applied-then-break, reconnect (perhaps to a lagging follower), refuse or throttle,
//!   expiry, time;
//! * the application asks a generator for one to three ids;
//! * an operator deletes an `id-` node.
//!
//! Safety, after every step: every id reported was drawn by that generator's own
//! create (a node of one of its sessions had that number) and by no one else, is
//! reported once across both generators, is larger than the generator's previous one
//! and than every id either generator was given before the request was made; every
//! request ends at most once, in request order; a request fails only with
//! `SequenceOverflow`, and only once the counter wrapped; a handled deadline is never in
//! the past.
//!
//! Liveness and cleanliness, once faults stop (both connections come back, everything
//! is answered, time passes): every request has ended within bounded virtual time, and
//! no `id-` node is left in the directory.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::naming::{IdEvent, IdGenerator, IdGeneratorConfig};

use super::harness::{self, FaultCounts, Harness, Machines, Script, ME};
use super::zk::{Happened, Link};

const DIR: &str = "/app/ids";
const CLIENTS: usize = 2;

stats! {
    /// What a schedule exercised (to show the harness is not vacuous).
    pub struct Stats {
        /// Ids reported.
        pub ids: usize,
        /// Ids found by listing after a lost create reply.
        pub recovered: u64,
        /// Requests failed with `SequenceOverflow`.
        pub overflows: usize,
        /// Replies lost after the request applied (any generator).
        pub lost_replies: usize,
        /// Requests refused by the session or throttled (any generator).
        pub refused: usize,
        /// Session expiries (any generator).
        pub expiries: usize,
        /// `id-` nodes an operator deleted.
        pub operator_deletes: usize,
        /// The common faults, on both generators.
        pub faults: FaultCounts,
    }
}

#[derive(Default)]
struct Gen {
    requested: u64,
    /// The last request that ended, and the last id reported.
    last_request: u64,
    last_id: Option<i64>,
    ended: usize,
    /// The largest id reported (by anyone) when each request was made.
    floor: BTreeMap<u64, i64>,
    /// Every session the generator had.
    sessions: Vec<i64>,
}

struct NamingScript {
    gens: Vec<Gen>,
    /// Who drew each number in `DIR` (client index), as seen on the server.
    drawn: BTreeMap<i64, usize>,
    /// Ids reported, by anyone.
    reported: BTreeSet<i64>,
    wrapped: bool,
    stats: Stats,
    /// The generators' recoveries, as last seen.
    recovered: [u64; CLIENTS],
}

type H = Harness<IdGenerator>;

/// The sequence number of an `id-<session>-<nonce>-<attempt>-<seq>` node.
fn seq_of(name: &str) -> Option<i64> {
    name.splitn(5, '-').nth(4)?.parse().ok()
}

impl NamingScript {
    /// Records who drew the numbers of the `id-` nodes now on the server, and whether
    /// the counter wrapped.
    fn look(&mut self, h: &H) -> Result<(), String> {
        for k in 0..CLIENTS {
            let id = h.world.zk.sessions[k].id;
            if !self.gens[k].sessions.contains(&id) {
                self.gens[k].sessions.push(id);
            }
        }
        let zk = &h.world.zk;
        let Some(dir) = zk.nodes.get(DIR) else {
            return Ok(());
        };
        if dir.cversion < 0 || dir.creates < 0 {
            self.wrapped = true;
        }
        for name in zk.children(DIR) {
            let Some(seq) = seq_of(&name) else {
                continue;
            };
            if seq < 0 {
                self.wrapped = true;
            }
            let owner = zk
                .nodes
                .get(&format!("{DIR}/{name}"))
                .map_or(0, |n| n.owner);
            let Some(k) = (0..CLIENTS).find(|&k| self.gens[k].sessions.contains(&owner)) else {
                return Err(format!(
                    "{name} owned by no generator's session ({owner:#x})"
                ));
            };
            if let Some(other) = self.drawn.insert(seq, k) {
                if other != k {
                    return Err(format!("number {seq} drawn by {other} and {k}"));
                }
            }
        }
        Ok(())
    }

    /// The application asks generator `k` for `n` ids.
    fn request(&mut self, h: &mut H, k: usize, n: u8) -> Result<(), String> {
        let now = h.world.now[k];
        let floor = self.reported.last().copied();
        let Some(g) = h.world.machines[k].as_mut() else {
            return Ok(());
        };
        for _ in 0..n {
            let r = g.request(now);
            let c = &mut self.gens[k];
            c.requested = r;
            if let Some(f) = floor {
                c.floor.insert(r, f);
            }
        }
        h.note(format!("  generator {k}: {n} ids requested"));
        let happened = h.world.pump(k);
        self.happened(h, k, happened)
    }

    fn pending(&self, h: &H) -> usize {
        (0..CLIENTS)
            .map(|k| h.world.machines[k].as_ref().map_or(0, |g| g.pending()))
            .sum()
    }
}

impl Machines<IdGenerator> for NamingScript {
    fn who(&self, k: usize) -> String {
        format!("generator {k}")
    }

    fn judge(&mut self, h: &H, who: usize, happened: &[Happened<IdEvent>]) -> Result<(), String> {
        self.look(h)?;
        for x in happened {
            let Happened::Event(e) = x else {
                continue;
            };
            let c = &mut self.gens[who];
            let request = match e {
                IdEvent::Id { request, .. } | IdEvent::Failed { request, .. } => *request,
                _ => return Err(format!("generator {who}: unexpected event {e:?}")),
            };
            if request <= c.last_request || request > c.requested {
                return Err(format!(
                    "generator {who}: {e:?} out of order (last ended {}, requested {})",
                    c.last_request, c.requested
                ));
            }
            c.last_request = request;
            c.ended += 1;
            match e {
                IdEvent::Id { id, .. } => {
                    if self.drawn.get(id) != Some(&who) {
                        return Err(format!(
                            "generator {who}: id {id} not drawn by it (drawn by {:?})",
                            self.drawn.get(id)
                        ));
                    }
                    if let Some(f) = c.floor.remove(&request).filter(|f| id <= f) {
                        return Err(format!(
                            "generator {who}: id {id} for request {request}, made after id {f} \
                             was given"
                        ));
                    }
                    if !self.reported.insert(*id) {
                        return Err(format!("generator {who}: id {id} reported twice"));
                    }
                    if c.last_id.is_some_and(|l| *id <= l) {
                        return Err(format!("generator {who}: id {id} after {:?}", c.last_id));
                    }
                    c.last_id = Some(*id);
                    self.stats.ids += 1;
                }
                IdEvent::Failed { error, .. } => {
                    if !matches!(error, Error::SequenceOverflow { .. }) || !self.wrapped {
                        return Err(format!(
                            "generator {who}: request {request} failed with {error:?} (wrapped: {})",
                            self.wrapped
                        ));
                    }
                    self.stats.overflows += 1;
                }
                _ => return Err(format!("generator {who}: unexpected event {e:?}")),
            }
        }
        if let Some(g) = h.world.machines[who].as_ref() {
            self.recovered[who] = g.recovered();
        }
        Ok(())
    }
}

impl Script<IdGenerator> for NamingScript {
    /// `which % 10` is the kind of step, `which / 10` (mod 2) the generator.
    const ACTS: u8 = 250;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        let k = usize::from(which / 10) % CLIENTS;
        match which % 10 {
            // The common steps, on either generator: serve (twice as often), read,
            // break, reconnect, refuse or expire, time.
            w @ 0..=6 => {
                let happened = h.client_step(k, w.saturating_sub(1), arg);
                self.happened(h, k, happened)
            }
            7 | 8 => self.request(h, k, arg % 3 + 1),
            _ => {
                // An operator deletes an `id-` node.
                if !h.world.zk.nodes.contains_key(DIR) {
                    return Ok(());
                }
                let ids = h.world.zk.children(DIR);
                if let Some(n) = ids.get(usize::from(arg) % ids.len().max(1)) {
                    let r = h.world.zk.write_as(
                        None,
                        &Request::Delete(DeleteRequest {
                            path: format!("{DIR}/{n}"),
                            version: -1,
                        }),
                    );
                    h.note(format!("  an operator deletes {n}: {r:?}"));
                    if r.is_ok() {
                        self.stats.operator_deletes += 1;
                    }
                }
                self.look(h)
            }
        }
    }

    fn check(&mut self, h: &H, happened: &[Happened<IdEvent>]) -> Result<(), String> {
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
        for k in 0..CLIENTS {
            harness::exchange_with(h, self, k)?;
        }
        let quiet = (0..CLIENTS).all(|k| {
            let s = &h.world.zk.sessions[k];
            s.wire.is_empty() && s.out.is_empty()
        });
        let idle = (0..CLIENTS).all(|k| h.world.deadline(k).is_none());
        if quiet && idle && self.pending(h) == 0 {
            return Ok(true);
        }
        if round >= 200 {
            return Err("liveness: no quiescence within 10 s of virtual time".into());
        }
        self.others_wait(h, CLIENTS, Duration::from_millis(50))?;
        Ok(false)
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        for (who, c) in self.gens.iter().enumerate() {
            let pending = h.world.machines[who].as_ref().map_or(0, |g| g.pending());
            if c.ended as u64 != c.requested || pending != 0 {
                return Err(format!(
                    "liveness: generator {who}: {} of {} requests ended after faults stopped",
                    c.ended, c.requested
                ));
            }
        }
        if h.world.zk.nodes.contains_key(DIR) {
            let left: Vec<String> = h
                .world
                .zk
                .children(DIR)
                .into_iter()
                .filter(|n| n.starts_with("id-"))
                .collect();
            if !left.is_empty() {
                return Err(format!(
                    "cleanliness: nodes left after faults stopped: {left:?}"
                ));
            }
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the violated invariant.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let (first, rest) = match schedule.split_first() {
        Some((f, r)) => (*f, r),
        None => (2, schedule),
    };
    let mut h: H = Harness::new(CLIENTS);
    if first % 4 != 0 {
        for p in ["/app", DIR] {
            let _ = h.world.zk.write_as(
                None,
                &Request::Create(CreateRequest {
                    path: p.into(),
                    data: Bytes::new(),
                    acl: Acl::open_unsafe(),
                    flags: CreateMode::Persistent.to_i32(),
                }),
            );
        }
        if first % 4 == 1 {
            if let Some(d) = h.world.zk.nodes.get_mut(DIR) {
                d.cversion = i32::MAX - i32::from(first >> 2 & 15);
                d.creates = d.cversion;
            }
        }
        let zxid = h.world.zk.zxid;
        for s in &mut h.world.zk.sessions {
            s.seen_zxid = zxid;
        }
    }
    let mut script = NamingScript {
        gens: (0..CLIENTS).map(|_| Gen::default()).collect(),
        drawn: BTreeMap::new(),
        reported: BTreeSet::new(),
        wrapped: false,
        stats: Stats::default(),
        recovered: [0; CLIENTS],
    };
    let started = (0..CLIENTS).try_for_each(|k| {
        let happened = h.world.host(
            k,
            IdGenerator::new(IdGeneratorConfig::new(DIR, 1)),
            |_, _| {},
        );
        script.happened(&mut h, k, happened)?;
        script.request(&mut h, k, 1)
    });
    let mut input = rest.iter().copied();
    started
        .map_err(|e| format!("{e}\nlast steps:\n{}", h.trace().join("\n")))
        .and_then(|()| harness::run(&mut h, &mut script, &mut input))?;
    let f = h.faults;
    script.stats.recovered = script.recovered.iter().sum();
    script.stats.lost_replies = f.lost_replies as usize;
    script.stats.refused = f.refusals as usize;
    script.stats.expiries = f.expiries as usize;
    script.stats.faults = f;
    Ok(script.stats)
}
