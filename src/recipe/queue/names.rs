//! The queue's item names: the prefixes of its formats, the side directory, and
//! the order in which items are taken. A leaf: the producer and the consumer import these
//! from here and [`queue`](super) re-exports them.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

/// Curator's (and ZooKeeper's contrib) FIFO item prefix.
pub const FIFO_PREFIX: &str = "qn-";
/// kazoo's item prefix, used for priority items (`entry-<ppp>-<seq>`).
pub const PRIORITY_PREFIX: &str = "entry-";
/// The highest priority value kazoo accepts (three digits); lower values go first.
pub const MAX_PRIORITY: u16 = 999;
/// kazoo's default priority.
pub const DEFAULT_PRIORITY: u16 = 100;
/// The prefix of claim nodes in the side directory.
pub const CLAIM_PREFIX: &str = "claim-";

/// How items are named and ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `qn-<seq>`: Curator's `SimpleDistributedQueue`.
    Fifo,
    /// `entry-<ppp>-<seq>`: kazoo's `Queue`, priority first (lower first).
    Priority,
    /// `queue-|<time>|<seq>`: Curator's `DistributedDelayQueue`, earliest time first,
    /// an item takeable from its time on (see [`delay_queue`](crate::recipe::delay_queue)).
    Delay,
}

/// The side directory of a queue: `<dir>-meta`.
///
/// ```
/// assert_eq!(zk_recipes::recipe::queue::meta_dir("/jobs"), "/jobs-meta");
/// ```
pub fn meta_dir(dir: &str) -> String {
    let mut s = String::from(dir.trim_end_matches('/'));
    s.push_str("-meta");
    s
}

/// The name prefix an item is created with (the server appends the sequence); a
/// delay item's is [`delay_queue::item_prefix`](crate::recipe::delay_queue::item_prefix)
/// of its time (here: time 0, takeable at once).
///
/// ```
/// use zk_recipes::recipe::queue::{item_prefix, Format};
/// assert_eq!(item_prefix(Format::Fifo, 7), "qn-");
/// assert_eq!(item_prefix(Format::Priority, 7), "entry-007-");
/// ```
pub fn item_prefix(format: Format, priority: u16) -> String {
    match format {
        Format::Fifo => FIFO_PREFIX.into(),
        Format::Priority => {
            let mut s = String::from(PRIORITY_PREFIX);
            let _ = write!(s, "{:03}-", priority.min(MAX_PRIORITY));
            s
        }
        Format::Delay => super::delay::item_prefix(0),
    }
}

/// What orders an item: (priority, sequence); FIFO items all have priority 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SortKey {
    /// Priority (lower first).
    pub priority: u16,
    /// The server's sequence number.
    pub sequence: i64,
}

fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || s.len() > 18 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses an item name of `format`; `None` for anything else (foreign children). A
/// delay item's key has its sequence only (its time orders it first: see
/// [`delay_queue::ready_at`](crate::recipe::delay_queue::ready_at)).
///
/// ```
/// use zk_recipes::recipe::queue::{parse_item, Format, SortKey};
/// assert_eq!(parse_item(Format::Fifo, "qn-0000000042"), Some(SortKey { priority: 0, sequence: 42 }));
/// assert_eq!(parse_item(Format::Priority, "entry-003-0000000001"), Some(SortKey { priority: 3, sequence: 1 }));
/// assert_eq!(parse_item(Format::Fifo, "entry-003-0000000001"), None);
/// assert_eq!(parse_item(Format::Fifo, "qn-x"), None);
/// ```
pub fn parse_item(format: Format, name: &str) -> Option<SortKey> {
    match format {
        Format::Fifo => {
            let seq = digits(name.strip_prefix(FIFO_PREFIX)?)?;
            Some(SortKey {
                priority: 0,
                sequence: seq,
            })
        }
        Format::Priority => {
            let rest = name.strip_prefix(PRIORITY_PREFIX)?;
            let (p, seq) = rest.split_once('-')?;
            let p = digits(p)?;
            Some(SortKey {
                priority: u16::try_from(p).ok()?,
                sequence: digits(seq)?,
            })
        }
        Format::Delay => {
            let (_, sequence) = super::delay::ready_at(name)?;
            Some(SortKey {
                priority: 0,
                sequence,
            })
        }
    }
}

/// The items of a listing in take order (priority, then sequence, then name), at most
/// `max` of them (the first ones): bounded memory for huge queues.
///
/// ```
/// use zk_recipes::recipe::queue::{sorted_items, Format};
/// let kids: Vec<String> = ["qn-0000000003", "x", "qn-0000000001"].iter().map(|s| s.to_string()).collect();
/// assert_eq!(sorted_items(Format::Fifo, &kids, 10), ["qn-0000000001", "qn-0000000003"]);
/// ```
pub fn sorted_items(format: Format, children: &[String], max: usize) -> Vec<String> {
    if format == Format::Delay {
        return sorted_by(children, max, super::delay::ready_at);
    }
    sorted_by(children, max, |c| parse_item(format, c))
}

/// The children that have a `key`, in key (then name) order, at most `max` of them (the
/// lowest ones): the one selection of every item format.
pub(crate) fn sorted_by<K: Ord>(
    children: &[String],
    max: usize,
    key: impl Fn(&str) -> Option<K>,
) -> Vec<String> {
    let mut items: Vec<(K, &String)> = children
        .iter()
        .filter_map(|c| key(c).map(|k| (k, c)))
        .collect();
    if items.len() > max {
        items.select_nth_unstable(max);
        items.truncate(max);
    }
    items.sort_unstable();
    items.into_iter().map(|(_, n)| n.clone()).collect()
}
