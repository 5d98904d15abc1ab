//! A distributed **delay queue**, Apache Curator `DistributedDelayQueue` compatible: an
//! item put with a time becomes takeable at that time, not before.
//!
//! The delay queue is the [FIFO queue](super::queue) with another ordering and one more
//! rule; it *is* the queue's [`Producer`] and [`Consumer`] with [`Format::Delay`], so
//! every guarantee of the queue holds as written there (at most once by default, at
//! least once with claims; pipelined, batched puts; no lost or doubled item after a lost
//! reply). This module holds what is the delay queue's own: the node format, the
//! framing of the data, the ordering, the "ready at" rule and the [`Clock`].
//!
//! # Format (Curator 5.4's `DistributedDelayQueue` over `DistributedQueue`)
//!
//! * An item is `<dir>/queue-|<T>|<10-digit sequence>`, created `PERSISTENT_SEQUENTIAL`,
//!   where `<T>` is the time the item becomes takeable, in milliseconds since the Unix
//!   epoch, as upper-case hexadecimal of at least 8 digits (Java's `%08X`). Curator
//!   parses the text between the last two `|` as hexadecimal and takes a name it cannot
//!   parse as time 0 (ready at once), as it takes Curator's re-queued items
//!   (`queue-<seq>`): so does [`ready_at`].
//! * The data is Curator's `ItemSerializer` framing of one item: the 4-byte version
//!   `0x00010001`, then per item the byte `0x01`, a 4-byte big-endian length and the
//!   bytes, then the byte `0x02` ([`frame`]). A Curator `putMulti` node holds several
//!   items in one frame: our consumer delivers the payload of a node holding exactly one
//!   item, and the node's data unchanged otherwise ([`payload`]; split it with
//!   [`unframe`]).
//! * Items are taken earliest time first, then by sequence (Curator sorts by time only).
//!
//! # Taking
//!
//! 1. A take lists the directory (as the FIFO queue's consumer does) and keeps the items
//!    whose time has come by the consumer's [`Clock`]: sorted by time, they are a prefix
//!    of the listing ([`hold_back`]). Those are claimed exactly as FIFO items are.
//! 2. A listing with no item ready sets one child watch on the directory (a new item
//!    wakes the consumer: it may be due earlier) and a timer at the earliest item's time
//!    (`poll_timeout`, answered by `handle_timeout`); whichever comes first lists again.
//!    One watch and one timer per consumer, nothing per item: no herd beyond the
//!    consumers that wait for the same instant (as in Curator).
//! 3. An item is never delivered before its time by the consumer's clock. Across hosts
//!    that means "not before its time, give or take the clocks' skew": the time is the
//!    producer's number, compared with the consumer's wall clock (as Curator does).
//!
//! # The clock
//!
//! The core reads no clock. A consumer maps its driver's [`Instant`](crate::time::Instant) to Unix
//! milliseconds through a [`Clock`] (a pair: at this instant the wall clock read this),
//! set with [`Consumer::set_clock`]; both adapters set it from the system clock at each
//! take. Without one, an instant is taken as microseconds since the Unix epoch (the
//! simulator's and the tests' convention).
//!
//! ```
//! use zk_recipes::recipe::delay_queue::{frame, item_prefix, ready_at, unframe};
//! assert_eq!(item_prefix(0x1234_5678_9a), "queue-|123456789A|");
//! assert_eq!(ready_at("queue-|0000FFFF|0000000003"), Some((0xffff, 3)));
//! assert_eq!(ready_at("queue-0000000007"), Some((0, 7))); // Curator's re-queued item
//! assert_eq!(ready_at("qn-0000000007"), None);
//! let data = frame(b"hello");
//! assert_eq!(&data[..], b"\x00\x01\x00\x01\x01\x00\x00\x00\x05hello\x02");
//! assert_eq!(unframe(&data).unwrap(), [&b"hello"[..]]);
//! ```

use alloc::string::String;
use alloc::vec::Vec;

pub use super::queue::delay::{
    frame, hold_back, item_prefix, payload, ready_at, unframe, Clock, DELAY_PREFIX, FRAME_VERSION,
    MAX_READY_AT, SEPARATOR,
};
pub use super::queue::{
    Consumer, ConsumerConfig, ConsumerEvent, Delivery, Format, Item, Producer, ProducerConfig,
    ProducerEvent,
};

/// The delay items of a listing in take order (time, then sequence, then name), at
/// most `max` of them (the earliest ones).
///
/// ```
/// use zk_recipes::recipe::delay_queue::sorted;
/// let kids: Vec<String> = ["queue-|00000009|0000000001", "x", "queue-|00000002|0000000005"]
///     .iter().map(|s| s.to_string()).collect();
/// assert_eq!(sorted(&kids, 10), ["queue-|00000002|0000000005", "queue-|00000009|0000000001"]);
/// ```
pub fn sorted(children: &[String], max: usize) -> Vec<String> {
    super::queue::sorted_by(children, max, ready_at)
}
