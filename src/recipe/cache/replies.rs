//! The cache's answers: replies to its reads and the notifications of its watches,
//! applied by the ordering rule of the [module docs](super).

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::{
    disarm, kept, parent_of, CacheEvent, CachedNode, Job, Op, Read, TreeCache, WatchStyle, RESYNC,
    WATCH,
};
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{join, Reply};
use crate::recipe::OpId;
use crate::session::WatchEvent;
use crate::time::Instant;

impl TreeCache {
    /// The answer to a read of `path` sent in load `gen` (`Op::Data`, `Op::Children`):
    /// a watch it asked for and did not set is forgotten; only an answer of the current
    /// load is applied.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_read(
        &mut self,
        now: Instant,
        op: OpId,
        path: String,
        gen: u64,
        watch: bool,
        read: Read,
        result: Reply,
    ) {
        let read_ok = match read {
            Read::Data => matches!(result, Ok(Response::Data { .. })),
            Read::Children { .. } => matches!(result, Ok(Response::Children2 { .. })),
        };
        if watch && !read_ok {
            self.unarmed(op, &path, read != Read::Data);
        }
        if gen != self.gen {
            return;
        }
        match (result, read) {
            (Ok(Response::Data { data, stat }), Read::Data) => {
                self.kit.succeeded();
                self.apply_data(path, data, stat);
            }
            (Ok(Response::Children2 { children, stat }), Read::Children { full }) => {
                self.kit.succeeded();
                self.apply_children(path, children, stat, full);
            }
            (Ok(_), _) => self.finish(CacheEvent::Failed(Error::UnexpectedReply)),
            (Err(Error::Server(ErrorCode::NoNode)), _) => {
                self.kit.succeeded();
                self.remove_subtree(&path);
                if read == Read::Data && path == self.config.path {
                    self.push(Job::Exists);
                }
            }
            (Err(e), _) if e.is_retryable() => self.read_again(now, path, read),
            (Err(e), _) if e.ends_session() => {}
            (Err(e), _) => self.finish(CacheEvent::Failed(e)),
        }
    }

    /// A read of `path` failed and may succeed if sent again.
    fn read_again(&mut self, now: Instant, path: String, read: Read) {
        match read {
            // A listing sent with it was ignored if the node is not cached yet.
            Read::Data if self.nodes.contains_key(&path) => self.retryable(now, Job::Data(path)),
            Read::Data => self.retryable(now, Job::Node { path, full: true }),
            Read::Children { full } => {
                let node = Job::Node {
                    path: path.clone(),
                    full: true,
                };
                if self.queued.contains(&node) {
                    self.kit.failed(now); // listed with the node's retry
                } else {
                    self.retryable(now, Job::Children { path, full })
                }
            }
        }
    }

    pub(super) fn on_exists(&mut self, now: Instant, op: OpId, gen: u64, result: Reply) {
        match result {
            Ok(_) => {
                // The node exists: the watch is now a data watch on it.
                self.kit.succeeded();
                let root = self.config.path.clone();
                if self.armed_exists == Some(op) {
                    self.armed_exists = None;
                    self.armed_data.insert(root.clone(), op);
                }
                if gen == self.gen {
                    self.push(Job::Node {
                        path: root,
                        full: false,
                    });
                }
            }
            Err(Error::Server(ErrorCode::NoNode)) => self.kit.succeeded(), // armed
            Err(e) if e.is_retryable() => {
                if self.armed_exists == Some(op) {
                    self.armed_exists = None;
                }
                self.retryable(now, Job::Exists);
            }
            Err(e) if e.ends_session() => {}
            Err(e) => self.finish(CacheEvent::Failed(e)),
        }
    }

    pub(super) fn on_add_watch(&mut self, now: Instant, op: OpId, result: Reply) {
        match result {
            Ok(_) => {
                self.kit.succeeded();
                self.style = WatchStyle::Persistent;
                self.watch_ops.insert(op);
            }
            Err(e) if e.is_retryable() => {
                self.need.add(WATCH);
                self.need.add(RESYNC); // reads answered before the watch may miss changes
                self.kit.failed(now);
            }
            Err(e) if e.ends_session() => {}
            Err(_) => {
                // A pre-3.6 server (Unimplemented) or a refusal: one-shot watches.
                self.style = WatchStyle::OneShot;
                self.need.add(RESYNC);
            }
        }
    }

    pub(super) fn on_notification(&mut self, op: OpId, event: &WatchEvent) {
        let path = event.path.clone();
        if self.cached_depth(&path).is_none() {
            return;
        }
        match event.event_type {
            EventType::NodeCreated => {
                if path == self.config.path && self.armed_exists == Some(op) {
                    self.armed_exists = None;
                }
                self.push(Job::Node { path, full: false });
            }
            EventType::NodeDataChanged => {
                disarm(&mut self.armed_data, &path, op);
                self.push(Job::Data(path));
            }
            EventType::NodeChildrenChanged => {
                disarm(&mut self.armed_child, &path, op);
                self.push(Job::Children { path, full: false });
            }
            EventType::NodeDeleted => {
                disarm(&mut self.armed_data, &path, op);
                disarm(&mut self.armed_child, &path, op);
                // Reads of this path sent meanwhile went without a watch, counting on
                // this one; one of them may find the node re-created (its deletion was
                // notified late, e.g. on a reconnect) and cache it unwatched: read it
                // again with watches.
                if self.one_shot() {
                    if self
                        .kit
                        .any(|o| matches!(o, Op::Data { path: p, .. } if *p == path))
                    {
                        self.push(Job::Data(path.clone()));
                    }
                    if self
                        .kit
                        .any(|o| matches!(o, Op::Children { path: p, .. } if *p == path))
                    {
                        self.push(Job::Children {
                            path: path.clone(),
                            full: false,
                        });
                    }
                }
                if let Some(e) = self.nodes.get(&path) {
                    let czxid = e.node.stat.czxid;
                    self.tombstones.insert(path.clone(), czxid);
                }
                self.remove_subtree(&path);
                if path == self.config.path && self.one_shot() {
                    self.push(Job::Exists);
                }
            }
            _ => {}
        }
    }

    /// A read that asked for a watch (a data watch, or with `children` a child watch)
    /// did not set it: forget the registration; reads sent meanwhile counted on it, so
    /// read again with one.
    fn unarmed(&mut self, op: OpId, path: &str, children: bool) {
        disarm(self.armed(children), path, op);
        let reading = self.kit.any(|o| match o {
            Op::Data { path: p, .. } => !children && p == path,
            Op::Children { path: p, .. } => children && p == path,
            _ => false,
        });
        if self.one_shot() && (reading || self.nodes.contains_key(path)) {
            self.push(if children {
                Job::Children {
                    path: path.into(),
                    full: false,
                }
            } else {
                Job::Data(path.into())
            });
        }
    }

    /// A data read of the current load answered `data` and `stat`.
    fn apply_data(&mut self, path: String, data: Bytes, stat: Stat) {
        if self.tombstones.get(&path).is_some_and(|c| stat.czxid <= *c) {
            return; // the deleted node, read before its deletion
        }
        let Some(depth) = self.cached_depth(&path) else {
            return;
        };
        if depth > 0 && !self.nodes.contains_key(parent_of(&path)) {
            return; // the parent's listing brings it
        }
        let new_node = self
            .nodes
            .get(&path)
            .is_none_or(|e| e.node.stat.czxid != stat.czxid);
        // A re-created node during a load: the ignored listing may have been the
        // load's full one (this read was refused and retried after it), so the
        // new one is full too, or the nodes `remove_below` keeps below it (created
        // after it, cached before this load) would not be read again by this
        // load. A node not cached has nothing cached below it.
        let full = self.load.is_loading() && new_node && self.nodes.contains_key(&path);
        if new_node && self.lists_children(depth) && !self.listing_pending(&path, full) {
            // Its listing was ignored (answered before this read): list it again.
            self.push(Job::Children {
                path: path.clone(),
                full,
            });
        }
        self.saw(&path);
        match self.nodes.get_mut(&path) {
            None => self.insert(path, data, stat),
            Some(e) => {
                let held = (e.node.stat.czxid, e.node.stat.mzxid);
                let new = (stat.czxid, stat.mzxid);
                if new < held {
                    return; // stale
                }
                if stat.czxid != e.node.stat.czxid {
                    // Re-created while we were away: the old node goes with
                    // what was created under it (descendants created after the
                    // new node are its own and stay).
                    self.remove_below(&path, stat.czxid);
                    self.insert(path, data, stat);
                } else if new > held {
                    let data = kept(&data);
                    e.node = CachedNode {
                        data: data.clone(),
                        stat,
                    };
                    self.kit.emit(CacheEvent::Changed { path, data, stat });
                } else {
                    e.node.stat = stat; // children may have changed
                }
            }
        }
    }

    /// A listing of the current load answered `children` and `stat`.
    fn apply_children(&mut self, path: String, children: Vec<String>, stat: Stat, full: bool) {
        let Some(e) = self.nodes.get_mut(&path) else {
            return; // not (or no longer) cached: its data read decides
        };
        if e.node.stat.czxid != stat.czxid || stat.pzxid < e.pzxid {
            return; // another incarnation, or an older listing
        }
        e.pzxid = stat.pzxid;
        self.saw(&path);
        let listed: BTreeSet<&str> = children.iter().map(String::as_str).collect();
        for name in self.children(&path) {
            let child = join(&path, &name);
            if listed.contains(name.as_str()) {
                self.saw(&child);
            } else {
                self.remove_subtree(&child);
            }
        }
        // A waiting child no longer listed is gone.
        let prefix = join(&path, "");
        self.deferred.retain(|d| {
            d.strip_prefix(prefix.as_str())
                .is_none_or(|name| name.contains('/') || listed.contains(name))
        });
        let new = children
            .iter()
            .map(|c| join(&path, c))
            .filter(|c| !self.nodes.contains_key(c) && !self.deferred.contains(c))
            .count();
        // Only nodes known to be there count: a resync's cached nodes not
        // re-read yet may be gone (their inserts wait, see `insert`).
        let len = self.known(new);
        if len > self.config.max_nodes {
            return self.too_large(len);
        }
        let mut children = children;
        children.sort_unstable();
        for c in children {
            let child = join(&path, &c);
            if full || !self.nodes.contains_key(&child) {
                self.push(Job::Node { path: child, full });
            }
        }
    }
}
