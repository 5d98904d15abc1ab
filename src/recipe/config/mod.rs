//! Configuration: several nodes read and written as one (the paper's "configuration
//! management" with its *ready* node, and the same over `multi`).
//!
//! A configuration is a fixed list of node paths. A [`ConfigWriter`] writes new values
//! to all of them; a [`ConfigReader`] reports [`Snapshot`](ReaderEvent::Snapshot)s that
//! never mix two writes. Two protocols ([`ConfigMode`]):
//!
//! # [`ConfigMode::ReadyNode`]: the paper's protocol
//!
//! Interoperable with processes that follow it by hand.
//!
//! **Writer** ([`ConfigWriter`]), three pipelined batches (three round trips, however
//! many nodes):
//!
//! 1. `delete(<ready>)` (`NoNode` is fine), alone: every node write must come after it
//!    on the server, and a refused request does not refuse the ones behind it, so the
//!    writes wait for its reply.
//! 2. `setData(<node>, value, -1)` for every node, back to back without waiting (the
//!    paper: 5,000 parameters pipelined in under a second). A node that is missing
//!    (`NoNode`) is created in the next batch (its missing ancestors as containers,
//!    at most twice); one created meanwhile by someone else (`NodeExists`) is set.
//! 3. `create(<ready>)` (persistent, empty; ancestors as containers if missing), once
//!    every node is known written: `ready` never exists over a half-written
//!    configuration. `NodeExists` is fine.
//!
//! Lost replies: the writes are unconditional sets, so resending is safe. After a lost
//! connection (or an expiry and a new session) the writer starts again with
//! `delete(<ready>)`, then resends every write not known to be applied, then creates
//! `ready`: `ready` always comes back last. A failed write (`NoAuth`, session closed)
//! may leave `ready` deleted: readers then report [`NotReady`](ReaderEvent::NotReady),
//! never a half-written configuration.
//!
//! **Reader** ([`ConfigReader`]), one round trip per round: `exists(<ready>, watch)`
//! then `getData(<node>, watch)` for every node, pipelined (`sync(<ready>)` first when
//! [`ReaderConfig::sync_first`] is set or after a reconnect). ZooKeeper delivers a
//! notification before any reply that reflects the change, so:
//!
//! * `ready` exists and no notification (of `ready` or of a node) arrived before the
//!   round's last reply: every value read is the value at the time of the last read,
//!   while `ready` existed — one complete configuration:
//!   [`Snapshot`](ReaderEvent::Snapshot).
//! * `ready` is missing: [`NotReady`](ReaderEvent::NotReady), and the `exists` watch
//!   waits for its creation; then a new round.
//! * A notification arrived during the round: what was read is discarded and the round
//!   is done again (a deletion of `ready` is reported as `NotReady` at once).
//! * A node changes while `ready` exists (a writer in the `multi` mode): a new round,
//!   a new `Snapshot`.
//!
//! Each node carries at most one watch registration of the reader at a time: a node
//! whose watch is armed is read without one; a node last seen missing is watched with
//! `exists(<node>, watch)` pipelined before its `getData` (a `getData` that finds no
//! node sets no watch, so the round is done again).
//!
//! # [`ConfigMode::Multi`]: one transaction (ZooKeeper 3.4+ to write, 3.6+ to read)
//!
//! **Writer**: one `multi` holding a `setData` (or `create`, for a node found missing)
//! for every node: the server applies it at one point of its order, all or nothing.
//! One request must fit the server's `jute.maxbuffer` (about 1 MB by default), so a
//! write larger than [`WriterConfig::max_multi_bytes`] is refused up front with
//! [`Error::TooLarge`](crate::error::Error::TooLarge). A failed `multi` (`NoNode`: a node is missing; `NodeExists`:
//! created meanwhile) is followed by `exists` of every node and a new `multi` (at most
//! four). A lost reply: the `multi` is sent again (sets are idempotent; a create that
//! was applied fails the `multi`, and the next one sets).
//!
//! **Reader**: `exists(<node>, watch)` for every node not watched yet, then one
//! `multiRead` of all nodes (ZooKeeper 3.6+): one request, served at one point of the
//! server's order, so it can never see half of a `multi`. Any notification leads to
//! another round.
//!
//! # Which reader a writer needs
//!
//! | writer \ reader | `ReadyNode` reader | `Multi` reader |
//! |---|---|---|
//! | `ReadyNode` writer | safe | **unsafe**: a `multiRead` may land between two sets |
//! | `Multi` writer | safe if `ready` exists (create it once) | safe |
//!
//! A `ReadyNode` reader is safe with both writers (the notification rule above catches
//! a `multi` that lands during a round); a `Multi` reader only with a `Multi` writer.
//! Either way, writers must not write concurrently (use a lock).
//!
//! # Example (sans-IO: the host sends the requests and feeds the replies back)
//!
//! ```
//! use zk_recipes::proto::{ErrorCode, Request, Response};
//! use zk_recipes::recipe::config::{ConfigWriter, WriterConfig, WriterEvent};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::time::Instant;
//! use zk_recipes::client::Error;
//!
//! let t = Instant::ZERO;
//! let update = vec![("/app/db".to_string(), bytes::Bytes::from("10.0.0.7"))];
//! let mut w = ConfigWriter::new(WriterConfig::ready_node("/app/ready"), update);
//! w.handle_session(t, SessionChange::Connected { session_id: 1 });
//! w.start(t);
//! let (op, req) = w.poll_request().unwrap();
//! assert!(matches!(req, Request::Delete(_))); // 1. delete ready
//! w.handle_reply(t, op, Err(Error::Server(ErrorCode::NoNode)));
//! let (op, req) = w.poll_request().unwrap();
//! assert!(matches!(req, Request::SetData(_))); // 2. every node, pipelined
//! w.handle_reply(t, op, Ok(Response::Stat(Default::default())));
//! let (op, req) = w.poll_request().unwrap();
//! assert!(matches!(req, Request::Create(_))); // 3. ready, last
//! w.handle_reply(t, op, Ok(Response::Path("/app/ready".into())));
//! assert_eq!(w.poll_event(), Some(WriterEvent::Written));
//! ```
//!
//! # Session semantics
//!
//! Reader: after a reconnect, `sync` and a new round (nothing written while away is
//! missed); after an expiry and a new session, it starts over (new watches);
//! `Closed` ends it with `Failed(Error::Closed)`. Writer: resumes after a reconnect or
//! a new session as described; `Closed` ends it with `Failed(Error::Closed)`.

mod mode;
mod reader;
mod writer;

pub use mode::ConfigMode;
pub use reader::{ConfigReader, ConfigSnapshot, ReaderConfig, ReaderEvent};
pub use writer::{ConfigWriter, WriterConfig, WriterEvent};
