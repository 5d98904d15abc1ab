//! The byte-driven harness every recipe's property test and fuzz target shares: one
//! machine under test, hosted on client [`ME`] of a [`ModelWorld`] (the request-level
//! model of ZooKeeper in [`zk`](super::zk), the one the model checker explores too),
//! the faults as common steps chosen by the bytes, and per recipe only what is its own
//! ([`Script`]): its actors (other sessions, an operator, a revoker, the user) and its
//! invariants.
//!
//! The bytes are read in pairs `(step, arg)`. Common steps, for client [`ME`]:
//!
//! * the server answers the oldest request; the client reads the oldest reply or
//!   notification; the server applies a request and the connection breaks before its
//!   reply arrives (applied, reply lost); the connection breaks;
//! * the connection comes back, half the time to a *lagging follower* whose reads miss
//!   what happened after the client's last seen zxid, and whose notifications of those
//!   changes wait, until the session syncs or writes or the follower catches up by
//!   itself (so recovery listings and re-checks meet stale reads often);
//! * the session refuses the newest unread request (`Overloaded`) or the server
//!   throttles the oldest (`Throttled`, not applied);
//! * the session expires on the server (ephemerals go), or the client gives up on it
//!   locally (a zombie the server expires later); an empty container is reaped;
//! * time passes (to the machine's deadline, or by `arg` × 4 ms);
//! * a recipe step: [`Script::act`] with a third byte as its argument.
//!
//! After every step the harness checks that a handled deadline never stays in the past,
//! and the script checks what the machine sent and reported. At the end faults stop
//! ([`settle`]): the connection comes back, everything sent is served and read, the
//! script's actors behave ([`Script::settle`]), time passes; then [`Script::end`]
//! judges liveness and cleanliness.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use zk_recipes::proto::*;
use zk_recipes::recipe::Recipe;
use zk_recipes::time::Instant;

use super::zk::{Happened, Link, ModelWorld};

/// The client that hosts the machine under test.
pub const ME: usize = 0;

/// How many settle rounds a run gets once faults stop (each round: reconnect, serve and
/// read everything, the actors' turn, 50 ms).
pub const SETTLE_ROUNDS: u32 = 400;

/// A machine under test in the model world, with a trace of what happened.
pub struct Harness<R: Recipe> {
    /// The model server and its clients ([`ME`] hosts the machine; the others are
    /// other sessions the script writes as, with [`Zk::write_as`](super::zk::Zk::write_as)).
    pub world: ModelWorld<R>,
    trace: Vec<String>,
    /// What the faults did, to show a harness is not vacuous.
    pub faults: FaultCounts,
    /// The leader's zxid when [`ME`] last reconnected: a recipe that syncs before it
    /// re-checks knows of every change up to it.
    pub reconnected_at: i64,
}

/// How often each fault hit the machine under test in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Requests applied whose reply was lost with the connection.
    pub lost_replies: u32,
    /// Reconnects to a lagging follower that was behind.
    pub stale_reconnects: u32,
    /// Requests refused by the session or throttled by the server.
    pub refusals: u32,
    /// Session expiries (server side or local).
    pub expiries: u32,
    /// Containers reaped.
    pub reaps: u32,
}

impl core::ops::AddAssign for FaultCounts {
    fn add_assign(&mut self, o: Self) {
        self.lost_replies += o.lost_replies;
        self.stale_reconnects += o.stale_reconnects;
        self.refusals += o.refusals;
        self.expiries += o.expiries;
        self.reaps += o.reaps;
    }
}

/// What is a recipe's own in its harness.
pub trait Script<R: Recipe> {
    /// How many recipe steps the bytes choose among.
    const ACTS: u8;
    /// Recipe step `which` (below [`ACTS`](Self::ACTS)) with argument `arg`: another
    /// session or an operator changes the tree, the user calls the machine, ... What
    /// the machine does in a user call goes through [`check`](Self::check).
    fn act(&mut self, h: &mut Harness<R>, which: u8, arg: u8) -> Result<(), String>;
    /// Safety, after every step: what the machine sent and reported.
    fn check(&mut self, h: &Harness<R>, happened: &[Happened<R::Event>]) -> Result<(), String>;
    /// Once faults stopped, the actors' part of a settle round (other sessions leave,
    /// the user finishes its work). `Ok(true)`: the run has reached its end.
    fn settle(&mut self, h: &mut Harness<R>, round: u32) -> Result<bool, String>;
    /// Liveness and cleanliness, at the very end.
    fn end(&mut self, h: &Harness<R>) -> Result<(), String>;
}

/// An actor's create of an empty, open node at `path` in `mode` (`createContainer`
/// for a container, `create` otherwise).
pub fn create_request(path: &str, mode: CreateMode) -> Request {
    let req = CreateRequest::new(path, bytes::Bytes::new(), Acl::open_unsafe(), mode);
    match mode {
        CreateMode::Container => Request::CreateContainer(req),
        _ => Request::Create(req),
    }
}

/// A request in a trace line: its operation and path.
pub fn describe(r: &Request) -> String {
    let path = match r {
        Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => c.path.as_str(),
        Request::CreateTtl(c) => c.path.as_str(),
        Request::Delete(d) => d.path.as_str(),
        Request::SetData(d) => d.path.as_str(),
        Request::GetChildren(g)
        | Request::GetChildren2(g)
        | Request::GetData(g)
        | Request::Exists(g) => g.path.as_str(),
        Request::Sync(p) => p.path.as_str(),
        Request::Multi(ops) => return format!("Multi({} ops)", ops.len()),
        _ => "",
    };
    format!("{:?} {path}", r.op_code())
}

impl<R: Recipe> Harness<R> {
    /// A world of `clients` sessions (at least one: [`ME`]), hosting nothing yet.
    pub fn new(clients: usize) -> Self {
        Harness {
            world: ModelWorld::new(clients.max(1)),
            trace: Vec::new(),
            faults: FaultCounts::default(),
            reconnected_at: 0,
        }
    }

    /// Adds a line to the trace (the last 400 are kept).
    pub fn note(&mut self, line: String) {
        if self.trace.len() == 400 {
            self.trace.remove(0);
        }
        self.trace.push(line);
    }

    /// An operator's fault or the server's reaping: when `arg`'s low bit is 0 and `dir`
    /// has children, an operator deletes the one `pick` chooses (any version) and this
    /// says whether the delete applied; else the server reaps a container (`arg >> 1`
    /// chooses which, if any is reapable).
    pub fn operator_deletes_a_child_or_reaps(&mut self, dir: &str, arg: u8, pick: usize) -> bool {
        let nodes = if self.world.zk.nodes.contains_key(dir) {
            self.world.zk.children(dir)
        } else {
            Vec::new()
        };
        if arg & 1 == 0 && !nodes.is_empty() {
            let p = format!("{dir}/{}", nodes[pick % nodes.len()]);
            let r = self.world.zk.write_as(
                None,
                &Request::Delete(DeleteRequest {
                    path: p.clone(),
                    version: -1,
                }),
            );
            self.note(format!("  an operator deletes {p}: {r:?}"));
            return r.is_ok();
        }
        let n = self.world.zk.reapable().len().max(1);
        if self.world.zk.reap(usize::from(arg >> 1) % n) {
            self.faults.reaps += 1;
            self.note("  the server reaps a container".into());
        }
        false
    }

    /// The trace so far.
    pub fn trace(&self) -> &[String] {
        &self.trace
    }

    /// [`ME`]'s current session id.
    pub fn session_id(&self) -> i64 {
        self.world.zk.sessions[ME].id
    }

    /// Is [`ME`]'s connection up?
    pub fn connected(&self) -> bool {
        self.world.zk.sessions[ME].link == Link::Up
    }

    /// The highest zxid [`ME`] has heard of.
    pub fn seen_zxid(&self) -> i64 {
        self.world.zk.sessions[ME].seen_zxid
    }

    /// [`ME`]'s time.
    pub fn now(&self) -> Instant {
        self.world.now[ME]
    }

    /// The machine under test, while it runs (the host drops it once done).
    pub fn machine(&self) -> Option<&R> {
        self.world.machines[ME].as_ref()
    }

    /// Paths of the nodes [`ME`]'s current session owns.
    pub fn ours_now(&self) -> Vec<String> {
        self.world.zk.owned_by(self.session_id())
    }

    /// Paths of the nodes [`ME`]'s sessions own: the current one and a zombie the
    /// server has not expired yet.
    pub fn ours(&self) -> Vec<String> {
        let s = &self.world.zk.sessions[ME];
        let mut v = self.world.zk.owned_by(s.id);
        if let Some(z) = s.zombie {
            v.extend(self.world.zk.owned_by(z));
        }
        v
    }

    /// Records in the trace what a machine did (`who`: its name in the trace, or "").
    pub fn record(&mut self, who: &str, happened: &[Happened<R::Event>]) {
        let sep = if who.is_empty() { "" } else { " " };
        for h in happened {
            let line = match h {
                Happened::Sent(r) => format!("  {who}{sep}sent {}", describe(r)),
                Happened::Event(e) => format!("  {who}{sep}event {e:?}"),
            };
            self.note(line);
        }
    }

    /// Client `k`'s machine handled its deadline: it must not stay in the past.
    pub fn deadline_moved_on(&self, who: &str, k: usize) -> Result<(), String> {
        if self
            .world
            .deadline(k)
            .is_some_and(|t| t <= self.world.now[k])
        {
            return Err(format!(
                "{who}: deadline not after now after handle_timeout"
            ));
        }
        Ok(())
    }

    /// Hosts `machine` on [`ME`]; `start` is the user's first call.
    pub fn host<S: Script<R>>(
        &mut self,
        script: &mut S,
        machine: R,
        start: impl FnOnce(&mut R, Instant),
    ) -> Result<(), String> {
        let happened = self.world.host(ME, machine, start);
        self.after(script, happened)
    }

    /// A user call on the machine (if it still runs); what it did is checked.
    pub fn user<S: Script<R>, T>(
        &mut self,
        script: &mut S,
        f: impl FnOnce(&mut R, Instant) -> T,
    ) -> Result<Option<T>, String> {
        let now = self.now();
        let out = self.world.machines[ME].as_mut().map(|m| f(m, now));
        let happened = self.world.pump(ME);
        self.after(script, happened)?;
        Ok(out)
    }

    /// Checks what happened: the script's invariants, and a deadline the machine
    /// handled is not left in the past.
    fn after<S: Script<R>>(
        &mut self,
        script: &mut S,
        happened: Vec<Happened<R::Event>>,
    ) -> Result<(), String> {
        self.record("", &happened);
        script.check(self, &happened)?;
        self.deadline_moved_on("the machine", ME)
    }

    /// [`ME`] reconnects (to a lagging follower if `stale`).
    fn reconnect(&mut self, stale: bool) -> Vec<Happened<R::Event>> {
        if self.world.zk.sessions[ME].link != Link::Up {
            self.reconnected_at = self.world.zk.zxid;
        }
        self.world.reconnect(ME, stale)
    }

    fn serve(&mut self) {
        if let Some((_, r)) = self.world.zk.sessions[ME].wire.front() {
            let line = format!("  server reads {}", describe(r));
            self.note(line);
        }
        self.world.zk.serve(ME);
    }

    /// Time passes by `by` for [`ME`].
    pub fn advance<S: Script<R>>(&mut self, script: &mut S, by: Duration) -> Result<(), String> {
        self.world.now[ME] = self.world.now[ME] + by;
        let happened = self.world.pump(ME);
        self.after(script, happened)
    }

    /// Serves and reads until nothing is on its way (or 64 rounds).
    pub fn exchange<S: Script<R>>(&mut self, script: &mut S) -> Result<(), String> {
        for _ in 0..64 {
            let s = &self.world.zk.sessions[ME];
            if s.link != Link::Up || (s.wire.is_empty() && s.out.is_empty()) {
                break;
            }
            while !self.world.zk.sessions[ME].wire.is_empty() {
                self.serve();
            }
            while !self.world.zk.sessions[ME].out.is_empty() {
                let happened = self.world.deliver(ME);
                self.after(script, happened)?;
            }
        }
        Ok(())
    }
}

/// A script that drives machines on other clients than [`ME`] itself (a queue's
/// producers and consumers, a semaphore's or an id generator's other users).
pub trait Machines<R: Recipe> {
    /// What client `k` is called in a verdict ("m0", "reader 2").
    fn who(&self, k: usize) -> String;

    /// Judges what client `k`'s machine did (its requests and events, in order).
    fn judge(
        &mut self,
        h: &Harness<R>,
        k: usize,
        happened: &[Happened<R::Event>],
    ) -> Result<(), String>;

    /// Records what client `k`'s machine did, judges it, and checks that its deadline
    /// moves on (no machine waits for a time that has passed).
    fn happened(
        &mut self,
        h: &mut Harness<R>,
        k: usize,
        happened: Vec<Happened<R::Event>>,
    ) -> Result<(), String> {
        let who = self.who(k);
        h.record(&who, &happened);
        self.judge(h, k, &happened)?;
        h.deadline_moved_on(&who, k)
    }

    /// Clients `1..n` (all but [`ME`]) let `dt` of their time pass; what their machines
    /// did is judged (a script's settling step).
    fn others_wait(&mut self, h: &mut Harness<R>, n: usize, dt: Duration) -> Result<(), String> {
        for k in 1..n {
            h.world.now[k] = h.world.now[k] + dt;
            let happened = h.world.pump(k);
            self.happened(h, k, happened)?;
        }
        Ok(())
    }

    /// The server reads client `k`'s oldest request (a script may lose its reply).
    fn serve(&mut self, h: &mut Harness<R>, k: usize) -> Result<(), String> {
        let happened = h.client_step(k, 0, 0);
        self.happened(h, k, happened)
    }
}

/// Client `k` and the server exchange until nothing is on its way (what the machine
/// did judged by `m`), as [`Harness::exchange`] does for [`ME`].
pub fn exchange_with<R: Recipe, M: Machines<R>>(
    h: &mut Harness<R>,
    m: &mut M,
    k: usize,
) -> Result<(), String> {
    for _ in 0..64 {
        let s = &h.world.zk.sessions[k];
        if s.link != Link::Up || (s.wire.is_empty() && s.out.is_empty()) {
            break;
        }
        while !h.world.zk.sessions[k].wire.is_empty() {
            m.serve(h, k)?;
        }
        while !h.world.zk.sessions[k].out.is_empty() {
            let happened = h.world.deliver(k);
            m.happened(h, k, happened)?;
        }
    }
    Ok(())
}

/// Runs `input` as a schedule, then settles; `Err` names the broken invariant and ends
/// with the last steps taken.
pub fn run<R: Recipe, S: Script<R>>(
    h: &mut Harness<R>,
    script: &mut S,
    input: &mut impl Iterator<Item = u8>,
) -> Result<(), String> {
    let result = steps(h, script, input).and_then(|()| settle(h, script));
    result.map_err(|e| format!("{e}\nlast steps:\n{}", h.trace.join("\n")))
}

fn steps<R: Recipe, S: Script<R>>(
    h: &mut Harness<R>,
    script: &mut S,
    input: &mut impl Iterator<Item = u8>,
) -> Result<(), String> {
    while let Some(op) = input.next() {
        let arg = input.next().unwrap_or(0);
        h.note(format!("step {} arg {arg}", op % 16));
        let happened = match op % 16 {
            0..=3 => {
                h.serve();
                Vec::new()
            }
            4..=6 => h.world.deliver(ME),
            7 => {
                h.note("  applied, then the connection breaks".into());
                if h.connected() && !h.world.zk.sessions[ME].wire.is_empty() {
                    h.faults.lost_replies += 1;
                }
                h.serve();
                h.world.drop_connection(ME)
            }
            8 => h.world.drop_connection(ME),
            9 if h.connected() => {
                if h.world.zk.catch_up(ME) {
                    h.note("  the lagging follower catches up".into());
                }
                Vec::new()
            }
            9 => {
                let s = &h.world.zk.sessions[ME];
                let stale = arg & 1 == 1 && s.link == Link::Down;
                if stale && s.seen_zxid < h.world.zk.zxid {
                    h.faults.stale_reconnects += 1;
                    h.note("  to a lagging follower".into());
                }
                h.reconnect(stale)
            }
            10 if arg & 1 == 0 => {
                if !h.world.zk.sessions[ME].wire.is_empty() {
                    h.faults.refusals += 1;
                }
                h.world.refuse(ME)
            }
            10 => {
                if h.world.zk.throttle(ME) {
                    h.faults.refusals += 1;
                }
                Vec::new()
            }
            11 | 12 | 14 => {
                let arg2 = input.next().unwrap_or(0);
                script.act(h, arg % S::ACTS.max(1), arg2)?;
                Vec::new()
            }
            13 if arg > 248 => {
                let mut happened = h.world.drop_connection(ME);
                h.faults.expiries += 1;
                if arg & 1 == 0 {
                    h.note("  the server expires the session".into());
                    h.world.expire_on_server(ME);
                } else {
                    h.note("  the client gives up on its session".into());
                    happened.extend(h.world.expire_locally(ME));
                }
                happened
            }
            13 if arg > 200 => {
                if h.world.expire_zombie(ME) {
                    h.note("  the server expires the zombie session".into());
                }
                let reaped = h.world.zk.reap(usize::from(arg % 4));
                if reaped {
                    h.faults.reaps += 1;
                    h.note("  the server reaps a container".into());
                }
                Vec::new()
            }
            13 => h.world.deliver(ME),
            15 if arg & 1 == 1 => {
                h.world.now[ME] = h.world.now[ME] + Duration::from_millis(u64::from(arg) * 4);
                h.world.pump(ME)
            }
            _ => h.world.tick(ME),
        };
        h.after(script, happened)?;
    }
    Ok(())
}

/// Faults stop; the world behaves until the script says the run has ended.
pub fn settle<R: Recipe, S: Script<R>>(h: &mut Harness<R>, script: &mut S) -> Result<(), String> {
    h.note("settle".into());
    h.world.expire_zombie(ME);
    for round in 0..SETTLE_ROUNDS {
        if h.world.zk.sessions[ME].link != Link::Up {
            let happened = h.reconnect(false);
            h.after(script, happened)?;
        }
        // Lagging followers catch up in time.
        for s in 0..h.world.zk.sessions.len() {
            h.world.zk.catch_up(s);
        }
        h.exchange(script)?;
        if script.settle(h, round)? {
            break;
        }
        h.exchange(script)?;
        h.advance(script, Duration::from_millis(50))?;
    }
    h.exchange(script)?;
    script.end(h)
}

/// How many kinds of [`Harness::client_step`] there are.
pub const CLIENT_STEPS: u8 = 6;

impl<R: Recipe> Harness<R> {
    /// The common steps for any client `k` (for a script whose actors are machines of
    /// their own on other clients, or that faults several machines under test): kind
    /// `which % CLIENT_STEPS` with argument `arg`: the server answers `k`'s oldest
    /// request; `k` reads the oldest reply or notification; the server applies a request
    /// and the connection breaks before its reply (or, odd `arg`, it just breaks); the
    /// connection comes back (odd `arg`: to a lagging follower); the session refuses
    /// the newest unread request or the server throttles the oldest, or (`arg` ≥ 224)
    /// the session expires on the server or the client gives up on it, or (`arg` ≥ 192)
    /// the server expires `k`'s zombie session; `k`'s time passes by `arg` × 8 ms. What
    /// `k`'s machine did is returned, for the script to check; the faults are counted
    /// in [`faults`](Self::faults).
    pub fn client_step(&mut self, k: usize, which: u8, arg: u8) -> Vec<Happened<R::Event>> {
        let s = &self.world.zk.sessions[k];
        match which % CLIENT_STEPS {
            0 => {
                if let Some((_, r)) = s.wire.front() {
                    let line = format!("  server reads client {k}'s {}", describe(r));
                    self.note(line);
                }
                self.world.zk.serve(k);
                Vec::new()
            }
            1 => self.world.deliver(k),
            2 => {
                if arg & 1 == 0 && s.link == Link::Up && !s.wire.is_empty() {
                    self.faults.lost_replies += 1;
                    self.note(format!("  client {k}: applied, then the connection breaks"));
                    self.world.zk.serve(k);
                } else {
                    self.note(format!("  client {k}: the connection breaks"));
                }
                self.world.drop_connection(k)
            }
            3 => {
                let stale = arg & 1 == 1 && s.link == Link::Down;
                if stale && s.seen_zxid < self.world.zk.zxid {
                    self.faults.stale_reconnects += 1;
                    self.note(format!("  client {k} reconnects to a lagging follower"));
                }
                if k == ME {
                    self.reconnect(stale)
                } else {
                    self.world.reconnect(k, stale)
                }
            }
            4 if arg >= 224 => {
                let mut happened = self.world.drop_connection(k);
                self.faults.expiries += 1;
                if arg & 1 == 0 {
                    self.note(format!("  the server expires client {k}'s session"));
                    self.world.expire_on_server(k);
                } else {
                    self.note(format!("  client {k} gives up on its session"));
                    happened.extend(self.world.expire_locally(k));
                }
                happened
            }
            4 if arg >= 192 => {
                if self.world.expire_zombie(k) {
                    self.note(format!("  the server expires client {k}'s zombie session"));
                }
                Vec::new()
            }
            4 if arg & 1 == 0 => {
                if !s.wire.is_empty() {
                    self.faults.refusals += 1;
                    self.note(format!("  client {k}'s session refuses a request"));
                }
                self.world.refuse(k)
            }
            4 => {
                if self.world.zk.throttle(k) {
                    self.faults.refusals += 1;
                    self.note(format!("  the server throttles client {k}"));
                }
                Vec::new()
            }
            _ => {
                self.world.now[k] = self.world.now[k] + Duration::from_millis(u64::from(arg) * 8);
                self.world.tick(k)
            }
        }
    }
}
