//! Connections: the handshake, closing, the lagging follower a re-attaching session may
//! land on (snapshots, catching up) and the reaping of containers and TTL nodes.

use super::*;

impl ServerModel {
    /// Keeps a copy of the tree if the last one is old enough and the tree moved on.
    pub(super) fn maybe_snapshot(&mut self) {
        let every = self.config.snapshot_every_ms;
        let kept = self.config.snapshots_kept;
        if every <= 0 || kept == 0 {
            return;
        }
        if let Some(last) = self.snapshots.back() {
            if last.zxid == self.zxid || self.now_ms.saturating_sub(last.taken_ms) < every {
                return;
            }
        }
        while self.snapshots.len() >= kept {
            self.snapshots.pop_front();
        }
        self.snapshots.push_back(Snapshot {
            zxid: self.zxid,
            taken_ms: self.now_ms,
            tree: Arc::new(self.tree.clone()),
        });
    }

    /// The snapshot a follower that has seen up to `last_zxid_seen` may be at, if any.
    pub(super) fn lag_snapshot(&self, last_zxid_seen: i64, pick: u64) -> Option<(i64, Arc<Tree>)> {
        let eligible = || {
            self.snapshots
                .iter()
                .rev()
                .filter(|s| s.zxid >= last_zxid_seen && s.zxid < self.zxid)
        };
        let n = eligible().count();
        if n == 0 {
            return None;
        }
        let index = usize::try_from(pick % n as u64).unwrap_or(0);
        eligible().nth(index).map(|s| (s.zxid, Arc::clone(&s.tree)))
    }

    /// The follower behind `conn` applies what it missed: it reads the live tree from
    /// now on, and the watches it registered meanwhile fire for what changed since.
    pub(super) fn catch_up(&mut self, conn: ConnId) {
        let Some(lag) = self.conns.get_mut(&conn).and_then(|c| c.lagging.take()) else {
            return;
        };
        let Lagging {
            tree: old,
            zxid,
            mut watches,
            ..
        } = *lag;
        let persistent = core::mem::take(&mut watches.persistent_watches);
        let recursive = core::mem::take(&mut watches.persistent_recursive_watches);
        watches.relative_zxid = zxid;
        let (notes, arm) = check_watches(&self.tree, &watches);
        let mut sent: BTreeSet<(String, i32)> = BTreeSet::new();
        for (path, t) in notes {
            // A follower applying a change triggers each watcher once per path.
            if sent.insert((path.clone(), t.to_i32())) {
                self.notify(conn, t, &path);
            }
        }
        self.arm(conn, arm);
        let mut changed: Vec<(String, EventType)> = Vec::new();
        for path in &persistent {
            diff_node(&old, &self.tree, path, true, &mut changed);
            add(&mut self.watches.persistent, path, conn);
        }
        for path in &recursive {
            let prefix = if path == "/" {
                String::from("/")
            } else {
                format!("{path}/")
            };
            let under = |tree: &Tree| -> Vec<String> {
                tree.nodes
                    .range(path.clone()..)
                    .take_while(|(p, _)| *p == path || p.starts_with(&prefix))
                    .map(|(p, _)| p.clone())
                    .collect()
            };
            let mut paths: BTreeSet<String> = under(&old).into_iter().collect();
            paths.extend(under(&self.tree));
            for p in &paths {
                diff_node(&old, &self.tree, p, false, &mut changed);
            }
            add(&mut self.watches.recursive, path, conn);
        }
        for (path, t) in changed {
            if sent.insert((path.clone(), t.to_i32())) {
                self.notify(conn, t, &path);
            }
        }
    }

    pub(super) fn reap(&mut self) {
        let now = self.now_ms;
        let doomed: Vec<String> = self
            .tree
            .nodes
            .iter()
            .filter(|(_, n)| {
                n.children.is_empty()
                    && match n.kind {
                        Kind::Container => n.creates > 0,
                        Kind::Ttl(ttl) => now - n.stat.mtime > ttl,
                        _ => false,
                    }
            })
            .map(|(p, _)| p.clone())
            .collect();
        for path in doomed {
            self.zxid += 1;
            let zxid = self.zxid;
            if let Some(acl) = self.remove_node(&path, zxid) {
                self.fire(&[Change::Deleted(path, acl)]);
            }
        }
    }

    pub(super) fn close_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.closed = true;
            c.lagging = None; // nothing left to catch up for
            self.dirty.push(conn);
        }
        self.forget_watches(conn);
        if let Some(sid) = self.conns.get(&conn).and_then(|c| c.session) {
            if let Some(s) = self.sessions.get_mut(&sid) {
                if s.conn == Some(conn) {
                    s.conn = None;
                }
            }
        }
    }

    pub(super) fn drop_conn(&mut self, conn: ConnId) {
        self.close_conn(conn);
        self.conns.remove(&conn);
    }

    pub(super) fn forget_watches(&mut self, conn: ConnId) {
        for map in [
            &mut self.watches.data,
            &mut self.watches.child,
            &mut self.watches.persistent,
            &mut self.watches.recursive,
        ] {
            map.retain(|_, set| {
                set.remove(&conn);
                !set.is_empty()
            });
        }
    }

    pub(super) fn handshake(&mut self, conn: ConnId, mut frame: Bytes) {
        let Ok(req) = ConnectRequest::decode(&mut frame) else {
            return self.close_conn(conn);
        };
        if req.last_zxid_seen > self.zxid {
            return self.close_conn(conn); // the client has seen a future: refuse silently
        }
        let timeout = req.timeout_ms.clamp(
            self.config.min_session_timeout_ms,
            self.config.max_session_timeout_ms,
        );
        let answer = if req.session_id == 0 {
            self.zxid += 1; // createSession
            let id = self.next_session;
            self.next_session += 1;
            let passwd = Bytes::from(id.to_be_bytes().repeat(2));
            self.sessions.insert(
                id,
                SimSession {
                    passwd: passwd.clone(),
                    timeout_ms: timeout,
                    last_heard_ms: self.now_ms,
                    conn: Some(conn),
                    ephemerals: BTreeSet::new(),
                },
            );
            Some((id, passwd, timeout))
        } else {
            match self.sessions.get(&req.session_id) {
                Some(s) if s.passwd == req.passwd => {
                    let old = s.conn;
                    let (passwd, timeout) = (s.passwd.clone(), s.timeout_ms);
                    if let Some(old) = old.filter(|o| *o != conn) {
                        self.close_conn(old); // re-attach closes the older connection
                    }
                    let s = self.sessions.get_mut(&req.session_id).expect("checked");
                    s.conn = Some(conn);
                    s.last_heard_ms = self.now_ms;
                    self.start_lag(conn, req.last_zxid_seen);
                    self.start_pending_lag(conn, req.session_id, req.last_zxid_seen);
                    Some((req.session_id, passwd, timeout))
                }
                _ => None,
            }
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let resp = match &answer {
            Some((id, passwd, timeout)) => {
                c.session = Some(*id);
                ConnectResponse {
                    protocol_version: 0,
                    timeout_ms: *timeout,
                    session_id: *id,
                    passwd: passwd.clone(),
                    read_only: false,
                }
            }
            None => ConnectResponse {
                passwd: Bytes::from_static(&[0; 16]),
                ..Default::default()
            },
        };
        encode_connect_response(&mut c.out, &resp);
        self.replies_sent += 1;
        self.dirty.push(conn);
        if answer.is_none() {
            c.closed = true;
        }
    }

    /// A re-attach on a connection made by `connect_lagging`: pick the follower's state.
    pub(super) fn start_lag(&mut self, conn: ConnId, last_zxid_seen: i64) {
        let Some(lag) = self.conns.get_mut(&conn).and_then(|c| c.lag.take()) else {
            return;
        };
        if lag.catch_up_ms <= 0 {
            return;
        }
        let Some((zxid, tree)) = self.lag_snapshot(last_zxid_seen, lag.pick) else {
            return;
        };
        let until_ms = self.now_ms.saturating_add(lag.catch_up_ms);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.lagging = Some(Box::new(Lagging {
                tree,
                zxid,
                until_ms,
                watches: SetWatches2::default(),
            }));
        }
    }

    /// The follower [`lag_session`](Self::lag_session) stopped, for the session's new
    /// connection (unless the client has seen more than it has: then no lag).
    pub(super) fn start_pending_lag(&mut self, conn: ConnId, id: i64, last_zxid_seen: i64) {
        let Some(lag) = self.pending_lags.remove(&id) else {
            return;
        };
        if last_zxid_seen > lag.zxid {
            return;
        }
        let until_ms = self.now_ms.saturating_add(lag.catch_up_ms);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.lagging = Some(Box::new(Lagging {
                tree: lag.tree,
                zxid: lag.zxid,
                until_ms,
                watches: SetWatches2::default(),
            }));
        }
    }
}
