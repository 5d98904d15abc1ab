//! The real leader election ([`Election`]) in the simulator: N clients, each running the
//! full stack (codec → session → client → recipe), standing for election, resigning
//! (with and without rejoining), acknowledging after a short "leader procedure", and
//! closing, under every fault the simulator has.
//!
//! Safety, after every event:
//! * never two leaders at once: a client leads from `Elected` until `Suspended`, `Lost`,
//!   `Resigned` or a final event (folded with [`Leadership::after`]), and it counts
//!   only while its process runs and the server still has its session;
//! * fencing tokens of live clients rise in order of election;
//! * `Elected` reported by a live client: its node is the lowest candidate on the server
//!   and the token is that node's czxid;
//! * `Acknowledged` reported by a live client: its token is the lowest candidate's czxid
//!   and the acknowledgement node on the server carries that token;
//! * whenever an acknowledgement node exists on the server, it was written by the
//!   current leader: its owner session owns the lowest candidate node and its token is
//!   that node's czxid (a deposed leader cannot leave a stale one behind while its
//!   session lives);
//! * the machine's getter agrees with the events: `is_leader()` only after `Elected`;
//! * every client also runs an election [`Observer`]: a leader it reports is one that
//!   led (no live candidate created before it on the server) and its token is its
//!   node's czxid.
//!
//! Liveness, once faults stop (the last stretch of the run is quiet): clients stop
//! resigning and closing, and every client stands for election (a crashed client comes
//! back and joins). In a check window that starts a bounded time after the faults stop,
//! at every event: every client has a live session and a candidacy, exactly one client
//! leads, it owns the lowest node, the candidates' directory holds exactly one node per
//! client — each the node its machine reports — and nothing else (no orphan from a lost
//! create), and from a little later the acknowledgement node carries the leader's token
//! and every observer reports that leader, acknowledged.
//! Then every client closes: by the end every `close` has reached `Closed`, no machine is
//! still hosted, and no candidate or acknowledgement node is left. Nothing is cancelled
//! before the check window.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, SimServer, Simulation, View};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::recipe::contender::Contender;
use zk_recipes::recipe::election::observer::{Observer, ObserverEvent, Participant};
use zk_recipes::recipe::election::{
    ack_node, default_ack_dir, parse_ack_node, Election, ElectionConfig, ElectionEvent, Leadership,
};
use zk_recipes::time::Instant;

/// The candidates' directory.
pub const DIR: &str = "/app/election/svc";

/// How the user of the election behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum User {
    /// Acts as leader exactly between `Elected` and the next `Suspended`/`Lost`/
    /// `Resigned`/final event (and again after `Reconnected`).
    Careful,
    /// A broken user, to prove the harness can fail: it takes `Elected` to mean "leader
    /// until I resign", ignoring `Suspended` and `Lost`.
    Naive,
}

/// When the phases of a run start (virtual time).
#[derive(Clone, Copy, Debug)]
pub struct Phases {
    /// Faults stop; clients stop resigning and closing and all stand for election.
    pub quiet_at: Instant,
    /// The liveness check window opens.
    pub check_at: Instant,
    /// From here the acknowledgement must carry the leader's token too.
    pub ack_check_at: Instant,
    /// From here every observer must report the leader, acknowledged.
    pub observe_check_at: Instant,
    /// The window closes and every client closes its election.
    pub close_at: Instant,
}

/// One client's user of the election.
pub struct ElectionUser {
    slot: usize,
    rng: u64,
    user: User,
    phases: Phases,
    handle: Option<RecipeHandle<Election>>,
    rejoin: bool,
    /// We asked to be a candidate (join, or resign with rejoin) and have not resigned
    /// for good since.
    joined: bool,
    /// A resignation without rejoin is on its way.
    resigning: bool,
    /// `close` was called on the current machine.
    closing: bool,
    leadership: Leadership,
    /// The naive user's belief.
    believes: bool,
    /// Token of the current leadership.
    token: Option<i64>,
    /// When the leader procedure is done and we acknowledge.
    ack_at: Option<Instant>,
    /// The token we asked to acknowledge (once per leadership, again after AckFailed).
    ack_asked: Option<i64>,
    /// End of the current leader's term (it may resign then).
    term_end: Instant,
    next_action: Instant,
    idle_until: Instant,
    /// The user stopped acting as leader (resign or close) before the machine said so.
    stepped_down: bool,
    /// The last time `step` ran.
    last_now: Instant,
    /// Every `Elected`, in order: (token, node).
    pub elections: Vec<(i64, String)>,
    /// Tokens of every `Acknowledged`, in order.
    pub acks: Vec<i64>,
    /// `AckFailed` events.
    pub ack_failures: u32,
    /// `Failed` events of machines that rejoin (never expected here: a candidacy that
    /// ends by itself is made again).
    pub failures: Vec<String>,
    /// `close` calls, and the final events that answered them.
    pub closes: (u32, u32),
    /// `close` was called on the current machine and its final event has not come.
    close_pending: bool,
    /// The last events seen, for failure reports.
    pub log: Vec<String>,
    /// The client's election observer, if running.
    observer: Option<RecipeHandle<Observer>>,
    /// Every leader the observers reported, in order.
    pub observed: Vec<Option<Participant>>,
    /// Observer `close` calls, and the `Closed` events that answered them.
    pub observer_closes: (u32, u32),
    /// Observer `Failed` events (never expected).
    pub observer_failures: Vec<String>,
}

impl ElectionUser {
    /// A user for slot `slot`.
    pub fn new(slot: usize, seed: u64, user: User, phases: Phases) -> Self {
        ElectionUser {
            slot,
            rng: seed | 1,
            user,
            phases,
            handle: None,
            rejoin: true,
            joined: false,
            resigning: false,
            closing: false,
            leadership: Leadership::Follower,
            believes: false,
            token: None,
            ack_at: None,
            ack_asked: None,
            term_end: Instant::ZERO,
            next_action: Instant::ZERO,
            idle_until: Instant::ZERO,
            stepped_down: false,
            last_now: Instant::ZERO,
            elections: Vec::new(),
            acks: Vec::new(),
            ack_failures: 0,
            failures: Vec::new(),
            closes: (0, 0),
            close_pending: false,
            log: Vec::new(),
            observer: None,
            observed: Vec::new(),
            observer_closes: (0, 0),
            observer_failures: Vec::new(),
        }
    }

    /// The observer it runs, if any.
    pub fn observer(&self) -> Option<RecipeHandle<Observer>> {
        self.observer
    }

    fn on_observer_event(&mut self, now: Instant, e: &ObserverEvent) {
        self.note(now, format!("observer {e:?}"));
        match e {
            ObserverEvent::Leader(l) => self.observed.push(l.clone()),
            ObserverEvent::Failed { error } => self.observer_failures.push(format!("{error:?}")),
            ObserverEvent::Closed => {
                self.observer = None;
                if self.observer_closes.1 < self.observer_closes.0 {
                    self.observer_closes.1 += 1;
                }
            }
            _ => {}
        }
        if let ObserverEvent::Failed { .. } = e {
            self.observer = None;
        }
    }

    /// Runs an observer while the run lasts; closes it at the end.
    fn observe(&mut self, now: Instant, client: &mut Client) {
        match self.observer {
            Some(h)
                if now >= self.phases.close_at
                    && self.observer_closes.0 == self.observer_closes.1 =>
            {
                self.observer_closes.0 += 1;
                self.note(now, "observer close".into());
                client.command(now, h, |o, now| o.close(now));
            }
            None if now < self.phases.close_at => {
                let h = client.add(now, Observer::new(DIR));
                self.observer = Some(h);
                client.command(now, h, |o, now| o.start(now));
            }
            _ => {}
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo))
    }

    fn note(&mut self, now: Instant, what: String) {
        if self.log.len() == 40 {
            self.log.remove(0);
        }
        self.log.push(format!("{} us: {what}", now.as_micros()));
    }

    /// Does this user act as leader now?
    pub fn leads(&self) -> bool {
        match self.user {
            User::Careful => self.acting(),
            User::Naive => self.believes,
        }
    }

    /// Leading by the events, and not stepping down.
    fn acting(&self) -> bool {
        self.leadership == Leadership::Leading && !self.stepped_down
    }

    /// The election it runs, if any.
    pub fn handle(&self) -> Option<RecipeHandle<Election>> {
        self.handle
    }

    fn machine_ended(&mut self, now: Instant) {
        self.handle = None;
        self.joined = false;
        self.resigning = false;
        self.closing = false;
        self.leadership = Leadership::Follower;
        self.believes = false;
        self.token = None;
        self.ack_at = None;
        self.idle_until = now + self.ms(1, 20);
    }

    fn on_event(&mut self, now: Instant, e: &ElectionEvent) {
        self.note(now, format!("{e:?}"));
        let before = self.leadership;
        self.leadership = self.leadership.after(e);
        match e {
            ElectionEvent::Elected {
                fencing_token,
                node,
            } => {
                self.elections.push((*fencing_token, node.clone()));
                self.token = Some(*fencing_token);
                self.believes = true;
                self.stepped_down = false;
                self.ack_asked = None;
                self.ack_at = Some(now + self.ms(1, 15));
                self.term_end = now + self.ms(5, 60);
            }
            ElectionEvent::Acknowledged { fencing_token } => self.acks.push(*fencing_token),
            ElectionEvent::AckFailed { .. } => {
                self.ack_failures += 1;
                // Try again a little later (if still leading).
                self.ack_asked = None;
                self.ack_at = Some(now + self.ms(5, 30));
            }
            ElectionEvent::Lost { .. } if !self.rejoin => self.joined = false,
            ElectionEvent::Resigned => {
                self.believes = false;
                if self.resigning {
                    self.resigning = false;
                    self.joined = false;
                }
            }
            ElectionEvent::Failed { error } if self.rejoin => {
                self.failures.push(format!("{error:?}"))
            }
            _ => {}
        }
        if e.is_final() && self.close_pending {
            self.close_pending = false;
            self.closes.1 += 1;
        }
        if before == Leadership::Leading && self.leadership != Leadership::Leading {
            self.ack_at = None;
        }
        if self.leadership == Leadership::Leading && before == Leadership::Suspended {
            // Reconnected: the acknowledgement (if not written yet) is the machine's job;
            // ask again only if we never did.
            if self.ack_asked.is_none() {
                self.ack_at = Some(now);
            }
        }
    }

    fn act(&mut self, now: Instant, client: &mut Client, h: RecipeHandle<Election>) {
        let quiet = now >= self.phases.quiet_at;
        if now >= self.phases.close_at {
            if !self.closing {
                self.close(now, client, h);
            }
            return;
        }
        // The leader procedure is done: acknowledge.
        if self.acting() && self.ack_at.is_some_and(|t| now >= t) && self.ack_asked != self.token {
            self.ack_at = None;
            self.ack_asked = self.token;
            let ok = client.command(now, h, |e, now| e.acknowledge(now));
            self.note(now, format!("acknowledge -> {ok:?}"));
        }
        if quiet {
            // Everyone stands for election once faults stop.
            if !self.joined && !self.closing {
                self.joined = true;
                self.resigning = false;
                let ok = client.command(now, h, |e, now| e.join(now));
                self.note(now, format!("join (quiet) -> {ok:?}"));
            }
            return;
        }
        if now < self.next_action || self.closing {
            return;
        }
        self.next_action = now + self.ms(2, 30);
        let roll = self.next() % 100;
        if self.acting() {
            if now < self.term_end || self.ack_asked.is_none() {
                return;
            }
            match roll {
                0..=49 => self.resign(now, client, h, true),
                50..=69 => self.resign(now, client, h, false),
                70..=84 => self.close(now, client, h),
                _ => self.term_end = now + self.ms(5, 60),
            }
        } else if !self.joined {
            if self.resigning {
                return;
            }
            match roll {
                0..=69 => {
                    self.joined = true;
                    let ok = client.command(now, h, |e, now| e.join(now));
                    self.note(now, format!("join -> {ok:?}"));
                }
                70..=84 => self.close(now, client, h),
                _ => {}
            }
        } else {
            match roll {
                0..=2 => self.resign(now, client, h, true),
                3..=4 => self.resign(now, client, h, false),
                5..=6 => self.close(now, client, h),
                _ => {}
            }
        }
    }

    fn resign(
        &mut self,
        now: Instant,
        client: &mut Client,
        h: RecipeHandle<Election>,
        rejoin: bool,
    ) {
        let ok = client.command(now, h, |e, now| e.resign(now, rejoin));
        self.note(now, format!("resign(rejoin {rejoin}) -> {ok:?}"));
        if ok == Some(true) {
            // A resigning leader stops acting at once (before `Resigned` arrives).
            self.believes = false;
            self.stepped_down = true;
            self.ack_at = None;
            if !rejoin {
                self.resigning = true;
            }
        }
        if !rejoin {
            self.joined = false;
        }
    }

    fn close(&mut self, now: Instant, client: &mut Client, h: RecipeHandle<Election>) {
        self.closing = true;
        self.close_pending = true;
        self.closes.0 += 1;
        self.believes = false;
        self.stepped_down = true;
        self.note(now, "close".into());
        client.command(now, h, |e, now| e.close(now));
    }
}

impl Actor for ElectionUser {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        self.last_now = now;
        for ev in events {
            match ev {
                ClientEvent::Recipe { id, event } if Some(*id) == self.handle.map(|h| h.id()) => {
                    if let Some(e) = event.downcast_ref::<ElectionEvent>() {
                        self.on_event(now, e);
                        if e.is_final() {
                            self.machine_ended(now);
                        }
                    }
                }
                ClientEvent::Recipe { id, event } if Some(*id) == self.observer.map(|h| h.id()) => {
                    if let Some(e) = event.downcast_ref::<ObserverEvent>() {
                        self.on_observer_event(now, e);
                    }
                }
                ClientEvent::Session(s) if s.is_state_change() => {
                    self.note(now, format!("session {s:?}"));
                }
                _ => {}
            }
        }
        self.observe(now, client);
        match self.handle {
            Some(h) => self.act(now, client, h),
            None if now >= self.idle_until && now < self.phases.close_at => {
                let a = self.next();
                let b = self.next();
                let participant = format!("c{}-{:04x}", self.slot, b & 0xffff);
                let mut config = ElectionConfig::new(DIR, &participant, (a, b));
                // Before the quiet stretch, a quarter do not rejoin by themselves.
                self.rejoin = now >= self.phases.quiet_at || a % 4 != 0;
                config.rejoin = self.rejoin;
                self.note(
                    now,
                    format!("new election {participant} rejoin {}", self.rejoin),
                );
                let h = client.add(now, Election::new(config));
                self.handle = Some(h);
                self.joined = true;
                self.resigning = false;
                self.closing = false;
                self.leadership = Leadership::Follower;
                self.believes = false;
                self.next_action = now + self.ms(2, 30);
                client.command(now, h, |e, now| e.join(now));
            }
            None => {}
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        // Only future times: a time already passed was acted on (or does not apply).
        let now = self.last_now;
        let mut at: Option<Instant> = None;
        let mut consider = |t: Instant| {
            if t > now {
                at = Some(at.map_or(t, |a| a.min(t)));
            }
        };
        if self.observer.is_some() {
            consider(self.phases.close_at);
        }
        match self.handle {
            Some(_) if !self.closing => {
                consider(self.phases.close_at);
                consider(self.phases.quiet_at);
                if let Some(t) = self.ack_at {
                    consider(t);
                }
                if now < self.phases.quiet_at {
                    consider(self.next_action);
                }
            }
            Some(_) => {}
            None if self.idle_until < self.phases.close_at => {
                consider(self.idle_until.max(now + Duration::from_micros(1)))
            }
            None => {}
        }
        at
    }

    fn restart(&mut self) {
        self.note(self.last_now, "restart (new client)".into());
        self.handle = None;
        self.observer = None;
        // An observer close the crash interrupted never completes.
        self.observer_closes.0 = self.observer_closes.1;
        self.joined = false;
        self.resigning = false;
        self.closing = false;
        self.leadership = Leadership::Follower;
        self.believes = false;
        self.token = None;
        self.ack_at = None;
        self.stepped_down = false;
        self.idle_until = Instant::ZERO;
        // A close the crash interrupted never completes (its client is gone).
        if self.close_pending {
            self.close_pending = false;
            self.closes.0 -= 1;
        }
    }
}

/// A candidate node on the server: (name, czxid, owner session).
type Candidate = (String, i64, i64);

/// The candidate nodes in `DIR`, lowest first.
fn candidates(server: &SimServer) -> Vec<Candidate> {
    let mut c: Vec<(String, String, i64, i64)> = server
        .children(DIR)
        .unwrap_or_default()
        .into_iter()
        .map(|n| {
            let seq = Contender::parse(&n).map(|c| c.sequence).unwrap_or_default();
            let (czxid, owner) = server
                .node(&format!("{DIR}/{n}"))
                .map(|(_, s)| (s.czxid, s.ephemeral_owner))
                .unwrap_or((0, 0));
            (seq, n, czxid, owner)
        })
        .collect();
    c.sort();
    c.into_iter().map(|(_, n, z, o)| (n, z, o)).collect()
}

/// Checks the invariants after every event.
pub struct Checker {
    phases: Phases,
    ack_dir: String,
    seen_elections: Vec<usize>,
    seen_acks: Vec<usize>,
    seen_observed: Vec<usize>,
    max_token: i64,
    /// The candidates as of a server zxid (they change only with a write).
    cache: Option<(i64, Vec<Candidate>)>,
    /// Events seen inside the check window.
    pub window_checks: u64,
    /// Per client: since when it leads on a node an operator deleted.
    gone_since: Vec<Option<Instant>>,
    /// How long a leader may take to hear that its node was deleted.
    notice_bound: Duration,
}

impl Checker {
    /// A checker for a run with these phases.
    pub fn new(phases: Phases) -> Self {
        Checker {
            phases,
            ack_dir: default_ack_dir(DIR),
            seen_elections: Vec::new(),
            seen_acks: Vec::new(),
            seen_observed: Vec::new(),
            max_token: 0,
            cache: None,
            window_checks: 0,
            gone_since: Vec::new(),
            notice_bound: Duration::from_secs(5),
        }
    }

    /// The safety invariants, and liveness inside the check window.
    pub fn check(&mut self, view: &View<'_, ElectionUser>) -> Result<(), String> {
        let n = view.actors.len();
        // A leader whose node an operator deleted leads nothing the server knows of
        // (the next candidate may be elected at once): it must hear so in time.
        self.gone_since.resize(n, None);
        let mut leaders = Vec::new();
        for i in 0..n {
            let a = &view.actors[i];
            if !(a.leads() && view.live(i)) {
                self.gone_since[i] = None;
                continue;
            }
            let node = a.elections.last().map(|(_, n)| format!("{DIR}/{n}"));
            let gone = node
                .as_deref()
                .is_some_and(|p| !view.server.exists(p) && view.server.deleted_by_operator(p));
            if !gone {
                self.gone_since[i] = None;
                leaders.push(i);
                continue;
            }
            let since = *self.gone_since[i].get_or_insert(view.now);
            if a.user == User::Careful && view.now.saturating_since(since) > self.notice_bound {
                return Err(format!(
                    "c{i} still leads on {node:?}, deleted {} ms ago",
                    view.now.saturating_since(since).as_millis()
                ));
            }
        }
        if leaders.len() > 1 {
            let who: Vec<String> = leaders
                .iter()
                .map(|&i| format!("c{i} (token {:?})", view.actors[i].token))
                .collect();
            return Err(format!("two leaders at once: {}", who.join(", ")));
        }
        let zxid = view.server.zxid();
        let cands = match self.cache.take() {
            Some((z, c)) if z == zxid => c,
            _ => candidates(view.server),
        };
        let result = self.check_with(view, &cands);
        self.cache = Some((zxid, cands));
        result
    }

    fn check_with(
        &mut self,
        view: &View<'_, ElectionUser>,
        cands: &[Candidate],
    ) -> Result<(), String> {
        let n = view.actors.len();
        self.seen_elections.resize(n, 0);
        self.seen_acks.resize(n, 0);
        self.seen_observed.resize(n, 0);
        for i in 0..n {
            let a = &view.actors[i];
            let live = view.live(i);
            // Fencing tokens rise in order of election (a stale grant to a session the
            // server already expired is what fencing is for: not counted).
            for (token, node) in &a.elections[self.seen_elections[i]..] {
                let token = *token;
                if live && token <= self.max_token {
                    return Err(format!(
                        "fencing token {token} of c{i} not above {}",
                        self.max_token
                    ));
                }
                self.max_token = self.max_token.max(token);
                // Reported by a live client: its node is the lowest, the token its czxid.
                let deleted = view.server.deleted_by_operator(&format!("{DIR}/{node}"));
                match cands.first() {
                    _ if !live || deleted => {}
                    Some((lowest, czxid, _)) if lowest == node && *czxid == token => {}
                    other => {
                        return Err(format!(
                            "c{i} reported Elected {{ {token}, {node} }} but the lowest \
                             candidate is {other:?}"
                        ))
                    }
                }
            }
            self.seen_elections[i] = a.elections.len();
            for &token in &a.acks[self.seen_acks[i]..] {
                // An acknowledgement whose candidate node an operator deleted after the
                // server checked it is stale: the deposed leader hears and withdraws it.
                let deleted = a.elections.iter().any(|(t, n)| {
                    *t == token && view.server.deleted_by_operator(&format!("{DIR}/{n}"))
                });
                if !live || deleted {
                    continue;
                }
                let lowest = cands.first().map(|c| c.1);
                let on_server = view
                    .server
                    .node(&ack_node(&self.ack_dir, token))
                    .map(|(_, stat)| stat.ephemeral_owner);
                if lowest != Some(token) || on_server != Some(view.session(i).0) {
                    return Err(format!(
                        "c{i} reported Acknowledged {{ {token} }}: lowest candidate's czxid \
                         {lowest:?}, acknowledgement on the server {on_server:?}"
                    ));
                }
            }
            self.seen_acks[i] = a.acks.len();
            // An observer's leader led: no live candidate was created before it (one
            // that was would be in every listing that has it), and its token is its
            // node's czxid.
            for p in a.observed[self.seen_observed[i]..].iter().flatten() {
                if !live {
                    continue;
                }
                let seq = |name: &str| Contender::parse(name).map(|c| c.sequence);
                let before = cands
                    .iter()
                    .find(|c| seq(&c.0) < seq(&p.node) && seq(&c.0).is_some());
                let token = cands.iter().find(|c| c.0 == p.node).map(|c| c.1);
                if before.is_some() || token.is_some_and(|t| t != p.fencing_token) {
                    return Err(format!(
                        "c{i}'s observer reported leader {p:?}, but the candidate {before:?} \
                         was created before it and lives (its node's czxid {token:?})"
                    ));
                }
            }
            self.seen_observed[i] = a.observed.len();
            // The getter agrees with the events.
            if let Some(h) = a.handle {
                if let Some(e) = view.client(i).recipe(h) {
                    if e.is_leader() && a.leadership != Leadership::Leading {
                        return Err(format!(
                            "c{i}: is_leader() but the events say {:?}",
                            a.leadership
                        ));
                    }
                }
            }
        }
        for (token, owner) in acks(view.server, &self.ack_dir) {
            // Never written after its candidate node was gone: the acknowledgement's
            // multi checks that node (an operator's deletion comes before or after it).
            if let Some(deleted) = view.server.operator_deletion_of(token) {
                let written = view
                    .server
                    .node(&ack_node(&self.ack_dir, token))
                    .map_or(0, |(_, s)| s.czxid);
                if written > deleted {
                    return Err(format!(
                        "acknowledgement {token} written at zxid {written}, after its \
                         candidate node was deleted at {deleted}"
                    ));
                }
            }
            // An acknowledgement of a live candidate is the current leader's, by the
            // candidate's own session (a deposed leader's, whose node is gone, is being
            // withdrawn; the end of the run checks it went).
            if let Some(pos) = cands.iter().position(|c| c.1 == token) {
                if pos != 0 || cands[pos].2 != owner {
                    return Err(format!(
                        "acknowledgement {token} (owner 0x{owner:x}) on the server, but the \
                         lowest candidate is {:?}",
                        cands.first()
                    ));
                }
            }
        }
        if view.now >= self.phases.check_at && view.now < self.phases.close_at {
            self.window_checks += 1;
            self.liveness(view, cands)?;
        }
        Ok(())
    }

    fn liveness(&self, view: &View<'_, ElectionUser>, cands: &[Candidate]) -> Result<(), String> {
        let n = view.actors.len();
        let mut problems = Vec::new();
        let mut expected = Vec::new();
        for i in 0..n {
            let a = &view.actors[i];
            if !view.live(i) {
                problems.push(format!("c{i} has no live session"));
                continue;
            }
            let node = a
                .handle
                .and_then(|h| view.client(i).recipe(h))
                .and_then(|e| e.node().map(String::from));
            match node {
                Some(node) => expected.push((node, view.session(i).0)),
                None => problems.push(format!("c{i} is not a candidate (no node)")),
            }
        }
        let leaders: Vec<usize> = (0..n).filter(|&i| view.actors[i].leads()).collect();
        if leaders.len() != 1 {
            problems.push(format!("{} leaders: {leaders:?}", leaders.len()));
        } else {
            let l = leaders[0];
            let owner = view.session(l).0;
            if cands.first().map(|c| c.2) != Some(owner) {
                problems.push(format!("leader c{l} does not own the lowest node"));
            }
            if view.now >= self.phases.observe_check_at {
                for i in 0..n {
                    let seen = view.actors[i]
                        .observer
                        .and_then(|h| view.client(i).recipe(h))
                        .map(|o| {
                            (
                                o.leader().map(|p| p.node.clone()),
                                o.acknowledged().is_some(),
                            )
                        });
                    let want = (cands.first().map(|c| c.0.clone()), true);
                    if seen.as_ref() != Some(&want) {
                        problems.push(format!(
                            "c{i}'s observer sees (leader, acknowledged) {seen:?}, not {want:?}"
                        ));
                    }
                }
            }
            if view.now >= self.phases.ack_check_at {
                let lowest = cands.first().map(|c| c.1);
                let on_server = lowest.filter(|t| {
                    acks(view.server, &self.ack_dir)
                        .iter()
                        .any(|(a, o)| a == t && *o == owner)
                });
                if on_server.is_none() {
                    problems.push(format!(
                        "leader c{l} has not acknowledged: acknowledgement {on_server:?}"
                    ));
                }
            }
        }
        let mut on_server: Vec<(String, i64)> =
            cands.iter().map(|(n, _, o)| (n.clone(), *o)).collect();
        on_server.sort();
        expected.sort();
        if on_server != expected {
            problems.push(format!(
                "candidates on the server {on_server:?}, live candidates' nodes {expected:?}"
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "liveness (faults stopped at {} us): {}",
                self.phases.quiet_at.as_micros(),
                problems.join("; "),
            ))
        }
    }
}

/// Totals of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    /// `Elected` events.
    pub elections: usize,
    /// `Acknowledged` events.
    pub acks: usize,
    /// `AckFailed` events.
    pub ack_failures: usize,
    /// Leaders (`Some`) reported by observers.
    pub observed: usize,
    /// Events checked inside the liveness window.
    pub window_checks: u64,
}

impl core::ops::AddAssign for Totals {
    fn add_assign(&mut self, o: Totals) {
        self.elections += o.elections;
        self.acks += o.acks;
        self.ack_failures += o.ack_failures;
        self.observed += o.observed;
        self.window_checks += o.window_checks;
    }
}

/// The fault stretch of a default run.
pub const FAULTS: Duration = Duration::from_millis(2500);

/// One schedule with every fault: 2.5 s of faults, then quiet.
pub fn run(seed: u64, clients: usize, user: User) -> Result<Totals, String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = FAULTS;
    run_with(config, user)
}

/// One schedule with every fault and an operator deleting candidate nodes (a leader's,
/// a follower's, one being recovered) now and then.
pub fn run_with_operator(seed: u64, clients: usize) -> Result<Totals, String> {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = FAULTS;
    config.delete_node = 100;
    config.delete_under = Some(DIR.into());
    run_with(config, User::Careful)
}

/// One schedule with the given fault settings; `config.duration` is the fault stretch
/// (the quiet stretch and the check window are added to it).
pub fn run_with(mut config: SimConfig, user: User) -> Result<Totals, String> {
    let seed = config.seed;
    let notice_bound = config.recovery_bound();
    let clients = config.clients;
    let quiet_at = Instant::ZERO + config.duration;
    // After the faults: a crashed client may come back 2.5 s later and a dead session
    // expires within the session timeout; then the election settles.
    let check_at = quiet_at + Duration::from_millis(3500);
    let phases = Phases {
        quiet_at,
        check_at,
        ack_check_at: check_at + Duration::from_millis(100),
        observe_check_at: check_at + Duration::from_millis(200),
        close_at: check_at + Duration::from_millis(400),
    };
    let end = phases.close_at + Duration::from_millis(1000);
    config.quiet = end.saturating_since(quiet_at);
    config.duration = end.saturating_since(Instant::ZERO);
    let mut sim = Simulation::new(config, |i| {
        ElectionUser::new(
            i,
            ((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D,
            user,
            phases,
        )
    });
    let mut checker = Checker::new(phases);
    checker.notice_bound = notice_bound;
    if let Err(e) = sim.run(|v| checker.check(v)) {
        return Err(format!("{e}{}", client_logs(sim.actors())));
    }
    let mut problems = Vec::new();
    if checker.window_checks == 0 {
        problems.push(String::from("the check window saw no event"));
    }
    for i in 0..clients {
        let a = &sim.actors()[i];
        if !a.failures.is_empty() {
            problems.push(format!("c{i}: Failed {:?}", a.failures));
        }
        if a.handle.is_some() || a.closes.0 != a.closes.1 {
            problems.push(format!(
                "c{i}: close never reached Closed ({} closes, {} Closed)",
                a.closes.0, a.closes.1
            ));
        }
        if !a.observer_failures.is_empty() {
            problems.push(format!("c{i}: observer Failed {:?}", a.observer_failures));
        }
        if a.observer.is_some() || a.observer_closes.0 != a.observer_closes.1 {
            problems.push(format!(
                "c{i}: the observer's close never reached Closed ({:?})",
                a.observer_closes
            ));
        }
        if sim.client(i).recipes() != 0 {
            problems.push(format!(
                "c{i}: {} machines still hosted",
                sim.client(i).recipes()
            ));
        }
    }
    for (n, _, owner) in candidates(sim.server()) {
        problems.push(format!(
            "candidate {n} left (owner 0x{owner:x}, alive {})",
            sim.server().session_alive(owner)
        ));
    }
    for (token, owner) in acks(sim.server(), &default_ack_dir(DIR)) {
        problems.push(format!("acknowledgement {token} left (owner 0x{owner:x})"));
    }
    if !problems.is_empty() {
        return Err(format!(
            "seed {seed}: liveness/cleanliness broken after the close:\n{}{}",
            problems.join("\n"),
            client_logs(sim.actors())
        ));
    }
    let mut totals = Totals {
        window_checks: checker.window_checks,
        ..Totals::default()
    };
    for a in sim.actors() {
        totals.elections += a.elections.len();
        totals.acks += a.acks.len();
        totals.ack_failures += a.ack_failures as usize;
        totals.observed += a.observed.iter().flatten().count();
    }
    Ok(totals)
}

fn client_logs(actors: &[ElectionUser]) -> String {
    let mut s = String::from("\nclient logs (last events):\n");
    for (i, a) in actors.iter().enumerate() {
        s.push_str(&format!("c{i}: {:#?}\n", a.log));
    }
    s
}

/// The acknowledgements on the server: (token, owner session).
fn acks(server: &SimServer, dir: &str) -> Vec<(i64, i64)> {
    server
        .children(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|name| {
            let token = parse_ack_node(name)?;
            let (_, stat) = server.node(&ack_node(dir, token))?;
            Some((token, stat.ephemeral_owner))
        })
        .collect()
}
