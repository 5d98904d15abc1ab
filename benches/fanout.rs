//! The session's watch registry at scale: one notification fanned out to N registrants
//! of one path, and N registrants forgotten one by one (`cargo bench --bench fanout`).
//! Both were quadratic before (40,000 registrants: 292 ms in `handle_bytes`).

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use zk_recipes::proto::*;
use zk_recipes::session::{Session, SessionConfig, Token, Transport};
use zk_recipes::time::Instant;

const T: Instant = Instant::ZERO;

/// A connected session with `n` registrants of a data watch on `/hot`.
fn session_with(n: u64) -> Session {
    let mut c = SessionConfig::new("h:1".parse().unwrap());
    c.max_pending = n as usize + 10;
    c.max_watches = n as usize + 10;
    let mut s = Session::new(c, T);
    assert!(matches!(
        s.poll_transport(),
        Some(Transport::Connect { .. })
    ));
    s.handle_connected(T);
    s.poll_transmit(&mut BytesMut::new());
    let mut b = BytesMut::new();
    encode_connect_response(
        &mut b,
        &ConnectResponse {
            protocol_version: 0,
            timeout_ms: 30_000,
            session_id: 1,
            passwd: bytes::Bytes::from_static(&[0; 16]),
            read_only: false,
        },
    );
    s.handle_bytes(T, &b);
    let mut replies = BytesMut::new();
    for i in 0..n {
        let req = Request::Exists(PathWatch {
            path: "/hot".into(),
            watch: true,
        });
        s.submit(T, req, Token(i + 1)).unwrap();
        let header = ReplyHeader {
            xid: i as i32 + 1,
            zxid: 1,
            err: 0,
        };
        encode_reply(
            &mut replies,
            &header,
            Some(&Response::Stat(Stat::default())),
        );
    }
    s.poll_transmit(&mut BytesMut::new());
    s.handle_bytes(T, &replies);
    while s.poll_event().is_some() {}
    assert_eq!(s.watch_count(), n as usize);
    s
}

fn benches(c: &mut Criterion) {
    let mut deleted = BytesMut::new();
    encode_notification(
        &mut deleted,
        &WatcherEvent {
            event_type: EventType::NodeDeleted.to_i32(),
            state: 3,
            path: "/hot".into(),
        },
    );
    let mut g = c.benchmark_group("watch registry");
    g.sample_size(10);
    for n in [1_000u64, 10_000, 40_000] {
        g.bench_with_input(
            BenchmarkId::new("fan-out of one notification", n),
            &n,
            |b, &n| {
                b.iter_batched(
                    || session_with(n),
                    |mut s| {
                        s.handle_bytes(T, &deleted);
                        let mut k = 0;
                        while s.poll_event().is_some() {
                            k += 1;
                        }
                        assert_eq!(k, n);
                    },
                    BatchSize::LargeInput,
                )
            },
        );
        g.bench_with_input(
            BenchmarkId::new("forget every registrant", n),
            &n,
            |b, &n| {
                b.iter_batched(
                    || session_with(n),
                    |mut s| {
                        for t in 0..n {
                            s.forget_watches(Token(t + 1));
                        }
                        assert_eq!(s.watch_count(), 0);
                    },
                    BatchSize::LargeInput,
                )
            },
        );
    }
    g.finish();
}

criterion_group!(fanout, benches);
criterion_main!(fanout);
