//! Codec micro-benchmarks: the frames a recipe-heavy client decodes and encodes most.
//! `cargo bench --bench codec`

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use zk_recipes::proto::*;

fn reply_frame(op_body: &Response) -> Vec<u8> {
    let mut buf = BytesMut::new();
    encode_reply(
        &mut buf,
        &ReplyHeader {
            xid: 1,
            zxid: 42,
            err: 0,
        },
        Some(op_body),
    );
    buf.to_vec()
}

fn decode(frame: &[u8], op: OpCode) -> Response {
    let mut dec = FrameDecoder::new(4 << 20);
    let body = dec.decode(&mut &frame[..]).unwrap().unwrap();
    let (_, rest) = decode_reply(body).unwrap();
    Response::decode(op, rest).unwrap()
}

fn benches(c: &mut Criterion) {
    let children: Vec<String> = (0..1000)
        .map(|i| format!("_c_6f1c2a4e-2b1d-4d7e-9a63-{i:012}-lock-{i:010}"))
        .collect();
    let frame = reply_frame(&Response::Children2 {
        children,
        stat: Stat::default(),
    });
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("getChildren2 reply, 1000 children", |b| {
        b.iter(|| decode(black_box(&frame), OpCode::GetChildren2))
    });
    let frame = reply_frame(&Response::Data {
        data: Bytes::from(vec![7u8; 1 << 20]),
        stat: Stat::default(),
    });
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("getData reply, 1 MiB", |b| {
        b.iter(|| decode(black_box(&frame), OpCode::GetData))
    });
    let results: Vec<MultiResult> = (0..100)
        .map(|i| MultiResult::Create(format!("/app/items/item-{i:010}")))
        .collect();
    let frame = reply_frame(&Response::Multi(results));
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("multi reply, 100 creates", |b| {
        b.iter(|| decode(black_box(&frame), OpCode::Multi))
    });
    g.finish();

    let mut g = c.benchmark_group("encode");
    let ops: Vec<MultiOp> = (0..100)
        .map(|i| {
            MultiOp::Create(CreateRequest::new(
                format!("/app/items/item-{i}"),
                Bytes::from_static(b"payload"),
                Acl::open_unsafe(),
                CreateMode::Persistent,
            ))
        })
        .collect();
    let multi = Request::Multi(ops);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    g.bench_function("multi request, 100 creates", |b| {
        b.iter(|| {
            buf.clear();
            encode_request(&mut buf, 9, black_box(&multi), DEFAULT_MAX_REQUEST).unwrap();
        })
    });
    let get = Request::GetData(PathWatch {
        path: "/app/config/database-url".into(),
        watch: true,
    });
    g.bench_function("getData request", |b| {
        b.iter(|| {
            buf.clear();
            encode_request(&mut buf, 9, black_box(&get), DEFAULT_MAX_REQUEST).unwrap();
        })
    });
    g.finish();
}

criterion_group!(codec, benches);
criterion_main!(codec);
