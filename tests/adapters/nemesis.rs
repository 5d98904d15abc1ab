//! Workloads under the nemesis (issue 41): a real three-server ensemble behind proxies,
//! partitions, one-way links, delays and paused client processes drawn from a seed
//! (`zk_recipes_testing::nemesis`), and every recipe's history checked.
//!
//! Each client is a process of its own (so that it can be paused): this binary run as
//! `nemesis_clients::{tokio,blocking}_form::client_process` (`nemesis_clients.rs`),
//! each workload's clients alternating between the two adapters, or Apache Curator
//! 5.4's `InterProcessMutex` and `LeaderLatch` (`CuratorNemesis.java`, side by side).
//!
//! * `the_short_run_holds_under_the_nemesis`: in the test command, one seed (41; set
//!   `NEMESIS_SEED` to replay another), every workload at once.
//! * `soak` (ignored; `scripts/soak nemesis`): seeds from `NEMESIS_FIRST_SEED` (1) for
//!   `NEMESIS_SOAK_SECS` (1800), each seed once with our clients and once with Curator's
//!   lock and election clients under the same schedule (`NEMESIS_ONLY=ours` or
//!   `curator` for one side); prints the summary table.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zk_recipes_testing::nemesis::{
    now_micros, run_workloads, ClientSpec, Event, Fault, Outcome, Pick, Program, RunOptions,
    WorkloadKind, WorkloadSpec,
};
use zk_recipes_testing::{CuratorProgram, Nemesis, NemesisOptions};

/// The clients' session timeout: well above the ensemble's `syncLimit` × `tickTime`
/// (2 s), for which a server cut from the leader still answers its clients' pings.
const SESSION: Duration = Duration::from_secs(5);

/// A client process's parameters (the runner's environment).
pub struct Env {
    pub role: String,
    pub connect: String,
    pub path: String,
    pub session: Duration,
    pub seed: u64,
    pub client: usize,
    pub max: u32,
}

impl Env {
    /// The parameters, if this process is a client.
    pub fn from_env() -> Option<Env> {
        let var = |k: &str| std::env::var(k).ok();
        Some(Env {
            role: var("NEMESIS_ROLE")?,
            connect: var("NEMESIS_CONNECT")?,
            path: var("NEMESIS_PATH")?,
            session: Duration::from_millis(var("NEMESIS_SESSION_MS")?.parse().ok()?),
            seed: var("NEMESIS_SEED")?.parse().ok()?,
            client: var("NEMESIS_CLIENT")?.parse().ok()?,
            max: var("NEMESIS_MAX")?.parse().ok()?,
        })
    }
}

/// Reports an event to the runner.
pub fn report(e: Event) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", e.line());
    let _ = out.flush();
}

/// Reports an error the faults do not explain (the library promises to retry the
/// others or to end with a final event): the run fails on it.
pub fn unexpected(op: &str, e: &zk_recipes::client::Error) {
    use zk_recipes::client::Error;
    use zk_recipes::proto::ErrorCode;
    let explained = matches!(
        e,
        Error::ConnectionLoss | Error::SessionExpired | Error::Timeout | Error::Unreachable(_)
    ) || matches!(
        e.code(),
        Some(ErrorCode::ConnectionLoss | ErrorCode::SessionExpired | ErrorCode::OperationTimeout)
    );
    if !explained {
        report(Event::Error(format!("{op}: {e:?}")));
    }
}

/// The runner's side of a client: `stop`, and the fenced store's verdicts.
pub struct Control {
    stop: Arc<AtomicBool>,
    verdicts: Mutex<mpsc::Receiver<bool>>,
}

impl Control {
    /// Reads the runner's lines on a thread of its own.
    pub fn start() -> Control {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, verdicts) = mpsc::channel();
        let s = stop.clone();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                match line.trim() {
                    "stop" => s.store(true, Ordering::SeqCst),
                    "ok" => {
                        let _ = tx.send(true);
                    }
                    "refused" => {
                        let _ = tx.send(false);
                    }
                    _ => {}
                }
            }
        });
        Control {
            stop,
            verdicts: Mutex::new(verdicts),
        }
    }

    /// Told to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The fenced write of an act checked at `checked`, and its end.
    pub fn act(&self, tenure: &str, token: i64, checked: i64) {
        report(Event::Act {
            tenure: tenure.into(),
            token,
            at: checked,
        });
        let verdict = self
            .verdicts
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(60));
        if verdict.is_err() {
            report(Event::Error("no verdict from the fenced store".into()));
        }
        report(Event::Acted {
            tenure: tenure.into(),
            at: now_micros(),
        });
    }
}

/// This binary as a client of the given form.
fn ours(form: &'static str) -> Program {
    Arc::new(move || {
        let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
        cmd.args([
            "--ignored",
            "--exact",
            &format!("nemesis_clients::{form}_form::client_process"),
            "--nocapture",
            "--test-threads=1",
            "-q",
        ]);
        cmd
    })
}

/// Curator's program (`CuratorNemesis.java`, compiled once per process).
fn curator() -> Program {
    static COMPILED: std::sync::OnceLock<CuratorProgram> = std::sync::OnceLock::new();
    let java = COMPILED.get_or_init(|| {
        CuratorProgram::compile(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tokio/tests/curator/CuratorNemesis.java"),
        )
    });
    let cp = java.classpath.clone();
    Arc::new(move || {
        let mut cmd = Command::new("java");
        cmd.args([
            "-Xmx64m",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            &cp,
            "CuratorNemesis",
        ]);
        cmd
    })
}

fn clients(
    name: &str,
    roles: &[&'static str],
    program: impl Fn(usize) -> (Program, &'static str),
) -> Vec<ClientSpec> {
    roles
        .iter()
        .enumerate()
        .map(|(i, role)| {
            let (p, form) = program(i);
            ClientSpec {
                name: format!("{name}-{i} {role} ({form})"),
                role,
                program: p,
            }
        })
        .collect()
}

/// Every workload, the clients of each alternating between the adapters.
fn our_workloads(run: &str, seed: u64) -> Vec<WorkloadSpec> {
    let form = move |i: usize| {
        if (i as u64 + seed) % 2 == 0 {
            (ours("tokio"), "tokio")
        } else {
            (ours("blocking"), "blocking")
        }
    };
    let w = |name: &str, kind: WorkloadKind, roles: &[&'static str]| WorkloadSpec {
        name: name.into(),
        kind,
        path: format!("/{run}/{name}"),
        clients: clients(name, roles, form),
    };
    vec![
        w("lock", WorkloadKind::Lock, &["lock"; 3]),
        w("election", WorkloadKind::Election, &["election"; 3]),
        w(
            "semaphore",
            WorkloadKind::Semaphore { max: 2 },
            &["semaphore"; 3],
        ),
        w("counter", WorkloadKind::Counter, &["counter"; 2]),
        w(
            "queue",
            WorkloadKind::Queue { claims: false },
            &["producer", "producer", "consumer"],
        ),
        w(
            "claims",
            WorkloadKind::Queue { claims: true },
            &["producer", "producer", "claimer", "claimer"],
        ),
    ]
}

/// The lock and the election with Curator's clients.
fn curator_workloads(run: &str) -> Vec<WorkloadSpec> {
    let java = |_| (curator(), "Curator");
    vec![
        WorkloadSpec {
            name: "lock".into(),
            kind: WorkloadKind::Lock,
            path: format!("/{run}/lock"),
            clients: clients("curator-lock", &["lock"; 3], java),
        },
        WorkloadSpec {
            name: "election".into(),
            kind: WorkloadKind::Election,
            path: format!("/{run}/election"),
            clients: clients("curator-election", &["election"; 3], java),
        },
    ]
}

fn options(seed: u64, faults: Duration) -> RunOptions {
    RunOptions {
        seed,
        session_timeout: SESSION,
        faults,
        // The two faults the issue names, each for a lock holder and a leader: a holder
        // left with a server that cannot serve while the majority moves on, and a
        // holder paused past its session timeout.
        first: vec![
            vec![
                Fault::Stranded {
                    client: Pick::HolderIn("lock"),
                },
                Fault::Pause {
                    client: Pick::HolderIn("election"),
                },
            ],
            vec![
                Fault::Pause {
                    client: Pick::HolderIn("lock"),
                },
                Fault::Stranded {
                    client: Pick::HolderIn("election"),
                },
            ],
        ],
        settle: SESSION + Duration::from_secs(1),
        stop_within: Duration::from_secs(40),
    }
}

fn start() -> Nemesis {
    Nemesis::start(NemesisOptions::default()).expect("an ensemble behind the nemesis")
}

#[test]
fn the_short_run_holds_under_the_nemesis() {
    let seed = std::env::var("NEMESIS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(41);
    let nemesis = start();
    let outcome = run_workloads(
        &nemesis,
        &our_workloads(&format!("short-{seed}"), seed),
        &options(seed, Duration::from_secs(20)),
    );
    println!("{outcome}");
    assert!(outcome.passed(), "{outcome}");
}

/// The soak's totals.
#[derive(Default)]
struct Totals {
    runs: usize,
    faults: BTreeMap<String, usize>,
    /// workload -> (runs, ops, violations, counts)
    workloads: BTreeMap<String, (usize, usize, usize, BTreeMap<String, usize>)>,
    failed_seeds: Vec<u64>,
}

impl Totals {
    fn add(&mut self, o: &Outcome) {
        self.runs += 1;
        for (k, n) in o.faults_by_kind() {
            *self.faults.entry(k).or_default() += n;
        }
        for w in &o.workloads {
            let e = self.workloads.entry(w.name.clone()).or_default();
            e.0 += 1;
            e.1 += w.check.ops;
            // The checker lists the first 20 of a run and counts the rest; the line
            // naming the file the history went to is no violation of its own.
            let file = |v: &&String| v.starts_with("history written to");
            let listed = w.check.violations.iter().filter(|v| !file(v)).count();
            let unlisted = w.check.counts.get("violations not listed");
            e.2 += listed + unlisted.copied().unwrap_or(0);
            for (k, n) in &w.check.counts {
                *e.3.entry(k.clone()).or_default() += n;
            }
        }
        if !o.passed() {
            self.failed_seeds.push(o.seed);
        }
    }

    fn table(&self, title: &str) -> String {
        let mut s = format!(
            "### {title}: {} runs\n\n| fault | injected |\n|---|---|\n",
            self.runs
        );
        for (k, n) in &self.faults {
            s += &format!("| {k} | {n} |\n");
        }
        s += "\n| workload | runs | operations checked | violations | counts |\n|---|---|---|---|---|\n";
        for (w, (runs, ops, v, counts)) in &self.workloads {
            let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            s += &format!("| {w} | {runs} | {ops} | {v} | {} |\n", counts.join("; "));
        }
        if !self.failed_seeds.is_empty() {
            s += &format!("\nfailed seeds: {:?}\n", self.failed_seeds);
        }
        s
    }
}

#[test]
#[ignore = "the long run: scripts/soak nemesis"]
fn soak() {
    let var = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let secs = var("NEMESIS_SOAK_SECS", 1800);
    let first = var("NEMESIS_FIRST_SEED", 1);
    let faults = Duration::from_secs(var("NEMESIS_FAULT_SECS", 45));
    let started = Instant::now();
    let (mut ours_total, mut curator_total) = (Totals::default(), Totals::default());
    let mut seed = first;
    while started.elapsed() < Duration::from_secs(secs) {
        let only = std::env::var("NEMESIS_ONLY").unwrap_or_default();
        for with_curator in [false, true] {
            if (with_curator && only == "ours") || (!with_curator && only == "curator") {
                continue;
            }
            let nemesis = start();
            let run = format!("soak-{seed}");
            let workloads = if with_curator {
                curator_workloads(&run)
            } else {
                our_workloads(&run, seed)
            };
            let outcome = run_workloads(&nemesis, &workloads, &options(seed, faults));
            let who = if with_curator {
                "Curator"
            } else {
                "zk-recipes"
            };
            if outcome.passed() {
                let per: Vec<String> = outcome
                    .workloads
                    .iter()
                    .map(|w| format!("{} {} ops", w.name, w.check.ops))
                    .collect();
                println!(
                    "{who} seed {seed}: passed in {:.0} s ({} faults; {})",
                    outcome.took.as_secs_f64(),
                    outcome.applied.len(),
                    per.join(", ")
                );
            } else {
                println!("{who} {outcome}");
            }
            if with_curator {
                curator_total.add(&outcome);
            } else {
                ours_total.add(&outcome);
            }
        }
        seed += 1;
    }
    let summary = format!(
        "nemesis soak: seeds {first}..={}, {:.0} min, faults {} s per run, session timeout {} s\n\n{}\n{}",
        seed - 1,
        started.elapsed().as_secs_f64() / 60.0,
        faults.as_secs(),
        SESSION.as_secs(),
        ours_total.table("zk-recipes (both adapters)"),
        curator_total.table("Apache Curator 5.4 (lock and election)")
    );
    println!("{summary}");
    if let Ok(path) = std::env::var("NEMESIS_REPORT") {
        let _ = std::fs::write(path, &summary);
    }
    assert!(ours_total.failed_seeds.is_empty(), "{summary}");
}
