//! Paths: creating a node with its missing parents and deleting a subtree, as small
//! recipes (Curator's `creatingParentsIfNeeded` / `deletingChildrenIfNeeded`, kazoo's
//! `ensure_path` / `delete(recursive=True)`), and the parent-creation helpers every
//! recipe that needs a directory uses.
//!
//! # Create with parents ([`CreateAll`])
//!
//! 1. Every ancestor is created top down (persistent, or container), then the node, in
//!    one pipeline: one round trip. `NodeExists` on an ancestor is fine.
//! 2. An ancestor that cannot be created ends the call with [`Error::NoParent`] naming
//!    it, or [`Error::ChrootMissing`] when the missing node is the chroot itself.
//! 3. A refusal (too many requests pending, throttled) is retried after a backoff. A
//!    lost connection is reported as `ConnectionLoss`, as for a plain create (the node
//!    may or may not exist).
//!
//! # Delete a subtree ([`DeleteAll`])
//!
//! 1. List the node, then every child, level by level (each level pipelined).
//! 2. Delete deepest first, in one pipeline (the server applies them in order).
//! 3. A node someone added meanwhile (`NotEmpty`) starts another round, at most
//!    [`DeleteAll::MAX_ROUNDS`]; connection loss and refusals are retried.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::kit::{protocol_head, valid_path, Kit, Protocol, Reply};
use super::{OpId, SessionChange};
use crate::client::ops::{create2, CreateOptions};
use crate::error::Error;
use crate::proto::*;
use crate::time::Instant;

pub use super::kit::{ancestor_creates, ancestor_result, ancestors};

fn is_refusal(e: &Error) -> bool {
    matches!(e, Error::Overloaded | Error::Server(ErrorCode::Throttled))
}

/// What a one-shot path call ([`CreateAll`], [`DeleteAll`]) keeps besides its own
/// data: its kit, whether it started and ended, and whether its round goes again
/// (refused, or lost with its connection: after the backoff, once the round's replies
/// are in).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Call<P, E> {
    kit: Kit<P, E>,
    again: bool,
    started: bool,
    done: bool,
}

impl<P, E> Default for Call<P, E> {
    fn default() -> Self {
        Call {
            kit: Kit::default(),
            again: false,
            started: false,
            done: false,
        }
    }
}

impl<P, E> Call<P, E> {
    /// Starts it: `false` if it had started already.
    fn start(&mut self) -> bool {
        !core::mem::replace(&mut self.started, true)
    }

    /// Ends it with `event` (the first end only).
    fn finish(&mut self, event: E) {
        self.kit.end(&mut self.done, true, event);
    }

    /// Follows a session change: the session's end ends the call (`failed` makes the
    /// event of its error), and an ended call forgets its requests. Does it go on?
    fn session(&mut self, change: SessionChange, failed: impl FnOnce(Error) -> E) -> bool {
        if let Some(e) = change.end_error() {
            self.finish(failed(e));
        }
        if self.done {
            self.kit.clear_requests();
        }
        !self.done
    }

    /// Does the round go again now (the backoff is over and the last round's replies
    /// are in)? Then it waits no more.
    fn due(&mut self, now: Instant) -> bool {
        let due = self.again && !self.done && self.kit.is_quiet() && self.kit.allows(now);
        if due {
            self.again = false;
        }
        due
    }

    /// [`Protocol::deadline`]: the end of the backoff while a round waits.
    fn deadline(&self) -> Option<Instant> {
        self.kit.timeout(None, self.again && !self.done)
    }

    /// [`Protocol::finished`].
    fn finished(&self) -> bool {
        self.done && self.kit.is_idle()
    }
}

/// The [`Protocol`] of a one-shot path call `$call` on its [`Call`]: a session's end
/// ends it (`$failed` makes the event of the error); a round that goes again is sent
/// by `$send(now)` when due; the owner going away leaves the call to complete or not
/// (nothing to undo).
macro_rules! call_protocol {
    ($call:ty, $event:ty, $failed:expr, $send:ident) => {
        impl Protocol for $call {
            protocol_head!($event, take, call.kit);

            fn on_session(&mut self, now: Instant, change: SessionChange) {
                if self.call.session(change, $failed) {
                    self.on_timeout(now);
                }
            }

            fn on_timeout(&mut self, now: Instant) {
                if self.call.due(now) {
                    self.$send(now);
                }
            }

            fn on_abandon(&mut self, _: Instant) {
                self.call.done = true;
            }

            fn deadline(&self) -> Option<Instant> {
                self.call.deadline()
            }

            fn finished(&self) -> bool {
                self.call.finished()
            }
        }
    };
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Step {
    Parent(String),
    Node,
}

/// Creates a node and any missing parents; see the [module docs](self). Reports one
/// [`CreateAllEvent`].
///
/// ```
/// use zk_recipes::recipe::path::CreateAll;
/// use zk_recipes::recipe::{Machine, Recipe};
/// use zk_recipes::client::ops::CreateOptions;
/// use zk_recipes::time::Instant;
/// let mut c = CreateAll::new("/a/b/c", "x".into(), CreateOptions::default());
/// c.start(Instant::ZERO);
/// let sent: Vec<_> = std::iter::from_fn(|| c.poll_request()).collect();
/// assert_eq!(sent.len(), 3); // /a, /a/b, then /a/b/c: one round trip
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CreateAll {
    path: String,
    data: Bytes,
    options: CreateOptions,
    parents: CreateMode,
    call: Call<Step, CreateAllEvent>,
    parent_error: Option<Error>,
}

/// The outcome of a [`CreateAll`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CreateAllEvent {
    /// Created: the node's final path (with any sequence suffix) and Stat.
    Created {
        /// The path.
        path: String,
        /// Its Stat.
        stat: Stat,
    },
    /// Not created.
    Failed(Error),
}

impl CreateAll {
    /// Creates `path` with `data` as `options` say; missing ancestors become
    /// persistent nodes with the same ACL.
    pub fn new(path: &str, data: Bytes, options: CreateOptions) -> Self {
        CreateAll {
            path: path.into(),
            data,
            options,
            parents: CreateMode::Persistent,
            call: Call::default(),
            parent_error: None,
        }
    }

    /// Create missing ancestors as containers instead (deleted by the server once
    /// empty).
    pub fn parent_containers(mut self) -> Self {
        self.parents = CreateMode::Container;
        self
    }

    /// Starts (once).
    pub fn start(&mut self, now: Instant) {
        if !self.call.start() {
            return;
        }
        if let Err(e) = valid_path(&self.path) {
            return self.finish(CreateAllEvent::Failed(e));
        }
        self.send(now);
    }

    fn send(&mut self, _now: Instant) {
        self.parent_error = None;
        for (p, req) in ancestor_creates(&self.path, &self.options.acl, self.parents) {
            self.call.kit.send(Step::Parent(p), req);
        }
        let request = create2(&self.path, self.data.clone(), &self.options);
        self.call.kit.send(Step::Node, request);
    }

    fn finish(&mut self, event: CreateAllEvent) {
        self.call.finish(event);
    }
}

impl CreateAll {
    /// The answer to request `op`, sent for `step` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, step: Step, result: Reply) {
        if self.call.done {
            return;
        }
        match step {
            Step::Parent(p) => {
                if let Some(e) = ancestor_result(&p, &result) {
                    if is_refusal(&e) {
                        self.call.again = true;
                    } else if self.parent_error.is_none() {
                        self.parent_error = Some(e);
                    }
                }
            }
            Step::Node => match result {
                Ok(Response::PathStat { path, stat }) => {
                    self.finish(CreateAllEvent::Created { path, stat })
                }
                Ok(Response::Path(path)) => self.finish(CreateAllEvent::Created {
                    path,
                    stat: Stat::default(),
                }),
                Ok(_) => self.finish(CreateAllEvent::Failed(Error::UnexpectedReply)),
                Err(e)
                    if is_refusal(&e)
                        || (self.call.again && e == Error::Server(ErrorCode::NoNode)) =>
                {
                    // Never applied: try the whole pipeline again after a backoff.
                    self.call.again = true;
                    self.call.kit.failed(now);
                }
                Err(Error::Server(ErrorCode::NoNode)) => {
                    let e = match self.parent_error.take() {
                        Some(e) => e,
                        None if parent(&self.path) == Some("/") => Error::ChrootMissing,
                        None => Error::Server(ErrorCode::NoNode),
                    };
                    self.finish(CreateAllEvent::Failed(e))
                }
                Err(e) => self.finish(CreateAllEvent::Failed(e)),
            },
        }
    }
}

call_protocol!(CreateAll, CreateAllEvent, CreateAllEvent::Failed, send);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Del {
    List(String, usize),
    Delete(String),
}

/// Deletes a node and everything below it; see the [module docs](self). Reports one
/// `Result<(), Error>`: `Err(Server(NoNode))` if the node did not exist at the start.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeleteAll {
    root: String,
    call: Call<Del, Result<(), Error>>,
    /// (depth, path) of every node found in this round.
    found: Vec<(usize, String)>,
    round: u32,
    /// The root was listed once: a later `NoNode` on it means it went (deleted by us
    /// with a lost reply, or by someone else), not that it never was.
    root_seen: bool,
    failed: Option<Error>,
}

impl DeleteAll {
    /// Rounds (someone keeps adding children) before giving up with `NotEmpty`.
    pub const MAX_ROUNDS: u32 = 8;

    /// Deletes `root` and its subtree.
    pub fn new(root: &str) -> Self {
        DeleteAll {
            root: root.into(),
            call: Call::default(),
            found: Vec::new(),
            round: 0,
            root_seen: false,
            failed: None,
        }
    }

    /// Starts (once).
    pub fn start(&mut self, now: Instant) {
        if !self.call.start() {
            return;
        }
        match valid_path(&self.root) {
            Err(e) => self.finish(Err(e)),
            Ok(()) if self.root == "/" => self.finish(Err(Error::Server(ErrorCode::BadArguments))),
            Ok(()) => self.begin(now),
        }
    }

    fn begin(&mut self, _now: Instant) {
        self.round += 1;
        self.found.clear();
        self.found.push((0, self.root.clone()));
        let root = self.root.clone();
        self.list(root, 0);
    }

    fn list(&mut self, path: String, depth: usize) {
        let req = Request::GetChildren(PathWatch {
            path: path.clone(),
            watch: false,
        });
        self.call.kit.send(Del::List(path, depth), req);
    }

    fn finish(&mut self, result: Result<(), Error>) {
        self.call.finish(result);
    }

    /// A retryable failure: start the round again once allowed.
    fn again(&mut self, now: Instant) {
        if !self.call.again {
            self.call.again = true;
            self.call.kit.failed(now);
        }
    }

    fn lists_done(&mut self) {
        if self.call.kit.any(|d| matches!(d, Del::List(..))) || self.call.again || self.call.done {
            return;
        }
        if let Some(e) = self.failed.take() {
            return self.finish(Err(e));
        }
        if self.found.is_empty() {
            return self.finish(Ok(())); // someone else deleted it all
        }
        // Deepest first; the server applies one session's requests in order.
        self.found
            .sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (_, path) in core::mem::take(&mut self.found) {
            let req = Request::Delete(DeleteRequest {
                path: path.clone(),
                version: -1,
            });
            self.call.kit.send(Del::Delete(path), req);
        }
    }
}

impl DeleteAll {
    /// The answer to request `op`, sent for `step` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, step: Del, result: Reply) {
        if self.call.done {
            return;
        }
        match (step, result) {
            (Del::List(path, depth), Ok(Response::Children(kids))) => {
                self.root_seen |= path == self.root;
                for k in kids {
                    let child = if path == "/" {
                        alloc::format!("/{k}")
                    } else {
                        alloc::format!("{path}/{k}")
                    };
                    self.found.push((depth + 1, child.clone()));
                    self.list(child, depth + 1);
                }
                self.lists_done();
            }
            (Del::List(path, _), Err(Error::Server(ErrorCode::NoNode))) => {
                if path == self.root && !self.root_seen {
                    return self.finish(Err(Error::Server(ErrorCode::NoNode)));
                }
                self.found.retain(|(_, p)| *p != path);
                self.lists_done();
            }
            (Del::Delete(path), Ok(_))
            | (Del::Delete(path), Err(Error::Server(ErrorCode::NoNode))) => {
                self.call.kit.succeeded();
                if path == self.root && !self.call.again {
                    self.finish(Ok(()));
                }
            }
            (Del::Delete(_), Err(Error::Server(ErrorCode::NotEmpty))) => {
                if self.round >= Self::MAX_ROUNDS {
                    self.finish(Err(Error::Server(ErrorCode::NotEmpty)));
                } else {
                    self.call.again = true; // start over as soon as the pipeline drained
                }
            }
            (_, Err(e)) if e.is_retryable() => self.again(now),
            (_, Err(e)) => {
                self.failed.get_or_insert(e.clone());
                if self.call.kit.is_quiet() {
                    self.finish(Err(e));
                }
            }
            (_, Ok(_)) => self.finish(Err(Error::UnexpectedReply)),
        }
        self.on_timeout(now);
    }
}

call_protocol!(DeleteAll, Result<(), Error>, Err, begin);
