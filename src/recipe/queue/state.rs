//! What the queue's producer and consumer both keep: their marker in the side
//! directory ([`Marker`]), the rounds creating the directories' ancestors
//! ([`Parents`]), and their life ([`Life`]: open, closing, ended).

use alloc::string::String;

use super::parent_round;
use crate::error::Error;
use crate::proto::{Acl, Response};
use crate::recipe::kit::{Kit, MAX_PARENT_ROUNDS};
use crate::recipe::path::ancestor_result;
use crate::time::Instant;

/// Our marker (`<meta>/c-<id>`, `<meta>/p-<id>`) as far as we know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Marker {
    /// Not there (or not ours): the next take or batch creates it.
    Absent,
    /// Ours, at this version (the number of takes or batches applied with it).
    Present(u32),
}

impl Marker {
    /// The takes or batches applied with it (0 if absent).
    pub fn applied(self) -> u32 {
        match self {
            Marker::Absent => 0,
            Marker::Present(v) => v,
        }
    }
}

/// The rounds creating the directories' ancestors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Parents {
    /// A round is to be sent once the last one's replies are in.
    pub need: bool,
    pub rounds: u8,
    pub error: Option<Error>,
}

impl Parents {
    /// No round is left: a missing directory fails what needs it.
    pub fn done(&self) -> bool {
        self.rounds >= MAX_PARENT_ROUNDS || self.error.is_some()
    }

    /// A round is due and the last one's replies are in (`is_parent` tells a parent
    /// create's purpose): one round at a time, the replies of a round on the wire
    /// decide on the next.
    pub fn due<P, E>(&self, kit: &Kit<P, E>, is_parent: fn(&P) -> bool) -> bool {
        self.need && !kit.any(is_parent)
    }

    /// Sends a round creating the ancestors of `dir` and `meta_dir` if one is
    /// [`due`](Self::due).
    pub fn send_round<P, E>(
        &mut self,
        kit: &mut Kit<P, E>,
        (dir, meta_dir, acl): (&str, &str, &[Acl]),
        parent: fn(String) -> P,
        is_parent: fn(&P) -> bool,
    ) {
        if !self.due(kit, is_parent) {
            return;
        }
        self.need = false;
        self.rounds = self.rounds.saturating_add(1);
        for (p, req) in parent_round(dir, meta_dir, acl) {
            kit.send(parent(p), req);
        }
    }

    /// The reply to the create of ancestor `path`.
    pub fn answered<P, E>(
        &mut self,
        kit: &mut Kit<P, E>,
        now: Instant,
        path: &str,
        result: &Result<Response, Error>,
    ) {
        let Some(e) = ancestor_result(path, result) else {
            return;
        };
        if e.is_retryable() {
            // Refused: the round goes again after a backoff (once per round) and does
            // not count as a round that found a parent missing.
            if !self.need {
                kit.failed(now);
                self.rounds = self.rounds.saturating_sub(1);
            }
            self.need = true;
        } else if !e.ends_session() && self.error.is_none() {
            self.error = Some(e);
        }
    }
}

/// A producer's or consumer's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Life {
    Open,
    /// `close` was called; `deleting`: the delete of our marker is on the wire.
    Closing {
        deleting: bool,
    },
    /// `Closed` was reported.
    Ended,
}
