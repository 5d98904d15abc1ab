//! The client-side watch registry (reference §8.2–8.6, §10).
//!
//! The server keeps one watch per (session, path, table); many local registrants may sit
//! behind it. This table records who they are, fans a notification out to every one of
//! them, drops one-shot registrations when they fire, and lists what to re-arm after a
//! reconnect.

use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use smallvec::SmallVec;

use crate::hash::{shed_map, HashMap};

use crate::proto::{parent, EventType, WatcherType};
use crate::session::event::{Token, WatchKind};

const KINDS: [WatchKind; 5] = [
    WatchKind::Data,
    WatchKind::Exist,
    WatchKind::Child,
    WatchKind::Persistent,
    WatchKind::PersistentRecursive,
];

/// The registrants of one path, by kind. Nearly always one or two (a blocker, a node):
/// kept inline as (kind, token) pairs. A path many share (a directory watched by
/// thousands of recipes on one session) becomes ordered sets per kind, so adding,
/// removing and forgetting one registrant stay O(log n) however many share it.
#[derive(Debug)]
enum PathWatches {
    Few(SmallVec<[(WatchKind, Token); 1]>),
    Many(Box<[BTreeSet<Token>; 5]>),
}

/// Beyond this many registrants a path keeps ordered sets.
const FEW: usize = 8;

impl Default for PathWatches {
    fn default() -> Self {
        PathWatches::Few(SmallVec::new())
    }
}

impl PathWatches {
    /// Adds `token` under `kind`; false if it is there already.
    fn insert(&mut self, kind: WatchKind, token: Token) -> bool {
        match self {
            PathWatches::Few(few) => {
                if few.contains(&(kind, token)) {
                    return false;
                }
                if few.len() < FEW {
                    few.push((kind, token));
                    return true;
                }
                let mut sets: Box<[BTreeSet<Token>; 5]> = Box::default();
                for (k, t) in few.drain(..) {
                    sets[k as usize].insert(t);
                }
                sets[kind as usize].insert(token);
                *self = PathWatches::Many(sets);
                true
            }
            PathWatches::Many(sets) => sets[kind as usize].insert(token),
        }
    }

    fn remove(&mut self, kind: WatchKind, token: Token) -> bool {
        match self {
            PathWatches::Few(few) => match few.iter().position(|e| *e == (kind, token)) {
                Some(i) => {
                    few.remove(i);
                    true
                }
                None => false,
            },
            PathWatches::Many(sets) => sets[kind as usize].remove(&token),
        }
    }

    /// Takes every registrant of `kind` out, in token (registration) order.
    fn take(&mut self, kind: WatchKind, out: &mut Vec<Token>) {
        match self {
            PathWatches::Few(few) => {
                let start = out.len();
                few.retain(|(k, t)| {
                    if *k == kind {
                        out.push(*t);
                        false
                    } else {
                        true
                    }
                });
                out[start..].sort_unstable();
            }
            PathWatches::Many(sets) => out.extend(core::mem::take(&mut sets[kind as usize])),
        }
    }

    /// Appends the registrants of `kind`, in token order.
    fn copy(&self, kind: WatchKind, out: &mut Vec<Token>) {
        match self {
            PathWatches::Few(few) => {
                let start = out.len();
                out.extend(few.iter().filter(|(k, _)| *k == kind).map(|(_, t)| *t));
                out[start..].sort_unstable();
            }
            PathWatches::Many(sets) => out.extend(sets[kind as usize].iter().copied()),
        }
    }

    fn has(&self, kind: WatchKind) -> bool {
        match self {
            PathWatches::Few(few) => few.iter().any(|(k, _)| *k == kind),
            PathWatches::Many(sets) => !sets[kind as usize].is_empty(),
        }
    }

    fn is_empty(&self) -> bool {
        KINDS.iter().all(|k| !self.has(*k))
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

/// Where one token is registered: (path, kind), nearly always one.
type Places = SmallVec<[(Arc<str>, WatchKind); 1]>;

#[derive(Debug, Default)]
pub(crate) struct WatchRegistry {
    /// Each path's text is kept once, shared with `by_token`.
    paths: HashMap<Arc<str>, PathWatches>,
    /// Where each token is registered, so forgetting it does not scan every path.
    by_token: HashMap<Token, Places>,
    count: usize,
}

impl WatchRegistry {
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Adds a registrant; a token already registered for this path and kind is not
    /// added twice.
    pub(crate) fn add(&mut self, path: &str, kind: WatchKind, token: Token) {
        let key = match self.paths.get_key_value(path) {
            Some((key, _)) => key.clone(),
            None => {
                let key: Arc<str> = Arc::from(path);
                self.paths.insert(key.clone(), PathWatches::default());
                key
            }
        };
        let Some(entry) = self.paths.get_mut(path) else {
            return;
        };
        if entry.insert(kind, token) {
            self.count += 1;
            self.by_token.entry(token).or_default().push((key, kind));
        }
    }

    /// A kind `token` is registered for, if any.
    pub(crate) fn kind_of(&self, token: Token) -> Option<WatchKind> {
        self.by_token
            .get(&token)
            .and_then(|places| places.first().map(|(_, k)| *k))
    }

    fn unindex(&mut self, token: Token, path: &str, kind: WatchKind) {
        if let Some(places) = self.by_token.get_mut(&token) {
            places.retain(|(p, k)| !(&**p == path && *k == kind));
            if places.is_empty() {
                self.by_token.remove(&token);
                shed_map(&mut self.by_token);
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
                let before = out.len();
                entry.take(*kind, out);
                if out.len() > before {
                    sources += 1;
                    self.count -= out.len() - before;
                    fired.extend(out[before..].iter().map(|t| (*t, *kind)));
                }
            }
            if entry.has(Persistent) {
                sources += 1;
                entry.copy(Persistent, out);
            }
            if entry.is_empty() {
                self.paths.remove(path);
                shed_map(&mut self.paths);
            }
        }
        for (t, kind) in fired {
            self.unindex(t, path, kind);
        }
        if persistent_recursive {
            let mut p = Some(path);
            while let Some(at) = p {
                if let Some(entry) = self.paths.get(at) {
                    if entry.has(PersistentRecursive) {
                        sources += 1;
                        entry.copy(PersistentRecursive, out);
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
            let mut taken = Vec::new();
            for kind in kinds {
                entry.take(*kind, &mut taken);
                removed.extend(taken.drain(..).map(|t| (t, *kind)));
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
        shed_map(&mut self.by_token);
        for (path, kind) in places {
            if let Some(entry) = self.paths.get_mut(&*path) {
                if entry.remove(kind, token) {
                    self.count -= 1;
                }
                if entry.is_empty() {
                    self.paths.remove(&*path);
                    shed_map(&mut self.paths);
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
                if entry.has(kind) {
                    let list = match kind {
                        WatchKind::Data => &mut l.data,
                        WatchKind::Exist => &mut l.exist,
                        WatchKind::Child => &mut l.child,
                        WatchKind::Persistent => &mut l.persistent,
                        WatchKind::PersistentRecursive => &mut l.recursive,
                    };
                    list.push(String::from(&**path));
                }
            }
        }
        l
    }

    /// The registrants of one path and kind, in registration order.
    pub(crate) fn registrants(&self, path: &str, kind: WatchKind) -> Vec<Token> {
        let mut out = Vec::new();
        if let Some(e) = self.paths.get(path) {
            e.copy(kind, &mut out);
        }
        out
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

    /// A path shared by a few registrants keeps them inline; past `FEW` it switches to
    /// ordered sets. Either way: no duplicates, kinds apart, forgetting one leaves the
    /// rest, a notification reaches each once in registration order.
    #[test]
    fn a_path_shared_by_many_registrants_keeps_kinds_apart_and_order() {
        for n in [1u64, 3, FEW as u64, FEW as u64 + 1, 50] {
            let mut r = WatchRegistry::default();
            for t in (0..n).rev() {
                r.add("/dir", WatchKind::Child, Token(t));
                r.add("/dir", WatchKind::Child, Token(t));
            }
            r.add("/dir", WatchKind::Data, Token(1_000));
            assert_eq!(r.len(), n as usize + 1);
            r.forget(Token(0));
            let want: Vec<Token> = (1..n).map(Token).collect();
            assert_eq!(r.registrants("/dir", WatchKind::Child), want, "n = {n}");
            let mut out = Vec::new();
            r.trigger("/dir", EventType::NodeChildrenChanged, &mut out);
            assert_eq!(out, want, "n = {n}");
            assert_eq!(r.len(), 1);
            assert_eq!(r.lists().data, ["/dir"]);
            assert!(r.lists().child.is_empty());
            out.clear();
            r.trigger("/dir", EventType::NodeDeleted, &mut out);
            assert_eq!(out, [Token(1_000)]);
            assert_eq!(r.len(), 0);
            assert!(r.paths.is_empty() && r.by_token.is_empty());
        }
    }

    const PINNED_FIRST_DATA: [&str; 3] = ["/app/node-141", "/app/node-192", "/app/node-54"];
}
