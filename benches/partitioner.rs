//! Set partitioner benchmark against a real ZooKeeper 3.8 (data dir on disk: every lock
//! node create and delete is an fsync'd transaction): `cargo bench --bench partitioner`
//! (`BENCH_QUICK=1`: 2 re-divisions instead of 5).
//!
//! 7 members (one session each) hold their shares of 1,000 items; an 8th joins: the
//! time from its join to every member's `Acquired` of the new division (each of the 7
//! is told to release, releases its ~143 item locks, and takes its 125; the 8th takes
//! its 125), then the 8th finishes and the 7 divide again (not timed). Ours
//! (`Client::partitioner`) and kazoo 2.8's `SetPartitioner` (Debian's `python3-kazoo`,
//! `benches/kazoo/kazoo_partitioner.py`: 8 members in one Python process, a thread
//! each running kazoo's documented loop), one after the other on the same server, with
//! the same 100 ms `time_boundary` (which each re-division waits at least once).
//! Reported: the median and worst re-division, the same less the time boundary, and the
//! requests per re-division (`mntr`'s `zk_packets_received` delta over the timed
//! window, pings included, the probe's own packet subtracted).
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

#[path = "support/curator.rs"]
mod curator;
#[path = "support/kazoo.rs"]
mod kazoo;

use std::time::{Duration, Instant};

use zk_recipes_testing::TestServer;
use zk_recipes_tokio::{connect, Client, Options, SetPartitioner};

const ITEMS: usize = 1000;
const MEMBERS: usize = 7;
const BOUNDARY: Duration = Duration::from_millis(100);

struct Figures {
    times: Vec<Duration>,
    requests: Vec<i64>,
}

fn items() -> Vec<String> {
    (0..ITEMS).map(|i| format!("item-{i:04}")).collect()
}

fn join(zk: &Client, path: &str, id: &str) -> SetPartitioner {
    zk.partitioner(path, &items())
        .identifier(id)
        .time_boundary(BOUNDARY)
        .join()
        .unwrap()
}

/// Each member's share of `n` members, by its place among the identifiers.
fn share(place: usize, n: usize) -> usize {
    ITEMS / n + usize::from(place < ITEMS % n)
}

/// Every member (sorted by identifier) releases if told, then holds its share.
async fn divided(members: Vec<SetPartitioner>) -> Vec<SetPartitioner> {
    let n = members.len();
    let tasks: Vec<_> = members
        .into_iter()
        .enumerate()
        .map(|(place, mut m)| {
            tokio::spawn(async move {
                loop {
                    let held = m.acquired().await.unwrap();
                    if held.len() == share(place, n) {
                        return m;
                    }
                    m.release_needed().await.unwrap();
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

async fn ours(server: &TestServer, rounds: usize) -> Figures {
    let path = "/bench-partitioner/ours";
    let mut clients = Vec::new();
    for _ in 0..=MEMBERS {
        clients.push(
            connect(&server.connect_string(), Options::default())
                .await
                .unwrap(),
        );
    }
    let mut members: Vec<_> = (0..MEMBERS)
        .map(|i| join(&clients[i], path, &format!("m{i:02}")))
        .collect();
    members = divided(members).await;
    let mut f = Figures {
        times: Vec::new(),
        requests: Vec::new(),
    };
    for round in 1..=rounds {
        let before = curator::mntr(server.addr(), "zk_packets_received");
        let t = Instant::now();
        members.push(join(&clients[MEMBERS], path, &format!("z{round:02}")));
        members = divided(members).await;
        f.times.push(t.elapsed());
        let after = curator::mntr(server.addr(), "zk_packets_received");
        f.requests.push(after - before - 1);
        members.pop().unwrap().finish().await.unwrap();
        members = divided(members).await;
    }
    for m in members {
        m.finish().await.unwrap();
    }
    for zk in clients {
        zk.close().await;
    }
    f
}

/// kazoo's `SetPartitioner`, or `Err(why)` when it cannot run here.
fn kazoo(server: &TestServer, rounds: usize) -> Result<Figures, String> {
    let args = [
        server.connect_string(),
        "/bench-partitioner/kazoo".into(),
        ITEMS.to_string(),
        MEMBERS.to_string(),
        BOUNDARY.as_secs_f64().to_string(),
    ];
    let mut script = kazoo::Script::ready("kazoo_partitioner.py", &args)?;
    let mut f = Figures {
        times: Vec::new(),
        requests: Vec::new(),
    };
    for _ in 0..rounds {
        let before = curator::mntr(server.addr(), "zk_packets_received");
        script.send("join");
        let result = script.next();
        let after = curator::mntr(server.addr(), "zk_packets_received");
        let ms: f64 = match result.split_whitespace().collect::<Vec<_>>()[..] {
            ["RESULT", ms] => ms.parse().map_err(|_| result.clone())?,
            _ => return Err(result),
        };
        f.times.push(Duration::from_secs_f64(ms / 1e3));
        f.requests.push(after - before - 1);
        script.send("leave");
        assert_eq!(script.next(), "LEFT");
    }
    script.send("quit");
    assert_eq!(script.next(), "DONE");
    assert!(script.success(), "kazoo_partitioner.py failed");
    Ok(f)
}

fn row(name: &str, f: &Figures) {
    let mut t = f.times.clone();
    t.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let median = t[t.len() / 2];
    let requests = f.requests.iter().sum::<i64>() as f64 / f.requests.len() as f64;
    println!(
        "| {:<34} | {:>10.1} | {:>10.1} | {:>18.1} | {:>20.0} |",
        name,
        ms(median),
        ms(t[t.len() - 1]),
        ms(median.saturating_sub(BOUNDARY)),
        requests
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = if std::env::var_os("BENCH_QUICK").is_some() {
        2
    } else {
        5
    };
    let server = TestServer::start().unwrap();
    println!(
        "server {}; {ITEMS} items, {MEMBERS} members + 1 joining, {rounds} re-divisions, \
         time boundary {BOUNDARY:?}",
        server.connect_string()
    );
    let a = ours(&server, rounds).await;
    let (k, _server) = tokio::task::spawn_blocking(move || (kazoo(&server, rounds), server))
        .await
        .unwrap();
    println!();
    println!(
        "| {:<34} | {:>10} | {:>10} | {:>18} | {:>20} |",
        "re-divide 1,000 items, 7 -> 8",
        "median ms",
        "worst ms",
        "median - boundary",
        "requests/re-division"
    );
    println!(
        "|{:-<36}|{:->12}|{:->12}|{:->20}|{:->22}|",
        "", "", "", "", ""
    );
    row("zk-recipes partitioner", &a);
    match k {
        Ok(k) => row("kazoo 2.8 SetPartitioner", &k),
        Err(why) => println!("| kazoo 2.8 SetPartitioner: not run ({why}) |"),
    }
}
