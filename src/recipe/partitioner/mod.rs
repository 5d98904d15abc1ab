//! Set partitioner (kazoo's `SetPartitioner`, same nodes, same division): the members
//! of a party divide a set of work items among themselves; each learns which items it
//! holds; on a member joining or leaving every member releases, the set is divided
//! again, and every item is held by at most one member at a time — each item's hold is
//! an exclusive lock, so a slow releaser cannot overlap the next holder.
//!
//! # Node format (kazoo's)
//!
//! * the party, kazoo's `ShallowParty`, under `<path>/party`: one `EPHEMERAL` node per
//!   member, named `<hex>-<identifier>` (`<hex>`: our id without its dashes, as
//!   kazoo's `uuid4().hex`), its data the identifier (UTF-8). A member's identifier is
//!   the text after the first `-` of its node's name.
//! * one lock per item under `<path>/locks/<item>`, in kazoo's `Lock` format:
//!   `EPHEMERAL_SEQUENTIAL` contenders `<id>__lock__<sequence>`, empty data (our
//!   [`Lock`](super::lock::Lock) with [`Naming::Kazoo`](super::lock::Naming::Kazoo)).
//! * the division ([`partition`]): the items sorted, the members' identifiers sorted;
//!   the member at index `i` of `m` members takes the items at `i`, `i + m`, `i + 2m`,
//!   … — kazoo's default `partition_func`, so a kazoo member and ours agree on who
//!   takes what (items and identifiers compare as kazoo's Python `str`s do: by code
//!   point, which for UTF-8 is byte order).
//!
//! # Protocol
//!
//! 1. Join: create our party node (its missing ancestors as containers, bounded; a
//!    lost reply is retried: the name is ours alone, so `NodeExists` means it landed).
//!    [`PartitionEvent`] states follow kazoo's: *allocating* until `Acquired`.
//! 2. List the party, behind a `sync` (a reconnect may land on a lagging follower), with
//!    a children watch. The membership must then stay unchanged for
//!    [`PartitionerConfig::time_boundary`] (kazoo's `time_boundary`): a change (the
//!    watch fires) lists again and starts the wait again.
//! 3. Allocate: our items by [`partition`]; take each item's lock (all at once, no
//!    deadline). A party change while taking them aborts: every lock taken or pending
//!    is released (its node deleted), and we go back to 2. Once every lock is held
//!    (and verified after a reconnect), [`PartitionEvent::Acquired`] names the items
//!    with each lock's fencing token.
//! 4. While held, a party change, a lost connection or a lost item lock reports
//!    [`PartitionEvent::ReleaseNeeded`] once (kazoo's `RELEASE`): the user stops working
//!    on the items and calls [`release`](Partitioner::release), which deletes every
//!    lock node, reports [`PartitionEvent::Released`] and goes back to 2. Until then
//!    the locks stay held — a member that has not let go keeps excluding the next one.
//! 5. [`finish`](Partitioner::finish) (or dropping the handle) releases the locks, then
//!    deletes the party node: [`PartitionEvent::Finished`] once nothing of ours is left.
//!    The session's expiry or close ends it with [`PartitionEvent::Failed`] (kazoo's
//!    `FAILURE`), after the locks' machines have ended.
//!
//! # Guarantees
//!
//! An item is held by at most one member at any instant: holding it is holding its
//! lock (the lock's guarantees: protected names, `sync` before a recovery listing,
//! `ephemeralOwner` checked). Once the party is stable for `time_boundary` and every
//! member that was told `ReleaseNeeded` released, every item is held by exactly one
//! member: members that saw different memberships each saw a later change (their
//! watch fired) and abort. Every attempt ends, and nothing of ours is left after
//! `Finished`.

mod machine;

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::error::Error;
use crate::proto::Acl;

pub use machine::Partitioner;

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
