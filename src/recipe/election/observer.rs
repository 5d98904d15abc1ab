//! Watching an election without standing in it: the current leader, the participants
//! in order (Curator's `LeaderLatch.getParticipants`, kazoo's `contenders()`), the
//! leader's acknowledgement, and a stream of leader changes.
//!
//! # Protocol
//!
//! `getChildren(<dir>, watch)`; the contenders are sorted as candidates sort them (by
//! the sequence after the last known marker; other children ignored). Each new
//! contender's node is read once (`getData`: participant id, and its creation zxid,
//! the leadership's fencing token); the lowest is the leader. The acknowledgement
//! directory is listed with a watch (or followed with `exists(watch)` while it is
//! missing): the leader has acknowledged when `<ack_dir>/<its token>` is in it (see
//! [`ack_node`](super::ack_node)). A missing directory is an empty
//! election (followed with `exists(watch)` until it appears). Watches the session re-arms
//! on a reconnect report what changed while away; a request lost with the connection is
//! sent again after `Reconnected`, everything after a new session.
//!
//! Events: [`ObserverEvent::Leader`] once the first listing is read, then whenever the
//! leader changes (`None`: nobody leads),
//! [`ObserverEvent::Acknowledged`] when the current leader's acknowledgement appears,
//! `Failed` (final: no permission, invalid path) and `Closed` (final).

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;

use super::super::{contender, OpId, Outbox, Recipe, Retry, SessionChange};
use super::{default_ack_dir, parse_ack_node};
use crate::error::Error;
use crate::proto::*;
use crate::session::WatchEvent;
use crate::time::Instant;

/// One candidate, as observers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Participant {
    /// Its participant id (its node's data).
    pub id: String,
    /// Its node's name.
    pub node: String,
    /// Its node's creation zxid: the fencing token it leads with.
    pub fencing_token: i64,
}

/// What an observer reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObserverEvent {
    /// The leader changed (`None`: no candidate).
    Leader(Option<Participant>),
    /// The current leader acknowledged (executed its leader procedure).
    Acknowledged(Participant),
    /// Cannot observe (no permission, invalid path). Final.
    Failed {
        /// Why.
        error: Error,
    },
    /// Closed (or the session ended). Final.
    Closed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Purpose {
    List,
    DirExists,
    Read(String),
    Ack,
    AckExists,
}

const LIST: u8 = 1;
const ACK: u8 = 2;

/// The observer state machine. See the [module docs](self).
#[derive(Debug)]
pub struct Observer {
    dir: String,
    ack_dir: String,
    started: bool,
    ended: bool,
    /// Contender names in election order, from the last listing.
    order: Vec<String>,
    /// What we read of them: name → participant.
    known: BTreeMap<String, Participant>,
    /// Contenders to read, and contenders being read.
    unread: BTreeSet<String>,
    reading: BTreeSet<String>,
    leader: Option<Participant>,
    /// The tokens in the acknowledgement directory.
    acks: BTreeSet<i64>,
    acked: Option<i64>,
    /// A listing has been answered, and its leader reported.
    listed: bool,
    reported: bool,
    need: u8,
    retry: Retry,
    outbox: Outbox<Purpose>,
    events: VecDeque<ObserverEvent>,
}

impl Observer {
    /// An observer of the election in `dir`, with the default acknowledgement
    /// directory.
    pub fn new(dir: &str) -> Observer {
        Observer::with_ack_dir(dir, &default_ack_dir(dir))
    }

    /// An observer of the election in `dir` whose leaders acknowledge in `ack_dir`.
    pub fn with_ack_dir(dir: &str, ack_dir: &str) -> Observer {
        Observer {
            dir: dir.trim_end_matches('/').into(),
            ack_dir: ack_dir.trim_end_matches('/').into(),
            started: false,
            ended: false,
            order: Vec::new(),
            known: BTreeMap::new(),
            unread: BTreeSet::new(),
            reading: BTreeSet::new(),
            leader: None,
            acks: BTreeSet::new(),
            acked: None,
            listed: false,
            reported: false,
            need: 0,
            retry: Retry::default(),
            outbox: Outbox::default(),
            events: VecDeque::new(),
        }
    }

    /// Starts observing.
    pub fn start(&mut self, now: Instant) {
        if self.started || self.ended {
            return;
        }
        self.started = true;
        for path in [self.dir.clone(), self.ack_dir.clone()] {
            if let Err(error) = validate_path(&path) {
                self.end(Some(Error::InvalidPath { path, error }));
                return;
            }
        }
        self.need = LIST | ACK;
        self.drive(now);
    }

    /// Stops observing; `Closed` follows.
    pub fn close(&mut self, _now: Instant) {
        self.end(None);
    }

    /// The current leader, as of the last listing.
    pub fn leader(&self) -> Option<&Participant> {
        self.leader.as_ref()
    }

    /// The participants in election order (the leader first), as far as read.
    pub fn participants(&self) -> Vec<Participant> {
        self.order
            .iter()
            .filter_map(|n| self.known.get(n).cloned())
            .collect()
    }

    /// The acknowledged leader: the current leader, if its acknowledgement is written.
    pub fn acknowledged(&self) -> Option<&Participant> {
        self.leader
            .as_ref()
            .filter(|l| self.acks.contains(&l.fencing_token))
    }

    fn end(&mut self, error: Option<Error>) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.need = 0;
        self.events.push_back(match error {
            Some(error) => ObserverEvent::Failed { error },
            None => ObserverEvent::Closed,
        });
    }

    fn child(&self, name: &str) -> String {
        let mut s = self.dir.clone();
        s.push('/');
        s.push_str(name);
        s
    }

    fn drive(&mut self, now: Instant) {
        if self.ended || !self.retry.allows(now) {
            return;
        }
        if self.need & LIST != 0 && !self.outbox.any(|p| *p == Purpose::List) {
            self.need &= !LIST;
            let path = self.dir.clone();
            self.outbox.send(
                Purpose::List,
                Request::GetChildren(PathWatch { path, watch: true }),
            );
        }
        if self.need & ACK != 0 && !self.outbox.any(|p| *p == Purpose::Ack) {
            self.need &= !ACK;
            let path = self.ack_dir.clone();
            self.outbox.send(
                Purpose::Ack,
                Request::GetChildren(PathWatch { path, watch: true }),
            );
        }
        for name in core::mem::take(&mut self.unread) {
            let path = self.child(&name);
            self.reading.insert(name.clone());
            self.outbox.send(
                Purpose::Read(name),
                Request::GetData(PathWatch { path, watch: false }),
            );
        }
    }

    /// Recomputes the leader from the order and what we know; reports a change.
    fn update(&mut self) {
        // The leader is the first contender, once read (a node that vanished before we
        // read it is skipped: the next listing drops it).
        let first = self.order.first();
        let leader = first.and_then(|n| self.known.get(n).cloned());
        // The first contender is not read yet: wait for it rather than report a gap.
        let waiting = first.is_some() && leader.is_none();
        if (leader != self.leader || !self.reported) && self.listed && !waiting {
            self.reported = true;
            self.leader = leader.clone();
            self.events.push_back(ObserverEvent::Leader(leader));
        }
        if let Some(l) = self.acknowledged().cloned() {
            if self.acked != Some(l.fencing_token) {
                self.acked = Some(l.fencing_token);
                self.events.push_back(ObserverEvent::Acknowledged(l));
            }
        }
    }

    fn on_list(&mut self, result: Result<Response, Error>) {
        match result {
            Ok(Response::Children(children)) | Ok(Response::Children2 { children, .. }) => {
                self.listed = true;
                let sorted = contender::sorted(&children);
                self.order = sorted.into_iter().map(|c| c.name).collect();
                let listed: BTreeSet<&String> = self.order.iter().collect();
                self.known.retain(|n, _| listed.contains(n));
                self.unread.retain(|n| listed.contains(n));
                for n in &self.order {
                    if !self.known.contains_key(n) && !self.reading.contains(n) {
                        self.unread.insert(n.clone());
                    }
                }
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                self.listed = true;
                self.order.clear();
                self.known.clear();
                self.unread.clear();
                let path = self.dir.clone();
                self.outbox.send(
                    Purpose::DirExists,
                    Request::Exists(PathWatch { path, watch: true }),
                );
            }
            Err(e) => self.failed(e, LIST),
            Ok(_) => self.end(Some(Error::UnexpectedReply)),
        }
    }

    fn failed(&mut self, e: Error, need: u8) {
        if e.is_retryable() {
            self.need |= need;
        } else if !e.ends_session() {
            self.end(Some(e));
        }
    }
}

impl Recipe for Observer {
    type Event = ObserverEvent;

    fn handle_reply(&mut self, now: Instant, op: OpId, result: Result<Response, Error>) {
        let Some(purpose) = self.outbox.take(op) else {
            return;
        };
        if self.ended {
            return;
        }
        if result.as_ref().is_err_and(|e| e.is_retryable()) {
            self.retry.failed(now);
        }
        match purpose {
            Purpose::List => self.on_list(result),
            Purpose::DirExists => match result {
                // It appeared: list it (and watch).
                Ok(Response::Stat(_)) => self.need |= LIST,
                // Still missing: the watch will say when it appears.
                Err(Error::Server(ErrorCode::NoNode)) => {}
                Err(e) => self.failed(e, LIST),
                Ok(_) => self.end(Some(Error::UnexpectedReply)),
            },
            Purpose::Read(name) => match result {
                Ok(Response::Data { data, stat }) => {
                    // (One that vanished meanwhile is dropped by the next listing.)
                    self.reading.remove(&name);
                    let id = String::from_utf8_lossy(&data).into();
                    let p = Participant {
                        id,
                        node: name.clone(),
                        fencing_token: stat.czxid,
                    };
                    self.known.insert(name, p);
                }
                Err(Error::Server(ErrorCode::NoNode)) => {
                    // Gone before we read it: drop it (our watch brings the listing).
                    self.reading.remove(&name);
                    self.order.retain(|n| *n != name);
                }
                Err(e) if e.is_retryable() => {
                    // Read again when the session allows.
                    self.reading.remove(&name);
                    self.unread.insert(name);
                }
                Err(e) => self.failed(e, 0),
                Ok(_) => self.end(Some(Error::UnexpectedReply)),
            },
            Purpose::AckExists => match result {
                Ok(Response::Stat(_)) => self.need |= ACK,
                Err(Error::Server(ErrorCode::NoNode)) => {}
                Err(e) => self.failed(e, ACK),
                Ok(_) => self.end(Some(Error::UnexpectedReply)),
            },
            Purpose::Ack => match result {
                Ok(Response::Children(names))
                | Ok(Response::Children2 {
                    children: names, ..
                }) => {
                    self.acks = names.iter().filter_map(|n| parse_ack_node(n)).collect();
                }
                Err(Error::Server(ErrorCode::NoNode)) => {
                    self.acks.clear();
                    // A listing of a missing node sets no watch: follow its creation.
                    let path = self.ack_dir.clone();
                    self.outbox.send(
                        Purpose::AckExists,
                        Request::Exists(PathWatch { path, watch: true }),
                    );
                }
                Err(e) => self.failed(e, ACK),
                Ok(_) => self.end(Some(Error::UnexpectedReply)),
            },
        }
        self.update();
        self.drive(now);
    }

    fn handle_watch(&mut self, now: Instant, _op: OpId, event: &WatchEvent) {
        if event.path == self.ack_dir {
            self.need |= ACK;
        } else if event.path == self.dir {
            self.need |= LIST;
        }
        self.drive(now);
    }

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.retry.session(change);
        match change {
            SessionChange::Connected { .. } if self.started => {
                // A new session: no watch survived.
                self.need |= LIST | ACK;
            }
            SessionChange::Expired => {
                self.outbox.clear();
                let reading = core::mem::take(&mut self.reading);
                self.unread.extend(reading);
            }
            SessionChange::Closed => {
                self.outbox.clear();
                self.end(None);
            }
            _ => {}
        }
        self.drive(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.drive(now);
    }

    fn handle_abandon(&mut self, now: Instant) {
        self.close(now);
    }

    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        self.outbox.poll()
    }

    fn poll_event(&mut self) -> Option<ObserverEvent> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let pending = self.need != 0 || !self.unread.is_empty();
        if pending && !self.ended {
            self.retry.deadline()
        } else {
            None
        }
    }

    fn is_done(&self) -> bool {
        self.ended && self.outbox.is_empty() && self.events.is_empty()
    }
}
