//! The ZooKeeper wire protocol ("jute" over TCP), both directions.
//!
//! * [`FrameDecoder`] splits a byte stream into frame bodies; [`encode_request`] and
//!   friends write whole frames.
//! * [`Request`] / [`Response`] cover every opcode a client sends or receives on
//!   ZooKeeper 3.5–3.9; replies are decoded by the opcode of the request they answer.
//! * [`ErrorCode`] is the full error table; unknown codes are kept, never rejected.
//! * [`validate_path`] and [`Chroot`] apply the client-side path rules.
//!
//! Every decoder is total: any byte string gives `Ok` or `Err`, never a panic, and no
//! allocation is larger than the bytes present justify.
//!
//! ```
//! use bytes::{Bytes, BytesMut};
//! use zk_recipes::proto::*;
//!
//! // A getData reply: header (xid 5, zxid 0x263, err 0), data "hi", a Stat.
//! let mut frame = BytesMut::new();
//! let stat = Stat { version: 3, data_length: 2, ..Stat::default() };
//! encode_reply(&mut frame, &ReplyHeader { xid: 5, zxid: 0x263, err: 0 },
//!              Some(&Response::Data { data: Bytes::from_static(b"hi"), stat: stat.clone() }));
//!
//! let mut dec = FrameDecoder::new(DEFAULT_MAX_REPLY);
//! let body = dec.decode(&mut &frame[..]).unwrap().unwrap();
//! let (header, rest) = decode_reply(body).unwrap();
//! assert_eq!(header.xid, 5);
//! let reply = Response::decode(OpCode::GetData, rest).unwrap();
//! assert_eq!(reply, Response::Data { data: Bytes::from_static(b"hi"), stat });
//! ```

mod ensemble;
mod error;
mod frame;
mod path;
mod records;
mod request;
mod response;
mod types;
pub(crate) mod wire;

pub use ensemble::{ConfigError, EnsembleConfig, ServerRole, ServerSpec, CONFIG_NODE};
pub use error::ErrorCode;
pub use frame::{
    decode_exact, decode_reply, decode_request, encode_connect, encode_connect_response,
    encode_frame, encode_notification, encode_reply, encode_request, FrameDecoder, FrameError,
    TooLarge, DEFAULT_MAX_REPLY, DEFAULT_MAX_REQUEST,
};
pub use path::{parent, validate_path, validate_sequential_prefix, Chroot, PathError};
pub use records::*;
pub use request::{MultiOp, PathRole, ReadOp, Request};
pub use response::{failed_multi, first_error, multi_failure, MultiResult, Response};
pub use types::{
    perms, xid, AddWatchMode, CreateMode, EventType, KeeperState, OpCode, WatcherType,
};
pub use wire::{DecodeError, Wire};
