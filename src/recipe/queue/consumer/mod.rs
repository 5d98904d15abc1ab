//! The queue consumer: takes items at most once (the default) or at least once.
//!
//! # Taking, as the recipe documents say
//!
//! A [`take`](Consumer::take) lists the queue directory once (with a watch when the
//! last listing was empty, and always in a priority queue) and works through that
//! listing in order, up to `max` items per round, before listing again. An empty
//! queue waits for the watch. In a priority queue a watch notification invalidates the
//! cached listing, so an item of higher priority put after our listing is taken before
//! the lower ones still cached.
//!
//! # Claiming at most once ([`Delivery::AtMostOnce`])
//!
//! 1. `multiRead(getData)` of the batch: one request. Items already gone were taken by
//!    someone else.
//! 2. One `multi`: a versioned `setData` of our marker `<meta>/c-<id>` (see the
//!    [module docs](super)) and a `delete` of every item still there. If it applies,
//!    every item in it is ours and nobody else's; if an item vanished in between, the
//!    `multi` fails on it and is sent again without it.
//! 3. A lost reply: after `Reconnected`, `sync` + `exists(marker)`: the marker's version
//!    says whether our transaction was applied (then the items, whose data we read
//!    first, are delivered) — never a lost or doubled item. Only a session that expires
//!    while a claim is in doubt loses it (reported as `TakeFailed { SessionExpired }`:
//!    the items may be gone with no one holding them — at most once).
//!
//! # Claiming at least once ([`Delivery::AtLeastOnce`])
//!
//! 1. `create <meta>/claim-<item>` (ephemeral) per item, then one `multiRead` of the
//!    items, all in one pipeline. A claim that exists already is someone else's (skip);
//!    a claimed item that is gone was completed meanwhile (our claim is deleted again).
//!    A claim whose reply was lost is checked after `sync` by its `ephemeralOwner`.
//!    A listing that finds only items claimed by others waits on the side directory's
//!    watch as well as the queue's: a claim that goes with its holder's session (or is
//!    released) changes only the side directory.
//! 2. The items are delivered as held; [`complete`](Consumer::complete) deletes the
//!    item and its claim in one `multi` (only the holder of a claim ever deletes an
//!    item), [`release`](Consumer::release) deletes the claim only. A consumer that dies
//!    loses its claims with its session, and the items are taken again: never two live
//!    claims on one item, delivered at least once, completed exactly once. A claim is
//!    never deleted blindly twice: after a lost reply to a complete, a release or the
//!    delete of a stale claim, `sync` + `exists(claim)` tells whether it landed (the
//!    claim is gone or another session's by now) before anything is sent again.
//!
//! # Contention
//!
//! A batch that meets an item taken by someone else marks the consumer *contended*: it
//! jumps ahead in its listing by `(1 + spread % 8)` batches (the spread is its own
//! value from the driver's entropy), and starts its next listing at `spread % 8`
//! batches in. Several consumers therefore soon work on different parts of the queue;
//! a consumer that meets no contention (a lone one) takes strictly in order. Items
//! jumped over stay in the queue for the next listing.
//!
//! # The machine's parts
//!
//! The states as types are in `phase` (its module docs have the before/after table of
//! the flags they replaced); `machine` lists and drives, `batch` claims a batch,
//! `settle` completes and releases held items (at least once).

mod batch;
mod machine;
mod phase;
mod settle;

pub use phase::TakeId;

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::names::{meta_dir, Format, CLAIM_PREFIX};
use super::state::{side_path, Mine};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{join, protocol_head, valid_path, Kit, Protocol, Reply};
use crate::recipe::{OpId, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;
use phase::{Batch, Life, Parents, Settle, Settling, Side, SideWatch, Take, View};

/// How items are claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// Read and delete in one step: an item is never given to two consumers; one whose
    /// claim was in doubt when its session expired may be lost.
    AtMostOnce,
    /// Claim with an ephemeral node, process, then [`complete`](Consumer::complete):
    /// a consumer that dies before completing leaves the item to others.
    AtLeastOnce,
}

/// How to consume.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConsumerConfig {
    /// The queue directory.
    pub dir: String,
    /// The side directory for our marker and claims.
    pub meta_dir: String,
    /// A fresh unique id (a UUID string from the driver's entropy).
    pub id: String,
    /// FIFO or priority names.
    pub format: Format,
    /// At most once (default) or at least once.
    pub delivery: Delivery,
    /// ACL of our marker, claims and parents we create.
    pub acl: Vec<Acl>,
    /// Where this consumer works in a contended listing (driver entropy; default
    /// derived from the id).
    pub spread: u64,
    /// Items kept from one listing (default 10,000; the lowest ones).
    pub max_listing: usize,
    /// Items per round (default 1,000; a take asks for fewer).
    pub max_batch: usize,
    /// Claims held at once, at least once (default 10,000).
    pub max_held: usize,
}

impl ConsumerConfig {
    /// FIFO, at most once, open ACL, default bounds.
    pub fn new(dir: &str, id: &str) -> Self {
        // FNV-1a of the id: a deterministic default spread.
        let spread = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        ConsumerConfig {
            dir: dir.into(),
            meta_dir: meta_dir(dir),
            id: id.into(),
            format: Format::Fifo,
            delivery: Delivery::AtMostOnce,
            acl: Acl::open_unsafe(),
            spread,
            max_listing: 10_000,
            max_batch: 1_000,
            max_held: 10_000,
        }
    }
}

/// An item taken from the queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Item {
    /// Its name in the queue directory (`qn-0000000042`).
    pub name: String,
    /// Its data.
    pub data: Bytes,
}

/// What a consumer reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConsumerEvent {
    /// Items for a take, in take order: deleted (at most once) or claimed by us (at
    /// least once: complete or release each).
    Taken {
        /// Which take.
        take: TakeId,
        /// One or more items.
        items: Vec<Item>,
    },
    /// The take's deadline passed with nothing taken.
    TimedOut {
        /// Which take.
        take: TakeId,
    },
    /// The take failed.
    TakeFailed {
        /// Which take.
        take: TakeId,
        /// Why.
        error: Error,
    },
    /// A held item was completed: it and its claim are deleted.
    Completed {
        /// The item's name.
        item: String,
    },
    /// Completing failed; the item is no longer held by us.
    CompleteFailed {
        /// The item's name.
        item: String,
        /// Why.
        error: Error,
    },
    /// A held item was released: its claim is deleted, others may take it.
    Released {
        /// The item's name.
        item: String,
    },
    /// A held item's claim went with the session: others will take it.
    ClaimLost {
        /// The item's name.
        item: String,
    },
    /// The consumer is closed: claims released, marker deleted. Nothing follows.
    Closed,
}

impl ConsumerEvent {
    /// For a caller waiting on take `take`: `Some` when this event answers it —
    /// `Ok(items)` (empty when the deadline passed), `Err` the reason.
    pub fn take_outcome(&self, take: TakeId) -> Option<Result<Vec<Item>, Error>> {
        match self {
            ConsumerEvent::Taken { take: t, items } if *t == take => Some(Ok(items.clone())),
            ConsumerEvent::TimedOut { take: t } if *t == take => Some(Ok(Vec::new())),
            ConsumerEvent::TakeFailed { take: t, error } if *t == take => Some(Err(error.clone())),
            ConsumerEvent::Closed => Some(Err(Error::Closed)),
            _ => None,
        }
    }

    /// For a caller waiting on completing or releasing `item`: `Some` when this event
    /// answers it. A claim lost with the session is an error (`SessionExpired`): the
    /// item will be delivered again.
    pub fn settle_outcome(&self, item: &str) -> Option<Result<(), Error>> {
        match self {
            ConsumerEvent::Completed { item: i } | ConsumerEvent::Released { item: i }
                if i == item =>
            {
                Some(Ok(()))
            }
            ConsumerEvent::CompleteFailed { item: i, error } if i == item => {
                Some(Err(error.clone()))
            }
            ConsumerEvent::ClaimLost { item: i } if i == item => Some(Err(Error::SessionExpired)),
            ConsumerEvent::Closed => Some(Err(Error::Closed)),
            _ => None,
        }
    }
}
/// What each request of the consumer is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    List,
    ListClaims,
    Parent(String),
    Sync,
    /// create of the claim of batch slot `i`.
    Claim(usize),
    /// exists of the claim of batch slot `i` after a lost reply.
    CheckClaim(usize),
    /// multiRead of the batch slots listed.
    Read(Vec<usize>),
    /// The at-most-once claim multi, number `no`, over the slots listed.
    Take(u32, Vec<usize>),
    ReadMarker,
    Complete(String),
    /// exists of our claim after a complete or release whose reply was lost.
    CheckSettle(String),
    /// exists of a stale claim after its delete's reply was lost.
    CheckOrphan(String),
    Release(String),
    Orphan(String),
    DeleteMarker,
}

impl Purpose {
    fn is_parent(&self) -> bool {
        matches!(self, Purpose::Parent(_))
    }
}

/// Takes waiting at once.
const MAX_TAKES: usize = 64;

/// How many items whose claims went with a session are remembered (so that settling
/// one says why it fails).
const LOST_KEPT: usize = 1024;

/// The consumer state machine; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Consumer {
    config: ConsumerConfig,
    /// Our marker, and the session we work in.
    mine: Mine,
    next_take: TakeId,
    takes: VecDeque<Take>,
    view: View,
    /// The last listing was empty: the next one sets a watch.
    last_empty: bool,
    /// A batch met an item taken by someone else: the next listing starts further in.
    contended: bool,
    side: Side,
    batch: Option<Batch>,
    parents: Parents,
    /// At least once: items we hold, and settlements (complete/release) to send.
    held: Vec<String>,
    /// The last items whose claims went with a session (at most `LOST_KEPT`): settling
    /// one fails with `SessionExpired`, as it would have while the claim was held.
    lost: VecDeque<String>,
    settling: Vec<Settling>,
    /// Stale claims of ours to delete.
    orphans: Vec<String>,
    /// Stale claims whose delete's reply was lost: whose are they now?
    orphan_checks: Vec<String>,
    life: Life,
    /// A delay queue: how instants map to Unix milliseconds.
    clock: crate::recipe::queue::delay::Clock,
    /// A delay queue: when the earliest item held back by the last listing is due.
    wake: Option<Instant>,
    kit: Kit<Purpose, ConsumerEvent>,
}

impl Consumer {
    /// A consumer; takes wait for the session's `Connected`.
    pub fn new(config: ConsumerConfig) -> Self {
        Consumer {
            mine: Mine::new(&config.meta_dir, "c-", &config.id),
            config,
            next_take: 1,
            takes: VecDeque::new(),
            view: View::Stale,
            last_empty: false,
            contended: false,
            side: Side {
                claims: Vec::new(),
                blocked: false,
                watch: SideWatch::Off,
            },
            batch: None,
            parents: Parents::default(),
            held: Vec::new(),
            lost: VecDeque::new(),
            settling: Vec::new(),
            orphans: Vec::new(),
            orphan_checks: Vec::new(),
            life: Life::Open,
            clock: Default::default(),
            wake: None,
            kit: Kit::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// Items held (at least once), in the order taken.
    pub fn held(&self) -> &[String] {
        &self.held
    }

    /// Has the consumer ended?
    pub fn has_ended(&self) -> bool {
        self.life == Life::Ended
    }

    /// Takes up to `max` items (at least one), waiting until `deadline` (`None`: as
    /// long as it takes; `Some(now)`: only what one look finds). Exactly one of
    /// `Taken`, `TimedOut` or `TakeFailed` follows for the returned id. Takes are served
    /// one after the other.
    pub fn take(&mut self, now: Instant, max: usize, deadline: Option<Instant>) -> TakeId {
        let id = self.next_take;
        self.next_take += 1;
        let error = if self.closing() {
            Some(Error::Closed)
        } else if self.takes.len() >= MAX_TAKES {
            Some(Error::Overloaded)
        } else if let Err(e) = valid_path(&self.config.dir) {
            Some(e)
        } else if self.at_least_once() && self.held.len() >= self.config.max_held {
            Some(Error::Overloaded)
        } else {
            None
        };
        match error {
            Some(error) => self.emit(ConsumerEvent::TakeFailed { take: id, error }),
            None => {
                let max = max.clamp(1, self.config.max_batch.max(1));
                self.takes.push_back(Take {
                    id,
                    max,
                    deadline,
                    looked: false,
                });
                // A deadline already past still gets one look, if the connection is up.
                self.drive(now);
            }
        }
        id
    }

    /// A delay queue ([`Format::Delay`]): at `now` the wall clock reads `unix_ms`
    /// (milliseconds since the Unix epoch); items are takeable from their time on by
    /// this clock (see [`delay_queue`](crate::recipe::delay_queue)). Both adapters set
    /// it at each take; without it an instant counts as microseconds since the epoch.
    pub fn set_clock(&mut self, now: Instant, unix_ms: u64) {
        self.clock = crate::recipe::queue::delay::Clock { at: now, unix_ms };
    }

    /// Gives take `id` up (its caller is gone): it starts no new listing or batch and
    /// ends with `TimedOut` at once — unless a batch for it is on the wire, whose
    /// outcome (`Taken`: the items are ours, deleted or claimed; `TakeFailed`) then ends
    /// it as usual. False if no such take waits.
    pub fn cancel_take(&mut self, now: Instant, id: TakeId) -> bool {
        let Some(t) = self.takes.iter_mut().find(|t| t.id == id) else {
            return false;
        };
        t.deadline = Some(now);
        t.looked = true;
        self.expire_takes(now);
        self.drive(now);
        true
    }

    /// Completes a held item (at least once): deletes it and its claim in one `multi`.
    /// `Completed` or `CompleteFailed` follows. Refused if we do not hold it:
    /// `SessionExpired` if its claim went with a session, else `Finished`.
    pub fn complete(&mut self, now: Instant, item: &str) -> Result<(), Error> {
        self.settle(now, item, Settle::Complete)
    }

    /// Releases a held item (at least once): deletes its claim; others may take it.
    /// `Released` follows. Refused if we do not hold it (as [`complete`](Self::complete)).
    pub fn release(&mut self, now: Instant, item: &str) -> Result<(), Error> {
        self.settle(now, item, Settle::Release)
    }

    /// Ends the consumer: waiting takes fail with `Closed`, held claims are released,
    /// the marker deleted; then [`ConsumerEvent::Closed`]. At least once, a take whose
    /// claims were on the wire fails with `Closed` too, and its claims are released
    /// (reported `Released`).
    pub fn close(&mut self, now: Instant) {
        if self.closing() {
            return;
        }
        self.life = Life::Closing { deleting: false };
        self.fail_takes(Error::Closed);
        for name in core::mem::take(&mut self.held) {
            self.settle_later(name, Settle::Release);
        }
        self.drive(now);
    }

    fn emit(&mut self, e: ConsumerEvent) {
        self.kit.emit(e);
    }

    fn closing(&self) -> bool {
        self.life != Life::Open
    }

    fn ended(&self) -> bool {
        self.life == Life::Ended
    }

    fn claim_path(&self, item: &str) -> String {
        side_path(&self.config.meta_dir, CLAIM_PREFIX, item)
    }

    fn item_path(&self, item: &str) -> String {
        join(&self.config.dir, item)
    }

    fn at_least_once(&self) -> bool {
        self.config.delivery == Delivery::AtLeastOnce
    }

    fn connected(&self) -> bool {
        self.mine.in_session() && !self.kit.is_suspended()
    }

    fn can_send(&self, now: Instant) -> bool {
        self.mine.in_session() && self.kit.allows(now)
    }

    /// The marker's read is on the wire.
    fn reading_marker(&self) -> bool {
        self.kit.any(|p| *p == Purpose::ReadMarker)
    }

    fn on_delete_marker(&mut self, now: Instant, result: Reply) {
        self.life.delete_over();
        self.mine.deleted(&mut self.kit, now, &result);
    }
}

impl Consumer {
    /// The answer to request `op`, sent for `purpose` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, purpose: Purpose, result: Reply) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again.
        match purpose {
            Purpose::List => self.on_list(now, result),
            Purpose::ListClaims => {
                self.side.claims = match result {
                    Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => c
                        .into_iter()
                        .filter(|c| c.starts_with(CLAIM_PREFIX))
                        .take(self.config.max_listing)
                        .collect(),
                    _ => Vec::new(),
                }
            }
            Purpose::Parent(p) => self.parents.answered(&mut self.kit, now, &p, &result),
            Purpose::Sync => {}
            Purpose::Claim(i) => self.on_claim(now, i, result),
            Purpose::CheckClaim(i) => self.on_check_claim(now, i, result),
            Purpose::Read(slots) => self.on_read(now, slots, result),
            Purpose::Take(no, slots) => self.on_take(now, no, slots, result),
            Purpose::ReadMarker => self.on_read_marker(now, result),
            Purpose::Complete(name) => self.on_complete(now, name, result),
            Purpose::CheckSettle(name) => self.on_check_settle(now, name, result),
            Purpose::CheckOrphan(name) => self.on_check_orphan(now, name, result),
            Purpose::Release(name) => self.on_release(now, name, result),
            Purpose::Orphan(name) => self.on_orphan(now, name, &result),
            Purpose::DeleteMarker => self.on_delete_marker(now, result),
        }
        if self.parents.rounds > 0 && matches!(self.view, View::Held { .. }) && self.batch.is_none()
        {
            self.parents.rounds = 0;
            self.parents.error = None;
        }
        self.batch_step();
        self.drive(now);
    }
}

impl Protocol for Consumer {
    protocol_head!(ConsumerEvent, answer);

    fn on_watch(&mut self, now: Instant, _op: OpId, event: &WatchEvent) {
        if event.path == self.config.dir
            && matches!(
                event.event_type,
                EventType::NodeChildrenChanged | EventType::NodeDeleted | EventType::NodeCreated
            )
        {
            if self.view == View::Waiting {
                self.view = View::Stale;
            }
            if self.config.format == Format::Priority {
                // A newer item may outrank what we cached.
                self.view = match self.view {
                    View::Listing { .. } => View::Listing { watched: false },
                    _ => View::Stale,
                };
            }
        }
        if event.path == self.config.meta_dir && event.event_type == EventType::NodeChildrenChanged
        {
            // A claim may have gone: wake if only claimed items were left.
            self.side.watch = SideWatch::Fired;
            if self.side.blocked && self.view == View::Waiting {
                self.view = View::Stale;
            }
        }
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        if let Some((error, terminal)) = self.mine.follow_session(change) {
            self.on_session_end(error, terminal);
        } else if matches!(change, SessionChange::Reconnected { .. }) && self.view == View::Waiting
        {
            self.view = View::Stale;
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        if self.wake.is_some_and(|at| now >= at) {
            // A delay item held back is due: look again.
            self.wake = None;
            if self.view == View::Waiting {
                self.view = View::Stale;
            }
        }
        self.expire_takes(now);
        self.drive(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        self.close(now);
    }

    fn deadline(&self) -> Option<Instant> {
        if self.ended() {
            return None;
        }
        // A take not yet looked at waits for its look (the backoff's deadline below),
        // unless the backoff still holds at its deadline.
        let deadline = (0..self.takes.len())
            .filter_map(|i| self.take_expiry(i).filter(|&at| self.take_looked(i, at)))
            .min();
        // A delay item held back wakes a waiting take at its time.
        let wake = self.wake.filter(|_| !self.takes.is_empty());
        let deadline = deadline.into_iter().chain(wake).min();
        self.kit.timeout(deadline, self.connected() && self.stuck())
    }

    fn finished(&self) -> bool {
        self.ended() && self.kit.is_idle()
    }

    fn check(&self) {
        if let Some(b) = &self.batch {
            debug_assert_eq!(b.slots.len(), b.names.len(), "a slot per name");
            match &b.mode {
                phase::Mode::Once(_) => debug_assert!(!self.at_least_once()),
                phase::Mode::Claims(c) => {
                    debug_assert!(self.at_least_once());
                    debug_assert_eq!(c.len(), b.names.len(), "a claim bit per name");
                }
            }
            debug_assert!(
                self.takes.iter().any(|t| t.id == b.take),
                "a batch serves a waiting take"
            );
        }
        if !self.at_least_once() {
            debug_assert!(self.held.is_empty() && self.settling.is_empty());
            debug_assert!(self.orphans.is_empty() && self.orphan_checks.is_empty());
        }
        debug_assert!(
            self.view.in_flight() == self.kit.any(|p| *p == Purpose::List),
            "a listing on the wire iff its request is: {:?}",
            self.view
        );
        debug_assert!(
            self.wake.is_none() || self.config.format == Format::Delay,
            "only a delay queue holds items back"
        );
        if self.ended() {
            debug_assert!(self.takes.is_empty() && self.batch.is_none());
            debug_assert!(self.held.is_empty() && self.settling.is_empty());
        }
        if let Life::Closing { deleting: true } = self.life {
            debug_assert!(self.kit.any(|p| *p == Purpose::DeleteMarker));
        }
    }
}
