//! The transaction's plain types and node names, and the outcome's write and the reading
//! of its answer, shared by the coordinator and the sites. A leaf: both import these from
//! here and [`two_phase`](super) re-exports the public ones.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::error::Error;
use crate::proto::{
    multi_failure, CheckVersionRequest, DeleteRequest, ErrorCode, MultiOp, PathError, PathWatch,
    Request, Response, SetDataRequest,
};
use crate::recipe::kit::Reply;

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

/// The data of a commit (`true`) or an abort, in a vote node or the transaction node.
fn data_of(commit: bool) -> Bytes {
    Bytes::from_static(if commit { COMMIT } else { ABORT })
}

/// What a vote node or the transaction node says: nothing at version 0 (not written
/// yet); at version 1 and above `commit` is a commit (`true`) and anything else an
/// abort.
fn commits(data: &[u8], version: i32) -> Option<bool> {
    (version >= 1).then_some(data == COMMIT)
}

impl Vote {
    /// Its data in a vote node.
    pub fn data(self) -> Bytes {
        data_of(self == Vote::Commit)
    }

    /// A vote node's vote: none at version 0 (not voted); at version 1 and above
    /// `commit` is a commit and anything else an abort.
    pub fn read(data: &[u8], version: i32) -> Option<Vote> {
        commits(data, version).map(|c| if c { Vote::Commit } else { Vote::Abort })
    }
}

impl Outcome {
    /// Its data in the transaction node.
    pub fn data(self) -> Bytes {
        data_of(self.is_commit())
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
        commits(data, version).map(|c| if c { Outcome::Commit } else { Outcome::Abort })
    }

    /// Is it a commit?
    pub fn is_commit(self) -> bool {
        self == Outcome::Commit
    }
}

/// `<tx>/<a>` and `<tx>/<a>/<b>`.
pub(super) fn child(tx: &str, a: &str) -> String {
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

/// The site whose vote node `path` is (a watch's path), if it is one of `<tx>`'s.
pub(super) fn voter<'a>(tx: &str, path: &'a str) -> Option<&'a str> {
    path.strip_prefix(votes_dir(tx).as_str())?.strip_prefix('/')
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

/// `getData` of `path`, with a data watch if `watch`.
pub(super) fn read(path: String, watch: bool) -> Request {
    Request::GetData(PathWatch { path, watch })
}

/// `exists` of `path`, with a watch.
pub(super) fn exists(path: String) -> Request {
    Request::Exists(PathWatch { path, watch: true })
}

/// `getChildren` of `path`, with a child watch if `watch`.
pub(super) fn list(path: String, watch: bool) -> Request {
    Request::GetChildren(PathWatch { path, watch })
}

/// `delete` of `path`, whatever its version (a presence node of ours).
pub(super) fn delete(path: String) -> Request {
    Request::Delete(DeleteRequest { path, version: -1 })
}

/// The transaction path must be a valid path other than `/`; a site name one path
/// component.
pub(super) fn check_names(tx: &str, site: Option<&str>) -> Result<(), Error> {
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
pub(super) fn decide_request<'a>(
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
pub(super) enum Written {
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

/// Reads the answer to the write of `outcome` over `votes` votes: a commit's `multi`
/// checks each vote first, so its `setData` comes after them; an abort writes alone
/// (a plain write's failure counts at the `setData`).
pub(super) fn written(outcome: Outcome, votes: usize, result: &Reply) -> Written {
    let tx_index = match outcome {
        Outcome::Commit => votes,
        Outcome::Abort => 0,
    };
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
