//! The session's identity across connections: its id and password, the timeout the
//! server granted, whether the server of this connection is read-only, the highest
//! zxid seen, and whether a connection was lost and not yet regained. What a
//! `ConnectRequest` asks for and what a `ConnectResponse` grants is read and written
//! here.
//!
//! Owns what a resume presents to the next server. Read-only mode's state (the
//! server's flag, a session first granted by a read-only server, a read-only
//! stand-in for a session a read-only server refuses) belongs here.

use bytes::Bytes;
use core::time::Duration;

use super::config::SessionConfig;
use crate::proto::{ConnectRequest, ConnectResponse};

/// Who the session is, as the servers know it.
#[derive(Debug)]
pub(super) struct Identity {
    /// 0 before the first session (and after an expiry).
    pub(super) session_id: i64,
    passwd: Bytes,
    /// The timeout the server granted, once known.
    pub(super) negotiated: Option<Duration>,
    /// The server of the current connection is read-only.
    read_only_server: bool,
    /// A read-write server granted or resumed this session. A session a read-only
    /// server created is known to that server alone: until a read-write server has
    /// been seen, each handshake asks for a new session (as the Java client does).
    seen_read_write: bool,
    /// This connection's handshake asks for (or got) a read-only stand-in: a new
    /// session of the read-only server's own, serving reads while it refuses this
    /// session (ZooKeeper 3.8 refuses a session from before the partition, and grants
    /// only local ones). The session's id and password stay this session's, presented
    /// again to the next read-write server.
    stand_in: bool,
    /// Highest zxid seen in a reply.
    pub(super) last_zxid: i64,
    /// The session had a connection that was lost and not yet regained.
    pub(super) suspended: bool,
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            negotiated: None,
            read_only_server: false,
            seen_read_write: false,
            stand_in: false,
            last_zxid: 0,
            suspended: false,
        }
    }
}

impl Identity {
    /// The session password (zeros before the first handshake).
    pub(super) fn password(&self) -> &[u8] {
        &self.passwd
    }

    /// The server of the current connection is read-only.
    pub(super) fn read_only_server(&self) -> bool {
        self.read_only_server
    }

    /// The timeout that counts: the negotiated one, else the one asked for.
    pub(super) fn timeout(&self, config: &SessionConfig) -> Duration {
        self.negotiated.unwrap_or(config.session_timeout)
    }

    /// This connection is (or asks for) a read-only stand-in (see `stand_in`).
    pub(super) fn stand_in(&self) -> bool {
        self.stand_in
    }

    /// The connection (or the attempt) ended: true if it was a read-only stand-in.
    pub(super) fn end_stand_in(&mut self) -> bool {
        core::mem::take(&mut self.stand_in)
    }

    /// A handshake would present a session a read-write server knows.
    pub(super) fn presents_session(&self) -> bool {
        self.seen_read_write && self.session_id != 0
    }

    /// The handshake's request: resume this session (or ask for a new one).
    /// A session only a read-only server knows is not presented to the next server:
    /// it asks for a new one (see `seen_read_write`); so does a handshake asking a
    /// read-only server for a stand-in (`stand_in`: only with read-only mode on and a
    /// session to stand in for).
    pub(super) fn connect_request(
        &mut self,
        config: &SessionConfig,
        stand_in: bool,
    ) -> ConnectRequest {
        self.stand_in = stand_in && config.read_only && self.presents_session();
        let (session_id, passwd) = if self.seen_read_write && !self.stand_in {
            (self.session_id, self.passwd.clone())
        } else {
            (0, Bytes::from_static(&[0; 16]))
        };
        ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid,
            timeout_ms: millis(config.session_timeout),
            session_id,
            passwd,
            read_only: config.read_only,
        }
    }

    /// The server granted `resp` (not an expiry): true if it resumed this session
    /// rather than starting a new one. A read-only stand-in (granted by a read-only
    /// server: the caller checks) counts as resumed: the session is this one, served
    /// read-only.
    pub(super) fn accept(&mut self, resp: ConnectResponse) -> bool {
        if self.stand_in {
            self.read_only_server = true;
            return true;
        }
        let resumed = self.session_id != 0 && self.session_id == resp.session_id;
        self.session_id = resp.session_id;
        self.passwd = resp.passwd;
        self.negotiated = Some(Duration::from_millis(
            u64::try_from(resp.timeout_ms).unwrap_or(0),
        ));
        self.read_only_server = resp.read_only;
        self.seen_read_write |= !resp.read_only;
        resumed
    }

    /// The session expired: the next handshake asks for a new one (the zxid seen
    /// stays: a new session must not read older data than the last one did).
    pub(super) fn forget(&mut self) {
        self.session_id = 0;
        self.passwd = Bytes::from_static(&[0; 16]);
        self.negotiated = None;
        self.suspended = false;
        self.seen_read_write = false;
        self.stand_in = false;
    }

    /// A reply carried `zxid`.
    pub(super) fn saw_zxid(&mut self, zxid: i64) {
        if zxid > 0 {
            self.last_zxid = self.last_zxid.max(zxid);
        }
    }
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
