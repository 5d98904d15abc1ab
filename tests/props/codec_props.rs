//! Property tests for the codec: encode→decode round trips for every request and reply
//! shape, decoders total on arbitrary bytes, and frames split at every byte boundary.

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use zk_recipes::proto::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "/[a-z0-9_/.-]{0,24}",
        any::<String>().prop_map(|s| s.chars().take(12).collect())
    ]
}
fn blob() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..64).prop_map(Bytes::from)
}
fn stat() -> impl Strategy<Value = Stat> {
    (
        any::<[i64; 4]>(),
        any::<[i32; 3]>(),
        any::<i64>(),
        any::<[i32; 2]>(),
        any::<i64>(),
    )
        .prop_map(|(z, v, owner, n, pzxid)| Stat {
            czxid: z[0],
            mzxid: z[1],
            ctime: z[2],
            mtime: z[3],
            version: v[0],
            cversion: v[1],
            aversion: v[2],
            ephemeral_owner: owner,
            data_length: n[0],
            num_children: n[1],
            pzxid,
        })
}
fn acls() -> impl Strategy<Value = Vec<Acl>> {
    vec(
        (any::<i32>(), text(), text()).prop_map(|(p, s, i)| Acl::new(p, &s, &i)),
        0..4,
    )
}
fn create() -> impl Strategy<Value = CreateRequest> {
    (text(), blob(), acls(), any::<i32>()).prop_map(|(path, data, acl, flags)| CreateRequest {
        path,
        data,
        acl,
        flags,
    })
}
fn create_ttl() -> impl Strategy<Value = CreateTtlRequest> {
    (create(), any::<i64>()).prop_map(|(c, ttl)| CreateTtlRequest {
        path: c.path,
        data: c.data,
        acl: c.acl,
        flags: c.flags,
        ttl,
    })
}
fn pw() -> impl Strategy<Value = PathWatch> {
    (text(), any::<bool>()).prop_map(|(path, watch)| PathWatch { path, watch })
}
fn pr() -> impl Strategy<Value = PathRequest> {
    text().prop_map(|path| PathRequest { path })
}
fn pv() -> impl Strategy<Value = (String, i32)> {
    (text(), any::<i32>())
}
fn paths() -> impl Strategy<Value = Vec<String>> {
    vec(text(), 0..4)
}

fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        create().prop_map(MultiOp::Create),
        create().prop_map(MultiOp::Create2),
        create().prop_map(MultiOp::CreateContainer),
        create_ttl().prop_map(MultiOp::CreateTtl),
        pv().prop_map(|(path, version)| MultiOp::Delete(DeleteRequest { path, version })),
        (text(), blob(), any::<i32>()).prop_map(|(path, data, version)| MultiOp::SetData(
            SetDataRequest {
                path,
                data,
                version
            }
        )),
        pv().prop_map(|(path, version)| MultiOp::Check(CheckVersionRequest { path, version })),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        create().prop_map(Request::Create),
        create().prop_map(Request::Create2),
        create().prop_map(Request::CreateContainer),
        create_ttl().prop_map(Request::CreateTtl),
        pv().prop_map(|(path, version)| Request::Delete(DeleteRequest { path, version })),
        pw().prop_map(Request::Exists),
        pw().prop_map(Request::GetData),
        (text(), blob(), any::<i32>()).prop_map(|(path, data, version)| Request::SetData(
            SetDataRequest {
                path,
                data,
                version
            }
        )),
        pr().prop_map(Request::GetAcl),
        (text(), acls(), any::<i32>())
            .prop_map(|(path, acl, version)| Request::SetAcl(SetAclRequest { path, acl, version })),
        pw().prop_map(Request::GetChildren),
        pw().prop_map(Request::GetChildren2),
        pr().prop_map(Request::Sync),
        Just(Request::Ping),
        vec(multi_op(), 0..6).prop_map(Request::Multi),
        vec(
            prop_oneof![
                pw().prop_map(ReadOp::GetData),
                pw().prop_map(ReadOp::GetChildren)
            ],
            0..6
        )
        .prop_map(Request::MultiRead),
        (text(), text(), text(), any::<i64>()).prop_map(|(a, b, c, id)| Request::Reconfig(
            ReconfigRequest {
                joining_servers: a,
                leaving_servers: b,
                new_members: c,
                cur_config_id: id
            }
        )),
        pv().prop_map(|(path, t)| Request::CheckWatches(WatchesRequest {
            path,
            watcher_type: t
        })),
        pv().prop_map(|(path, t)| Request::RemoveWatches(WatchesRequest {
            path,
            watcher_type: t
        })),
        pv().prop_map(|(path, mode)| Request::AddWatch(AddWatchRequest { path, mode })),
        (any::<i32>(), text(), blob()).prop_map(|(auth_type, scheme, auth)| Request::Auth(
            AuthPacket {
                auth_type,
                scheme,
                auth
            }
        )),
        (any::<i64>(), paths(), paths(), paths()).prop_map(|(z, d, e, c)| Request::SetWatches(
            SetWatches {
                relative_zxid: z,
                data_watches: d,
                exist_watches: e,
                child_watches: c
            }
        )),
        (any::<i64>(), paths(), paths(), paths(), paths(), paths()).prop_map(
            |(z, d, e, c, p, r)| Request::SetWatches2(SetWatches2 {
                relative_zxid: z,
                data_watches: d,
                exist_watches: e,
                child_watches: c,
                persistent_watches: p,
                persistent_recursive_watches: r
            })
        ),
        blob().prop_map(|token| Request::Sasl(SaslToken { token })),
        pr().prop_map(Request::GetEphemerals),
        pr().prop_map(Request::GetAllChildrenNumber),
        Just(Request::WhoAmI),
        Just(Request::CloseSession),
    ]
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    any::<i32>().prop_map(ErrorCode::from_i32)
}

/// (opcode the reply answers, reply) — only shapes that opcode can produce.
fn reply() -> impl Strategy<Value = (OpCode, Response)> {
    let multi_result = prop_oneof![
        text().prop_map(MultiResult::Create),
        (text(), stat()).prop_map(|(path, stat)| MultiResult::Create2 { path, stat }),
        Just(MultiResult::Delete),
        stat().prop_map(MultiResult::SetData),
        Just(MultiResult::Check),
        (blob(), stat()).prop_map(|(data, stat)| MultiResult::GetData { data, stat }),
        paths().prop_map(MultiResult::GetChildren),
        error_code().prop_map(MultiResult::Error),
    ];
    prop_oneof![
        Just((OpCode::Delete, Response::Empty)),
        Just((OpCode::SetWatches2, Response::Empty)),
        text().prop_map(|p| (OpCode::Create, Response::Path(p))),
        text().prop_map(|p| (OpCode::Sync, Response::Path(p))),
        (text(), stat())
            .prop_map(|(path, stat)| (OpCode::Create2, Response::PathStat { path, stat })),
        (text(), stat())
            .prop_map(|(path, stat)| (OpCode::CreateTtl, Response::PathStat { path, stat })),
        stat().prop_map(|s| (OpCode::Exists, Response::Stat(s))),
        stat().prop_map(|s| (OpCode::SetAcl, Response::Stat(s))),
        (blob(), stat()).prop_map(|(data, stat)| (OpCode::GetData, Response::Data { data, stat })),
        (acls(), stat()).prop_map(|(acl, stat)| (OpCode::GetAcl, Response::Acl { acl, stat })),
        paths().prop_map(|c| (OpCode::GetChildren, Response::Children(c))),
        paths().prop_map(|c| (OpCode::GetEphemerals, Response::Children(c))),
        (paths(), stat()).prop_map(|(children, stat)| (
            OpCode::GetChildren2,
            Response::Children2 { children, stat }
        )),
        any::<i32>().prop_map(|n| (OpCode::GetAllChildrenNumber, Response::Count(n))),
        Just((OpCode::AddWatch, Response::WatchAdded)),
        blob().prop_map(|t| (OpCode::Sasl, Response::Sasl(t))),
        vec(
            (text(), text()).prop_map(|(auth_scheme, user)| ClientInfo { auth_scheme, user }),
            0..3
        )
        .prop_map(|c| (OpCode::WhoAmI, Response::WhoAmI(c))),
        vec(multi_result, 0..6).prop_map(|r| (OpCode::Multi, Response::Multi(r))),
    ]
}

/// Strings are decoded leniently, so only valid UTF-8 round-trips exactly — which is
/// all we can produce from a `String`.
fn frame_body(frame: &BytesMut) -> Bytes {
    FrameDecoder::new(usize::MAX >> 1)
        .decode(&mut &frame[..])
        .unwrap()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn request_round_trip(req in request(), xid in any::<i32>()) {
        let mut buf = BytesMut::new();
        encode_request(&mut buf, xid, &req, usize::MAX >> 1).unwrap();
        let (header, body) = decode_request(frame_body(&buf)).unwrap();
        prop_assert_eq!(header, RequestHeader { xid, op: req.op_code().to_i32() });
        prop_assert_eq!(Request::decode(header.op, body).unwrap(), req);
    }

    #[test]
    fn reply_round_trip((op, resp) in reply(), xid in any::<i32>(), zxid in any::<i64>()) {
        let mut buf = BytesMut::new();
        let header = ReplyHeader { xid, zxid, err: 0 };
        encode_reply(&mut buf, &header, Some(&resp));
        let (h, body) = decode_reply(frame_body(&buf)).unwrap();
        prop_assert_eq!(&h, &header);
        prop_assert_eq!(Response::decode(op, body).unwrap(), resp);
    }

    #[test]
    fn handshake_and_notification_round_trip(
        z in any::<i64>(), t in any::<i32>(), id in any::<i64>(), pw in blob(), ro in any::<bool>(),
        ty in any::<i32>(), st in any::<i32>(), path in text(),
    ) {
        let req = ConnectRequest { protocol_version: 0, last_zxid_seen: z, timeout_ms: t, session_id: id, passwd: pw.clone(), read_only: ro };
        let mut buf = BytesMut::new();
        encode_connect(&mut buf, &req);
        prop_assert_eq!(decode_exact::<ConnectRequest>(frame_body(&buf)).unwrap(), req);
        let resp = ConnectResponse { protocol_version: 0, timeout_ms: t, session_id: id, passwd: pw, read_only: ro };
        let mut buf = BytesMut::new();
        encode_connect_response(&mut buf, &resp);
        prop_assert_eq!(decode_exact::<ConnectResponse>(frame_body(&buf)).unwrap(), resp);
        let ev = WatcherEvent { event_type: ty, state: st, path };
        let mut buf = BytesMut::new();
        encode_notification(&mut buf, &ev);
        let (h, body) = decode_reply(frame_body(&buf)).unwrap();
        prop_assert_eq!(h.xid, -1);
        prop_assert_eq!(decode_exact::<WatcherEvent>(body).unwrap(), ev);
    }

    /// Any bytes into any decoder: Ok or Err, never a panic.
    #[test]
    fn decoders_are_total(bytes in vec(any::<u8>(), 0..256), op in any::<i32>()) {
        let b = Bytes::from(bytes.clone());
        let _ = Request::decode(op, b.clone());
        for code in OpCode::ALL {
            let _ = Response::decode(*code, b.clone());
        }
        let _ = decode_reply(b.clone());
        let _ = decode_request(b.clone());
        let _ = decode_exact::<ConnectRequest>(b.clone());
        let _ = decode_exact::<ConnectResponse>(b.clone());
        let _ = decode_exact::<WatcherEvent>(b.clone());
        let mut dec = FrameDecoder::new(128);
        let mut input = &bytes[..];
        while !input.is_empty() {
            match dec.decode(&mut input) {
                Ok(Some(frame)) => prop_assert!(frame.len() <= 128),
                Ok(None) => prop_assert!(input.is_empty()),
                Err(_) => break,
            }
            prop_assert!(dec.buffered() <= 128);
        }
    }

    /// A stream of frames split at any points yields the same frames.
    #[test]
    fn frames_survive_any_split(bodies in vec(vec(any::<u8>(), 0..40), 1..6), cuts in vec(any::<prop::sample::Index>(), 0..8)) {
        let mut stream = BytesMut::new();
        for b in &bodies {
            encode_frame(&mut stream, 1024, |out| out.extend_from_slice(b)).unwrap();
        }
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
        points.push(0);
        points.push(stream.len());
        points.sort_unstable();
        let mut dec = FrameDecoder::new(1024);
        let mut got = Vec::new();
        for w in points.windows(2) {
            let mut chunk = &stream[w[0]..w[1]];
            while let Some(f) = dec.decode(&mut chunk).unwrap() {
                got.push(f.to_vec());
            }
            prop_assert!(chunk.is_empty());
        }
        prop_assert_eq!(got, bodies);
    }
}

#[test]
fn every_split_point_of_a_real_stream() {
    // Exhaustive over split points for a three-frame stream, including one-byte reads.
    let mut stream = BytesMut::new();
    encode_request(
        &mut stream,
        1,
        &Request::GetData(PathWatch {
            path: "/a".into(),
            watch: true,
        }),
        1024,
    )
    .unwrap();
    encode_request(&mut stream, 2, &Request::Ping, 1024).unwrap();
    encode_request(
        &mut stream,
        3,
        &Request::Sync(PathRequest {
            path: "/x/y".into(),
        }),
        1024,
    )
    .unwrap();
    let whole = {
        let mut d = FrameDecoder::new(1024);
        let mut s = &stream[..];
        let mut v = Vec::new();
        while let Some(f) = d.decode(&mut s).unwrap() {
            v.push(f);
        }
        v
    };
    assert_eq!(whole.len(), 3);
    for cut in 0..=stream.len() {
        let mut d = FrameDecoder::new(1024);
        let mut got = Vec::new();
        for part in [&stream[..cut], &stream[cut..]] {
            let mut s = part;
            while let Some(f) = d.decode(&mut s).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, whole, "split at {cut}");
    }
    let mut d = FrameDecoder::new(1024);
    let mut got = Vec::new();
    for byte in stream.chunks(1) {
        let mut s = byte;
        while let Some(f) = d.decode(&mut s).unwrap() {
            got.push(f);
        }
    }
    assert_eq!(got, whole, "one byte at a time");
}

#[test]
fn bad_lengths_are_rejected_before_buffering() {
    let mut d = FrameDecoder::new(DEFAULT_MAX_REPLY);
    assert_eq!(
        d.decode(&mut &[0xff, 0xff, 0xff, 0xfe][..]),
        Err(FrameError::NegativeLength(-2))
    );
    let mut d = FrameDecoder::new(DEFAULT_MAX_REPLY);
    let huge = (DEFAULT_MAX_REPLY as i32 + 1).to_be_bytes();
    assert_eq!(
        d.decode(&mut &huge[..]),
        Err(FrameError::TooLarge {
            len: DEFAULT_MAX_REPLY + 1,
            max: DEFAULT_MAX_REPLY
        })
    );
    assert_eq!(d.buffered(), 0);
    // A length that claims more bytes than present inside a record is an error, and no
    // giant allocation happens: a vector claiming 2^31-1 children in a 12-byte body.
    let mut body = BytesMut::new();
    body.extend_from_slice(&i32::MAX.to_be_bytes());
    body.extend_from_slice(&[0; 8]);
    assert_eq!(
        Response::decode(OpCode::GetChildren, body.freeze()),
        Err(DecodeError::BadLength(i32::MAX))
    );
}

#[test]
fn oversized_requests_are_refused_and_leave_the_buffer_untouched() {
    let mut buf = BytesMut::from(&b"keep"[..]);
    let big = Request::SetData(SetDataRequest {
        path: "/a".into(),
        data: Bytes::from(vec![0u8; DEFAULT_MAX_REQUEST]),
        version: -1,
    });
    let err = encode_request(&mut buf, 1, &big, DEFAULT_MAX_REQUEST).unwrap_err();
    assert!(err.len > DEFAULT_MAX_REQUEST);
    assert_eq!(&buf[..], b"keep");
}

#[test]
fn error_codes_round_trip_and_keep_unknowns() {
    for code in ErrorCode::KNOWN {
        assert_eq!(ErrorCode::from_i32(code.to_i32()), *code);
    }
    assert_eq!(ErrorCode::from_i32(-9999), ErrorCode::Unknown(-9999));
    assert_eq!(ErrorCode::from_i32(-9999).to_i32(), -9999);
    assert_eq!(ErrorCode::NoNode.to_string(), "node does not exist (-101)");
}

#[test]
fn path_rules() {
    for ok in [
        "/",
        "/a",
        "/a/b",
        "/a/.b",
        "/a/..b",
        "/zookeeper",
        "/ü/日本",
    ] {
        assert_eq!(validate_path(ok), Ok(()), "{ok}");
    }
    assert_eq!(validate_path(""), Err(PathError::Empty));
    assert_eq!(validate_path("a/b"), Err(PathError::NotAbsolute));
    assert_eq!(validate_path("/a/"), Err(PathError::TrailingSlash));
    assert_eq!(validate_path("/a//b"), Err(PathError::EmptySegment));
    assert_eq!(validate_path("/a/./b"), Err(PathError::RelativeSegment));
    assert_eq!(validate_path("/a/.."), Err(PathError::RelativeSegment));
    assert!(matches!(
        validate_path("/a\u{1}"),
        Err(PathError::InvalidChar { offset: 2, .. })
    ));
    assert!(matches!(
        validate_path("/a\u{0}"),
        Err(PathError::InvalidChar { .. })
    ));
    assert!(matches!(
        validate_path("/a\u{9f}"),
        Err(PathError::InvalidChar { .. })
    ));
    assert!(matches!(
        validate_path("/\u{e000}"),
        Err(PathError::InvalidChar { .. })
    ));
    assert!(matches!(
        validate_path("/\u{fff0}"),
        Err(PathError::InvalidChar { .. })
    ));
    assert!(
        matches!(
            validate_path("/\u{1F600}"),
            Err(PathError::InvalidChar { .. })
        ),
        "non-BMP = surrogates in Java"
    );
    assert_eq!(validate_sequential_prefix("/a/"), Ok(()));
    assert_eq!(validate_sequential_prefix("/a/lock-"), Ok(()));
    assert_eq!(parent("/a/b"), Some("/a"));
    assert_eq!(parent("/a"), Some("/"));
    assert_eq!(parent("/"), None);
    let c = Chroot::new("/app").unwrap();
    assert_eq!(
        c.strip("/application"),
        "/application",
        "only whole segments are stripped"
    );
    assert_eq!(Chroot::new("/").unwrap(), Chroot::NONE);
    assert!(Chroot::new("app").is_err());
}
