//! Cost of the lock machine itself, no I/O: `cargo bench --bench lock_machine`.
//! An uncontended cycle: acquire, create2 reply, own-node read, listing, release, delete
//! reply (6 inputs). A contended handoff adds the blocker read and its deletion (8).
//! The listing handed to the machine is built outside the measured part.

use bytes::Bytes;
use criterion::{black_box, criterion_group, BatchSize, Criterion, Throughput};
use zk_recipes::client::Error;
use zk_recipes::proto::*;
use zk_recipes::recipe::lock::{Lock, LockConfig, LockKind};
use zk_recipes::recipe::{Machine, Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const T: Instant = Instant::ZERO;
const ID: &str = "6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90";
const BLOCKER: &str = "/locks/job/_c_a-lock-0000000008";

/// Answers every request the machine sent, as a server would; the listing once.
fn answer(l: &mut Lock, children: &mut Option<Vec<String>>) -> usize {
    let sent: Vec<(u64, Request)> = std::iter::from_fn(|| l.poll_request()).collect();
    for (id, req) in &sent {
        let reply: Result<Response, Error> = match req {
            Request::Create2(_) => Ok(Response::PathStat {
                path: format!("/locks/job/_c_{ID}-lock-0000000009"),
                stat: Stat {
                    czxid: 9,
                    ephemeral_owner: 1,
                    ..Stat::default()
                },
            }),
            Request::GetChildren(_) => Ok(Response::Children(children.take().unwrap_or_default())),
            Request::GetData(_) => Ok(Response::Data {
                data: Bytes::new(),
                stat: Stat::default(),
            }),
            _ => Ok(Response::Empty),
        };
        l.handle_reply(T, *id, reply);
    }
    while l.poll_event().is_some() {}
    sent.len()
}

fn cycle(children: Vec<String>, blocker: bool) {
    let mut children = Some(children);
    let mut l = Lock::new(LockConfig::new("/locks/job", LockKind::Exclusive, ID));
    l.handle_session(T, SessionChange::Connected { session_id: 1 });
    l.acquire(T, None);
    answer(&mut l, &mut children); // create2 + listing
    answer(&mut l, &mut children); // own-node watch, blocker watch
    if blocker {
        l.handle_watch(
            T,
            0,
            &WatchEvent {
                event_type: EventType::NodeDeleted,
                path: BLOCKER.into(),
            },
        );
        answer(&mut l, &mut children);
    }
    l.release(T);
    answer(&mut l, &mut children);
    black_box(l.is_done());
}

/// The listings the two cycles are handed: free (ours and another child), and busy
/// (100 waiters queued behind us, our predecessor, and us).
fn listings() -> (Vec<String>, Vec<String>) {
    let free = vec![format!("_c_{ID}-lock-0000000009"), "config".into()];
    let mut busy: Vec<String> = (0..100)
        .map(|i| format!("_c_{i:08x}-lock-{:010}", 100 + i))
        .collect();
    busy.push(format!("_c_{ID}-lock-0000000009"));
    busy.push("_c_a-lock-0000000008".into());
    (free, busy)
}

fn benches(c: &mut Criterion) {
    println!(
        "size_of::<Lock>() = {} bytes (plus its strings: dir, id, node name)",
        std::mem::size_of::<Lock>()
    );
    let mut g = c.benchmark_group("lock machine");
    let (free, busy) = listings();
    g.throughput(Throughput::Elements(6));
    g.bench_function("uncontended cycle (6 inputs)", |b| {
        b.iter_batched(|| free.clone(), |c| cycle(c, false), BatchSize::SmallInput)
    });
    g.throughput(Throughput::Elements(8));
    g.bench_function("handoff cycle with a 100-child listing (8 inputs)", |b| {
        b.iter_batched(|| busy.clone(), |c| cycle(c, true), BatchSize::SmallInput)
    });
    g.finish();
}

#[path = "support/cycles.rs"]
mod cycles;

criterion_group!(lock_machine, benches);

fn main() {
    let (free, busy) = listings();
    let cycled = cycles::run_cycles(|case| {
        match case {
            "uncontended" => cycle(free.clone(), false),
            "handoff" => cycle(busy.clone(), true),
            _ => return false,
        }
        true
    });
    if !cycled {
        lock_machine();
        Criterion::default().configure_from_args().final_summary();
    }
}
