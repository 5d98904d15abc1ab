//! Request builders and typed reply readers for the raw API, shared by every adapter so
//! none of them interprets replies on its own.
//!
//! ```
//! use zk_recipes::client::ops;
//! use zk_recipes::client::Error;
//! use zk_recipes::proto::{ErrorCode, Response, Stat};
//! let req = ops::exists("/a", true);
//! assert_eq!(req.op_code(), zk_recipes::proto::OpCode::Exists);
//! // exists on a missing node is not an error: it is `None`.
//! assert_eq!(ops::read_exists(Err(Error::Server(ErrorCode::NoNode))), Ok(None));
//! assert_eq!(ops::read_exists(Ok(Response::Stat(Stat::default()))), Ok(Some(Stat::default())));
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::Error;
use crate::proto::*;

/// How to create a node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CreateOptions {
    /// Persistent, ephemeral, sequential, container or TTL.
    pub mode: CreateMode,
    /// ACL of the new node (default: open).
    pub acl: Vec<Acl>,
    /// TTL for the TTL modes (required by them, refused by the others).
    pub ttl: Option<Duration>,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            mode: CreateMode::Persistent,
            acl: Acl::open_unsafe(),
            ttl: None,
        }
    }
}

impl CreateOptions {
    /// Options with this mode and the open ACL.
    pub fn mode(mode: CreateMode) -> Self {
        CreateOptions {
            mode,
            ..Default::default()
        }
    }
    /// Sets the ACL.
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = acl;
        self
    }
    /// Sets the TTL.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

fn create_request(path: &str, data: Bytes, opts: &CreateOptions) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data,
        acl: opts.acl.clone(),
        flags: opts.mode.to_i32(),
    }
}

fn create_ttl(path: &str, data: Bytes, opts: &CreateOptions) -> Request {
    let ttl = opts
        .ttl
        .map(|t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let r = create_request(path, data, opts);
    Request::CreateTtl(CreateTtlRequest {
        path: r.path,
        data: r.data,
        acl: r.acl,
        flags: r.flags,
        ttl,
    })
}

/// create (reply: the final path). Containers use op 19 and TTL modes op 21, as required.
pub fn create(path: &str, data: Bytes, opts: &CreateOptions) -> Request {
    match opts.mode {
        m if m.is_ttl() || opts.ttl.is_some() => create_ttl(path, data, opts),
        CreateMode::Container => Request::CreateContainer(create_request(path, data, opts)),
        _ => Request::Create(create_request(path, data, opts)),
    }
}

/// create2 (reply: the final path and the new node's Stat).
pub fn create2(path: &str, data: Bytes, opts: &CreateOptions) -> Request {
    match opts.mode {
        m if m.is_ttl() || opts.ttl.is_some() => create_ttl(path, data, opts),
        CreateMode::Container => Request::CreateContainer(create_request(path, data, opts)),
        _ => Request::Create2(create_request(path, data, opts)),
    }
}

/// delete; `None` = any version.
pub fn delete(path: &str, version: Option<i32>) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version: version.unwrap_or(-1),
    })
}

/// exists, optionally leaving a watch (set even when the node is missing).
pub fn exists(path: &str, watch: bool) -> Request {
    Request::Exists(PathWatch {
        path: path.into(),
        watch,
    })
}

/// getData, optionally leaving a watch.
pub fn get_data(path: &str, watch: bool) -> Request {
    Request::GetData(PathWatch {
        path: path.into(),
        watch,
    })
}

/// setData; `None` = any version.
pub fn set_data(path: &str, data: Bytes, version: Option<i32>) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data,
        version: version.unwrap_or(-1),
    })
}

/// getChildren, optionally leaving a watch.
pub fn get_children(path: &str, watch: bool) -> Request {
    Request::GetChildren(PathWatch {
        path: path.into(),
        watch,
    })
}

/// getChildren2 (children and the parent's Stat), optionally leaving a watch.
pub fn get_children2(path: &str, watch: bool) -> Request {
    Request::GetChildren2(PathWatch {
        path: path.into(),
        watch,
    })
}

/// getACL.
pub fn get_acl(path: &str) -> Request {
    Request::GetAcl(PathRequest { path: path.into() })
}

/// setACL; `None` = any ACL version.
pub fn set_acl(path: &str, acl: Vec<Acl>, version: Option<i32>) -> Request {
    Request::SetAcl(SetAclRequest {
        path: path.into(),
        acl,
        version: version.unwrap_or(-1),
    })
}

/// sync.
pub fn sync(path: &str) -> Request {
    Request::Sync(PathRequest { path: path.into() })
}

/// addWatch.
pub fn add_watch(path: &str, mode: AddWatchMode) -> Request {
    Request::AddWatch(AddWatchRequest {
        path: path.into(),
        mode: mode.to_i32(),
    })
}

/// removeWatches.
pub fn remove_watches(path: &str, which: WatcherType) -> Request {
    Request::RemoveWatches(WatchesRequest {
        path: path.into(),
        watcher_type: which.to_i32(),
    })
}

/// checkWatches.
pub fn check_watches(path: &str, which: WatcherType) -> Request {
    Request::CheckWatches(WatchesRequest {
        path: path.into(),
        watcher_type: which.to_i32(),
    })
}

/// getData of the ensemble's configuration node ([`CONFIG_NODE`], read outside any
/// chroot), optionally leaving a watch.
pub fn get_config(watch: bool) -> Request {
    get_data(CONFIG_NODE, watch)
}

/// A membership change for [`reconfig`]: incremental (servers joining and leaving) or
/// non-incremental (the whole new membership), optionally only from a given config
/// version.
///
/// ```
/// use zk_recipes::client::ops::{self, Reconfig};
/// use zk_recipes::proto::Request;
/// let change = Reconfig::add("server.4=127.0.0.1:2891:3891:participant;127.0.0.1:2184")
///     .remove(1)
///     .from_config(0x1_0000_0000);
/// let Request::Reconfig(r) = ops::reconfig(&change) else { unreachable!() };
/// assert_eq!(r.leaving_servers, "1");
/// assert_eq!(r.cur_config_id, 0x1_0000_0000);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Reconfig {
    /// `server.N=...` specs of servers joining (incremental).
    pub joining: Vec<String>,
    /// Ids of servers leaving (incremental).
    pub leaving: Vec<u64>,
    /// `server.N=...` specs of the whole new membership (non-incremental; excludes
    /// `joining` and `leaving`).
    pub members: Vec<String>,
    /// Apply only if the current config has this version (else `BadVersion`); `None`
    /// = whatever the current one is.
    pub from_config: Option<i64>,
}

impl Reconfig {
    /// An incremental change adding `server` (`server.N=host:q:e[:role];[host:]port`).
    pub fn add(server: &str) -> Reconfig {
        Reconfig::default().and_add(server)
    }
    /// An incremental change removing server `id`.
    pub fn remove_server(id: u64) -> Reconfig {
        Reconfig::default().remove(id)
    }
    /// A non-incremental change: exactly these members.
    pub fn members<S: AsRef<str>>(members: &[S]) -> Reconfig {
        Reconfig {
            members: members.iter().map(|m| m.as_ref().into()).collect(),
            ..Reconfig::default()
        }
    }
    /// Adds one more joining server.
    pub fn and_add(mut self, server: &str) -> Reconfig {
        self.joining.push(server.into());
        self
    }
    /// Adds one more leaving server.
    pub fn remove(mut self, id: u64) -> Reconfig {
        self.leaving.push(id);
        self
    }
    /// Applies only from config version `version`.
    pub fn from_config(mut self, version: i64) -> Reconfig {
        self.from_config = Some(version);
        self
    }
}

/// reconfig (reply: the new configuration, as [`read_config`] reads it). Refusals:
/// `ReconfigDisabled` (the ensemble runs without `reconfigEnabled=true`), `NoAuth` (the
/// caller may not write `/zookeeper/config`: a superuser, or a server with
/// `skipACL`), `BadVersion` (`from_config` is stale), `NewConfigNoQuorum`,
/// `ReconfigInProgress`, `BadArguments` (e.g. both forms at once).
pub fn reconfig(change: &Reconfig) -> Request {
    let leaving: Vec<String> = change
        .leaving
        .iter()
        .map(|id| alloc::format!("{id}"))
        .collect();
    Request::Reconfig(ReconfigRequest {
        joining_servers: change.joining.join(","),
        leaving_servers: leaving.join(","),
        new_members: change.members.join(","),
        cur_config_id: change.from_config.unwrap_or(-1),
    })
}

/// getEphemerals: this session's ephemeral nodes whose path starts with `prefix`.
pub fn get_ephemerals(prefix: &str) -> Request {
    Request::GetEphemerals(PathRequest {
        path: prefix.into(),
    })
}

/// getAllChildrenNumber: the number of all descendants.
pub fn get_all_children_number(path: &str) -> Request {
    Request::GetAllChildrenNumber(PathRequest { path: path.into() })
}

/// addAuth, e.g. `add_auth("digest", b"user:password")`.
pub fn add_auth(scheme: &str, auth: &[u8]) -> Request {
    Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: scheme.into(),
        auth: Bytes::copy_from_slice(auth),
    })
}

/// A reply as the adapters receive it.
pub type Raw = Result<Response, Error>;

fn read<T>(r: Raw, f: impl FnOnce(Response) -> Option<T>) -> Result<T, Error> {
    f(r?).ok_or(Error::UnexpectedReply)
}

/// No body expected (delete, setWatches, removeWatches, auth, ...).
pub fn read_unit(r: Raw) -> Result<(), Error> {
    r.map(|_| ())
}

/// create / sync: the path.
pub fn read_path(r: Raw) -> Result<String, Error> {
    read(r, |r| match r {
        Response::Path(p) | Response::PathStat { path: p, .. } => Some(p),
        _ => None,
    })
}

/// create2 / createContainer / createTTL: path and Stat.
pub fn read_path_stat(r: Raw) -> Result<(String, Stat), Error> {
    read(r, |r| match r {
        Response::PathStat { path, stat } => Some((path, stat)),
        _ => None,
    })
}

/// exists: `None` when the node is missing.
pub fn read_exists(r: Raw) -> Result<Option<Stat>, Error> {
    match r {
        Err(Error::Server(ErrorCode::NoNode)) => Ok(None),
        r => read_stat(r).map(Some),
    }
}

/// setData / setACL: the new Stat.
pub fn read_stat(r: Raw) -> Result<Stat, Error> {
    read(r, |r| match r {
        Response::Stat(s) => Some(s),
        _ => None,
    })
}

/// getData: data and Stat.
pub fn read_data(r: Raw) -> Result<(Bytes, Stat), Error> {
    read(r, |r| match r {
        Response::Data { data, stat } => Some((data, stat)),
        _ => None,
    })
}

/// getConfig and reconfig: the parsed configuration and the node's Stat.
pub fn read_config(r: Raw) -> Result<(EnsembleConfig, Stat), Error> {
    let (data, stat) = read_data(r)?;
    let config = EnsembleConfig::from_data(&data).map_err(Error::BadConfig)?;
    Ok((config, stat))
}

/// getACL: ACL and Stat.
pub fn read_acl(r: Raw) -> Result<(Vec<Acl>, Stat), Error> {
    read(r, |r| match r {
        Response::Acl { acl, stat } => Some((acl, stat)),
        _ => None,
    })
}

/// getChildren / getEphemerals: names (or paths).
pub fn read_children(r: Raw) -> Result<Vec<String>, Error> {
    read(r, |r| match r {
        Response::Children(c) | Response::Children2 { children: c, .. } => Some(c),
        _ => None,
    })
}

/// getChildren2: names and the parent's Stat.
pub fn read_children2(r: Raw) -> Result<(Vec<String>, Stat), Error> {
    read(r, |r| match r {
        Response::Children2 { children, stat } => Some((children, stat)),
        _ => None,
    })
}

/// getAllChildrenNumber.
pub fn read_count(r: Raw) -> Result<i32, Error> {
    read(r, |r| match r {
        Response::Count(n) => Some(n),
        _ => None,
    })
}

/// whoAmI.
pub fn read_who_am_i(r: Raw) -> Result<Vec<ClientInfo>, Error> {
    read(r, |r| match r {
        Response::WhoAmI(c) => Some(c),
        _ => None,
    })
}

/// multi / multiRead: one result per op. A failed multi is `Ok` here with error
/// results inside (see [`first_error`]); use [`read_multi_committed`] to turn it into
/// an error.
pub fn read_multi(r: Raw) -> Result<Vec<MultiResult>, Error> {
    read(r, |r| match r {
        Response::Multi(results) => Some(results),
        _ => None,
    })
}

/// multi that must have committed: the first failing op's code as an error.
pub fn read_multi_committed(r: Raw) -> Result<Vec<MultiResult>, Error> {
    let results = read_multi(r)?;
    match first_error(&results) {
        Some(code) => Err(Error::Server(code)),
        None => Ok(results),
    }
}

/// The `digest` scheme id for `user:password`: `user:base64(sha1("user:password"))`,
/// for ACL entries like `Acl::new(perms::ALL, "digest", &digest_id("u", "p"))`.
///
/// ```
/// // The same id ZooKeeper's DigestAuthenticationProvider.generateDigest gives.
/// assert_eq!(zk_recipes::client::ops::digest_id("super", "secret"), "super:lK75jTNcA+U9vtVEw5vB51mj/w4=");
/// ```
pub fn digest_id(user: &str, password: &str) -> String {
    let mut input = Vec::with_capacity(user.len() + password.len() + 1);
    input.extend_from_slice(user.as_bytes());
    input.push(b':');
    input.extend_from_slice(password.as_bytes());
    let mut out = String::from(user);
    out.push(':');
    base64(&sha1(&input), &mut out);
    out
}

fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let bit_len = (data.len() as u64).wrapping_mul(8);
    let mut msg = Vec::with_capacity(data.len() + 72);
    msg.extend_from_slice(data);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, v) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
    }
    out
}

fn base64(data: &[u8], out: &mut String) {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}
