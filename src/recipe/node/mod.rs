//! Single-node recipes the group and rendezvous recipes are built from: a node we keep
//! in place ([`OwnedNode`], Curator's `PersistentNode`) and a node we follow
//! ([`NodeWatch`], the watched-value half of the paper's rendezvous and configuration
//! recipes).
//!
//! # [`OwnedNode`]: keep one node of ours in place
//!
//! 1. [`create`](OwnedNode::create) sends `create2(<path>, data)` (ephemeral by default)
//!    and, pipelined behind it, `getData(<path>, watch)`: the read answers after the
//!    create, so one round trip tells whether the node is ours (its `ephemeralOwner` is
//!    our session) and arms a watch on it. Missing ancestors are created as containers
//!    (at most twice; a parent that cannot be created ends with [`Error::NoParent`](crate::error::Error::NoParent) or
//!    [`Error::ChrootMissing`](crate::error::Error::ChrootMissing)).
//! 2. `NodeExists` is not an error: the read decides. Our own node (a create whose reply
//!    was lost) is adopted; another session's node at our path is reported as
//!    [`Blocked`](OwnedNodeEvent::Blocked) and watched until it goes, then we create ours.
//! 3. Our data is kept: if the node holds other data (adopted, or written by someone
//!    else) it is set back, unless [`OwnedNodeConfig::restore_data`] is off.
//!    [`set_data`](OwnedNode::set_data) changes what we keep there.
//! 4. Deleted by someone else while our session lives, or gone with an expired session:
//!    [`Lost`](OwnedNodeEvent::Lost), then re-created (after the next `Connected` for an
//!    expiry) if [`OwnedNodeConfig::recreate`] is on (the default); otherwise `Failed`.
//! 5. [`delete`](OwnedNode::delete) (and abandoning) deletes the node if it is ours —
//!    never another session's — and ends with [`Removed`](OwnedNodeEvent::Removed).
//!
//! # [`NodeWatch`]: follow one node's existence and data
//!
//! 1. `getData(<path>, watch)`: the node's data and Stat ([`Data`](NodeWatchEvent::Data)).
//! 2. `NoNode`: [`Missing`](NodeWatchEvent::Missing), and `exists(<path>, watch)` so its
//!    creation is noticed (if `exists` finds it, it is read at once).
//! 3. Every notification leads to one read; a version already reported is not reported
//!    again, so the events are the node's versions in server order, the latest last.
//! 4. After a reconnect the node is read again (after `sync`): nothing is missed.
//!
//! # Session semantics (both)
//!
//! `Suspended` on connection loss, `Reconnected` when the session is back (for an owned
//! node: once the node is verified ours). Both machines carry on across a session
//! expiry when the client renews the session (its default): the watch follows the
//! node again from the next `Connected`; the owned node is re-created if asked to.
//! `Closed` ends both with `Failed(Error::Closed)`.
//!
//! Each machine holds at most one watch registration at a time, so watches never pile
//! up however often the node changes.

pub(crate) mod owned;
mod phase;
mod watch;

pub(crate) use owned::node_commands;
pub use owned::{NodeCommands, OwnedNode, OwnedNodeConfig, OwnedNodeEvent};
pub use watch::{NodeWatch, NodeWatchEvent};

pub(crate) use phase::Run;
