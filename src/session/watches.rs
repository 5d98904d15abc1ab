//! The client-side watch registry (reference §8.2–8.6, §10).
//!
//! The server keeps one watch per (session, path, table); many local registrants may sit
//! behind it. This table records who they are, fans a notification out to every one of
//! them, drops one-shot registrations when they fire, and lists what to re-arm after a
//! reconnect.

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;
use smallvec::SmallVec;

use crate::hash::HashMap;

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

/// Ordered sets: adding, removing and forgetting one registrant cost O(log n) however
/// many share a path, and tokens (allocated in order) keep registration order.
type Registrants = BTreeSet<Token>;

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
#[derive(Debug, Default, Clone, PartialEq, Eq, Hash)]
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
    /// Where each token is registered, so forgetting it does not scan every path.
    by_token: HashMap<Token, SmallVec<[(String, WatchKind); 1]>>,
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
        if entry.slot(kind).insert(token) {
            self.count += 1;
            self.by_token
                .entry(token)
                .or_default()
                .push((String::from(path), kind));
        }
    }

    fn unindex(&mut self, token: Token, path: &str, kind: WatchKind) {
        if let Some(places) = self.by_token.get_mut(&token) {
            places.retain(|(p, k)| !(p == path && *k == kind));
            if places.is_empty() {
                self.by_token.remove(&token);
            }
        }
    }

    /// Every registrant the event reaches, each once, in registration order; one-shot
    /// registrations removed. O(n log n) in the registrants reached.
    pub(crate) fn trigger(&mut self, path: &str, event: EventType, out: &mut Vec<Token>) {
        use WatchKind::*;
        let (one_shot, persistent_recursive): (&[WatchKind], bool) = match event {
            EventType::NodeCreated | EventType::NodeDataChanged => (&[Data, Exist], true),
            EventType::NodeDeleted => (&[Data, Exist, Child], true),
            EventType::NodeChildrenChanged => (&[Child], false),
            _ => return,
        };
        let start = out.len();
        let mut sources = 0;
        let mut fired: SmallVec<[(Token, WatchKind); 4]> = SmallVec::new();
        if let Some(entry) = self.paths.get_mut(path) {
            for kind in one_shot {
                let taken = core::mem::take(entry.slot(*kind));
                if !taken.is_empty() {
                    sources += 1;
                    self.count -= taken.len();
                    for t in &taken {
                        fired.push((*t, *kind));
                    }
                    out.extend(taken);
                }
            }
            let persistent = entry.slot(Persistent);
            if !persistent.is_empty() {
                sources += 1;
                out.extend(persistent.iter().copied());
            }
            if entry.is_empty() {
                self.paths.remove(path);
            }
        }
        for (t, kind) in fired {
            self.unindex(t, path, kind);
        }
        if persistent_recursive {
            let mut p = Some(path);
            while let Some(at) = p {
                if let Some(entry) = self.paths.get_mut(at) {
                    let recursive = entry.slot(PersistentRecursive);
                    if !recursive.is_empty() {
                        sources += 1;
                        out.extend(recursive.iter().copied());
                    }
                }
                p = parent(at);
            }
        }
        // One event per registrant: one source is already sorted and unique.
        if sources > 1 {
            out[start..].sort_unstable();
            let mut tail = out.split_off(start);
            tail.dedup();
            out.extend(tail);
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
        for (t, kind) in &removed {
            self.unindex(*t, path, *kind);
        }
        self.count -= removed.len();
        removed
    }

    /// Drops every registration of `token` (its owner went away). Server-side watches
    /// stay until they fire; their notifications then reach nobody. O(log n).
    pub(crate) fn forget(&mut self, token: Token) {
        let Some(places) = self.by_token.remove(&token) else {
            return;
        };
        for (path, kind) in places {
            if let Some(entry) = self.paths.get_mut(&path) {
                if entry.slot(kind).remove(&token) {
                    self.count -= 1;
                }
                if entry.is_empty() {
                    self.paths.remove(&path);
                }
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        self.paths.clear();
        self.by_token.clear();
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

    /// The registrants of one path and kind, in registration order.
    pub(crate) fn registrants(&self, path: &str, kind: WatchKind) -> Vec<Token> {
        self.paths
            .get(path)
            .map(|e| e.0[kind as usize].iter().copied().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    /// Issue 16: the paths re-armed after a reconnect (SetWatches) come in one order in
    /// every process and every registry: the map's hasher is seedless. A randomly
    /// seeded hasher (hashbrown's default) gives two registries different orders.
    #[test]
    fn re_armed_watches_come_in_a_deterministic_order() {
        let build = |order: &[usize]| {
            let mut r = WatchRegistry::default();
            for &i in order {
                r.add(&format!("/app/node-{i}"), WatchKind::Data, Token(i as u64));
                r.add(
                    &format!("/app/dir-{i}"),
                    WatchKind::Child,
                    Token(1_000 + i as u64),
                );
            }
            r.lists()
        };
        let forward: Vec<usize> = (0..200).collect();
        let a = build(&forward);
        for _ in 0..8 {
            assert_eq!(
                build(&forward),
                a,
                "same registrations, another order of re-arming"
            );
        }
        assert_eq!(a.data.len(), 200);
        assert_eq!(a.child.len(), 200);
        // The order is the map's, fixed by the path alone: pinned here, so a change of
        // hasher that would make it vary (or a seed) is seen.
        let first: Vec<&str> = a.data.iter().take(3).map(|s| s.as_str()).collect();
        assert_eq!(first, PINNED_FIRST_DATA);
    }

    const PINNED_FIRST_DATA: [&str; 3] = ["/app/node-141", "/app/node-192", "/app/node-54"];
}
