//! Reads (from the current tree or a lagging follower's), the watches they leave, and
//! what SetWatches fires on a reconnect.

use super::*;

impl ServerModel {
    /// The old tree a lagging `conn` reads from.
    pub(super) fn lagging_tree(&self, conn: ConnId) -> Option<Arc<Tree>> {
        self.lagging(conn).map(|l| Arc::clone(&l.tree))
    }

    /// The zxid a read on `conn` is answered with: the follower's.
    pub(super) fn read_zxid(&self, conn: ConnId) -> i64 {
        self.lag_zxid(conn).unwrap_or(self.zxid)
    }

    /// Registers a one-shot watch: live, or held back on a lagging connection.
    pub(super) fn watch(&mut self, conn: ConnId, on: WatchOn, path: &str) {
        let mut w = SetWatches2::default();
        let list = match on {
            WatchOn::Data => &mut w.data_watches,
            WatchOn::Exist => &mut w.exist_watches,
            WatchOn::Child => &mut w.child_watches,
        };
        list.push(path.to_string());
        self.arm(conn, w);
    }

    /// Registers watches (the relative zxid is ignored): in the live tables, or, on a
    /// lagging connection, held back until it catches up.
    pub(super) fn arm(&mut self, conn: ConnId, w: SetWatches2) {
        if let Some(l) = self.lagging_mut(conn) {
            let held = &mut l.watches;
            for (from, to) in [
                (w.data_watches, &mut held.data_watches),
                (w.exist_watches, &mut held.exist_watches),
                (w.child_watches, &mut held.child_watches),
                (w.persistent_watches, &mut held.persistent_watches),
                (
                    w.persistent_recursive_watches,
                    &mut held.persistent_recursive_watches,
                ),
            ] {
                for path in from {
                    if !to.contains(&path) {
                        to.push(path);
                    }
                }
            }
            return;
        }
        // As in the server, exist watches live in the data watch table.
        for path in w.data_watches.iter().chain(&w.exist_watches) {
            add(&mut self.watches.data, path, conn);
        }
        for path in &w.child_watches {
            add(&mut self.watches.child, path, conn);
        }
        for path in &w.persistent_watches {
            add(&mut self.watches.persistent, path, conn);
        }
        for path in &w.persistent_recursive_watches {
            add(&mut self.watches.recursive, path, conn);
        }
    }

    pub(super) fn read(&mut self, conn: ConnId, sid: i64, request: Request) -> OpResult {
        match request {
            Request::AddWatch(r) => {
                let mut w = SetWatches2::default();
                match AddWatchMode::from_i32(r.mode) {
                    Some(AddWatchMode::Persistent) => w.persistent_watches.push(r.path),
                    Some(AddWatchMode::PersistentRecursive) => {
                        w.persistent_recursive_watches.push(r.path)
                    }
                    None => return Err(ErrorCode::BadArguments),
                }
                self.arm(conn, w);
                Ok(Response::WatchAdded)
            }
            Request::CheckWatches(r) => self.watch_tables(conn, &r, false),
            Request::RemoveWatches(r) => self.watch_tables(conn, &r, true),
            request => {
                let snapshot = self.lagging_tree(conn);
                let tree = snapshot.as_deref().unwrap_or(&self.tree);
                let mut watch = None;
                let result = self.read_tree(tree, conn, sid, request, &mut watch);
                if let Some((on, path)) = watch {
                    self.watch(conn, on, &path);
                }
                result
            }
        }
    }

    /// Reads that only look at `tree` (the live one, or a lagging follower's); the
    /// watch to register goes to `watch`.
    pub(super) fn read_tree(
        &self,
        tree: &Tree,
        conn: ConnId,
        sid: i64,
        request: Request,
        watch: &mut Option<(WatchOn, String)>,
    ) -> OpResult {
        let two = matches!(request, Request::GetChildren2(_));
        match request {
            Request::Exists(r) => {
                let node = tree.nodes.get(&r.path);
                if r.watch {
                    let on = if node.is_some() {
                        WatchOn::Data
                    } else {
                        WatchOn::Exist
                    };
                    *watch = Some((on, r.path));
                }
                node.map(|n| Response::Stat(n.visible_stat()))
                    .ok_or(ErrorCode::NoNode)
            }
            Request::GetData(r) => {
                let data = self.get_data(tree, conn, &r.path)?;
                if r.watch {
                    *watch = Some((WatchOn::Data, r.path));
                }
                Ok(data)
            }
            Request::GetChildren(r) | Request::GetChildren2(r) => {
                let node = tree.nodes.get(&r.path).ok_or(ErrorCode::NoNode)?;
                if !self.allowed(conn, &node.acl, perms::READ) {
                    return Err(ErrorCode::NoAuth);
                }
                let children: Vec<String> = node.children.iter().cloned().collect();
                let stat = node.visible_stat();
                if r.watch {
                    *watch = Some((WatchOn::Child, r.path));
                }
                Ok(if two {
                    Response::Children2 { children, stat }
                } else {
                    Response::Children(children)
                })
            }
            Request::GetAcl(r) => {
                let node = tree.nodes.get(&r.path).ok_or(ErrorCode::NoNode)?;
                if !self.allowed(conn, &node.acl, perms::READ | perms::ADMIN) {
                    return Err(ErrorCode::NoAuth);
                }
                Ok(Response::Acl {
                    acl: node.acl.clone(),
                    stat: node.visible_stat(),
                })
            }
            Request::MultiRead(ops) => Ok(self.multi_read(tree, conn, ops)),
            Request::GetEphemerals(r) => self.ephemerals(tree, sid, &r.path),
            Request::GetAllChildrenNumber(r) => all_children_number(tree, &r.path),
            Request::WhoAmI => Ok(self.who_am_i(conn)),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    /// multiRead: each read's result or error, none of them failing the others.
    fn multi_read(&self, tree: &Tree, conn: ConnId, ops: Vec<ReadOp>) -> Response {
        let mut results = Vec::new();
        for op in ops {
            let r = match op {
                ReadOp::GetData(r) => match self.get_data(tree, conn, &r.path) {
                    Ok(Response::Data { data, stat }) => MultiResult::GetData { data, stat },
                    Ok(_) => MultiResult::Error(ErrorCode::SystemError),
                    Err(e) => MultiResult::Error(e),
                },
                ReadOp::GetChildren(r) => match tree.nodes.get(&r.path) {
                    None => MultiResult::Error(ErrorCode::NoNode),
                    Some(n) if !self.allowed(conn, &n.acl, perms::READ) => {
                        MultiResult::Error(ErrorCode::NoAuth)
                    }
                    Some(n) => MultiResult::GetChildren(n.children.iter().cloned().collect()),
                },
            };
            results.push(r);
        }
        Response::Multi(results)
    }

    /// getEphemerals: the session's ephemeral nodes under `path`.
    fn ephemerals(&self, tree: &Tree, sid: i64, path: &str) -> OpResult {
        let session = self.sessions.get(&sid).ok_or(ErrorCode::SessionExpired)?;
        let prefix = if path == "/" { "" } else { path };
        let ephemerals = if core::ptr::eq(tree, &self.tree) {
            session
                .ephemerals
                .iter()
                .filter(|p| p.starts_with(prefix))
                .cloned()
                .collect()
        } else {
            // A follower knows the session's ephemerals as of its own tree.
            tree.nodes
                .iter()
                .filter(|(p, n)| n.kind == Kind::Ephemeral(sid) && p.starts_with(prefix))
                .map(|(p, _)| p.clone())
                .collect()
        };
        Ok(Response::Children(ephemerals))
    }

    /// whoAmI: the connection's address, then each identity it added.
    fn who_am_i(&self, conn: ConnId) -> Response {
        let mut infos = alloc::vec![ClientInfo {
            auth_scheme: "ip".into(),
            user: "127.0.0.1".into()
        }];
        if let Some(c) = self.conns.get(&conn) {
            for id in &c.auth {
                let user = id.id.split(':').next().unwrap_or("").to_string();
                infos.push(ClientInfo {
                    auth_scheme: id.scheme.clone(),
                    user,
                });
            }
        }
        Response::WhoAmI(infos)
    }

    pub(super) fn get_data(&self, tree: &Tree, conn: ConnId, path: &str) -> OpResult {
        let node = tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &node.acl, perms::READ) {
            return Err(ErrorCode::NoAuth);
        }
        Ok(Response::Data {
            data: node.data.clone(),
            stat: node.visible_stat(),
        })
    }
}

/// What a watch on `path` hears while a follower goes from `old` to `new`, coalesced
/// to one event per kind of change: created, deleted (deleted and re-created is both),
/// data changed, and children changed if `children` (persistent, not recursive).
pub(super) fn diff_node(
    old: &Tree,
    new: &Tree,
    path: &str,
    children: bool,
    out: &mut Vec<(String, EventType)>,
) {
    let mut push = |t| out.push((path.to_string(), t));
    match (old.nodes.get(path), new.nodes.get(path)) {
        (None, None) => {}
        (None, Some(_)) => push(EventType::NodeCreated),
        (Some(_), None) => push(EventType::NodeDeleted),
        (Some(a), Some(b)) if a.stat.czxid != b.stat.czxid => {
            push(EventType::NodeDeleted);
            push(EventType::NodeCreated);
        }
        (Some(a), Some(b)) => {
            if a.stat.mzxid != b.stat.mzxid {
                push(EventType::NodeDataChanged);
            }
            if children && a.stat.pzxid != b.stat.pzxid {
                push(EventType::NodeChildrenChanged);
            }
        }
    }
}

/// SetWatches against `tree`: the notifications due now (for changes after
/// `relative_zxid`), and the watches to register. Exist watches on a node that exists
/// fire NodeCreated; data and child watches on a missing node fire NodeDeleted.
pub(super) fn check_watches(
    tree: &Tree,
    w: &SetWatches2,
) -> (Vec<(String, EventType)>, SetWatches2) {
    let mut notes: Vec<(String, EventType)> = Vec::new();
    let mut arm = SetWatches2::default();
    for path in &w.data_watches {
        match tree.nodes.get(path) {
            None => notes.push((path.clone(), EventType::NodeDeleted)),
            Some(n) if n.stat.mzxid > w.relative_zxid => {
                notes.push((path.clone(), EventType::NodeDataChanged))
            }
            Some(_) => arm.data_watches.push(path.clone()),
        }
    }
    for path in &w.exist_watches {
        if tree.nodes.contains_key(path) {
            notes.push((path.clone(), EventType::NodeCreated));
        } else {
            arm.exist_watches.push(path.clone());
        }
    }
    for path in &w.child_watches {
        match tree.nodes.get(path) {
            None => notes.push((path.clone(), EventType::NodeDeleted)),
            Some(n) if n.stat.pzxid > w.relative_zxid => {
                notes.push((path.clone(), EventType::NodeChildrenChanged))
            }
            Some(_) => arm.child_watches.push(path.clone()),
        }
    }
    arm.persistent_watches.clone_from(&w.persistent_watches);
    arm.persistent_recursive_watches
        .clone_from(&w.persistent_recursive_watches);
    (notes, arm)
}

/// getAllChildrenNumber: the number of descendants of `path` (the node itself not counted).
fn all_children_number(tree: &Tree, path: &str) -> OpResult {
    if !tree.nodes.contains_key(path) {
        return Err(ErrorCode::NoNode);
    }
    let prefix = if path == "/" {
        String::from("/")
    } else {
        format!("{path}/")
    };
    // Descendants only: "/" starts its own prefix.
    let n = tree
        .nodes
        .range(prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&prefix))
        .filter(|(p, _)| *p != path)
        .count();
    Ok(Response::Count(i32::try_from(n).unwrap_or(i32::MAX)))
}
