//! Jute records (reference §2, §3, §4.2, §4.3, §6). Each mirrors the wire layout field for
//! field; typed views (create modes, event types) live beside them.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};

use super::types::{CreateMode, EventType, KeeperState};
use super::wire::{record, DecodeError, Wire};

record! {
    /// Metadata of a node (68 bytes).
    #[derive(Copy)]
    pub struct Stat {
        /// zxid of the create.
        pub czxid: i64,
        /// zxid of the last data change.
        pub mzxid: i64,
        /// Create time, ms since the epoch (server clock).
        pub ctime: i64,
        /// Last data change time, ms.
        pub mtime: i64,
        /// Data version (number of setData calls).
        pub version: i32,
        /// Child version as clients see it: child creates + deletes.
        pub cversion: i32,
        /// ACL version.
        pub aversion: i32,
        /// Owning session of an ephemeral node, else 0.
        pub ephemeral_owner: i64,
        /// Data length in bytes.
        pub data_length: i32,
        /// Number of direct children.
        pub num_children: i32,
        /// zxid of the last child create/delete.
        pub pzxid: i64,
    }
}

record! {
    /// An identity: scheme and id (`world:anyone`, `digest:user:hash`, `ip:1.2.3.4`, ...).
    pub struct Id {
        /// Scheme name.
        pub scheme: String,
        /// Scheme-specific id.
        pub id: String,
    }
}

record! {
    /// One ACL entry: permission bits for an identity.
    pub struct Acl {
        /// Bits from [`perms`](super::types::perms).
        pub perms: i32,
        /// Who gets them.
        pub id: Id,
    }
}

impl Acl {
    /// `[(ALL, world, anyone)]` — ZooKeeper's `OPEN_ACL_UNSAFE`.
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl::new(super::types::perms::ALL, "world", "anyone")]
    }
    /// `[(READ, world, anyone)]` — `READ_ACL_UNSAFE`.
    pub fn read_unsafe() -> Vec<Acl> {
        vec![Acl::new(super::types::perms::READ, "world", "anyone")]
    }
    /// `[(ALL, auth, "")]` — `CREATOR_ALL_ACL`: every identity the session authenticated as.
    pub fn creator_all() -> Vec<Acl> {
        vec![Acl::new(super::types::perms::ALL, "auth", "")]
    }
    /// An entry from its parts.
    pub fn new(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            id: Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        }
    }
}

record! {
    /// Header of every request after the handshake.
    #[derive(Copy)]
    pub struct RequestHeader {
        /// Request id; see [`xid`](super::types::xid) for reserved values.
        pub xid: i32,
        /// Opcode.
        pub op: i32,
    }
}

record! {
    /// Header of every reply and notification after the handshake.
    #[derive(Copy)]
    pub struct ReplyHeader {
        /// The request's xid, or -1 for a notification.
        pub xid: i32,
        /// zxid of the write, or the server's last zxid for reads.
        pub zxid: i64,
        /// Error code; a body follows only when 0.
        pub err: i32,
    }
}

record! {
    /// Body of a watch notification.
    pub struct WatcherEvent {
        /// [`EventType`] number.
        pub event_type: i32,
        /// [`KeeperState`] number (always 3 from a server).
        pub state: i32,
        /// Server-side path of the node.
        pub path: String,
    }
}

impl WatcherEvent {
    /// The event type, if known.
    pub fn kind(&self) -> Option<EventType> {
        EventType::from_i32(self.event_type)
    }
    /// The keeper state, if known.
    pub fn keeper_state(&self) -> Option<KeeperState> {
        KeeperState::from_i32(self.state)
    }
}

record! {
    /// One entry of a `whoAmI` reply.
    pub struct ClientInfo {
        /// Auth scheme (`ip`, `digest`, ...).
        pub auth_scheme: String,
        /// User within that scheme.
        pub user: String,
    }
}

record! {
    /// Header of each op in a multi request or result in a multi response.
    #[derive(Copy)]
    pub struct MultiHeader {
        /// Opcode of the op or result; -1 for an error result or the terminator.
        pub op: i32,
        /// True only on the terminator.
        pub done: bool,
        /// -1 in requests; the result's error code in responses.
        pub err: i32,
    }
}

/// The first frame a client sends on a connection (no request header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConnectRequest {
    /// Always 0.
    pub protocol_version: i32,
    /// Highest zxid this client has seen.
    pub last_zxid_seen: i64,
    /// Requested session timeout, ms.
    pub timeout_ms: i32,
    /// 0 for a new session, else the id to resume.
    pub session_id: i64,
    /// 16 bytes (zeros for a new session).
    pub passwd: Bytes,
    /// "I accept a read-only server." Sent as an optional trailing byte.
    pub read_only: bool,
}

impl Wire for ConnectRequest {
    const MIN_SIZE: usize = 4 + 8 + 4 + 8 + 4;
    fn encode(&self, buf: &mut BytesMut) {
        self.protocol_version.encode(buf);
        self.last_zxid_seen.encode(buf);
        self.timeout_ms.encode(buf);
        self.session_id.encode(buf);
        self.passwd.encode(buf);
        self.read_only.encode(buf);
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(ConnectRequest {
            protocol_version: Wire::decode(buf)?,
            last_zxid_seen: Wire::decode(buf)?,
            timeout_ms: Wire::decode(buf)?,
            session_id: Wire::decode(buf)?,
            passwd: Wire::decode(buf)?,
            read_only: trailing_flag(buf)?,
        })
    }
}

/// The optional trailing `read_only` byte of the handshake records: `false` when absent
/// (an old peer does not send it).
fn trailing_flag(buf: &mut Bytes) -> Result<bool, DecodeError> {
    if buf.is_empty() {
        Ok(false)
    } else {
        Wire::decode(buf)
    }
}

/// The first frame a server sends on a connection (no reply header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConnectResponse {
    /// Always 0.
    pub protocol_version: i32,
    /// Negotiated timeout, ms; 0 means the session is expired or invalid.
    pub timeout_ms: i32,
    /// Assigned or resumed id; 0 when invalid.
    pub session_id: i64,
    /// Session password (16 bytes).
    pub passwd: Bytes,
    /// The server is read-only. Present only if the request carried the byte.
    pub read_only: bool,
}

impl ConnectResponse {
    /// The server refused the session: expired, closed, unknown or wrong password.
    pub fn is_expired(&self) -> bool {
        self.timeout_ms <= 0
    }
}

impl Wire for ConnectResponse {
    const MIN_SIZE: usize = 4 + 4 + 8 + 4;
    fn encode(&self, buf: &mut BytesMut) {
        self.protocol_version.encode(buf);
        self.timeout_ms.encode(buf);
        self.session_id.encode(buf);
        self.passwd.encode(buf);
        self.read_only.encode(buf);
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(ConnectResponse {
            protocol_version: Wire::decode(buf)?,
            timeout_ms: Wire::decode(buf)?,
            session_id: Wire::decode(buf)?,
            passwd: Wire::decode(buf)?,
            read_only: trailing_flag(buf)?,
        })
    }
}

record! {
    /// create / create2 / createContainer.
    pub struct CreateRequest {
        /// Path (for sequential modes, the prefix of the final name).
        pub path: String,
        /// Initial data.
        pub data: Bytes,
        /// ACL of the new node; must not be empty.
        pub acl: Vec<Acl>,
        /// [`CreateMode`] number.
        pub flags: i32,
    }
}

impl CreateRequest {
    /// A request with the given mode.
    pub fn new(
        path: impl Into<String>,
        data: impl Into<Bytes>,
        acl: Vec<Acl>,
        mode: CreateMode,
    ) -> Self {
        CreateRequest {
            path: path.into(),
            data: data.into(),
            acl,
            flags: mode.to_i32(),
        }
    }
}

record! {
    /// createTTL.
    pub struct CreateTtlRequest {
        /// Path.
        pub path: String,
        /// Initial data.
        pub data: Bytes,
        /// ACL.
        pub acl: Vec<Acl>,
        /// 5 (PersistentWithTtl) or 6 (PersistentSequentialWithTtl).
        pub flags: i32,
        /// TTL in ms, 1 ..= 2^40 - 1.
        pub ttl: i64,
    }
}

record! {
    /// delete.
    pub struct DeleteRequest {
        /// Path.
        pub path: String,
        /// Expected data version, -1 = any.
        pub version: i32,
    }
}

record! {
    /// exists / getData / getChildren / getChildren2: a path and a watch flag.
    pub struct PathWatch {
        /// Path.
        pub path: String,
        /// Leave a one-shot watch.
        pub watch: bool,
    }
}

record! {
    /// setData.
    pub struct SetDataRequest {
        /// Path.
        pub path: String,
        /// New data.
        pub data: Bytes,
        /// Expected data version, -1 = any.
        pub version: i32,
    }
}

record! {
    /// getACL / sync / getAllChildrenNumber / getEphemerals: just a path.
    pub struct PathRequest {
        /// Path (a string prefix for getEphemerals).
        pub path: String,
    }
}

record! {
    /// setACL.
    pub struct SetAclRequest {
        /// Path.
        pub path: String,
        /// New ACL.
        pub acl: Vec<Acl>,
        /// Expected ACL version (aversion), -1 = any.
        pub version: i32,
    }
}

record! {
    /// check (inside a multi only).
    pub struct CheckVersionRequest {
        /// Path.
        pub path: String,
        /// Expected data version.
        pub version: i32,
    }
}

record! {
    /// addWatch.
    pub struct AddWatchRequest {
        /// Path (need not exist).
        pub path: String,
        /// [`AddWatchMode`](super::types::AddWatchMode) number.
        pub mode: i32,
    }
}

record! {
    /// checkWatches / removeWatches.
    pub struct WatchesRequest {
        /// Path.
        pub path: String,
        /// [`WatcherType`](super::types::WatcherType) number.
        pub watcher_type: i32,
    }
}

record! {
    /// setWatches: re-arm one-shot watches after a reconnect.
    pub struct SetWatches {
        /// Last zxid the client saw; changes after it fire at once.
        pub relative_zxid: i64,
        /// Data watches.
        pub data_watches: Vec<String>,
        /// Exist watches (on nodes that did not exist).
        pub exist_watches: Vec<String>,
        /// Child watches.
        pub child_watches: Vec<String>,
    }
}

record! {
    /// setWatches2: setWatches plus persistent watches.
    pub struct SetWatches2 {
        /// Last zxid the client saw.
        pub relative_zxid: i64,
        /// Data watches.
        pub data_watches: Vec<String>,
        /// Exist watches.
        pub exist_watches: Vec<String>,
        /// Child watches.
        pub child_watches: Vec<String>,
        /// Persistent watches.
        pub persistent_watches: Vec<String>,
        /// Persistent recursive watches.
        pub persistent_recursive_watches: Vec<String>,
    }
}

record! {
    /// auth packet (sent with xid -4).
    pub struct AuthPacket {
        /// Always 0.
        pub auth_type: i32,
        /// Scheme, e.g. `digest`.
        pub scheme: String,
        /// Credentials, e.g. `user:password`.
        pub auth: Bytes,
    }
}

record! {
    /// reconfig.
    pub struct ReconfigRequest {
        /// Servers joining (incremental).
        pub joining_servers: String,
        /// Servers leaving (incremental).
        pub leaving_servers: String,
        /// New membership (non-incremental).
        pub new_members: String,
        /// Expected config version, -1 = any.
        pub cur_config_id: i64,
    }
}

record! {
    /// sasl token.
    pub struct SaslToken {
        /// Opaque token.
        pub token: Bytes,
    }
}
