//! Watch tables: checkWatches/removeWatches, SetWatches, and firing notifications for a
//! write's changes.

use super::*;

impl ServerModel {
    /// checkWatches / removeWatches: does `conn` hold watches of this type on the path?
    pub(super) fn watch_tables(
        &mut self,
        conn: ConnId,
        r: &WatchesRequest,
        remove: bool,
    ) -> OpResult {
        let w = &mut self.watches;
        let tables: Vec<&mut BTreeMap<String, BTreeSet<ConnId>>> =
            match WatcherType::from_i32(r.watcher_type) {
                Some(WatcherType::Children) => alloc::vec![&mut w.child],
                Some(WatcherType::Data) => alloc::vec![&mut w.data],
                Some(WatcherType::Any) => alloc::vec![
                    &mut w.data,
                    &mut w.child,
                    &mut w.persistent,
                    &mut w.recursive
                ],
                Some(WatcherType::Persistent) => alloc::vec![&mut w.persistent],
                Some(WatcherType::PersistentRecursive) => alloc::vec![&mut w.recursive],
                None => return Err(ErrorCode::BadArguments),
            };
        let mut found = false;
        if let Some(l) = self.conns.get_mut(&conn).and_then(|c| c.lagging.as_mut()) {
            // Watches a lagging follower holds for this connection.
            let held = &mut l.watches;
            let lists: Vec<&mut Vec<String>> = match WatcherType::from_i32(r.watcher_type) {
                Some(WatcherType::Children) => alloc::vec![&mut held.child_watches],
                Some(WatcherType::Data) => {
                    alloc::vec![&mut held.data_watches, &mut held.exist_watches]
                }
                Some(WatcherType::Any) => alloc::vec![
                    &mut held.data_watches,
                    &mut held.exist_watches,
                    &mut held.child_watches,
                    &mut held.persistent_watches,
                    &mut held.persistent_recursive_watches
                ],
                Some(WatcherType::Persistent) => alloc::vec![&mut held.persistent_watches],
                Some(WatcherType::PersistentRecursive) => {
                    alloc::vec![&mut held.persistent_recursive_watches]
                }
                None => Vec::new(),
            };
            for list in lists {
                if list.contains(&r.path) {
                    found = true;
                    if remove {
                        list.retain(|p| *p != r.path);
                    }
                }
            }
        }
        for table in tables {
            if let Some(set) = table.get_mut(&r.path) {
                if set.contains(&conn) {
                    found = true;
                    if remove {
                        set.remove(&conn);
                        if set.is_empty() {
                            table.remove(&r.path);
                        }
                    }
                }
            }
        }
        if found {
            Ok(Response::Empty)
        } else {
            Err(ErrorCode::NoWatcher)
        }
    }

    /// SetWatches(2): against the live tree, or a lagging connection's old one (whose
    /// remaining watches are then held back until it catches up).
    pub(super) fn set_watches(&mut self, conn: ConnId, w: &SetWatches2) {
        let snapshot = self.lagging_tree(conn);
        let (notes, arm) = check_watches(snapshot.as_deref().unwrap_or(&self.tree), w);
        self.arm(conn, arm);
        for (path, t) in notes {
            self.notify(conn, t, &path);
        }
    }

    pub(super) fn acl_of(&self, path: &str) -> Vec<Acl> {
        self.tree
            .nodes
            .get(path)
            .map(|n| n.acl.clone())
            .unwrap_or_else(Acl::open_unsafe)
    }

    pub(super) fn notify(&mut self, conn: ConnId, t: EventType, path: &str) {
        if let Some(c) = self.conns.get_mut(&conn) {
            if !c.closed {
                self.dirty.push(conn);
                self.replies_sent += 1;
                encode_notification(
                    &mut c.out,
                    &WatcherEvent {
                        event_type: t.to_i32(),
                        state: 3,
                        path: path.into(),
                    },
                );
            }
        }
    }

    /// Fires the watches for committed changes, in order: the node's own event, then
    /// its parent's child event; one notification per connection per path and event.
    /// As in 3.8, a connection without READ on the node hears nothing (its one-shot
    /// watch is used up all the same).
    pub(super) fn fire(&mut self, changes: &[Change]) {
        let w = &self.watches;
        if w.data.is_empty()
            && w.child.is_empty()
            && w.persistent.is_empty()
            && w.recursive.is_empty()
        {
            return;
        }
        for change in changes {
            let (path, t, acl) = match change {
                Change::Created(p) => (p.as_str(), EventType::NodeCreated, self.acl_of(p)),
                Change::Deleted(p, acl) => (p.as_str(), EventType::NodeDeleted, acl.clone()),
                Change::DataChanged(p) => (p.as_str(), EventType::NodeDataChanged, self.acl_of(p)),
            };
            let mut to: BTreeSet<ConnId> = take(&mut self.watches.data, path);
            if t == EventType::NodeDeleted {
                to.extend(take(&mut self.watches.child, path));
            }
            to.extend(get(&self.watches.persistent, path));
            let mut at = Some(path);
            while let Some(p) = at {
                to.extend(get(&self.watches.recursive, p));
                at = parent_of(p);
            }
            for conn in to {
                if self.allowed(conn, &acl, perms::READ) {
                    self.notify(conn, t, path);
                }
            }
            if t != EventType::NodeDataChanged {
                if let Some(parent) = parent_of(path) {
                    let mut to = take(&mut self.watches.child, parent);
                    to.extend(get(&self.watches.persistent, parent));
                    let acl = self.acl_of(parent);
                    for conn in to {
                        if self.allowed(conn, &acl, perms::READ) {
                            self.notify(conn, EventType::NodeChildrenChanged, parent);
                        }
                    }
                }
            }
        }
    }

    // ----- writes -----
}
