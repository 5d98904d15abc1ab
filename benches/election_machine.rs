//! Cost of the election machines themselves, no I/O: `cargo bench --bench election_machine`.
//!
//! * A failover as a follower sees it: join (create2 + listing + own-node read +
//!   the predecessor's child watch: 4 replies), the predecessor's deletion (1 watch), acknowledge
//!   (1 multi reply), close (1 delete reply): 8 inputs (plus the 4 commands).
//! * An observer reading a 100-candidate listing (1 listing + 100 reads + ack read).
//!
//! Listings handed to the machines are built outside the measured part.

use bytes::Bytes;
use criterion::{black_box, criterion_group, BatchSize, Criterion, Throughput};
use zk_recipes::client::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::election::observer::Observer;
use zk_recipes::recipe::election::{Election, ElectionConfig};
use zk_recipes::recipe::{Machine, OpId, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const T: Instant = Instant::ZERO;
const DIR: &str = "/app/election";
const PREDECESSOR: &str = "/app/election/_c_a-latch-0000000008";

/// Answers every request the machine sent, as a server would; the listing once.
/// Returns the op of the last watching read of `watched`, if any.
fn answer<R: Recipe>(r: &mut R, children: &mut Option<Vec<String>>, watched: &str) -> Option<OpId> {
    let sent: Vec<(OpId, Request)> = std::iter::from_fn(|| r.poll_request()).collect();
    let mut watch = None;
    for (id, req) in &sent {
        let reply: Result<Response, Error> = match req {
            Request::Create2(c) => Ok(Response::PathStat {
                path: format!("{}0000000009", c.path),
                stat: Stat {
                    czxid: 9,
                    ephemeral_owner: 1,
                    ..Stat::default()
                },
            }),
            // The predecessor is watched with a child watch (its deletion fires it).
            Request::GetChildren(g) if g.path == watched && g.watch => {
                watch = Some(*id);
                Ok(Response::Children(Vec::new()))
            }
            Request::GetChildren(_) => Ok(Response::Children(children.take().unwrap_or_default())),
            Request::GetData(g) => {
                if g.path == watched {
                    watch = Some(*id);
                }
                Ok(Response::Data {
                    data: Bytes::from_static(b"participant"),
                    stat: Stat::default(),
                })
            }
            Request::Multi(ops) => Ok(Response::Multi(vec![MultiResult::Check; ops.len()])),
            _ => Ok(Response::Empty),
        };
        r.handle_reply(T, *id, reply);
    }
    while r.poll_event().is_some() {}
    watch
}

fn failover(children: Vec<String>) {
    let mut children = Some(children);
    let mut e = Election::new(ElectionConfig::new(DIR, "node-1", (7, 9)));
    e.handle_session(T, SessionChange::Connected { session_id: 1 });
    e.join(T);
    answer(&mut e, &mut children, PREDECESSOR); // create2 + listing
    let op = answer(&mut e, &mut children, PREDECESSOR).unwrap_or(0); // own + predecessor
    e.handle_watch(
        T,
        op,
        &WatchEvent {
            event_type: EventType::NodeDeleted,
            path: PREDECESSOR.into(),
        },
    );
    assert!(e.is_leader());
    e.acknowledge(T);
    answer(&mut e, &mut children, "");
    e.close(T);
    answer(&mut e, &mut children, "");
    black_box(e.is_done());
}

fn observe(children: Vec<String>) {
    let mut children = Some(children);
    let mut o = Observer::new(DIR);
    o.handle_session(T, SessionChange::Connected { session_id: 1 });
    o.start(T);
    answer(&mut o, &mut children, ""); // listing + ack
    answer(&mut o, &mut children, ""); // 100 reads
    black_box(o.leader());
}

/// The listings: a candidate line (us behind our predecessor), and 100 candidates.
fn listings() -> (Vec<String>, Vec<String>) {
    let line: Vec<String> = vec![
        format!(
            "_c_{}-latch-0000000009",
            zk_recipes::recipe::lock::node_id(7, 10)
        ),
        "_c_a-latch-0000000008".into(),
    ];
    let many: Vec<String> = (0..100)
        .map(|i| format!("_c_{i:08x}-latch-{:010}", 100 + i))
        .collect();
    (line, many)
}

fn benches(c: &mut Criterion) {
    println!(
        "size_of::<Election>() = {} bytes, size_of::<Observer>() = {} bytes (plus strings)",
        std::mem::size_of::<Election>(),
        std::mem::size_of::<Observer>()
    );
    let mut g = c.benchmark_group("election machine");
    let (line, many) = listings();
    g.throughput(Throughput::Elements(8));
    g.bench_function("follower to leader, acknowledge, close (8 inputs)", |b| {
        b.iter_batched(|| line.clone(), failover, BatchSize::SmallInput)
    });
    g.throughput(Throughput::Elements(102));
    g.bench_function("observer: 100-candidate view (102 inputs)", |b| {
        b.iter_batched(|| many.clone(), observe, BatchSize::SmallInput)
    });
    g.finish();
}

#[path = "support/cycles.rs"]
mod cycles;

criterion_group!(election_machine, benches);

fn main() {
    let (line, many) = listings();
    let cycled = cycles::run_cycles(|case| {
        match case {
            "failover" => failover(line.clone()),
            "observer" => observe(many.clone()),
            _ => return false,
        }
        true
    });
    if !cycled {
        election_machine();
        Criterion::default().configure_from_args().final_summary();
    }
}
