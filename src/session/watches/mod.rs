//! Watches: who registered what ([`registry`]), what a reply does to the registrations
//! ([`After`]), the fan-out of one notification to every registrant, and re-arming
//! everything after a resume (SetWatches / SetWatches2 batches under the frame limit).
//!
//! A caller's own `SetWatches2` arms its watches as it is written (the server may fire
//! them before it answers); the notifications they get before the reply are held back
//! until it, so a registrant hears its reply first, as for any read that sets a watch.
//! A failed one registers nothing. Watch events queued and not yet polled are counted
//! per token, so [`is_watching`](Watches::is_watching) knows a route has events left.
//!
//! Owns: the registry, the SetWatches2 in flight and their held-back notifications,
//! the unpolled counts.

mod registry;

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;

pub use registry::WatchLists;
use registry::WatchRegistry;

use super::event::{SessionEvent, Token, WatchEvent, WatchKind};
use crate::error::Error;
use crate::hash::{shed_map, HashMap};
use crate::proto::{
    AddWatchMode, Chroot, ErrorCode, EventType, Request, Response, SetWatches, SetWatches2,
    WatcherType,
};

/// What to do once a request's reply arrives.
#[derive(Debug)]
pub(super) enum After {
    Nothing,
    /// Register a watch if the reply says it was set.
    Watch {
        path: String,
        on_ok: Option<WatchKind>,
        on_no_node: Option<WatchKind>,
    },
    /// Drop registrations the server removed.
    RemoveWatches {
        path: String,
        which: WatcherType,
    },
    /// The closeSession reply.
    Close,
    /// A caller's SetWatches2: these watches are registered as it is written.
    Arm(Vec<(String, WatchKind)>),
}

impl After {
    /// What the reply to `request` will do to the registrations.
    pub(super) fn reply_to(request: &Request) -> After {
        use WatchKind::*;
        let watch = |path: &str, on_ok, on_no_node| After::Watch {
            path: path.into(),
            on_ok,
            on_no_node,
        };
        match request {
            Request::GetData(r) if r.watch => watch(&r.path, Some(Data), None),
            Request::Exists(r) if r.watch => watch(&r.path, Some(Data), Some(Exist)),
            Request::GetChildren(r) | Request::GetChildren2(r) if r.watch => {
                watch(&r.path, Some(Child), None)
            }
            Request::AddWatch(r) => match AddWatchMode::from_i32(r.mode) {
                Some(AddWatchMode::Persistent) => watch(&r.path, Some(Persistent), None),
                Some(AddWatchMode::PersistentRecursive) => {
                    watch(&r.path, Some(PersistentRecursive), None)
                }
                None => After::Nothing,
            },
            Request::SetWatches2(r) => {
                let lists: [(&Vec<String>, WatchKind); 5] = [
                    (&r.data_watches, Data),
                    (&r.exist_watches, Exist),
                    (&r.child_watches, Child),
                    (&r.persistent_watches, Persistent),
                    (&r.persistent_recursive_watches, PersistentRecursive),
                ];
                After::Arm(
                    lists
                        .iter()
                        .flat_map(|(paths, kind)| paths.iter().map(|p| (p.clone(), *kind)))
                        .collect(),
                )
            }
            Request::RemoveWatches(r) => match WatcherType::from_i32(r.watcher_type) {
                Some(which) => After::RemoveWatches {
                    path: r.path.clone(),
                    which,
                },
                None => After::Nothing,
            },
            _ => After::Nothing,
        }
    }

    /// How many registrations the reply may add.
    pub(super) fn registrations(&self) -> usize {
        match self {
            After::Watch { .. } => 1,
            After::Arm(places) => places.len(),
            _ => 0,
        }
    }
}

/// How many path bytes one SetWatches batch carries at most.
const SET_WATCHES_BATCH: usize = 128 * 1024;

/// Picks one list of a SetWatches2 batch.
type WatchSlot = fn(&mut SetWatches2) -> &mut Vec<String>;

/// The watch registrations and the delivery of their events.
#[derive(Debug, Default)]
pub(super) struct Watches {
    registry: WatchRegistry,
    /// Callers' SetWatches2 in flight, and the notifications their watches got before
    /// the reply (held back until it).
    arming: Vec<Token>,
    deferred: Vec<(Token, WatchEvent)>,
    /// Watch events queued and not yet polled, by token.
    unpolled: HashMap<Token, u32>,
    scratch: Vec<Token>,
}

impl Watches {
    /// Registrations.
    pub(super) fn len(&self) -> usize {
        self.registry.len()
    }

    /// Does `token` still have a watch registered (one a watch event has not used up)?
    pub(super) fn is_watching(&self, token: Token) -> bool {
        self.registry.kind_of(token).is_some()
            || self.unpolled.contains_key(&token)
            || self.deferred.iter().any(|(t, _)| *t == token)
    }

    /// Registrants of one watch.
    pub(super) fn registrants(&self, path: &str, kind: WatchKind) -> Vec<Token> {
        self.registry.registrants(path, kind)
    }

    /// Paths with watches, by table.
    pub(super) fn lists(&self) -> WatchLists {
        self.registry.lists()
    }

    /// Forgets every registration of `token`.
    pub(super) fn forget(&mut self, token: Token) {
        self.registry.forget(token);
    }

    /// The session is gone: every registration with it (events already queued stay).
    pub(super) fn clear(&mut self) {
        self.registry.clear();
    }

    /// A SetWatches2 of the caller's arms its watches as it is written: the server may
    /// fire them before it answers (a change after the relative zxid), and those
    /// notifications must find their registrant. They are held back until the reply,
    /// so a registrant still hears its reply first.
    pub(super) fn arm_at_write(&mut self, token: Token, after: &After) {
        if let After::Arm(places) = after {
            for (path, kind) in places {
                self.registry.add(path, *kind, token);
            }
            self.arming.push(token);
        }
    }

    /// The reply to a caller's SetWatches2: what it armed and what fired meanwhile.
    pub(super) fn armed(&mut self, token: Token, ok: bool) -> Option<WatchKind> {
        self.arming.retain(|t| *t != token);
        if !ok {
            // Not armed on this connection (or refused): forget them; the caller arms
            // again (a new connection holds none of the old one's watches anyway).
            self.registry.forget(token);
            self.deferred.retain(|(t, _)| *t != token);
            return None;
        }
        let fired = self.deferred.iter().any(|(t, _)| *t == token);
        let kind = self.registry.kind_of(token);
        kind.or(fired.then_some(WatchKind::Data))
    }

    /// What the reply to the request of `token` (and `more`, who shared it) does to
    /// the registrations: the kind it registered for them, if any. Not for a close.
    pub(super) fn on_reply(
        &mut self,
        events: &mut VecDeque<SessionEvent>,
        after: After,
        token: Token,
        more: &[Token],
        result: &Result<Response, Error>,
    ) -> Option<WatchKind> {
        match after {
            After::Watch {
                path,
                on_ok,
                on_no_node,
            } => {
                let kind = match result {
                    Ok(_) => on_ok,
                    Err(Error::Server(ErrorCode::NoNode)) => on_no_node,
                    Err(_) => None,
                };
                if let Some(kind) = kind {
                    self.registry.add(&path, kind, token);
                    for token in more {
                        self.registry.add(&path, kind, *token);
                    }
                }
                kind
            }
            After::RemoveWatches { path, which } => {
                if result.is_ok() {
                    self.removed(events, path, which);
                }
                None
            }
            After::Arm(_) => self.armed(token, result.is_ok()),
            After::Nothing | After::Close => None,
        }
    }

    /// The server removed `which` watches of `path`: each registrant hears it.
    fn removed(&mut self, events: &mut VecDeque<SessionEvent>, path: String, which: WatcherType) {
        for (token, kind) in self.registry.remove(&path, which) {
            let event_type = match kind {
                WatchKind::Data | WatchKind::Exist => EventType::DataWatchRemoved,
                WatchKind::Child => EventType::ChildWatchRemoved,
                WatchKind::Persistent | WatchKind::PersistentRecursive => {
                    EventType::PersistentWatchRemoved
                }
            };
            let event = WatchEvent {
                event_type,
                path: path.clone(),
            };
            self.push(events, token, event);
        }
    }

    /// A notification for `path` (chroot stripped): every registrant hears it, those
    /// whose SetWatches2 is not answered yet after their reply.
    pub(super) fn notify(
        &mut self,
        events: &mut VecDeque<SessionEvent>,
        path: String,
        event_type: EventType,
    ) {
        let mut tokens = core::mem::take(&mut self.scratch);
        tokens.clear();
        self.registry.trigger(&path, event_type, &mut tokens);
        for token in tokens.drain(..) {
            let event = WatchEvent {
                event_type,
                path: path.clone(),
            };
            if self.arming.contains(&token) {
                self.deferred.push((token, event)); // after its reply
            } else {
                self.push(events, token, event);
            }
        }
        self.scratch = tokens;
    }

    /// Queues a watch event, counted until polled: a token's route ends with its last
    /// event, which [`is_watching`](Self::is_watching) tells only if it knows what is
    /// still queued (two events for one SetWatches2 may arrive in one read).
    fn push(&mut self, events: &mut VecDeque<SessionEvent>, token: Token, event: WatchEvent) {
        *self.unpolled.entry(token).or_default() += 1;
        events.push_back(SessionEvent::Watch { token, event });
    }

    /// The notifications held back for `token` until its reply, in order.
    pub(super) fn release_deferred(&mut self, events: &mut VecDeque<SessionEvent>, token: Token) {
        if self.deferred.is_empty() {
            return;
        }
        let mut i = 0;
        while i < self.deferred.len() {
            if self.deferred[i].0 == token {
                let (token, event) = self.deferred.remove(i);
                self.push(events, token, event);
            } else {
                i += 1;
            }
        }
    }

    /// A watch event of `token` was polled.
    pub(super) fn polled(&mut self, token: Token) {
        if let Some(n) = self.unpolled.get_mut(&token) {
            *n -= 1;
            if *n == 0 {
                self.unpolled.remove(&token);
            }
        }
    }

    /// Every event was polled: gives back the room of a burst.
    pub(super) fn shed(&mut self) {
        shed_map(&mut self.unpolled);
    }

    /// What re-arms every watch on a resumed session: SetWatches (SetWatches2 when
    /// there are persistent watches, for servers older than 3.6 otherwise) batches of
    /// server paths, each relative to `last_zxid`.
    pub(super) fn rearm(&self, last_zxid: i64, chroot: &Chroot) -> Vec<Request> {
        let lists = self.registry.lists();
        let mut batches = Vec::new();
        let mut batch = SetWatches2 {
            relative_zxid: last_zxid,
            ..Default::default()
        };
        let mut size = 0;
        let tables: [(&Vec<String>, WatchSlot); 5] = [
            (&lists.data, |b| &mut b.data_watches),
            (&lists.exist, |b| &mut b.exist_watches),
            (&lists.child, |b| &mut b.child_watches),
            (&lists.persistent, |b| &mut b.persistent_watches),
            (&lists.recursive, |b| &mut b.persistent_recursive_watches),
        ];
        for (table, (paths, slot)) in tables.into_iter().enumerate() {
            // Data and exist watches on the configuration node are outside the chroot.
            let reads = table < 2;
            for p in paths {
                let server_path = super::rebalance::server_path(chroot, p, reads);
                if size + server_path.len() > SET_WATCHES_BATCH {
                    batches.extend(batch_request(core::mem::take(&mut batch)));
                    batch.relative_zxid = last_zxid;
                    size = 0;
                }
                size += server_path.len() + 4;
                slot(&mut batch).push(server_path);
            }
        }
        batches.extend(batch_request(batch));
        batches
    }
}

/// One batch as the request to send (none if it is empty): plain SetWatches when
/// possible, for servers older than 3.6.
fn batch_request(b: SetWatches2) -> Option<Request> {
    let empty = b.data_watches.is_empty()
        && b.exist_watches.is_empty()
        && b.child_watches.is_empty()
        && b.persistent_watches.is_empty()
        && b.persistent_recursive_watches.is_empty();
    if empty {
        return None;
    }
    Some(
        if b.persistent_watches.is_empty() && b.persistent_recursive_watches.is_empty() {
            Request::SetWatches(SetWatches {
                relative_zxid: b.relative_zxid,
                data_watches: b.data_watches,
                exist_watches: b.exist_watches,
                child_watches: b.child_watches,
            })
        } else {
            Request::SetWatches2(b)
        },
    )
}
