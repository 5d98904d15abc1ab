//! The session's vocabulary, shared by all its parts: the caller's [`Token`], what
//! the driver must do with its socket ([`Transport`]), what the session reports
//! ([`SessionEvent`]: [`Reply`], [`SharedReply`], [`WatchEvent`], state changes),
//! where it stands ([`SessionState`]), the kinds of watch ([`WatchKind`]) and the
//! [`Counters`]. A leaf: it uses nothing of the session's parts.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::error::{AuthFailure, DisconnectReason, Error, HostFailures, SessionEnd};
use crate::proto::{EventType, Response};

/// The caller's name for a request; replies and watch events come back under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(pub u64);

impl Token {
    /// The token of the session's own `closeSession`. Callers must not use it.
    pub const CLOSE: Token = Token(u64::MAX);
    /// The token of the session's own reads (the ensemble tracker's, see
    /// [`SessionConfig::track_ensemble`](super::SessionConfig::track_ensemble)): their
    /// replies and failures are the session's, never reported. Callers must not use it.
    pub const SESSION: Token = Token(u64::MAX - 1);
}

/// The kind of a watch registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// One-shot watch on an existing node's data (getData / exists).
    Data,
    /// One-shot watch for a missing node's creation (exists on NoNode).
    Exist,
    /// One-shot watch on a node's children (getChildren).
    Child,
    /// Persistent watch on the node (addWatch PERSISTENT).
    Persistent,
    /// Persistent watch on the node and all descendants (addWatch PERSISTENT_RECURSIVE).
    PersistentRecursive,
}

/// What the session has moved so far (for benchmarks and monitoring). Counts are over
/// the session's whole life, across connections and renewed sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    /// Requests written with an xid of their own (everything submitted, and
    /// closeSession): what the server counts as operations.
    pub requests_sent: u64,
    /// Frames the session writes by itself: connect requests, pings, auth replays and
    /// SetWatches.
    pub control_sent: u64,
    /// Bytes handed to the driver to write.
    pub bytes_sent: u64,
    /// Bytes the driver fed in.
    pub bytes_received: u64,
    /// Replies matched to a request (pings, auth and SetWatches answers excluded).
    pub replies_received: u64,
    /// Watch notifications received (one per server event, however many registrants).
    pub notifications_received: u64,
    /// Replies the server answered `Throttled` (never applied); each one halves the
    /// session's in-flight window at most once per window of replies.
    pub throttled: u64,
    /// Listings that joined an identical queued one instead of going out themselves
    /// (see [`Session::submit_from`](super::Session::submit_from)): requests saved.
    pub listings_shared: u64,
}

/// What the driver must do with its socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Drop any current socket and connect to `hosts()[host]`; then call
    /// `handle_connected`, or `handle_disconnect` if the connection fails.
    Connect {
        /// Index into [`ConnectString::hosts`](super::ConnectString::hosts).
        host: usize,
    },
    /// Drop the current socket.
    Close,
    /// Keep the current socket; on a separate, short-lived connection to
    /// `hosts()[host]`, write [`Transport::PROBE_REQUEST`], read what the server answers
    /// until it closes (at most [`Transport::PROBE_ANSWER_MAX`] bytes, within a few
    /// seconds: the adapters give it 2 s) and give it to
    /// [`handle_probe`](super::Session::handle_probe) (nothing read, or a failure:
    /// an empty answer). Asked for only while the session is connected to a read-only
    /// server: it is how the session finds a read-write one (the Java client's
    /// `pingRwServer`). A driver that never carries it out only keeps the session on
    /// its read-only server until that connection ends.
    Probe {
        /// Index into [`ConnectString::hosts`](super::ConnectString::hosts).
        host: usize,
    },
}

impl Transport {
    /// What a [`Transport::Probe`] writes: ZooKeeper's `isro` four-letter word (the
    /// server must allow it: `4lw.commands.whitelist` lists `isro`, or `*`).
    pub const PROBE_REQUEST: &'static [u8] = b"isro";
    /// The most a [`Transport::Probe`] reads (`rw` or `ro`; anything else is no answer).
    pub const PROBE_ANSWER_MAX: usize = 16;
}

/// A reply to a submitted request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reply {
    /// The request's token.
    pub token: Token,
    /// zxid from the reply header (0 for replies made up locally).
    pub zxid: i64,
    /// The body, or the error (a server error code, `ConnectionLoss`, `SessionExpired`,
    /// `Closed`, ...).
    pub result: Result<Response, Error>,
    /// The watch this request registered under its token, if any: later
    /// [`SessionEvent::Watch`] events for the token come from it. `None` means none
    /// will come (e.g. getData with a watch on a missing node sets no watch).
    pub watch: Option<WatchKind>,
}

/// One reply to a listing several requesters shared ([`Session::submit_from`](super::Session::submit_from)).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedReply {
    /// The tokens it answers, in the order they were submitted.
    pub tokens: Vec<Token>,
    /// zxid from the reply header.
    pub zxid: i64,
    /// The body, or the error.
    pub result: Result<Response, Error>,
    /// The watch registered under each token, if any (see [`Reply::watch`]).
    pub watch: Option<WatchKind>,
}

/// A watch firing for one registrant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WatchEvent {
    /// What happened (`Node*`, or `*WatchRemoved` after removeWatches).
    pub event_type: EventType,
    /// Client path (chroot stripped). For recursive watches, the descendant's path.
    pub path: String,
}

/// Output of the session.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionEvent {
    /// A new session was established.
    Connected {
        /// Session id.
        session_id: i64,
        /// Negotiated timeout.
        timeout: Duration,
        /// The server is read-only.
        read_only: bool,
    },
    /// The connection was lost; the session may still be alive. Anything ephemeral is
    /// in doubt until `Reconnected` or `Expired`.
    Suspended {
        /// Why.
        reason: DisconnectReason,
    },
    /// The same session is back on a new connection; watches were re-armed.
    Reconnected {
        /// The server is read-only.
        read_only: bool,
    },
    /// The session is gone (server-confirmed when `confirmed`, else the client-side
    /// estimate): its ephemeral nodes are or will be deleted, every request still
    /// pending failed with `SessionExpired`, every watch is gone. With
    /// [`SessionConfig::renew_on_expiry`](super::SessionConfig::renew_on_expiry) a new session follows (`Connected` with a new
    /// id); otherwise this is terminal.
    Expired {
        /// The server said so (rather than the local estimate).
        confirmed: bool,
        /// A new session is being established.
        renewing: bool,
    },
    /// No session was ever established and every host has failed at least once;
    /// reported after every failed attempt from then on (the session keeps trying with
    /// backoff). Drivers keep the latest to say at their connect deadline why nothing
    /// answered (or, failing fast, give up at the first).
    Unreachable {
        /// What happened to the last attempt.
        reason: DisconnectReason,
        /// Every host and its last failure.
        hosts: HostFailures,
    },
    /// The ensemble's membership changed (when tracking it,
    /// [`SessionConfig::track_ensemble`](super::SessionConfig::track_ensemble)): the
    /// hosts the session now uses, and whether it is leaving its server to rebalance
    /// (a [`Suspended`](Self::Suspended) with
    /// [`DisconnectReason::Rebalanced`] follows).
    EnsembleChanged {
        /// The members' client addresses (what `Transport::Connect` now indexes).
        hosts: Vec<String>,
        /// The configuration's version.
        version: i64,
        /// The session leaves its current server.
        moving: bool,
    },
    /// The client was closed ([`Session::close`](super::Session::close)). Terminal.
    Closed {
        /// A server answered the session's closeSession: the session is over and its
        /// ephemeral nodes are gone. `false` when the close ended without that answer —
        /// no connection, the answer not in time, or the connection a read-only
        /// stand-in's (the stand-in was closed, not the session) — the session then
        /// ends when it expires, its ephemeral nodes staying until then.
        confirmed: bool,
    },
    /// Authentication failed, for this reason. Terminal.
    AuthFailed(AuthFailure),
    /// A request completed.
    Reply(Reply),
    /// A listing shared by several requesters completed: the same reply for each of
    /// their tokens, in the order they asked (see [`Session::submit_from`](super::Session::submit_from); never for
    /// requests made with [`Session::submit`](super::Session::submit)).
    SharedReply(SharedReply),
    /// A watch fired for `token`.
    Watch {
        /// Registrant: the token of the request that set the watch.
        token: Token,
        /// The event.
        event: WatchEvent,
    },
}

impl SessionEvent {
    /// Is this a change of session state (rather than a reply or a watch event)?
    pub fn is_state_change(&self) -> bool {
        !matches!(
            self,
            SessionEvent::Reply(_) | SessionEvent::SharedReply(_) | SessionEvent::Watch { .. }
        )
    }
}

/// One line for logs.
impl fmt::Display for SessionEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionEvent::Connected {
                session_id,
                timeout,
                read_only,
            } => {
                write!(f, "session 0x{session_id:x} established (timeout {timeout:?}, read-only {read_only})")
            }
            SessionEvent::Suspended { reason } => {
                write!(f, "connection lost ({reason}); session suspended")
            }
            SessionEvent::Reconnected { read_only } => write!(
                f,
                "session resumed on a new connection (read-only {read_only})"
            ),
            SessionEvent::Expired {
                confirmed,
                renewing,
            } => {
                f.write_str(if *confirmed {
                    "session expired (server-confirmed)"
                } else {
                    "session expired (no word from the server for its whole timeout)"
                })?;
                if *renewing {
                    f.write_str("; starting a new session")?;
                }
                Ok(())
            }
            SessionEvent::Unreachable { hosts, .. } => {
                write!(f, "no server reachable ({hosts})")
            }
            SessionEvent::EnsembleChanged {
                hosts,
                version,
                moving,
            } => write!(
                f,
                "ensemble config {version:#x}: {}{}",
                hosts.join(","),
                if *moving { "; moving to rebalance" } else { "" }
            ),
            SessionEvent::Closed { confirmed: true } => f.write_str("session closed"),
            SessionEvent::Closed { confirmed: false } => f.write_str(
                "client closed; no server confirmed the session's close: it ends when it \
                 expires, its ephemeral nodes staying until then",
            ),
            SessionEvent::AuthFailed(why) => {
                write!(f, "authentication failed: {why}; session closed")
            }
            SessionEvent::Reply(r) => write!(f, "reply to {:?}", r.token),
            SessionEvent::SharedReply(r) => write!(f, "shared reply to {:?}", r.tokens),
            SessionEvent::Watch { token, event } => {
                write!(f, "{:?} on {} for {token:?}", event.event_type, event.path)
            }
        }
    }
}

/// Where the session stands, for getters and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// No session yet; connecting.
    Connecting,
    /// Connected with a live session.
    Connected,
    /// Connection lost; the session may be alive; reconnecting.
    Suspended,
    /// Waiting for the closeSession reply.
    Closing,
    /// Ended.
    Ended(SessionEnd),
}
