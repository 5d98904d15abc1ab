//! Cost of the lock machine itself, no I/O: `cargo bench --bench lock_machine`.
//! One uncontended cycle is 6 inputs (acquire, create2 reply, listing, own-node read,
//! release, delete reply); one contended handoff adds a blocker read and its watch event.

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use zk_recipes::proto::*;
use zk_recipes::recipe::lock::{Lock, LockConfig, LockKind};
use zk_recipes::recipe::{Recipe, SessionChange};
use zk_recipes::session::WatchEvent;
use zk_recipes::time::Instant;

const T: Instant = Instant::ZERO;
const ID: &str = "6f1c2a4e-2b1d-4d7e-9a63-0c2f5a7b8d90";

fn drain(l: &mut Lock) -> Vec<u64> {
    let ids: Vec<u64> = std::iter::from_fn(|| l.poll_request())
        .map(|(id, _)| id)
        .collect();
    while l.poll_event().is_some() {}
    ids
}

fn cycle(children: &[String], blocker: bool) {
    let mut l = Lock::new(LockConfig::new("/locks/job", LockKind::Exclusive, ID));
    l.handle_session(T, SessionChange::Connected { session_id: 1 });
    l.acquire(T, None);
    let r = drain(&mut l);
    let path = format!("/locks/job/_c_{ID}-lock-0000000009");
    l.handle_reply(
        T,
        r[0],
        Ok(Response::PathStat {
            path,
            stat: Stat {
                czxid: 9,
                ephemeral_owner: 1,
                ..Stat::default()
            },
        }),
    );
    l.handle_reply(T, r[1], Ok(Response::Children(children.to_vec())));
    let mut next = drain(&mut l);
    if blocker {
        l.handle_reply(
            T,
            next[0],
            Ok(Response::Data {
                data: Bytes::new(),
                stat: Stat::default(),
            }),
        );
        l.handle_watch(
            T,
            next[0],
            &WatchEvent {
                event_type: EventType::NodeDeleted,
                path: "/locks/job/_c_a-lock-0000000008".into(),
            },
        );
        next = drain(&mut l);
    }
    l.handle_reply(
        T,
        next[0],
        Ok(Response::Data {
            data: Bytes::new(),
            stat: Stat::default(),
        }),
    );
    l.release(T);
    let d = drain(&mut l);
    l.handle_reply(T, d[0], Ok(Response::Empty));
    drain(&mut l);
    black_box(l.is_done());
}

fn benches(c: &mut Criterion) {
    println!(
        "size_of::<Lock>() = {} bytes (plus its strings: dir, id, node name)",
        std::mem::size_of::<Lock>()
    );
    let mut g = c.benchmark_group("lock machine");
    let free = vec![format!("_c_{ID}-lock-0000000009"), "config".into()];
    g.throughput(Throughput::Elements(6));
    g.bench_function("uncontended cycle (6 inputs)", |b| {
        b.iter(|| cycle(black_box(&free), false))
    });
    // 100 waiters queued behind us (higher sequences), our predecessor, and us.
    let mut busy: Vec<String> = (0..100)
        .map(|i| format!("_c_{i:08x}-lock-{:010}", 100 + i))
        .collect();
    busy.push(format!("_c_{ID}-lock-0000000009"));
    busy.push("_c_a-lock-0000000008".into());
    g.throughput(Throughput::Elements(8));
    g.bench_function("handoff cycle with a 100-child listing (8 inputs)", |b| {
        b.iter(|| cycle(black_box(&busy), true))
    });
    g.finish();
}

criterion_group!(lock_machine, benches);
criterion_main!(lock_machine);
