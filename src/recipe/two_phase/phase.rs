//! The two-phase commit machines' states as types, and the typed set of requests each
//! one has to send again ([`Need`]).
//!
//! The coordinator's:
//!
//! | before (fields of `Coordinator`) | after |
//! | --- | --- |
//! | `started`, `finished` | [`Life`]: `Idle`, `Running`, `Ended` |
//! | `setup` (`Idle`, `Sending`, `InDoubt`, `Done`), `found_tx`, `found_without_votes` | [`Setup`]: its [`Step`], `found_tx`, `without_votes` |
//! | `ours`, `lost_presence`, `applied_here` | [`Presence`]: `Absent`, `InDoubt` (a setup of this session may have made it), `Ours`, `Lost` (went with an expired session) |
//! | `deadline_at`, `deadline_passed`; `hard_at`, `hard_passed` | two [`Timer`]s: `Off`, `At(t)`, `Passed` |
//! | `need: u32` (bits `PARENTS` … `LEAVE`) | [`Need<Coordinating>`](Need) |
//! | `abandoned`, `tracking` | kept: independent of the rest |
//! | `session_id`, `between_sessions`, `sync_next` | [`Sessions`] (`id`, `between`, `sync_next`), the site's too |
//!
//! A site's:
//!
//! | before (fields of `Site`) | after |
//! | --- | --- |
//! | `started`, `finished` | [`Life`] (the coordinator's) |
//! | `tx` (`Unknown`, `Missing`, `Undecided`, `Decided`), `seen` | [`TxView`]: `Unseen`, `Missing`, `Undecided`, `Decided`, `Stale` (seen before, to read again) |
//! | `wanted: Option<Vote>`, `vote_in_doubt` | `Option<`[`Wanted`]`>` (`vote`, `in_doubt`) |
//! | `ready_told`, `voted_told` | [`Told`] (`ready`, `voted`) |
//! | `coord: Option<bool>` | [`Coord`]: `Unknown`, `Present`, `Gone` |
//! | `need: u32` (bits `TX` … `LEAVE`) | [`Need<Participating>`](Need) |
//! | `leaving` | kept: independent of the rest |
//! | `session_id`, `between_sessions`, `sync_next` | [`Sessions`] (the coordinator's) |
//!
//! Both machines keep their kit, [`Sessions`], [`Life`] and [`Need`] in one [`Role`],
//! with what they do alike on them (report the final event once, send again after a
//! backoff, take what is due, drop it all when the session ends).

use core::marker::PhantomData;
use core::ops::BitOr;

use super::types::{Outcome, Vote};
use crate::recipe::kit::{Kit, Reply};
use crate::recipe::SessionChange;
use crate::time::Instant;

/// Requests to send when the session allows, as a typed bit set: `M` says whose
/// (a coordinator's [`Coordinating`], a site's [`Participating`]), so one machine's
/// bits cannot be mixed into the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Need<M>(u16, PhantomData<M>);

impl<M> Default for Need<M> {
    fn default() -> Self {
        Need(0, PhantomData)
    }
}

impl<M> BitOr for Need<M> {
    type Output = Need<M>;

    fn bitor(self, other: Need<M>) -> Need<M> {
        Need(self.0 | other.0, PhantomData)
    }
}

impl<M> Need<M> {
    const fn bit(n: u16) -> Need<M> {
        Need(n, PhantomData)
    }

    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// Adds `n`.
    pub fn add(&mut self, n: Need<M>) {
        self.0 |= n.0;
    }

    /// Does it hold any of `n`?
    pub fn any(&self, n: Need<M>) -> bool {
        self.0 & n.0 != 0
    }

    /// Keeps only what is in `n`.
    pub fn keep(&mut self, n: Need<M>) {
        self.0 &= n.0;
    }

    /// Takes it all, leaving nothing.
    pub fn take(&mut self) -> Need<M> {
        core::mem::take(self)
    }
}

/// The coordinator's needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Coordinating {}

impl Need<Coordinating> {
    /// A round of containers for the transaction's ancestors.
    pub const PARENTS: Self = Self::bit(1);
    /// The setup `multi`.
    pub const SETUP: Self = Self::bit(2);
    /// The lookup of our id in `<tx>/votes` (a setup in doubt).
    pub const FIND: Self = Self::bit(4);
    /// The read (and watch) of `<tx>`.
    pub const TX: Self = Self::bit(8);
    /// The reads (and watches) of the votes in `vote_reads`.
    pub const VOTES: Self = Self::bit(16);
    /// The listing (and watch) of `<tx>/alive`.
    pub const ALIVE: Self = Self::bit(32);
    /// The outcome's write.
    pub const DECIDE: Self = Self::bit(64);
    /// The delete of our presence node.
    pub const LEAVE: Self = Self::bit(128);
    /// The reads (a `sync` goes first when one is due).
    pub const READS: Self = Self::bit(4 | 8 | 16 | 32);
}

/// What the coordinator and a site both know of their session: its id (the owner of
/// the nodes they create), whether their next reads go after a `sync` (after a
/// reconnect or a failed request, the server may be a follower that lags), and whether
/// they send nothing until the next session change (a request was refused because the
/// session is ending, or it expired).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Sessions {
    pub id: i64,
    pub sync_next: bool,
    pub between: bool,
}

impl Sessions {
    /// Follows `Connected` and `Reconnected` (the machine handles the ends): the new
    /// id; after a reconnect the next reads go after a `sync`. Did a new session begin
    /// while the machine waited between sessions?
    pub fn follow(&mut self, change: SessionChange) -> bool {
        match change {
            SessionChange::Connected { session_id } => {
                self.id = session_id;
                core::mem::take(&mut self.between)
            }
            SessionChange::Reconnected { session_id } => {
                self.id = session_id;
                self.sync_next = true;
                false
            }
            _ => false,
        }
    }

    /// Was this reply refused because the session is ending? Then nothing more is sent
    /// until the session change says what comes next (a new session, or the end).
    pub fn refused(&mut self, result: &Reply) -> bool {
        let refused = matches!(result, Err(e) if e.ends_session());
        self.between |= refused;
        refused
    }

    /// Does a `sync` go before the reads now? It is then no longer due.
    pub fn take_sync(&mut self) -> bool {
        core::mem::take(&mut self.sync_next)
    }
}

/// The coordinator's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Life {
    /// `start` not called yet.
    Idle,
    /// Started; no final event yet.
    Running,
    /// The final event is reported (or the owner left before the start): only cleanup
    /// remains.
    Ended,
}

/// What a coordinator and a site both carry besides their own protocol: the kit, what
/// they know of their session, their life, and the requests to send when the session
/// allows (`M` says whose).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Role<M, P, E> {
    pub kit: Kit<P, E>,
    pub session: Sessions,
    pub life: Life,
    pub need: Need<M>,
}

impl<M, P, E> Default for Role<M, P, E> {
    fn default() -> Self {
        Role {
            kit: Kit::default(),
            session: Sessions::default(),
            life: Life::Idle,
            need: Need::default(),
        }
    }
}

impl<M, P: PartialEq, E> Role<M, P, E> {
    /// Starts it, once: false if it was started before.
    pub fn start(&mut self) -> bool {
        let first = self.life == Life::Idle;
        if first {
            self.life = Life::Running;
        }
        first
    }

    /// Is the final event reported (only cleanup remains)?
    pub fn ended(&self) -> bool {
        self.life == Life::Ended
    }

    /// Is a request for `p` on the wire?
    pub fn in_flight(&self, p: &P) -> bool {
        self.kit.any(|q| q == p)
    }

    /// Reports the final `event`, unless one was reported already.
    pub fn end(&mut self, event: E) {
        if !self.ended() {
            self.life = Life::Ended;
            self.kit.emit(event);
        }
    }

    /// A request failed: `need` is sent again after a backoff, the reads after a `sync`.
    pub fn again(&mut self, now: Instant, need: Need<M>) {
        self.need.add(need);
        self.session.sync_next = true;
        self.kit.failed(now);
    }

    /// What to send now, taken: nothing between sessions or during a backoff.
    pub fn due(&mut self, now: Instant) -> Option<Need<M>> {
        if self.need.is_empty() || self.session.between || !self.kit.allows(now) {
            return None;
        }
        Some(self.need.take())
    }

    /// Nothing in flight and nothing to send any more (the session closed or expired).
    pub fn drop_requests(&mut self) {
        self.kit.clear_requests();
        self.need = Need::default();
    }

    /// The session closed: nothing is sent any more, and `failed` (the machine's
    /// `Failed { Closed }`) ends it unless it has ended.
    pub fn closed(&mut self, failed: E) {
        self.drop_requests();
        self.session.between = false;
        self.end(failed);
    }

    /// When to be called next: at `own` (the machine's deadline), or at the end of a
    /// backoff while something waits to be sent.
    pub fn timeout(&self, own: Option<Instant>) -> Option<Instant> {
        let retrying = !self.need.is_empty() && !self.session.between;
        self.kit.timeout(own, retrying)
    }
}

/// Where the setup `multi` stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Step {
    /// Not sent (not started, or given up).
    Idle,
    /// To send, or on the wire.
    Sending,
    /// Its reply was lost, or it found `<tx>` made: look for our id.
    InDoubt,
    /// The transaction exists (`Started` was reported).
    Done,
}

/// The setup and what the last ones found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Setup {
    pub step: Step,
    /// The last setup found `<tx>` made already (`NodeExists`).
    pub found_tx: bool,
    /// Setups in a row that found `<tx>` but no `<tx>/votes` (not a transaction: an
    /// operator's `delete_all` stopped part-way, or someone's node): the second ends it.
    pub without_votes: u8,
}

/// Our presence node, `<tx>/coordinator`, as far as we know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Presence {
    /// Not made by us in this session (or not known to be: a restarted process that
    /// found its transaction leaves an earlier session's node alone).
    Absent,
    /// A setup of this session may have made it without our hearing of it (its reply
    /// lost): a transaction found with our id has our presence node too.
    InDoubt,
    /// It exists and is ours (deleted once we know the outcome).
    Ours,
    /// It went with an expired session: the sites abort, so do we.
    Lost,
}

/// A deadline: none, when it falls, or passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Timer {
    Off,
    At(Instant),
    Passed,
}

impl Timer {
    /// A timer falling at `at`, if any.
    pub fn at(at: Option<Instant>) -> Timer {
        at.map_or(Timer::Off, Timer::At)
    }

    /// Marks it passed if `now` is at or after it.
    pub fn tick(&mut self, now: Instant) {
        if matches!(*self, Timer::At(t) if now >= t) {
            *self = Timer::Passed;
        }
    }

    pub fn passed(self) -> bool {
        self == Timer::Passed
    }

    /// When it falls, if it has not yet.
    pub fn pending(self) -> Option<Instant> {
        match self {
            Timer::At(t) => Some(t),
            _ => None,
        }
    }
}

/// A site's needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Participating {}

impl Need<Participating> {
    /// The read (and watch) of `<tx>`.
    pub const TX: Self = Self::bit(1);
    /// `exists(watch)` on `<tx>`, not made yet.
    pub const WAIT_TX: Self = Self::bit(2);
    /// The read of the payload.
    pub const PAYLOAD: Self = Self::bit(4);
    /// The read of our vote node.
    pub const OWN: Self = Self::bit(8);
    /// `exists(watch)` on the coordinator's presence node.
    pub const COORD: Self = Self::bit(16);
    /// The create of our presence node.
    pub const PRESENCE: Self = Self::bit(32);
    /// `exists(watch)` on our presence node (a create in doubt).
    pub const CHECK_PRESENCE: Self = Self::bit(64);
    /// The listing of the votes (peers variant).
    pub const PEERS: Self = Self::bit(128);
    /// The reads (and watches) of the peers' votes in `peer_reads`.
    pub const PEER: Self = Self::bit(256);
    /// Our vote's write.
    pub const VOTE: Self = Self::bit(512);
    /// The outcome's write (peers variant, or the coordinator gone).
    pub const DECIDE: Self = Self::bit(1024);
    /// The delete of our presence node.
    pub const LEAVE: Self = Self::bit(2048);
    /// The reads (a `sync` goes first when one is due).
    pub const READS: Self = Self::bit(1 | 2 | 4 | 8 | 16 | 64 | 128 | 256);
}

/// What a site knows of the transaction node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum TxView {
    /// Never read as existing (a `NoNode` now means "not made yet").
    Unseen,
    /// Not made yet: waiting for it (`exists` watch).
    Missing,
    Undecided,
    Decided(Outcome),
    /// Read as existing before, to be read again (it is never made again: a `NoNode`
    /// now means deleted).
    Stale,
}

impl TxView {
    /// Has the transaction node existed (it is never re-made: a later `NoNode` means
    /// deleted, and a reply after a reply that saw it is not "not made yet")?
    pub fn seen(self) -> bool {
        matches!(self, TxView::Undecided | TxView::Decided(_) | TxView::Stale)
    }

    /// What we knew is in doubt: read it again.
    pub fn forget(&mut self) {
        *self = if self.seen() {
            TxView::Stale
        } else {
            TxView::Unseen
        };
    }
}

/// The vote our owner asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Wanted {
    pub vote: Vote,
    /// An attempt to write it may have been applied with its reply lost.
    pub in_doubt: bool,
}

/// The once-only events reported so far (independent: a vote can be written, and
/// `Voted` told, before the payload is read for `Ready`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Told {
    pub ready: bool,
    pub voted: bool,
}

/// The coordinator's presence node, as a site knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Coord {
    Unknown,
    Present,
    /// Gone while undecided: abort.
    Gone,
}
