//! The configuration recipes ([`ConfigWriter`], [`ConfigReader`]) in the simulator, in
//! both protocols (the paper's ready node, and `multi` / `multiRead`): client 0 writes
//! one configuration after another (generation `g`: node `j` holds `g<g>:<j>`), the
//! other clients read it, under every fault the simulator has.
//!
//! Safety, after every event:
//! * server: whenever `ready` exists (ready-node protocol) — always, with `multi` —
//!   every configuration node holds the same generation (`ready` never stands over a
//!   half-written configuration);
//! * readers: every `Snapshot` holds one generation (never a mix of old and new
//!   values), one that was complete on the server with `ready` present at some moment,
//!   and a reader's generations never go back (within one process).
//!
//! Once faults stop: the writer starts no new write, but one that failed is written
//! again until one is `Written` (a failed write may leave `ready` deleted). A little
//! before the end every reader's last report must be a `Snapshot` equal to the server's
//! nodes (values and data versions) — convergence — and the writer must be idle; then the
//! readers are closed and no recipe may be hosted.

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::client::{Client, ClientEvent, RecipeHandle};
use zk_recipes::recipe::config::{
    ConfigMode, ConfigReader, ConfigSnapshot, ConfigWriter, ReaderConfig, ReaderEvent,
    WriterConfig, WriterEvent,
};
use zk_recipes::time::Instant;

/// The `ready` node.
pub const READY: &str = "/app/cfg/ready";
/// The configuration nodes.
pub const PATHS: [&str; 3] = ["/app/cfg/db", "/app/cfg/port", "/app/cfg/mode"];

/// The generation in a node's value (`None`: missing or not ours).
fn generation(value: Option<&[u8]>) -> Option<u64> {
    let s = core::str::from_utf8(value?).ok()?;
    s.strip_prefix('g')?.split(':').next()?.parse().ok()
}

/// The generation of a whole snapshot: `Ok(Some(g))` all nodes hold `g`, `Ok(None)`
/// all missing, `Err` a mix.
fn snapshot_generation(values: &[Option<&[u8]>]) -> Result<Option<u64>, ()> {
    let gens: BTreeSet<Option<u64>> = values.iter().map(|v| generation(*v)).collect();
    match gens.len() {
        1 => Ok(gens.into_iter().next().flatten()),
        _ => Err(()),
    }
}

/// A client's state at its close.
#[derive(Clone, Debug)]
pub enum AtClose {
    /// The writer: was a write running, or the last one not `Written`?
    Writer {
        /// Busy or not done.
        busy: bool,
    },
    /// A reader's last report (`None`: none at all; `Some(None)`: `NotReady`).
    Reader(Option<Option<ConfigSnapshot>>),
}

/// How the writer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writers {
    /// With the readers' protocol.
    Protocol,
    /// Ready-node readers: the writes with the ready-node protocol until one is
    /// `Written` (it creates `ready`), every later one as one `multi` under the standing `ready` (the module's
    /// table: safe).
    MultiUnderReady,
    /// Must-fail: like `MultiUnderReady`, but each later write sets one node at a time
    /// (one `multi` per node) under the standing `ready`.
    Naive,
}

/// One client: the writer (slot 0) or a reader.
pub struct ConfigUser {
    writer: bool,
    mode: ConfigMode,
    writers: Writers,
    rng: u64,
    stop_at: Instant,
    close_at: Instant,
    idle_until: Instant,
    /// The time of the last step.
    now: Instant,
    gen: u64,
    write: Option<RecipeHandle<ConfigWriter>>,
    /// Naive writer: nodes of this generation still to write, one by one.
    naive_left: Vec<usize>,
    last_written: bool,
    reader: Option<RecipeHandle<ConfigReader>>,
    closed: bool,
    /// Process restarts so far.
    pub lives: u32,
    /// Reader: what it reported (`None`: `NotReady`).
    pub reports: Vec<Option<ConfigSnapshot>>,
    /// What it was doing when it closed.
    pub at_close: Option<AtClose>,
    /// Writes `Written`.
    pub written: usize,
    /// Events, for failure reports.
    pub log: Vec<String>,
}

impl ConfigUser {
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn updates(&self, nodes: &[usize]) -> Vec<(String, Bytes)> {
        nodes
            .iter()
            .map(|&j| {
                (
                    String::from(PATHS[j]),
                    Bytes::from(format!("g{}:{j}", self.gen)),
                )
            })
            .collect()
    }

    fn start_write(&mut self, now: Instant, client: &mut Client) {
        let (config, nodes) = if self.writers == Writers::Naive && self.written > 0 {
            if self.naive_left.is_empty() {
                self.gen += 1;
                self.naive_left = (0..PATHS.len()).collect();
            }
            (
                WriterConfig::multi(),
                alloc::vec![self.naive_left.remove(0)],
            )
        } else {
            self.gen += 1;
            let config = match (self.mode, self.writers) {
                (ConfigMode::ReadyNode, Writers::Protocol) => WriterConfig::ready_node(READY),
                (ConfigMode::ReadyNode, _) if self.written == 0 => WriterConfig::ready_node(READY),
                _ => WriterConfig::multi(),
            };
            (config, (0..PATHS.len()).collect())
        };
        self.log
            .push(format!("{} write g{} {nodes:?}", now.as_micros(), self.gen));
        let h = client.add(now, ConfigWriter::new(config, self.updates(&nodes)));
        self.write = Some(h);
        client.command(now, h, |w, now| w.start(now));
    }

    fn reader_config(&self) -> ReaderConfig {
        match self.mode {
            ConfigMode::ReadyNode => ReaderConfig::ready_node(READY, &PATHS),
            ConfigMode::Multi => ReaderConfig::multi(&PATHS),
        }
    }
}

impl Actor for ConfigUser {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        self.now = now;
        for ev in events {
            let ClientEvent::Recipe { id, event } = ev else {
                continue;
            };
            if let Some(e) = event.downcast_ref::<WriterEvent>() {
                if Some(*id) != self.write.map(|h| h.id()) {
                    continue;
                }
                self.log.push(format!("{} {e:?}", now.as_micros()));
                self.write = None;
                self.last_written = *e == WriterEvent::Written;
                self.written += usize::from(self.last_written);
                self.idle_until = now + Duration::from_millis(1 + self.next() % 40);
            } else if let Some(e) = event.downcast_ref::<ReaderEvent>() {
                if Some(*id) != self.reader.map(|h| h.id()) {
                    continue;
                }
                self.log.push(format!("{} {e:?}", now.as_micros()));
                match e {
                    ReaderEvent::Snapshot(s) => self.reports.push(Some(s.clone())),
                    ReaderEvent::NotReady => self.reports.push(None),
                    _ => self.reader = None,
                }
            }
        }
        if self.closed {
            return;
        }
        if now >= self.close_at {
            self.closed = true;
            if self.writer {
                self.at_close = Some(AtClose::Writer {
                    busy: self.write.is_some() || !self.last_written,
                });
            } else {
                self.at_close = Some(AtClose::Reader(self.reports.last().cloned()));
                if let Some(h) = self.reader {
                    client.command(now, h, |r, now| r.close(now));
                }
            }
            return;
        }
        if self.writer {
            let more = now < self.stop_at || !self.last_written || !self.naive_left.is_empty();
            if self.write.is_none() && now >= self.idle_until && more {
                self.start_write(now, client);
            }
        } else if self.reader.is_none() {
            let h = client.add(now, ConfigReader::new(self.reader_config()));
            self.reader = Some(h);
            client.command(now, h, |r, now| r.start(now));
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        match self.closed {
            true => None,
            false if self.writer && self.write.is_none() && self.idle_until > self.now => {
                Some(self.idle_until.min(self.close_at))
            }
            false => Some(self.close_at),
        }
    }

    fn restart(&mut self) {
        self.write = None;
        self.last_written = false;
        self.reader = None;
        self.lives += 1;
        self.log.push(String::from("restart"));
    }
}

/// The safety invariants.
pub struct Checker {
    mode: ConfigMode,
    /// Check the server's state too (off in the must-fail test, to show that the
    /// readers' check alone catches a broken writer).
    pub server_check: bool,
    /// Generations complete on the server (with `ready`) at some moment.
    complete: BTreeSet<Option<u64>>,
    seen: Vec<usize>,
    last_gen: Vec<Option<u64>>,
    lives: Vec<u32>,
    zxid: i64,
}

impl Checker {
    /// A checker for `mode`.
    pub fn new(mode: ConfigMode) -> Self {
        Checker {
            mode,
            server_check: true,
            complete: BTreeSet::new(),
            seen: Vec::new(),
            last_gen: Vec::new(),
            lives: Vec::new(),
            zxid: -1,
        }
    }

    /// After every event.
    pub fn check(&mut self, view: &View<'_, ConfigUser>) -> Result<(), String> {
        let zxid = view.server.zxid();
        if zxid != self.zxid {
            self.zxid = zxid;
            let ready = self.mode == ConfigMode::Multi || view.server.exists(READY);
            if ready {
                let nodes: Vec<Option<Bytes>> = PATHS
                    .iter()
                    .map(|p| view.server.node(p).map(|(d, _)| d))
                    .collect();
                let values: Vec<Option<&[u8]>> = nodes.iter().map(|d| d.as_deref()).collect();
                match snapshot_generation(&values) {
                    Ok(g) => {
                        self.complete.insert(g);
                    }
                    Err(()) if self.server_check => {
                        return Err(format!(
                            "ready over a half-written configuration: {nodes:?}"
                        ))
                    }
                    Err(()) => {}
                }
            }
        }
        let n = view.actors.len();
        self.seen.resize(n, 0);
        self.last_gen.resize(n, None);
        self.lives.resize(n, 0);
        for (i, a) in view.actors.iter().enumerate() {
            if a.lives != self.lives[i] {
                self.lives[i] = a.lives;
                self.last_gen[i] = None;
            }
            for r in &a.reports[self.seen[i]..] {
                let Some(s) = r else { continue };
                let values: Vec<Option<&[u8]>> =
                    s.values.iter().map(|(_, v)| v.as_deref()).collect();
                let Ok(g) = snapshot_generation(&values) else {
                    return Err(format!("client {i} reported a mixed configuration: {s:?}"));
                };
                if !self.complete.contains(&g) {
                    return Err(format!(
                        "client {i} reported generation {g:?}, never complete with ready: {s:?}"
                    ));
                }
                if g < self.last_gen[i] {
                    return Err(format!(
                        "client {i} went back to generation {g:?} from {:?}",
                        self.last_gen[i]
                    ));
                }
                self.last_gen[i] = g;
            }
            self.seen[i] = a.reports.len();
        }
        Ok(())
    }
}

/// Totals of one schedule.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    /// Writes `Written`.
    pub written: usize,
    /// Snapshots reported.
    pub snapshots: usize,
    /// `NotReady` reported.
    pub not_ready: usize,
}

/// The settings of [`run`]: every fault for 1.5 s, then 3 s of quiet.
pub fn config(seed: u64, clients: usize) -> SimConfig {
    let mut config = SimConfig::with_faults(seed, clients);
    config.duration = Duration::from_millis(4500);
    config.quiet = Duration::from_secs(3);
    config
}

/// One schedule with every fault ([`config`]): readers in `mode`, the writer as
/// `writers` says.
pub fn run(
    seed: u64,
    clients: usize,
    mode: ConfigMode,
    writers: Writers,
) -> Result<Totals, String> {
    let mut config = config(seed, clients);
    config.trace = false;
    run_with(config.clone(), mode, writers).or_else(|_| {
        config.trace = true;
        run_with(config, mode, writers)
    })
}

/// One schedule with the given settings; with [`Writers::Naive`] (ready-node readers
/// only) the server's check is off, so that only the readers' check can catch it.
pub fn run_with(config: SimConfig, mode: ConfigMode, writers: Writers) -> Result<Totals, String> {
    let seed = config.seed;
    let stop_at = Instant::ZERO + config.duration.saturating_sub(config.quiet);
    let close_at = Instant::ZERO + config.duration.saturating_sub(Duration::from_millis(200));
    let mut sim = Simulation::new(config, |i| ConfigUser {
        writer: i == 0,
        mode,
        writers,
        rng: (((seed << 8) | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D)
            | 1,
        stop_at,
        close_at,
        idle_until: Instant::ZERO,
        now: Instant::ZERO,
        gen: 0,
        write: None,
        naive_left: Vec::new(),
        last_written: false,
        reader: None,
        closed: false,
        lives: 0,
        reports: Vec::new(),
        at_close: None,
        written: 0,
        log: Vec::new(),
    });
    let mut checker = Checker::new(mode);
    checker.server_check = writers != Writers::Naive;
    sim.run(|v| checker.check(v))?;
    let mut problems = Vec::new();
    let server: Vec<(Option<Bytes>, Option<i32>)> = PATHS
        .iter()
        .map(|p| match sim.server().node(p) {
            Some((d, s)) => (Some(d), Some(s.version)),
            None => (None, None),
        })
        .collect();
    let mut t = Totals::default();
    for (i, a) in sim.actors().iter().enumerate() {
        t.written += a.written;
        t.snapshots += a.reports.iter().filter(|r| r.is_some()).count();
        t.not_ready += a.reports.iter().filter(|r| r.is_none()).count();
        let tail = || a.log.iter().rev().take(6).collect::<Vec<_>>();
        match &a.at_close {
            None => problems.push(format!("client {i}: never closed")),
            Some(AtClose::Writer { busy: true }) => problems.push(format!(
                "writer: no complete write when faults had long stopped: {:?}",
                tail()
            )),
            Some(AtClose::Writer { busy: false }) => {}
            Some(AtClose::Reader(None)) => problems.push(format!("reader {i}: no report at all")),
            Some(AtClose::Reader(Some(last))) => {
                let held: Option<Vec<(Option<Bytes>, Option<i32>)>> = last.as_ref().map(|s| {
                    s.values
                        .iter()
                        .zip(&s.versions)
                        .map(|((_, v), n)| (v.clone(), *n))
                        .collect()
                });
                if held.as_ref() != Some(&server) {
                    problems.push(format!(
                        "reader {i} last reported {held:?}, the server has {server:?}: {:?}",
                        tail()
                    ));
                }
            }
        }
    }
    if mode == ConfigMode::ReadyNode && !sim.server().exists(READY) {
        problems.push(String::from("ready missing at the end"));
    }
    problems.extend(sim.still_hosted());
    super::verdict(
        &format!("seed {seed}: broken once faults stopped"),
        &problems,
    )?;
    Ok(t)
}
