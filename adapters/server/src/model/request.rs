//! A request frame: decoded, checked against the session and the ACLs, dispatched, and
//! its reply written; the end of a session.

use super::*;

impl ServerModel {
    pub(super) fn reply(&mut self, conn: ConnId, xid: i32, zxid: i64, result: &OpResult) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        self.replies_sent += 1;
        match result {
            Ok(body) => encode_reply(&mut c.out, &ReplyHeader { xid, zxid, err: 0 }, Some(body)),
            Err(code) => encode_reply(
                &mut c.out,
                &ReplyHeader {
                    xid,
                    zxid,
                    err: code.to_i32(),
                },
                None,
            ),
        }
    }

    pub(super) fn request(&mut self, conn: ConnId, frame: Bytes) {
        let Ok((header, body)) = decode_request(frame) else {
            return self.close_conn(conn);
        };
        let Some(sid) = self.conns.get(&conn).and_then(|c| c.session) else {
            return;
        };
        match self.sessions.get_mut(&sid) {
            Some(s) => s.last_heard_ms = self.now_ms,
            None => return self.close_conn(conn), // session gone under the connection
        }
        if self
            .lagging(conn)
            .is_some_and(|l| l.until_ms <= self.now_ms)
        {
            self.catch_up(conn);
        }
        if header.op == OpCode::Check.to_i32() {
            return; // 3.8 never answers a standalone check
        }
        let request = match Request::decode(header.op, body) {
            Ok(r) => r,
            Err(_) if OpCode::from_i32(header.op).is_none() => {
                self.reply(conn, header.xid, -1, &Err(ErrorCode::Unimplemented));
                return self.close_conn(conn);
            }
            Err(_) => {
                let zxid = self.read_zxid(conn);
                self.reply(conn, header.xid, zxid, &Err(ErrorCode::MarshallingError));
                return;
            }
        };
        if let Some((n, code)) = self.failing {
            let plumbing = matches!(
                request,
                Request::Ping
                    | Request::Auth(_)
                    | Request::SetWatches(_)
                    | Request::SetWatches2(_)
                    | Request::CloseSession
            );
            if !plumbing {
                self.failing = (n > 1).then_some((n - 1, code));
                let zxid = self.read_zxid(conn);
                return self.reply(conn, header.xid, zxid, &Err(code));
            }
        }
        self.answer(conn, sid, header.xid, request);
    }

    /// Carries out a decoded request of session `sid` and writes its reply.
    fn answer(&mut self, conn: ConnId, sid: i64, xid: i32, request: Request) {
        match request {
            Request::Ping => {
                let zxid = self.read_zxid(conn);
                self.reply(conn, xid, zxid, &Ok(Response::Empty));
            }
            Request::Auth(p) => self.add_auth(conn, xid, &p),
            Request::CloseSession => {
                self.zxid += 1;
                let zxid = self.zxid;
                self.reply(conn, xid, zxid, &Ok(Response::Empty));
                self.end_session(sid);
                self.close_conn(conn);
            }
            Request::SetWatches(w) => {
                let w = SetWatches2 {
                    relative_zxid: w.relative_zxid,
                    data_watches: w.data_watches,
                    exist_watches: w.exist_watches,
                    child_watches: w.child_watches,
                    ..Default::default()
                };
                self.set_watches(conn, &w);
                let zxid = self.read_zxid(conn);
                self.reply(conn, xid, zxid, &Ok(Response::Empty));
            }
            Request::SetWatches2(w) => {
                self.set_watches(conn, &w);
                let zxid = self.read_zxid(conn);
                self.reply(conn, xid, zxid, &Ok(Response::Empty));
            }
            Request::Sasl(_) => {
                // A server with no SASL set up answers every token with an empty one.
                self.reply(conn, xid, 0, &Ok(Response::Sasl(Bytes::new())));
            }
            Request::Sync(r) => {
                // The follower applies everything up to the leader's state first.
                self.catch_up(conn);
                self.reply(conn, xid, self.zxid, &Ok(Response::Path(r.path)));
            }
            request if is_write(&request) => {
                // Through the leader: the follower applies what it missed, then this.
                self.catch_up(conn);
                self.zxid += 1; // failed writes consume a zxid too
                let zxid = self.zxid;
                let mut changes = Vec::new();
                let result = self.write(conn, sid, request, zxid, &mut changes);
                self.fire(&changes);
                self.reply(conn, xid, zxid, &result);
            }
            request => {
                let result = self.read(conn, sid, request);
                let zxid = self.read_zxid(conn);
                self.reply(conn, xid, zxid, &result);
            }
        }
    }

    /// addAuth: digest adds the identity, ip is vouched for by the connection itself;
    /// anything else (sasl and x509 without their server set-up, an unknown scheme) is
    /// refused and the connection closed.
    fn add_auth(&mut self, conn: ConnId, xid: i32, p: &AuthPacket) {
        if p.scheme == "digest" {
            let text = String::from_utf8_lossy(&p.auth).into_owned();
            let (user, password) = text.split_once(':').unwrap_or((&text, ""));
            let id = Id {
                scheme: "digest".into(),
                id: digest_id(user, password),
            };
            if let Some(c) = self.conns.get_mut(&conn) {
                if !c.auth.contains(&id) {
                    c.auth.push(id);
                }
            }
            self.reply(conn, xid, 0, &Ok(Response::Empty));
        } else if p.scheme == "ip" {
            // ZooKeeper's IP provider vouches for the client's address, which
            // every connection has already (whoAmI lists it once).
            self.reply(conn, xid, 0, &Ok(Response::Empty));
        } else {
            // sasl and x509 without their server set-up, or an unknown scheme.
            self.reply(conn, xid, 0, &Err(ErrorCode::AuthFailed));
            self.close_conn(conn);
        }
    }

    pub(super) fn end_session(&mut self, id: i64) {
        let Some(session) = self.sessions.remove(&id) else {
            return;
        };
        self.pending_lags.remove(&id);
        let zxid = self.zxid;
        let mut changes = Vec::new();
        // Deepest first would not matter: ephemerals have no children.
        for path in &session.ephemerals {
            if let Some(acl) = self.remove_node(path, zxid) {
                changes.push(Change::Deleted(path.clone(), acl));
            }
        }
        self.fire(&changes);
        if let Some(conn) = session.conn {
            self.close_conn(conn);
        }
    }

    // ----- ACLs -----

    pub(super) fn allowed(&self, conn: ConnId, acl: &[Acl], perm: i32) -> bool {
        let auth = self.conns.get(&conn).map(|c| &c.auth[..]).unwrap_or(&[]);
        acl.iter().any(|a| {
            a.perms & perm != 0
                && match a.id.scheme.as_str() {
                    "world" => a.id.id == "anyone",
                    "ip" => a.id.id == "127.0.0.1" || a.id.id.starts_with("127."),
                    "digest" => auth.iter().any(|i| i.scheme == "digest" && i.id == a.id.id),
                    _ => false,
                }
        })
    }

    /// Java's `fixupACL`: rejects empty lists and unknown schemes; expands `auth`.
    pub(super) fn fixup_acl(&self, conn: ConnId, acl: &[Acl]) -> Result<Vec<Acl>, ErrorCode> {
        if acl.is_empty() {
            return Err(ErrorCode::InvalidAcl);
        }
        let auth = self
            .conns
            .get(&conn)
            .map(|c| c.auth.clone())
            .unwrap_or_default();
        let mut out = Vec::new();
        for a in acl {
            match a.id.scheme.as_str() {
                "world" if a.id.id == "anyone" => out.push(a.clone()),
                "digest" if a.id.id.contains(':') => out.push(a.clone()),
                "ip" => out.push(a.clone()),
                "auth" => {
                    if auth.is_empty() {
                        return Err(ErrorCode::InvalidAcl);
                    }
                    out.extend(auth.iter().map(|id| Acl {
                        perms: a.perms,
                        id: id.clone(),
                    }));
                }
                _ => return Err(ErrorCode::InvalidAcl),
            }
        }
        Ok(out)
    }

    // ----- reads -----
}
