//! Distributed queues (ZooKeeper recipes "Queues" and "Priority Queues"): a pipelined
//! [`Producer`] and a [`Consumer`] that claims items at most once, or at least once with
//! ephemeral claims. Interoperates with Apache Curator's `SimpleDistributedQueue` (FIFO)
//! and kazoo's `Queue` (priority).
//!
//! # Formats
//!
//! * **FIFO items** are `<dir>/qn-<10-digit sequence>`, created `PERSISTENT_SEQUENTIAL`
//!   (or `EPHEMERAL_SEQUENTIAL` with [`ProducerConfig::ephemeral`]: such an item vanishes
//!   with its producer's session, which the recipe document's wording allows but few
//!   users want). This is exactly Curator's `SimpleDistributedQueue` (and ZooKeeper's
//!   own contrib `DistributedQueue`): Curator sorts the child *names* as strings and
//!   takes every child starting with `qn-`, so a Java producer and a Rust consumer (and
//!   the reverse) share one queue, in order.
//! * **Priority items** are `<dir>/entry-<priority:03>-<sequence>` (kazoo's `Queue` /
//!   `PriorityQueue`; priority 0..=999, lower first). Curator's priority queue
//!   serializes its items in its own format, kazoo's stores the raw bytes: kazoo's costs
//!   nothing, so that is the one.
//!
//! ## Why item names carry no unique prefix
//!
//! A lock finds a create whose reply was lost by a unique prefix in the node's name
//! (`_c_<uuid>-`). For a queue item that would break both peers: Curator sorts the
//! names as strings, so `qn-<uuid>-<seq>` would order items by producer id before
//! sequence (FIFO lost across producers), and ZooKeeper's contrib queue parses the text
//! after `qn-` as a number and skips such items. So item names stay `qn-<seq>`, and the
//! uniqueness lives in a **marker**: every producer and every at-most-once consumer owns
//! one ephemeral node in a side directory ([`meta_dir`], `<dir>-meta` by default), and
//! every put batch (a `multi`) and every claim (a `multi`) bumps that marker's version
//! with a *versioned* `setData` in the same transaction. After a lost reply, one
//! `sync` + `exists(marker)` tells exactly how many of our transactions were applied:
//! batch `n` applied ⇔ the marker's version is ≥ `n`. The versioned write also chains
//! the pipelined batches: batch `n` applies only after batch `n - 1`, so a producer's
//! items land in put order even when a batch fails and is sent again. The side
//! directory keeps the queue directory clean for Curator and kazoo consumers (kazoo
//! would take any foreign child as an item); it holds only ephemeral nodes and is a
//! container, so it disappears when unused.
//!
//! # The directory
//!
//! The queue's directory is created `PERSISTENT` (its ancestors as containers), so its
//! sequence numbers never start over and an item's name is never reused. An at-most-once
//! take reads items by name and then deletes them by name in a `multi`; a `multi` can
//! check only data versions (0 for every item), so it cannot tell an item from a new one
//! of the same name. In a container directory the server reaps it once it empties, the
//! next put makes it again and the sequence starts at 0: a take that read `qn-0…0`
//! before the reap would delete the new `qn-0…0` and deliver the old data (one item
//! delivered twice, one lost). **Outside the contract:** a queue directory that someone
//! else made as a container (Curator's `SimpleDistributedQueue` makes its path a
//! container through `EnsurePathContainers`: create the directory first, with our
//! producer or consumer or by hand, when Curator shares the queue), and an operator
//! deleting the (empty) directory while at-most-once consumers run — the same hazard.
//!
//! # Claims and the order guarantee
//!
//! See [`consumer`]. In short: a consumer lists the queue once and
//! works through the listing in sequence order, `k` items per round: at most once, it
//! reads the batch (`multiRead`, one request) and then deletes the items that were still
//! there in one `multi` with its marker bump (one request) — the items the transaction
//! deleted are ours, nobody else's. At least once, it creates an ephemeral claim
//! `<meta>/claim-<item>` per item (a second claim fails with `NodeExists`), reads the
//! claimed items in one `multiRead`, and [`complete`](Consumer::complete) deletes item
//! and claim in one `multi`. A consumer that meets contention (an item of its batch taken
//! by someone else) moves on to another part of the listing chosen by its own spread
//! value, so several consumers soon work on different parts of the queue instead of all
//! fighting for the lowest item. **Order:** a consumer that meets no contention — in
//! particular a lone consumer — takes items in strict sequence (priority, then sequence)
//! order; with several consumers every item is still taken exactly once, each consumer
//! takes its items in increasing order within one listing, and an item passed over
//! because of contention is taken in the next listing round at the latest.

pub mod consumer;
pub mod producer;
mod state;

use crate::recipe::kit::join;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

pub use consumer::{Consumer, ConsumerConfig, ConsumerEvent, Delivery, Item, TakeId};
pub use producer::{Producer, ProducerConfig, ProducerEvent, PutId, PutsWait};

/// The error a caller gets for a put or take whose outcome is in doubt (its request was
/// on the wire when the session ended): `error` if it already says the request may have
/// applied, else `ConnectionLoss`, which does — never one that says "not applied" (as
/// the counter reports an add in doubt).
fn in_doubt(error: &crate::error::Error) -> crate::error::Error {
    if error.may_have_applied() {
        error.clone()
    } else {
        crate::error::Error::ConnectionLoss
    }
}

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
        Format::Delay => crate::recipe::delay_queue::item_prefix(0),
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
            let (_, sequence) = crate::recipe::delay_queue::ready_at(name)?;
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
        return crate::recipe::delay_queue::sorted(children, max);
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

/// One round of creates for the queue's directory and its side directory (each
/// ancestor path with its request), shared by producer and consumer: the queue's
/// directory is `PERSISTENT`, so its sequence numbers never start over and an item's
/// name is never reused (see "The directory" in the module docs); its ancestors and the
/// side directory (which holds only ephemeral nodes) are containers.
pub(crate) fn parent_round(
    dir: &str,
    meta_dir: &str,
    acl: &[crate::proto::Acl],
) -> Vec<(String, crate::proto::Request)> {
    use crate::proto::{CreateMode, CreateRequest, Request};
    let mut round = crate::recipe::path::ancestor_creates(dir, acl, CreateMode::Container);
    let dir_create = CreateRequest::new(
        dir,
        bytes::Bytes::new(),
        acl.to_vec(),
        CreateMode::Persistent,
    );
    round.push((String::from(dir), Request::Create(dir_create)));
    round.extend(crate::recipe::path::ancestor_creates(
        &join(meta_dir, "x"),
        acl,
        CreateMode::Container,
    ));
    round
}
