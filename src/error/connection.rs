//! Why a connection failed or ended, as the session reports it: what the driver saw
//! happen to its socket ([`TransportError`], [`TlsFailure`]), why the session dropped a
//! connection ([`DisconnectReason`]), and why no session could be had at all
//! ([`HostFailures`]). Re-exported by [`session`](crate::session).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::proto::{DecodeError, ErrorCode, FrameError};

/// What the driver saw happen to its socket (it maps its I/O errors to these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportError {
    /// The peer refused the connection (nothing listens there).
    Refused,
    /// The peer reset the connection.
    Reset,
    /// The peer closed the connection (end of stream).
    Closed,
    /// The address could not be resolved or reached.
    Unreachable,
    /// Any other I/O failure.
    Other,
    /// The TLS handshake (or a TLS record) failed, for this reason. A driver that speaks
    /// TLS reports it; the session treats it as any other failed attempt on the host
    /// (the next host, then backoff).
    Tls(TlsFailure),
}

/// Why TLS failed on a connection (drivers that speak TLS map their library's errors
/// to these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The server's certificate is not signed by a trusted root (wrong CA).
    UnknownIssuer,
    /// The server's certificate is not valid for the expected server name.
    NameMismatch,
    /// The server's certificate has expired.
    Expired,
    /// The server's certificate is not valid yet.
    NotYetValid,
    /// The server's certificate was rejected for another reason (bad signature,
    /// wrong usage, revoked, unparseable, ...).
    BadCertificate,
    /// The server refused the handshake with a TLS alert (it did not accept our
    /// client certificate, say): the alert's description code (RFC 8446 section 6).
    HandshakeRefused(u8),
    /// The peer does not speak TLS, or the TLS exchange broke otherwise.
    Protocol,
}

impl fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsFailure::UnknownIssuer => f.write_str(
                "the server's certificate has an unknown issuer (not signed by a trusted CA)",
            ),
            TlsFailure::NameMismatch => {
                f.write_str("the server's certificate is not valid for the expected server name")
            }
            TlsFailure::Expired => f.write_str("the server's certificate has expired"),
            TlsFailure::NotYetValid => f.write_str("the server's certificate is not valid yet"),
            TlsFailure::BadCertificate => f.write_str("the server's certificate was rejected"),
            TlsFailure::HandshakeRefused(alert) => {
                let why = match alert {
                    40 => "handshake failure",
                    42 => "bad certificate",
                    43 => "unsupported certificate",
                    44 => "certificate revoked",
                    45 => "certificate expired",
                    46 => "certificate unknown",
                    48 => "unknown CA",
                    49 => "access denied",
                    70 => "protocol version",
                    116 => "certificate required",
                    _ => "alert",
                };
                if matches!(alert, 42..=49 | 116) {
                    // What a server says when it does not accept the client certificate.
                    write!(
                        f,
                        "the server refused our client certificate ({why}, alert {alert})"
                    )
                } else {
                    write!(f, "the server refused the handshake ({why}, alert {alert})")
                }
            }
            TlsFailure::Protocol => f.write_str("TLS protocol error (not a TLS port?)"),
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportError::Refused => "connection refused",
            TransportError::Reset => "connection reset by the server",
            TransportError::Closed => "connection closed by the server",
            TransportError::Unreachable => "host unreachable or not resolvable",
            TransportError::Other => "I/O error",
            TransportError::Tls(e) => return write!(f, "TLS: {e}"),
        })
    }
}

#[cfg(feature = "std")]
impl From<&std::io::Error> for TransportError {
    /// Maps a socket error the way both adapters do.
    fn from(e: &std::io::Error) -> Self {
        use std::io::ErrorKind::*;
        match e.kind() {
            ConnectionRefused => TransportError::Refused,
            ConnectionReset | ConnectionAborted | BrokenPipe => TransportError::Reset,
            UnexpectedEof => TransportError::Closed,
            NotFound | AddrNotAvailable | HostUnreachable | NetworkUnreachable => {
                TransportError::Unreachable
            }
            _ => TransportError::Other,
        }
    }
}

/// Why a connection ended (for logs and errors; the session decides what follows).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// The driver reported the socket closed or failed.
    Transport(TransportError),
    /// The socket closed (or failed) after connecting but before the server answered
    /// the handshake.
    ClosedBeforeHandshake(TransportError),
    /// The first bytes the server sent are not a ZooKeeper handshake answer (an HTTP
    /// server, say).
    NotZooKeeper,
    /// Nothing received for the read timeout.
    ReadTimeout,
    /// The TCP connection (and, over TLS, its handshake) was not established within
    /// the connect timeout.
    ConnectTimeout,
    /// The server accepted the connection but did not answer the handshake in time.
    NoHandshakeReply,
    /// The server answered a request for a new session with "expired": it will not
    /// give this client a session.
    SessionRefused,
    /// The server answered the handshake with a bare reply header carrying `code`, in
    /// place of a session. ZooKeeper 3.8's read-only server answers so (`NotReadOnly`)
    /// every request for a new session unless it runs with `localSessionsEnabled=true`
    /// (it creates sessions there only as local ones).
    HandshakeRefused {
        /// The error the header carries.
        code: ErrorCode,
    },
    /// A handshake asking a read-only server for a read-only stand-in session (see
    /// `docs/sessions.md`, read-only mode) was answered by a server that serves
    /// read-write again: the new session it granted is not this client's session (it
    /// is left to expire, holding nothing), and the session's own is presented next.
    StandInNotReadOnly,
    /// A bad frame length.
    Frame(FrameError),
    /// A frame that does not decode.
    Decode(DecodeError),
    /// The server is read-only and a probe found host `host` (an index into the
    /// connect string) serving read-write: the session moves there.
    ReadWriteServerFound {
        /// The read-write host.
        host: usize,
    },
    /// A reply that does not answer the oldest request in flight.
    UnexpectedXid {
        /// xid of the oldest request in flight (0 if none).
        expected: i32,
        /// xid in the reply.
        got: i32,
    },
}

impl fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DisconnectReason::Transport(e) => write!(f, "{e}"),
            DisconnectReason::ClosedBeforeHandshake(e) => {
                write!(f, "{e} before answering the handshake")
            }
            DisconnectReason::NotZooKeeper => f.write_str(
                "the server's answer is not a ZooKeeper handshake (not a ZooKeeper server?)",
            ),
            DisconnectReason::ReadTimeout => {
                f.write_str("no complete frame received within the read timeout")
            }
            DisconnectReason::ConnectTimeout => {
                f.write_str("connect timed out (TCP connect, or the TLS handshake)")
            }
            DisconnectReason::NoHandshakeReply => {
                f.write_str("connected, but no handshake answer within the connect timeout")
            }
            DisconnectReason::SessionRefused => {
                f.write_str("the server refused to create a session")
            }
            DisconnectReason::HandshakeRefused {
                code: ErrorCode::NotReadOnly,
            } => f.write_str(
                "the read-only server refused to create a session (NotReadOnly, -119): \
                 ZooKeeper 3.8 creates sessions on a read-only server only with \
                 localSessionsEnabled=true",
            ),
            DisconnectReason::HandshakeRefused { code } => {
                write!(f, "the server answered the handshake with an error: {code}")
            }
            DisconnectReason::StandInNotReadOnly => f.write_str(
                "asked a read-only server for a read-only stand-in session, and a \
                 read-write server answered",
            ),
            DisconnectReason::ReadWriteServerFound { host } => write!(
                f,
                "left a read-only server for host {host}, which serves read-write"
            ),
            DisconnectReason::Frame(e) => write!(f, "protocol error: {e}"),
            DisconnectReason::Decode(e) => write!(f, "protocol error: {e}"),
            DisconnectReason::UnexpectedXid { expected, got } => {
                write!(
                    f,
                    "protocol error: reply xid {got} while waiting for {expected}"
                )
            }
        }
    }
}

/// Why no session could be established: every host of the connection string with
/// the last reason an attempt on it failed (`None`: not tried yet).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostFailures {
    /// The most recent attempt's reason.
    pub last: DisconnectReason,
    /// Each host (`host:port`, in connection-string order) and its last failure.
    pub hosts: Vec<(String, Option<DisconnectReason>)>,
}

/// `127.0.0.1:2181: connection refused; 127.0.0.2:2181: not tried`.
impl fmt::Display for HostFailures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (host, reason)) in self.hosts.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            match reason {
                Some(r) => write!(f, "{host}: {r}")?,
                None => write!(f, "{host}: not tried")?,
            }
        }
        Ok(())
    }
}
