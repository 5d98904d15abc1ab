//! The partitioner's config, events and kazoo's division (the machine is in `machine`).

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::error::Error;
use crate::proto::Acl;

/// The most items one partitioner divides (bounded memory; more is `BadArguments`).
pub const MAX_ITEMS: usize = 4096;

/// What to divide, where, and who we are.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartitionerConfig {
    /// The partitioner's path: the party is under `<path>/party`, the item locks under
    /// `<path>/locks`.
    pub path: String,
    /// The items (any order, repeats allowed: the machine sorts and deduplicates them);
    /// each a valid node name.
    pub items: Vec<String>,
    /// This member's identifier (unique in the party: kazoo's default is
    /// `<hostname>-<pid>`); no `/`.
    pub identifier: String,
    /// A fresh unique id (a UUID from the driver's entropy): our party node's prefix
    /// (its dashes removed) and the root of our lock ids.
    pub id: String,
    /// How long the membership must stay unchanged before allocating (kazoo's
    /// `time_boundary`, 30 s by default there; here too).
    pub time_boundary: Duration,
    /// ACL of our nodes and of the parents we create.
    pub acl: Vec<Acl>,
}

impl PartitionerConfig {
    /// A config with a 30 s time boundary and the open ACL.
    pub fn new<S: AsRef<str>>(path: &str, items: &[S], identifier: &str, id: &str) -> Self {
        PartitionerConfig {
            path: path.into(),
            items: items.iter().map(|i| String::from(i.as_ref())).collect(),
            identifier: identifier.into(),
            id: id.into(),
            time_boundary: Duration::from_secs(30),
            acl: Acl::open_unsafe(),
        }
    }
}

/// One item held.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeldItem {
    /// The item.
    pub item: String,
    /// Our lock node's name in `<path>/locks/<item>`.
    pub node: String,
    /// Its fencing token (our lock node's creation zxid): strictly increasing across
    /// the item's holders.
    pub fencing_token: i64,
}

/// What a partitioner reports. `Acquired`, `ReleaseNeeded` and `Released` repeat,
/// once per division; `Finished` and `Failed` end it (one of them, once).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartitionEvent {
    /// Our share of the set is held (kazoo's `ACQUIRED`), sorted by item; possibly
    /// empty (more members than items).
    Acquired {
        /// The items and their fencing tokens.
        items: Vec<HeldItem>,
    },
    /// The party changed, the connection dropped or an item's lock was lost: stop
    /// working on the items and call `release` (kazoo's `RELEASE`).
    ReleaseNeeded,
    /// Our items are released (their lock nodes deleted); allocating again.
    Released,
    /// Finished: our locks and party node are deleted.
    Finished,
    /// It ended (the session expired or closed, a path cannot be created, an invalid
    /// config, a request refused for good): kazoo's `FAILURE`.
    Failed {
        /// The cause.
        error: Error,
    },
}

impl PartitionEvent {
    /// Does this event end the partitioner?
    pub fn ends(&self) -> bool {
        matches!(
            self,
            PartitionEvent::Finished | PartitionEvent::Failed { .. }
        )
    }

    /// For a caller waiting for the set to be acquired: `Some` when the wait is over.
    pub fn acquire_outcome(&self) -> Option<Result<Vec<HeldItem>, Error>> {
        match self {
            PartitionEvent::Acquired { items } => Some(Ok(items.clone())),
            PartitionEvent::Failed { error } => Some(Err(error.clone())),
            PartitionEvent::Finished => Some(Err(Error::Closed)),
            _ => None,
        }
    }

    /// For a caller waiting for a release (or the finish): `Some` when it is over.
    pub fn release_outcome(&self) -> Option<Result<(), Error>> {
        match self {
            PartitionEvent::Released | PartitionEvent::Finished => Some(Ok(())),
            PartitionEvent::Failed { error } => Some(Err(error.clone())),
            _ => None,
        }
    }
}

/// kazoo's default division: the indices (into `items`, which must be sorted) of the
/// items the member `identifier` takes among `members` (identifiers, any order,
/// repeats allowed: the first of equal ones counts). Empty if `identifier` is not a
/// member.
///
/// ```
/// use zk_recipes::recipe::partitioner::partition;
/// let items = ["a", "b", "c", "d", "e"].map(String::from);
/// let members = ["w2", "w1"].map(String::from);
/// assert_eq!(partition("w1", &members, &items), [0, 2, 4]);
/// assert_eq!(partition("w2", &members, &items), [1, 3]);
/// ```
pub fn partition(identifier: &str, members: &[String], items: &[String]) -> Vec<usize> {
    let mut workers: Vec<&str> = members.iter().map(String::as_str).collect();
    workers.sort_unstable();
    let Some(i) = workers.iter().position(|w| *w == identifier) else {
        return Vec::new();
    };
    (i..items.len()).step_by(workers.len()).collect()
}

/// A party node's member identifier (kazoo's `child[child.find('-') + 1:]`).
pub fn member_identifier(node: &str) -> &str {
    node.split_once('-').map_or(node, |(_, id)| id)
}
