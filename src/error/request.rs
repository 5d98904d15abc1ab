//! Why a request or a setting is refused: [`SubmitError`] (nothing was sent),
//! [`SessionEnd`] (what every request fails with once the session ended that way) and
//! [`ConnectStringError`]. Re-exported by [`session`](crate::session).

use alloc::string::String;
use core::fmt;

use crate::proto::{ErrorCode, OpCode, PathError, TooLarge};

/// How a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionEnd {
    /// The server said the session is gone, or it was disconnected for its whole timeout.
    Expired,
    /// Closed by [`Session::close`](crate::session::Session::close).
    Closed,
    /// Authentication failed, for this reason.
    AuthFailed(AuthFailure),
}

impl SessionEnd {
    /// The error code requests fail with once the session ended this way.
    pub fn error_code(self) -> ErrorCode {
        match self {
            SessionEnd::Expired => ErrorCode::SessionExpired,
            SessionEnd::Closed => ErrorCode::ConnectionLoss,
            SessionEnd::AuthFailed(_) => ErrorCode::AuthFailed,
        }
    }
}

/// Why authentication failed (the session then ends, for good: the same credentials
/// would fail again).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AuthFailure {
    /// The server rejected an `addauth` packet (`AuthFailed`, -115).
    Rejected,
    /// The server requires SASL authentication (`zookeeper.enforce.auth.enabled`) and
    /// this client has no SASL mechanism configured (the server answered
    /// `SessionClosedRequireSaslAuth`, -124).
    SaslRequired,
    /// The SASL exchange of `mechanism` failed.
    Sasl {
        /// The mechanism's name (`"DIGEST-MD5"`, ...).
        mechanism: &'static str,
        /// Why.
        reason: SaslFailure,
    },
}

/// Why a SASL exchange failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SaslFailure {
    /// The server refused our credentials with this code (`AuthFailed`, or
    /// `SessionClosedRequireSaslAuth` when it requires SASL): a wrong user or password,
    /// or a mechanism it does not accept.
    Refused(ErrorCode),
    /// The server's proof of the password (DIGEST-MD5's `rspauth`) is wrong: it does
    /// not know the password, so it is not the server we meant.
    ServerNotVerified,
    /// The server's challenge is malformed or asks for what the mechanism cannot do.
    BadChallenge(&'static str),
    /// The driver gave no random bytes for the connection
    /// ([`Session::handle_random`](crate::session::Session::handle_random)).
    NoRandom,
    /// The mechanism's own failure.
    Mechanism(&'static str),
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthFailure::Rejected => f.write_str("the server rejected the credentials (addauth)"),
            AuthFailure::SaslRequired => f.write_str(
                "the server requires SASL authentication and no SASL mechanism is configured",
            ),
            AuthFailure::Sasl { mechanism, reason } => write!(f, "SASL {mechanism}: {reason}"),
        }
    }
}

impl fmt::Display for SaslFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaslFailure::Refused(code) => write!(
                f,
                "the server refused the credentials (wrong user or password?): {code}"
            ),
            SaslFailure::ServerNotVerified => {
                f.write_str("the server could not prove it knows the password (bad rspauth)")
            }
            SaslFailure::BadChallenge(what) => write!(f, "unusable server challenge: {what}"),
            SaslFailure::NoRandom => {
                f.write_str("the driver supplied no random bytes for the client nonce")
            }
            SaslFailure::Mechanism(what) => f.write_str(what),
        }
    }
}

/// Why a request was not accepted; nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SubmitError {
    /// A path breaks ZooKeeper's rules.
    InvalidPath {
        /// The path.
        path: String,
        /// The rule.
        error: PathError,
    },
    /// The frame would exceed the request limit.
    TooLarge(TooLarge),
    /// `max_pending` requests are already waiting.
    TooManyPending,
    /// `max_watches` registrations exist already.
    TooManyWatches,
    /// This request type is managed by the session (ping, SetWatches, closeSession).
    NotAllowed(OpCode),
    /// The session has ended.
    Ended(SessionEnd),
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::InvalidPath { path, error } => write!(f, "invalid path {path:?}: {error}"),
            SubmitError::TooLarge(e) => write!(f, "{e}"),
            SubmitError::TooManyPending => f.write_str("too many requests pending"),
            SubmitError::TooManyWatches => f.write_str("too many watches registered"),
            SubmitError::NotAllowed(op) => {
                write!(f, "{op:?} requests are sent by the session itself")
            }
            SubmitError::Ended(end) => write!(f, "session ended: {end:?}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SubmitError {}

/// Why a connection string was rejected.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectStringError {
    /// No host given.
    NoHosts,
    /// A host entry is empty or has a bad port.
    BadHost(String),
    /// The chroot is not a valid path.
    BadChroot(PathError),
}

impl fmt::Display for ConnectStringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectStringError::NoHosts => f.write_str("connection string names no host"),
            ConnectStringError::BadHost(h) => {
                write!(f, "bad host entry {h:?} in connection string")
            }
            ConnectStringError::BadChroot(e) => write!(f, "bad chroot in connection string: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ConnectStringError {}
