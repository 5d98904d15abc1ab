//! Versioned compare-and-set updates of one node ([`Update`]: the paper's "read, compute,
//! `setData` with the version read, retry on `BadVersion`") and a shared counter built on
//! them ([`Counter`]: Curator's `SharedCount` and `DistributedAtomicLong` formats), and a
//! watched counter ([`CounterWatch`]: every new value, decoded in the same formats).
//!
//! # [`Update`]: one compare-and-set update of one node
//!
//! 1. [`start`](Update::start) sends `getData(<path>)` — preceded by `sync(<path>)` when
//!    [`UpdateConfig::sync_first`] is set (the paper's read after an out-of-band notice:
//!    "I changed it" heard on another channel must not be answered from a lagging
//!    follower).
//! 2. The node's value is reported as [`Current`](UpdateEvent::Current) (`None` = the
//!    node does not exist). The user answers with [`propose`](Update::propose):
//!    [`Proposal::Set`] with the new data, or [`Proposal::Keep`] to give up
//!    ([`Kept`](UpdateEvent::Kept), nothing written).
//! 3. `setData(<path>, data, version read)`; for a missing node (when
//!    [`UpdateConfig::create_if_missing`] is on) `create2(<path>, data)` (persistent;
//!    missing ancestors are created as containers first, in the same pipeline, at most
//!    twice, as `OwnedNode` does). Success: [`Updated`](UpdateEvent::Updated).
//! 4. `BadVersion` (someone wrote since our read), `NoNode` (deleted since) or
//!    `NodeExists` (created since): a lost race. Read again and report `Current` again
//!    — the user's function runs again on the fresh value. That is the retry loop. (No
//!    `sync` is needed: the server that answered `BadVersion` has applied the write that
//!    beat us, and our next read goes to it after that answer.) The read waits first:
//!    after the n-th race lost in a row, a delay drawn in `[span / 2, span]` with
//!    `span` = min(this round's duration (read sent → write answered) × 2^min(n, 5),
//!    250 ms), drawn from [`UpdateConfig::seed`], the session id and the draw count.
//!    Writers that collided read again at spread-out times instead of all at once
//!    (and collide again); the wait scales with the server's latency and grows while
//!    the node stays contended.
//! 5. A refusal (`Overloaded`, `Throttled`: never applied) sends the same request again
//!    after the [`Retry`](crate::recipe::Retry) backoff; a read that failed is read again (after `sync`).
//!
//! # A write whose reply was lost
//!
//! When the connection drops (or the session ends) while our `setData`/`create` is in
//! flight, it may or may not have been applied. After the session is back the machine
//! sends `sync` + `getData` (the sync makes the read see everything our old connection
//! got applied: ZooKeeper fails requests of a session that moved away from its server,
//! so nothing of ours is applied after the move) and decides:
//!
//! * The node has exactly the version (and `czxid`) we wrote against — or, for a create,
//!   is still missing: ours was **not** applied (a node's version never goes back). The
//!   loop goes on: `Current` again, as after `BadVersion`. (A create that was applied and
//!   then deleted by someone else looks the same; the node does not hold our data either
//!   way, and the function runs again on "missing".)
//! * The node is at the version after ours, same `czxid`, holding exactly the bytes we
//!   proposed (version 0 and our bytes for a create), and
//!   [`UpdateConfig::confirm_by_data`] is on (the default): `Updated`. The node holds what
//!   the function proposed on top of the value it was given. A second writer that read
//!   the same value and proposed the same bytes cannot be told apart from us; that is
//!   harmless for a value but not for counting, so [`Counter`] turns this off.
//! * Anything else: the outcome cannot be known. The update ends with
//!   [`Failed`](UpdateEvent::Failed) and an error whose
//!   [`may_have_applied`](crate::error::Error::may_have_applied) is true (`ConnectionLoss`). Running the
//!   function again on the fresh value could apply it twice, so the machine never does.
//!
//! So `Updated` always means the node holds our proposal at the version after the one we
//! read; a `Failed` whose error does not say `may_have_applied` means nothing of ours was
//! written; and the function is never applied twice.
//!
//! # Session semantics
//!
//! Suspended: the machine waits for `Reconnected`. An expired session is not an end (the
//! node is persistent): the machine waits for the next `Connected` and goes on (a write
//! in flight at the expiry is verified as above). `Closed` ends it with `Failed`
//! (`ConnectionLoss` if a write of ours is in doubt, else `Closed`).
//!
//! # [`Counter`]: a shared counter
//!
//! [`add`](Counter::add) is an [`Update`] whose function is "parse, add, encode"
//! (one update at a time, in the order asked): a missing node counts as 0 and is created;
//! [`Added`](CounterEvent::Added) reports the value before and after. [`get`](Counter::get)
//! is an update that keeps the value ([`Value`](CounterEvent::Value)).
//!
//! A burst of adds: an add asked within one round (as measured by the last write) of
//! our last write's answer, with no session change since, does not read: it writes
//! against the data and version that write left (`setData(v)`), one request instead of
//! two. If anyone wrote meanwhile that is a lost race (`BadVersion`): wait, read, write,
//! as above. A get always reads. (As with every compare-and-set on a version, a node
//! deleted and re-created up to the same version in between cannot be told apart; the
//! window is one round.) Under contention the writer that just won keeps writing at one
//! request per add while the ones that lost wait: 8 sessions × 100 adds on one node
//! cost 1.3 requests per add (`cargo bench --bench counter`), where reading again at
//! once cost 8.8.
//!
//! The node formats, the ones Curator writes:
//!
//! * [`CounterFormat::I32`]: 4-byte big-endian two's-complement `int`, Curator's
//!   `SharedCount` (`curator-recipes/.../shared/SharedCount.java`: `toBytes` is
//!   `ByteBuffer.wrap(new byte[4]).putInt(value)`, `fromBytes` is `getInt()`; Java's
//!   `ByteBuffer` is big-endian by default).
//! * [`CounterFormat::I64`]: 8-byte big-endian `long`, Curator's `DistributedAtomicLong`
//!   (`.../atomic/DistributedAtomicLong.java`: `valueToBytes` is `putLong` into 8 bytes;
//!   `bytesToValue` reads a missing or empty node as 0 and reports a short one as
//!   corrupt; `add` computes `previous + delta` in a `MakeValue` handed to
//!   `DistributedAtomicValue`'s compare-and-set loop).
//!
//! Empty data counts as 0 in both formats (a node made by an "ensure path" helper); any
//! other length ends that operation with [`Failed`](CounterEvent::Failed) carrying
//! [`Error::BadCounter`](crate::error::Error::BadCounter), and nothing is written (Curator would read the first bytes of a
//! longer node; we refuse to guess). An add whose result leaves the format's range
//! ends with `Failed` carrying [`Error::CounterOverflow`](crate::error::Error::CounterOverflow), and nothing is written (Java's
//! arithmetic would wrap silently, `i32::MAX + 1` becoming `i32::MIN`); an `I32` delta
//! outside `i32` is refused (`BadArguments`).
//!
//! Counting guarantee: every `Added` is exactly one applied increment (the counter's
//! updates never trust same-bytes confirmation, see above), and every applied increment
//! is reported `Added` or `Failed` with a `may_have_applied` error. So, without other
//! writers, the node's value is the sum of the `Added` deltas plus some of the deltas
//! whose `Failed` says `may_have_applied`. Curator's `DistributedAtomicValue.tryOnce`
//! (read, `makeFrom`, `setData().withVersion(v)`) treats `BadVersion` and `NodeExists` as
//! a lost race and tries again; the framework retries a `setData` whose connection was
//! lost, and if the lost attempt was applied the retry answers `BadVersion`, so the
//! increment is applied a second time. Here a lost reply is verified instead, and an
//! increment is never applied twice.
//!
//! ```
//! use zk_recipes::recipe::value::{Counter, CounterEvent, CounterFormat};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::proto::{Response, Stat};
//! use zk_recipes::time::Instant;
//! let t = Instant::ZERO;
//! let mut c = Counter::new("/hits", CounterFormat::I32);
//! c.handle_session(t, SessionChange::Connected { session_id: 1 });
//! c.add(t, 5);
//! let (read, _) = c.poll_request().unwrap(); // getData /hits
//! let data = CounterFormat::I32.encode(37);
//! c.handle_reply(t, read, Ok(Response::Data { data, stat: Stat::default() }));
//! let (set, _) = c.poll_request().unwrap(); // setData /hits 42, version 0
//! c.handle_reply(t, set, Ok(Response::Stat(Stat { version: 1, ..Stat::default() })));
//! assert!(matches!(c.poll_event(), Some(CounterEvent::Added { before: 37, after: 42, .. })));
//! ```

mod counter;
mod update;
mod watch;

pub use counter::{counter_value, Counter, CounterEvent, CounterFormat};
pub use update::{Proposal, Update, UpdateConfig, UpdateEvent};
pub use watch::{CounterWatch, CounterWatchEvent};
