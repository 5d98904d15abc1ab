//! The client-side watch registry (reference §8.2–8.6, §10).
//!
//! The server keeps one watch per (session, path, table); many local registrants may sit
//! behind it. This table records who they are, fans a notification out to every one of
//! them, drops one-shot registrations when they fire, and lists what to re-arm after a
//! reconnect.

use alloc::string::String;
use alloc::vec::Vec;
use hashbrown::HashMap;
use smallvec::SmallVec;

use super::Token;
use crate::proto::{parent, EventType, WatcherType};

/// The kind of a watch registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// One-shot watch on an existing node's data (getData / exists).
    Data,
    /// One-shot watch for a missing node's creation (exists on NoNode).
    Exist,
    /// One-shot watch on a node's children (getChildren).
    Child,
    /// Persistent watch on the node (addWatch PERSISTENT).
    Persistent,
    /// Persistent watch on the node and all descendants (addWatch PERSISTENT_RECURSIVE).
    PersistentRecursive,
}

const KINDS: [WatchKind; 5] = [
    WatchKind::Data,
    WatchKind::Exist,
    WatchKind::Child,
    WatchKind::Persistent,
    WatchKind::PersistentRecursive,
];

type Registrants = SmallVec<[Token; 2]>;

#[derive(Default, Debug)]
struct PathWatches([Registrants; 5]);

impl PathWatches {
    fn slot(&mut self, kind: WatchKind) -> &mut Registrants {
        &mut self.0[kind as usize]
    }
    fn is_empty(&self) -> bool {
        self.0.iter().all(|r| r.is_empty())
    }
}

/// Paths to re-arm after a reconnect, by table (client paths).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WatchLists {
    /// Data watches.
    pub data: Vec<String>,
    /// Exist watches.
    pub exist: Vec<String>,
    /// Child watches.
    pub child: Vec<String>,
    /// Persistent watches.
    pub persistent: Vec<String>,
    /// Persistent recursive watches.
    pub recursive: Vec<String>,
}

#[derive(Debug, Default)]
pub(crate) struct WatchRegistry {
    paths: HashMap<String, PathWatches>,
    count: usize,
}

impl WatchRegistry {
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Adds a registrant; a token already registered for this path and kind is not
    /// added twice.
    pub(crate) fn add(&mut self, path: &str, kind: WatchKind, token: Token) {
        let entry = match self.paths.get_mut(path) {
            Some(e) => e,
            None => self.paths.entry(String::from(path)).or_default(),
        };
        let slot = entry.slot(kind);
        if !slot.contains(&token) {
            slot.push(token);
            self.count += 1;
        }
    }

    /// Every registrant the event reaches, each once; one-shot registrations removed.
    pub(crate) fn trigger(&mut self, path: &str, event: EventType, out: &mut Vec<Token>) {
        use WatchKind::*;
        let (one_shot, persistent_recursive): (&[WatchKind], bool) = match event {
            EventType::NodeCreated | EventType::NodeDataChanged => (&[Data, Exist], true),
            EventType::NodeDeleted => (&[Data, Exist, Child], true),
            EventType::NodeChildrenChanged => (&[Child], false),
            _ => return,
        };
        let start = out.len();
        if let Some(entry) = self.paths.get_mut(path) {
            for kind in one_shot {
                let fired = core::mem::take(entry.slot(*kind));
                self.count -= fired.len();
                out.extend(fired);
            }
            out.extend(entry.slot(Persistent).iter().copied());
            if entry.is_empty() {
                self.paths.remove(path);
            }
        }
        if persistent_recursive {
            let mut p = Some(path);
            while let Some(at) = p {
                if let Some(entry) = self.paths.get_mut(at) {
                    out.extend(entry.slot(PersistentRecursive).iter().copied());
                }
                p = parent(at);
            }
        }
        // One event per registrant, in first-registered order.
        let mut seen: SmallVec<[Token; 8]> = SmallVec::new();
        let mut i = start;
        while i < out.len() {
            if seen.contains(&out[i]) {
                out.remove(i);
            } else {
                seen.push(out[i]);
                i += 1;
            }
        }
    }

    /// Removes the registrations a `removeWatches(path, type)` took off the server and
    /// returns (registrant, kind) pairs so they can be told.
    pub(crate) fn remove(&mut self, path: &str, which: WatcherType) -> Vec<(Token, WatchKind)> {
        use WatchKind::*;
        let kinds: &[WatchKind] = match which {
            WatcherType::Children => &[Child],
            WatcherType::Data => &[Data, Exist],
            WatcherType::Any => &KINDS,
            WatcherType::Persistent => &[Persistent],
            WatcherType::PersistentRecursive => &[PersistentRecursive],
        };
        let mut removed = Vec::new();
        if let Some(entry) = self.paths.get_mut(path) {
            for kind in kinds {
                for t in core::mem::take(entry.slot(*kind)) {
                    removed.push((t, *kind));
                }
            }
            if entry.is_empty() {
                self.paths.remove(path);
            }
        }
        self.count -= removed.len();
        removed
    }

    /// Drops every registration of `token` (its owner went away). Server-side watches
    /// stay until they fire; their notifications then reach nobody.
    pub(crate) fn forget(&mut self, token: Token) {
        let mut removed = 0;
        self.paths.retain(|_, entry| {
            for slot in entry.0.iter_mut() {
                let before = slot.len();
                slot.retain(|t| *t != token);
                removed += before - slot.len();
            }
            !entry.is_empty()
        });
        self.count -= removed;
    }

    pub(crate) fn clear(&mut self) {
        self.paths.clear();
        self.count = 0;
    }

    /// What to send in SetWatches(2) after a reconnect.
    pub(crate) fn lists(&self) -> WatchLists {
        let mut l = WatchLists::default();
        for (path, entry) in &self.paths {
            for kind in KINDS {
                if !entry.0[kind as usize].is_empty() {
                    let list = match kind {
                        WatchKind::Data => &mut l.data,
                        WatchKind::Exist => &mut l.exist,
                        WatchKind::Child => &mut l.child,
                        WatchKind::Persistent => &mut l.persistent,
                        WatchKind::PersistentRecursive => &mut l.recursive,
                    };
                    list.push(path.clone());
                }
            }
        }
        l
    }

    /// The registrants of one path and kind.
    pub(crate) fn registrants(&self, path: &str, kind: WatchKind) -> &[Token] {
        self.paths
            .get(path)
            .map(|e| &e.0[kind as usize][..])
            .unwrap_or(&[])
    }
}
