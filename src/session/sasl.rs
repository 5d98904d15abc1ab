//! The SASL exchange of this connection, as a part: the running exchange, the driver's
//! random bytes for the next one, and the session last announced. A leaf; the step that
//! runs the exchange over it is `authenticate.rs`.

use alloc::boxed::Box;

use crate::sasl::Exchange;

/// This connection's exchange.
#[derive(Debug, Default)]
pub(super) struct SaslStep {
    /// Random bytes for the next exchange, from the driver.
    pub(super) random: Option<[u8; 32]>,
    /// The exchange running on this connection.
    pub(super) exchange: Option<Box<dyn Exchange>>,
    /// The mechanism's name, for errors.
    pub(super) mechanism: &'static str,
    /// The session was resumed (not new) on this connection.
    pub(super) resumed: bool,
    /// The session id last reported established: a session the server created on a
    /// connection lost during its exchange is reported `Connected`, not `Reconnected`,
    /// when it is first established.
    pub(super) announced: i64,
}
