//! Lock benchmark against a real ZooKeeper 3.8, ours next to Apache Curator 5.4's
//! `InterProcessMutex`, in one run against one server: `cargo bench --bench locks`
//! (full: 500 uncontended cycles after 2,000 discarded ones, 5 s per contended run after
//! 2 s of warm-up; `BENCH_QUICK=1`: 50 after 200, 2 s after 0.5 s). The warm-ups are the
//! same for both clients: Curator needs them for its JIT, the server for its own.
//!
//! The server's data dir is on disk (a fresh dir under the system temp dir, or under
//! `LOCKS_BENCH_DIR` if set), so every lock node create and delete is an fsync'd
//! transaction; the bench prints where the data is and the file system it is on.
//!
//! Latencies are reported in round trips measured in the same run against the same
//! server: a read RTT (`exists`) and a write RTT (`setData` of 100 bytes), medians of
//! samples taken before and after the lock runs (both printed). Server work is
//! `mntr`'s `zk_packets_received` delta over the run (pings included; each probe itself
//! counts one packet, subtracted) and `zk_sum_node_deleted_watch_count` (watchers
//! notified of deletions), both read by one probe before and one after.
//!
//! Measured, one after the other on the same server:
//!
//! * uncontended acquire + release, on one session: ours with and without the own-node
//!   watch (`/bench/uncontended`), Curator (`/bench/curator-uncontended`,
//!   `benches/curator/CuratorLockBench.java`); median cycle time, requests per cycle;
//! * 8 and 64 contenders, each on its own session: ours (tokio adapter, one task per
//!   contender, `/bench/contended`) with and without the own-node watch, and Curator
//!   (one `CuratorFramework` and one thread per contender,
//!   `/bench/curator-contended`); acquisitions per second, handoff median (the holder's
//!   release call → the next holder's acquisition returning), requests per acquisition,
//!   watchers notified per release, exclusion violations.
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

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zk_recipes_testing::{four_letter, Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, Client, CreateOptions, Options};

/// `zk_packets_received` and `zk_sum_node_deleted_watch_count`, from one `mntr` probe.
fn counters(addr: SocketAddr) -> (i64, i64) {
    let out = four_letter(addr, "mntr").unwrap_or_default();
    let get = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}\t")).map(str::to_string))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        get("zk_packets_received"),
        get("zk_sum_node_deleted_watch_count"),
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
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

/// One uncontended row.
struct Cycle {
    client: &'static str,
    median: Duration,
    requests: f64,
}

/// One contended row.
struct Contended {
    client: &'static str,
    contenders: usize,
    acquisitions: usize,
    elapsed: Duration,
    handoff: Duration,
    requests: f64,
    notified: f64,
    violations: usize,
}

const OURS_WATCH: &str = "zk-recipes (own-node watch, default)";
const OURS_NO_WATCH: &str = "zk-recipes (without_own_node_watch)";
const CURATOR: &str = "Curator 5.4 InterProcessMutex";

async fn ours_uncontended(
    zk: &Client,
    addr: SocketAddr,
    n: usize,
    warm_up: usize,
    own_watch: bool,
) -> Cycle {
    let cycle = || async {
        let b = zk.lock("/bench/uncontended");
        let b = if own_watch {
            b
        } else {
            b.without_own_node_watch()
        };
        b.acquire().await.unwrap().release().await.unwrap();
    };
    for _ in 0..warm_up {
        cycle().await;
    }
    let (p0, _) = counters(addr);
    let mut lat = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        cycle().await;
        lat.push(t.elapsed());
    }
    let (p1, _) = counters(addr);
    Cycle {
        client: if own_watch { OURS_WATCH } else { OURS_NO_WATCH },
        median: median(lat),
        requests: (p1 - p0 - 1) as f64 / n as f64,
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

async fn ours_contended(
    addr: SocketAddr,
    contenders: usize,
    own_watch: bool,
    run: Duration,
    warm_up: Duration,
) -> Contended {
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
    let max_token = Arc::new(AtomicI64::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    // The same warm-up as Curator's (which needs it for its JIT).
    contend(&clients, own_watch, warm_up, &max_token, &violations).await;
    let (p0, n0) = counters(addr);
    let (acquisitions, elapsed, handoffs) =
        contend(&clients, own_watch, run, &max_token, &violations).await;
    let (p1, n1) = counters(addr);
    for c in clients {
        c.close().await;
    }
    Contended {
        client: if own_watch { OURS_WATCH } else { OURS_NO_WATCH },
        contenders,
        acquisitions,
        elapsed,
        handoff: median(handoffs),
        requests: (p1 - p0 - 1) as f64 / acquisitions as f64,
        notified: (n1 - n0) as f64 / acquisitions as f64,
        violations: violations.load(Ordering::SeqCst),
    }
}

/// What `CuratorLockBench` reported, and the server's counters around it.
struct CuratorRun {
    acquisitions: usize,
    elapsed: Duration,
    median: Duration,
    violations: usize,
    packets: i64,
    notified: i64,
}

/// Runs `CuratorLockBench` once: `amount` is cycles (1 contender) or milliseconds.
fn curator_run(
    java: &curator::Compiled,
    addr: SocketAddr,
    path: &str,
    contenders: usize,
    amount: u64,
    warm_up: u64,
) -> CuratorRun {
    let mut child = Command::new("java")
        .args(["-cp", &java.classpath, "CuratorLockBench"])
        .arg(addr.to_string())
        .arg(path)
        .arg(contenders.to_string())
        .arg(amount.to_string())
        .arg(warm_up.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null()) // SLF4J's "no binding" notice
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("CuratorLockBench ended").unwrap();
    assert_eq!(next(), "READY");
    let (p0, n0) = counters(addr);
    stdin.write_all(b"go\n").unwrap();
    let result = next();
    let (p1, n1) = counters(addr);
    stdin.write_all(b"close\n").unwrap();
    assert!(child.wait().unwrap().success());
    let f: Vec<u64> = result
        .strip_prefix("RESULT ")
        .map(|v| v.split(' ').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default();
    assert!(f.len() == 5 && f[4] == 0, "CuratorLockBench said {result}");
    CuratorRun {
        acquisitions: f[0] as usize,
        elapsed: Duration::from_nanos(f[1]),
        median: Duration::from_nanos(f[2]),
        violations: f[3] as usize,
        packets: p1 - p0 - 1,
        notified: n1 - n0,
    }
}

async fn curator_uncontended(
    java: Arc<curator::Compiled>,
    addr: SocketAddr,
    n: usize,
    warm_up: usize,
) -> Cycle {
    let r = tokio::task::spawn_blocking(move || {
        curator_run(
            &java,
            addr,
            "/bench/curator-uncontended",
            1,
            n as u64,
            warm_up as u64,
        )
    })
    .await
    .unwrap();
    Cycle {
        client: CURATOR,
        median: r.median,
        requests: r.packets as f64 / r.acquisitions as f64,
    }
}

async fn curator_contended(
    java: Arc<curator::Compiled>,
    addr: SocketAddr,
    contenders: usize,
    run: Duration,
    warm_up: Duration,
) -> Contended {
    let (ms, warm_ms) = (run.as_millis() as u64, warm_up.as_millis() as u64);
    let r = tokio::task::spawn_blocking(move || {
        curator_run(
            &java,
            addr,
            "/bench/curator-contended",
            contenders,
            ms,
            warm_ms,
        )
    })
    .await
    .unwrap();
    Contended {
        client: CURATOR,
        contenders,
        acquisitions: r.acquisitions,
        elapsed: r.elapsed,
        handoff: r.median,
        requests: r.packets as f64 / r.acquisitions as f64,
        notified: r.notified as f64 / r.acquisitions as f64,
        violations: r.violations,
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn cycle_row(c: &Cycle, write: Duration) -> String {
    format!(
        "| {:<36} | {:>9.0} | {:>10.2} | {:>12.2} |",
        c.client,
        us(c.median),
        c.median.as_secs_f64() / write.as_secs_f64(),
        c.requests
    )
}

fn contended_row(c: &Contended, write: Duration) -> String {
    format!(
        "| {:<36} | {:>11} | {:>14.0} | {:>10.0} | {:>12.2} | {:>12.2} | {:>16.2} | {:>10} |",
        c.client,
        c.contenders,
        c.acquisitions as f64 / c.elapsed.as_secs_f64(),
        us(c.handoff),
        c.handoff.as_secs_f64() / write.as_secs_f64(),
        c.requests,
        c.notified,
        c.violations
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let java = Arc::new(
        tokio::task::spawn_blocking(|| curator::compiled("CuratorLockBench"))
            .await
            .unwrap(),
    );
    let base = std::env::var_os("LOCKS_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let server = TestServer::start_with(ServerOptions {
        base_dir: Some(base.clone()),
        ..Default::default()
    })
    .unwrap();
    let addr = server.addr();
    let fs = fs_type(&base);
    println!(
        "server {addr} (ZooKeeper 3.8), data dir under {} on {fs}{}",
        base.display(),
        if fs == "tmpfs" || fs == "ramfs" {
            " (memory, not disk: writes are cheaper than on disk)"
        } else {
            ""
        }
    );
    let zk = connect(&addr.to_string(), Options::default())
        .await
        .unwrap();
    let n = if quick { 50 } else { 500 };
    // Warm the server up (its JIT) before measuring anything.
    rtts(&zk, 4 * n).await;
    let (mut read, mut write) = rtts(&zk, n).await;
    let rtt_line = |r: &[Duration], w: &[Duration]| {
        format!(
            "read RTT (exists) {:.0} us, write RTT (setData 100 B) {:.0} us",
            us(median(r.to_vec())),
            us(median(w.to_vec()))
        )
    };
    println!("before: {}", rtt_line(&read, &write));

    // Discarded cycles before each uncontended measurement, the same for both clients:
    // Curator needs them for its JIT (fewer left its median ~20% higher).
    let warm_cycles = 4 * n;
    let mut cycles = Vec::new();
    for own_watch in [true, false] {
        cycles.push(ours_uncontended(&zk, addr, n, warm_cycles, own_watch).await);
    }
    cycles.push(curator_uncontended(java.clone(), addr, n, warm_cycles).await);
    eprintln!("uncontended done");

    let run = Duration::from_secs(if quick { 2 } else { 5 });
    let warm_up = Duration::from_millis(if quick { 500 } else { 2000 });
    let mut rows = Vec::new();
    for contenders in [8, 64] {
        for own_watch in [true, false] {
            rows.push(ours_contended(addr, contenders, own_watch, run, warm_up).await);
        }
        rows.push(curator_contended(java.clone(), addr, contenders, run, warm_up).await);
        eprintln!("{contenders} contenders done");
    }
    let (read_after, write_after) = rtts(&zk, n).await;
    println!("after:  {}", rtt_line(&read_after, &write_after));
    zk.close().await;
    drop(server);
    read.extend(read_after);
    write.extend(write_after);
    let (read, write) = (median(read), median(write));

    println!();
    println!(
        "Locks, uncontended (RTTs, before and after: read {:.0} us, write {:.0} us; 1 write + 1 read = {:.2} write RTTs):",
        us(read),
        us(write),
        (write + read).as_secs_f64() / write.as_secs_f64(),
    );
    println!(
        "| {:<36} | {:>9} | {:>10} | {:>12} |",
        "acquire + release, one session", "median us", "write RTTs", "requests"
    );
    println!("|{:-<38}|{:->11}|{:->12}|{:->14}|", "", "", "", "");
    for c in &cycles {
        println!("{}", cycle_row(c, write));
    }
    println!();
    println!(
        "Locks, contended (each contender its own session; handoff = release → next acquisition):"
    );
    println!(
        "| {:<36} | {:>11} | {:>14} | {:>10} | {:>12} | {:>12} | {:>16} | {:>10} |",
        "client",
        "contenders",
        "acquisitions/s",
        "handoff us",
        "handoff wRTT",
        "requests/acq",
        "notified/release",
        "violations"
    );
    println!(
        "|{:-<38}|{:->13}|{:->16}|{:->12}|{:->14}|{:->14}|{:->18}|{:->12}|",
        "", "", "", "", "", "", "", ""
    );
    for r in &rows {
        println!("{}", contended_row(r, write));
    }
    let violations: usize = rows.iter().map(|r| r.violations).sum();
    assert_eq!(violations, 0, "mutual exclusion or fencing broken");
}
