//! Many real clients against one [`SimServer`] in virtual time, with seeded faults and
//! invariants checked after every event (quinn's `Pair` and neqo's simulator are the
//! models: jump to the earliest deadline, never sleep).
//!
//! Each client slot runs a real [`Client`] (codec → session → client) driven by an
//! [`Actor`]. The network delivers bytes with random latency, FIFO within a connection;
//! messages of different sessions reorder freely. Every frame the server writes is a
//! message of its own, so a connection can break between two replies. Faults, all from
//! the seed:
//! a request lost before the server reads it, a reply lost after the server applied
//! the request (the lost-create-reply case), a dropped connection, a server pause
//! (possibly longer than the session timeout), a forced session expiry, a client
//! crash (the process stops; its session expires later; the slot restarts with a new
//! session), a node deleted by an operator (off by default), and a reconnect that lands on a lagging follower (stale reads until it
//! catches up; off by default). A failure names its seed; the same seed replays the same run.

use alloc::collections::{BTreeMap, BinaryHeap, VecDeque};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};
use core::cmp::Reverse;
use core::time::Duration;

use super::server::{ConnId, Lag, ServerConfig, SimServer};
use zk_recipes::client::ClientEvent;
use zk_recipes::client::{Client, Options};
use zk_recipes::proto::DEFAULT_MAX_REQUEST;
use zk_recipes::session::{SessionState, Transport};
use zk_recipes::time::Instant;

/// A client's behaviour: it reacts to its session's events and its own timer.
pub trait Actor {
    /// Called after every event that reached this client, with the session events it
    /// produced (possibly none). Submit requests on `client` here.
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]);
    /// When the actor wants `step` called again without new events.
    fn wake_at(&self) -> Option<Instant>;
    /// The slot got a new client (after its session ended or the process crashed):
    /// forget everything about the old session.
    fn restart(&mut self);
}

/// Fault rates (per mille) and simulation settings.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seed for everything random.
    pub seed: u64,
    /// Number of client slots.
    pub clients: usize,
    /// How long to run, in virtual time.
    pub duration: Duration,
    /// Requested session timeout.
    pub session_timeout: Duration,
    /// One-way latency range.
    pub latency: (Duration, Duration),
    /// Per message to the server: the connection drops and the message is lost.
    pub lose_request: u32,
    /// Per message to a client (each frame the server wrote is its own message): the
    /// connection drops after the server acted, losing this frame and everything after
    /// it; earlier frames of the same write (e.g. the first reply of a pipelined pair)
    /// were delivered.
    pub lose_reply: u32,
    /// Per fault tick (every 100 ms): drop a random connection.
    pub drop_connection: u32,
    /// Per fault tick: pause the server for up to twice the session timeout.
    pub pause_server: u32,
    /// Per fault tick: expire a random session.
    pub expire_session: u32,
    /// Per fault tick: crash a random client.
    pub crash_client: u32,
    /// Per fault tick: a childless child of [`delete_under`](Self::delete_under),
    /// picked at random, is deleted from outside every client (an operator, a revoker's
    /// forced delete, an expired session's cleanup seen late); its watches fire.
    pub delete_node: u32,
    /// Where [`delete_node`](Self::delete_node) picks (`None`: nowhere).
    pub delete_under: Option<String>,
    /// Per reconnect of a live session (a re-attach, not a new session): the new
    /// connection lands on a follower that lags behind the leader, so its reads miss
    /// recent writes — possibly the session's own write whose reply was lost — until it
    /// catches up: on `sync`, on a write of its own, or after `stale_catch_up`. Its
    /// watches fire at catch-up for what it missed (see [`SimServer::connect_lagging`]).
    /// 0 in both [`with_faults`](Self::with_faults) and [`calm`](Self::calm) for now:
    /// a recipe survives it only if it syncs before trusting a read after a reconnect.
    pub stale_reconnect: u32,
    /// How long a lagging follower takes to catch up by itself (a random duration in
    /// this range, server time).
    pub stale_catch_up: (Duration, Duration),
    /// Keep a trace of the last events for failure reports.
    pub trace: bool,
    /// A run that handles more events than this fails (a livelock, not a slow run).
    pub max_events: u64,
    /// The last stretch of `duration` without faults, so that a run can end settled
    /// (everyone released, dead sessions expired) and be checked for leftovers.
    pub quiet: Duration,
    /// Each client session's cap on requests on the wire (a small one makes recipes
    /// hosted by one client queue, and share their listings: issue 25).
    pub max_in_flight: usize,
}

impl SimConfig {
    /// A config with every fault enabled at moderate rates.
    pub fn with_faults(seed: u64, clients: usize) -> Self {
        SimConfig {
            seed,
            clients,
            duration: Duration::from_secs(3),
            session_timeout: Duration::from_millis(1500),
            latency: (Duration::from_micros(100), Duration::from_millis(3)),
            lose_request: 3,
            lose_reply: 3,
            drop_connection: 20,
            pause_server: 3,
            expire_session: 5,
            crash_client: 5,
            delete_node: 0,
            delete_under: None,
            stale_reconnect: 200,
            stale_catch_up: (Duration::from_millis(50), Duration::from_millis(500)),
            trace: true,
            max_events: 20_000_000,
            quiet: Duration::ZERO,
            max_in_flight: zk_recipes::session::DEFAULT_MAX_IN_FLIGHT,
        }
    }

    /// The longest a client can take, once faults stop, to be back on the server with a
    /// live session — what a quiet stretch must at least last before a workload may
    /// require everyone to finish (plus the workload's own time):
    /// * a crashed client restarts up to [`RESTART_DELAY_MAX`] after its crash (then
    ///   connects at once, with a new session);
    /// * a suspended session that last heard from the server just before the quiet
    ///   stretch, and whose reconnect backoff the faults have grown (connections lost
    ///   before they were stable count as failed attempts), ends by its own expiry
    ///   estimate one (negotiated) session timeout later, and dials its new session up
    ///   to the backoff cap after that.
    pub fn recovery_bound(&self) -> Duration {
        let server = ServerConfig::default();
        let ms = |v: i32| Duration::from_millis(u64::try_from(v).unwrap_or(0));
        let negotiated = self.session_timeout.clamp(
            ms(server.min_session_timeout_ms),
            ms(server.max_session_timeout_ms),
        );
        let backoff_max = client_options(self).session.backoff_max;
        let (_, latency) = self.latency;
        // Dial, handshake: a few one-way trips.
        let connect = latency * 4;
        RESTART_DELAY_MAX.max(negotiated + backoff_max) + connect
    }

    /// Lengthens the quiet stretch (and the run with it: the faulty stretch stays as
    /// configured) to at least [`recovery_bound`](Self::recovery_bound) plus
    /// `workload`, what the workload itself needs to finish once every client is back.
    /// A harness that holds every attempt to finishing once faults stop needs it: a
    /// client can only finish once it can be back on the server, and a shorter quiet
    /// stretch would blame the recipe for the client's backoff.
    pub fn quiet_past_recovery(&mut self, workload: Duration) {
        let settle = self.recovery_bound() + workload;
        if self.quiet < settle {
            let more = settle - self.quiet;
            self.quiet += more;
            self.duration += more;
        }
    }

    /// No faults at all (for benchmarks and baselines).
    pub fn calm(seed: u64, clients: usize) -> Self {
        SimConfig {
            lose_request: 0,
            lose_reply: 0,
            drop_connection: 0,
            pause_server: 0,
            expire_session: 0,
            crash_client: 0,
            delete_node: 0,
            stale_reconnect: 0,
            trace: false,
            ..Self::with_faults(seed, clients)
        }
    }
}

/// What invariants get to look at after each event.
pub struct View<'a, A> {
    /// Virtual time.
    pub now: Instant,
    /// The server model.
    pub server: &'a SimServer,
    /// Every slot's actor.
    pub actors: &'a [A],
    slots: &'a [Slot],
}

impl<A> View<'_, A> {
    /// Slot `i`'s current session id (0 if none yet) and whether its process runs.
    pub fn session(&self, i: usize) -> (i64, bool) {
        let s = &self.slots[i];
        (s.client.session().session_id(), s.running)
    }

    /// Is slot `i`'s process running with a session the server still has?
    pub fn live(&self, i: usize) -> bool {
        let (id, running) = self.session(i);
        running && id != 0 && self.server.session_alive(id)
    }

    /// Slot `i`'s client.
    pub fn client(&self, i: usize) -> &Client {
        &self.slots[i].client
    }
}

/// An event at a time: (time, sequence, slab index). The sequence keeps equal times in
/// push order; the event itself waits in a slab so the heap moves only small keys.
#[derive(Debug)]
struct Queued(Instant, u64, usize);

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.0, self.1) == (other.0, other.1)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        (self.0, self.1).cmp(&(other.0, other.1))
    }
}

#[derive(Debug)]
enum Ev {
    Wake(usize),
    Dialed(usize, u64),
    ToServer(usize, u64, Bytes),
    ToClient(usize, u64, Bytes, bool),
    ServerTick,
    Fault,
    Resume,
    Restart(usize),
}

struct Slot {
    client: Client,
    running: bool,
    conn: Option<ConnId>,
    conn_gen: u64,
    /// The earliest Wake already in the queue for this slot.
    wake_at: Option<Instant>,
    /// FIFO per direction: no message may arrive before the previous one.
    last_to_server: Instant,
    last_to_client: Instant,
    restart_pending: bool,
}

/// A run. Build it, then [`run`](Simulation::run) with an invariant.
pub struct Simulation<A> {
    config: SimConfig,
    server: SimServer,
    slots: Vec<Slot>,
    actors: Vec<A>,
    queue: BinaryHeap<Reverse<Queued>>,
    slab: Vec<Option<Ev>>,
    free: Vec<usize>,
    seq: u64,
    now: Instant,
    rng: u64,
    paused_until: Option<Instant>,
    conn_owner: BTreeMap<ConnId, (usize, u64)>,
    trace: VecDeque<String>,
    scratch: Vec<ClientEvent>,
    /// Requests the server handled (for throughput numbers).
    pub events_handled: u64,
}

/// The longest a crashed client stays down: it restarts, with a new session, a random
/// 500 ms to this long after the crash.
pub const RESTART_DELAY_MAX: Duration = Duration::from_millis(2500);

/// Every simulated client's options (before its seed).
fn client_options(config: &SimConfig) -> Options {
    Options::new("sim:2181")
        .expect("valid")
        .session_timeout(config.session_timeout)
        .max_in_flight(config.max_in_flight)
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Length of the first frame in `bytes` with its 4-byte big-endian prefix (all of
/// `bytes` when they hold less than a prefix).
fn frame_len(bytes: &[u8]) -> usize {
    match bytes {
        [a, b, c, d, ..] => {
            let body = u32::from_be_bytes([*a, *b, *c, *d]);
            usize::try_from(body).map_or(usize::MAX, |n| n.saturating_add(4))
        }
        _ => bytes.len(),
    }
}

impl<A: Actor> Simulation<A> {
    /// A simulation whose slot `i` runs `make_actor(i)`.
    pub fn new(config: SimConfig, mut make_actor: impl FnMut(usize) -> A) -> Self {
        let mut rng = config.seed ^ 0x5EED;
        let server = SimServer::new(ServerConfig {
            container_check_ms: 1000,
            // Old trees for lagging followers, only when reconnects may lag.
            snapshot_every_ms: if config.stale_reconnect > 0 { 10 } else { 0 },
            snapshots_kept: 8,
            ..ServerConfig::default()
        });
        let mut slots = Vec::new();
        let mut actors = Vec::new();
        for i in 0..config.clients {
            let client = Self::new_client(&config, &mut rng);
            actors.push(make_actor(i));
            slots.push(Slot {
                client,
                running: true,
                conn: None,
                conn_gen: 0,
                wake_at: None,
                last_to_server: Instant::ZERO,
                last_to_client: Instant::ZERO,
                restart_pending: false,
            });
        }
        Simulation {
            config,
            server,
            slots,
            actors,
            queue: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            seq: 0,
            now: Instant::ZERO,
            rng,
            paused_until: None,
            conn_owner: BTreeMap::new(),
            trace: VecDeque::new(),
            scratch: Vec::new(),
            events_handled: 0,
        }
    }

    fn new_client(config: &SimConfig, rng: &mut u64) -> Client {
        let options = client_options(config).seed(splitmix(rng));
        Client::new(options, Instant::ZERO)
    }

    /// The server model.
    pub fn server(&self) -> &SimServer {
        &self.server
    }

    /// The actors.
    pub fn actors(&self) -> &[A] {
        &self.actors
    }

    /// The client of slot `i`.
    pub fn client(&self, i: usize) -> &Client {
        &self.slots[i].client
    }

    /// Once the run has ended: a line for each client that still hosts a machine (every
    /// machine must have finished and been dropped).
    pub fn still_hosted(&self) -> Vec<String> {
        (0..self.slots.len())
            .filter(|&i| self.client(i).recipes() != 0)
            .map(|i| {
                format!(
                    "client {i}: {} recipes still hosted",
                    self.client(i).recipes()
                )
            })
            .collect()
    }

    /// Once the run has ended: a line for each node left in `dir`, with its ephemeral
    /// owner, whether that session is alive, and the entries of the actors' logs
    /// (`log`: (key, lines)) whose key is part of its name.
    pub fn nodes_left<'a>(
        &'a self,
        dir: &str,
        log: impl Fn(&'a A) -> &'a [(String, Vec<String>)],
    ) -> Vec<String> {
        let names = self.server.children(dir).unwrap_or_default();
        names
            .into_iter()
            .map(|n| {
                let owner = self
                    .server
                    .node(&format!("{dir}/{n}"))
                    .map_or(0, |(_, s)| s.ephemeral_owner);
                let history: Vec<&(String, Vec<String>)> = self
                    .actors
                    .iter()
                    .flat_map(|a| log(a).iter())
                    .filter(|(key, _)| n.contains(key.as_str()))
                    .collect();
                format!(
                    "node {dir}/{n} left (owner 0x{owner:x}, alive {}): {history:?}",
                    self.server.session_alive(owner)
                )
            })
            .collect()
    }

    fn roll(&mut self, per_mille: u32) -> bool {
        per_mille > 0 && (splitmix(&mut self.rng) % 1000) < u64::from(per_mille)
    }

    fn below(&mut self, n: u64) -> u64 {
        splitmix(&mut self.rng) % n.max(1)
    }

    fn latency(&mut self) -> Duration {
        let (lo, hi) = self.config.latency;
        let span = u64::try_from((hi.saturating_sub(lo)).as_micros()).unwrap_or(0);
        lo + Duration::from_micros(self.below(span + 1))
    }

    fn push(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        let index = match self.free.pop() {
            Some(i) => {
                self.slab[i] = Some(ev);
                i
            }
            None => {
                self.slab.push(Some(ev));
                self.slab.len() - 1
            }
        };
        self.queue.push(Reverse(Queued(at, self.seq, index)));
    }

    fn note(&mut self, what: impl FnOnce() -> String) {
        if self.config.trace {
            if self.trace.len() == 60 {
                self.trace.pop_front();
            }
            let line = format!("{:>10} us  {}", self.now.as_micros(), what());
            self.trace.push_back(line);
        }
    }

    /// Runs until the configured duration; `invariant` is checked after every event.
    /// `Err` carries the seed, the broken invariant and the trace.
    pub fn run(
        &mut self,
        mut invariant: impl FnMut(&View<'_, A>) -> Result<(), String>,
    ) -> Result<(), String> {
        for i in 0..self.slots.len() {
            self.drive(i);
        }
        self.push(Instant::ZERO + Duration::from_millis(100), Ev::ServerTick);
        self.push(Instant::ZERO + Duration::from_millis(100), Ev::Fault);
        let end = Instant::ZERO + self.config.duration;
        let mut handled = 0u64;
        while let Some(Reverse(Queued(at, _, index))) = self.queue.pop() {
            handled += 1;
            if handled > self.config.max_events {
                return Err(format!(
                    "seed {}: more than {} events by {} us: livelock",
                    self.config.seed,
                    self.config.max_events,
                    self.now.as_micros()
                ));
            }
            let Some(ev) = self.slab[index].take() else {
                continue;
            };
            self.free.push(index);
            if at > end {
                break;
            }
            self.now = self.now.max(at);
            self.handle(ev);
            let result = invariant(&View {
                now: self.now,
                server: &self.server,
                actors: &self.actors,
                slots: &self.slots,
            });
            if let Err(msg) = result {
                let mut report = format!(
                    "invariant broken at {} us (seed {}): {msg}\n",
                    self.now.as_micros(),
                    self.config.seed
                );
                report.push_str("last events:\n");
                for line in &self.trace {
                    report.push_str(line);
                    report.push('\n');
                }
                return Err(report);
            }
        }
        Ok(())
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Wake(i) => self.wake(i),
            Ev::Dialed(i, gen) => self.dialed(i, gen),
            Ev::ToServer(i, gen, bytes) => self.arrive_at_server(i, gen, bytes),
            Ev::ToClient(i, gen, bytes, closed) => self.arrive_at_client(i, gen, bytes, closed),
            Ev::ServerTick => {
                if self.paused_until.is_none() {
                    let ms = i64::try_from(self.now.as_micros() / 1000).unwrap_or(i64::MAX);
                    self.server.tick(ms);
                    self.flush_server();
                }
                self.push(self.now + Duration::from_millis(100), Ev::ServerTick);
            }
            Ev::Fault => {
                self.fault();
                self.push(self.now + Duration::from_millis(100), Ev::Fault);
            }
            Ev::Resume => {
                self.paused_until = None;
                self.note(|| String::from("server resumes"));
            }
            Ev::Restart(i) => self.restart(i),
        }
    }

    /// Client `i`'s deadline may have come.
    fn wake(&mut self, i: usize) {
        if self.slots[i].wake_at.is_some_and(|t| t <= self.now) {
            self.slots[i].wake_at = None;
        }
        if self.slots[i].running {
            self.slots[i].client.handle_timeout(self.now);
            self.drive(i);
        }
    }

    /// Client `i`'s connect (of connection generation `gen`) reached a server.
    fn dialed(&mut self, i: usize, gen: u64) {
        if self.slots[i].conn_gen != gen || !self.slots[i].running {
            return;
        }
        // A session that re-attaches may land on a lagging follower.
        let stale = self.slots[i].client.session().session_id() != 0
            && self.faults_on()
            && self.roll(self.config.stale_reconnect);
        let conn = if stale {
            let (lo, hi) = self.config.stale_catch_up;
            let span = u64::try_from(hi.saturating_sub(lo).as_millis()).unwrap_or(0);
            let ms = u64::try_from(lo.as_millis()).unwrap_or(u64::MAX);
            let lag = Lag {
                catch_up_ms: i64::try_from(ms.saturating_add(self.below(span + 1)))
                    .unwrap_or(i64::MAX),
                pick: splitmix(&mut self.rng),
            };
            self.note(|| format!("c{i} dials a follower that may lag ({lag:?})"));
            self.server.connect_lagging(DEFAULT_MAX_REQUEST, lag)
        } else {
            self.server.connect(DEFAULT_MAX_REQUEST)
        };
        self.conn_owner.insert(conn, (i, gen));
        self.slots[i].conn = Some(conn);
        self.note(|| format!("c{i} connected (conn {conn})"));
        self.slots[i].client.handle_connected(self.now);
        self.drive(i);
    }

    /// Bytes client `i` wrote reach the server (unless lost, or the server paused).
    fn arrive_at_server(&mut self, i: usize, gen: u64, bytes: Bytes) {
        if let Some(until) = self.paused_until {
            // A paused server reads nothing; the bytes wait in the socket.
            self.push(until, Ev::ToServer(i, gen, bytes));
            return;
        }
        if self.slots[i].conn_gen != gen {
            return;
        }
        let Some(conn) = self.slots[i].conn else {
            return;
        };
        if self.faults_on() && self.roll(self.config.lose_request) {
            self.note(|| {
                format!(
                    "c{i} connection drops; {} bytes to the server lost",
                    bytes.len()
                )
            });
            return self.drop_connection(i);
        }
        self.events_handled += 1;
        self.note(|| format!("c{i} -> server {} bytes", bytes.len()));
        let ms = i64::try_from(self.now.as_micros() / 1000).unwrap_or(i64::MAX);
        self.server.handle_bytes(ms, conn, &bytes);
        self.flush_server();
    }

    /// Bytes the server wrote (then perhaps a close) reach client `i` (unless lost).
    fn arrive_at_client(&mut self, i: usize, gen: u64, bytes: Bytes, closed: bool) {
        if self.slots[i].conn_gen != gen || !self.slots[i].running {
            return;
        }
        if !bytes.is_empty() && self.faults_on() && self.roll(self.config.lose_reply) {
            self.note(|| {
                format!(
                    "c{i} connection drops; {} bytes from the server lost",
                    bytes.len()
                )
            });
            return self.drop_connection(i);
        }
        self.note(|| {
            format!(
                "server -> c{i} {} bytes{}",
                bytes.len(),
                if closed { ", then close" } else { "" }
            )
        });
        self.slots[i].client.handle_bytes(self.now, &bytes);
        if closed {
            self.slots[i].conn = None;
            self.slots[i].conn_gen += 1;
            self.slots[i].client.handle_disconnect(self.now);
        }
        self.drive(i);
    }

    /// Client `i` starts again with a new client (and session).
    fn restart(&mut self, i: usize) {
        let client = Self::new_client(&self.config, &mut self.rng);
        let slot = &mut self.slots[i];
        slot.client = client;
        slot.running = true;
        slot.conn = None;
        slot.conn_gen += 1;
        slot.restart_pending = false;
        self.actors[i].restart();
        self.note(|| format!("c{i} restarts with a new session"));
        self.drive(i);
    }

    /// Faults are off during the quiet stretch at the end.
    fn faults_on(&self) -> bool {
        self.now + self.config.quiet < Instant::ZERO + self.config.duration
    }

    fn fault(&mut self) {
        if !self.faults_on() {
            return;
        }
        let n = self.slots.len() as u64;
        if self.roll(self.config.drop_connection) {
            let i = self.below(n) as usize;
            if self.slots[i].conn.is_some() {
                self.note(|| format!("fault: c{i} connection dropped"));
                self.drop_connection(i);
            }
        }
        if self.paused_until.is_none() && self.roll(self.config.pause_server) {
            let max =
                u64::try_from(self.config.session_timeout.as_micros() * 2).unwrap_or(u64::MAX);
            let mut d = Duration::from_micros(self.below(max) + 1);
            // A pause ends before the quiet stretch, which is for settling.
            let quiet_starts =
                Instant::ZERO + self.config.duration.saturating_sub(self.config.quiet);
            d = d.min(quiet_starts.saturating_since(self.now));
            let until = self.now + d;
            self.paused_until = Some(until);
            self.note(|| format!("fault: server paused for {} ms", d.as_millis()));
            self.push(until, Ev::Resume);
        }
        if self.roll(self.config.expire_session) {
            let ids = self.server.session_ids();
            if !ids.is_empty() {
                let id = ids[self.below(ids.len() as u64) as usize];
                self.note(|| format!("fault: session 0x{id:x} expired"));
                self.server.expire_session(id);
                self.flush_server();
            }
        }
        if let Some(dir) = self.config.delete_under.clone() {
            if self.roll(self.config.delete_node) {
                let childless: Vec<String> = self
                    .server
                    .children(&dir)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|n| format!("{dir}/{n}"))
                    .filter(|p| self.server.children(p).is_some_and(|c| c.is_empty()))
                    .collect();
                if !childless.is_empty() {
                    let path = childless[self.below(childless.len() as u64) as usize].clone();
                    self.note(|| format!("fault: an operator deletes {path}"));
                    self.server.operator_delete(&path);
                    self.flush_server();
                }
            }
        }
        if self.roll(self.config.crash_client) {
            let i = self.below(n) as usize;
            if self.slots[i].running {
                self.note(|| format!("fault: c{i} crashes"));
                self.slots[i].running = false;
                if let Some(conn) = self.slots[i].conn.take() {
                    self.server.disconnect(conn); // the OS closes the socket
                }
                self.slots[i].conn_gen += 1;
                let least = Duration::from_millis(500);
                let span = u64::try_from((RESTART_DELAY_MAX - least).as_millis()).unwrap_or(0);
                let back = self.now + least + Duration::from_millis(self.below(span));
                self.slots[i].restart_pending = true;
                self.push(back, Ev::Restart(i));
            }
        }
    }

    fn drop_connection(&mut self, i: usize) {
        if let Some(conn) = self.slots[i].conn.take() {
            self.server.disconnect(conn);
            self.conn_owner.remove(&conn);
        }
        self.slots[i].conn_gen += 1;
        self.slots[i].client.handle_disconnect(self.now);
        self.drive(i);
    }

    /// Ships everything the server wrote, FIFO per connection, one message per frame.
    fn flush_server(&mut self) {
        for conn in self.server.conns_with_output() {
            let mut bytes = self.server.take_output(conn).freeze();
            let closed = self.server.is_closed(conn);
            if closed {
                self.server.disconnect(conn);
            }
            let Some(&(i, gen)) = self.conn_owner.get(&conn) else {
                continue;
            };
            if closed {
                self.conn_owner.remove(&conn);
            }
            let at = (self.now + self.latency()).max(self.slots[i].last_to_client);
            self.slots[i].last_to_client = at;
            // One message per frame, all arriving together in write order (equal times
            // keep push order), so that the connection can break between two replies of
            // a pipelined pair. The server only writes whole frames; splitting a frozen
            // buffer is zero-copy.
            loop {
                let len = frame_len(&bytes);
                if len >= bytes.len() {
                    self.push(at, Ev::ToClient(i, gen, bytes, closed));
                    break;
                }
                let frame = bytes.split_to(len);
                self.push(at, Ev::ToClient(i, gen, frame, false));
            }
        }
    }

    /// Drains one client's outputs into the network and lets its actor act, until
    /// neither has anything more to say; then arms its timer.
    fn drive(&mut self, i: usize) {
        if !self.slots[i].running {
            return;
        }
        let mut events = core::mem::take(&mut self.scratch);
        for _ in 0..64 {
            events.clear();
            let mut out = BytesMut::new();
            while let Some(t) = self.slots[i].client.poll_transport() {
                if let Some(conn) = self.slots[i].conn.take() {
                    self.server.disconnect(conn);
                    self.conn_owner.remove(&conn);
                }
                self.slots[i].conn_gen += 1;
                if let Transport::Connect { .. } = t {
                    let at = self.now + self.latency();
                    let gen = self.slots[i].conn_gen;
                    self.push(at, Ev::Dialed(i, gen));
                }
            }
            // Bytes written while no connection is up have nowhere to go.
            if self.slots[i].client.poll_transmit(&mut out) && self.slots[i].conn.is_some() {
                let at = (self.now + self.latency()).max(self.slots[i].last_to_server);
                self.slots[i].last_to_server = at;
                let gen = self.slots[i].conn_gen;
                self.push(at, Ev::ToServer(i, gen, out.freeze()));
            }
            while let Some(e) = self.slots[i].client.poll_event() {
                events.push(e);
            }
            let before = self.slots[i].client.session().pending();
            self.actors[i].step(self.now, &mut self.slots[i].client, &events);
            let submitted = self.slots[i].client.session().pending() != before;
            if events.is_empty() && !submitted {
                break;
            }
        }
        self.scratch = events;
        if matches!(
            self.slots[i].client.session().state(),
            SessionState::Ended(_)
        ) && !self.slots[i].restart_pending
        {
            self.slots[i].restart_pending = true;
            let at = self.now + Duration::from_millis(50);
            self.push(at, Ev::Restart(i));
        }
        let wake = match (
            self.slots[i].client.poll_timeout(),
            self.actors[i].wake_at(),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(at) = wake {
            // Never re-wake at the same instant: a stuck actor must not spin the run.
            let at = at.max(self.now + Duration::from_micros(1));
            // A Wake already queued at or before `at` will do (an early wake is a no-op
            // that re-arms); only an earlier deadline needs a new event.
            if self.slots[i].wake_at.is_none_or(|queued| at < queued) {
                self.slots[i].wake_at = Some(at);
                self.push(at, Ev::Wake(i));
            }
        }
    }
}
