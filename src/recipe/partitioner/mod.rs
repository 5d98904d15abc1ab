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
mod types;

pub use machine::Partitioner;
pub use types::{
    member_identifier, partition, HeldItem, PartitionEvent, PartitionerConfig, MAX_ITEMS,
};
