//! ZooKeeper error codes (`KeeperException.Code`, reference §7).

use core::fmt;

macro_rules! error_codes {
    ($($(#[$vmeta:meta])* $variant:ident = $value:expr, $msg:expr;)*) => {
        /// An error code from a reply header or a multi result. Codes this table does
        /// not know are kept in [`ErrorCode::Unknown`], never rejected.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$vmeta])* $variant,)*
            /// A code not in the 3.8/3.9 table.
            Unknown(i32),
        }

        impl ErrorCode {
            /// Every known code, in table order.
            pub const KNOWN: &'static [ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The code for a wire number (never fails).
            pub const fn from_i32(code: i32) -> Self {
                match code { $(v if v == $value => ErrorCode::$variant,)* other => ErrorCode::Unknown(other) }
            }

            /// The number on the wire.
            pub const fn to_i32(self) -> i32 {
                match self { $(ErrorCode::$variant => $value,)* ErrorCode::Unknown(v) => v }
            }

            /// A short description for people.
            pub const fn message(self) -> &'static str {
                match self { $(ErrorCode::$variant => $msg,)* ErrorCode::Unknown(_) => "unknown error code" }
            }
        }
    };
}

error_codes! {
    /// Success.
    Ok = 0, "ok";
    /// Range marker for system errors.
    SystemError = -1, "system error";
    /// An op of a failed multi after the failing one.
    RuntimeInconsistency = -2, "runtime inconsistency (multi rolled back)";
    /// Data inconsistency.
    DataInconsistency = -3, "data inconsistency";
    /// The connection was lost; the request may or may not have been applied.
    ConnectionLoss = -4, "connection loss";
    /// The server could not parse the request.
    MarshallingError = -5, "marshalling error";
    /// Not implemented by this server (or TTL nodes disabled).
    Unimplemented = -6, "operation unimplemented";
    /// Operation timeout.
    OperationTimeout = -7, "operation timeout";
    /// Invalid arguments (bad path, flags, TTL).
    BadArguments = -8, "bad arguments";
    /// Unknown session (server-internal).
    UnknownSession = -12, "unknown session";
    /// Reconfig without a quorum.
    NewConfigNoQuorum = -13, "new config has no quorum";
    /// Another reconfig is running.
    ReconfigInProgress = -14, "reconfig in progress";
    /// Range marker for API errors.
    ApiError = -100, "api error";
    /// The node does not exist.
    NoNode = -101, "node does not exist";
    /// Not authorized by the node's ACL.
    NoAuth = -102, "not authorized";
    /// The version did not match.
    BadVersion = -103, "version mismatch";
    /// Ephemeral nodes cannot have children.
    NoChildrenForEphemerals = -108, "ephemeral nodes cannot have children";
    /// The node already exists.
    NodeExists = -110, "node already exists";
    /// The node has children.
    NotEmpty = -111, "node has children";
    /// The session expired.
    SessionExpired = -112, "session expired";
    /// Invalid callback.
    InvalidCallback = -113, "invalid callback";
    /// Invalid ACL.
    InvalidAcl = -114, "invalid ACL";
    /// Authentication failed.
    AuthFailed = -115, "authentication failed";
    /// The session moved to another server.
    SessionMoved = -118, "session moved";
    /// A write to a read-only server.
    NotReadOnly = -119, "server is read-only";
    /// Ephemeral on a local session.
    EphemeralOnLocalSession = -120, "ephemeral on local session";
    /// No such watch.
    NoWatcher = -121, "no such watcher";
    /// The request timed out on the client.
    RequestTimeout = -122, "request timeout";
    /// Reconfig disabled.
    ReconfigDisabled = -123, "reconfig disabled";
    /// The session was closed; SASL required.
    SessionClosedRequireSaslAuth = -124, "session closed: SASL authentication required";
    /// Hard quota exceeded.
    QuotaExceeded = -125, "quota exceeded";
    /// Throttled by the server.
    Throttled = -127, "request throttled";
}

impl ErrorCode {
    /// Is this success?
    pub const fn is_ok(self) -> bool {
        matches!(self, ErrorCode::Ok)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message(), self.to_i32())
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ErrorCode {}
