//! Watching an election without standing in it: the current leader, the participants
//! in order (Curator's `LeaderLatch.getParticipants`, kazoo's `contenders()`), the
//! leader's acknowledgement, and a stream of leader changes.
//!
//! # Protocol
//!
//! Two group [`View`]s, which do all the reading: one of the candidates' directory
//! (each candidate's node read once: its participant id, and its creation zxid — the
//! fencing token it leads with; no data watches, candidate data never changes), one of
//! the acknowledgement directory. The contenders are sorted as candidates sort them
//! (by the sequence after the last known marker; other children ignored); the lowest
//! is the leader (reported once its node is read: a later candidate read first is not
//! taken for it). It has acknowledged when `<ack_dir>/<its token>` exists (see
//! [`ack_node`](super::ack_node)). The views take care of missing directories (an empty
//! election), reconnects and new sessions (resynchronised: nothing lost, nothing
//! invented).
//!
//! Events: [`ObserverEvent::Leader`] once the first view is complete, then whenever
//! the leader changes (`None`: nobody leads); [`ObserverEvent::Acknowledged`] when the
//! current leader's acknowledgement appears; `Failed` (final: no permission, invalid
//! path) and `Closed` (final).

use super::super::kit::Events;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::super::group::{View, ViewConfig, ViewEvent};
use super::super::{contender, Machine, OpId, Recipe, SessionChange};
use super::default_ack_dir;
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::Reply;
use crate::session::WatchEvent;
use crate::time::Instant;

/// One candidate, as observers see it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Participant {
    /// Its participant id (its node's data).
    pub id: String,
    /// Its node's name.
    pub node: String,
    /// Its node's creation zxid: the fencing token it leads with.
    pub fencing_token: i64,
}

/// What an observer reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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

/// The observer state machine. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Observer {
    candidates: View,
    acks: View,
    ended: bool,
    /// The leader last reported (`Some` once the first view was complete).
    reported: Option<Option<Participant>>,
    acked: Option<i64>,
    events: Events<ObserverEvent>,
}

/// Op ids: the candidates view's are even, the acknowledgements view's odd.
fn tag(op: OpId, acks: bool) -> OpId {
    (op << 1) | u64::from(acks)
}

impl Observer {
    /// An observer of the election in `dir`, with the default acknowledgement
    /// directory.
    pub fn new(dir: &str) -> Observer {
        Observer::with_ack_dir(dir, &default_ack_dir(dir))
    }

    /// An observer of the election in `dir` whose leaders acknowledge in `ack_dir`.
    pub fn with_ack_dir(dir: &str, ack_dir: &str) -> Observer {
        let view = |d: &str| {
            let mut c = ViewConfig::new(d.trim_end_matches('/'));
            c.watch_data = false;
            View::new(c)
        };
        Observer {
            candidates: view(dir),
            acks: view(ack_dir),
            ended: false,
            reported: None,
            acked: None,
            events: Events::default(),
        }
    }

    /// Starts observing.
    pub fn start(&mut self, now: Instant) {
        self.candidates.start(now);
        self.acks.start(now);
        self.pump();
    }

    /// Stops observing; `Closed` follows.
    pub fn close(&mut self, now: Instant) {
        self.candidates.close(now);
        self.acks.close(now);
        self.pump();
        self.end(None);
    }

    /// The current leader, as of the last complete view.
    pub fn leader(&self) -> Option<&Participant> {
        self.reported.as_ref().and_then(|l| l.as_ref())
    }

    /// The participants in election order (the leader first), as far as read: up to
    /// the first listed candidate whose node is not read yet (a later one is never put
    /// before it).
    pub fn participants(&self) -> Vec<Participant> {
        let names: Vec<String> = self
            .candidates
            .members()
            .iter()
            .map(|m| m.name.clone())
            .chain(self.candidates.unread().map(String::from))
            .collect();
        contender::sorted(&names)
            .into_iter()
            .map_while(|c| {
                let m = self.candidates.member(&c.name)?;
                Some(Participant {
                    id: String::from_utf8_lossy(&m.data).into(),
                    node: c.name,
                    fencing_token: m.stat.czxid,
                })
            })
            .collect()
    }

    /// The acknowledged leader: the current leader, if its acknowledgement is written.
    pub fn acknowledged(&self) -> Option<&Participant> {
        self.leader()
            .filter(|l| self.acks.member(&l.fencing_token.to_string()).is_some())
    }

    fn end(&mut self, error: Option<Error>) {
        if !self.ended {
            self.ended = true;
            self.events.emit(match error {
                Some(error) => ObserverEvent::Failed { error },
                None => ObserverEvent::Closed,
            });
        }
    }

    /// Drains both views' events and reports what they mean for the election.
    fn pump(&mut self) {
        while let Some(e) = self
            .candidates
            .poll_event()
            .or_else(|| self.acks.poll_event())
        {
            match e {
                ViewEvent::Failed(Error::Closed) | ViewEvent::Closed => self.end(None),
                ViewEvent::Failed(error) => self.end(Some(error)),
                _ => {}
            }
        }
        if self.ended || !self.candidates.is_synced() {
            return;
        }
        // The lowest of everything listed leads; if its data is not read yet, the
        // leader is not known yet (a later candidate read first is not it).
        let lowest = self
            .candidates
            .members()
            .iter()
            .map(|m| m.name.as_str())
            .chain(self.candidates.unread())
            .filter_map(|n| Some((contender::order_key(n)?, n)))
            .min_by(|a, b| a.0.cmp(&b.0));
        let leader = match lowest {
            None => None,
            Some((_, name)) => match self.candidates.member(name) {
                None => return,
                Some(m) => Some(Participant {
                    id: String::from_utf8_lossy(&m.data).into(),
                    node: m.name.clone(),
                    fencing_token: m.stat.czxid,
                }),
            },
        };
        if self.reported.as_ref() != Some(&leader) {
            self.reported = Some(leader.clone());
            self.events.emit(ObserverEvent::Leader(leader));
        }
        if let Some(l) = self.acknowledged().cloned() {
            if self.acked != Some(l.fencing_token) {
                self.acked = Some(l.fencing_token);
                self.events.emit(ObserverEvent::Acknowledged(l));
            }
        }
    }
}

impl Machine for Observer {
    fn handle_reply(&mut self, now: Instant, op: OpId, result: Reply) {
        match op & 1 {
            0 => self.candidates.handle_reply(now, op >> 1, result),
            _ => self.acks.handle_reply(now, op >> 1, result),
        }
        self.pump();
    }

    fn handle_watch(&mut self, now: Instant, op: OpId, event: &WatchEvent) {
        match op & 1 {
            0 => self.candidates.handle_watch(now, op >> 1, event),
            _ => self.acks.handle_watch(now, op >> 1, event),
        }
        self.pump();
    }

    fn handle_session(&mut self, now: Instant, change: SessionChange) {
        self.candidates.handle_session(now, change);
        self.acks.handle_session(now, change);
        self.pump();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.candidates.handle_timeout(now);
        self.acks.handle_timeout(now);
        self.pump();
    }

    fn handle_abandon(&mut self, now: Instant) {
        self.close(now);
    }

    fn poll_request(&mut self) -> Option<(OpId, Request)> {
        if let Some((op, r)) = self.candidates.poll_request() {
            return Some((tag(op, false), r));
        }
        let (op, r) = self.acks.poll_request()?;
        Some((tag(op, true), r))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.candidates.poll_timeout(), self.acks.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_done(&self) -> bool {
        self.ended && self.candidates.is_done() && self.acks.is_done() && self.events.is_empty()
    }
}

super::super::kit::recipe_events!(Observer => ObserverEvent, events.poll);
