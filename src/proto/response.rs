//! Reply bodies, decoded by the opcode of the request they answer (reference §4.3, §9.2).
//!
//! A reply has a body only when its header's `err` is 0; decode it only then.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};

use super::error::ErrorCode;
use super::records::*;
use super::request::MULTI_DONE;
use super::types::OpCode;
use super::wire::{DecodeError, Wire};

/// A successful reply body, by shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Response {
    /// No body: delete, setWatches(2), checkWatches, removeWatches, auth, ping, closeSession.
    Empty,
    /// create (the final path, with any sequence suffix) and sync (the path).
    Path(String),
    /// create2 / createContainer / createTTL: the final path and the new node's Stat.
    PathStat {
        /// Final path.
        path: String,
        /// Stat of the new node.
        stat: Stat,
    },
    /// exists / setData / setACL.
    Stat(Stat),
    /// getData and reconfig (the new config).
    Data {
        /// Node data (null decodes as empty).
        data: Bytes,
        /// Node Stat.
        stat: Stat,
    },
    /// getACL.
    Acl {
        /// The ACL.
        acl: Vec<Acl>,
        /// Node Stat.
        stat: Stat,
    },
    /// getChildren (names, unsorted) and getEphemerals (full server paths).
    Children(Vec<String>),
    /// getChildren2.
    Children2 {
        /// Child names, unsorted.
        children: Vec<String>,
        /// The parent's Stat.
        stat: Stat,
    },
    /// getAllChildrenNumber.
    Count(i32),
    /// addWatch (its body is an `ErrorResponse` holding 0).
    WatchAdded,
    /// sasl.
    Sasl(Bytes),
    /// whoAmI.
    WhoAmI(Vec<ClientInfo>),
    /// multi / multiRead: one result per op. The reply header says 0 even when a multi
    /// failed; look at the results (see [`first_error`]).
    Multi(Vec<MultiResult>),
}

/// One result inside a multi or multiRead reply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MultiResult {
    /// create: the final path.
    Create(String),
    /// createContainer / createTTL: path and Stat.
    Create2 {
        /// Final path.
        path: String,
        /// Stat of the new node.
        stat: Stat,
    },
    /// delete.
    Delete,
    /// setData: the new Stat.
    SetData(Stat),
    /// check.
    Check,
    /// getData (multiRead).
    GetData {
        /// Node data.
        data: Bytes,
        /// Node Stat.
        stat: Stat,
    },
    /// getChildren (multiRead).
    GetChildren(Vec<String>),
    /// This op failed (or, in a failed multi: 0 before the failing op, -2 after it).
    Error(ErrorCode),
}

/// The first non-zero error among a multi's results: the reason a transaction failed.
pub fn first_error(results: &[MultiResult]) -> Option<ErrorCode> {
    results.iter().find_map(|r| match r {
        MultiResult::Error(code) if !code.is_ok() => Some(*code),
        _ => None,
    })
}

/// The results a server sends for a multi of `ops` operations that failed at op `at`
/// with `code`: 0 for the ops before it, `code` for it, `RuntimeInconsistency` after
/// it (what models and test scripts answer; the inverse of [`multi_failure`]).
///
/// ```
/// use zk_recipes::proto::{failed_multi, ErrorCode, MultiResult};
/// assert_eq!(
///     failed_multi(3, 1, ErrorCode::NoNode),
///     [MultiResult::Error(ErrorCode::Ok), MultiResult::Error(ErrorCode::NoNode), MultiResult::Error(ErrorCode::RuntimeInconsistency)]
/// );
/// ```
pub fn failed_multi(ops: usize, at: usize, code: ErrorCode) -> Vec<MultiResult> {
    (0..ops)
        .map(|i| {
            MultiResult::Error(match i.cmp(&at) {
                core::cmp::Ordering::Less => ErrorCode::Ok,
                core::cmp::Ordering::Equal => code,
                core::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
            })
        })
        .collect()
}

/// Which op of a failed multi failed, and why: its index and error code (the ops before
/// it report 0, the ones after it `RuntimeInconsistency`). `None` for anything but a
/// multi reply that failed.
pub fn multi_failure<E>(result: &Result<Response, E>) -> Option<(usize, ErrorCode)> {
    match result {
        Ok(Response::Multi(results)) => results.iter().enumerate().find_map(|(i, r)| match r {
            MultiResult::Error(c) if !c.is_ok() && *c != ErrorCode::RuntimeInconsistency => {
                Some((i, *c))
            }
            _ => None,
        }),
        _ => None,
    }
}

impl MultiResult {
    fn op(&self) -> OpCode {
        match self {
            MultiResult::Create(_) => OpCode::Create,
            MultiResult::Create2 { .. } => OpCode::Create2,
            MultiResult::Delete => OpCode::Delete,
            MultiResult::SetData(_) => OpCode::SetData,
            MultiResult::Check => OpCode::Check,
            MultiResult::GetData { .. } => OpCode::GetData,
            MultiResult::GetChildren(_) => OpCode::GetChildren,
            MultiResult::Error(_) => OpCode::Error,
        }
    }

    fn encode(&self, buf: &mut BytesMut) {
        let err = match self {
            MultiResult::Error(code) => code.to_i32(),
            _ => 0,
        };
        MultiHeader {
            op: self.op().to_i32(),
            done: false,
            err,
        }
        .encode(buf);
        match self {
            MultiResult::Create(path) => path.encode(buf),
            MultiResult::Create2 { path, stat } => with_stat(path, stat, buf),
            MultiResult::Delete | MultiResult::Check => {}
            MultiResult::SetData(stat) => stat.encode(buf),
            MultiResult::GetData { data, stat } => with_stat(data, stat, buf),
            MultiResult::GetChildren(children) => children.encode(buf),
            MultiResult::Error(code) => code.to_i32().encode(buf),
        }
    }

    fn decode(header: &MultiHeader, buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(match OpCode::from_i32(header.op) {
            Some(OpCode::Create) => MultiResult::Create(Wire::decode(buf)?),
            Some(OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl) => {
                MultiResult::Create2 {
                    path: Wire::decode(buf)?,
                    stat: Wire::decode(buf)?,
                }
            }
            Some(OpCode::Delete) => MultiResult::Delete,
            Some(OpCode::SetData) => MultiResult::SetData(Wire::decode(buf)?),
            Some(OpCode::Check) => MultiResult::Check,
            Some(OpCode::GetData) => MultiResult::GetData {
                data: Wire::decode(buf)?,
                stat: Wire::decode(buf)?,
            },
            Some(OpCode::GetChildren) => MultiResult::GetChildren(Wire::decode(buf)?),
            Some(OpCode::Error) => MultiResult::Error(ErrorCode::from_i32(i32::decode(buf)?)),
            _ => return Err(DecodeError::UnexpectedType(header.op)),
        })
    }
}

/// Appends a body that is some value followed by a node's Stat (create2, getData,
/// getACL, getChildren2, and their multi results).
fn with_stat(value: &impl Wire, stat: &Stat, buf: &mut BytesMut) {
    value.encode(buf);
    stat.encode(buf);
}

impl Response {
    /// Decodes the body of a successful (`err == 0`) reply to a request of type `op`.
    /// Trailing bytes are ignored, as the Java client does.
    pub fn decode(op: OpCode, mut body: Bytes) -> Result<Response, DecodeError> {
        let buf = &mut body;
        Ok(match op {
            OpCode::Create | OpCode::Sync => Response::Path(Wire::decode(buf)?),
            OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => Response::PathStat {
                path: Wire::decode(buf)?,
                stat: Wire::decode(buf)?,
            },
            OpCode::Exists | OpCode::SetData | OpCode::SetAcl => Response::Stat(Wire::decode(buf)?),
            OpCode::GetData | OpCode::Reconfig => Response::Data {
                data: Wire::decode(buf)?,
                stat: Wire::decode(buf)?,
            },
            OpCode::GetAcl => Response::Acl {
                acl: Wire::decode(buf)?,
                stat: Wire::decode(buf)?,
            },
            OpCode::GetChildren | OpCode::GetEphemerals => Response::Children(Wire::decode(buf)?),
            OpCode::GetChildren2 => Response::Children2 {
                children: Wire::decode(buf)?,
                stat: Wire::decode(buf)?,
            },
            OpCode::GetAllChildrenNumber => Response::Count(Wire::decode(buf)?),
            OpCode::AddWatch => Response::WatchAdded,
            OpCode::Sasl => Response::Sasl(Wire::decode(buf)?),
            OpCode::WhoAmI => Response::WhoAmI(Wire::decode(buf)?),
            OpCode::Multi | OpCode::MultiRead => {
                let mut results = Vec::new();
                loop {
                    // Each round consumes at least a 9-byte header: bounded by the input.
                    let header = MultiHeader::decode(buf)?;
                    if header.done {
                        break Response::Multi(results);
                    }
                    results.push(MultiResult::decode(&header, buf)?);
                }
            }
            OpCode::Delete
            | OpCode::Ping
            | OpCode::Auth
            | OpCode::SetWatches
            | OpCode::SetWatches2
            | OpCode::CheckWatches
            | OpCode::RemoveWatches
            | OpCode::CloseSession
            | OpCode::Check => Response::Empty,
            OpCode::Notification
            | OpCode::DeleteContainer
            | OpCode::CreateSession
            | OpCode::Error => return Err(DecodeError::UnexpectedType(op.to_i32())),
        })
    }

    /// Appends the body (the server side of the codec; used by the simulator and tests).
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            Response::Empty => {}
            Response::Path(path) => path.encode(buf),
            Response::PathStat { path, stat } => with_stat(path, stat, buf),
            Response::Stat(stat) => stat.encode(buf),
            Response::Data { data, stat } => with_stat(data, stat, buf),
            Response::Acl { acl, stat } => with_stat(acl, stat, buf),
            Response::Children(children) => children.encode(buf),
            Response::Children2 { children, stat } => with_stat(children, stat, buf),
            Response::Count(n) => n.encode(buf),
            Response::WatchAdded => 0i32.encode(buf),
            Response::Sasl(token) => token.encode(buf),
            Response::WhoAmI(infos) => infos.encode(buf),
            Response::Multi(results) => {
                for r in results {
                    r.encode(buf);
                }
                MULTI_DONE.encode(buf);
            }
        }
    }
}
