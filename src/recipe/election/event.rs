//! What an election reports ([`ElectionEvent`]), what [`join`](super::Election::join)
//! answers ([`Join`]), and where leadership stands as its owner sees it
//! ([`Leadership`], [`CandidateStatus`]): decided once here for both adapters.

use alloc::collections::VecDeque;
use alloc::string::String;

use crate::error::Error;
use crate::recipe::lock::LostReason;

/// What an election reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElectionEvent {
    /// Our candidate node exists: we are in line (each candidacy, rejoins included).
    Joined {
        /// Our node's name.
        node: String,
    },
    /// We lead. Act as leader until the next `Suspended` or `Lost`.
    Elected {
        /// Our node's creation zxid: rises from one leader to the next.
        fencing_token: i64,
        /// Our node's name.
        node: String,
    },
    /// The connection dropped while leading: stop acting as leader until `Reconnected`.
    Suspended,
    /// The same session is back and our node verified: leading again.
    Reconnected,
    /// We lead no more (and were leading).
    Lost {
        /// Why.
        reason: LostReason,
    },
    /// Our acknowledgement is written (see [`Election::acknowledge`](super::Election::acknowledge)).
    Acknowledged {
        /// The token it carries (the current leadership's).
        fencing_token: i64,
    },
    /// Our acknowledgement could not be written (we were deposed, no permission, ...).
    AckFailed {
        /// Why.
        error: Error,
    },
    /// Our candidacy is withdrawn: our node (and acknowledgement) deleted.
    Resigned,
    /// The candidacy cannot be made (no permission, invalid path, missing chroot,
    /// session ended and not rejoining, ...). Final.
    Failed {
        /// Why.
        error: Error,
    },
    /// Closed: resigned for good, or the session ended. Final.
    Closed,
}

impl ElectionEvent {
    /// Does this event end the machine?
    pub fn is_final(&self) -> bool {
        matches!(self, ElectionEvent::Failed { .. } | ElectionEvent::Closed)
    }
}

/// What [`Election::join`](super::Election::join) answers at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Join {
    /// Wait for [`ElectionEvent::join_outcome`] (`Joined` once our node exists).
    Pending,
    /// Already in line: our node exists.
    InLine,
    /// The machine has ended.
    Ended,
}

/// Where leadership stands, folded from the events (what guards report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Leadership {
    /// Not leading (a candidate, resigned, or not joined).
    Follower,
    /// Leading, connection up: act as leader.
    Leading,
    /// Leading as far as we know, connection down: do not act.
    Suspended,
    /// The machine ended.
    Ended,
}

impl Leadership {
    /// The state after `event`.
    pub fn after(self, event: &ElectionEvent) -> Leadership {
        match event {
            ElectionEvent::Elected { .. } => Leadership::Leading,
            ElectionEvent::Suspended if self == Leadership::Leading => Leadership::Suspended,
            ElectionEvent::Reconnected if self == Leadership::Suspended => Leadership::Leading,
            ElectionEvent::Lost { .. } | ElectionEvent::Resigned => Leadership::Follower,
            e if e.is_final() => Leadership::Ended,
            _ => self,
        }
    }
}

impl ElectionEvent {
    /// For a caller waiting after [`Election::join`](super::Election::join): `Some` once we are in line
    /// (`Joined`), or the candidacy cannot be made.
    pub fn join_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            ElectionEvent::Joined { .. } => Some(Ok(())),
            ElectionEvent::Failed { error } => Some(Err(error.clone())),
            ElectionEvent::Closed => Some(Err(Error::Closed)),
            _ => None,
        }
    }

    /// For a caller waiting for an acknowledgement: `Some` when this event ends the
    /// wait — `Ok(token)` written, `Err` why not (deposed: [`Error::NotLeader`]).
    pub fn ack_outcome(&self) -> Option<Result<i64, Error>> {
        match self {
            ElectionEvent::Acknowledged { fencing_token } => Some(Ok(*fencing_token)),
            ElectionEvent::AckFailed { error } => Some(Err(error.clone())),
            ElectionEvent::Suspended
            | ElectionEvent::Lost { .. }
            | ElectionEvent::Resigned
            | ElectionEvent::Closed => Some(Err(Error::NotLeader)),
            ElectionEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }

    /// For a caller waiting after [`Election::resign`](super::Election::resign): `Some` when the wait is over.
    pub fn resign_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            ElectionEvent::Resigned | ElectionEvent::Closed => Some(Ok(())),
            ElectionEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }

    /// For a caller waiting after [`Election::close`](super::Election::close): `Some` when the wait is over.
    pub fn close_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            ElectionEvent::Closed => Some(Ok(())),
            ElectionEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }
}

/// A candidate as its owner sees it, folded from the election's events: what both
/// adapters report, decided once here.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CandidateStatus {
    state: Leadership,
    token: Option<i64>,
    unreported: VecDeque<ElectionEvent>,
    end: Option<Error>,
}

impl Default for CandidateStatus {
    fn default() -> Self {
        CandidateStatus {
            state: Leadership::Follower,
            token: None,
            unreported: VecDeque::new(),
            end: None,
        }
    }
}

impl CandidateStatus {
    /// Folds one event in.
    pub fn apply(&mut self, event: &ElectionEvent) {
        self.state = self.state.after(event);
        match event {
            ElectionEvent::Elected { fencing_token, .. } => self.token = Some(*fencing_token),
            ElectionEvent::Failed { error } => self.end = Some(error.clone()),
            ElectionEvent::Closed => self.end = Some(Error::Closed),
            _ => {}
        }
        if self.unreported.len() < 64 {
            self.unreported.push_back(event.clone());
        }
    }

    /// Where leadership stands.
    pub fn state(&self) -> Leadership {
        self.state
    }

    /// Leading with the connection up: safe to act as leader.
    pub fn is_leader(&self) -> bool {
        self.state == Leadership::Leading
    }

    /// The fencing token of the current (or last) leadership.
    pub fn fencing_token(&self) -> Option<i64> {
        self.token
    }

    /// The next event not reported yet (for a candidate's `changed()`).
    pub fn next_change(&mut self) -> Option<ElectionEvent> {
        self.unreported.pop_front()
    }

    /// For a caller waiting to lead: `Some` once the wait is over — `Ok(token)`
    /// leading (elected, or reconnected after a suspension), `Err` the machine ended.
    pub fn elected_outcome(&self) -> Option<Result<i64, Error>> {
        if let Some(e) = &self.end {
            return Some(Err(e.clone()));
        }
        match (self.is_leader(), self.token) {
            (true, Some(t)) => Some(Ok(t)),
            _ => None,
        }
    }
}
