//! The partitioner's machine: its own requests (the party node, the party listing) on a
//! [`Kit`], beside one item [`Lock`] per item of the current division as parts.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::mem;

use super::types::{
    member_identifier, partition, HeldItem, PartitionEvent, PartitionerConfig, MAX_ITEMS,
};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{
    join, own_and_parts, recipe_events, to_parts, Kit, OwnSlot, ParentStep, Parts,
};
use crate::recipe::lock::{compact_acl, Lock, LockConfig, LockEvent, LockKind, Naming};
use crate::recipe::{Machine, OpId, Recipe, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

/// Op ids: `(op << 16 | round) * slots + slot` for the item locks, slot `MAX_ITEMS` is
/// the machine's own.
const OWN: OwnSlot = OwnSlot {
    slots: MAX_ITEMS as u64 + 1,
    own: MAX_ITEMS as u64,
};

/// What each of our own requests is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    Parent(String),
    Join,
    Sync,
    List,
    Leave,
}

/// Our party node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Member {
    /// To create (again).
    Absent,
    /// To create with its missing ancestors.
    Orphan,
    /// To create again; an earlier create may have landed (its reply was lost).
    Doubt,
    Creating,
    Joined,
    /// To delete (again).
    Leave,
    Deleting,
    /// Deleted, or gone with the session.
    Gone,
}

/// The party listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum List {
    /// To send (behind a `sync`).
    Due,
    Sent,
    /// Answered; its watch is armed.
    Armed,
}

/// Where the partitioner stands; each variant carries the data of that phase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// Waiting for a membership that stays unchanged until `stable_at`.
    Allocating {
        /// The last listing's identifiers, and when they count as stable.
        seen: Option<(Vec<String>, Instant)>,
    },
    /// The round's locks (one per item of ours, `mine[j]` for `locks[j]`) are being
    /// taken.
    Locking {
        mine: Vec<usize>,
    },
    /// `Acquired` was reported.
    Held {
        mine: Vec<usize>,
        /// `ReleaseNeeded` was reported.
        release: bool,
    },
    /// The round's locks are being released; then allocating again (`Released`
    /// reported first if the user asked).
    Releasing {
        asked: bool,
    },
    /// The locks are being released, then the party node deleted; then `end`
    /// (`None`: nobody listens).
    Leaving {
        end: Option<PartitionEvent>,
    },
    Done,
}

/// One set partitioner member. See the [module docs](super).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Partitioner {
    config: PartitionerConfig,
    /// The items, sorted and deduplicated.
    items: Vec<String>,
    kit: Kit<Purpose, PartitionEvent>,
    /// The current round's item locks.
    locks: Vec<Lock>,
    /// The round (in the op ids of its locks: a late reply or watch of an earlier
    /// round's lock finds no part).
    round: u16,
    phase: Phase,
    member: Member,
    list: List,
}

impl Partitioner {
    /// A member that does nothing until [`start`](Self::start).
    pub fn new(mut config: PartitionerConfig) -> Partitioner {
        let mut items = mem::take(&mut config.items);
        items.sort_unstable();
        items.dedup();
        config.items = items.clone();
        config.acl = compact_acl(&config.acl);
        Partitioner {
            kit: Kit::new(&config.id),
            config,
            items,
            locks: Vec::new(),
            round: 0,
            phase: Phase::Idle,
            member: Member::Absent,
            list: List::Due,
        }
    }

    /// The configuration (its items sorted and deduplicated).
    pub fn config(&self) -> &PartitionerConfig {
        &self.config
    }

    /// Our party node's path.
    pub fn party_node(&self) -> String {
        let hex: String = self.config.id.chars().filter(|c| *c != '-').collect();
        join(
            &self.party_dir(),
            &format!("{hex}-{}", self.config.identifier),
        )
    }

    fn party_dir(&self) -> String {
        join(&self.config.path, "party")
    }

    /// The lock directory of item `i`.
    fn lock_dir(&self, i: usize) -> String {
        join(&join(&self.config.path, "locks"), &self.items[i])
    }

    /// The items held (after `Acquired`, until `release`), sorted.
    pub fn held(&self) -> Option<Vec<&str>> {
        match &self.phase {
            Phase::Held { mine, .. } => {
                Some(mine.iter().map(|i| self.items[*i].as_str()).collect())
            }
            _ => None,
        }
    }

    /// Is the set held and nothing asks for a release (kazoo's `acquired`)?
    pub fn is_acquired(&self) -> bool {
        matches!(self.phase, Phase::Held { release: false, .. })
    }

    /// Is a division under way (kazoo's `allocating`)?
    pub fn is_allocating(&self) -> bool {
        matches!(
            self.phase,
            Phase::Allocating { .. } | Phase::Locking { .. } | Phase::Releasing { .. }
        )
    }

    /// Where the machine stands, for test reports: its phase, party node and listing.
    #[doc(hidden)]
    pub fn debug_state(&self) -> String {
        format!(
            "{:?} {:?} {:?} allows-at {:?} timeout {:?}",
            self.phase,
            self.member,
            self.list,
            self.kit.retry_at(),
            self.poll_timeout()
        )
    }

    /// Has the final event been reported?
    pub fn has_ended(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Joins the party and starts dividing. Only the first call counts.
    pub fn start(&mut self, now: Instant) {
        if self.phase != Phase::Idle {
            return;
        }
        if let Some(error) = self.invalid() {
            self.phase = Phase::Done;
            self.kit.emit(PartitionEvent::Failed { error });
            return;
        }
        self.phase = Phase::Allocating { seen: None };
        self.drive(now);
    }

    /// Releases the held set (kazoo's `release_set`): `Released` follows once every
    /// lock node is deleted, then a new division. Only while held.
    pub fn release(&mut self, now: Instant) {
        if let Phase::Held { .. } = self.phase {
            self.release_locks(now, Phase::Releasing { asked: true });
            self.after_input(now);
        }
    }

    /// Releases everything and leaves the party (kazoo's `finish`): `Finished` once
    /// nothing of ours is left.
    pub fn finish(&mut self, now: Instant) {
        match self.phase {
            Phase::Idle => {
                self.phase = Phase::Done;
                self.kit.emit(PartitionEvent::Finished);
            }
            Phase::Leaving { .. } | Phase::Done => {}
            _ => self.release_locks(
                now,
                Phase::Leaving {
                    end: Some(PartitionEvent::Finished),
                },
            ),
        }
        self.after_input(now);
    }

    /// Why the config cannot run, if it cannot.
    fn invalid(&self) -> Option<Error> {
        let c = &self.config;
        let bad_id = c.id.is_empty()
            || !c
                .id
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-');
        let bad_name = |s: &str| s.is_empty() || s.contains('/') || s == "." || s == "..";
        if self.items.len() > MAX_ITEMS || bad_id || bad_name(&c.identifier) {
            return Some(Error::Server(ErrorCode::BadArguments));
        }
        if let Err(error) = validate_path(&c.path) {
            return Some(Error::InvalidPath {
                path: c.path.clone(),
                error,
            });
        }
        self.items
            .iter()
            .find(|i| bad_name(i))
            .map(|i| Error::InvalidPath {
                path: join(&join(&c.path, "locks"), i),
                error: PathError::Empty,
            })
    }

    /// Tells every lock of the round to let go; `next` waits for them.
    fn release_locks(&mut self, now: Instant, next: Phase) {
        self.phase = next;
        for lock in &mut self.locks {
            if !lock.has_ended() {
                let _ = lock.release(now);
            }
        }
    }

    /// The party changed (its watch fired, or a reconnect): list again; a division
    /// under way is aborted, a held one asks for a release.
    fn changed(&mut self, now: Instant) {
        if self.list == List::Armed {
            self.list = List::Due;
        }
        match &mut self.phase {
            Phase::Allocating { seen } => *seen = None,
            Phase::Locking { .. } => self.release_locks(now, Phase::Releasing { asked: false }),
            Phase::Held { release, .. } => {
                let first = release_flag(release);
                self.ask_release(first);
            }
            _ => {}
        }
    }

    /// Reports `ReleaseNeeded` once per hold.
    fn ask_release(&mut self, first: bool) {
        if first {
            self.kit.emit(PartitionEvent::ReleaseNeeded);
        }
    }

    /// The membership stayed unchanged long enough: take our share.
    fn allocate(&mut self, now: Instant, members: &[String]) {
        let mine = partition(&self.config.identifier, members, &self.items);
        self.round = self.round.wrapping_add(1);
        let acl = self.config.acl.clone();
        self.locks = mine
            .iter()
            .enumerate()
            .map(|(j, i)| {
                let id = format!(
                    "{}{:04x}{j:04x}",
                    self.config.id.replace('-', ""),
                    self.round
                );
                let mut c = LockConfig::new(&self.lock_dir(*i), LockKind::Exclusive, &id);
                c.naming = Naming::Kazoo;
                c.acl = acl.clone();
                Lock::new(c)
            })
            .collect();
        let session = self.kit.session_id();
        for lock in &mut self.locks {
            if session != 0 {
                lock.handle_session(
                    now,
                    SessionChange::Connected {
                        session_id: session,
                    },
                );
            }
            let _ = lock.acquire(now, None);
        }
        self.phase = Phase::Locking { mine };
    }

    /// Sends what is due and moves on when time or the parts allow.
    fn drive(&mut self, now: Instant) {
        let allows = self.kit.allows(now);
        let absent = matches!(self.member, Member::Absent | Member::Orphan | Member::Doubt);
        let live = !matches!(
            self.phase,
            Phase::Idle | Phase::Leaving { .. } | Phase::Done
        );
        if allows && absent && live {
            let path = self.party_node();
            if self.member == Member::Orphan {
                let acl = self.acl();
                self.kit
                    .send_parents(&path, &acl, CreateMode::Container, Purpose::Parent);
            }
            self.member = Member::Creating;
            let req = Request::Create(CreateRequest::new(
                path,
                bytes::Bytes::from(self.config.identifier.clone().into_bytes()),
                self.acl(),
                CreateMode::Ephemeral,
            ));
            self.kit.send(Purpose::Join, req);
        }
        let allocating = matches!(self.phase, Phase::Allocating { .. });
        let joining = matches!(self.member, Member::Creating | Member::Joined);
        if allows && allocating && joining && self.list == List::Due {
            self.list = List::Sent;
            let dir = self.party_dir();
            self.kit.sync(Purpose::Sync, &dir);
            self.kit.send(
                Purpose::List,
                Request::GetChildren(PathWatch {
                    path: dir,
                    watch: true,
                }),
            );
        }
        if let Phase::Allocating {
            seen: Some((members, at)),
        } = &self.phase
        {
            if self.stable_wait() && now >= *at {
                let members = members.clone();
                self.allocate(now, &members);
            }
        }
        self.settle(now);
    }

    /// Does only time stand between the last listing and the division (connected,
    /// joined, the listing's watch armed)?
    fn stable_wait(&self) -> bool {
        self.list == List::Armed && self.member == Member::Joined && !self.kit.is_suspended()
    }

    /// Does [`drive`](Self::drive) have something to send once the kit allows it?
    fn due(&self) -> bool {
        let (allocating, leaving) = match &self.phase {
            Phase::Allocating { .. } => (true, false),
            Phase::Leaving { .. } => (false, self.locks.iter().all(Lock::has_ended)),
            _ => (false, false),
        };
        let live = !matches!(
            self.phase,
            Phase::Leaving { .. } | Phase::Done | Phase::Idle
        );
        (matches!(self.member, Member::Absent | Member::Orphan | Member::Doubt) && live)
            || (allocating
                && self.list == List::Due
                && matches!(self.member, Member::Creating | Member::Joined))
            || (leaving && matches!(self.member, Member::Joined | Member::Leave | Member::Doubt))
    }

    fn acl(&self) -> Vec<Acl> {
        if self.config.acl.is_empty() {
            Acl::open_unsafe()
        } else {
            self.config.acl.clone()
        }
    }

    /// Reads the locks' events, then what the whole is now.
    fn settle(&mut self, now: Instant) {
        for j in 0..self.locks.len() {
            while let Some(e) = self.locks[j].poll_event() {
                self.on_lock(now, e);
            }
        }
        let all_ended = self.locks.iter().all(Lock::has_ended);
        match &mut self.phase {
            Phase::Locking { mine } if self.locks.iter().all(Lock::is_held_unquestioned) => {
                let mine = mem::take(mine);
                let items = self.held_items(&mine);
                self.kit.emit(PartitionEvent::Acquired { items });
                self.phase = Phase::Held {
                    mine,
                    release: false,
                };
            }
            Phase::Releasing { asked } if all_ended => {
                if *asked {
                    self.kit.emit(PartitionEvent::Released);
                }
                self.locks.clear();
                self.phase = Phase::Allocating { seen: None };
                if self.list == List::Armed {
                    self.list = List::Due;
                }
                self.drive(now);
            }
            Phase::Leaving { .. } if all_ended => self.leave(now),
            _ => {}
        }
    }

    /// The locks are gone: delete the party node, then end.
    fn leave(&mut self, now: Instant) {
        match self.member {
            Member::Creating | Member::Deleting => {} // wait for its answer
            Member::Joined | Member::Leave | Member::Doubt if self.kit.allows(now) => {
                self.member = Member::Deleting;
                let path = self.party_node();
                self.kit.send(
                    Purpose::Leave,
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
            Member::Joined | Member::Leave | Member::Doubt => {}
            Member::Absent | Member::Orphan | Member::Gone => {
                self.member = Member::Gone;
                self.locks.clear();
                if let Phase::Leaving { end: Some(end) } =
                    mem::replace(&mut self.phase, Phase::Done)
                {
                    self.kit.emit(end);
                }
            }
        }
    }

    fn held_items(&self, mine: &[usize]) -> Vec<HeldItem> {
        mine.iter()
            .zip(&self.locks)
            .map(|(i, lock)| {
                let (fencing_token, node) = lock.held_node().unwrap_or_default();
                HeldItem {
                    item: self.items[*i].clone(),
                    node,
                    fencing_token,
                }
            })
            .collect()
    }

    /// One event of a lock of the round.
    fn on_lock(&mut self, now: Instant, e: LockEvent) {
        match (&mut self.phase, e) {
            (Phase::Locking { .. }, e) if e.ends_attempt() => {
                // An item's lock cannot be had: let go of the rest and divide again.
                if let LockEvent::Failed { error } = &e {
                    if !error.is_retryable() && !error.ends_session() {
                        let end = Some(PartitionEvent::Failed {
                            error: error.clone(),
                        });
                        return self.release_locks(now, Phase::Leaving { end });
                    }
                }
                self.kit.failed(now);
                self.release_locks(now, Phase::Releasing { asked: false });
            }
            (Phase::Held { release, .. }, LockEvent::Lost { .. } | LockEvent::Suspended) => {
                let first = release_flag(release);
                self.ask_release(first);
            }
            // A release refused for good is never reported as a success.
            (Phase::Leaving { end: Some(end) }, LockEvent::Failed { error })
                if !error.ends_session() =>
            {
                *end = PartitionEvent::Failed { error };
            }
            _ => {}
        }
    }

    /// One of our own replies.
    fn on_own_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        let Some((purpose, result)) = self.kit.answer(op, result) else {
            return;
        };
        match purpose {
            Purpose::Parent(p) => self.kit.parent_answered(&p, &result),
            Purpose::Sync => {}
            Purpose::Join => self.on_join(now, result),
            Purpose::List => self.on_list(now, result),
            Purpose::Leave => match result {
                Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => self.member = Member::Gone,
                Err(e) if e.ends_session() => self.member = Member::Gone,
                Err(e) if e.is_retryable() => {
                    self.kit.failed(now);
                    self.member = Member::Leave;
                }
                Err(error) => {
                    self.member = Member::Gone;
                    if let Phase::Leaving { end: Some(end) } = &mut self.phase {
                        *end = PartitionEvent::Failed { error };
                    }
                }
            },
        }
    }

    fn on_join(&mut self, now: Instant, result: Result<Response, Error>) {
        if self.member != Member::Creating {
            return;
        }
        match result {
            // Our name is ours alone: an existing one is our create that landed.
            Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => {
                self.kit.reset_parents();
                self.member = Member::Joined;
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.member = Member::Orphan;
                match self.kit.parents_missing(&self.party_dir()) {
                    ParentStep::Again => self.kit.failed(now),
                    ParentStep::Create => {}
                    ParentStep::Fail(error) => {
                        self.member = Member::Absent;
                        self.fail(now, error);
                    }
                }
            }
            Err(e) if e.ends_session() => self.member = Member::Gone,
            Err(e) if e.is_retryable() => {
                self.kit.failed(now);
                // Leaving, a create that may have landed is deleted (NoNode if not).
                let leaving = matches!(self.phase, Phase::Leaving { .. });
                self.member = if leaving {
                    Member::Leave
                } else {
                    Member::Doubt
                };
            }
            Err(error) => {
                self.member = Member::Gone;
                self.fail(now, error);
            }
        }
        if self.list == List::Armed && self.member != Member::Joined {
            self.list = List::Due;
        }
    }

    fn on_list(&mut self, now: Instant, result: Result<Response, Error>) {
        if self.list != List::Sent {
            return;
        }
        let children = match result {
            Ok(Response::Children(c)) | Ok(Response::Children2 { children: c, .. }) => c,
            Err(e) if e.ends_session() => return,
            Err(Error::Server(ErrorCode::NoNode)) => {
                // The party's directory went (reaped): our node with it.
                self.list = List::Due;
                if self.member == Member::Joined {
                    self.member = Member::Absent;
                }
                return;
            }
            Err(e) if e.is_retryable() => {
                self.kit.failed(now);
                self.list = List::Due;
                return;
            }
            Err(error) => return self.fail(now, error),
            Ok(_) => return self.fail(now, Error::Server(ErrorCode::MarshallingError)),
        };
        self.list = List::Armed;
        let node = self.party_node();
        let ours = children.iter().any(|c| node.ends_with(&format!("/{c}")));
        if !ours {
            // Our node is not there (deleted by someone, or our create not answered
            // yet): create it (again) and list behind it.
            self.list = List::Due;
            if self.member == Member::Joined {
                self.member = Member::Absent;
            }
            return;
        }
        let members = children
            .iter()
            .map(|c| member_identifier(c).to_string())
            .collect();
        if let Phase::Allocating { seen } = &mut self.phase {
            *seen = Some((members, now + self.config.time_boundary));
        }
    }

    /// Ends with `error` once the locks are released and the party node deleted.
    fn fail(&mut self, now: Instant, error: Error) {
        if !matches!(self.phase, Phase::Leaving { .. } | Phase::Done) {
            self.release_locks(
                now,
                Phase::Leaving {
                    end: Some(PartitionEvent::Failed { error }),
                },
            );
        }
    }

    fn on_own_watch(&mut self, now: Instant, event: &WatchEvent) {
        let _ = event;
        self.changed(now);
    }

    /// After the kit and the locks followed a session change.
    fn on_own_session(&mut self, now: Instant, change: SessionChange) {
        match change {
            SessionChange::Connected { .. } => {}
            SessionChange::Suspended => {
                if let Phase::Held { release, .. } = &mut self.phase {
                    let first = release_flag(release);
                    self.ask_release(first);
                }
            }
            SessionChange::Reconnected { .. } => self.changed(now),
            SessionChange::Expired | SessionChange::Closed => {
                // Our ephemeral nodes went with the session.
                self.member = Member::Gone;
                let error = change.end_error().unwrap_or(Error::Closed);
                match &mut self.phase {
                    Phase::Leaving { .. } | Phase::Done => {}
                    _ => self.release_locks(
                        now,
                        Phase::Leaving {
                            end: Some(PartitionEvent::Failed { error }),
                        },
                    ),
                }
            }
        }
    }

    /// The owner went away: release the locks and leave, report nothing.
    fn on_own_abandon(&mut self, now: Instant) {
        match self.phase {
            Phase::Idle => {
                self.member = Member::Gone;
                self.phase = Phase::Done;
            }
            Phase::Done => {}
            Phase::Leaving { ref mut end } => *end = None,
            _ => self.release_locks(now, Phase::Leaving { end: None }),
        }
    }

    /// Every input and command ends here: send what is due, then (debug builds) check.
    fn after_input(&mut self, now: Instant) {
        self.drive(now);
        if cfg!(debug_assertions) {
            self.check();
        }
    }

    /// The rules the types cannot spell, checked after every input in debug builds.
    fn check(&self) {
        debug_assert!(self.locks.len() <= MAX_ITEMS);
        match &self.phase {
            Phase::Idle | Phase::Allocating { .. } => debug_assert!(self.locks.is_empty()),
            Phase::Locking { mine } | Phase::Held { mine, .. } => {
                debug_assert_eq!(mine.len(), self.locks.len());
                debug_assert!(mine.windows(2).all(|w| w[0] < w[1]));
            }
            Phase::Releasing { .. } | Phase::Leaving { .. } => {}
            Phase::Done => {
                debug_assert!(self.locks.is_empty());
                debug_assert_eq!(self.member, Member::Gone);
            }
        }
        if matches!(self.phase, Phase::Held { .. }) {
            debug_assert_ne!(self.member, Member::Gone);
        }
    }
}

/// Sets a phase's "`ReleaseNeeded` reported" flag; was it the first time?
fn release_flag(flag: &mut bool) -> bool {
    !mem::replace(flag, true)
}

impl Parts for Partitioner {
    type Part = Lock;

    fn count(&self) -> usize {
        self.locks.len()
    }

    fn part(&self, i: usize) -> &Lock {
        &self.locks[i]
    }

    fn part_mut(&mut self, i: usize) -> &mut Lock {
        &mut self.locks[i]
    }

    fn own_deadline(&self) -> Option<Instant> {
        // The end of the wait for a stable party, once only time stands between us
        // and the division; the end of a backoff, while something waits to be sent.
        let stable = match &self.phase {
            Phase::Allocating {
                seen: Some((_, at)),
            } if self.stable_wait() => Some(*at),
            _ => None,
        };
        self.kit.timeout(stable, self.due())
    }

    /// Lock `i`'s op `op` of this round.
    fn encode(&self, i: usize, op: OpId) -> OpId {
        ((op << 16) | u64::from(self.round))
            .saturating_mul(OWN.slots)
            .saturating_add(i as u64)
    }

    /// A lock of this round, and its op; `None` for our own ops and earlier rounds'.
    fn route(&self, op: OpId) -> Option<(usize, OpId)> {
        let (slot, q) = (op % OWN.slots, op / OWN.slots);
        let i = usize::try_from(slot).ok()?;
        (slot != OWN.own && i < self.locks.len() && q & 0xffff == u64::from(self.round))
            .then_some((i, q >> 16))
    }
}

impl Machine for Partitioner {
    own_and_parts!(OWN);

    fn is_done(&self) -> bool {
        self.phase == Phase::Done && self.kit.is_idle() && to_parts::all_done(self)
    }
}

recipe_events!(Partitioner => PartitionEvent, kit.poll_event);
