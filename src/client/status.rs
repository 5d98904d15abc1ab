//! [`Status`]: the session's state as applications see it, and which session event
//! changes it to what — decided here, once, for every adapter.

use core::time::Duration;

use crate::error::{AuthFailure, Error, SessionEnd};
use crate::session::{Session, SessionEvent};

/// Session state as applications see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// No session yet (or a new one after an expiry is being established).
    Connecting,
    /// A live session on a live connection.
    Connected {
        /// Session id.
        session_id: i64,
        /// Negotiated timeout.
        timeout: Duration,
        /// The server is read-only.
        read_only: bool,
    },
    /// Connection lost; the session may be alive; reconnecting.
    Suspended,
    /// The session expired: its ephemeral nodes, watches and recipes are gone. With
    /// `renewing`, a new session is on its way (`Connected` with a new id follows);
    /// otherwise terminal.
    Expired {
        /// A new session is being established.
        renewing: bool,
    },
    /// Closed. Terminal.
    Closed,
    /// Authentication failed, for this reason. Terminal.
    AuthFailed(AuthFailure),
}

impl Status {
    /// Nothing more will happen (closed, auth failed, expired without renewal).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Expired { renewing: false } | Status::Closed | Status::AuthFailed(_)
        )
    }

    /// Connected now.
    pub fn is_connected(self) -> bool {
        matches!(self, Status::Connected { .. })
    }

    /// The error a call fails with in this status, when the session is gone.
    pub fn error(self) -> Error {
        Error::from(match self {
            Status::Expired { .. } => SessionEnd::Expired,
            Status::AuthFailed(why) => SessionEnd::AuthFailed(why),
            _ => SessionEnd::Closed,
        })
    }

    /// The status after `event` (a state change of `session`), or `None` if the event
    /// is not one (a reply, a watch event, every host unreachable).
    pub fn after(event: &SessionEvent, session: &Session) -> Option<Status> {
        Some(match *event {
            SessionEvent::Connected {
                session_id,
                timeout,
                read_only,
            } => Status::Connected {
                session_id,
                timeout,
                read_only,
            },
            SessionEvent::Reconnected { read_only } => Status::Connected {
                session_id: session.session_id(),
                timeout: session.negotiated_timeout().unwrap_or_default(),
                read_only,
            },
            SessionEvent::Suspended { .. } => Status::Suspended,
            SessionEvent::Expired { renewing, .. } => Status::Expired { renewing },
            SessionEvent::Closed { .. } => Status::Closed,
            SessionEvent::AuthFailed(why) => Status::AuthFailed(why),
            _ => return None,
        })
    }
}
