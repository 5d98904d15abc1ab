//! The lease's config, outcome and events (the machine is in `machine`, the record's
//! format in `record`).

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use super::record::Holder;
use crate::error::Error;
use crate::proto::Acl;

/// The record's name under the lease path (kazoo's).
pub const HOLDER: &str = "lease_holder";

/// The longest identifier (bytes of UTF-8); longer is `BadArguments`.
pub const MAX_IDENTIFIER: usize = 4096;

/// One attempt at a lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseConfig {
    /// The lease's path (kazoo's `path`).
    pub path: String,
    /// How long a granted lease lasts from the decision (kazoo's `duration`).
    pub duration: Duration,
    /// Who holds it: an attempt with the identifier of the current holder renews the
    /// lease (kazoo's `identifier`, by default the host name). Not empty.
    pub identifier: String,
    /// A fresh unique id (a UUID from the driver's entropy): our lock node's prefix
    /// (dashes removed, as kazoo's `uuid4().hex`); how a create whose reply was lost
    /// is found again.
    pub id: String,
    /// ACL of our nodes and of the parents we create (empty: the open ACL).
    pub acl: Vec<Acl>,
}

impl LeaseConfig {
    /// A config with the open ACL.
    pub fn new(path: &str, duration: Duration, identifier: &str, id: &str) -> Self {
        LeaseConfig {
            path: path.into(),
            duration,
            identifier: identifier.into(),
            id: id.into(),
            acl: Vec::new(),
        }
    }
}

/// What an attempt came to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LeaseOutcome {
    /// Ours until `end` (time since the Unix epoch, UTC, whole seconds): our record is
    /// written.
    Granted {
        /// When our lease ends.
        end: Duration,
    },
    /// Someone else's: `holder` holds it until its end (`None`: a record of another
    /// format version, which kazoo leaves alone too).
    Refused {
        /// The current holder.
        holder: Option<Holder>,
    },
}

impl LeaseOutcome {
    /// Is the lease ours?
    pub fn is_granted(&self) -> bool {
        matches!(self, LeaseOutcome::Granted { .. })
    }
}

/// What an attempt reports: one event, its end.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseEvent {
    /// Granted or refused (kazoo's lease object is true or false).
    Decided(LeaseOutcome),
    /// It could not be decided: the session expired or closed, an invalid config
    /// (`BadArguments`, `InvalidPath`), a record not in kazoo's format
    /// ([`Error::BadLease`]), a request refused for good.
    Failed {
        /// The cause.
        error: Error,
    },
}

impl LeaseEvent {
    /// The attempt's outcome, for a caller waiting for it.
    pub fn outcome(&self) -> Option<Result<LeaseOutcome, Error>> {
        match self {
            LeaseEvent::Decided(o) => Some(Ok(o.clone())),
            LeaseEvent::Failed { error } => Some(Err(error.clone())),
        }
    }
}
