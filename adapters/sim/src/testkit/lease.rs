//! kazoo's `NonBlockingLease` in the model world: our attempts ([`ME`](super::harness::ME), identifier
//! `me`) and a kazoo holder (client 1, identifier `kz`, written as kazoo's
//! `NonBlockingLease` runs: take the `__lock__` node, wait to be lowest, read the
//! record and decide, then — in a later step, so our attempts run in between — write
//! and let go) contend for `/app/lease`, under every common fault (lost replies after
//! apply, dropped connections, lagging followers, refusals, throttling, expiries,
//! reaps) and time passing by up to a second at once; kazoo's process may die (its
//! lock node goes with it), the user may drop an attempt. Both read one wall clock:
//! [`BASE`] plus [`ME`](super::harness::ME)'s time.
//!
//! Safety, after every step:
//!
//! * no two holders overlap: a record naming another holder replaces a record only
//!   once that record's end has passed;
//! * `Granted { end }` only once our record with that end was written;
//! * `Refused` names a holder other than us whose record was written, with an end
//!   after the attempt started; never both, one final event per attempt, and only
//!   `SessionExpired`/`Closed` as a failure (nothing else refuses here);
//! * nothing after a dropped attempt.
//!
//! Liveness, once faults stop: kazoo finishes its attempt; one more attempt of ours
//! ends with `Decided`; no lock node is left (ours nor kazoo's) and no node of our
//! sessions.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use zk_recipes::error::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::lease::{
    decode_record, encode_record, Holder, Lease, LeaseConfig, LeaseEvent, LeaseOutcome, Record,
};
use zk_recipes::recipe::Machine;
use zk_recipes::time::Instant;

use super::harness::{self, FaultCounts, Harness, Script};
use super::zk::Happened;

const PATH: &str = "/app/lease";
const RECORD: &str = "/app/lease/lease_holder";
/// The kazoo holder's client.
const KZ: usize = 1;
/// The wall clock at [`ME`](super::harness::ME)'s time zero: 2025-11-30T00:00:00Z.
pub const BASE: Duration = Duration::from_secs(1_764_460_800);

type H = Harness<Lease>;

stats! {
    /// What a run did, to show the harness is not vacuous.
    pub struct Stats {
        /// Our attempts started.
        pub attempts: u32,
        /// Granted to us: in all, as a renewal (the record was ours), as a takeover
        /// (the record was kazoo's and had ended).
        pub grants: u32,
        /// Of those, renewals.
        pub renewals: u32,
        /// Of those, takeovers.
        pub takeovers: u32,
        /// Refused to us.
        pub refusals: u32,
        /// Our attempts that failed (the session ended).
        pub failures: u32,
        /// Our attempts dropped by the user.
        pub drops: u32,
        /// kazoo's attempts granted, refused, and cut short by its process dying.
        pub kazoo_grants: u32,
        /// See `kazoo_grants`.
        pub kazoo_refusals: u32,
        /// See `kazoo_grants`.
        pub kazoo_deaths: u32,
        /// The common faults.
        pub faults: FaultCounts,
    }
}

/// Where the kazoo holder stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kazoo {
    Idle,
    /// Its lock node, waiting to be lowest.
    Waiting(String),
    /// Holding its lock, decided: write (`Some(end)`) or not.
    Decided(String, Option<Duration>),
}

/// Our current attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Attempt {
    None,
    /// Started at this wall time; `settle`: started once faults stopped.
    Running {
        at: Duration,
        settle: bool,
    },
    /// Dropped by the user: no event may follow.
    Dropped,
    /// Ended with this event (`settle`: the attempt started once faults stopped).
    Ended {
        event: LeaseEvent,
        settle: bool,
    },
}

struct LeaseScript {
    stats: Stats,
    kazoo: Kazoo,
    attempt: Attempt,
    /// Every record written: (czxid, holder, end).
    records: Vec<(i64, Holder)>,
    /// Attempts made, for fresh ids.
    made: u32,
}

/// The wall clock now.
fn wall(h: &H) -> Duration {
    BASE + h.now().saturating_since(Instant::ZERO)
}

fn write(h: &mut H, req: &Request) -> Result<Response, Error> {
    let r = h.world.zk.write_as(Some(KZ), req);
    h.note(format!("  kazoo writes {}: {r:?}", harness::describe(req)));
    r
}

/// The lock nodes under the path, lowest first.
fn lock_nodes(h: &H) -> Vec<String> {
    if !h.world.zk.nodes.contains_key(PATH) {
        return Vec::new();
    }
    let mut v: Vec<String> = h
        .world
        .zk
        .children(PATH)
        .into_iter()
        .filter(|c| c.contains("__lock__"))
        .collect();
    v.sort_by(|a, b| a[a.len() - 10..].cmp(&b[b.len() - 10..]));
    v
}

impl LeaseScript {
    /// A record written since the last step: check it against the one it replaces.
    fn observe(&mut self, h: &H) -> Result<(), String> {
        let Some(node) = h.world.zk.nodes.get(RECORD) else {
            return Ok(());
        };
        if self.records.last().is_some_and(|(z, _)| *z == node.czxid) {
            return Ok(());
        }
        let Some(Record::Holder(new)) = decode_record(&node.data) else {
            return Err(format!("a record not in kazoo's format: {:?}", node.data));
        };
        let now = wall(h);
        if let Some((_, old)) = self.records.last() {
            if old.identifier != new.identifier && old.end > now {
                return Err(format!(
                    "safety: {new:?} replaced {old:?} at {now:?}, before its end"
                ));
            }
        }
        self.records.push((node.czxid, new));
        Ok(())
    }

    fn written(&self, identifier: &str, end: Duration) -> bool {
        self.records
            .iter()
            .any(|(_, r)| r.identifier == identifier && r.end == end)
    }

    fn on_event(&mut self, e: &LeaseEvent) -> Result<(), String> {
        let Attempt::Running { at, settle } = self.attempt else {
            return Err(format!(
                "event {e:?} with no attempt running: {:?}",
                self.attempt
            ));
        };
        match e {
            LeaseEvent::Decided(LeaseOutcome::Granted { end }) => {
                if !self.written("me", *end) {
                    return Err(format!("Granted {end:?} but no such record of ours"));
                }
                self.stats.grants += 1;
                let before = self.records.iter().rev().nth(1).map(|(_, r)| r);
                match before {
                    Some(r) if r.identifier == "me" => self.stats.renewals += 1,
                    Some(_) => self.stats.takeovers += 1,
                    None => {}
                }
            }
            LeaseEvent::Decided(LeaseOutcome::Refused { holder: Some(hd) }) => {
                if hd.identifier == "me" || !self.written(&hd.identifier, hd.end) || hd.end <= at {
                    return Err(format!("a refusal not backed by a live record: {hd:?}"));
                }
                self.stats.refusals += 1;
            }
            LeaseEvent::Failed {
                error: Error::SessionExpired | Error::Closed,
            } => self.stats.failures += 1,
            other => return Err(format!("unexpected final event {other:?}")),
        }
        self.attempt = Attempt::Ended {
            event: e.clone(),
            settle,
        };
        Ok(())
    }

    /// Starts an attempt of ours if none runs.
    fn start(&mut self, h: &mut H, secs: u8, settle: bool) -> Result<(), String> {
        if h.machine().is_some() {
            return Ok(());
        }
        self.made += 1;
        self.stats.attempts += 1;
        let id = format!("{:08x}-0000-4000-8000-000000000000", self.made);
        let duration = Duration::from_secs(1 + u64::from(secs % 3));
        let config = LeaseConfig::new(PATH, duration, "me", &id);
        let at = wall(h);
        self.attempt = Attempt::Running { at, settle };
        h.note(format!(
            "  the user tries for the lease ({duration:?}) at {at:?}"
        ));
        h.host(self, Lease::new(config), move |m, now| m.start(now, at))
    }

    /// kazoo's next step.
    fn kazoo(&mut self, h: &mut H, secs: u8) -> Result<(), String> {
        let locks = lock_nodes(h);
        match self.kazoo.clone() {
            Kazoo::Idle => {
                for p in ["/app", PATH] {
                    let _ = write(h, &harness::create_request(p, CreateMode::Persistent));
                }
                let req = Request::Create(CreateRequest::new(
                    format!("{PATH}/{:032x}__lock__", self.made),
                    bytes::Bytes::from_static(b"kz"),
                    Acl::open_unsafe(),
                    CreateMode::EphemeralSequential,
                ));
                if let Ok(Response::Path(p)) = write(h, &req) {
                    let name = p.rsplit('/').next().unwrap_or_default().to_string();
                    self.kazoo = Kazoo::Waiting(name);
                }
            }
            Kazoo::Waiting(n) | Kazoo::Decided(n, _) if !locks.contains(&n) => {
                self.kazoo = Kazoo::Idle; // its session lost the node
            }
            Kazoo::Waiting(n) if locks.first() == Some(&n) => {
                let now = wall(h);
                let free = match h.world.zk.nodes.get(RECORD).map(|z| decode_record(&z.data)) {
                    None => true,
                    Some(Some(Record::Holder(r))) => r.identifier == "kz" || now >= r.end,
                    Some(_) => return Err("kazoo reads a record not in its format".into()),
                };
                let end = now + Duration::from_secs(1 + u64::from(secs % 2));
                let end = Duration::from_secs(end.as_secs());
                if !free {
                    self.stats.kazoo_refusals += 1;
                }
                self.kazoo = Kazoo::Decided(n, free.then_some(end));
            }
            Kazoo::Waiting(_) => {}
            Kazoo::Decided(n, plan) => {
                if let Some(end) = plan {
                    self.stats.kazoo_grants += 1;
                    let _ = write(
                        h,
                        &Request::Delete(DeleteRequest {
                            path: RECORD.into(),
                            version: -1,
                        }),
                    );
                    let data = bytes::Bytes::from(encode_record("kz", end));
                    let create = CreateRequest::new(
                        RECORD,
                        data,
                        Acl::open_unsafe(),
                        CreateMode::Persistent,
                    );
                    write(h, &Request::Create(create))
                        .map_err(|e| format!("kazoo's write: {e:?}"))?;
                    self.observe(h)?;
                }
                let path = format!("{PATH}/{n}");
                let _ = write(h, &Request::Delete(DeleteRequest { path, version: -1 }));
                self.kazoo = Kazoo::Idle;
            }
        }
        Ok(())
    }
}

impl Script<Lease> for LeaseScript {
    const ACTS: u8 = 4;

    fn act(&mut self, h: &mut H, which: u8, arg: u8) -> Result<(), String> {
        match which {
            0 => self.start(h, arg, false),
            1 => self.kazoo(h, arg),
            2 if arg > 230 => {
                if self.kazoo != Kazoo::Idle {
                    self.stats.kazoo_deaths += 1;
                }
                h.note("  kazoo's process dies".into());
                let id = h.world.zk.sessions[KZ].id;
                h.world.zk.expire_nodes(id);
                self.kazoo = Kazoo::Idle;
                Ok(())
            }
            3 if arg > 240 && matches!(self.attempt, Attempt::Running { .. }) => {
                self.stats.drops += 1;
                h.note("  the user drops the attempt".into());
                self.attempt = Attempt::Dropped;
                h.user(self, |m, now| m.handle_abandon(now)).map(drop)
            }
            _ => Ok(()),
        }
    }

    fn check(&mut self, h: &H, happened: &[Happened<LeaseEvent>]) -> Result<(), String> {
        self.observe(h)?;
        for x in happened {
            if let Happened::Event(e) = x {
                self.on_event(e)?;
            }
        }
        Ok(())
    }

    fn settle(&mut self, h: &mut H, round: u32) -> Result<bool, String> {
        if self.kazoo != Kazoo::Idle {
            self.kazoo(h, 0)?;
            return Ok(false);
        }
        match self.attempt {
            Attempt::Running { .. } => Ok(false),
            Attempt::Ended { settle: true, .. } => Ok(h.machine().is_none()),
            _ if h.machine().is_some() => Ok(false), // a dropped attempt cleaning up
            _ if round + 20 >= harness::SETTLE_ROUNDS => {
                Err("liveness: no attempt after faults stopped".into())
            }
            _ => self.start(h, 0, true).map(|()| false),
        }
    }

    fn end(&mut self, h: &H) -> Result<(), String> {
        match &self.attempt {
            Attempt::Ended {
                event: LeaseEvent::Decided(_),
                settle: true,
            } => {}
            other => {
                return Err(format!(
                    "liveness: the last attempt did not decide: {other:?}"
                ))
            }
        }
        if h.machine().is_some() {
            return Err("liveness: the machine still runs after its outcome".into());
        }
        let left = lock_nodes(h);
        let ours = h.ours();
        if !left.is_empty() || !ours.is_empty() {
            return Err(format!(
                "cleanliness: left behind: locks {left:?}, ours {ours:?}"
            ));
        }
        Ok(())
    }
}

/// Runs one schedule; `Err` names the violated invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    let mut input = schedule.iter().copied();
    let mut h: H = Harness::new(2);
    let mut script = LeaseScript {
        stats: Stats::default(),
        kazoo: Kazoo::Idle,
        attempt: Attempt::None,
        records: Vec::new(),
        made: 0,
    };
    script.start(&mut h, 0, false)?;
    harness::run(&mut h, &mut script, &mut input)?;
    script.stats.faults = h.faults;
    Ok(script.stats)
}
