//! Writes: create, delete, setData, setACL, check, and multi (atomic, per-op results).

use super::*;

impl ServerModel {
    pub(super) fn write(
        &mut self,
        conn: ConnId,
        sid: i64,
        request: Request,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> OpResult {
        match request {
            Request::Create(r) => self
                .create(
                    conn, sid, &r.path, r.data, &r.acl, r.flags, -1, zxid, changes,
                )
                .map(|(p, _)| Response::Path(p)),
            Request::Create2(r) | Request::CreateContainer(r) => self
                .create(
                    conn, sid, &r.path, r.data, &r.acl, r.flags, -1, zxid, changes,
                )
                .map(|(path, stat)| Response::PathStat { path, stat }),
            Request::CreateTtl(r) => {
                if !self.config.ttl_enabled {
                    return Err(ErrorCode::Unimplemented);
                }
                self.create(
                    conn, sid, &r.path, r.data, &r.acl, r.flags, r.ttl, zxid, changes,
                )
                .map(|(path, stat)| Response::PathStat { path, stat })
            }
            Request::Delete(r) => self
                .delete(conn, &r.path, r.version, zxid, changes)
                .map(|_| Response::Empty),
            Request::SetData(r) => self
                .set_data(conn, &r.path, r.data, r.version, zxid, changes)
                .map(Response::Stat),
            Request::SetAcl(r) => self
                .set_acl(conn, &r.path, &r.acl, r.version, zxid)
                .map(Response::Stat),
            Request::Multi(ops) => Ok(Response::Multi(self.multi(conn, sid, ops, zxid, changes))),
            // reconfigEnabled=false: refused in the leader's pipeline, a failed write.
            Request::Reconfig(_) => Err(ErrorCode::ReconfigDisabled),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    pub(super) fn multi(
        &mut self,
        conn: ConnId,
        sid: i64,
        ops: Vec<MultiOp>,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> Vec<MultiResult> {
        let tree = self.tree.clone();
        let ephemerals: Vec<(i64, BTreeSet<String>)> = self
            .sessions
            .iter()
            .map(|(id, s)| (*id, s.ephemerals.clone()))
            .collect();
        let count = ops.len();
        let mut results = Vec::new();
        let mut failed = None;
        for (i, op) in ops.into_iter().enumerate() {
            let r = match op {
                MultiOp::Create(r) | MultiOp::Create2(r) => {
                    // 3.8 turns create2 inside a multi into create (path only), except
                    // for containers, which become createContainer (path and Stat).
                    let container = r.flags == CreateMode::Container.to_i32();
                    self.create(
                        conn, sid, &r.path, r.data, &r.acl, r.flags, -1, zxid, changes,
                    )
                    .map(|(path, stat)| {
                        if container {
                            MultiResult::Create2 { path, stat }
                        } else {
                            MultiResult::Create(path)
                        }
                    })
                }
                MultiOp::CreateContainer(r) => self
                    .create(
                        conn, sid, &r.path, r.data, &r.acl, r.flags, -1, zxid, changes,
                    )
                    .map(|(path, stat)| MultiResult::Create2 { path, stat }),
                MultiOp::CreateTtl(r) => {
                    if self.config.ttl_enabled {
                        self.create(
                            conn, sid, &r.path, r.data, &r.acl, r.flags, r.ttl, zxid, changes,
                        )
                        .map(|(path, stat)| MultiResult::Create2 { path, stat })
                    } else {
                        Err(ErrorCode::Unimplemented)
                    }
                }
                MultiOp::Delete(r) => self
                    .delete(conn, &r.path, r.version, zxid, changes)
                    .map(|_| MultiResult::Delete),
                MultiOp::SetData(r) => self
                    .set_data(conn, &r.path, r.data, r.version, zxid, changes)
                    .map(MultiResult::SetData),
                MultiOp::Check(r) => self
                    .check(conn, &r.path, r.version)
                    .map(|_| MultiResult::Check),
            };
            match r {
                Ok(result) => results.push(result),
                Err(code) => {
                    failed = Some((i, code));
                    break;
                }
            }
        }
        let Some((at, code)) = failed else {
            return results;
        };
        // Roll back and answer like 3.8: Ok before the failing op, its code, then -2.
        self.tree = tree;
        for (id, eph) in ephemerals {
            if let Some(s) = self.sessions.get_mut(&id) {
                s.ephemerals = eph;
            }
        }
        changes.clear();
        failed_multi(count, at, code)
    }

    pub(super) fn check_version(current: i32, expected: i32) -> Result<(), ErrorCode> {
        if expected != -1 && expected != current {
            Err(ErrorCode::BadVersion)
        } else {
            Ok(())
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn create(
        &mut self,
        conn: ConnId,
        sid: i64,
        path: &str,
        data: Bytes,
        acl: &[Acl],
        flags: i32,
        ttl: i64,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> Result<(String, Stat), ErrorCode> {
        let (mode, full, acl) = self.check_create(conn, path, acl, flags, ttl)?;
        let parent_path = match path.rfind('/') {
            Some(0) | None => "/",
            Some(slash) => &path[..slash],
        };
        let kind = match mode {
            CreateMode::Ephemeral | CreateMode::EphemeralSequential => Kind::Ephemeral(sid),
            CreateMode::Container => Kind::Container,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl => {
                Kind::Ttl(ttl)
            }
            _ => Kind::Persistent,
        };
        let now = self.now_ms;
        let stat = Stat {
            czxid: zxid,
            mzxid: zxid,
            ctime: now,
            mtime: now,
            pzxid: zxid,
            ..Stat::default()
        };
        let node = Node {
            data,
            acl,
            stat,
            kind: kind.clone(),
            children: BTreeSet::new(),
            creates: 0,
            deletes: 0,
        };
        let visible = node.visible_stat();
        let parent = self
            .tree
            .nodes
            .get_mut(parent_path)
            .expect("looked up above");
        parent.children.insert(name_of(&full).to_string());
        parent.creates = parent.creates.wrapping_add(1);
        parent.stat.pzxid = zxid;
        self.tree.nodes.insert(full.clone(), node);
        if let Kind::Ephemeral(owner) = kind {
            if let Some(s) = self.sessions.get_mut(&owner) {
                s.ephemerals.insert(full.clone());
            }
        }
        changes.push(Change::Created(full.clone()));
        Ok((full, visible))
    }

    /// The checks of a create, in the server's order: mode and TTL, path, ACL, parent
    /// (exists, lets us create, is no ephemeral), name free. Gives the mode, the full
    /// path (with its sequence number) and the ACL to store.
    fn check_create(
        &self,
        conn: ConnId,
        path: &str,
        acl: &[Acl],
        flags: i32,
        ttl: i64,
    ) -> Result<(CreateMode, String, Vec<Acl>), ErrorCode> {
        let mode = CreateMode::from_i32(flags).ok_or(ErrorCode::BadArguments)?;
        if mode.is_ttl() && !self.config.ttl_enabled {
            return Err(ErrorCode::Unimplemented);
        }
        if mode.is_ttl() {
            if !(1..=0xFF_FFFF_FFFF).contains(&ttl) {
                return Err(ErrorCode::BadArguments);
            }
        } else if ttl >= 0 {
            return Err(ErrorCode::BadArguments);
        }
        let Some(slash) = path.rfind('/') else {
            return Err(ErrorCode::BadArguments);
        };
        if path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = if slash == 0 { "/" } else { &path[..slash] };
        let acl = self.fixup_acl(conn, acl)?;
        let parent = self.tree.nodes.get(parent_path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &parent.acl, perms::CREATE) {
            return Err(ErrorCode::NoAuth);
        }
        let full = if mode.is_sequential() {
            format!("{path}{:010}", parent.creates)
        } else {
            path.to_string()
        };
        validate_path(&full).map_err(|_| ErrorCode::BadArguments)?;
        if self.tree.nodes.contains_key(&full) {
            return Err(ErrorCode::NodeExists);
        }
        if matches!(parent.kind, Kind::Ephemeral(_)) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        Ok((mode, full, acl))
    }

    pub(super) fn delete(
        &mut self,
        conn: ConnId,
        path: &str,
        version: i32,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> Result<(), ErrorCode> {
        validate_path(path).map_err(|_| ErrorCode::BadArguments)?;
        if matches!(
            path,
            "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config"
        ) {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = parent_of(path).ok_or(ErrorCode::BadArguments)?;
        let parent = self.tree.nodes.get(parent_path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &parent.acl, perms::DELETE) {
            return Err(ErrorCode::NoAuth);
        }
        let node = self.tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        Self::check_version(node.stat.version, version)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        if let Some(acl) = self.remove_node(path, zxid) {
            changes.push(Change::Deleted(path.to_string(), acl));
        }
        Ok(())
    }

    /// Removes a childless node and updates its parent and owner; its ACL if it was there.
    pub(super) fn remove_node(&mut self, path: &str, zxid: i64) -> Option<Vec<Acl>> {
        let node = self.tree.nodes.remove(path)?;
        if let Some(parent) = parent_of(path).and_then(|p| self.tree.nodes.get_mut(p)) {
            parent.children.remove(name_of(path));
            parent.deletes = parent.deletes.wrapping_add(1);
            parent.stat.pzxid = zxid;
        }
        if let Kind::Ephemeral(owner) = node.kind {
            if let Some(s) = self.sessions.get_mut(&owner) {
                s.ephemerals.remove(path);
            }
        }
        Some(node.acl)
    }

    pub(super) fn set_data(
        &mut self,
        conn: ConnId,
        path: &str,
        data: Bytes,
        version: i32,
        zxid: i64,
        changes: &mut Vec<Change>,
    ) -> Result<Stat, ErrorCode> {
        validate_path(path).map_err(|_| ErrorCode::BadArguments)?;
        let node = self.tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &node.acl, perms::WRITE) {
            return Err(ErrorCode::NoAuth);
        }
        Self::check_version(node.stat.version, version)?;
        let now = self.now_ms;
        let node = self.tree.nodes.get_mut(path).expect("looked up above");
        node.data = data;
        node.stat.version = node.stat.version.wrapping_add(1);
        node.stat.mzxid = zxid;
        node.stat.mtime = now;
        let stat = node.visible_stat();
        changes.push(Change::DataChanged(path.to_string()));
        Ok(stat)
    }

    pub(super) fn set_acl(
        &mut self,
        conn: ConnId,
        path: &str,
        acl: &[Acl],
        version: i32,
        _zxid: i64,
    ) -> Result<Stat, ErrorCode> {
        validate_path(path).map_err(|_| ErrorCode::BadArguments)?;
        let acl = self.fixup_acl(conn, acl)?;
        let node = self.tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &node.acl, perms::ADMIN) {
            return Err(ErrorCode::NoAuth);
        }
        Self::check_version(node.stat.aversion, version)?;
        let node = self.tree.nodes.get_mut(path).expect("looked up above");
        node.acl = acl;
        node.stat.aversion = node.stat.aversion.wrapping_add(1);
        Ok(node.visible_stat())
    }

    pub(super) fn check(&self, conn: ConnId, path: &str, version: i32) -> Result<(), ErrorCode> {
        validate_path(path).map_err(|_| ErrorCode::BadArguments)?;
        let node = self.tree.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.allowed(conn, &node.acl, perms::READ) {
            return Err(ErrorCode::NoAuth);
        }
        Self::check_version(node.stat.version, version)
    }
}

pub(super) fn is_write(r: &Request) -> bool {
    matches!(
        r,
        Request::Create(_)
            | Request::Create2(_)
            | Request::CreateContainer(_)
            | Request::CreateTtl(_)
            | Request::Delete(_)
            | Request::SetData(_)
            | Request::SetAcl(_)
            | Request::Multi(_)
            | Request::Reconfig(_)
    )
}
