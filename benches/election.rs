//! Leader election benchmark against a real ZooKeeper: `cargo bench --bench election`.
//!
//! * Failover: 8 candidates, each on its own session; the leader closes its session and
//!   we time until the next candidate's `Elected`. A new candidate then joins at the
//!   back so there are always 8. Run in one process (8 sessions on one tokio runtime)
//!   and, unless `BENCH_QUICK` is set, with one OS process per candidate (this binary
//!   started again as a child with `ELECTION_BENCH_CHILD` set).
//! * Join: an uncontended candidate's `join()` until `Elected` (create + list,
//!   pipelined), then `close()`.
//!
//! Latencies are reported in ms and in round trips measured in the same run against the
//! same server: a read RTT (`exists`) and a write RTT (`setData` of 100 bytes). Server
//! work per failover is the `mntr` delta of `zk_packets_received` / `zk_packets_sent`
//! (the probe itself counts one received packet, subtracted) and of the watch
//! notification counters `zk_sum_node_{deleted,changed,children,created}_watch_count`.
//!
//! The benchmark fails (panics, exit code 101) if two candidates lead at once (a leader
//! stops counting itself before it closes its session; each `Elected` must find nobody
//! leading) or if a fencing token does not rise.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use zk_recipes_testing::{four_letter, Options as ServerOptions, TestServer};
use zk_recipes_tokio::{connect, Client, CreateOptions, ElectionEvent, Options};

const DIR: &str = "/bench/election";
const CANDIDATES: usize = 8;
const CHILD_ENV: &str = "ELECTION_BENCH_CHILD";

const WATCH_KEYS: &[&str] = &[
    "zk_sum_node_deleted_watch_count",
    "zk_sum_node_changed_watch_count",
    "zk_sum_node_children_watch_count",
    "zk_sum_node_created_watch_count",
];

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    received: i64,
    sent: i64,
    notified: i64,
}

fn counters(addr: SocketAddr) -> Counters {
    let text = four_letter(addr, "mntr").unwrap_or_default();
    let get = |key: &str| -> i64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}\t")).map(str::to_string))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    Counters {
        received: get("zk_packets_received"),
        sent: get("zk_packets_sent"),
        notified: WATCH_KEYS.iter().map(|k| get(k)).sum(),
    }
}

impl std::ops::Sub for Counters {
    type Output = Counters;
    fn sub(self, o: Counters) -> Counters {
        Counters {
            // The later probe counts itself as one received packet.
            received: self.received - o.received - 1,
            sent: self.sent - o.sent,
            notified: self.notified - o.notified,
        }
    }
}

fn percentile(v: &[Duration], p: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn median(v: &[Duration]) -> Duration {
    percentile(v, 0.5)
}

async fn rtts(zk: &Client, n: usize) -> (Duration, Duration) {
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
    (median(&r), median(&w))
}

struct Rtt {
    read: Duration,
    write: Duration,
}

impl Rtt {
    fn show(&self, d: Duration) -> String {
        format!(
            "{:>7.3} ms = {:>5.2} write RTTs = {:>5.2} read RTTs",
            d.as_secs_f64() * 1e3,
            d.as_secs_f64() / self.write.as_secs_f64(),
            d.as_secs_f64() / self.read.as_secs_f64()
        )
    }
}

/// Who leads: everyone who acts as leader counts itself in `leading` (and must find it
/// at zero); every leadership's token must be above every earlier one.
#[derive(Default)]
struct Safety {
    leading: AtomicUsize,
    max_token: AtomicI64,
    violations: AtomicUsize,
}

impl Safety {
    fn elected(&self, token: i64) {
        if self.leading.fetch_add(1, Ordering::SeqCst) != 0 {
            eprintln!("VIOLATION: two leaders at once (token {token})");
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        let before = self.max_token.fetch_max(token, Ordering::SeqCst);
        if before >= token {
            eprintln!("VIOLATION: fencing token {token} after {before}");
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn stepped_down(&self) {
        self.leading.fetch_sub(1, Ordering::SeqCst);
    }
    fn check(&self) {
        assert_eq!(
            self.violations.load(Ordering::SeqCst),
            0,
            "leader election safety broken"
        );
    }
}

/// One candidate on its own session, in this process: reports its `Elected` events.
async fn in_process_candidate(
    addr: SocketAddr,
    me: usize,
    elected: mpsc::UnboundedSender<(usize, i64, Instant)>,
) -> Client {
    let zk = connect(&addr.to_string(), Options::default())
        .await
        .unwrap();
    let mut c = zk
        .election(DIR, &format!("candidate-{me}"))
        .join()
        .await
        .unwrap();
    tokio::spawn(async move {
        while let Some(e) = c.changed().await {
            if let ElectionEvent::Elected { fencing_token, .. } = e {
                let _ = elected.send((me, fencing_token, Instant::now()));
            }
        }
    });
    zk
}

struct Stats {
    failover: Vec<Duration>,
    per: Vec<Counters>,
}

impl Stats {
    fn report(&self, what: &str, rtt: &Rtt) {
        let n = self.per.len() as f64;
        let sum = |f: fn(&Counters) -> i64| self.per.iter().map(f).sum::<i64>() as f64 / n;
        println!(
            "failover, {CANDIDATES} candidates, {what}, {} failovers:",
            self.failover.len()
        );
        println!("  median {}", rtt.show(median(&self.failover)));
        println!("  p90    {}", rtt.show(percentile(&self.failover, 0.9)));
        println!(
            "  per failover: {:.2} watch notifications, {:.2} packets received / {:.2} sent by the server",
            sum(|c| c.notified),
            sum(|c| c.received),
            sum(|c| c.sent),
        );
    }
}

async fn failover_in_process(addr: SocketAddr, rounds: usize, safety: &Safety) -> Stats {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut clients = Vec::new();
    for me in 0..CANDIDATES {
        clients.push(Some(in_process_candidate(addr, me, tx.clone()).await));
    }
    let (mut leader, token, _) = rx.recv().await.unwrap();
    safety.elected(token);
    let mut stats = Stats {
        failover: Vec::new(),
        per: Vec::new(),
    };
    for _ in 0..rounds {
        // Let trailing work (the last join) settle before counting.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before = counters(addr);
        let zk = clients[leader].take().unwrap();
        safety.stepped_down();
        let t0 = Instant::now();
        zk.close().await;
        let (next, token, at) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("a next leader")
            .unwrap();
        safety.elected(token);
        stats.failover.push(at - t0);
        tokio::time::sleep(Duration::from_millis(20)).await;
        stats.per.push(counters(addr) - before);
        leader = next;
        // Keep 8 candidates: a new one joins at the back.
        let me = clients.len();
        clients.push(Some(in_process_candidate(addr, me, tx.clone()).await));
    }
    for zk in clients.into_iter().flatten() {
        zk.close().await;
    }
    stats
}

async fn join_latency(zk: &Client, addr: SocketAddr, n: usize, rtt: &Rtt) {
    let mut lat = Vec::new();
    let mut joins = Vec::new();
    let mut closes = Vec::new();
    for _ in 0..n {
        let before = counters(addr);
        let t = Instant::now();
        let mut c = zk.election("/bench/join", "solo").join().await.unwrap();
        c.elected().await.unwrap();
        lat.push(t.elapsed());
        let elected = counters(addr);
        joins.push(elected - before);
        c.close().await.unwrap();
        // The probe between counts one packet.
        closes.push(counters(addr) - elected);
    }
    let avg = |v: &[Counters]| v.iter().map(|c| c.received).sum::<i64>() as f64 / v.len() as f64;
    println!("join until Elected (uncontended), {n} joins:");
    println!("  median {}", rtt.show(median(&lat)));
    println!("  p90    {}", rtt.show(percentile(&lat, 0.9)));
    println!(
        "  {:.2} requests to the server per join (until Elected), {:.2} per close",
        avg(&joins),
        avg(&closes)
    );
}

// ----- one process per candidate -----

/// A child process: one candidate; prints `ELECTED <token>` when it leads, closes its
/// session and exits on a line on stdin.
async fn child(addr: &str, me: &str) {
    let zk = connect(addr, Options::default()).await.unwrap();
    let mut c = zk.election(DIR, me).join().await.unwrap();
    let (close_tx, mut close_rx) = mpsc::unbounded_channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        let _ = close_tx.send(());
    });
    println!("JOINED");
    loop {
        tokio::select! {
            e = c.changed() => match e {
                Some(ElectionEvent::Elected { fencing_token, .. }) => {
                    println!("ELECTED {fencing_token}");
                }
                Some(_) => {}
                None => return,
            },
            _ = close_rx.recv() => {
                zk.close().await;
                println!("CLOSED");
                return;
            }
        }
    }
}

struct Proc {
    child: Child,
    stdin: ChildStdin,
}

fn spawn_child(
    addr: SocketAddr,
    me: usize,
    lines: std::sync::mpsc::Sender<(usize, String, Instant)>,
) -> Proc {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, format!("{addr} candidate-{me}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { return };
            if lines.send((me, line, Instant::now())).is_err() {
                return;
            }
        }
    });
    Proc { child, stdin }
}

/// The children's lines; a line not waited for yet is kept for later.
struct Lines {
    rx: std::sync::mpsc::Receiver<(usize, String, Instant)>,
    pending: Vec<(usize, String, Instant)>,
}

impl Lines {
    fn wait(&mut self, want: impl Fn(&str) -> bool) -> (usize, String, Instant) {
        if let Some(i) = self.pending.iter().position(|l| want(&l.1)) {
            return self.pending.remove(i);
        }
        loop {
            let got = self
                .rx
                .recv_timeout(Duration::from_secs(20))
                .expect("a child answers");
            if want(&got.1) {
                return got;
            }
            self.pending.push(got);
        }
    }
}

fn failover_processes(addr: SocketAddr, rounds: usize, safety: &Safety) -> Stats {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut lines = Lines {
        rx,
        pending: Vec::new(),
    };
    let mut procs = Vec::new();
    for me in 0..CANDIDATES {
        procs.push(Some(spawn_child(addr, me, tx.clone())));
        // In order: each child has joined before the next starts.
        lines.wait(|l| l == "JOINED");
    }
    let (mut leader, line, _) = lines.wait(|l| l.starts_with("ELECTED"));
    safety.elected(line[8..].parse().unwrap());
    let mut stats = Stats {
        failover: Vec::new(),
        per: Vec::new(),
    };
    for _ in 0..rounds {
        std::thread::sleep(Duration::from_millis(20));
        let before = counters(addr);
        let mut p = procs[leader].take().unwrap();
        safety.stepped_down();
        let t0 = Instant::now();
        writeln!(p.stdin, "close").unwrap();
        p.stdin.flush().unwrap();
        let (next, line, at) = lines.wait(|l| l.starts_with("ELECTED"));
        safety.elected(line[8..].parse().unwrap());
        stats.failover.push(at - t0);
        std::thread::sleep(Duration::from_millis(20));
        stats.per.push(counters(addr) - before);
        leader = next;
        let _ = p.child.wait();
        procs.push(Some(spawn_child(addr, procs.len(), tx.clone())));
        lines.wait(|l| l == "JOINED");
    }
    for mut p in procs.into_iter().flatten() {
        let _ = writeln!(p.stdin, "close");
        let _ = p.stdin.flush();
        let _ = p.child.wait();
    }
    stats
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let (addr, me) = spec.split_once(' ').unwrap();
        rt.block_on(child(addr, me));
        return;
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let base = std::path::Path::new("/dev/shm");
    let server = TestServer::start_with(ServerOptions {
        base_dir: base.exists().then(|| base.to_path_buf()),
        ..Default::default()
    })
    .unwrap();
    let addr = server.addr();
    println!(
        "server {addr}, data on {}",
        if base.exists() { "/dev/shm" } else { "disk" }
    );
    let rounds = if quick { 20 } else { 50 };
    let rtt = rt.block_on(async {
        let zk = connect(&addr.to_string(), Options::default())
            .await
            .unwrap();
        let (read, write) = rtts(&zk, if quick { 50 } else { 500 }).await;
        println!(
            "read RTT (exists) {:.0} us, write RTT (setData 100 B) {:.0} us",
            read.as_secs_f64() * 1e6,
            write.as_secs_f64() * 1e6
        );
        let rtt = Rtt { read, write };
        join_latency(&zk, addr, rounds, &rtt).await;
        zk.close().await;
        rtt
    });
    let safety = Arc::new(Safety::default());
    let stats = rt.block_on(failover_in_process(addr, rounds, &safety));
    stats.report("one process (8 sessions)", &rtt);
    safety.check();
    if !quick {
        let safety = Safety::default();
        let stats = failover_processes(addr, rounds, &safety);
        stats.report("one process per candidate", &rtt);
        safety.check();
    }
}
