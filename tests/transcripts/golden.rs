//! Every frame in `tests/data/zk-golden-vectors.json` (captured from a real ZooKeeper
//! 3.8.0) is a test. Client frames must be produced byte-exact by our encoder from the
//! recorded fields; server frames must decode to the recorded fields and re-encode
//! byte-exact. Expected values are read from the JSON, not written here.

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use zk_recipes::proto::*;

const VECTORS: &str = include_str!("../data/zk-golden-vectors.json");

fn all() -> Vec<Value> {
    serde_json::from_str::<Value>(VECTORS)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// (decoded fields, whole frame bytes)
fn vector(name: &str) -> (Value, Vec<u8>) {
    let v = all()
        .into_iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no vector {name}"));
    (v["decoded"].clone(), unhex(v["hex"].as_str().unwrap()))
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}
fn s(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_string()
}

fn stat(v: &Value) -> Stat {
    Stat {
        czxid: i(&v["czxid"]),
        mzxid: i(&v["mzxid"]),
        ctime: i(&v["ctime"]),
        mtime: i(&v["mtime"]),
        version: i(&v["version"]) as i32,
        cversion: i(&v["cversion"]) as i32,
        aversion: i(&v["aversion"]) as i32,
        ephemeral_owner: i(&v["ephemeralOwner"]),
        data_length: i(&v["dataLength"]) as i32,
        num_children: i(&v["numChildren"]) as i32,
        pzxid: i(&v["pzxid"]),
    }
}

fn acl(v: &Value) -> Vec<Acl> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| Acl::new(i(&a["perms"]) as i32, &s(&a["scheme"]), &s(&a["id"])))
        .collect()
}

/// Data as recorded: `data_utf8`, `data_hex`, or `data` (a string).
fn data(v: &Value) -> Bytes {
    if let Some(t) = v.get("data_utf8") {
        Bytes::from(s(t).into_bytes())
    } else if let Some(h) = v.get("data_hex") {
        Bytes::from(unhex(h.as_str().unwrap()))
    } else {
        Bytes::from(s(&v["data"]).into_bytes())
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(s).collect()
}

fn path_watch(v: &Value) -> PathWatch {
    PathWatch {
        path: s(&v["path"]),
        watch: v["watch"].as_bool().unwrap(),
    }
}

fn create(v: &Value) -> CreateRequest {
    CreateRequest {
        path: s(&v["path"]),
        data: data(v),
        acl: acl(&v["acl"]),
        flags: i(&v["flags"]) as i32,
    }
}

/// A client frame: our encoding of `req` with the recorded xid is byte-exact, the opcode
/// is the recorded type, and the server side of the codec reads it back.
fn assert_request(name: &str, build: impl FnOnce(&Value) -> Request) {
    let (d, frame) = vector(name);
    let req = build(&d);
    assert_eq!(
        req.op_code().to_i32() as i64,
        i(&d["type"]),
        "{name}: opcode"
    );
    let mut out = BytesMut::new();
    encode_request(&mut out, i(&d["xid"]) as i32, &req, DEFAULT_MAX_REQUEST).unwrap();
    assert_eq!(hex(&out), hex(&frame), "{name}: encoding differs");
    let body = FrameDecoder::new(DEFAULT_MAX_REQUEST)
        .decode(&mut &frame[..])
        .unwrap()
        .unwrap();
    let (header, rest) = decode_request(body).unwrap();
    assert_eq!(
        Request::decode(header.op, rest).unwrap(),
        req,
        "{name}: decode"
    );
}

/// A server reply frame: the header matches, the body decodes (by `op`) to what `build`
/// makes from the recorded fields, and re-encoding gives the same bytes.
fn assert_reply(name: &str, op: OpCode, build: impl FnOnce(&Value) -> Option<Response>) {
    let (d, frame) = vector(name);
    let body = FrameDecoder::new(DEFAULT_MAX_REPLY)
        .decode(&mut &frame[..])
        .unwrap()
        .unwrap();
    let (header, rest) = decode_reply(body).unwrap();
    assert_eq!(
        header,
        ReplyHeader {
            xid: i(&d["xid"]) as i32,
            zxid: i(&d["zxid"]),
            err: i(&d["err"]) as i32
        }
    );
    let expected = build(&d);
    if header.err == 0 {
        let got = Response::decode(op, rest).unwrap();
        assert_eq!(Some(&got), expected.as_ref(), "{name}: body");
    } else {
        assert!(rest.is_empty(), "{name}: error replies carry no body");
        assert!(expected.is_none());
    }
    let mut out = BytesMut::new();
    encode_reply(&mut out, &header, expected.as_ref());
    assert_eq!(hex(&out), hex(&frame), "{name}: re-encoding differs");
}

fn assert_notification(name: &str) {
    let (d, frame) = vector(name);
    let body = FrameDecoder::new(DEFAULT_MAX_REPLY)
        .decode(&mut &frame[..])
        .unwrap()
        .unwrap();
    let (header, rest) = decode_reply(body).unwrap();
    assert_eq!(
        header,
        ReplyHeader {
            xid: xid::NOTIFICATION,
            zxid: i(&d["zxid"]),
            err: 0
        }
    );
    let event: WatcherEvent = decode_exact(rest).unwrap();
    let expected = WatcherEvent {
        event_type: i(&d["type"]) as i32,
        state: i(&d["state"]) as i32,
        path: s(&d["path"]),
    };
    assert_eq!(event, expected);
    assert_eq!(event.keeper_state(), Some(KeeperState::SyncConnected));
    let mut out = BytesMut::new();
    encode_notification(&mut out, &expected);
    assert_eq!(hex(&out), hex(&frame));
}

fn connect_request(d: &Value) -> ConnectRequest {
    ConnectRequest {
        protocol_version: i(&d["protocolVersion"]) as i32,
        last_zxid_seen: i(&d["lastZxidSeen"]),
        timeout_ms: i(&d["timeOut"]) as i32,
        session_id: i(&d["sessionId"]),
        passwd: Bytes::from(unhex(d["passwd"].as_str().unwrap())),
        read_only: d["readOnly"].as_bool().unwrap(),
    }
}

fn assert_connect_request(name: &str) {
    let (d, frame) = vector(name);
    let req = connect_request(&d);
    let mut out = BytesMut::new();
    encode_connect(&mut out, &req);
    assert_eq!(hex(&out), hex(&frame));
    let body = FrameDecoder::new(64)
        .decode(&mut &frame[..])
        .unwrap()
        .unwrap();
    assert_eq!(decode_exact::<ConnectRequest>(body).unwrap(), req);
}

fn assert_connect_response(name: &str) -> ConnectResponse {
    let (d, frame) = vector(name);
    let expected = ConnectResponse {
        protocol_version: i(&d["protocolVersion"]) as i32,
        timeout_ms: i(&d["timeOut"]) as i32,
        session_id: i(&d["sessionId"]),
        passwd: Bytes::from(unhex(d["passwd"].as_str().unwrap())),
        read_only: d["readOnly"].as_bool().unwrap(),
    };
    let body = FrameDecoder::new(64)
        .decode(&mut &frame[..])
        .unwrap()
        .unwrap();
    let got: ConnectResponse = decode_exact(body).unwrap();
    assert_eq!(got, expected);
    let mut out = BytesMut::new();
    encode_connect_response(&mut out, &got);
    assert_eq!(hex(&out), hex(&frame));
    got
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

macro_rules! golden {
    ($($name:ident => $body:expr;)*) => {
        $( #[test] fn $name() { $body } )*
        const COVERED: &[&str] = &[$(stringify!($name)),*];
    };
}

golden! {
    connect_request_new_session => assert_connect_request("connect_request_new_session");
    connect_request_resume_session => assert_connect_request("connect_request_resume_session");
    connect_request_closed_session => assert_connect_request("connect_request_closed_session");
    connect_response => assert!(!assert_connect_response("connect_response").is_expired());
    connect_response_resumed => assert!(!assert_connect_response("connect_response_resumed").is_expired());
    connect_response_session_expired => assert!(assert_connect_response("connect_response_session_expired").is_expired());
    create_ephemeral_sequential_request => assert_request("create_ephemeral_sequential_request", |d| {
        let r = create(d);
        assert_eq!(CreateMode::from_i32(r.flags), Some(CreateMode::EphemeralSequential));
        Request::Create(r)
    });
    create_ephemeral_sequential_reply => assert_reply("create_ephemeral_sequential_reply", OpCode::Create,
        |d| Some(Response::Path(s(&d["path"]))));
    create2_request => assert_request("create2_request", |d| Request::Create2(create(d)));
    create2_reply => assert_reply("create2_reply", OpCode::Create2,
        |d| Some(Response::PathStat { path: s(&d["path"]), stat: stat(&d["stat"]) }));
    get_children2_request => assert_request("get_children2_request", |d| Request::GetChildren2(path_watch(d)));
    get_children2_reply => assert_reply("get_children2_reply", OpCode::GetChildren2,
        |d| Some(Response::Children2 { children: strings(&d["children"]), stat: stat(&d["stat"]) }));
    exists_watch_request => assert_request("exists_watch_request", |d| Request::Exists(path_watch(d)));
    exists_reply => assert_reply("exists_reply", OpCode::Exists, |d| Some(Response::Stat(stat(&d["stat"]))));
    notification_node_deleted => assert_notification("notification_node_deleted");
    notification_node_data_changed_recursive => assert_notification("notification_node_data_changed_recursive");
    notification_from_set_watches => assert_notification("notification_from_set_watches");
    get_data_request => assert_request("get_data_request", |d| Request::GetData(path_watch(d)));
    get_data_reply_no_node => {
        assert_reply("get_data_reply_no_node", OpCode::GetData, |_| None);
        let (d, _) = vector("get_data_reply_no_node");
        assert_eq!(ErrorCode::from_i32(i(&d["err"]) as i32), ErrorCode::NoNode);
    };
    multi_request_failing => assert_request("multi_request_failing", |d| Request::Multi(multi_ops(d)));
    multi_reply_failing => {
        assert_reply("multi_reply_failing", OpCode::Multi, |d| Some(Response::Multi(multi_results(d))));
        let (d, _) = vector("multi_reply_failing");
        assert_eq!(first_error(&multi_results(&d)), Some(ErrorCode::BadVersion));
    };
    multi_request_ok => assert_request("multi_request_ok", |d| Request::Multi(multi_ops(d)));
    multi_reply_ok => {
        assert_reply("multi_reply_ok", OpCode::Multi, |d| Some(Response::Multi(multi_results(d))));
        let (d, _) = vector("multi_reply_ok");
        assert_eq!(first_error(&multi_results(&d)), None);
    };
    multi_read_request => assert_request("multi_read_request", |d| Request::MultiRead(read_ops(d)));
    multi_read_reply => assert_reply("multi_read_reply", OpCode::MultiRead, |d| Some(Response::Multi(multi_results(d))));
    ping_request => assert_request("ping_request", |_| Request::Ping);
    ping_reply => assert_reply("ping_reply", OpCode::Ping, |_| Some(Response::Empty));
    auth_request_digest => assert_request("auth_request_digest", |d| Request::Auth(AuthPacket {
        auth_type: i(&d["authType"]) as i32,
        scheme: s(&d["scheme"]),
        auth: Bytes::from(s(&d["auth_utf8"]).into_bytes()),
    }));
    auth_reply_ok => assert_reply("auth_reply_ok", OpCode::Auth, |_| Some(Response::Empty));
    add_watch_request => assert_request("add_watch_request", |d| {
        assert_eq!(AddWatchMode::from_i32(i(&d["mode"]) as i32), Some(AddWatchMode::PersistentRecursive));
        Request::AddWatch(AddWatchRequest { path: s(&d["path"]), mode: i(&d["mode"]) as i32 })
    });
    add_watch_reply => assert_reply("add_watch_reply", OpCode::AddWatch, |d| {
        assert_eq!(i(&d["body_ErrorResponse_err"]), 0);
        Some(Response::WatchAdded)
    });
    who_am_i_request => assert_request("who_am_i_request", |_| Request::WhoAmI);
    who_am_i_reply => assert_reply("who_am_i_reply", OpCode::WhoAmI, |d| Some(Response::WhoAmI(
        d["clientInfo"].as_array().unwrap().iter()
            .map(|c| ClientInfo { auth_scheme: s(&c["authScheme"]), user: s(&c["user"]) }).collect())));
    set_watches_request => assert_request("set_watches_request", |d| Request::SetWatches(SetWatches {
        relative_zxid: i(&d["relativeZxid"]),
        data_watches: strings(&d["dataWatches"]),
        exist_watches: strings(&d["existWatches"]),
        child_watches: strings(&d["childWatches"]),
    }));
    set_watches_reply => assert_reply("set_watches_reply", OpCode::SetWatches, |_| Some(Response::Empty));
    close_session_request => assert_request("close_session_request", |_| Request::CloseSession);
    close_session_reply => assert_reply("close_session_reply", OpCode::CloseSession, |_| Some(Response::Empty));
    four_letter_ruok_request => {
        let (d, raw) = vector("four_letter_ruok_request");
        assert_eq!(raw, s(&d["ascii"]).into_bytes());
        assert_eq!(raw.len(), 4, "a 4lw command is 4 raw bytes, no length prefix");
    };
    four_letter_ruok_reply => {
        let (d, raw) = vector("four_letter_ruok_reply");
        assert_eq!(raw, s(&d["ascii"]).into_bytes());
    };
}

fn multi_ops(d: &Value) -> Vec<MultiOp> {
    let mut ops = Vec::new();
    for op in d["ops"].as_array().unwrap() {
        let h = &op["header"];
        if h["done"].as_bool().unwrap() {
            break;
        }
        assert_eq!(i(&h["err"]), -1);
        ops.push(match i(&h["type"]) {
            1 => MultiOp::Create(create(&op["create"])),
            5 => {
                let v = &op["setData"];
                MultiOp::SetData(SetDataRequest {
                    path: s(&v["path"]),
                    data: data(v),
                    version: i(&v["version"]) as i32,
                })
            }
            2 => {
                let v = &op["delete"];
                MultiOp::Delete(DeleteRequest {
                    path: s(&v["path"]),
                    version: i(&v["version"]) as i32,
                })
            }
            13 => {
                let v = &op["check"];
                MultiOp::Check(CheckVersionRequest {
                    path: s(&v["path"]),
                    version: i(&v["version"]) as i32,
                })
            }
            t => panic!("op type {t} not in the vectors"),
        });
    }
    ops
}

fn read_ops(d: &Value) -> Vec<ReadOp> {
    d["ops"]
        .as_array()
        .unwrap()
        .iter()
        .take_while(|op| !op["header"]["done"].as_bool().unwrap())
        .map(|op| match i(&op["header"]["type"]) {
            4 => ReadOp::GetData(path_watch(&op["getData"])),
            8 => ReadOp::GetChildren(path_watch(&op["getChildren"])),
            t => panic!("read op {t}"),
        })
        .collect()
}

fn multi_results(d: &Value) -> Vec<MultiResult> {
    d["results"]
        .as_array()
        .unwrap()
        .iter()
        .take_while(|r| !r["header"]["done"].as_bool().unwrap())
        .map(|r| match i(&r["header"]["type"]) {
            -1 => {
                let code = i(&r["ErrorResponse.err"]) as i32;
                assert_eq!(code as i64, i(&r["header"]["err"]));
                MultiResult::Error(ErrorCode::from_i32(code))
            }
            1 => MultiResult::Create(s(&r["path"])),
            2 => MultiResult::Delete,
            5 => MultiResult::SetData(stat(&r["stat"])),
            13 => MultiResult::Check,
            4 => MultiResult::GetData {
                data: data(r),
                stat: stat(&r["stat"]),
            },
            8 => MultiResult::GetChildren(strings(&r["children"])),
            t => panic!("result type {t}"),
        })
        .collect()
}

#[test]
fn every_vector_has_a_test() {
    let names: Vec<String> = all().iter().map(|v| s(&v["name"])).collect();
    assert_eq!(names.len(), 39);
    for n in &names {
        assert!(COVERED.contains(&n.as_str()), "vector {n} has no test");
    }
    for c in COVERED {
        assert!(names.iter().any(|n| n == c), "test {c} has no vector");
    }
}
