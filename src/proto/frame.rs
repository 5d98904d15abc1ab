//! Length-prefixed frames (reference §1.1, §1.3): an incremental decoder that holds at
//! most one frame, and encoders that refuse frames over the limit.

use bytes::{BufMut, Bytes, BytesMut};
use core::fmt;

use super::records::{ConnectRequest, ConnectResponse, ReplyHeader, RequestHeader, WatcherEvent};
use super::request::Request;
use super::response::Response;
use super::types::xid;
use super::wire::{DecodeError, Wire};

/// Default cap on an incoming frame body: a little above 1 MiB, because a reply to a
/// getData of a node holding `jute.maxbuffer` bytes is larger than the request limit.
pub const DEFAULT_MAX_REPLY: usize = 1024 * 1024 + 64 * 1024;
/// Default cap on a frame body we send: the server's `jute.maxbuffer` default (0xfffff).
pub const DEFAULT_MAX_REQUEST: usize = 0xfffff;

/// A frame length prefix the decoder will not accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameError {
    /// The prefix was negative.
    NegativeLength(i32),
    /// The prefix exceeded the configured maximum.
    TooLarge {
        /// Announced body length.
        len: usize,
        /// Configured maximum.
        max: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::NegativeLength(n) => write!(f, "negative frame length {n}"),
            FrameError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the limit of {max}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for FrameError {}

/// Splits a byte stream into frame bodies.
///
/// Feed it whatever the socket produced; it consumes at most one frame per call and
/// never buffers more than `4 + max` bytes. A bad length prefix is rejected as soon as
/// its 4 bytes are present, before any of the body is buffered.
///
/// ```
/// use zk_recipes::proto::FrameDecoder;
/// let mut dec = FrameDecoder::new(1024);
/// let mut input: &[u8] = &[0, 0, 0, 2, 0xab, 0xcd, 0, 0];
/// assert_eq!(dec.decode(&mut input).unwrap().unwrap().as_ref(), &[0xab, 0xcd]);
/// assert_eq!(dec.decode(&mut input).unwrap(), None); // half a prefix: need more
/// assert!(input.is_empty());
/// ```
#[derive(Debug)]
pub struct FrameDecoder {
    max: usize,
    /// Partial prefix or partial body.
    buf: BytesMut,
    /// Body length once the prefix is known.
    body_len: Option<usize>,
}

impl FrameDecoder {
    /// A decoder that accepts bodies of up to `max` bytes.
    pub fn new(max: usize) -> Self {
        FrameDecoder {
            max,
            buf: BytesMut::new(),
            body_len: None,
        }
    }

    /// The configured maximum body length.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes held for an incomplete frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Drops any partial frame (for a new connection).
    pub fn reset(&mut self) {
        self.buf.clear();
        self.body_len = None;
    }

    /// Consumes bytes from the front of `input` and returns the next complete body, or
    /// `None` when `input` is used up without completing one. After an error the
    /// stream is unusable; call [`reset`](Self::reset) for a new connection.
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Bytes>, FrameError> {
        loop {
            match self.body_len {
                None => {
                    // Fast path: a whole prefix in the input and nothing buffered.
                    let take = (4 - self.buf.len()).min(input.len());
                    self.buf.put_slice(&input[..take]);
                    *input = &input[take..];
                    if self.buf.len() < 4 {
                        return Ok(None);
                    }
                    let n =
                        i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
                    self.buf.clear();
                    let len = usize::try_from(n).map_err(|_| FrameError::NegativeLength(n))?;
                    if len > self.max {
                        return Err(FrameError::TooLarge { len, max: self.max });
                    }
                    self.body_len = Some(len);
                    self.buf.reserve(len);
                }
                Some(len) => {
                    let take = (len - self.buf.len()).min(input.len());
                    self.buf.put_slice(&input[..take]);
                    *input = &input[take..];
                    if self.buf.len() < len {
                        return Ok(None);
                    }
                    self.body_len = None;
                    // The frame takes the buffer whole: a split would leave the
                    // decoder a view of the same storage, keeping a big reply's
                    // allocation (a listing of 10,000 children) alive after the frame
                    // is long gone.
                    return Ok(Some(core::mem::take(&mut self.buf).freeze()));
                }
            }
        }
    }
}

/// A frame that would exceed the outgoing limit; nothing was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TooLarge {
    /// Body length the frame would have had.
    pub len: usize,
    /// Configured maximum.
    pub max: usize,
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request of {} bytes exceeds the limit of {} bytes",
            self.len, self.max
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for TooLarge {}

/// Writes a length prefix, then whatever `body` appends, then patches the prefix. If the
/// body exceeds `max`, `buf` is restored to its old length and `TooLarge` returned.
pub fn encode_frame(
    buf: &mut BytesMut,
    max: usize,
    body: impl FnOnce(&mut BytesMut),
) -> Result<(), TooLarge> {
    let start = buf.len();
    buf.put_i32(0);
    body(buf);
    let len = buf.len() - start - 4;
    if len > max {
        buf.truncate(start);
        return Err(TooLarge { len, max });
    }
    // len <= max, and max is a usize that callers keep well under i32::MAX.
    let prefix = i32::try_from(len).unwrap_or(i32::MAX).to_be_bytes();
    buf[start..start + 4].copy_from_slice(&prefix);
    Ok(())
}

/// Encodes the connect handshake frame.
pub fn encode_connect(buf: &mut BytesMut, req: &ConnectRequest) {
    // 45 bytes with a 16-byte password: never near any limit.
    let _ = encode_frame(buf, usize::MAX, |b| req.encode(b));
}

/// Encodes one request frame with the given xid.
pub fn encode_request(
    buf: &mut BytesMut,
    xid: i32,
    req: &Request,
    max: usize,
) -> Result<(), TooLarge> {
    encode_frame(buf, max, |b| {
        RequestHeader {
            xid,
            op: req.op_code().to_i32(),
        }
        .encode(b);
        req.encode_body(b);
    })
}

/// Encodes a reply frame: the header, then the body only when `err == 0` (server side).
pub fn encode_reply(buf: &mut BytesMut, header: &ReplyHeader, body: Option<&Response>) {
    let _ = encode_frame(buf, usize::MAX, |b| {
        header.encode(b);
        if header.err == 0 {
            if let Some(r) = body {
                r.encode(b);
            }
        }
    });
}

/// Encodes a watch notification frame as a 3.8 server does (xid -1, zxid -1).
pub fn encode_notification(buf: &mut BytesMut, event: &WatcherEvent) {
    let header = ReplyHeader {
        xid: xid::NOTIFICATION,
        zxid: -1,
        err: 0,
    };
    let _ = encode_frame(buf, usize::MAX, |b| {
        header.encode(b);
        event.encode(b);
    });
}

/// Encodes the server's handshake answer.
pub fn encode_connect_response(buf: &mut BytesMut, resp: &ConnectResponse) {
    let _ = encode_frame(buf, usize::MAX, |b| resp.encode(b));
}

/// Splits a reply frame body into its header and the rest.
pub fn decode_reply(mut frame: Bytes) -> Result<(ReplyHeader, Bytes), DecodeError> {
    let header = ReplyHeader::decode(&mut frame)?;
    Ok((header, frame))
}

/// Splits a request frame body into its header and the rest (server side).
pub fn decode_request(mut frame: Bytes) -> Result<(RequestHeader, Bytes), DecodeError> {
    let header = RequestHeader::decode(&mut frame)?;
    Ok((header, frame))
}

/// Decodes a frame body as one record that must use all of it.
pub fn decode_exact<T: Wire>(mut frame: Bytes) -> Result<T, DecodeError> {
    let value = T::decode(&mut frame)?;
    if frame.is_empty() {
        Ok(value)
    } else {
        Err(DecodeError::TrailingBytes(frame.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoded_frame_owns_its_storage_alone() {
        // A big frame (a long listing) must not stay allocated because the decoder
        // keeps a view of the same buffer once the frame is dropped.
        let body = alloc::vec![7u8; 100_000];
        let mut wire = (body.len() as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&body);
        wire.extend_from_slice(&[0, 0]); // the start of the next prefix
        let mut d = FrameDecoder::new(1 << 20);
        let mut input = &wire[..];
        // In pieces, as a socket delivers it.
        let (a, b) = input.split_at(50_000);
        input = a;
        assert_eq!(d.decode(&mut input), Ok(None));
        input = b;
        let frame = d.decode(&mut input).unwrap().unwrap();
        assert_eq!(frame.len(), body.len());
        assert!(
            frame.is_unique(),
            "the decoder still shares the frame's storage"
        );
        assert_eq!(input.len(), 2);
        assert_eq!(d.decode(&mut input), Ok(None));
        assert_eq!(d.buffered(), 2);
    }
}
