//! Jute primitives: big-endian integers, booleans, length-prefixed buffers, strings and
//! vectors, and the [`Wire`] trait records implement.
//!
//! Decoding is total: every function returns `Err` on short or malformed input and
//! never allocates more than the bytes present can justify.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use core::fmt;

/// Why a record could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended inside a field.
    Truncated,
    /// A length or element count was negative (other than -1 = null) or larger than the
    /// bytes that follow.
    BadLength(i32),
    /// An opcode or type number that this position does not allow.
    UnexpectedType(i32),
    /// Bytes were left over after a record that must fill its frame.
    TrailingBytes(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("frame ended inside a field"),
            DecodeError::BadLength(n) => write!(f, "invalid length or count {n}"),
            DecodeError::UnexpectedType(t) => write!(f, "unexpected type or opcode {t}"),
            DecodeError::TrailingBytes(n) => write!(f, "{n} unexpected bytes after the record"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for DecodeError {}

/// A value with a jute encoding.
pub trait Wire: Sized {
    /// The fewest bytes one encoded value can take; bounds vector pre-allocation.
    const MIN_SIZE: usize;
    /// Appends the encoding of `self`.
    fn encode(&self, buf: &mut BytesMut);
    /// Reads one value from the front of `buf`.
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError>;
}

fn need(buf: &Bytes, n: usize) -> Result<(), DecodeError> {
    if buf.remaining() < n {
        Err(DecodeError::Truncated)
    } else {
        Ok(())
    }
}

/// `Wire` for big-endian integers (jute's `int` and `long`): a trait impl per type,
/// which a function cannot write.
macro_rules! wire_int {
    ($($t:ty => $put:ident, $get:ident;)*) => {$(
        impl Wire for $t {
            const MIN_SIZE: usize = core::mem::size_of::<$t>();
            fn encode(&self, buf: &mut BytesMut) {
                buf.$put(*self);
            }
            fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
                need(buf, Self::MIN_SIZE)?;
                Ok(buf.$get())
            }
        }
    )*};
}

wire_int! {
    i32 => put_i32, get_i32;
    i64 => put_i64, get_i64;
}

impl Wire for bool {
    const MIN_SIZE: usize = 1;
    fn encode(&self, buf: &mut BytesMut) {
        buf.put_u8(u8::from(*self));
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        need(buf, 1)?;
        // Java writes only 0/1; treat any non-zero byte as true.
        Ok(buf.get_u8() != 0)
    }
}

/// Reads a length prefix: `None` for null (-1), an error for other negatives or a length
/// longer than the rest of the input.
fn length(buf: &mut Bytes, unit: usize) -> Result<Option<usize>, DecodeError> {
    let n = i32::decode(buf)?;
    if n == -1 {
        return Ok(None);
    }
    let len = usize::try_from(n).map_err(|_| DecodeError::BadLength(n))?;
    if len.saturating_mul(unit) > buf.remaining() {
        return Err(DecodeError::BadLength(n));
    }
    Ok(Some(len))
}

fn put_len(buf: &mut BytesMut, len: usize) {
    // Frames are capped far below i32::MAX before anything is sent; saturate rather
    // than wrap if a caller encodes something absurd into a scratch buffer.
    buf.put_i32(i32::try_from(len).unwrap_or(i32::MAX));
}

/// `buffer`: null (-1) decodes as empty; encoding always writes a real (possibly empty)
/// buffer, which is what every ZooKeeper client sends.
impl Wire for Bytes {
    const MIN_SIZE: usize = 4;
    fn encode(&self, buf: &mut BytesMut) {
        put_len(buf, self.len());
        buf.put_slice(self);
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(match length(buf, 1)? {
            None => Bytes::new(),
            // Zero-copy: the value shares the frame's allocation.
            Some(len) => buf.split_to(len),
        })
    }
}

/// `ustring`: UTF-8, decoded leniently (invalid sequences become U+FFFD, as Java's
/// CESU-8 for non-BMP characters would otherwise fail a whole frame); null = empty.
impl Wire for String {
    const MIN_SIZE: usize = 4;
    fn encode(&self, buf: &mut BytesMut) {
        put_len(buf, self.len());
        buf.put_slice(self.as_bytes());
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(match length(buf, 1)? {
            None => String::new(),
            Some(len) => {
                let raw = buf.split_to(len);
                match core::str::from_utf8(&raw) {
                    Ok(s) => String::from(s),
                    Err(_) => String::from_utf8_lossy(&raw).into_owned(),
                }
            }
        })
    }
}

/// `vector<T>`: null (-1) decodes as empty.
impl<T: Wire> Wire for Vec<T> {
    const MIN_SIZE: usize = 4;
    fn encode(&self, buf: &mut BytesMut) {
        put_len(buf, self.len());
        for item in self {
            item.encode(buf);
        }
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        let Some(count) = length(buf, T::MIN_SIZE.max(1))? else {
            return Ok(Vec::new());
        };
        // `length` proved count * MIN_SIZE bytes are present, so this is bounded by input.
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(T::decode(buf)?);
        }
        Ok(items)
    }
}

/// Declares a jute record once: the struct, its field docs, and both directions of its
/// encoding (fields concatenated in declaration order, no tags or padding).
macro_rules! record {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }

        impl $crate::proto::wire::Wire for $name {
            const MIN_SIZE: usize = 0 $(+ <$ty as $crate::proto::wire::Wire>::MIN_SIZE)*;
            fn encode(&self, buf: &mut ::bytes::BytesMut) {
                $( $crate::proto::wire::Wire::encode(&self.$field, buf); )*
            }
            fn decode(buf: &mut ::bytes::Bytes) -> Result<Self, $crate::proto::wire::DecodeError> {
                Ok(Self { $( $field: $crate::proto::wire::Wire::decode(buf)? ),* })
            }
        }
    };
}
pub(crate) use record;
