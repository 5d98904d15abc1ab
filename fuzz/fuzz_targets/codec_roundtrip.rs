//! Decode → encode → decode → equal, for requests (any opcode) and replies (any opcode):
//! whatever the decoders accept, the encoders reproduce.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use zk_recipes::proto::*;

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let op = i32::from_be_bytes([data[0], data[1], data[2], data[3]]);
    let reply_op = OpCode::ALL[usize::from(data[4]) % OpCode::ALL.len()];
    let body = Bytes::copy_from_slice(&data[5..]);

    if let Ok(req) = Request::decode(op, body.clone()) {
        let mut buf = BytesMut::new();
        encode_request(&mut buf, 1, &req, usize::MAX >> 1).expect("no limit");
        let frame = FrameDecoder::new(usize::MAX >> 1).decode(&mut &buf[..]).unwrap().unwrap();
        let (header, again) = decode_request(frame).unwrap();
        assert_eq!(header.op, req.op_code().to_i32());
        assert_eq!(Request::decode(header.op, again).unwrap(), req);
    }

    if let Ok(resp) = Response::decode(reply_op, body) {
        let mut buf = BytesMut::new();
        resp.encode(&mut buf);
        assert_eq!(Response::decode(reply_op, buf.freeze()).unwrap(), resp);
    }
});
