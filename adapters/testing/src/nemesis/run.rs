//! Running workloads under the nemesis: one process per client, a fenced store per
//! lock-like workload, the schedule, the stop, and the checks.
//!
//! **Client processes.** Each client is a process of its own (so that the nemesis can
//! pause it), started from a [`Command`] the caller gives (a test binary running
//! itself as a client, a Java program) with its parameters in the environment:
//!
//! | variable | value |
//! |---|---|
//! | `NEMESIS_ROLE` | `lock`, `election`, `semaphore`, `counter`, `producer`, `consumer` (takes at most once) or `claimer` (takes with claims) |
//! | `NEMESIS_CONNECT` | the connect string: the client's own proxies, one per server |
//! | `NEMESIS_PATH` | the recipe's path |
//! | `NEMESIS_SESSION_MS` | the session timeout to ask for |
//! | `NEMESIS_SEED` | the seed of the client's own draws (waits, how many acts) |
//! | `NEMESIS_CLIENT` | its number (items are named `p<client>-<n>`) |
//! | `NEMESIS_MAX` | a semaphore's number of leases |
//!
//! It reports on its standard output (`history`'s lines), and reads on its standard
//! input the fenced store's verdict after each `act` (`ok` or `refused`) and, at the
//! end, `stop`: it then ends what it is doing (a wait ends, a hold is released, a
//! consumer drains the queue), closes its session and reports `done`.
//!
//! **A run** ([`run_workloads`]): the clients start and report `ready`; the schedule
//! runs; every link heals and every client is thawed; after `settle` (each workload
//! must make progress then) the clients are told to stop — producers first, then
//! everyone else, consumers last — and each must report `done` within `stop_within`
//! (every attempt ends once faults stop); then nothing may be left under the recipes'
//! paths (waiting up to the session timeout for sessions whose close was lost), and
//! the checkers judge each workload's history.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zk_recipes::proto::{PathWatch, Request, Response};

use super::check::{check_counter, check_exclusive, check_leases, check_queue, CheckReport};
use super::history::{now_micros, Event, FencedStore, History, Line, Micros, StoreWrite};
use super::schedule::{by_kind, Applied, Fault, Schedule, ScheduleOptions, Targets};
use super::{lock, Nemesis};
use crate::RawClient;

/// What a workload runs, and so how it is checked and which paths must end empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// An exclusive lock at `path`: one holder at a time, fenced.
    Lock,
    /// A leader election at `path`: one leader at a time, fenced.
    Election,
    /// A semaphore of `max` leases at `path`.
    Semaphore {
        /// Leases.
        max: usize,
    },
    /// A counter (8-byte big-endian, Curator's `DistributedAtomicLong` format) at
    /// `path`, incremented by one.
    Counter,
    /// A queue at `path`: producers and consumers (`claims`: consumers claim, at least
    /// once; else they take at most once, and with one consumer each producer's items
    /// come in order).
    Queue {
        /// Consumers claim.
        claims: bool,
    },
}

/// A client's program: makes the command that runs it (the runner adds the
/// environment and the pipes).
pub type Program = Arc<dyn Fn() -> Command + Send + Sync>;

/// One client of a workload.
#[derive(Clone)]
pub struct ClientSpec {
    /// Its name in reports (say `lock-0 (tokio)`).
    pub name: String,
    /// `NEMESIS_ROLE`.
    pub role: &'static str,
    /// What runs it.
    pub program: Program,
}

/// One workload: a recipe at a path and its clients.
#[derive(Clone)]
pub struct WorkloadSpec {
    /// Its name in reports.
    pub name: String,
    /// The recipe.
    pub kind: WorkloadKind,
    /// Its path (each workload its own).
    pub path: String,
    /// Its clients.
    pub clients: Vec<ClientSpec>,
}

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The seed of the schedule (clients get seeds derived from it).
    pub seed: u64,
    /// The clients' session timeout.
    pub session_timeout: Duration,
    /// How long the faults go on.
    pub faults: Duration,
    /// Steps placed first in the schedule (each a long one, its faults together).
    pub first: Vec<Vec<Fault>>,
    /// The quiet time after the faults, before the clients are told to stop: each
    /// workload must make progress in it.
    pub settle: Duration,
    /// Each client must report `done` within this once told to stop.
    pub stop_within: Duration,
}

/// One workload's result.
#[derive(Clone, Debug)]
pub struct WorkloadReport {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: WorkloadKind,
    /// The checker's report, with the runner's own findings (a client that did not
    /// finish, nodes left behind, no progress after the faults) among its violations.
    pub check: CheckReport,
    /// Operations completed after the faults stopped.
    pub ops_after_faults: usize,
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// The faults as applied.
    pub applied: Vec<Applied>,
    /// Each workload's result.
    pub workloads: Vec<WorkloadReport>,
    /// How long the whole run took.
    pub took: Duration,
    /// The clients' error output, for a failed run.
    pub stderr: Vec<(String, String)>,
}

impl Outcome {
    /// Whether every workload passed.
    pub fn passed(&self) -> bool {
        self.workloads.iter().all(|w| w.check.passed())
    }

    /// The faults applied, counted by kind.
    pub fn faults_by_kind(&self) -> BTreeMap<String, usize> {
        by_kind(&self.applied)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "nemesis run, seed {} ({:.1} s): {}",
            self.seed,
            self.took.as_secs_f64(),
            if self.passed() { "passed" } else { "FAILED" }
        )?;
        for w in &self.workloads {
            writeln!(
                f,
                "  {} ({} ops after the faults): {}",
                w.name, w.ops_after_faults, w.check
            )?;
        }
        writeln!(f, "  schedule (replay with this seed):")?;
        for a in &self.applied {
            writeln!(f, "    {a}")?;
        }
        if !self.passed() {
            for (name, err) in &self.stderr {
                if !err.trim().is_empty() {
                    writeln!(f, "  stderr of {name}:\n{err}")?;
                }
            }
        }
        Ok(())
    }
}

/// A client process as the runner sees it.
struct Proc {
    client: usize,
    workload: usize,
    name: String,
    role: &'static str,
    child: Child,
    stdin: Arc<Mutex<ChildStdin>>,
    stderr: Arc<Mutex<String>>,
    state: Arc<Mutex<ProcState>>,
}

#[derive(Default)]
struct ProcState {
    ready: bool,
    done: bool,
    /// Holds reported and not ended.
    holding: HashSet<String>,
}

struct Shared {
    histories: Vec<Mutex<History>>,
    stores: Vec<Mutex<FencedStore>>,
}

struct Holders<'a> {
    procs: &'a [Proc],
    workloads: &'a [WorkloadSpec],
    turn: std::sync::atomic::AtomicUsize,
}

impl Targets for Holders<'_> {
    fn clients(&self) -> Vec<usize> {
        self.procs.iter().map(|p| p.client).collect()
    }

    /// One holder per workload (the first found from a rotating start), so that a
    /// fault picks each workload that has holders equally often whatever its number
    /// of holders.
    fn holders(&self) -> Vec<usize> {
        let n = self.procs.len().max(1);
        let start = self.turn.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % n;
        let mut seen = HashSet::new();
        (0..n)
            .map(|k| &self.procs[(start + k) % n])
            .filter(|p| !lock(&p.state).holding.is_empty() && seen.insert(p.workload))
            .map(|p| p.client)
            .collect()
    }

    fn of_workload(&self, name: &str) -> (Vec<usize>, Vec<usize>) {
        let mine: Vec<&Proc> = self
            .procs
            .iter()
            .filter(|p| self.workloads[p.workload].name == name)
            .collect();
        let holding = mine
            .iter()
            .filter(|p| !lock(&p.state).holding.is_empty())
            .map(|p| p.client)
            .collect();
        (mine.iter().map(|p| p.client).collect(), holding)
    }
}

fn tail(s: &str, n: usize) -> String {
    let start = s.len().saturating_sub(n);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    s[start..].to_string()
}

/// Reads one client's reports into its workload's history, answering its acts.
fn read_reports(
    client: usize,
    workload: usize,
    out: impl Read,
    stdin: Arc<Mutex<ChildStdin>>,
    state: Arc<Mutex<ProcState>>,
    shared: Arc<Shared>,
) {
    for raw in BufReader::new(out).lines() {
        let Ok(raw) = raw else { break };
        let event = match Event::parse(&raw) {
            None => continue,
            Some(Ok(e)) => e,
            Some(Err(e)) => Event::Error(format!("malformed report: {e}")),
        };
        match &event {
            Event::Ready => lock(&state).ready = true,
            Event::Done { .. } => lock(&state).done = true,
            Event::Held { tenure, .. } => {
                lock(&state).holding.insert(tenure.clone());
            }
            Event::Ended { tenure, .. } => {
                lock(&state).holding.remove(tenure);
            }
            _ => {}
        }
        // An act waits for the store's verdict; the history gets the act first.
        let verdict = if let Event::Act { tenure, token, .. } = &event {
            let accepted = lock(&shared.stores[workload]).write(*token);
            Some(StoreWrite {
                client,
                tenure: tenure.clone(),
                token: *token,
                at: now_micros(),
                accepted,
            })
        } else {
            None
        };
        {
            let mut h = lock(&shared.histories[workload]);
            h.lines.push(Line { client, event });
            if let Some(w) = &verdict {
                h.store.push(w.clone());
            }
        }
        if let Some(w) = verdict {
            let answer = if w.accepted { "ok\n" } else { "refused\n" };
            let _ = lock(&stdin).write_all(answer.as_bytes());
            let _ = lock(&stdin).flush();
        }
    }
}

fn spawn_client(
    nemesis: &Nemesis,
    spec: &ClientSpec,
    workload: usize,
    w: &WorkloadSpec,
    opts: &RunOptions,
    shared: &Arc<Shared>,
) -> io::Result<Proc> {
    let (client, connect) = nemesis.add_client(&spec.name)?;
    let mut cmd = (spec.program)();
    cmd.env("NEMESIS_ROLE", spec.role)
        .env("NEMESIS_CONNECT", &connect)
        .env("NEMESIS_PATH", &w.path)
        .env(
            "NEMESIS_SESSION_MS",
            opts.session_timeout.as_millis().to_string(),
        )
        .env(
            "NEMESIS_SEED",
            (opts.seed.wrapping_mul(1000).wrapping_add(client as u64)).to_string(),
        )
        .env("NEMESIS_CLIENT", client.to_string())
        .env(
            "NEMESIS_MAX",
            match w.kind {
                WorkloadKind::Semaphore { max } => max.to_string(),
                _ => "1".into(),
            },
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    nemesis.set_pid(client, child.id());
    let stdin = Arc::new(Mutex::new(child.stdin.take().expect("piped stdin")));
    let state = Arc::new(Mutex::new(ProcState::default()));
    let stderr = Arc::new(Mutex::new(String::new()));
    let out = child.stdout.take().expect("piped stdout");
    let (i, st, sh) = (stdin.clone(), state.clone(), shared.clone());
    thread::spawn(move || read_reports(client, workload, out, i, st, sh));
    let mut err = child.stderr.take().expect("piped stderr");
    let e = stderr.clone();
    thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut s = lock(&e);
            s.push_str(&String::from_utf8_lossy(&buf[..n]));
            if s.len() > 64 * 1024 {
                *s = tail(&s, 32 * 1024);
            }
        }
    });
    Ok(Proc {
        client,
        workload,
        name: spec.name.clone(),
        role: spec.role,
        child,
        stdin,
        stderr,
        state,
    })
}

/// Waits until `done(p)` holds for every process in `which`, at most `within`; the
/// names of those that did not get there.
fn wait_all(
    procs: &[Proc],
    which: &[usize],
    within: Duration,
    done: fn(&ProcState) -> bool,
) -> Vec<usize> {
    let deadline = Instant::now() + within;
    loop {
        let late: Vec<usize> = which
            .iter()
            .copied()
            .filter(|&i| !done(&lock(&procs[i].state)))
            .collect();
        if late.is_empty() || Instant::now() > deadline {
            return late;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// The paths that must end empty for a workload at `path`.
fn must_be_empty(kind: &WorkloadKind, path: &str) -> Vec<String> {
    match kind {
        WorkloadKind::Lock => vec![path.into()],
        WorkloadKind::Election => vec![path.into(), format!("{path}-leader")],
        WorkloadKind::Semaphore { .. } => vec![format!("{path}/locks"), format!("{path}/leases")],
        WorkloadKind::Counter => vec![],
        WorkloadKind::Queue { .. } => vec![path.into(), format!("{path}-meta")],
    }
}

/// A direct session to the ensemble (around the proxies) for the final reads.
fn direct(nemesis: &Nemesis) -> io::Result<RawClient> {
    let mut last = io::Error::other("no server");
    for i in 0..3 {
        match RawClient::connect(nemesis.ensemble().addr(i), 10_000) {
            Ok(c) => return Ok(c),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The children of `path` (none if it does not exist).
fn children(c: &mut RawClient, path: &str) -> io::Result<Vec<String>> {
    let (h, r) = c.call(&Request::GetChildren(PathWatch {
        path: path.into(),
        watch: false,
    }))?;
    match r {
        Some(Response::Children(kids)) => Ok(kids),
        _ if h.err == -101 => Ok(Vec::new()),
        other => Err(io::Error::other(format!(
            "getChildren {path}: {} {other:?}",
            h.err
        ))),
    }
}

/// The counter's value at `path` (missing or empty: 0).
fn counter_value(c: &mut RawClient, path: &str) -> io::Result<i64> {
    let (h, r) = c.call(&Request::Sync(zk_recipes::proto::PathRequest {
        path: path.into(),
    }))?;
    let _ = (h, r);
    let (h, r) = c.call(&Request::GetData(PathWatch {
        path: path.into(),
        watch: false,
    }))?;
    match r {
        Some(Response::Data { data, .. }) => Ok(decode_counter(&data)),
        _ if h.err == -101 => Ok(0),
        other => Err(io::Error::other(format!(
            "getData {path}: {} {other:?}",
            h.err
        ))),
    }
}

fn decode_counter(data: &Bytes) -> i64 {
    match data.len() {
        8 => i64::from_be_bytes(data[..].try_into().expect("8 bytes")),
        4 => i32::from_be_bytes(data[..].try_into().expect("4 bytes")) as i64,
        _ => 0,
    }
}

fn op_time(e: &Event) -> Option<Micros> {
    match e {
        Event::Acted { at, .. }
        | Event::Take { at, .. }
        | Event::Claim { at, .. }
        | Event::Complete { at, .. } => Some(*at),
        Event::Add {
            to,
            outcome: Some(Some(_)),
            ..
        }
        | Event::Put {
            to,
            outcome: Some(true),
            ..
        } => Some(*to),
        _ => None,
    }
}

/// Runs `workloads` under a schedule drawn from `opts.seed` (module docs) and checks
/// them. Panics only if a client cannot be started.
pub fn run_workloads(nemesis: &Nemesis, workloads: &[WorkloadSpec], opts: &RunOptions) -> Outcome {
    let started = Instant::now();
    let shared = Arc::new(Shared {
        histories: workloads.iter().map(|_| Mutex::default()).collect(),
        stores: workloads
            .iter()
            .map(|w| {
                Mutex::new(FencedStore::new(matches!(
                    w.kind,
                    WorkloadKind::Lock | WorkloadKind::Election
                )))
            })
            .collect(),
    });
    let mut procs = Vec::new();
    for (wi, w) in workloads.iter().enumerate() {
        for spec in &w.clients {
            procs.push(
                spawn_client(nemesis, spec, wi, w, opts, &shared)
                    .unwrap_or_else(|e| panic!("start client {}: {e}", spec.name)),
            );
        }
    }
    let mut findings: Vec<Vec<String>> = vec![Vec::new(); workloads.len()];
    let all: Vec<usize> = (0..procs.len()).collect();
    for i in wait_all(&procs, &all, Duration::from_secs(60), |s| s.ready) {
        findings[procs[i].workload].push(format!("{} never reported ready", procs[i].name));
    }

    // A moment of quiet first, so that the faults find holders and waiters.
    thread::sleep(Duration::from_secs(2));
    let schedule = Schedule::random(
        opts.seed,
        &ScheduleOptions {
            length: opts.faults,
            session_timeout: opts.session_timeout,
            first: opts.first.clone(),
        },
    );
    let stop = AtomicBool::new(false);
    let applied = nemesis.run_schedule(
        &schedule,
        opts.session_timeout,
        &Holders {
            procs: &procs,
            workloads,
            turn: Default::default(),
        },
        &stop,
    );
    let faults_end = now_micros();
    thread::sleep(opts.settle);

    // Stop: producers first (so that consumers can drain), consumers last.
    let phases: [&[&str]; 3] = [
        &["producer"],
        &["lock", "election", "semaphore", "counter"],
        &["consumer", "claimer"],
    ];
    for roles in phases {
        let which: Vec<usize> = (0..procs.len())
            .filter(|&i| roles.contains(&procs[i].role))
            .collect();
        for &i in &which {
            let mut stdin = lock(&procs[i].stdin);
            let _ = stdin.write_all(b"stop\n");
            let _ = stdin.flush();
        }
        for i in wait_all(&procs, &which, opts.stop_within, |s| s.done) {
            let p = &procs[i];
            let last: Vec<String> = {
                let h = lock(&shared.histories[p.workload]);
                let mine: Vec<&Line> = h.lines.iter().filter(|l| l.client == p.client).collect();
                mine[mine.len().saturating_sub(6)..]
                    .iter()
                    .map(|l| l.event.line())
                    .collect()
            };
            findings[p.workload].push(format!(
                "{} did not finish within {:.0} s of being told to stop (faults over); its last reports: {last:?}",
                p.name,
                opts.stop_within.as_secs_f64()
            ));
        }
    }
    for p in &mut procs {
        let deadline = Instant::now() + Duration::from_secs(5);
        while p.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let _ = p.child.kill();
        let _ = p.child.wait();
    }

    // Nothing left behind (sessions whose close was lost end within their timeout),
    // and the counters' final values.
    let mut finals: HashMap<usize, i64> = HashMap::new();
    match direct(nemesis) {
        Ok(mut c) => {
            for (wi, w) in workloads.iter().enumerate() {
                let deadline = Instant::now() + opts.session_timeout + Duration::from_secs(3);
                for path in must_be_empty(&w.kind, &w.path) {
                    loop {
                        match children(&mut c, &path) {
                            Ok(kids) if kids.is_empty() => break,
                            Ok(kids) if Instant::now() > deadline => {
                                findings[wi].push(format!("left behind in {path}: {kids:?}"));
                                break;
                            }
                            Err(e) => {
                                findings[wi].push(format!("could not list {path}: {e}"));
                                break;
                            }
                            Ok(_) => thread::sleep(Duration::from_millis(200)),
                        }
                    }
                }
                if w.kind == WorkloadKind::Counter {
                    match counter_value(&mut c, &w.path) {
                        Ok(v) => {
                            finals.insert(wi, v);
                        }
                        Err(e) => findings[wi].push(format!("could not read the counter: {e}")),
                    }
                }
            }
        }
        Err(e) => {
            for f in &mut findings {
                f.push(format!("no direct session for the final checks: {e}"));
            }
        }
    }

    let pauses = nemesis.pauses();
    let mut reports = Vec::new();
    for (wi, w) in workloads.iter().enumerate() {
        let mut h = lock(&shared.histories[wi]).clone();
        let mine: HashSet<usize> = procs
            .iter()
            .filter(|p| p.workload == wi)
            .map(|p| p.client)
            .collect();
        h.pauses = pauses
            .iter()
            .filter(|p| mine.contains(&p.client))
            .copied()
            .collect();
        let mut check = match w.kind {
            WorkloadKind::Lock | WorkloadKind::Election => {
                check_exclusive(&h, opts.session_timeout)
            }
            WorkloadKind::Semaphore { max } => check_leases(&h, max, opts.session_timeout),
            WorkloadKind::Counter => check_counter(&h, finals.get(&wi).copied().unwrap_or(-1)),
            WorkloadKind::Queue { claims } => {
                let consumers = w.clients.iter().filter(|c| c.role == "consumer").count();
                check_queue(&h, claims, !claims && consumers == 1)
            }
        };
        let ops_after_faults = h
            .lines
            .iter()
            .filter(|l| op_time(&l.event).is_some_and(|t| t > faults_end))
            .count();
        if ops_after_faults == 0 {
            check.violations.push(format!(
                "no operation completed in the {:.1} s after the faults stopped",
                opts.settle.as_secs_f64()
            ));
        }
        for l in &h.lines {
            if let Event::Error(text) = &l.event {
                check.violations.push(format!(
                    "client {} reported: {text}",
                    nemesis.client_name(l.client)
                ));
            }
        }
        check.violations.append(&mut findings[wi]);
        if !check.passed() || std::env::var_os("NEMESIS_DUMP").is_some() {
            // The whole history, for the post-mortem (NEMESIS_DUMP: always).
            let path = std::env::temp_dir().join(format!("nemesis-{}-{}.log", opts.seed, w.name));
            let mut text: String = h
                .lines
                .iter()
                .map(|l| format!("{} {}\n", l.client, l.event.line()))
                .collect();
            for p in &h.pauses {
                text += &format!("pause {} {} {}\n", p.client, p.from, p.to);
            }
            for s in &h.store {
                text += &format!(
                    "store {} {} {} {} {}\n",
                    s.client, s.tenure, s.token, s.at, s.accepted
                );
            }
            if std::fs::write(&path, text).is_ok() && !check.passed() {
                check
                    .violations
                    .push(format!("history written to {}", path.display()));
            }
        }
        reports.push(WorkloadReport {
            name: w.name.clone(),
            kind: w.kind.clone(),
            check,
            ops_after_faults,
        });
    }
    Outcome {
        seed: opts.seed,
        applied,
        workloads: reports,
        took: started.elapsed(),
        stderr: procs
            .iter()
            .map(|p| (p.name.clone(), tail(&lock(&p.stderr), 4000)))
            .collect(),
    }
}
