//! A lease held until a time by one holder, renewable by that holder, granted or
//! refused at once (kazoo's `NonBlockingLease`, same nodes, same protocol): for a task
//! that only one host should run in a period ("the hourly cleanup runs on one
//! machine, and fails over if that one dies").
//!
//! # Node format (kazoo's)
//!
//! * `<path>`: the lease's directory (kazoo makes it with `ensure_path`, ours as a
//!   container with its missing ancestors, bounded; the record keeps it).
//! * `<path>/<hex>__lock__<sequence>`: kazoo's `Lock` on `<path>`, taken around every
//!   read and write of the record: `EPHEMERAL_SEQUENTIAL`, `<hex>` a fresh id without
//!   dashes (kazoo's `uuid4().hex`), its data the holder's identifier (UTF-8). Our
//!   [`Lock`](super::lock::Lock) with [`Naming::Kazoo`](super::lock::Naming::Kazoo):
//!   ours and kazoo's exclude each other.
//! * `<path>/lease_holder`: the record, `PERSISTENT`, kazoo's JSON as `json.dumps`
//!   writes it: `{"version": 1, "holder": "<identifier>", "end": "2025-11-30T01:12:45"}`,
//!   the end in naive UTC, whole seconds ([`format_time`]). A record of another
//!   `version` is left alone (kazoo's "let someone else take the lease").
//!
//! # Protocol
//!
//! 1. Take kazoo's lock on `<path>` (the lock's protocol: protected name found again
//!    after a lost reply, `sync` before a recovery listing, no herd). kazoo waits for
//!    it without a limit; so do we (drop the attempt to give up: its node is deleted).
//! 2. Holding it, `sync` then read `<path>/lease_holder` (the `sync` pipelined with
//!    the read: one round trip). The wall clock at that moment is the one given at
//!    [`start`](Lease::start) plus the time elapsed since.
//! 3. Decide as kazoo does: no record, a record of ours (same identifier: a renewal),
//!    or one whose end has passed (`now >= end`) — write ours; a record of another
//!    holder whose end is still ahead, or of another version — refused.
//! 4. Write `{"version": 1, "holder": <ours>, "end": now + duration}`: a `create`, or
//!    (a record was there) one `multi` of `delete(version read)` and `create`, so a
//!    record changed since the read is never overwritten (kazoo deletes and creates
//!    apart; under the lock it comes to the same). A reply lost, a refusal, a changed
//!    record: read again (step 2) — a write of ours that landed reads as ours and is
//!    renewed.
//! 5. Release the lock (delete our lock node); then report the outcome, once:
//!    [`Decided`](LeaseEvent::Decided) with [`Granted`](LeaseOutcome::Granted) (our
//!    end) or [`Refused`](LeaseOutcome::Refused) (the holder and its end), or
//!    [`Failed`](LeaseEvent::Failed).
//!
//! # Guarantees
//!
//! Given holders whose clocks agree, no two holders' leases overlap in time: every
//! decision is made holding kazoo's lock, on the record as of that moment (read behind
//! a `sync`), and written only over that very record (its version). A refusal is never
//! reported as a grant and a grant only once our record is written. Every attempt
//! ends, and our lock node is deleted before the outcome is reported (or goes with
//! the session). `Failed` after the write was sent (the session expired, say) leaves
//! it open whether our record landed: a new attempt with the same identifier renews
//! it either way.
//!
//! # The clock
//!
//! The core has no clock: [`start`](Lease::start) takes the wall clock (UTC, since the
//! Unix epoch; the adapters read `SystemTime`), and the machine adds the time elapsed
//! since. A lease is only as good as the agreement of its holders' clocks — as kazoo's:
//! a holder whose clock runs behind takes a lease that has not ended yet. Ends are
//! whole seconds (kazoo's format), cut down: a lease lasts up to a second less than
//! asked.
//!
//! ```
//! use core::time::Duration;
//! use zk_recipes::recipe::lease::{Lease, LeaseConfig, LeaseEvent, LeaseOutcome};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::proto::{Request, Response, Stat};
//! use zk_recipes::error::Error;
//! use zk_recipes::proto::ErrorCode;
//! use zk_recipes::time::Instant;
//!
//! let config = LeaseConfig::new("/leases/cleanup", Duration::from_secs(3600), "host-1", "6f1c2a4e-0000-4000-8000-000000000001");
//! let mut lease = Lease::new(config);
//! let now = Instant::ZERO;
//! lease.handle_session(now, SessionChange::Connected { session_id: 1 });
//! lease.start(now, Duration::from_secs(1_764_460_800)); // 2025-11-30T00:00:00Z
//! // kazoo's lock: create <hex>__lock__, then its listing.
//! let (create, _) = lease.poll_request().unwrap();
//! let (list, _) = lease.poll_request().unwrap();
//! let name = "6f1c2a4e000040008000000000000001__lock__0000000000";
//! lease.handle_reply(now, create, Ok(Response::PathStat { path: format!("/leases/cleanup/{name}"), stat: Stat { czxid: 5, ..Stat::default() } }));
//! lease.handle_reply(now, list, Ok(Response::Children(vec![name.into()])));
//! // Held: sync, then read the record; there is none.
//! let (sync, _) = lease.poll_request().unwrap();
//! let (read, _) = lease.poll_request().unwrap();
//! lease.handle_reply(now, sync, Ok(Response::Path("/leases/cleanup/lease_holder".into())));
//! lease.handle_reply(now, read, Err(Error::Server(ErrorCode::NoNode)));
//! let (write, Request::Create(c)) = lease.poll_request().unwrap() else { panic!() };
//! assert_eq!(&c.data[..], br#"{"version": 1, "holder": "host-1", "end": "2025-11-30T01:00:00"}"#);
//! lease.handle_reply(now, write, Ok(Response::Path(c.path.clone())));
//! // Then the lock is released, and the outcome reported.
//! let (delete, _) = lease.poll_request().unwrap();
//! lease.handle_reply(now, delete, Ok(Response::Empty));
//! let end = Duration::from_secs(1_764_464_400);
//! assert_eq!(lease.poll_event(), Some(LeaseEvent::Decided(LeaseOutcome::Granted { end })));
//! assert!(lease.is_done());
//! ```

mod machine;
mod record;
mod types;

pub use machine::Lease;
pub use record::{
    decode_record, encode_record, format_time, parse_time, Holder, Record, MAX_END, VERSION,
};
pub use types::{LeaseConfig, LeaseEvent, LeaseOutcome, HOLDER, MAX_IDENTIFIER};
