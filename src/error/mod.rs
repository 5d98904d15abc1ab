//! The error types, in one leaf module: it depends on nothing but the codec
//! ([`proto`](crate::proto)), so every layer above can use it and nothing imports in
//! a circle.
//!
//! * [`Error`]: the one error type of every call, reply and recipe (re-exported as
//!   [`client::Error`](crate::client::Error)). Every other error type converts into it
//!   here, once.
//! * Why a connection failed or ended ([`TransportError`], [`TlsFailure`],
//!   [`DisconnectReason`], [`HostFailures`]) and why a request or a setting was refused
//!   ([`SubmitError`], [`SessionEnd`], [`ConnectStringError`]); the session re-exports
//!   them ([`session::SubmitError`](crate::session::SubmitError), ...).

mod connection;
mod request;

use alloc::string::String;
use core::fmt;

pub use connection::{DisconnectReason, HostFailures, TlsFailure, TransportError};
pub use request::{AuthFailure, ConnectStringError, SaslFailure, SessionEnd, SubmitError};

use crate::proto::{ErrorCode, OpCode, PathError, TooLarge};

/// Everything a client call can fail with, shared by both adapters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with this error code (`NoNode`, `NodeExists`, `BadVersion`, ...).
    Server(ErrorCode),
    /// The server answered a call on `path` with this error code: what the raw API's
    /// calls return, so the message names the node (match on [`Error::code`] to treat
    /// both forms alike).
    Node {
        /// The code (`NoNode`, `NodeExists`, `BadVersion`, ...).
        code: ErrorCode,
        /// The node the call concerned, as the caller named it.
        path: String,
    },
    /// The connection dropped before the reply arrived; the request may or may not have
    /// been applied.
    ConnectionLoss,
    /// The session expired; a new client is needed.
    SessionExpired,
    /// The client was closed.
    Closed,
    /// Authentication failed, for this reason (a rejected `addauth`, a server that
    /// requires SASL, or the SASL mechanism and why it failed); the session is closed.
    AuthFailed(AuthFailure),
    /// No reply within the call's timeout (the request may still be applied).
    Timeout,
    /// A path breaks ZooKeeper's rules; nothing was sent.
    InvalidPath {
        /// The path.
        path: String,
        /// The rule.
        error: PathError,
    },
    /// The request is larger than the frame limit; nothing was sent.
    TooLarge(TooLarge),
    /// Too many requests pending or watches registered.
    Overloaded,
    /// This request type is managed by the session.
    NotAllowed(OpCode),
    /// The connection string is invalid.
    InvalidConnectString(String),
    /// The reply had a shape this call does not expect (a server bug).
    UnexpectedReply,
    /// The ensemble's configuration (`/zookeeper/config`) does not parse: the line and
    /// why.
    BadConfig(crate::proto::ConfigError),
    /// A watch ended without firing: it was not set, was removed, or the session ended.
    WatchEnded,
    /// No session could be established: every host failed, each with its last reason
    /// (refused, reset, closed before the handshake, not a ZooKeeper server, no
    /// handshake answer in time, ...); `.last` is the most recent attempt's.
    Unreachable(HostFailures),
    /// A node a recipe needs could not be created because its parent does not exist
    /// and could not be created (`path` is the parent, as the client sees it).
    NoParent {
        /// The missing parent.
        path: String,
        /// Why creating it failed.
        code: ErrorCode,
    },
    /// The chroot of the connection string does not exist on the server (create it
    /// from a client without the chroot first).
    ChrootMissing,
    /// The hosted recipe has finished; a new one is needed.
    Finished,
    /// The command needs leadership we do not have (or lost while it ran).
    NotLeader,
    /// A counter node holds data of the wrong length for its format (nothing was
    /// written); see `recipe::value`.
    BadCounter {
        /// The bytes the format needs (0 also counts as zero).
        expected: usize,
        /// The bytes the node holds.
        found: usize,
    },
    /// A counter's add would leave its format's range (the node holds `value`; nothing
    /// was written); see `recipe::value`.
    CounterOverflow {
        /// The value the add was applied to.
        value: i64,
        /// The amount asked.
        delta: i64,
        /// The format's width in bytes (4 or 8).
        width: usize,
    },
    /// The sequence counter of directory `path` cannot give another increasing number:
    /// ZooKeeper's sequence is the parent's signed 32-bit `cversion`, which wrapped past
    /// 2^31 - 1 (or the directory was deleted and re-created, restarting it). Ids from
    /// this directory would repeat; use a new directory.
    SequenceOverflow {
        /// The directory.
        path: String,
    },
    /// The server refused to create a TTL node at `path` because TTL nodes are off
    /// (a 3.5+ server answers `Unimplemented` unless it was started with
    /// `-Dzookeeper.extendedTypesEnabled=true`).
    TtlNodesDisabled {
        /// The TTL node the recipe tried to create.
        path: String,
    },
    /// A lease record (`<path>/lease_holder`, see `recipe::lease`) holds data that is
    /// not kazoo's format: a JSON object with `version` and, for version 1, a string
    /// `holder` and an `end` in `%Y-%m-%dT%H:%M:%S`. Nothing was written.
    BadLease {
        /// The record.
        path: String,
    },
}

impl Error {
    /// The ZooKeeper error code this error corresponds to, if any.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Server(c) | Error::Node { code: c, .. } => Some(*c),
            Error::ConnectionLoss => Some(ErrorCode::ConnectionLoss),
            Error::SessionExpired => Some(ErrorCode::SessionExpired),
            Error::AuthFailed(_) => Some(ErrorCode::AuthFailed),
            Error::Timeout => Some(ErrorCode::OperationTimeout),
            Error::InvalidPath { .. } => Some(ErrorCode::BadArguments),
            Error::NoParent { .. } | Error::ChrootMissing => Some(ErrorCode::NoNode),
            Error::TtlNodesDisabled { .. } => Some(ErrorCode::Unimplemented),
            _ => None,
        }
    }
}

impl Error {
    /// This error as the answer to a call on `path`: a server error names the node
    /// ([`Error::Node`]); any other error is returned as it is.
    pub fn at(self, path: &str) -> Error {
        match self {
            Error::Server(code) => Error::Node {
                code,
                path: path.into(),
            },
            other => other,
        }
    }

    /// The server's error code, however the error names it.
    fn server_code(&self) -> Option<ErrorCode> {
        match self {
            Error::Server(c) | Error::Node { code: c, .. } => Some(*c),
            _ => None,
        }
    }
}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Error {
        match code {
            ErrorCode::ConnectionLoss => Error::ConnectionLoss,
            ErrorCode::SessionExpired => Error::SessionExpired,
            ErrorCode::AuthFailed => Error::AuthFailed(AuthFailure::Rejected),
            other => Error::Server(other),
        }
    }
}

impl From<ConnectStringError> for Error {
    fn from(e: ConnectStringError) -> Error {
        Error::InvalidConnectString(alloc::string::ToString::to_string(&e))
    }
}

impl From<SessionEnd> for Error {
    fn from(end: SessionEnd) -> Error {
        match end {
            SessionEnd::Expired => Error::SessionExpired,
            SessionEnd::Closed => Error::Closed,
            SessionEnd::AuthFailed(why) => Error::AuthFailed(why),
        }
    }
}

impl Error {
    /// Worth retrying the same request later: the connection was lost (the request may
    /// or may not have been applied), the client or the server refused it for now
    /// (too many requests pending, throttled), or it timed out. Recipes retry these;
    /// anything else is final.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::ConnectionLoss | Error::Overloaded | Error::Timeout => true,
            _ => self.server_code().is_some_and(|code| {
                matches!(
                    code,
                    ErrorCode::ConnectionLoss
                        | ErrorCode::OperationTimeout
                        | ErrorCode::Throttled
                        | ErrorCode::RequestTimeout
                        | ErrorCode::SessionMoved
                        | ErrorCode::NewConfigNoQuorum
                        | ErrorCode::ReconfigInProgress
                )
            }),
        }
    }

    /// Might the request have been applied although it failed (the connection was lost
    /// or it timed out after it was sent)? A refusal (`Overloaded`, `Throttled`) never
    /// was.
    pub fn may_have_applied(&self) -> bool {
        match self {
            Error::ConnectionLoss | Error::Timeout => true,
            _ => self.server_code().is_some_and(|code| {
                matches!(
                    code,
                    ErrorCode::ConnectionLoss
                        | ErrorCode::OperationTimeout
                        | ErrorCode::RequestTimeout
                )
            }),
        }
    }

    /// Does this error mean the session is over (expired, closed, auth failed)?
    pub fn ends_session(&self) -> bool {
        matches!(
            self,
            Error::SessionExpired | Error::Closed | Error::AuthFailed(_)
        )
    }
}

impl From<SubmitError> for Error {
    fn from(e: SubmitError) -> Error {
        match e {
            SubmitError::InvalidPath { path, error } => Error::InvalidPath { path, error },
            SubmitError::TooLarge(t) => Error::TooLarge(t),
            SubmitError::TooManyPending | SubmitError::TooManyWatches => Error::Overloaded,
            SubmitError::NotAllowed(op) => Error::NotAllowed(op),
            SubmitError::Ended(end) => end.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Server(c) => write!(f, "ZooKeeper error: {c}"),
            Error::Node { code, path } => write!(f, "ZooKeeper error on {path}: {code}"),
            Error::ConnectionLoss => f.write_str(
                "connection lost before the reply; the request may or may not have been applied",
            ),
            Error::SessionExpired => {
                f.write_str("session expired; its ephemeral nodes and watches are gone")
            }
            Error::Closed => f.write_str("client closed"),
            Error::AuthFailed(why) => {
                write!(f, "authentication failed: {why}; the session is closed")
            }
            Error::Timeout => {
                f.write_str("no reply within the timeout; the request may still be applied")
            }
            Error::InvalidPath { path, error } => write!(f, "invalid path {path:?}: {error}"),
            Error::TooLarge(t) => write!(f, "{t}"),
            Error::Overloaded => f.write_str("too many requests pending or watches registered"),
            Error::NotAllowed(op) => write!(f, "{op:?} is managed by the session itself"),
            Error::InvalidConnectString(s) => write!(f, "invalid connection string: {s}"),
            Error::UnexpectedReply => f.write_str("the server's reply has an unexpected shape"),
            Error::BadConfig(e) => write!(f, "{e}"),
            Error::WatchEnded => {
                f.write_str("the watch ended without firing (not set, removed, or session ended)")
            }
            Error::Unreachable(hosts) => write!(f, "no ZooKeeper server reachable: {hosts}"),
            Error::NoParent { path, code } => {
                write!(f, "cannot create parent node {path}: {code}")
            }
            Error::Finished => f.write_str("the recipe has finished"),
            Error::NotLeader => f.write_str("not the leader"),
            Error::BadCounter { expected, found } => write!(
                f,
                "the counter node holds {found} bytes, not {} {expected}-byte big-endian integer; nothing was written",
                if *expected == 8 { "an" } else { "a" }
            ),
            Error::CounterOverflow {
                value,
                delta,
                width,
            } => write!(
                f,
                "adding {delta} to the counter's {value} leaves its {}-bit range; nothing was written",
                width * 8
            ),
            Error::SequenceOverflow { path } => write!(
                f,
                "the sequence counter of {path} overflowed or went back; use a new directory"
            ),
            Error::ChrootMissing => f.write_str(
                "the chroot of the connection string does not exist on the server; create it first",
            ),
            Error::TtlNodesDisabled { path } => write!(
                f,
                "cannot create the TTL node {path}: the server has TTL nodes off (start it with -Dzookeeper.extendedTypesEnabled=true)"
            ),
            Error::BadLease { path } => write!(
                f,
                "the lease record {path} is not in kazoo's format (version, holder, end); nothing was written"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}
