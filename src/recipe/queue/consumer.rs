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

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::{meta_dir, parent_round, sorted_items, Format, CLAIM_PREFIX};
use crate::error::Error;
use crate::proto::multi_failure;
use crate::proto::*;
use crate::recipe::kit::{join, Kit, Plumbing, Protocol, MAX_PARENT_ROUNDS};
use crate::recipe::path::ancestor_result;
use crate::recipe::{OpId, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

/// How many items whose claims went with a session are remembered (so that settling
/// one says why it fails).
const LOST_KEPT: usize = 1024;

/// Names one take.
pub type TakeId = u64;

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

/// One item of the batch being claimed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Slot {
    /// At least once: create its claim.
    ToClaim,
    /// A request about it is in flight.
    Busy,
    /// At least once: our claim's create may have landed: check its owner.
    Check,
    /// Claimed (at least once) or present (at most once); data wanted.
    NeedData,
    /// Claimed / present, with its data.
    Ready(Bytes),
    /// Taken by someone else, gone, or failed.
    Skip,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Batch {
    take: TakeId,
    names: Vec<String>,
    slots: Vec<Slot>,
    /// At least once: which slots' claims are ours.
    claimed: Vec<bool>,
    /// At most once: the claim multi is in doubt / must be sent (again).
    doubt: bool,
    send_claim: bool,
    error: Option<Error>,
}

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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Settle {
    Complete,
    Release,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SettleState {
    /// To send.
    Send,
    /// In flight.
    Busy,
    /// A complete or release whose reply was lost: check our claim (gone, or another
    /// session's, iff it was applied).
    Check,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Take {
    id: TakeId,
    max: usize,
    deadline: Option<Instant>,
    /// Had one listing or batch (a past deadline still gets one look).
    looked: bool,
}

/// Takes waiting at once.
const MAX_TAKES: usize = 64;

/// The consumer state machine; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Consumer {
    config: ConsumerConfig,
    marker: String,
    session_id: i64,
    next_take: TakeId,
    takes: VecDeque<Take>,
    listing: Vec<String>,
    cursor: usize,
    listing_valid: bool,
    listing_in_flight: bool,
    claims_listing: Vec<String>,
    /// At least once: the last listing found items, all claimed by others. Waiting
    /// then watches the side directory too (a claim that goes changes only that).
    claims_blocked: bool,
    /// The claims listing in flight set that watch.
    claims_watched: bool,
    /// The side directory's watch fired since the claims were listed.
    claims_fired: bool,
    /// The last listing was empty: the next one sets a watch; with a watch set, wait.
    last_empty: bool,
    waiting_watch: bool,
    contended: bool,
    batch: Option<Batch>,
    marker_present: bool,
    applied: u32,
    reading_marker: bool,
    need_parents: bool,
    parent_rounds: u8,
    parent_error: Option<Error>,
    /// At least once: items we hold, and settlements (complete/release) to send.
    held: Vec<String>,
    /// The last items whose claims went with a session (at most `LOST_KEPT`): settling
    /// one fails with `SessionExpired`, as it would have while the claim was held.
    lost: VecDeque<String>,
    settling: Vec<(String, Settle, SettleState)>,
    orphans: Vec<String>,
    /// Stale claims whose delete's reply was lost: whose are they now?
    orphan_checks: Vec<String>,
    closing: bool,
    deleting_marker: bool,
    ended: bool,
    kit: Kit<Purpose, ConsumerEvent>,
}

impl Consumer {
    /// A consumer; takes wait for the session's `Connected`.
    pub fn new(config: ConsumerConfig) -> Self {
        let mut name = String::from("c-");
        name.push_str(&config.id);
        let marker = join(&config.meta_dir, &name);
        Consumer {
            config,
            marker,
            session_id: 0,
            next_take: 1,
            takes: VecDeque::new(),
            listing: Vec::new(),
            cursor: 0,
            listing_valid: false,
            listing_in_flight: false,
            claims_listing: Vec::new(),
            claims_blocked: false,
            claims_watched: false,
            claims_fired: false,
            last_empty: false,
            waiting_watch: false,
            contended: false,
            batch: None,
            marker_present: false,
            applied: 0,
            reading_marker: false,
            need_parents: false,
            parent_rounds: 0,
            parent_error: None,
            held: Vec::new(),
            lost: VecDeque::new(),
            settling: Vec::new(),
            orphans: Vec::new(),
            orphan_checks: Vec::new(),
            closing: false,
            deleting_marker: false,
            ended: false,
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
        self.ended
    }

    /// Takes up to `max` items (at least one), waiting until `deadline` (`None`: as
    /// long as it takes; `Some(now)`: only what one look finds). Exactly one of
    /// `Taken`, `TimedOut` or `TakeFailed` follows for the returned id. Takes are served
    /// one after the other.
    pub fn take(&mut self, now: Instant, max: usize, deadline: Option<Instant>) -> TakeId {
        let id = self.next_take;
        self.next_take += 1;
        let error = if self.closing || self.ended {
            Some(Error::Closed)
        } else if self.takes.len() >= MAX_TAKES {
            Some(Error::Overloaded)
        } else if let Err(error) = validate_path(&self.config.dir) {
            Some(Error::InvalidPath {
                path: self.config.dir.clone(),
                error,
            })
        } else if self.config.delivery == Delivery::AtLeastOnce
            && self.held.len() >= self.config.max_held
        {
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

    fn settle(&mut self, now: Instant, item: &str, how: Settle) -> Result<(), Error> {
        if self.ended {
            return Err(Error::Closed);
        }
        let Some(at) = self.held.iter().position(|h| h == item) else {
            if self.lost.iter().any(|l| l == item) {
                return Err(Error::SessionExpired);
            }
            return Err(Error::Finished);
        };
        let name = self.held.remove(at);
        self.settling.push((name, how, SettleState::Send));
        self.drive(now);
        Ok(())
    }

    /// Ends the consumer: waiting takes fail with `Closed`, held claims are released,
    /// the marker deleted; then [`ConsumerEvent::Closed`]. At least once, a take whose
    /// claims were on the wire fails with `Closed` too, and its claims are released
    /// (reported `Released`).
    pub fn close(&mut self, now: Instant) {
        if self.closing {
            return;
        }
        self.closing = true;
        self.fail_takes(Error::Closed);
        for name in core::mem::take(&mut self.held) {
            self.settling
                .push((name, Settle::Release, SettleState::Send));
        }
        self.drive(now);
    }

    fn emit(&mut self, e: ConsumerEvent) {
        self.kit.emit(e);
    }

    fn claim_path(&self, item: &str) -> String {
        let mut name = String::from(CLAIM_PREFIX);
        name.push_str(item);
        join(&self.config.meta_dir, &name)
    }

    fn item_path(&self, item: &str) -> String {
        join(&self.config.dir, item)
    }

    fn at_least_once(&self) -> bool {
        self.config.delivery == Delivery::AtLeastOnce
    }

    fn can_send(&self, now: Instant) -> bool {
        self.session_id != 0 && self.kit.allows(now)
    }

    fn drive(&mut self, now: Instant) {
        if self.ended || !self.can_send(now) {
            return;
        }
        // One round at a time: the replies of a round on the wire decide on the next.
        if self.need_parents && !self.kit.any(|p| matches!(p, Purpose::Parent(_))) {
            self.need_parents = false;
            self.parent_rounds = self.parent_rounds.saturating_add(1);
            for (p, req) in parent_round(&self.config.dir, &self.config.meta_dir, &self.config.acl)
            {
                self.kit.send(Purpose::Parent(p), req);
            }
        }
        self.drive_settling();
        if !self.orphan_checks.is_empty() {
            self.kit.send(
                Purpose::Sync,
                Request::Sync(PathRequest {
                    path: self.config.meta_dir.clone(),
                }),
            );
            for name in core::mem::take(&mut self.orphan_checks) {
                let path = self.claim_path(&name);
                self.kit.send(
                    Purpose::CheckOrphan(name),
                    Request::Exists(PathWatch { path, watch: false }),
                );
            }
        }
        if !self.orphans.is_empty() {
            for name in core::mem::take(&mut self.orphans) {
                let path = self.claim_path(&name);
                self.kit.send(
                    Purpose::Orphan(name),
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
        }
        if self.batch.is_some() {
            self.drive_batch();
        }
        self.expire_takes(now);
        if self.closing && self.batch.is_none() && !self.takes.is_empty() {
            // The take whose batch was on the wire at close: that batch is over.
            self.fail_takes(Error::Closed);
        }
        if self.batch.is_none() && !self.takes.is_empty() {
            self.next_batch();
        }
        if self.closing
            && self.takes.is_empty()
            && self.batch.is_none()
            && self.settling.is_empty()
            && !self.deleting_marker
            && !self.reading_marker
        {
            if self.marker_present {
                self.deleting_marker = true;
                self.kit.send(
                    Purpose::DeleteMarker,
                    Request::Delete(DeleteRequest {
                        path: self.marker.clone(),
                        version: -1,
                    }),
                );
            } else if self.kit.is_quiet() {
                self.end();
            }
        }
    }

    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.emit(ConsumerEvent::Closed);
        }
    }

    fn drive_settling(&mut self) {
        let mut synced = false;
        for i in 0..self.settling.len() {
            let (name, how, state) = self.settling[i].clone();
            if state == SettleState::Busy {
                continue;
            }
            self.settling[i].2 = SettleState::Busy;
            let claim = self.claim_path(&name);
            if state == SettleState::Check {
                if !synced {
                    synced = true;
                    self.kit.send(
                        Purpose::Sync,
                        Request::Sync(PathRequest {
                            path: self.config.meta_dir.clone(),
                        }),
                    );
                }
                self.kit.send(
                    Purpose::CheckSettle(name),
                    Request::Exists(PathWatch {
                        path: claim,
                        watch: false,
                    }),
                );
                continue;
            }
            match how {
                Settle::Complete => {
                    let item = self.item_path(&name);
                    self.kit.send(
                        Purpose::Complete(name),
                        Request::Multi(alloc::vec![
                            MultiOp::Delete(DeleteRequest {
                                path: claim,
                                version: -1
                            }),
                            MultiOp::Delete(DeleteRequest {
                                path: item,
                                version: -1
                            }),
                        ]),
                    );
                }
                Settle::Release => {
                    self.kit.send(
                        Purpose::Release(name),
                        Request::Delete(DeleteRequest {
                            path: claim,
                            version: -1,
                        }),
                    );
                }
            }
        }
    }

    /// No batch: list, wait, or start the next batch from the listing.
    fn next_batch(&mut self) {
        let Some((take, max)) = self.takes.front().map(|t| (t.id, t.max)) else {
            return;
        };
        if self.listing_in_flight || self.waiting_watch {
            return;
        }
        if !self.listing_valid || self.cursor >= self.listing.len() {
            self.list();
            return;
        }
        let end = (self.cursor + max).min(self.listing.len());
        let names: Vec<String> = self.listing[self.cursor..end].to_vec();
        self.cursor = end;
        let n = names.len();
        let first = if self.at_least_once() {
            Slot::ToClaim
        } else {
            Slot::NeedData
        };
        self.batch = Some(Batch {
            take,
            names,
            slots: alloc::vec![first; n],
            claimed: alloc::vec![false; n],
            doubt: false,
            send_claim: false,
            error: None,
        });
        self.drive_batch();
    }

    fn list(&mut self) {
        self.listing_in_flight = true;
        self.listing_valid = false;
        let watch = self.last_empty || self.config.format == Format::Priority;
        if self.at_least_once() {
            let claims_watch = watch && self.claims_blocked;
            self.claims_watched = claims_watch;
            self.claims_fired = false;
            self.kit.send(
                Purpose::ListClaims,
                Request::GetChildren(PathWatch {
                    path: self.config.meta_dir.clone(),
                    watch: claims_watch,
                }),
            );
        }
        self.kit.send(
            Purpose::List,
            Request::GetChildren(PathWatch {
                path: self.config.dir.clone(),
                watch,
            }),
        );
        self.waiting_watch = false;
        if watch {
            self.waiting_watch = true; // cleared by the listing unless it is empty
        }
    }

    /// Sends what the batch needs now.
    fn drive_batch(&mut self) {
        let Some(mut b) = self.batch.take() else {
            return;
        };
        if self.at_least_once() {
            let mut read = Vec::new();
            let mut checks = false;
            for i in 0..b.slots.len() {
                match b.slots[i] {
                    Slot::ToClaim => {
                        b.slots[i] = Slot::Busy;
                        let path = self.claim_path(&b.names[i]);
                        let create = CreateRequest::new(
                            path,
                            Bytes::from(self.config.id.clone()),
                            self.config.acl.clone(),
                            CreateMode::Ephemeral,
                        );
                        self.kit.send(Purpose::Claim(i), Request::Create(create));
                        read.push(i);
                    }
                    Slot::Check => {
                        if !checks {
                            checks = true;
                            self.kit.send(
                                Purpose::Sync,
                                Request::Sync(PathRequest {
                                    path: self.config.meta_dir.clone(),
                                }),
                            );
                        }
                        b.slots[i] = Slot::Busy;
                        let path = self.claim_path(&b.names[i]);
                        self.kit.send(
                            Purpose::CheckClaim(i),
                            Request::Exists(PathWatch { path, watch: false }),
                        );
                    }
                    Slot::NeedData => read.push(i),
                    _ => {}
                }
            }
            // Read after the claims (same pipeline: the server runs them in order).
            let read: Vec<usize> = read
                .into_iter()
                .filter(|&i| matches!(b.slots[i], Slot::NeedData | Slot::Busy))
                .collect();
            if !read.is_empty() {
                let ops = read
                    .iter()
                    .map(|&i| {
                        if b.slots[i] == Slot::NeedData {
                            b.slots[i] = Slot::Busy;
                        }
                        ReadOp::GetData(PathWatch {
                            path: self.item_path(&b.names[i]),
                            watch: false,
                        })
                    })
                    .collect();
                self.kit.send(Purpose::Read(read), Request::MultiRead(ops));
            }
        } else if b.doubt {
            if !self.reading_marker {
                self.reading_marker = true;
                self.kit.send(
                    Purpose::Sync,
                    Request::Sync(PathRequest {
                        path: self.config.meta_dir.clone(),
                    }),
                );
                self.kit.send(
                    Purpose::ReadMarker,
                    Request::Exists(PathWatch {
                        path: self.marker.clone(),
                        watch: false,
                    }),
                );
            }
        } else if b.send_claim {
            b.send_claim = false;
            let slots: Vec<usize> = (0..b.slots.len())
                .filter(|&i| matches!(b.slots[i], Slot::Ready(_)))
                .collect();
            let no = self.applied.wrapping_add(1);
            if slots.is_empty() {
                self.batch = Some(b);
                self.batch_step();
                return;
            }
            let mut ops = Vec::with_capacity(slots.len() + 2);
            if !self.marker_present {
                ops.push(MultiOp::Create(CreateRequest::new(
                    self.marker.clone(),
                    Bytes::new(),
                    self.config.acl.clone(),
                    CreateMode::Ephemeral,
                )));
            }
            ops.push(MultiOp::SetData(SetDataRequest {
                path: self.marker.clone(),
                data: Bytes::new(),
                version: self.applied as i32,
            }));
            for &i in &slots {
                ops.push(MultiOp::Delete(DeleteRequest {
                    path: self.item_path(&b.names[i]),
                    version: -1,
                }));
            }
            self.kit.send(Purpose::Take(no, slots), Request::Multi(ops));
        } else {
            let read: Vec<usize> = (0..b.slots.len())
                .filter(|&i| b.slots[i] == Slot::NeedData)
                .collect();
            if !read.is_empty() {
                let ops = read
                    .iter()
                    .map(|&i| {
                        b.slots[i] = Slot::Busy;
                        ReadOp::GetData(PathWatch {
                            path: self.item_path(&b.names[i]),
                            watch: false,
                        })
                    })
                    .collect();
                self.kit.send(Purpose::Read(read), Request::MultiRead(ops));
            }
        }
        self.batch = Some(b);
        self.batch_step();
    }

    /// Nothing in flight for the batch: deliver it, or send the next step.
    fn batch_step(&mut self) {
        let busy = self.kit.any(|p| {
            matches!(
                p,
                Purpose::Claim(_)
                    | Purpose::CheckClaim(_)
                    | Purpose::Read(_)
                    | Purpose::Take(..)
                    | Purpose::ReadMarker
            )
        });
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        if busy || b.doubt || b.send_claim {
            return;
        }
        if b.slots
            .iter()
            .any(|s| !matches!(s, Slot::Ready(_) | Slot::Skip))
        {
            return; // waits for a retry (reconnect, backoff, parents)
        }
        if self.config.delivery == Delivery::AtMostOnce
            && b.slots.iter().any(|s| matches!(s, Slot::Ready(_)))
            && !b.claimed.iter().any(|c| *c)
        {
            // Read; now take them in one multi.
            b.send_claim = true;
            self.drive_batch();
            return;
        }
        let Some(b) = self.batch.take() else {
            return;
        };
        let mut items = Vec::new();
        for (i, slot) in b.slots.into_iter().enumerate() {
            if let Slot::Ready(data) = slot {
                items.push(Item {
                    name: b.names[i].clone(),
                    data,
                });
            }
        }
        if self.at_least_once() && self.closing && !items.is_empty() {
            // Claimed while closing: nobody will complete them. The take fails, the
            // claims are released before `Closed`.
            for it in items {
                self.settling
                    .push((it.name, Settle::Release, SettleState::Send));
            }
            self.finish_take(
                b.take,
                ConsumerEvent::TakeFailed {
                    take: b.take,
                    error: Error::Closed,
                },
            );
            return;
        }
        if self.at_least_once() {
            for it in &items {
                self.held.push(it.name.clone());
            }
        }
        if items.is_empty() {
            if let Some(error) = b.error {
                self.finish_take(
                    b.take,
                    ConsumerEvent::TakeFailed {
                        take: b.take,
                        error,
                    },
                );
            }
            // Otherwise nothing was had: the take goes on with the next batch.
        } else {
            self.finish_take(
                b.take,
                ConsumerEvent::Taken {
                    take: b.take,
                    items,
                },
            );
        }
    }

    fn finish_take(&mut self, take: TakeId, event: ConsumerEvent) {
        if let Some(at) = self.takes.iter().position(|t| t.id == take) {
            self.takes.remove(at);
            self.emit(event);
        }
    }

    /// Contention met: jump ahead in the listing.
    fn contended(&mut self, batch_len: usize) {
        self.contended = true;
        let jump = batch_len.max(1) * (self.config.spread % 8) as usize;
        self.cursor = self.cursor.saturating_add(jump);
    }

    fn on_list(&mut self, now: Instant, result: Result<Response, Error>) {
        self.listing_in_flight = false;
        match result {
            Ok(Response::Children(children)) | Ok(Response::Children2 { children, .. }) => {
                self.kit.succeeded();
                if let Some(t) = self.takes.front_mut() {
                    t.looked = true;
                }
                let mut items =
                    sorted_items(self.config.format, &children, self.config.max_listing);
                let listed = items.len();
                if self.at_least_once() {
                    let claims = core::mem::take(&mut self.claims_listing);
                    items.retain(|n| {
                        !claims
                            .iter()
                            .any(|c| c.strip_prefix(CLAIM_PREFIX) == Some(n.as_str()))
                    });
                }
                self.claims_blocked = listed > 0 && items.is_empty();
                if items.is_empty() {
                    let watched = self.waiting_watch;
                    // Only claimed items: the wake-up is a claim going away, so the
                    // side directory must be watched too, and must not have changed
                    // while we listed.
                    let claims_missed =
                        self.claims_blocked && (!self.claims_watched || self.claims_fired);
                    self.last_empty = true;
                    self.listing.clear();
                    self.cursor = 0;
                    if (!watched || claims_missed) && !self.takes.is_empty() && !self.closing {
                        // List again, this time with a watch (no lost wake-up).
                        self.list();
                    }
                } else {
                    self.waiting_watch = false;
                    self.last_empty = false;
                    self.listing = items;
                    self.listing_valid = true;
                    self.cursor = 0;
                    if core::mem::take(&mut self.contended) {
                        let k = self.takes.front().map(|t| t.max).unwrap_or(1);
                        let start = k * (self.config.spread % 8) as usize;
                        if start < self.listing.len() {
                            self.cursor = start;
                        }
                    }
                }
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.waiting_watch = false;
                if self.parent_rounds >= MAX_PARENT_ROUNDS || self.parent_error.is_some() {
                    let e = self.parent_error.take().unwrap_or(Error::NoParent {
                        path: self.config.dir.clone(),
                        code: ErrorCode::NoNode,
                    });
                    self.fail_takes(e);
                } else {
                    self.need_parents = true;
                }
            }
            Err(e) if e.is_retryable() => {
                self.waiting_watch = false;
                self.kit.failed(now);
            }
            Err(e) if e.ends_session() => self.waiting_watch = false,
            Err(e) => {
                self.waiting_watch = false;
                self.fail_takes(e);
            }
            Ok(_) => {
                self.waiting_watch = false;
                self.fail_takes(Error::UnexpectedReply);
            }
        }
    }

    fn fail_takes(&mut self, error: Error) {
        let keep = self.batch.as_ref().map(|b| b.take);
        let takes: Vec<_> = self.takes.drain(..).collect();
        for t in takes {
            if Some(t.id) == keep {
                self.takes.push_back(t);
            } else {
                self.emit(ConsumerEvent::TakeFailed {
                    take: t.id,
                    error: error.clone(),
                });
            }
        }
    }

    fn on_claim(&mut self, now: Instant, i: usize, result: Result<Response, Error>) {
        let parents_done = self.parent_rounds >= MAX_PARENT_ROUNDS || self.parent_error.is_some();
        let reading = self
            .kit
            .any(|p| matches!(p, Purpose::Read(slots) if slots.contains(&i)));
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        let Some(slot) = b.slots.get_mut(i) else {
            return;
        };
        match result {
            Ok(_) => {
                b.claimed[i] = true;
                // The read sent behind the claim answers for the data — unless it
                // answered first (a read refused by the session comes back before the
                // claim's reply): then read again.
                if *slot == Slot::Busy && !reading {
                    *slot = Slot::NeedData;
                }
            }
            Err(Error::Server(ErrorCode::NodeExists)) => {
                *slot = Slot::Skip;
                let n = b.names.len();
                self.contended(n);
            }
            Err(Error::Server(ErrorCode::NoNode)) if !parents_done => {
                *slot = Slot::ToClaim;
                self.need_parents = true;
            }
            Err(e) if e.may_have_applied() => {
                *slot = Slot::Check;
                self.kit.failed(now);
            }
            Err(e) if e.is_retryable() => {
                *slot = Slot::ToClaim;
                self.kit.failed(now);
            }
            Err(e) if e.ends_session() => *slot = Slot::Skip,
            Err(e) => {
                *slot = Slot::Skip;
                b.error = Some(match e {
                    Error::Server(ErrorCode::NoNode) => {
                        self.parent_error.clone().unwrap_or(Error::NoParent {
                            path: self.config.meta_dir.clone(),
                            code: ErrorCode::NoNode,
                        })
                    }
                    e => e,
                });
            }
        }
    }

    fn on_check_claim(&mut self, now: Instant, i: usize, result: Result<Response, Error>) {
        let session = self.session_id;
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        let Some(slot) = b.slots.get_mut(i) else {
            return;
        };
        match result {
            Ok(Response::Stat(stat)) if stat.ephemeral_owner == session => {
                b.claimed[i] = true;
                *slot = Slot::NeedData;
            }
            Ok(_) => *slot = Slot::Skip, // someone else's claim
            Err(Error::Server(ErrorCode::NoNode)) => *slot = Slot::ToClaim,
            Err(e) if e.is_retryable() => {
                *slot = Slot::Check;
                self.kit.failed(now);
            }
            Err(_) => *slot = Slot::Skip,
        }
    }

    fn on_read(&mut self, now: Instant, slots: Vec<usize>, result: Result<Response, Error>) {
        let alo = self.at_least_once();
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        let mut gone = 0;
        match result {
            Ok(Response::Multi(results)) if results.len() == slots.len() => {
                for (r, &i) in results.into_iter().zip(&slots) {
                    let Some(slot) = b.slots.get_mut(i) else {
                        continue;
                    };
                    // At least once, only a claimed item's data counts.
                    let ours = !alo || b.claimed[i];
                    match r {
                        MultiResult::GetData { data, .. } if ours => *slot = Slot::Ready(data),
                        MultiResult::GetData { .. } => {
                            // Claim not (yet) ours: its own answer decides.
                        }
                        _ if alo && b.claimed[i] => {
                            // Completed by someone meanwhile: our claim is stale.
                            *slot = Slot::Skip;
                            b.claimed[i] = false;
                            self.orphans.push(b.names[i].clone());
                            gone += 1;
                        }
                        _ if alo => {}
                        _ => {
                            *slot = Slot::Skip;
                            gone += 1;
                        }
                    }
                }
            }
            Err(e) if e.is_retryable() || e.ends_session() => {
                for &i in &slots {
                    if let Some(s) = b.slots.get_mut(i) {
                        if *s == Slot::Busy || *s == Slot::NeedData {
                            // At least once, a claim in flight answers for itself.
                            if !alo || b.claimed[i] {
                                *s = Slot::NeedData;
                            }
                        }
                    }
                }
                self.kit.failed(now);
            }
            Err(e) => {
                for &i in &slots {
                    if let Some(s) = b.slots.get_mut(i) {
                        if !alo || b.claimed[i] {
                            *s = Slot::Skip;
                        }
                    }
                }
                b.error = Some(e);
            }
            Ok(_) => {
                for &i in &slots {
                    if let Some(s) = b.slots.get_mut(i) {
                        *s = Slot::Skip;
                    }
                }
                b.error = Some(Error::UnexpectedReply);
            }
        }
        // At least once, a slot still Busy here had its claim answered after... never:
        // claims precede the read. Claimed slots whose data is still missing read again.
        if alo {
            for i in 0..b.slots.len() {
                if b.slots[i] == Slot::Busy && b.claimed[i] {
                    b.slots[i] = Slot::NeedData;
                }
            }
        }
        if gone > 0 {
            let n = b.names.len();
            self.contended(n);
        }
    }

    fn on_take(
        &mut self,
        now: Instant,
        no: u32,
        slots: Vec<usize>,
        result: Result<Response, Error>,
    ) {
        let marker_ops = if self.marker_present { 1 } else { 2 };
        let parents_done = self.parent_rounds >= MAX_PARENT_ROUNDS || self.parent_error.is_some();
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        match (&result, multi_failure(&result)) {
            (Ok(Response::Multi(_)), None) => {
                self.kit.succeeded();
                self.marker_present = true;
                self.applied = no;
                for c in b.claimed.iter_mut() {
                    *c = true; // taken: deliver
                }
            }
            (_, Some((i, code))) if i >= marker_ops => {
                // An item vanished between our read and the take: someone else's.
                if let Some(&slot) = slots.get(i - marker_ops) {
                    b.slots[slot] = Slot::Skip;
                }
                if code == ErrorCode::NoNode {
                    b.send_claim = true;
                    let n = b.names.len();
                    self.contended(n);
                } else {
                    for s in b.slots.iter_mut() {
                        *s = Slot::Skip;
                    }
                    b.error = Some(Error::Server(code));
                }
            }
            (_, Some((0, ErrorCode::NoNode))) if !self.marker_present && !parents_done => {
                self.need_parents = true;
                b.send_claim = true;
            }
            (_, Some((_, ErrorCode::NoNode))) if !self.marker_present && parents_done => {
                for s in b.slots.iter_mut() {
                    *s = Slot::Skip;
                }
                b.error = Some(self.parent_error.clone().unwrap_or(Error::NoParent {
                    path: self.config.meta_dir.clone(),
                    code: ErrorCode::NoNode,
                }));
            }
            (_, Some(_)) => {
                // The marker is not as we think (BadVersion, NodeExists, NoNode): read it.
                b.doubt = true;
            }
            (Err(e), None) if e.may_have_applied() || e.ends_session() => {
                b.doubt = true;
                self.kit.failed(now);
            }
            (Err(e), None) if e.is_retryable() => {
                b.send_claim = true;
                self.kit.failed(now);
            }
            (Err(e), None) => {
                for s in b.slots.iter_mut() {
                    *s = Slot::Skip;
                }
                b.error = Some(e.clone());
            }
            (Ok(_), None) => {
                for s in b.slots.iter_mut() {
                    *s = Slot::Skip;
                }
                b.error = Some(Error::UnexpectedReply);
            }
        }
    }

    fn on_read_marker(&mut self, now: Instant, result: Result<Response, Error>) {
        self.reading_marker = false;
        let (present, version) = match result {
            Ok(Response::Stat(stat)) if stat.ephemeral_owner == self.session_id => {
                (true, stat.version as u32)
            }
            Ok(Response::Stat(_)) => {
                // Another session's marker (a previous session of ours the server has
                // not expired yet): our take cannot create it; wait it out with a
                // backoff, as the producer does, instead of sending again at once.
                self.kit.failed(now);
                (false, 0)
            }
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => (false, 0),
            Err(e) => {
                if e.is_retryable() {
                    self.kit.failed(now);
                }
                return; // read again (or the session change decides)
            }
        };
        let applied_before = self.applied;
        self.marker_present = present;
        self.applied = version;
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        b.doubt = false;
        let no = applied_before.wrapping_add(1);
        if present && version >= no && version != applied_before {
            // Our take was applied: the items are ours.
            for c in b.claimed.iter_mut() {
                *c = true;
            }
        } else {
            // Not applied: take them again — after reading them again. The names were
            // read before the doubt (a disconnection, maybe long); the data is read
            // again so that what we deliver is what the multi deletes, even if the
            // directory was deleted and made again meanwhile (outside the contract: an
            // operator, or a container someone else made, see the module docs).
            for slot in b.slots.iter_mut() {
                if matches!(slot, Slot::Ready(_)) {
                    *slot = Slot::NeedData;
                }
            }
        }
    }

    fn on_complete(&mut self, now: Instant, name: String, result: Result<Response, Error>) {
        let failure = multi_failure(&result);
        let at = self.settling.iter().position(|s| s.0 == name);
        let done = |this: &mut Self, e: ConsumerEvent| {
            if let Some(at) = at {
                this.settling.remove(at);
            }
            this.emit(e);
        };
        match (result, failure) {
            (Ok(Response::Multi(_)), None) => done(self, ConsumerEvent::Completed { item: name }),
            (_, Some((1, ErrorCode::NoNode))) => {
                // The item is gone (taken outside the claim protocol): drop our claim.
                self.orphans.push(name.clone());
                done(
                    self,
                    ConsumerEvent::CompleteFailed {
                        item: name,
                        error: Error::Server(ErrorCode::NoNode),
                    },
                );
            }
            (_, Some((_, code))) => done(
                self,
                ConsumerEvent::CompleteFailed {
                    item: name,
                    error: Error::Server(code),
                },
            ),
            (Err(e), None) if e.may_have_applied() => {
                // Did it land? Our claim is gone iff it did (only we delete it).
                if let Some(at) = at {
                    self.settling[at].2 = SettleState::Check;
                }
                self.kit.failed(now);
            }
            (Err(e), None) if e.is_retryable() => {
                if let Some(at) = at {
                    self.settling[at].2 = SettleState::Send;
                }
                self.kit.failed(now);
            }
            (Err(e), None) if e.ends_session() => {}
            (Err(e), None) => done(
                self,
                ConsumerEvent::CompleteFailed {
                    item: name,
                    error: e,
                },
            ),
            (Ok(_), None) => done(
                self,
                ConsumerEvent::CompleteFailed {
                    item: name,
                    error: Error::UnexpectedReply,
                },
            ),
        }
    }

    /// Our claim after a complete or release whose reply was lost: gone, or another
    /// session's (only we delete ours while our session lives), means it landed; still
    /// ours means it did not: send it again.
    fn on_check_settle(&mut self, now: Instant, name: String, result: Result<Response, Error>) {
        let Some(at) = self.settling.iter().position(|s| s.0 == name) else {
            return;
        };
        let how = self.settling[at].1;
        let landed = |this: &mut Self| {
            this.settling.remove(at);
            this.emit(match how {
                Settle::Complete => ConsumerEvent::Completed { item: name.clone() },
                Settle::Release => ConsumerEvent::Released { item: name.clone() },
            });
        };
        match result {
            Err(Error::Server(ErrorCode::NoNode)) => landed(self),
            Ok(Response::Stat(stat)) if stat.ephemeral_owner != self.session_id => landed(self),
            Ok(_) => self.settling[at].2 = SettleState::Send, // ours: not applied, again
            Err(e) if e.is_retryable() => {
                self.settling[at].2 = SettleState::Check;
                self.kit.failed(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => {
                self.settling.remove(at);
                self.emit(ConsumerEvent::CompleteFailed {
                    item: name,
                    error: e,
                });
            }
        }
    }

    fn on_release(&mut self, now: Instant, name: String, result: Result<Response, Error>) {
        let Some(at) = self.settling.iter().position(|s| s.0 == name) else {
            return;
        };
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => {
                self.settling.remove(at);
                self.emit(ConsumerEvent::Released { item: name });
            }
            Err(e) if e.may_have_applied() => {
                // Did it land? Another consumer may hold a claim of that name by now:
                // check whose it is before deleting again.
                self.settling[at].2 = SettleState::Check;
                self.kit.failed(now);
            }
            Err(e) if e.is_retryable() => {
                self.settling[at].2 = SettleState::Send;
                self.kit.failed(now);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => {
                // Refused for good: the claim stays until our session ends.
                self.settling.remove(at);
                self.emit(ConsumerEvent::CompleteFailed {
                    item: name,
                    error: e,
                });
            }
        }
    }

    /// Takes whose deadline passed and that wait for nothing in flight end.
    fn expire_takes(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.takes.len() {
            if self.take_expiry(i).is_some_and(|at| now >= at) && self.take_looked(i, now) {
                let id = self.takes[i].id;
                self.takes.remove(i);
                self.emit(ConsumerEvent::TimedOut { take: id });
            } else {
                i += 1;
            }
        }
    }

    /// When take `i` may end on its deadline: never while its batch or its first
    /// listing is on the wire (their replies decide).
    fn take_expiry(&self, i: usize) -> Option<Instant> {
        let t = self.takes.get(i)?;
        let connected = self.session_id != 0 && !self.kit.is_suspended();
        let blocked = self.batch.as_ref().is_some_and(|b| b.take == t.id)
            || (i == 0 && !t.looked && connected && self.listing_in_flight);
        if blocked {
            None
        } else {
            t.deadline
        }
    }

    /// Has take `i` had its one look by `now`? A listing answered, a watch on an empty
    /// queue, no connection, a take behind another, or a backoff that still holds at
    /// `now` (a refused look is a look: the deadline is not stretched by the backoff).
    fn take_looked(&self, i: usize, now: Instant) -> bool {
        let connected = self.session_id != 0 && !self.kit.is_suspended();
        self.takes.get(i).is_some_and(|t| t.looked)
            || self.waiting_watch
            || !connected
            || i > 0
            || !self.kit.allows(now)
    }

    fn on_session_end(&mut self, error: Error, terminal: bool) {
        self.kit.clear_requests();
        self.session_id = 0;
        self.listing_in_flight = false;
        self.waiting_watch = false;
        self.listing_valid = false;
        self.reading_marker = false;
        self.deleting_marker = false;
        self.marker_present = false;
        self.applied = 0;
        self.need_parents = false;
        self.orphans.clear();
        self.orphan_checks.clear();
        if let Some(b) = self.batch.take() {
            // At most once, a take in flight or in doubt may have deleted the items.
            let maybe_taken = self.config.delivery == Delivery::AtMostOnce
                && b.claimed.iter().all(|c| !*c)
                && (b.doubt || b.slots.iter().any(|s| matches!(s, Slot::Ready(_))))
                && !b.send_claim;
            if maybe_taken {
                self.finish_take(
                    b.take,
                    ConsumerEvent::TakeFailed {
                        take: b.take,
                        error: super::in_doubt(&error),
                    },
                );
            }
        }
        for name in core::mem::take(&mut self.held) {
            if self.lost.len() >= LOST_KEPT {
                self.lost.pop_front();
            }
            self.lost.push_back(name.clone());
            self.emit(ConsumerEvent::ClaimLost { item: name });
        }
        for (name, how, _) in core::mem::take(&mut self.settling) {
            match how {
                Settle::Release => self.emit(ConsumerEvent::Released { item: name }),
                Settle::Complete => self.emit(ConsumerEvent::ClaimLost { item: name }),
            }
        }
        if terminal {
            self.fail_takes(error);
            let rest: Vec<Take> = self.takes.drain(..).collect();
            for t in rest {
                self.emit(ConsumerEvent::TakeFailed {
                    take: t.id,
                    error: Error::Closed,
                });
            }
            self.end();
        }
    }
}

impl Protocol for Consumer {
    type Event = ConsumerEvent;

    fn kit(&mut self) -> &mut dyn Plumbing<Self::Event> {
        &mut self.kit
    }

    fn on_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        // A read behind a failed sync reads as lost (`Outbox::answer`): read again.
        let Some((purpose, result)) = self.kit.answer(op, result) else {
            return;
        };
        match purpose {
            Purpose::List => self.on_list(now, result),
            Purpose::ListClaims => {
                self.claims_listing = match result {
                    Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => c
                        .into_iter()
                        .filter(|c| c.starts_with(CLAIM_PREFIX))
                        .take(self.config.max_listing)
                        .collect(),
                    _ => Vec::new(),
                }
            }
            Purpose::Parent(p) => {
                if let Some(e) = ancestor_result(&p, &result) {
                    if e.is_retryable() {
                        // Refused: the round goes again after a backoff (once per round)
                        // and does not count as a round that found a parent missing.
                        if !self.need_parents {
                            self.kit.failed(now);
                            self.parent_rounds = self.parent_rounds.saturating_sub(1);
                        }
                        self.need_parents = true;
                    } else if !e.ends_session() && self.parent_error.is_none() {
                        self.parent_error = Some(e);
                    }
                }
            }
            Purpose::Sync => {}
            Purpose::Claim(i) => self.on_claim(now, i, result),
            Purpose::CheckClaim(i) => self.on_check_claim(now, i, result),
            Purpose::Read(slots) => self.on_read(now, slots, result),
            Purpose::Take(no, slots) => self.on_take(now, no, slots, result),
            Purpose::ReadMarker => self.on_read_marker(now, result),
            Purpose::Complete(name) => self.on_complete(now, name, result),
            Purpose::CheckSettle(name) => self.on_check_settle(now, name, result),
            Purpose::CheckOrphan(name) => {
                // After a failed sync the read may be stale, whatever it says: it
                // reads as lost (`Outbox::answer`), and is made again.
                match result {
                    // Still ours (our delete did not land): delete it again.
                    Ok(Response::Stat(stat)) if stat.ephemeral_owner == self.session_id => {
                        self.orphans.push(name)
                    }
                    Err(e) if e.is_retryable() => {
                        self.orphan_checks.push(name);
                        self.kit.failed(now);
                    }
                    // Gone, or another session's claim: nothing of ours to delete.
                    _ => {}
                }
            }
            Purpose::Release(name) => self.on_release(now, name, result),
            Purpose::Orphan(name) => match &result {
                // It may have landed, and the item's name may be claimed by someone
                // else since: never delete it blindly again.
                Err(e) if e.may_have_applied() => {
                    self.orphan_checks.push(name);
                    self.kit.failed(now);
                }
                Err(e) if e.is_retryable() => {
                    self.orphans.push(name);
                    self.kit.failed(now);
                }
                _ => {}
            },
            Purpose::DeleteMarker => {
                self.deleting_marker = false;
                match result {
                    Err(e) if e.is_retryable() => self.kit.failed(now),
                    _ => self.marker_present = false,
                }
            }
        }
        if self.parent_rounds > 0 && self.listing_valid && self.batch.is_none() {
            self.parent_rounds = 0;
            self.parent_error = None;
        }
        self.batch_step();
        self.drive(now);
    }

    fn on_watch(&mut self, now: Instant, _op: OpId, event: &WatchEvent) {
        if event.path == self.config.dir
            && matches!(
                event.event_type,
                EventType::NodeChildrenChanged | EventType::NodeDeleted | EventType::NodeCreated
            )
        {
            if self.waiting_watch && !self.listing_in_flight {
                self.waiting_watch = false;
                self.listing_valid = false;
            }
            if self.config.format == Format::Priority {
                // A newer item may outrank what we cached.
                self.listing_valid = false;
                self.waiting_watch = false;
            }
        }
        if event.path == self.config.meta_dir && event.event_type == EventType::NodeChildrenChanged
        {
            // A claim may have gone: wake if only claimed items were left.
            self.claims_fired = true;
            if self.claims_blocked && self.waiting_watch && !self.listing_in_flight {
                self.waiting_watch = false;
                self.listing_valid = false;
            }
        }
        self.drive(now);
    }

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Connected { session_id } => {
                self.session_id = session_id;
                self.marker_present = false;
                self.applied = 0;
            }
            SessionChange::Suspended => {}
            SessionChange::Reconnected { session_id } => {
                self.session_id = session_id;
                if self.waiting_watch && !self.listing_in_flight {
                    self.waiting_watch = false;
                    self.listing_valid = false;
                }
            }
            SessionChange::Expired => self.on_session_end(Error::SessionExpired, false),
            SessionChange::Closed => self.on_session_end(Error::Closed, true),
        }
        self.drive(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.expire_takes(now);
        self.drive(now);
    }

    fn on_abandon(&mut self, now: Instant) {
        self.close(now);
    }

    fn deadline(&self) -> Option<Instant> {
        if self.ended {
            return None;
        }
        let connected = self.session_id != 0 && !self.kit.is_suspended();
        // A take not yet looked at waits for its look (the backoff's deadline below),
        // unless the backoff still holds at its deadline.
        let deadline = (0..self.takes.len())
            .filter_map(|i| self.take_expiry(i).filter(|&at| self.take_looked(i, at)))
            .min();
        // Only what could go out but for the backoff waits on it; a consumer waiting
        // for replies or for a session has no deadline (the backoff's may be past).
        let batch_waits = match &self.batch {
            None => !self.takes.is_empty() && !self.listing_in_flight && !self.waiting_watch,
            Some(b) => {
                b.send_claim
                    || (b.doubt && !self.reading_marker)
                    || b.slots
                        .iter()
                        .any(|s| matches!(s, Slot::ToClaim | Slot::Check | Slot::NeedData))
            }
        };
        let closing = self.closing
            && self.takes.is_empty()
            && self.batch.is_none()
            && self.settling.is_empty()
            && (self.marker_present || self.kit.is_quiet())
            && !self.deleting_marker
            && !self.reading_marker;
        // A parent round goes once the last one's replies are in.
        let parents = self.need_parents && !self.kit.any(|p| matches!(p, Purpose::Parent(_)));
        let stuck = connected
            && (parents
                || !self.orphans.is_empty()
                || !self.orphan_checks.is_empty()
                || self.settling.iter().any(|s| s.2 != SettleState::Busy)
                || batch_waits
                || closing);
        let retry = if stuck { self.kit.retry_at() } else { None };
        match (deadline, retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn finished(&self) -> bool {
        self.ended && self.kit.is_idle()
    }
}
