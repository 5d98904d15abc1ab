//! Arbitrary bytes into the frame decoder (in fuzzer-chosen chunks) and every frame into
//! every decoder: reply header, each opcode's reply body, request bodies, handshakes and
//! notifications. Nothing may panic; no frame may exceed the limit.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use zk_recipes::proto::*;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, rest)) = data.split_first() else { return };
    let max = 256;
    let mut dec = FrameDecoder::new(max);
    for piece in rest.chunks(usize::from(chunk).max(1)) {
        let mut input = piece;
        while !input.is_empty() {
            match dec.decode(&mut input) {
                Ok(Some(frame)) => {
                    assert!(frame.len() <= max);
                    every_decoder(frame);
                }
                Ok(None) => assert!(input.is_empty()),
                Err(_) => return,
            }
            assert!(dec.buffered() <= max);
        }
    }
});

fn every_decoder(frame: Bytes) {
    let _ = decode_exact::<ConnectResponse>(frame.clone());
    let _ = decode_exact::<ConnectRequest>(frame.clone());
    if let Ok((header, body)) = decode_reply(frame.clone()) {
        let _ = decode_exact::<WatcherEvent>(body.clone());
        for op in OpCode::ALL {
            let _ = Response::decode(*op, body.clone());
        }
        let _ = ErrorCode::from_i32(header.err).to_string();
    }
    if let Ok((header, body)) = decode_request(frame) {
        let _ = Request::decode(header.op, body);
    }
}
