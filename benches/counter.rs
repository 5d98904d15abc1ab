//! Shared counter under contention against a real ZooKeeper 3.8 (data dir on disk, every
//! write an fsync'd transaction), ours next to kazoo's `Counter` on the same server in
//! the same run: `cargo bench --bench counter` (`BENCH_QUICK=1`: 1 round of 20
//! increments per client; `COUNTER_BENCH_ROUNDS=N` overrides the rounds,
//! `COUNTER_BENCH_CLIENTS=N` the 8 clients).
//!
//! 8 clients, each on its own session, add 1 to one counter 100 times in a row, all at
//! once: ours with the tokio adapter (one task per client, `CounterFormat::I32`), kazoo
//! with `benches/kazoo/kazoo_counter.py` (one `KazooClient` and one thread per client;
//! skipped with a message when Debian's `/usr/bin/python3` or its `python3-kazoo` is missing). Each
//! round starts on a new node (missing: the first increments race to create it). The
//! final value must be exactly 8 × 100 (checked; panics otherwise).
//!
//! Reported per round and as the median over the rounds (ours and kazoo take turns, the
//! machine is shared; one warm-up round each first, not reported): increments per
//! second, and requests per increment, the server's `mntr` `zk_packets_received` delta
//! over the run (pings included, the probe's own packet subtracted) over the increments
//! — the same measure for both clients. When each of our clients finished is printed
//! on stderr.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

#[allow(dead_code)] // only `mntr` is used here
#[path = "support/curator.rs"]
mod curator;
#[path = "support/kazoo.rs"]
mod kazoo;

use std::time::{Duration, Instant};

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, CounterFormat, Options};

/// Clients (sessions) on the counter; `COUNTER_BENCH_CLIENTS` overrides it.
fn clients() -> usize {
    std::env::var("COUNTER_BENCH_CLIENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

#[derive(Clone, Copy)]
struct Figures {
    increments: usize,
    elapsed: Duration,
    requests: i64,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.increments as f64 / self.elapsed.as_secs_f64()
    }

    fn per_increment(&self) -> f64 {
        self.requests as f64 / self.increments as f64
    }
}

async fn ours(server: &TestServer, path: &str, each: usize) -> Figures {
    let cs = server.connect_string();
    let mut counters = Vec::new();
    for _ in 0..clients() {
        let zk = connect(&cs, Options::default()).await.unwrap();
        let mut c = zk.counter(path, CounterFormat::I32).unwrap();
        assert_eq!(c.get().await.unwrap(), 0); // connected; the node stays missing
        counters.push((zk, c));
    }
    let before = curator::mntr(server.addr(), "zk_packets_received");
    let t = Instant::now();
    let tasks: Vec<_> = counters
        .into_iter()
        .map(|(zk, mut c)| {
            tokio::spawn(async move {
                for _ in 0..each {
                    c.add(1).await.unwrap();
                }
                (zk, c, t.elapsed())
            })
        })
        .collect();
    let mut done = Vec::new();
    for task in tasks {
        done.push(task.await.unwrap());
    }
    let elapsed = t.elapsed();
    let after = curator::mntr(server.addr(), "zk_packets_received");
    let mut ends: Vec<u128> = done.iter().map(|d| d.2.as_millis()).collect();
    ends.sort_unstable();
    eprintln!("ours {path}: clients done at {ends:?} ms");
    let value = done[0].1.get().await.unwrap();
    assert_eq!(
        value,
        (clients() * each) as i64,
        "ours: increments lost or doubled"
    );
    Figures {
        increments: clients() * each,
        elapsed,
        requests: after - before - 1,
    }
}

/// kazoo's `Counter`, or `Err(why)` when it cannot run here.
fn kazoo(server: &TestServer, path: &str, each: usize) -> Result<Figures, String> {
    let args = [
        server.connect_string(),
        path.to_string(),
        clients().to_string(),
        each.to_string(),
    ];
    let mut script = kazoo::Script::ready("kazoo_counter.py", &args)?;
    let before = curator::mntr(server.addr(), "zk_packets_received");
    script.send("go");
    let result = script.next();
    let after = curator::mntr(server.addr(), "zk_packets_received");
    script.send("close");
    assert!(script.success(), "kazoo_counter.py failed");
    let fields: Vec<&str> = result.split_whitespace().collect();
    let (ms, value) = match fields[..] {
        ["RESULT", ms, value] => (ms.parse::<u64>().ok(), value.parse::<i64>().ok()),
        _ => (None, None),
    };
    let (Some(ms), Some(value)) = (ms, value) else {
        panic!("kazoo_counter.py said {result}");
    };
    assert_eq!(
        value,
        (clients() * each) as i64,
        "kazoo: increments lost or doubled"
    );
    Ok(Figures {
        increments: clients() * each,
        elapsed: Duration::from_millis(ms),
        requests: after - before - 1,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let each = if quick { 20 } else { 100 };
    let rounds: usize = std::env::var("COUNTER_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 5 });
    let server = TestServer::start().unwrap();
    println!(
        "server {} (data dir on disk under {}); {} clients x {each} increments, \
         {rounds} rounds",
        server.connect_string(),
        std::env::temp_dir().display(),
        clients()
    );
    let mut a = Vec::new();
    let mut k = Vec::new();
    let mut skipped = None;
    // One warm-up round each, not reported: the server's JIT, the connections.
    let _ = ours(&server, "/bench-counter/warm-ours", each).await;
    if let Err(why) =
        tokio::task::block_in_place(|| kazoo(&server, "/bench-counter/warm-kazoo", each))
    {
        skipped = Some(why);
    }
    for round in 0..rounds {
        let f = ours(&server, &format!("/bench-counter/ours-{round}"), each).await;
        eprintln!(
            "round {round}: ours {:.0} increments/s, {:.2} requests/increment",
            f.rate(),
            f.per_increment()
        );
        a.push(f);
        if skipped.is_some() {
            continue;
        }
        let path = format!("/bench-counter/kazoo-{round}");
        match tokio::task::block_in_place(|| kazoo(&server, &path, each)) {
            Ok(f) => {
                eprintln!(
                    "round {round}: kazoo {:.0} increments/s, {:.2} requests/increment",
                    f.rate(),
                    f.per_increment()
                );
                k.push(f);
            }
            Err(why) => skipped = Some(why),
        }
    }
    drop(server);
    println!();
    println!(
        "| {:<30} | {:>10} | {:>16} | {:>14} | {:>20} |",
        "counter (sessions, median)",
        "increments",
        "increments / s",
        "requests / inc.",
        "incr./s per round"
    );
    println!(
        "|{:-<32}|{:->12}|{:->18}|{:->16}|{:->22}|",
        "", "", "", "", ""
    );
    for (name, fs) in [("zk-recipes Counter", &a), ("kazoo 2 Counter", &k)] {
        if fs.is_empty() {
            continue;
        }
        let rates: Vec<String> = fs.iter().map(|f| format!("{:.0}", f.rate())).collect();
        println!(
            "| {:<30} | {:>10} | {:>16.0} | {:>14.2} | {:>20} |",
            name,
            fs[0].increments,
            median(fs.iter().map(Figures::rate).collect()),
            median(fs.iter().map(Figures::per_increment).collect()),
            rates.join(" ")
        );
    }
    match skipped {
        Some(why) => println!("\nkazoo skipped: {why}"),
        None => {
            let ratio: Vec<f64> = a.iter().zip(&k).map(|(a, k)| a.rate() / k.rate()).collect();
            println!(
                "\nours / kazoo increments/s, per round: {} (median {:.2})",
                ratio
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                median(ratio.clone())
            );
        }
    }
}
