//! Numbers with names: opcodes, special xids, create modes, event types, keeper states,
//! permissions and watch kinds (reference §3.2, §4.1, §5.1, §6.2, §8.1, §8.5, §10).

/// Macro for a C-like enum that maps to and from an `i32` wire value.
macro_rules! wire_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:expr),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vmeta])* $variant),* }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The number on the wire.
            pub const fn to_i32(self) -> i32 {
                match self { $($name::$variant => $value),* }
            }

            /// The variant for a wire number, if it has one.
            pub const fn from_i32(value: i32) -> Option<Self> {
                match value { $(v if v == $value => Some($name::$variant),)* _ => None }
            }
        }
    };
}

wire_enum! {
    /// Request types (`ZooDefs.OpCode`), identical in 3.8 and later.
    pub enum OpCode {
        /// Watch notification (never a request).
        Notification = 0,
        /// Create a node (`CreateResponse`).
        Create = 1,
        /// Delete a node.
        Delete = 2,
        /// Stat of a node, optionally with a watch.
        Exists = 3,
        /// Data and stat of a node.
        GetData = 4,
        /// Replace a node's data.
        SetData = 5,
        /// ACL of a node.
        GetAcl = 6,
        /// Replace a node's ACL.
        SetAcl = 7,
        /// Child names.
        GetChildren = 8,
        /// Make this server catch up with the leader.
        Sync = 9,
        /// Keep-alive.
        Ping = 11,
        /// Child names and the parent's stat.
        GetChildren2 = 12,
        /// Version check; only valid inside a multi.
        Check = 13,
        /// Atomic write transaction.
        Multi = 14,
        /// Create returning the new node's stat.
        Create2 = 15,
        /// Dynamic reconfiguration.
        Reconfig = 16,
        /// Does a watch exist?
        CheckWatches = 17,
        /// Remove watches.
        RemoveWatches = 18,
        /// Create a container node.
        CreateContainer = 19,
        /// Server-internal container reaping; clients never send it.
        DeleteContainer = 20,
        /// Create a node with a TTL.
        CreateTtl = 21,
        /// Batch of reads (not atomic).
        MultiRead = 22,
        /// Add authentication.
        Auth = 100,
        /// Re-arm watches after a reconnect.
        SetWatches = 101,
        /// SASL token exchange.
        Sasl = 102,
        /// This session's ephemeral nodes.
        GetEphemerals = 103,
        /// Number of all descendants.
        GetAllChildrenNumber = 104,
        /// Re-arm watches including persistent ones.
        SetWatches2 = 105,
        /// Add a persistent (recursive) watch.
        AddWatch = 106,
        /// Identities of this connection.
        WhoAmI = 107,
        /// Server-internal.
        CreateSession = -10,
        /// End the session.
        CloseSession = -11,
        /// Result type of a failed op inside a multi response.
        Error = -1,
    }
}

wire_enum! {
    /// How a node is created (`CreateMode`, the `flags` field).
    pub enum CreateMode {
        /// Stays until deleted.
        Persistent = 0,
        /// Deleted when the creating session ends.
        Ephemeral = 1,
        /// Persistent, with a 10-digit sequence suffix.
        PersistentSequential = 2,
        /// Ephemeral, with a 10-digit sequence suffix.
        EphemeralSequential = 3,
        /// Deleted by the server some time after its last child goes away.
        Container = 4,
        /// Deleted after the TTL passes without modification, once childless.
        PersistentWithTtl = 5,
        /// TTL node with a sequence suffix.
        PersistentSequentialWithTtl = 6,
    }
}

impl CreateMode {
    /// Ends the session's life with it?
    pub const fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }
    /// Gets a sequence suffix?
    pub const fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }
    /// Needs a TTL (sent with opcode 21)?
    pub const fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

wire_enum! {
    /// Type of a watch event.
    pub enum EventType {
        /// A session state change (client-local).
        None = -1,
        /// The node was created.
        NodeCreated = 1,
        /// The node was deleted.
        NodeDeleted = 2,
        /// The node's data changed.
        NodeDataChanged = 3,
        /// A child was created or deleted.
        NodeChildrenChanged = 4,
        /// A data watch was removed (client-local).
        DataWatchRemoved = 5,
        /// A child watch was removed (client-local).
        ChildWatchRemoved = 6,
        /// A persistent watch was removed (client-local).
        PersistentWatchRemoved = 7,
    }
}

wire_enum! {
    /// Session state carried in watch events.
    pub enum KeeperState {
        /// Deprecated.
        Unknown = -1,
        /// Connection lost (client-local).
        Disconnected = 0,
        /// Deprecated.
        NoSyncConnected = 1,
        /// Connected; the only state a server sends.
        SyncConnected = 3,
        /// Authentication failed (client-local).
        AuthFailed = 4,
        /// Connected to a read-only server (client-local).
        ConnectedReadOnly = 5,
        /// SASL done (client-local).
        SaslAuthenticated = 6,
        /// Session expired (client-local).
        Expired = -112,
        /// Closed by the client (client-local).
        Closed = 7,
    }
}

wire_enum! {
    /// Which watches `checkWatches` / `removeWatches` address.
    pub enum WatcherType {
        /// Child watches.
        Children = 1,
        /// Data and exist watches.
        Data = 2,
        /// All kinds, including persistent ones.
        Any = 3,
        /// Persistent watches only (3.9+ servers).
        Persistent = 4,
        /// Persistent recursive watches only (3.9+ servers).
        PersistentRecursive = 5,
    }
}

wire_enum! {
    /// Mode of an `addWatch` request.
    pub enum AddWatchMode {
        /// Fires for the node itself (data, create, delete, children), stays registered.
        Persistent = 0,
        /// Fires for the node and every descendant (no child events), stays registered.
        PersistentRecursive = 1,
    }
}

/// Permission bits of an ACL entry.
pub mod perms {
    /// Read data and children.
    pub const READ: i32 = 1;
    /// Set data.
    pub const WRITE: i32 = 1 << 1;
    /// Create children.
    pub const CREATE: i32 = 1 << 2;
    /// Delete children.
    pub const DELETE: i32 = 1 << 3;
    /// Set the ACL.
    pub const ADMIN: i32 = 1 << 4;
    /// Everything.
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

/// Reserved xids (reference §3.2). Normal requests use 1..=i32::MAX.
pub mod xid {
    /// Watch notification (server to client).
    pub const NOTIFICATION: i32 = -1;
    /// Ping and its reply.
    pub const PING: i32 = -2;
    /// Auth packet and its reply (answered out of FIFO order).
    pub const AUTH: i32 = -4;
    /// SetWatches (C client convention; the server echoes any xid).
    pub const SET_WATCHES: i32 = -8;
}
