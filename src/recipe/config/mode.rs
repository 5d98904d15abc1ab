//! What the reader and the writer share: the protocol ([`ConfigMode`]) and the rules
//! of the paths they are given.

use alloc::collections::BTreeSet;
use alloc::string::ToString;

use crate::error::Error;
use crate::proto::*;

/// How many failed `multi`s a multi-mode write tries before giving up.
pub(crate) const MAX_MULTI_ROUNDS: u8 = 4;

/// Which protocol keeps readers from seeing half a write; see the [module docs](super).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigMode {
    /// The paper's protocol: a `ready` node exists only over a complete configuration.
    ReadyNode,
    /// One `multi` per write, one `multiRead` per read (ZooKeeper 3.6+ to read).
    Multi,
}

pub(crate) fn check_paths<'a>(paths: impl Iterator<Item = &'a str>) -> Result<(), Error> {
    let mut seen = BTreeSet::new();
    for p in paths {
        validate_path(p).map_err(|error| Error::InvalidPath {
            path: p.to_string(),
            error,
        })?;
        if !seen.insert(p) {
            return Err(Error::Server(ErrorCode::BadArguments));
        }
    }
    Ok(())
}
