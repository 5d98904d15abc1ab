//! The delay queue's node format, Curator `DistributedDelayQueue`'s (a leaf of the
//! queue: names by time, `ItemSerializer` frames, the clock that maps instants to Unix
//! milliseconds); see [`delay_queue`](crate::recipe::delay_queue) for the recipe.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::{BufMut, Bytes, BytesMut};
use core::fmt::Write as _;
use core::time::Duration;

use crate::time::Instant;

/// Curator's `DistributedQueue` item prefix (`QUEUE_ITEM_NAME`).
pub const DELAY_PREFIX: &str = "queue-";
/// Curator's separator around the time in a delay item's name.
pub const SEPARATOR: char = '|';
/// The version word of Curator's `ItemSerializer`.
pub const FRAME_VERSION: u32 = 0x0001_0001;
const ITEM_OPCODE: u8 = 0x01;
const EOF_OPCODE: u8 = 0x02;
/// The latest time an item may carry: Java's `long` maximum (Curator's field).
pub const MAX_READY_AT: u64 = i64::MAX as u64;

/// The name prefix of an item takeable at `ready_at_ms` (Unix milliseconds); the server
/// appends the sequence.
pub fn item_prefix(ready_at_ms: u64) -> String {
    let mut s = String::from(DELAY_PREFIX);
    let _ = write!(
        s,
        "{SEPARATOR}{:08X}{SEPARATOR}",
        ready_at_ms.min(MAX_READY_AT)
    );
    s
}

fn hex(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16)
        .ok()
        .filter(|&v| v <= MAX_READY_AT)
}

fn sequence(s: &str) -> Option<i64> {
    if s.is_empty() || s.len() > 18 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A delay item's (time in Unix ms, sequence); `None` for a foreign child (not
/// `queue-…<digits>`). A name whose time Curator cannot parse has time 0, as in Curator.
pub fn ready_at(name: &str) -> Option<(u64, i64)> {
    let rest = name.strip_prefix(DELAY_PREFIX)?;
    let Some((head, seq)) = rest.rsplit_once(SEPARATOR) else {
        return Some((0, sequence(rest)?));
    };
    let seq = sequence(seq)?;
    // Curator: the text between the last two separators, hexadecimal, else 0.
    let time = head
        .rsplit_once(SEPARATOR)
        .and_then(|(_, t)| hex(t))
        .unwrap_or(0);
    Some((time, seq))
}

/// Curator's `ItemSerializer` frame of one item.
pub fn frame(item: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(item.len() + 10);
    out.put_u32(FRAME_VERSION);
    out.put_u8(ITEM_OPCODE);
    // An item too large for a Java int never fits a znode (1 MB by default): the
    // server refuses the create.
    out.put_u32(
        u32::try_from(item.len())
            .unwrap_or(u32::MAX)
            .min(i32::MAX as u32),
    );
    out.put_slice(item);
    out.put_u8(EOF_OPCODE);
    out.freeze()
}

/// The items of a Curator frame; `None` if `data` is not one (wrong version, opcode or
/// length, or cut short).
pub fn unframe(data: &[u8]) -> Option<Vec<&[u8]>> {
    let (version, mut rest) = data.split_first_chunk::<4>()?;
    if u32::from_be_bytes(*version) != FRAME_VERSION {
        return None;
    }
    let mut items = Vec::new();
    loop {
        let (&op, after) = rest.split_first()?;
        match op {
            EOF_OPCODE => return Some(items),
            ITEM_OPCODE => {
                let (len, after) = after.split_first_chunk::<4>()?;
                let len = usize::try_from(i32::from_be_bytes(*len)).ok()?;
                if after.len() < len {
                    return None;
                }
                let (item, after) = after.split_at(len);
                items.push(item);
                rest = after;
            }
            _ => return None,
        }
    }
}

/// What a consumer delivers for a node's `data`: the payload when it is a frame of
/// exactly one item (what Curator's `put` and our producer write), else `data`
/// unchanged (a Curator `putMulti` node, or data someone else wrote).
pub fn payload(data: Bytes) -> Bytes {
    match unframe(&data).as_deref() {
        Some([one]) => data.slice_ref(one),
        _ => data,
    }
}

/// How a consumer maps its driver's instants to Unix milliseconds: at instant `at` the
/// wall clock read `unix_ms`. The default says an instant *is* microseconds since the
/// Unix epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Clock {
    /// An instant of the driver.
    pub at: Instant,
    /// The wall clock at `at`, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
}

impl Clock {
    /// The wall clock at `now`, in Unix milliseconds (whole ones).
    pub fn unix_ms_at(&self, now: Instant) -> u64 {
        let after = now.saturating_since(self.at).as_micros() / 1000;
        let before = self.at.saturating_since(now).as_micros().div_ceil(1000);
        let ms = u128::from(self.unix_ms) + after;
        u64::try_from(ms.saturating_sub(before)).unwrap_or(u64::MAX)
    }

    /// The first instant at which the wall clock reads `unix_ms` (at the latest `at`
    /// when that time is past).
    pub fn instant_of(&self, unix_ms: u64) -> Instant {
        self.at + Duration::from_millis(unix_ms.saturating_sub(self.unix_ms))
    }
}

/// Keeps in `items` (sorted by [`sorted`](crate::recipe::delay_queue::sorted)) those whose time has come at `now` by
/// `clock`; returns the instant the first one held back becomes ready, if any.
///
/// ```
/// use zk_recipes::recipe::delay_queue::{hold_back, Clock};
/// use zk_recipes::time::Instant;
/// let mut items: Vec<String> = ["queue-|00000005|0000000000", "queue-|00000009|0000000001"]
///     .iter().map(|s| s.to_string()).collect();
/// let now = Instant::from_micros(7_000); // 7 ms after the Unix epoch
/// assert_eq!(hold_back(&mut items, Clock::default(), now), Some(Instant::from_micros(9_000)));
/// assert_eq!(items, ["queue-|00000005|0000000000"]);
/// ```
pub fn hold_back(items: &mut Vec<String>, clock: Clock, now: Instant) -> Option<Instant> {
    let wall = clock.unix_ms_at(now);
    let ready = items
        .iter()
        .position(|n| ready_at(n).is_none_or(|(t, _)| t > wall))
        .unwrap_or(items.len());
    let wake = items
        .get(ready)
        .and_then(|n| ready_at(n))
        .map(|(t, _)| clock.instant_of(t));
    items.truncate(ready);
    wake
}
