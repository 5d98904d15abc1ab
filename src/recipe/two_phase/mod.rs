//! Two-phase commit (ZooKeeper recipes "Two-phased Commit"): a coordinator asks a fixed
//! group of sites to vote on a transaction; the transaction commits only if every site
//! votes commit, and every site learns the same outcome — including a site that
//! reconnects late or restarts. Neither Apache Curator nor kazoo has this recipe; the
//! layout below is ours.
//!
//! # Node layout (`<tx>` is the transaction path)
//!
//! | node | kind | written by | data |
//! |---|---|---|---|
//! | `<tx>` | persistent | coordinator creates; the decider writes once | `""` (version 0, undecided), then `commit` or `abort` (version 1) |
//! | `<tx>/payload` | persistent | coordinator | the transaction itself (the coordinator's bytes), never changed |
//! | `<tx>/votes` | persistent | coordinator | the coordinator's unique id (finds a setup whose reply was lost) |
//! | `<tx>/votes/<site>` | persistent | coordinator creates empty; `<site>` writes its vote once | `""` (version 0), then `commit` or `abort` (version 1) |
//! | `<tx>/alive` | persistent | coordinator | empty |
//! | `<tx>/alive/<site>` | **ephemeral** | `<site>` | its presence (failure detection) |
//! | `<tx>/coordinator` | **ephemeral** | coordinator | its presence; deleted once it knows the outcome |
//!
//! The coordinator creates all of it but the presence nodes in **one `multi`**: a site
//! sees either no transaction or a complete one. Missing ancestors of `<tx>` are created
//! as containers first (bounded; a path that cannot be created is [`Error::NoParent`] or
//! [`Error::ChrootMissing`]). The `<tx>` subtree stays after the transaction as its
//! durable record, so a site that comes back days later still learns the outcome; delete
//! it (`delete_all`) when every site is done with it.
//!
//! [`Error::NoParent`]: crate::error::Error::NoParent
//! [`Error::ChrootMissing`]: crate::error::Error::ChrootMissing
//!
//! # Who writes what, and the decision rule
//!
//! * **A vote** is `multi[check(<tx>, version 0), setData(<tx>/votes/<site>, vote,
//!   version 0)]`: written at most once (version 0 → 1, never changed afterwards), and
//!   only while the transaction is undecided.
//! * **The outcome** is `setData(<tx>, outcome, version 0)`: whoever writes first decides,
//!   every later writer gets `BadVersion` and reads the outcome instead. A **commit** is
//!   written in a `multi` together with `check(<tx>/votes/<site>, version 1)` for every
//!   site: the server itself refuses a commit unless every vote is in (and a vote in is
//!   final, and was read as `commit`).
//! * **Decision rule** (the same code for whoever decides): any `abort` vote ⇒ `abort`
//!   at once; every vote `commit` ⇒ `commit`; the coordinator's deadline
//!   ([`CoordinatorConfig::deadline`]) passed and a site that has not voted has no
//!   presence node ⇒ `abort`; an optional hard [`CoordinatorConfig::vote_timeout`] ⇒
//!   `abort`; the coordinator's presence node gone while undecided ⇒ `abort` (decided by
//!   any site: nobody can commit without all votes, so aborting is always safe).
//!
//! # The two variants ([`Variant`])
//!
//! * [`Variant::Coordinator`] — the documents' O(n) variant: only the coordinator
//!   watches the votes (n notifications) and writes the outcome; each site watches only
//!   `<tx>` (n notifications for the outcome).
//! * [`Variant::Peers`] — every site watches every vote (n² notifications) and any site
//!   that sees the rule decide writes the outcome itself, so a transaction is decided
//!   one hop sooner and without the coordinator; the coordinator only waits for the
//!   outcome (and enforces its deadline).
//!
//! In both, every site also holds an `exists` watch on `<tx>/coordinator`.
//!
//! # Failure handling
//!
//! * Lost replies: every write is versioned, so a retry after a lost reply answers
//!   `BadVersion`, and the writer reads what is there (after a `sync`: a reconnect may
//!   land on a lagging follower). A setup whose reply was lost is found again by the
//!   coordinator's id in `<tx>/votes`; a presence node by its `ephemeralOwner`.
//! * A site that crashes keeps its vote (persistent); without one, its presence node
//!   goes with its session, and once the deadline has passed the coordinator aborts.
//!   A site restarted under the same name finds its earlier vote (it cannot vote again).
//! * A coordinator that disappears before deciding (session expired or closed) takes
//!   `<tx>/coordinator` along; the sites then decide `abort`. A coordinator whose
//!   session expires carries on into its next session and also writes `abort`.
//! * Refusals (too many requests pending, throttling) are retried after a backoff;
//!   requests lost with the connection after `Reconnected`.
//!
//! # Events
//!
//! [`Coordinator`]: `Started` (the transaction exists: sites may vote), `Voted` (a
//! site's vote, as the coordinator sees it: always in the O(n) variant), `Decided`
//! (final: the outcome), `Failed` (final). [`Site`]: `Ready` (the transaction and its
//! payload are known, with our earlier vote if we voted before a restart), `Voted` (our
//! vote is written), `Decided` (final: the outcome), `Failed` (final: not a site of
//! this transaction, session closed, no permission). Both machines clean up (delete
//! their presence node) after `Decided` and then end.
//!
//! # A worked example
//!
//! Coordinator `C` starts `/tx/42` with sites `a` and `b`, variant O(n):
//!
//! 1. `C`: `multi[create /tx/42 "", create /tx/42/payload P, create /tx/42/votes <id>,
//!    create /tx/42/votes/a "", create /tx/42/votes/b "", create /tx/42/alive, create
//!    /tx/42/coordinator (ephemeral)]`, then `getData(watch)` on `/tx/42` and both votes.
//! 2. `a` (started earlier, waiting with `exists(watch) /tx/42`) is notified, reads the
//!    payload, its vote node (version 0: not voted), `exists(watch) /tx/42/coordinator`,
//!    creates `/tx/42/alive/a`: `Ready { payload: P }`.
//! 3. `a` votes: `multi[check /tx/42 v0, setData /tx/42/votes/a "commit" v0]` → `Voted`.
//!    `C` is notified, reads `commit`. `b` votes `commit` too.
//! 4. `C`: `multi[check /tx/42/votes/a v1, check /tx/42/votes/b v1, setData /tx/42
//!    "commit" v0]` → `Decided { Commit }`; deletes `/tx/42/coordinator`.
//! 5. `a` and `b` are notified on `/tx/42`, read `commit` (version 1): `Decided { Commit }`;
//!    each deletes its presence node. Had `b` crashed before voting, after the deadline
//!    `C` would have listed `/tx/42/alive`, found no `b`, and written `abort`.
//!
//! ```
//! use zk_recipes::recipe::two_phase::{Coordinator, CoordinatorConfig, Site, SiteConfig, Variant};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::time::Instant;
//!
//! let config = CoordinatorConfig::new("/tx/42", &["a", "b"], Variant::Coordinator, (1, 2));
//! let mut c = Coordinator::new(config);
//! c.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! c.start(Instant::ZERO);
//! let (_, setup) = c.poll_request().unwrap(); // the one multi that creates everything
//! assert_eq!(setup.op_code(), zk_recipes::proto::OpCode::Multi);
//!
//! let mut a = Site::new(SiteConfig::new("/tx/42", "a", Variant::Coordinator));
//! a.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 8 });
//! a.start(Instant::ZERO);
//! let (_, read) = a.poll_request().unwrap(); // getData(watch) /tx/42, then the rest
//! assert_eq!(read.op_code(), zk_recipes::proto::OpCode::GetData);
//! ```
//!
//! # The machines' parts
//!
//! The states as types of both machines are in `phase` (its module docs have the
//! before/after tables of the flags they replaced); `coordinator` and `site` drive
//! them; the outcome's write and the reading of its answer are written once, in `types`
//! (with the node names and the votes; this module re-exports the public ones).

mod coordinator;
mod phase;
mod site;
mod types;

pub use coordinator::{Coordinator, CoordinatorConfig, CoordinatorEvent};
pub use site::{Site, SiteConfig, SiteEvent, SiteStatus, VoteOutcome};
pub use types::{
    alive_dir, alive_path, coordinator_path, payload_path, vote_path, votes_dir, Outcome, Variant,
    Vote, ABORT, COMMIT, MAX_SITES,
};
