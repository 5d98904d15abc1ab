//! Requests a client sends, as one enum over the opcode table (reference §4.1, §9).
//!
//! `check` (op 13) exists only as a [`MultiOp`]: the type system keeps it out of a
//! standalone request, which a 3.8 server would never answer.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};

use super::records::*;
use super::types::OpCode;
use super::wire::{DecodeError, Wire};

/// A request body with its opcode.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Request {
    /// op 1: create, reply carries the path.
    Create(CreateRequest),
    /// op 15: create, reply carries the path and Stat.
    Create2(CreateRequest),
    /// op 19: create a container node (flags 4).
    CreateContainer(CreateRequest),
    /// op 21: create a TTL node.
    CreateTtl(CreateTtlRequest),
    /// op 2.
    Delete(DeleteRequest),
    /// op 3.
    Exists(PathWatch),
    /// op 4.
    GetData(PathWatch),
    /// op 5.
    SetData(SetDataRequest),
    /// op 6.
    GetAcl(PathRequest),
    /// op 7.
    SetAcl(SetAclRequest),
    /// op 8.
    GetChildren(PathWatch),
    /// op 12.
    GetChildren2(PathWatch),
    /// op 9.
    Sync(PathRequest),
    /// op 11 (xid -2).
    Ping,
    /// op 14: atomic transaction.
    Multi(Vec<MultiOp>),
    /// op 22: batch of reads.
    MultiRead(Vec<ReadOp>),
    /// op 16.
    Reconfig(ReconfigRequest),
    /// op 17.
    CheckWatches(WatchesRequest),
    /// op 18.
    RemoveWatches(WatchesRequest),
    /// op 106.
    AddWatch(AddWatchRequest),
    /// op 100 (xid -4).
    Auth(AuthPacket),
    /// op 101.
    SetWatches(SetWatches),
    /// op 105.
    SetWatches2(SetWatches2),
    /// op 102.
    Sasl(SaslToken),
    /// op 103: this session's ephemerals under a string prefix.
    GetEphemerals(PathRequest),
    /// op 104.
    GetAllChildrenNumber(PathRequest),
    /// op 107.
    WhoAmI,
    /// op -11.
    CloseSession,
}

/// One op of a multi (op 14) transaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MultiOp {
    /// op 1.
    Create(CreateRequest),
    /// op 15 (a 3.8 server answers it like op 1: path only).
    Create2(CreateRequest),
    /// op 19.
    CreateContainer(CreateRequest),
    /// op 21.
    CreateTtl(CreateTtlRequest),
    /// op 2.
    Delete(DeleteRequest),
    /// op 5.
    SetData(SetDataRequest),
    /// op 13: fails the transaction unless the node has this version.
    Check(CheckVersionRequest),
}

/// One op of a multiRead (op 22) batch. The watch flag is ignored by the server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReadOp {
    /// op 4.
    GetData(PathWatch),
    /// op 8.
    GetChildren(PathWatch),
}

impl MultiOp {
    /// The op's opcode.
    pub fn op_code(&self) -> OpCode {
        match self {
            MultiOp::Create(_) => OpCode::Create,
            MultiOp::Create2(_) => OpCode::Create2,
            MultiOp::CreateContainer(_) => OpCode::CreateContainer,
            MultiOp::CreateTtl(_) => OpCode::CreateTtl,
            MultiOp::Delete(_) => OpCode::Delete,
            MultiOp::SetData(_) => OpCode::SetData,
            MultiOp::Check(_) => OpCode::Check,
        }
    }

    /// The path the op touches.
    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => &r.path,
            MultiOp::CreateTtl(r) => &r.path,
            MultiOp::Delete(r) => &r.path,
            MultiOp::SetData(r) => &r.path,
            MultiOp::Check(r) => &r.path,
        }
    }

    fn path_mut(&mut self) -> &mut String {
        match self {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => &mut r.path,
            MultiOp::CreateTtl(r) => &mut r.path,
            MultiOp::Delete(r) => &mut r.path,
            MultiOp::SetData(r) => &mut r.path,
            MultiOp::Check(r) => &mut r.path,
        }
    }

    fn encode_body(&self, buf: &mut BytesMut) {
        match self {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => r.encode(buf),
            MultiOp::CreateTtl(r) => r.encode(buf),
            MultiOp::Delete(r) => r.encode(buf),
            MultiOp::SetData(r) => r.encode(buf),
            MultiOp::Check(r) => r.encode(buf),
        }
    }

    fn decode(op: i32, buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(match OpCode::from_i32(op) {
            Some(OpCode::Create) => MultiOp::Create(Wire::decode(buf)?),
            Some(OpCode::Create2) => MultiOp::Create2(Wire::decode(buf)?),
            Some(OpCode::CreateContainer) => MultiOp::CreateContainer(Wire::decode(buf)?),
            Some(OpCode::CreateTtl) => MultiOp::CreateTtl(Wire::decode(buf)?),
            Some(OpCode::Delete) => MultiOp::Delete(Wire::decode(buf)?),
            Some(OpCode::SetData) => MultiOp::SetData(Wire::decode(buf)?),
            Some(OpCode::Check) => MultiOp::Check(Wire::decode(buf)?),
            _ => return Err(DecodeError::UnexpectedType(op)),
        })
    }
}

impl ReadOp {
    /// The op's opcode.
    pub fn op_code(&self) -> OpCode {
        match self {
            ReadOp::GetData(_) => OpCode::GetData,
            ReadOp::GetChildren(_) => OpCode::GetChildren,
        }
    }

    /// The path the op reads.
    pub fn path(&self) -> &str {
        match self {
            ReadOp::GetData(r) | ReadOp::GetChildren(r) => &r.path,
        }
    }

    fn inner_mut(&mut self) -> &mut PathWatch {
        match self {
            ReadOp::GetData(r) | ReadOp::GetChildren(r) => r,
        }
    }

    fn decode(op: i32, buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(match OpCode::from_i32(op) {
            Some(OpCode::GetData) => ReadOp::GetData(Wire::decode(buf)?),
            Some(OpCode::GetChildren) => ReadOp::GetChildren(Wire::decode(buf)?),
            _ => return Err(DecodeError::UnexpectedType(op)),
        })
    }
}

fn encode_ops<T>(
    buf: &mut BytesMut,
    ops: &[T],
    op: impl Fn(&T) -> OpCode,
    body: impl Fn(&T, &mut BytesMut),
) {
    for item in ops {
        MultiHeader {
            op: op(item).to_i32(),
            done: false,
            err: -1,
        }
        .encode(buf);
        body(item, buf);
    }
    MULTI_DONE.encode(buf);
}

/// The header that ends a multi request or response.
pub(crate) const MULTI_DONE: MultiHeader = MultiHeader {
    op: -1,
    done: true,
    err: -1,
};

fn decode_ops<T>(
    buf: &mut Bytes,
    one: impl Fn(i32, &mut Bytes) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        // Each round consumes at least the 9-byte header, so this ends with the input.
        let header = MultiHeader::decode(buf)?;
        if header.done {
            return Ok(ops);
        }
        ops.push(one(header.op, buf)?);
    }
}

impl Request {
    /// The opcode this request is sent with.
    pub fn op_code(&self) -> OpCode {
        match self {
            Request::Create(_) => OpCode::Create,
            Request::Create2(_) => OpCode::Create2,
            Request::CreateContainer(_) => OpCode::CreateContainer,
            Request::CreateTtl(_) => OpCode::CreateTtl,
            Request::Delete(_) => OpCode::Delete,
            Request::Exists(_) => OpCode::Exists,
            Request::GetData(_) => OpCode::GetData,
            Request::SetData(_) => OpCode::SetData,
            Request::GetAcl(_) => OpCode::GetAcl,
            Request::SetAcl(_) => OpCode::SetAcl,
            Request::GetChildren(_) => OpCode::GetChildren,
            Request::GetChildren2(_) => OpCode::GetChildren2,
            Request::Sync(_) => OpCode::Sync,
            Request::Ping => OpCode::Ping,
            Request::Multi(_) => OpCode::Multi,
            Request::MultiRead(_) => OpCode::MultiRead,
            Request::Reconfig(_) => OpCode::Reconfig,
            Request::CheckWatches(_) => OpCode::CheckWatches,
            Request::RemoveWatches(_) => OpCode::RemoveWatches,
            Request::AddWatch(_) => OpCode::AddWatch,
            Request::Auth(_) => OpCode::Auth,
            Request::SetWatches(_) => OpCode::SetWatches,
            Request::SetWatches2(_) => OpCode::SetWatches2,
            Request::Sasl(_) => OpCode::Sasl,
            Request::GetEphemerals(_) => OpCode::GetEphemerals,
            Request::GetAllChildrenNumber(_) => OpCode::GetAllChildrenNumber,
            Request::WhoAmI => OpCode::WhoAmI,
            Request::CloseSession => OpCode::CloseSession,
        }
    }

    /// Appends the body (everything after the request header).
    pub fn encode_body(&self, buf: &mut BytesMut) {
        match self {
            Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => r.encode(buf),
            Request::CreateTtl(r) => r.encode(buf),
            Request::Delete(r) => r.encode(buf),
            Request::Exists(r)
            | Request::GetData(r)
            | Request::GetChildren(r)
            | Request::GetChildren2(r) => r.encode(buf),
            Request::SetData(r) => r.encode(buf),
            Request::GetAcl(r)
            | Request::Sync(r)
            | Request::GetEphemerals(r)
            | Request::GetAllChildrenNumber(r) => r.encode(buf),
            Request::SetAcl(r) => r.encode(buf),
            Request::Ping | Request::WhoAmI | Request::CloseSession => {}
            Request::Multi(ops) => encode_ops(buf, ops, MultiOp::op_code, MultiOp::encode_body),
            Request::MultiRead(ops) => encode_ops(buf, ops, ReadOp::op_code, |op, b| match op {
                ReadOp::GetData(r) | ReadOp::GetChildren(r) => r.encode(b),
            }),
            Request::Reconfig(r) => r.encode(buf),
            Request::CheckWatches(r) | Request::RemoveWatches(r) => r.encode(buf),
            Request::AddWatch(r) => r.encode(buf),
            Request::Auth(r) => r.encode(buf),
            Request::SetWatches(r) => r.encode(buf),
            Request::SetWatches2(r) => r.encode(buf),
            Request::Sasl(r) => r.encode(buf),
        }
    }

    /// Decodes a request body sent with `op` (the server side of the codec; used by the
    /// simulator and by round-trip tests). `Notification`, `DeleteContainer`,
    /// `CreateSession`, `Check` alone and unknown opcodes are errors.
    pub fn decode(op: i32, mut body: Bytes) -> Result<Request, DecodeError> {
        let buf = &mut body;
        let Some(code) = OpCode::from_i32(op) else {
            return Err(DecodeError::UnexpectedType(op));
        };
        Ok(match code {
            OpCode::Create => Request::Create(Wire::decode(buf)?),
            OpCode::Create2 => Request::Create2(Wire::decode(buf)?),
            OpCode::CreateContainer => Request::CreateContainer(Wire::decode(buf)?),
            OpCode::CreateTtl => Request::CreateTtl(Wire::decode(buf)?),
            OpCode::Delete => Request::Delete(Wire::decode(buf)?),
            OpCode::Exists => Request::Exists(Wire::decode(buf)?),
            OpCode::GetData => Request::GetData(Wire::decode(buf)?),
            OpCode::SetData => Request::SetData(Wire::decode(buf)?),
            OpCode::GetAcl => Request::GetAcl(Wire::decode(buf)?),
            OpCode::SetAcl => Request::SetAcl(Wire::decode(buf)?),
            OpCode::GetChildren => Request::GetChildren(Wire::decode(buf)?),
            OpCode::GetChildren2 => Request::GetChildren2(Wire::decode(buf)?),
            OpCode::Sync => Request::Sync(Wire::decode(buf)?),
            OpCode::Ping => Request::Ping,
            OpCode::Multi => Request::Multi(decode_ops(buf, MultiOp::decode)?),
            OpCode::MultiRead => Request::MultiRead(decode_ops(buf, ReadOp::decode)?),
            OpCode::Reconfig => Request::Reconfig(Wire::decode(buf)?),
            OpCode::CheckWatches => Request::CheckWatches(Wire::decode(buf)?),
            OpCode::RemoveWatches => Request::RemoveWatches(Wire::decode(buf)?),
            OpCode::AddWatch => Request::AddWatch(Wire::decode(buf)?),
            OpCode::Auth => Request::Auth(Wire::decode(buf)?),
            OpCode::SetWatches => Request::SetWatches(Wire::decode(buf)?),
            OpCode::SetWatches2 => Request::SetWatches2(Wire::decode(buf)?),
            OpCode::Sasl => Request::Sasl(Wire::decode(buf)?),
            OpCode::GetEphemerals => Request::GetEphemerals(Wire::decode(buf)?),
            OpCode::GetAllChildrenNumber => Request::GetAllChildrenNumber(Wire::decode(buf)?),
            OpCode::WhoAmI => Request::WhoAmI,
            OpCode::CloseSession => Request::CloseSession,
            OpCode::Notification
            | OpCode::Check
            | OpCode::DeleteContainer
            | OpCode::CreateSession
            | OpCode::Error => return Err(DecodeError::UnexpectedType(op)),
        })
    }

    /// Calls `f` on every path the request carries, so a chroot can be applied or paths
    /// validated in one place. (`getEphemerals` takes a string prefix, not a path.)
    pub fn for_each_path_mut(&mut self, mut f: impl FnMut(PathRole, &mut String)) {
        match self {
            Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => {
                f(create_role(r.flags), &mut r.path)
            }
            Request::CreateTtl(r) => f(create_role(r.flags), &mut r.path),
            Request::Delete(r) => f(PathRole::Node, &mut r.path),
            Request::Exists(r)
            | Request::GetData(r)
            | Request::GetChildren(r)
            | Request::GetChildren2(r) => f(PathRole::Node, &mut r.path),
            Request::SetData(r) => f(PathRole::Node, &mut r.path),
            Request::GetAcl(r) | Request::Sync(r) | Request::GetAllChildrenNumber(r) => {
                f(PathRole::Node, &mut r.path)
            }
            Request::GetEphemerals(r) => f(PathRole::Prefix, &mut r.path),
            Request::SetAcl(r) => f(PathRole::Node, &mut r.path),
            Request::Multi(ops) => {
                for op in ops {
                    let role = match op {
                        MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => {
                            create_role(r.flags)
                        }
                        MultiOp::CreateTtl(r) => create_role(r.flags),
                        _ => PathRole::Node,
                    };
                    f(role, op.path_mut());
                }
            }
            Request::MultiRead(ops) => ops
                .iter_mut()
                .for_each(|op| f(PathRole::Node, &mut op.inner_mut().path)),
            Request::CheckWatches(r) | Request::RemoveWatches(r) => f(PathRole::Node, &mut r.path),
            Request::AddWatch(r) => f(PathRole::Node, &mut r.path),
            Request::SetWatches(r) => {
                for p in r
                    .data_watches
                    .iter_mut()
                    .chain(&mut r.exist_watches)
                    .chain(&mut r.child_watches)
                {
                    f(PathRole::Node, p)
                }
            }
            Request::SetWatches2(r) => {
                for p in r
                    .data_watches
                    .iter_mut()
                    .chain(&mut r.exist_watches)
                    .chain(&mut r.child_watches)
                    .chain(&mut r.persistent_watches)
                    .chain(&mut r.persistent_recursive_watches)
                {
                    f(PathRole::Node, p)
                }
            }
            Request::Ping
            | Request::WhoAmI
            | Request::CloseSession
            | Request::Auth(_)
            | Request::Sasl(_)
            | Request::Reconfig(_) => {}
        }
    }
}

fn create_role(flags: i32) -> PathRole {
    match super::types::CreateMode::from_i32(flags) {
        Some(m) if m.is_sequential() => PathRole::SequentialPrefix,
        _ => PathRole::Node,
    }
}

/// What a path in a request names, which decides how it is validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathRole {
    /// A node.
    Node,
    /// The prefix of a sequential node's name (may end in `/`).
    SequentialPrefix,
    /// A plain string prefix (getEphemerals); not validated as a path.
    Prefix,
}
