//! Lock benchmark against a real ZooKeeper 3.8, ours next to Apache Curator 5.4's
//! `InterProcessMutex`, in one run against one server: `cargo bench --bench locks`.
//!
//! The server's data dir is on disk (a fresh dir under the system temp dir, or under
//! `LOCKS_BENCH_DIR` if set), so every lock node create and delete is an fsync'd
//! transaction; the bench prints where the data is and the file system it is on.
//!
//! Measured on the same server, never two clients at the same time:
//!
//! * uncontended acquire + release, on one session: ours with and without the own-node
//!   watch (`/bench/uncontended`), Curator (`/bench/curator-uncontended`,
//!   `benches/curator/CuratorLockBench.java`); median cycle time, requests per cycle;
//! * 8 and 64 contenders, each on its own session: ours (tokio adapter, one task per
//!   contender, `/bench/contended`) with and without the own-node watch, and Curator
//!   (one `CuratorFramework` and one thread per contender, `/bench/curator-contended`):
//!   acquisitions per second, handoff median (the holder's release call → the next
//!   holder's acquisition returning), requests per acquisition, watchers notified per
//!   release, exclusion violations.
//!
//! Both also get the client's CPU time per cycle or acquisition: the CPU time (user +
//! system, all threads) of the client's process over its rounds (`/proc/<pid>/stat`,
//! 10 ms ticks): this bench's process for ours (its other sessions idle meanwhile), the
//! JVM for Curator. Contended rows also get the server's CPU time per acquisition
//! (the ZooKeeper process, the same way): what each client's protocol costs the server.
//!
//! The machine is shared, so the clients take turns in rounds (ours with the own-node
//! watch, ours without, Curator; again), and a row reports the median over its rounds
//! (rates and medians) or the total (requests, notifications, CPU time, violations);
//! the range of acquisitions/s over the rounds and the longest cycle or handoff of all
//! rounds (max ms) are printed too, and each round is noted on stderr. Curator's JVM stays up across its
//! rounds. Full run: 10 rounds of 100 uncontended cycles and of 1.5 s contended, after
//! warm-ups of 2,000 cycles and 2 s; `BENCH_QUICK=1`: 2 rounds of 50 cycles and of 1 s,
//! after 200 cycles and 0.5 s. The warm-ups are the same for both clients: Curator needs
//! them for its JIT, the server for its own. `LOCKS_BENCH_ROUNDS=N` and
//! `LOCKS_BENCH_CONTENDERS=8,64` override the rounds and the contender counts,
//! `LOCKS_BENCH_ROUND_MS` the length of a contended round.
//!
//! Latencies are also reported in round trips measured in the same run against the same
//! server: a read RTT (`exists`) and a write RTT (`setData` of 100 bytes), medians of
//! samples taken before and after the lock runs (both printed). Server work is
//! `mntr`'s `zk_packets_received` delta over a round (pings included, also those of the
//! other client's idle sessions, about 0.01 per acquisition; each probe itself counts
//! one packet, subtracted) and the watchers notified
//! (`zk_sum_node_{deleted,changed,children,created}_watch_count`: a lock granted by its
//! releaser may wake its successor with a data change rather than a deletion), all read
//! by one probe before and one after.
//!
//! Exclusion is checked while holding, the same way for both: each holder marks itself
//! inside, yields ten times (ours to every other tokio task, Curator's thread with
//! `Thread.yield()`), and checks it is still the only one inside; ours also checks that
//! fencing tokens rise. The benchmark fails (panics, exit code 101) after printing its
//! tables if any violation was seen.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

#[path = "support/curator.rs"]
mod curator;

use std::io::{BufRead, BufReader, Lines, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::block_in_place;
use zk_recipes_testing::{four_letter, Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, Client, CreateOptions, Options};

/// `zk_packets_received` and the watchers notified so far (of every kind: deletions,
/// data changes, children, creations), from one `mntr` probe.
/// The server's process, for its CPU time.
static SERVER_PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Requests received, watch notifications sent, and CPU time of the server so far.
fn counters(addr: SocketAddr) -> (i64, i64, Duration) {
    let out = four_letter(addr, "mntr").unwrap_or_default();
    let get = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}\t")).map(str::to_string))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let notified = [
        "zk_sum_node_deleted_watch_count",
        "zk_sum_node_changed_watch_count",
        "zk_sum_node_children_watch_count",
        "zk_sum_node_created_watch_count",
    ]
    .iter()
    .map(|k| get(k))
    .sum();
    let cpu = SERVER_PID.get().map(|p| cpu_time(*p)).unwrap_or_default();
    (get("zk_packets_received"), notified, cpu)
}

/// CPU time (user + system, all threads, living or ended) of process `pid` so far, from
/// `/proc/<pid>/stat` (in clock ticks, assumed 100 per second as on Linux by default).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) start at the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line; `rest` starts at field 3.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// The file system type of the mount holding `path` (from `/proc/mounts`).
fn fs_type(path: &Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, at, kind) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(at).then(|| (at.len(), kind.to_string()))
        })
        .max()
        .map(|(_, kind)| kind)
        .unwrap_or_else(|| "unknown".into())
}

/// `n` read RTTs (`exists`) and `n` write RTTs (`setData` of 100 bytes), one after the
/// other.
async fn rtts(zk: &Client, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    let _ = zk
        .create("/rtt", vec![0u8; 100], &CreateOptions::default())
        .await;
    let mut r = Vec::new();
    let mut w = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        zk.exists("/rtt").await.unwrap();
        r.push(t.elapsed());
        let t = Instant::now();
        zk.set_data("/rtt", vec![1u8; 100], None).await.unwrap();
        w.push(t.elapsed());
    }
    (r, w)
}

fn median<T: Ord + Copy + Default>(mut v: Vec<T>) -> T {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One round of one client.
#[derive(Default)]
struct Sample {
    acquisitions: usize,
    elapsed: Duration,
    /// Median cycle time (uncontended) or handoff (contended) in the round.
    median: Duration,
    /// The longest of them.
    max: Duration,
    packets: i64,
    notified: i64,
    violations: usize,
    /// CPU time of the client's process over the round.
    cpu: Duration,
    /// CPU time of the server's process over the round.
    server_cpu: Duration,
}

/// A client's rounds in one configuration.
struct Rows {
    client: &'static str,
    samples: Vec<Sample>,
}

impl Rows {
    fn new(client: &'static str) -> Rows {
        Rows {
            client,
            samples: Vec::new(),
        }
    }

    /// Adds a round, and notes it on stderr.
    fn push(&mut self, s: Sample) {
        eprintln!(
            "  {:<36} {:>6} acquisitions in {:>6.0} ms, median {:>6.0} us, max {:>7.1} ms, {} violations",
            self.client,
            s.acquisitions,
            s.elapsed.as_secs_f64() * 1e3,
            us(s.median),
            s.max.as_secs_f64() * 1e3,
            s.violations
        );
        self.samples.push(s);
    }

    /// Acquisitions per second, per round.
    fn rates(&self) -> Vec<f64> {
        self.samples
            .iter()
            .map(|s| s.acquisitions as f64 / s.elapsed.as_secs_f64())
            .collect()
    }

    fn rate(&self) -> f64 {
        let mut r = self.rates();
        r.sort_by(f64::total_cmp);
        r.get(r.len() / 2).copied().unwrap_or_default()
    }

    fn median(&self) -> Duration {
        median(self.samples.iter().map(|s| s.median).collect())
    }

    fn max(&self) -> Duration {
        self.samples.iter().map(|s| s.max).max().unwrap_or_default()
    }

    fn acquisitions(&self) -> usize {
        self.samples.iter().map(|s| s.acquisitions).sum()
    }

    fn requests(&self) -> f64 {
        self.samples.iter().map(|s| s.packets).sum::<i64>() as f64 / self.acquisitions() as f64
    }

    fn notified(&self) -> f64 {
        self.samples.iter().map(|s| s.notified).sum::<i64>() as f64 / self.acquisitions() as f64
    }

    /// Client CPU time per acquisition.
    fn cpu(&self) -> Duration {
        self.samples.iter().map(|s| s.cpu).sum::<Duration>() / self.acquisitions().max(1) as u32
    }

    /// Server CPU time per acquisition.
    fn server_cpu(&self) -> Duration {
        self.samples.iter().map(|s| s.server_cpu).sum::<Duration>()
            / self.acquisitions().max(1) as u32
    }

    fn violations(&self) -> usize {
        self.samples.iter().map(|s| s.violations).sum()
    }

    fn uncontended_row(&self, write: Duration) -> String {
        let m = self.median();
        format!(
            "| {:<36} | {:>9.0} | {:>10.2} | {:>8.1} | {:>12.2} | {:>10.0} |",
            self.client,
            us(m),
            m.as_secs_f64() / write.as_secs_f64(),
            self.max().as_secs_f64() * 1e3,
            self.requests(),
            us(self.cpu())
        )
    }

    fn contended_row(&self, contenders: usize, write: Duration) -> String {
        let rates = self.rates();
        let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rates.iter().copied().fold(0.0, f64::max);
        let h = self.median();
        format!(
            "| {:<36} | {:>11} | {:>14.0} | {:>11} | {:>10.0} | {:>12.2} | {:>8.1} | {:>12.2} | {:>16.2} | {:>10.0} | {:>10.0} | {:>10} |",
            self.client,
            contenders,
            self.rate(),
            format!("{lo:.0}-{hi:.0}"),
            us(h),
            h.as_secs_f64() / write.as_secs_f64(),
            self.max().as_secs_f64() * 1e3,
            self.requests(),
            self.notified(),
            us(self.cpu()),
            us(self.server_cpu()),
            self.violations()
        )
    }
}

const OURS_WATCH: &str = "zk-recipes (own-node watch, default)";
const OURS_NO_WATCH: &str = "zk-recipes (without_own_node_watch)";
const CURATOR: &str = "Curator 5.4 InterProcessMutex";

async fn ours_cycles(zk: &Client, n: usize, own_watch: bool) -> Vec<Duration> {
    let mut lat = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let b = zk.lock("/bench/uncontended");
        let b = if own_watch {
            b
        } else {
            b.without_own_node_watch()
        };
        b.acquire().await.unwrap().release().await.unwrap();
        lat.push(t.elapsed());
    }
    lat
}

async fn ours_uncontended(zk: &Client, addr: SocketAddr, n: usize, own_watch: bool) -> Sample {
    let (p0, n0, s0) = counters(addr);
    let c0 = cpu_time(std::process::id());
    let t = Instant::now();
    let lat = ours_cycles(zk, n, own_watch).await;
    let elapsed = t.elapsed();
    let c1 = cpu_time(std::process::id());
    let (p1, n1, s1) = counters(addr);
    Sample {
        acquisitions: n,
        elapsed,
        median: median(lat.clone()),
        max: lat.iter().copied().max().unwrap_or_default(),
        packets: p1 - p0 - 1,
        notified: n1 - n0,
        violations: 0,
        cpu: c1.saturating_sub(c0),
        server_cpu: s1.saturating_sub(s0),
    }
}

/// One contended loop of `run` over `clients`, each contender one task: acquire, check
/// exclusion and fencing, release, until `run` has passed (a contender waiting when time
/// is up still gets its turn). Adds what it sees to `violations`, returns the number of
/// acquisitions, the elapsed time and the handoffs.
async fn contend(
    clients: &[Client],
    own_watch: bool,
    run: Duration,
    max_token: &Arc<AtomicI64>,
    violations: &Arc<AtomicUsize>,
) -> (usize, Duration, Vec<Duration>) {
    let inside = Arc::new(AtomicUsize::new(0));
    let acquisitions = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let handoffs: Arc<Mutex<Vec<Duration>>> = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (me, zk) in clients.iter().cloned().enumerate() {
        let me = me + 1;
        let (max_token, inside, violations, acquisitions, stop, released_at, handoffs) = (
            max_token.clone(),
            inside.clone(),
            violations.clone(),
            acquisitions.clone(),
            stop.clone(),
            released_at.clone(),
            handoffs.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let b = zk.lock("/bench/contended");
                let b = if own_watch {
                    b
                } else {
                    b.without_own_node_watch()
                };
                let g = b.acquire().await.unwrap();
                if let Some(t) = released_at.lock().unwrap().take() {
                    handoffs.lock().unwrap().push(t.elapsed());
                }
                if inside.swap(me, Ordering::SeqCst) != 0 {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                if max_token.fetch_max(g.fencing_token(), Ordering::SeqCst) >= g.fencing_token() {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                // Hold for a moment: every other task gets to run, and would be seen.
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                if inside.load(Ordering::SeqCst) != me {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                acquisitions.fetch_add(1, Ordering::Relaxed);
                inside.store(0, Ordering::SeqCst);
                *released_at.lock().unwrap() = Some(Instant::now());
                g.release().await.unwrap();
            }
        }));
    }
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed();
    let handoffs = handoffs.lock().unwrap().clone();
    (acquisitions.load(Ordering::Relaxed), elapsed, handoffs)
}

/// Our contenders: one session each.
struct Ours {
    clients: Vec<Client>,
    max_token: Arc<AtomicI64>,
}

impl Ours {
    async fn start(addr: SocketAddr, contenders: usize) -> Ours {
        let mut clients = Vec::new();
        for _ in 0..contenders {
            let zk = connect(&addr.to_string(), Options::default())
                .await
                .unwrap();
            // The session is up and the parents exist.
            zk.lock("/bench/contended")
                .acquire()
                .await
                .unwrap()
                .release()
                .await
                .unwrap();
            clients.push(zk);
        }
        Ours {
            clients,
            max_token: Arc::new(AtomicI64::new(0)),
        }
    }

    async fn round(&self, addr: SocketAddr, own_watch: bool, run: Duration) -> Sample {
        let violations = Arc::new(AtomicUsize::new(0));
        let (p0, n0, s0) = counters(addr);
        let c0 = cpu_time(std::process::id());
        let (acquisitions, elapsed, handoffs) =
            contend(&self.clients, own_watch, run, &self.max_token, &violations).await;
        let c1 = cpu_time(std::process::id());
        let (p1, n1, s1) = counters(addr);
        Sample {
            acquisitions,
            elapsed,
            median: median(handoffs.clone()),
            max: handoffs.iter().copied().max().unwrap_or_default(),
            packets: p1 - p0 - 1,
            notified: n1 - n0,
            violations: violations.load(Ordering::SeqCst),
            cpu: c1.saturating_sub(c0),
            server_cpu: s1.saturating_sub(s0),
        }
    }

    async fn close(self) {
        for c in self.clients {
            c.close().await;
        }
    }
}

/// A running `CuratorLockBench`: its sessions stay up across rounds.
struct Curator {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    addr: SocketAddr,
}

impl Curator {
    /// Starts it and waits until it has warmed up (`warm_up`: cycles with 1 contender,
    /// milliseconds with more).
    fn start(
        java: &curator::CuratorProgram,
        addr: SocketAddr,
        path: &str,
        contenders: usize,
        warm_up: u64,
    ) -> Curator {
        let mut child = Command::new("java")
            .args(["-cp", &java.classpath, "CuratorLockBench"])
            .arg(addr.to_string())
            .arg(path)
            .arg(contenders.to_string())
            .arg(warm_up.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()) // SLF4J's "no binding" notice
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut c = Curator {
            child,
            stdin,
            lines,
            addr,
        };
        assert_eq!(c.next(), "READY");
        c
    }

    fn next(&mut self) -> String {
        self.lines.next().expect("CuratorLockBench ended").unwrap()
    }

    /// One round: `amount` cycles (1 contender) or milliseconds.
    fn round(&mut self, amount: u64) -> Sample {
        let (p0, n0, s0) = counters(self.addr);
        let c0 = cpu_time(self.child.id());
        writeln!(self.stdin, "go {amount}").unwrap();
        let result = self.next();
        let c1 = cpu_time(self.child.id());
        let (p1, n1, s1) = counters(self.addr);
        let f: Vec<u64> = result
            .strip_prefix("RESULT ")
            .map(|v| v.split(' ').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default();
        assert!(f.len() == 6 && f[4] == 0, "CuratorLockBench said {result}");
        Sample {
            acquisitions: f[0] as usize,
            elapsed: Duration::from_nanos(f[1]),
            median: Duration::from_nanos(f[2]),
            max: Duration::from_nanos(f[5]),
            packets: p1 - p0 - 1,
            notified: n1 - n0,
            violations: f[3] as usize,
            cpu: c1.saturating_sub(c0),
            server_cpu: s1.saturating_sub(s0),
        }
    }

    fn close(mut self) {
        writeln!(self.stdin, "close").unwrap();
        assert!(self.child.wait().unwrap().success());
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let env = |name: &str| std::env::var(name).ok();
    let rounds: usize = env("LOCKS_BENCH_ROUNDS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 2 } else { 10 });
    let counts: Vec<usize> = env("LOCKS_BENCH_CONTENDERS")
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![8, 64]);
    let n = if quick { 50 } else { 100 };
    let warm_cycles = if quick { 200 } else { 2000 };
    let run = Duration::from_millis(
        env("LOCKS_BENCH_ROUND_MS")
            .and_then(|v| v.parse().ok())
            .unwrap_or(if quick { 1000 } else { 1500 }),
    );
    let warm_up = Duration::from_millis(if quick { 500 } else { 2000 });

    let java = block_in_place(|| curator::compiled("CuratorLockBench"));
    let base = std::env::var_os("LOCKS_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let server = TestServer::start_with(ServerOptions {
        base_dir: Some(base.clone()),
        ..Default::default()
    })
    .unwrap();
    let addr = server.addr();
    if let Some(pid) = server.pid() {
        let _ = SERVER_PID.set(pid);
    }
    // The server's config file is its last argument; the data dir is next to it.
    let dir = server
        .pid()
        .and_then(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .and_then(|c| {
            let last = c.split(|b| *b == 0).rfind(|a| !a.is_empty())?.to_vec();
            Some(PathBuf::from(String::from_utf8(last).ok()?).with_file_name("data"))
        })
        .unwrap_or_else(|| base.clone());
    let fs = fs_type(&dir);
    println!(
        "server {addr} (ZooKeeper 3.8), data dir {} on {fs}{}",
        dir.display(),
        if fs == "tmpfs" || fs == "ramfs" {
            " (memory, not disk: writes are cheaper than on disk)"
        } else {
            ""
        }
    );
    let zk = connect(&addr.to_string(), Options::default())
        .await
        .unwrap();
    // Warm the server up (its JIT) before measuring anything.
    rtts(&zk, 500).await;
    let (mut read, mut write) = rtts(&zk, 200).await;
    let rtt_line = |r: &[Duration], w: &[Duration]| {
        format!(
            "read RTT (exists) {:.0} us, write RTT (setData 100 B) {:.0} us",
            us(median(r.to_vec())),
            us(median(w.to_vec()))
        )
    };
    println!("before: {}", rtt_line(&read, &write));

    // Uncontended.
    let mut cur = block_in_place(|| {
        Curator::start(
            &java,
            addr,
            "/bench/curator-uncontended",
            1,
            warm_cycles as u64,
        )
    });
    ours_cycles(&zk, warm_cycles, true).await;
    ours_cycles(&zk, warm_cycles, false).await;
    let mut cycles = [
        Rows::new(OURS_WATCH),
        Rows::new(OURS_NO_WATCH),
        Rows::new(CURATOR),
    ];
    for _ in 0..rounds {
        cycles[0].push(ours_uncontended(&zk, addr, n, true).await);
        cycles[1].push(ours_uncontended(&zk, addr, n, false).await);
        cycles[2].push(block_in_place(|| cur.round(n as u64)));
    }
    block_in_place(|| cur.close());
    eprintln!("uncontended done");

    // Contended.
    let mut contended = Vec::new();
    for &contenders in &counts {
        let warm_ms = warm_up.as_millis() as u64;
        let mut cur = block_in_place(|| {
            Curator::start(&java, addr, "/bench/curator-contended", contenders, warm_ms)
        });
        let ours = Ours::start(addr, contenders).await;
        let mut rows = [
            Rows::new(OURS_WATCH),
            Rows::new(OURS_NO_WATCH),
            Rows::new(CURATOR),
        ];
        // The same warm-up as Curator's, each variant; what it sees counts too.
        for (i, own_watch) in [(0, true), (1, false)] {
            eprintln!("  (warm-up)");
            rows[i].push(ours.round(addr, own_watch, warm_up).await);
        }
        for _ in 0..rounds {
            rows[0].push(ours.round(addr, true, run).await);
            rows[1].push(ours.round(addr, false, run).await);
            rows[2].push(block_in_place(|| cur.round(run.as_millis() as u64)));
        }
        // Only the warm-ups' violations stay from them.
        for r in &mut rows[..2] {
            let warm = r.samples.remove(0);
            r.samples[0].violations += warm.violations;
        }
        block_in_place(|| cur.close());
        ours.close().await;
        eprintln!("{contenders} contenders done");
        contended.push((contenders, rows));
    }

    let (read_after, write_after) = rtts(&zk, 200).await;
    println!("after:  {}", rtt_line(&read_after, &write_after));
    zk.close().await;
    drop(server);
    read.extend(read_after);
    write.extend(write_after);
    let (read, write) = (median(read), median(write));

    println!();
    println!(
        "Locks, uncontended ({rounds} rounds of {n} cycles; RTTs, before and after: read {:.0} us, write {:.0} us; 1 write + 1 read = {:.2} write RTTs):",
        us(read),
        us(write),
        (write + read).as_secs_f64() / write.as_secs_f64(),
    );
    println!(
        "| {:<36} | {:>9} | {:>10} | {:>8} | {:>12} | {:>10} |",
        "acquire + release, one session", "median us", "write RTTs", "max ms", "requests", "CPU us"
    );
    println!(
        "|{:-<38}|{:->11}|{:->12}|{:->10}|{:->14}|{:->12}|",
        "", "", "", "", "", ""
    );
    for r in &cycles {
        println!("{}", r.uncontended_row(write));
    }
    println!();
    println!(
        "Locks, contended ({rounds} rounds of {} s each; each contender its own session; handoff = release → next acquisition):",
        run.as_secs_f64()
    );
    println!(
        "| {:<36} | {:>11} | {:>14} | {:>11} | {:>10} | {:>12} | {:>8} | {:>12} | {:>16} | {:>10} | {:>10} | {:>10} |",
        "client",
        "contenders",
        "acquisitions/s",
        "range",
        "handoff us",
        "handoff wRTT",
        "max ms",
        "requests/acq",
        "notified/release",
        "CPU us/acq",
        "server CPU",
        "violations"
    );
    println!(
        "|{:-<38}|{:->13}|{:->16}|{:->13}|{:->12}|{:->14}|{:->10}|{:->14}|{:->18}|{:->12}|{:->12}|{:->12}|",
        "", "", "", "", "", "", "", "", "", "", "", ""
    );
    let mut violations = 0;
    for (contenders, rows) in &contended {
        for r in rows {
            println!("{}", r.contended_row(*contenders, write));
            violations += r.violations();
        }
    }
    assert_eq!(violations, 0, "mutual exclusion or fencing broken");
}
