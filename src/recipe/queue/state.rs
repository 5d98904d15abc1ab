//! What the queue's producer and consumer both keep: their marker in the side
//! directory and the session it lives in ([`Mine`], what a session change does to them:
//! [`Mine::follow_session`]), the rounds creating the directories' ancestors
//! ([`Parents`]), and their life ([`Life`]: open, closing, ended).

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::error::Error;
use crate::proto::{
    Acl, CreateMode, CreateRequest, ErrorCode, MultiOp, Response, SetDataRequest, Stat,
};
use crate::recipe::kit::{join, Kit, Reply, MAX_PARENT_ROUNDS};
use crate::recipe::path::ancestor_result;
use crate::recipe::SessionChange;
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

/// What is ours in the side directory, as a producer or a consumer knows it: our
/// marker (its path, and whether it is there and at which version) and the session we
/// work in, which owns our marker (and a consumer's claims).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Mine {
    /// Our marker's path: `<meta_dir>/<prefix><id>`.
    pub path: String,
    /// Our marker as far as we know.
    pub marker: Marker,
    /// The session we work in (0 before one, and after it ended).
    session_id: i64,
}

impl Mine {
    /// Ours for a side named `<prefix><id>` in `meta_dir`: no marker, no session yet.
    pub fn new(meta_dir: &str, prefix: &str, id: &str) -> Self {
        Mine {
            path: side_path(meta_dir, prefix, id),
            marker: Marker::Absent,
            session_id: 0,
        }
    }

    /// In a session (connected, or suspended in it).
    pub fn in_session(&self) -> bool {
        self.session_id != 0
    }

    /// Our marker is there, as far as we know.
    pub fn present(&self) -> bool {
        self.marker != Marker::Absent
    }

    /// The node of `stat` is ours: an ephemeral node of the session we work in.
    pub fn owns(&self, stat: &Stat) -> bool {
        stat.ephemeral_owner == self.session_id
    }

    /// What a session change means to a side of the queue: in a session, its id (a new
    /// session holds no marker of ours yet); at the end of one, the error and whether
    /// it is terminal for the side's `on_session_end` (`Expired`: what was in doubt goes
    /// on in the next session; `Closed`: nothing does), which calls
    /// [`end_session`](Self::end_session).
    pub fn follow_session(&mut self, change: SessionChange) -> Option<(Error, bool)> {
        match change {
            SessionChange::Connected { session_id } => {
                self.session_id = session_id;
                self.marker = Marker::Absent;
                None
            }
            SessionChange::Reconnected { session_id } => {
                self.session_id = session_id;
                None
            }
            SessionChange::Suspended => None,
            SessionChange::Expired => Some((Error::SessionExpired, false)),
            SessionChange::Closed => Some((Error::Closed, true)),
        }
    }

    /// What the read (`exists`) of our marker found: ours at its version, or absent
    /// (not there, or another session's: a previous session of ours the server has not
    /// expired yet, which ours cannot replace before it goes: `kit` backs off, so that
    /// it is waited out instead of tried again at once); `Err`: the read failed.
    pub fn read<P, E>(
        &self,
        kit: &mut Kit<P, E>,
        now: Instant,
        result: Reply,
    ) -> Result<Marker, Error> {
        match result {
            Ok(Response::Stat(stat)) if self.owns(&stat) => {
                Ok(Marker::Present(stat.version as u32))
            }
            Ok(Response::Stat(_)) => {
                kit.failed(now);
                Ok(Marker::Absent)
            }
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => Ok(Marker::Absent),
            Err(e) => Err(e),
        }
    }

    /// The answer to our marker's delete: true, it is gone; false, the delete was
    /// refused for now (`kit` backs off) and goes again.
    pub fn deleted<P, E>(&mut self, kit: &mut Kit<P, E>, now: Instant, result: &Reply) -> bool {
        match result {
            Err(e) if e.is_retryable() => {
                kit.failed(now);
                false
            }
            _ => {
                self.marker = Marker::Absent;
                true
            }
        }
    }

    /// The session ended: we work in none, and our marker (ephemeral) went with it.
    pub fn end_session(&mut self) {
        self.session_id = 0;
        self.marker = Marker::Absent;
    }
}

/// A node in the side directory `meta_dir`: `<meta_dir>/<prefix><name>` (a consumer's
/// marker `c-<id>`, a producer's `p-<id>`, a claim on an item).
pub(super) fn side_path(meta_dir: &str, prefix: &str, name: &str) -> String {
    let mut node = String::from(prefix);
    node.push_str(name);
    join(meta_dir, &node)
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
        result: &Reply,
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

impl Life {
    /// The delete of our marker is no longer on the wire (answered, or gone with the
    /// session).
    pub fn delete_over(&mut self) {
        if let Life::Closing { deleting } = self {
            *deleting = false;
        }
    }
}

/// The error a caller gets for a put or take whose outcome is in doubt (its request was
/// on the wire when the session ended): `error` if it already says the request may have
/// applied, else `ConnectionLoss`, which does — never one that says "not applied" (as
/// the counter reports an add in doubt).
pub(super) fn in_doubt(error: &crate::error::Error) -> crate::error::Error {
    if error.may_have_applied() {
        error.clone()
    } else {
        crate::error::Error::ConnectionLoss
    }
}

/// One round of creates for the queue's directory and its side directory (each
/// ancestor path with its request), shared by producer and consumer: the queue's
/// directory is `PERSISTENT`, so its sequence numbers never start over and an item's
/// name is never reused (see "The directory" in the module docs); its ancestors and the
/// side directory (which holds only ephemeral nodes) are containers.
fn parent_round(
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

/// The head of a `multi` that uses our marker at `path`: its create (ephemeral, with
/// `acl`) when `create`, then its version checked at `version` and bumped; room for
/// `more` ops after them.
pub(super) fn marker_ops(
    path: &str,
    acl: &[Acl],
    create: bool,
    version: i32,
    more: usize,
) -> Vec<MultiOp> {
    let mut ops = Vec::with_capacity(more + 2);
    if create {
        ops.push(MultiOp::Create(CreateRequest::new(
            path,
            Bytes::new(),
            acl.to_vec(),
            CreateMode::Ephemeral,
        )));
    }
    ops.push(MultiOp::SetData(SetDataRequest {
        path: path.into(),
        data: Bytes::new(),
        version,
    }));
    ops
}
