//! Two-phase commit (ZooKeeper recipes "Two-phased Commit"): a coordinator asks a fixed
//! group of sites to vote on a transaction; the transaction commits only if every site
//! votes commit, and every site learns the same outcome — including a site that
//! reconnects late or restarts. Neither Apache Curator nor kazoo has this recipe; the
//! layout below is ours.
//!
//! # Node layout (`<tx>` is the transaction path)
//!
//! | node | kind | written by | data |
//! |---|---|---|---|
//! | `<tx>` | persistent | coordinator creates; the decider writes once | `""` (version 0, undecided), then `commit` or `abort` (version 1) |
//! | `<tx>/payload` | persistent | coordinator | the transaction itself (the coordinator's bytes), never changed |
//! | `<tx>/votes` | persistent | coordinator | the coordinator's unique id (finds a setup whose reply was lost) |
//! | `<tx>/votes/<site>` | persistent | coordinator creates empty; `<site>` writes its vote once | `""` (version 0), then `commit` or `abort` (version 1) |
//! | `<tx>/alive` | persistent | coordinator | empty |
//! | `<tx>/alive/<site>` | **ephemeral** | `<site>` | its presence (failure detection) |
//! | `<tx>/coordinator` | **ephemeral** | coordinator | its presence; deleted once it knows the outcome |
//!
//! The coordinator creates all of it but the presence nodes in **one `multi`**: a site
//! sees either no transaction or a complete one. Missing ancestors of `<tx>` are created
//! as containers first (bounded; a path that cannot be created is [`Error::NoParent`] or
//! [`Error::ChrootMissing`]). The `<tx>` subtree stays after the transaction as its
//! durable record, so a site that comes back days later still learns the outcome; delete
//! it (`delete_all`) when every site is done with it.
//!
//! # Who writes what, and the decision rule
//!
//! * **A vote** is `multi[check(<tx>, version 0), setData(<tx>/votes/<site>, vote,
//!   version 0)]`: written at most once (version 0 → 1, never changed afterwards), and
//!   only while the transaction is undecided.
//! * **The outcome** is `setData(<tx>, outcome, version 0)`: whoever writes first decides,
//!   every later writer gets `BadVersion` and reads the outcome instead. A **commit** is
//!   written in a `multi` together with `check(<tx>/votes/<site>, version 1)` for every
//!   site: the server itself refuses a commit unless every vote is in (and a vote in is
//!   final, and was read as `commit`).
//! * **Decision rule** (the same code for whoever decides): any `abort` vote ⇒ `abort`
//!   at once; every vote `commit` ⇒ `commit`; the coordinator's deadline
//!   ([`CoordinatorConfig::deadline`]) passed and a site that has not voted has no
//!   presence node ⇒ `abort`; an optional hard [`CoordinatorConfig::vote_timeout`] ⇒
//!   `abort`; the coordinator's presence node gone while undecided ⇒ `abort` (decided by
//!   any site: nobody can commit without all votes, so aborting is always safe).
//!
//! # The two variants ([`Variant`])
//!
//! * [`Variant::Coordinator`] — the documents' O(n) variant: only the coordinator
//!   watches the votes (n notifications) and writes the outcome; each site watches only
//!   `<tx>` (n notifications for the outcome).
//! * [`Variant::Peers`] — every site watches every vote (n² notifications) and any site
//!   that sees the rule decide writes the outcome itself, so a transaction is decided
//!   one hop sooner and without the coordinator; the coordinator only waits for the
//!   outcome (and enforces its deadline).
//!
//! In both, every site also holds an `exists` watch on `<tx>/coordinator`.
//!
//! # Failure handling
//!
//! * Lost replies: every write is versioned, so a retry after a lost reply answers
//!   `BadVersion`, and the writer reads what is there (after a `sync`: a reconnect may
//!   land on a lagging follower). A setup whose reply was lost is found again by the
//!   coordinator's id in `<tx>/votes`; a presence node by its `ephemeralOwner`.
//! * A site that crashes keeps its vote (persistent); without one, its presence node
//!   goes with its session, and once the deadline has passed the coordinator aborts.
//!   A site restarted under the same name finds its earlier vote (it cannot vote again).
//! * A coordinator that disappears before deciding (session expired or closed) takes
//!   `<tx>/coordinator` along; the sites then decide `abort`. A coordinator whose
//!   session expires carries on into its next session and also writes `abort`.
//! * Refusals (too many requests pending, throttling) are retried after a backoff;
//!   requests lost with the connection after `Reconnected`.
//!
//! # Events
//!
//! [`Coordinator`]: `Started` (the transaction exists: sites may vote), `Voted` (a
//! site's vote, as the coordinator sees it: always in the O(n) variant), `Decided`
//! (final: the outcome), `Failed` (final). [`Site`]: `Ready` (the transaction and its
//! payload are known, with our earlier vote if we voted before a restart), `Voted` (our
//! vote is written), `Decided` (final: the outcome), `Failed` (final: not a site of
//! this transaction, session closed, no permission). Both machines clean up (delete
//! their presence node) after `Decided` and then end.
//!
//! # A worked example
//!
//! Coordinator `C` starts `/tx/42` with sites `a` and `b`, variant O(n):
//!
//! 1. `C`: `multi[create /tx/42 "", create /tx/42/payload P, create /tx/42/votes <id>,
//!    create /tx/42/votes/a "", create /tx/42/votes/b "", create /tx/42/alive, create
//!    /tx/42/coordinator (ephemeral)]`, then `getData(watch)` on `/tx/42` and both votes.
//! 2. `a` (started earlier, waiting with `exists(watch) /tx/42`) is notified, reads the
//!    payload, its vote node (version 0: not voted), `exists(watch) /tx/42/coordinator`,
//!    creates `/tx/42/alive/a`: `Ready { payload: P }`.
//! 3. `a` votes: `multi[check /tx/42 v0, setData /tx/42/votes/a "commit" v0]` → `Voted`.
//!    `C` is notified, reads `commit`. `b` votes `commit` too.
//! 4. `C`: `multi[check /tx/42/votes/a v1, check /tx/42/votes/b v1, setData /tx/42
//!    "commit" v0]` → `Decided { Commit }`; deletes `/tx/42/coordinator`.
//! 5. `a` and `b` are notified on `/tx/42`, read `commit` (version 1): `Decided { Commit }`;
//!    each deletes its presence node. Had `b` crashed before voting, after the deadline
//!    `C` would have listed `/tx/42/alive`, found no `b`, and written `abort`.
//!
//! ```
//! use zk_recipes::recipe::two_phase::{Coordinator, CoordinatorConfig, Site, SiteConfig, Variant};
//! use zk_recipes::recipe::{Recipe, SessionChange};
//! use zk_recipes::time::Instant;
//!
//! let config = CoordinatorConfig::new("/tx/42", &["a", "b"], Variant::Coordinator, (1, 2));
//! let mut c = Coordinator::new(config);
//! c.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! c.start(Instant::ZERO);
//! let (_, setup) = c.poll_request().unwrap(); // the one multi that creates everything
//! assert_eq!(setup.op_code(), zk_recipes::proto::OpCode::Multi);
//!
//! let mut a = Site::new(SiteConfig::new("/tx/42", "a", Variant::Coordinator));
//! a.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 8 });
//! a.start(Instant::ZERO);
//! let (_, read) = a.poll_request().unwrap(); // getData(watch) /tx/42, then the rest
//! assert_eq!(read.op_code(), zk_recipes::proto::OpCode::GetData);
//! ```
//!
//! # The machines' parts
//!
//! The states as types of both machines are in `phase` (its module docs have the
//! before/after tables of the flags they replaced); `coordinator` and `site` drive
//! them; the outcome's write and the reading of its answer are written once, here.

mod coordinator;
mod phase;
mod site;

pub use coordinator::{Coordinator, CoordinatorConfig, CoordinatorEvent};
pub use site::{Site, SiteConfig, SiteEvent, SiteStatus, VoteOutcome};

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::error::Error;
use crate::proto::{
    multi_failure, CheckVersionRequest, ErrorCode, MultiOp, PathError, Request, Response,
    SetDataRequest,
};

/// The most sites a transaction may have (bounds every list and `multi`).
pub const MAX_SITES: usize = 1000;

/// Data of a `commit` vote or outcome.
pub const COMMIT: &[u8] = b"commit";
/// Data of an `abort` vote or outcome.
pub const ABORT: &[u8] = b"abort";

/// Who watches the votes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// O(n): only the coordinator watches the votes and writes the outcome.
    Coordinator,
    /// O(n²): every site watches every vote, and any of them may write the outcome.
    Peers,
}

/// A site's vote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vote {
    /// Commit.
    Commit,
    /// Abort.
    Abort,
}

/// The transaction's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Every site voted commit.
    Commit,
    /// Some site voted abort, disappeared before voting, or the coordinator disappeared.
    Abort,
}

impl Vote {
    /// Its data in a vote node.
    pub fn data(self) -> Bytes {
        Bytes::from_static(match self {
            Vote::Commit => COMMIT,
            Vote::Abort => ABORT,
        })
    }

    /// A vote node's vote: none at version 0 (not voted); at version 1 and above
    /// `commit` is a commit and anything else an abort.
    pub fn read(data: &[u8], version: i32) -> Option<Vote> {
        (version >= 1).then_some(if data == COMMIT {
            Vote::Commit
        } else {
            Vote::Abort
        })
    }
}

impl Outcome {
    /// Its data in the transaction node.
    pub fn data(self) -> Bytes {
        Bytes::from_static(match self {
            Outcome::Commit => COMMIT,
            Outcome::Abort => ABORT,
        })
    }

    /// The transaction node's outcome: none at version 0 (undecided); at version 1 and
    /// above `commit` commits and anything else aborts.
    ///
    /// ```
    /// use zk_recipes::recipe::two_phase::Outcome;
    /// assert_eq!(Outcome::read(b"", 0), None);
    /// assert_eq!(Outcome::read(b"commit", 1), Some(Outcome::Commit));
    /// assert_eq!(Outcome::read(b"abort", 1), Some(Outcome::Abort));
    /// ```
    pub fn read(data: &[u8], version: i32) -> Option<Outcome> {
        (version >= 1).then_some(if data == COMMIT {
            Outcome::Commit
        } else {
            Outcome::Abort
        })
    }

    /// Is it a commit?
    pub fn is_commit(self) -> bool {
        self == Outcome::Commit
    }
}

/// `<tx>/<a>` and `<tx>/<a>/<b>`.
fn child(tx: &str, a: &str) -> String {
    let mut s = String::with_capacity(tx.len() + a.len() + 1);
    s.push_str(tx.trim_end_matches('/'));
    s.push('/');
    s.push_str(a);
    s
}

/// The payload node: `<tx>/payload`.
pub fn payload_path(tx: &str) -> String {
    child(tx, "payload")
}

/// The votes directory: `<tx>/votes`.
pub fn votes_dir(tx: &str) -> String {
    child(tx, "votes")
}

/// A site's vote node: `<tx>/votes/<site>`.
pub fn vote_path(tx: &str, site: &str) -> String {
    child(&votes_dir(tx), site)
}

/// The presence directory: `<tx>/alive`.
pub fn alive_dir(tx: &str) -> String {
    child(tx, "alive")
}

/// A site's presence node: `<tx>/alive/<site>`.
pub fn alive_path(tx: &str, site: &str) -> String {
    child(&alive_dir(tx), site)
}

/// The coordinator's presence node: `<tx>/coordinator`.
pub fn coordinator_path(tx: &str) -> String {
    child(tx, "coordinator")
}

/// The transaction path must be a valid path other than `/`; a site name one path
/// component.
fn check_names(tx: &str, site: Option<&str>) -> Result<(), Error> {
    let invalid = |path: &str, error| Error::InvalidPath {
        path: path.into(),
        error,
    };
    crate::proto::validate_path(tx).map_err(|e| invalid(tx, e))?;
    if tx == "/" {
        return Err(invalid(tx, PathError::Empty));
    }
    if let Some(name) = site {
        let path = vote_path(tx, name);
        if let Some(i) = name.find('/') {
            let offset = path.len() - name.len() + i;
            return Err(invalid(&path, PathError::InvalidChar { offset, ch: '/' }));
        }
        crate::proto::validate_path(&path).map_err(|e| invalid(&path, e))?;
    }
    Ok(())
}

/// The outcome's write: `setData(<tx>, outcome, version 0)`, after a `check` of
/// version 1 (voted) of the vote of every site in `checked` (a commit names them all).
fn decide_request<'a>(
    tx: &str,
    outcome: Outcome,
    checked: impl Iterator<Item = &'a String>,
) -> Request {
    let mut ops: Vec<MultiOp> = checked
        .map(|s| {
            MultiOp::Check(CheckVersionRequest {
                path: vote_path(tx, s),
                version: 1,
            })
        })
        .collect();
    let set = SetDataRequest {
        path: tx.into(),
        data: outcome.data(),
        version: 0,
    };
    if ops.is_empty() {
        return Request::SetData(set);
    }
    ops.push(MultiOp::SetData(set));
    Request::Multi(ops)
}

/// How the outcome's write ended (the same for whoever writes it).
enum Written {
    /// It is written: the outcome is ours.
    Done,
    /// Refused or lost: the rule sends it again (a lost write comes back as
    /// `BadVersion`).
    Retry,
    /// Decided by someone else (or deleted): read the transaction node.
    Taken,
    /// A vote is not what we read: read the votes again.
    VoteChanged,
    Failed(Error),
}

/// Reads the answer to the outcome's write; `tx_index` is the index of its `setData`
/// in a `multi` (a plain write's failure counts there).
fn written(tx_index: usize, result: &Result<Response, Error>) -> Written {
    let failure = match result {
        Ok(Response::Multi(_)) => multi_failure(result).map(|(i, c)| (i, Error::Server(c))),
        Ok(_) => None,
        Err(e) => Some((tx_index, e.clone())),
    };
    match failure {
        None => Written::Done,
        Some((_, e)) if e.is_retryable() => Written::Retry,
        Some((i, Error::Server(ErrorCode::BadVersion | ErrorCode::NoNode))) if i == tx_index => {
            Written::Taken
        }
        Some((i, Error::Server(ErrorCode::BadVersion | ErrorCode::NoNode))) if i < tx_index => {
            Written::VoteChanged
        }
        Some((_, e)) => Written::Failed(e),
    }
}
