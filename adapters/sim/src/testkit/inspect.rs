//! An [`Inspect`] look at a lock directory in the model world ([`harness`]), driven by
//! bytes (proptest and libFuzzer share it): the common faults, and the directory's
//! actors:
//!
//! * a peer (another session) enters the lock: an `EPHEMERAL_SEQUENTIAL` contender;
//! * an operator deletes a contender (a holder leaving, a waiter giving up);
//! * the user starts a new look once the last one ended.
//!
//! Safety, after every step: the machine sends only reads (`sync`, listings,
//! `getData`); a look reports one final event and nothing after it; a description is a
//! lock (or a plain node when no contender was read) whose holder and waiters are in
//! sequence order, are contenders that were created, each with its node's own Stat
//! (owner, czxid), and include **every contender that existed from the look's start to
//! its end** — a read refused, lost or answered by a lagging follower is never taken
//! for a node that is gone.
//!
//! Liveness, at the end: faults stop, the connection comes back, the look in progress
//! ends, then one more look is made; it must end with a description that is exactly
//! the directory as it is (holder the lowest contender, the rest in order).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use zk_recipes::proto::*;
use zk_recipes::recipe::inspect::{Inspect, InspectConfig, InspectEvent, Participant, Shape};

use super::harness::{self, FaultCounts, Harness, Script};
use super::zk::Happened;

const DIR: &str = "/l";
/// The client that writes as the peers' session.
const PEERS: usize = 1;

type H = Harness<Inspect>;

stats! {
    /// What a run saw, to show the harness is not vacuous.
    pub struct Stats {
        /// Looks that ended with a description.
        pub described: u32,
        /// Looks that ended with `Failed`.
        pub failed: u32,
        /// Contenders in the descriptions.
        pub contenders_seen: u32,
        /// Peers that entered the lock.
        pub entered: u32,
        /// Contenders an operator deleted.
        pub deleted: u32,
        /// The common faults.
        pub faults: FaultCounts,
    }
}

/// A contender's life, by zxid.
struct Life {
    czxid: i64,
    deleted: Option<i64>,
}

struct InspectScript {
    stats: Stats,
    /// Every contender ever made, by name.
    made: BTreeMap<String, Life>,
    /// The zxid when the current look started.
    started: i64,
    /// Final events of the current look.
    finals: u32,
    /// The look made once faults stopped, and what it reported.
    settled: Option<Option<InspectEvent>>,
}

fn machine() -> Inspect {
    Inspect::new(InspectConfig::new(DIR))
}

impl InspectScript {
    fn enter(&mut self, h: &mut H) {
        let req = Request::Create(CreateRequest::new(
            format!("{DIR}/_c_{:08x}-lock-", self.made.len()),
            bytes::Bytes::new(),
            Acl::open_unsafe(),
            CreateMode::EphemeralSequential,
        ));
        let r = h.world.zk.write_as(Some(PEERS), &req);
        h.note(format!("  a peer enters: {r:?}"));
        if let Ok(Response::Path(path) | Response::PathStat { path, .. }) = r {
            let czxid = h.world.zk.zxid;
            let name = path.trim_start_matches(DIR).trim_start_matches('/').into();
            self.made.insert(
                name,
                Life {
                    czxid,
                    deleted: None,
                },
            );
            self.stats.entered += 1;
        }
    }

    fn delete(&mut self, h: &mut H, arg: u8) {
        let live: Vec<String> = h.world.zk.children(DIR);
        if live.is_empty() {
            return;
        }
        let name = live[usize::from(arg) % live.len()].clone();
        let req = Request::Delete(DeleteRequest {
            path: format!("{DIR}/{name}"),
            version: -1,
        });
        let r = h.world.zk.write_as(None, &req);
        h.note(format!("  an operator deletes {name}: {r:?}"));
        if r.is_ok() {
            if let Some(life) = self.made.get_mut(&name) {
                life.deleted = Some(h.world.zk.zxid);
            }
            self.stats.deleted += 1;
        }
    }

    /// A new look, if none runs.
    fn look(&mut self, h: &mut H) -> Result<(), String> {
        if h.machine().is_some() {
            return Ok(());
        }
        self.started = h.world.zk.zxid;
        self.finals = 0;
        h.note("  the user looks".into());
        h.host(self, machine(), |m, now| m.start(now))
    }

    /// Judges a description of the directory made between `self.started` and now.
    fn judge(&mut self, h: &H, shape: &Shape) -> Result<(), String> {
        let all: Vec<&Participant> = match shape {
            Shape::Lock { holder, waiters } => holder.iter().chain(waiters).collect(),
            Shape::Node => Vec::new(),
            other => return Err(format!("a lock directory read as {other:?}")),
        };
        self.stats.contenders_seen += all.len() as u32;
        let peer = h.world.zk.sessions[PEERS].id;
        let mut last: Option<&str> = None;
        for p in &all {
            let Some(life) = self.made.get(&p.name) else {
                return Err(format!("{} was never made", p.name));
            };
            if (p.stat.czxid, p.stat.ephemeral_owner) != (life.czxid, peer) {
                return Err(format!("{} with another node's Stat: {:?}", p.name, p.stat));
            }
            let seq = p.name.rsplit('-').next().unwrap_or("");
            if last.is_some_and(|l| l >= seq) {
                return Err(format!("out of sequence order: {all:?}"));
            }
            last = Some(seq);
        }
        let now = h.world.zk.zxid;
        for (name, life) in &self.made {
            let throughout = life.czxid <= self.started && life.deleted.is_none_or(|d| d > now);
            if throughout && !all.iter().any(|p| &p.name == name) {
                return Err(format!(
                    "{name} existed throughout the look (zxid {}..{now}) and is missing: {all:?}",
                    self.started
                ));
            }
        }
        Ok(())
    }
}

impl Script<Inspect> for InspectScript {
    const ACTS: u8 = 4;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        match which {
            0 | 1 => self.enter(h),
            2 => self.delete(h, arg),
            _ => self.look(h)?,
        }
        Ok(())
    }

    fn check(&mut self, h: &H, happened: &[Happened<InspectEvent>]) -> Result<(), String> {
        for x in happened {
            let e = match x {
                Happened::Sent(req) => {
                    let read = matches!(
                        req,
                        Request::Sync(_)
                            | Request::GetChildren(_)
                            | Request::GetChildren2(_)
                            | Request::GetData(_)
                    );
                    if !read {
                        return Err(format!("a look sent {req:?}"));
                    }
                    continue;
                }
                Happened::Event(e) => e,
            };
            self.finals += 1;
            if self.finals > 1 {
                return Err(format!("{e:?} after the final event"));
            }
            if let Some(settled @ None) = &mut self.settled {
                *settled = Some(e.clone());
            }
            match e {
                InspectEvent::Described(survey) => {
                    self.stats.described += 1;
                    match &survey.descriptions[..] {
                        [d] if d.path == DIR => self.judge(h, &d.shape)?,
                        other => return Err(format!("not one description of {DIR}: {other:?}")),
                    }
                }
                InspectEvent::Failed(_) => self.stats.failed += 1,
                other => return Err(format!("unknown event {other:?}")),
            }
        }
        Ok(())
    }

    fn settle(&mut self, h: &mut H, _round: u32) -> Result<bool, String> {
        match &self.settled {
            // The look of the faulty part must end first.
            None if h.machine().is_some() => Ok(false),
            None => {
                self.settled = Some(None);
                self.look(h)?;
                Ok(false)
            }
            Some(None) => Ok(false),
            Some(Some(_)) => Ok(h.machine().is_none()),
        }
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        let Some(Some(last)) = &self.settled else {
            return Err("liveness: a look made once faults stopped never ended".into());
        };
        if h.machine().is_some() {
            return Err("liveness: the machine is not done".into());
        }
        let InspectEvent::Described(survey) = last else {
            return Err(format!("a look with no faults failed: {last:?}"));
        };
        let mut live = h.world.zk.children(DIR);
        live.sort_by(|a, b| a.rsplit('-').next().cmp(&b.rsplit('-').next()));
        let read: Vec<String> = match &survey.descriptions[..] {
            [d] => match &d.shape {
                Shape::Lock { holder, waiters } => holder
                    .iter()
                    .chain(waiters)
                    .map(|p| p.name.clone())
                    .collect(),
                _ => Vec::new(),
            },
            _ => return Err(format!("not one description: {survey:?}")),
        };
        if read != live {
            return Err(format!(
                "the last look read {read:?}, the directory holds {live:?}"
            ));
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
    let mut h: H = Harness::new(2);
    let _ = h
        .world
        .zk
        .write_as(None, &harness::create_request(DIR, CreateMode::Persistent));
    let mut script = InspectScript {
        stats: Stats::default(),
        made: BTreeMap::new(),
        started: 0,
        finals: 0,
        settled: None,
    };
    for _ in 0..input.next().unwrap_or(0) % 4 {
        script.enter(&mut h);
    }
    script.look(&mut h)?;
    harness::run(&mut h, &mut script, &mut input)?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
