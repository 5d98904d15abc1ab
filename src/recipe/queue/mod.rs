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
pub(crate) mod delay;
mod names;
pub mod producer;
mod state;

pub use consumer::{Consumer, ConsumerConfig, ConsumerEvent, Delivery, Item, TakeId};
pub(crate) use names::sorted_by;
pub use names::{
    item_prefix, meta_dir, parse_item, sorted_items, Format, SortKey, CLAIM_PREFIX,
    DEFAULT_PRIORITY, FIFO_PREFIX, MAX_PRIORITY, PRIORITY_PREFIX,
};
pub use producer::{Producer, ProducerConfig, ProducerEvent, PutId, PutsWait};
