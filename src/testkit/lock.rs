//! A [`Lock`] fed arbitrary replies, watch events, session changes, commands and time
//! from bytes. Invariants checked after every step:
//!
//! * never `Acquired` while a blocker it was shown still exists (the fake directory
//!   always holds a lower contender that is never deleted, in "blocked" schedules);
//! * at most one `Acquired` per attempt, and nothing after the attempt ended except
//!   node cleanup;
//! * every node the fake server created for it is deleted or reported (the lock ends
//!   `Done` only after deleting its node or losing its session);
//! * `poll_timeout` never lies in the past after `handle_timeout`.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;

use crate::proto::*;
use crate::recipe::lock::{Lock, LockConfig, LockEvent, LockKind};
use crate::recipe::{OpId, Recipe, RecipeEvent, SessionChange};
use crate::session::WatchEvent;
use crate::time::Instant;

const DIR: &str = "/l";
const SESSION: i64 = 0x5e55;
const BLOCKER: &str = "_c_other-lock-0000000000";

/// The fake server's answer to a create2 or delete, keeping its node list in step.
fn answer_write(
    req: &Request,
    nodes: &mut Vec<String>,
    seq: &mut u32,
) -> Option<Result<Response, ErrorCode>> {
    match req {
        Request::Create2(c) => {
            let name = format!("{}{:010}", c.path.rsplit('/').next().unwrap_or(""), *seq);
            *seq += 1;
            nodes.push(name.clone());
            let stat = Stat {
                czxid: i64::from(*seq),
                ephemeral_owner: SESSION,
                ..Stat::default()
            };
            Some(Ok(Response::PathStat {
                path: format!("{DIR}/{name}"),
                stat,
            }))
        }
        Request::Delete(d) => {
            let name = d.path.rsplit('/').next().unwrap_or("").to_string();
            Some(match nodes.iter().position(|n| *n == name) {
                Some(i) => {
                    nodes.remove(i);
                    Ok(Response::Empty)
                }
                None => Err(ErrorCode::NoNode),
            })
        }
        _ => None,
    }
}

/// Runs one schedule; `Err` describes the broken invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    let mut trace = Vec::new();
    run_traced(schedule, &mut trace).map_err(|e| {
        let tail: Vec<&String> = trace
            .iter()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!(
            "{e}\nlast steps:\n{}",
            tail.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn run_traced(schedule: &[u8], trace: &mut Vec<String>) -> Result<(), String> {
    let mut input = schedule.iter().copied();
    let first = input.next().unwrap_or(0);
    let kind = match first % 3 {
        0 => LockKind::Exclusive,
        1 => LockKind::Read,
        _ => LockKind::Write,
    };
    // "Blocked": a lower writer that never goes away exists; the lock must never be held.
    let blocked = first & 4 != 0;
    let mut config = LockConfig::new(DIR, kind, "fuzz");
    config.revocable = first & 8 != 0;
    let mut lock = Lock::new(config);
    lock.handle_session(
        Instant::ZERO,
        SessionChange::Connected {
            session_id: SESSION,
        },
    );
    let mut now = Instant::ZERO;
    let mut pending: Vec<(OpId, Request)> = Vec::new();
    let mut seq = 1u32;
    let mut nodes: Vec<String> = Vec::new(); // our nodes the fake server holds
    let mut acquired = 0;
    let mut ended = false;
    let mut session_alive = true;
    let blocker_name = if kind == LockKind::Read {
        "_c_other-__WRIT__0000000000"
    } else {
        BLOCKER
    };

    lock.acquire(now, None);
    while let Some(op) = input.next() {
        let arg = input.next().unwrap_or(0);
        while let Some(r) = lock.poll_request() {
            if ended && !matches!(r.1, Request::Delete(_)) {
                return Err(format!("request {:?} after the attempt ended", r.1));
            }
            trace.push(format!("  sent {} {:?}", r.0, r.1.op_code()));
            pending.push(r);
        }
        trace.push(format!("step op {} arg {arg} nodes {nodes:?}", op % 10));
        match op % 10 {
            // Answer a pending request like a consistent server would.
            0..=3 if !pending.is_empty() => {
                let (id, req) = pending.remove(usize::from(arg) % pending.len());
                let reply = match (&req, arg % 8) {
                    (_, 7) => Err(ErrorCode::ConnectionLoss),
                    (Request::Create2(_), _) | (Request::Delete(_), _) => {
                        answer_write(&req, &mut nodes, &mut seq)
                            .unwrap_or(Err(ErrorCode::SystemError))
                    }
                    (Request::CreateContainer(_), _) => Err(ErrorCode::NodeExists),
                    (Request::GetChildren(_), _) => {
                        let mut kids = nodes.clone();
                        if blocked {
                            kids.push(blocker_name.into());
                        }
                        kids.push("unrelated".into());
                        Ok(Response::Children(kids))
                    }
                    (Request::GetData(g), _) | (Request::Exists(g), _) => {
                        let name = g.path.rsplit('/').next().unwrap_or("");
                        let exists =
                            nodes.iter().any(|n| n == name) || (blocked && name == blocker_name);
                        if !exists {
                            Err(ErrorCode::NoNode)
                        } else if matches!(req, Request::Exists(_)) {
                            Ok(Response::Stat(Stat {
                                ephemeral_owner: SESSION,
                                ..Stat::default()
                            }))
                        } else {
                            Ok(Response::Data {
                                data: Bytes::from_static(if arg & 1 == 0 {
                                    b""
                                } else {
                                    b"unlock"
                                }),
                                stat: Stat {
                                    ephemeral_owner: SESSION,
                                    ..Stat::default()
                                },
                            })
                        }
                    }
                    _ => Err(ErrorCode::from_i32(-i32::from(arg))),
                };
                trace.push(format!("  reply {id} {req:?} -> {reply:?}"));
                lock.handle_reply(now, id, reply);
            }
            // A garbage reply to a pending op.
            // (Creates and deletes always get consistent answers: the fake server's
            // state must match what the lock is told.)
            4 if pending
                .iter()
                .any(|(_, r)| !matches!(r, Request::Delete(_) | Request::Create2(_))) =>
            {
                let at = pending
                    .iter()
                    .position(|(_, r)| !matches!(r, Request::Delete(_) | Request::Create2(_)))
                    .unwrap_or(0);
                let (id, _) = pending.remove(at);
                let junk = match arg % 4 {
                    0 => Ok(Response::Empty),
                    1 => Ok(Response::Count(7)),
                    2 => Err(ErrorCode::Unknown(-999)),
                    _ => Err(ErrorCode::NoAuth),
                };
                trace.push(format!("  junk {id} -> {junk:?}"));
                lock.handle_reply(now, id, junk);
            }
            // A watch event on any node of the directory (never the permanent blocker's deletion).
            5 => {
                let name = match (arg % 3, nodes.first()) {
                    (0, Some(n)) => n.clone(),
                    (1, _) => blocker_name.into(),
                    _ => "_c_x-lock-0000000009".into(),
                };
                let event_type = if arg & 8 != 0 {
                    EventType::NodeDataChanged
                } else {
                    EventType::NodeDeleted
                };
                if event_type == EventType::NodeDeleted
                    && (blocked && name == blocker_name || nodes.contains(&name))
                {
                    continue; // that node still exists: the server would not say otherwise
                }
                lock.handle_watch(
                    now,
                    OpId::from(arg),
                    &WatchEvent {
                        event_type,
                        path: format!("{DIR}/{name}"),
                    },
                );
            }
            6 => {
                let change = match arg % 5 {
                    0 => SessionChange::Suspended,
                    1 => SessionChange::Reconnected {
                        session_id: SESSION,
                    },
                    2 if arg > 200 => SessionChange::Expired,
                    _ => SessionChange::Suspended,
                };
                if change == SessionChange::Expired {
                    session_alive = false;
                    nodes.clear(); // ephemerals go with the session
                    pending.clear();
                }
                lock.handle_session(now, change);
            }
            7 => match arg % 3 {
                0 => lock.release(now),
                1 => lock.cancel(now),
                _ => {}
            },
            _ => {
                now = now + core::time::Duration::from_millis(u64::from(arg));
                lock.handle_timeout(now);
                if lock.poll_timeout().is_some_and(|t| t < now) {
                    return Err(String::from("deadline in the past after handle_timeout"));
                }
            }
        }
        while let Some(RecipeEvent::Lock(e)) = lock.poll_event() {
            trace.push(format!("  event {e:?}"));
            match &e {
                LockEvent::Acquired { .. } => {
                    if blocked {
                        return Err(String::from("Acquired while a lower blocker exists"));
                    }
                    acquired += 1;
                    if acquired > 1 {
                        return Err(String::from("Acquired twice in one attempt"));
                    }
                }
                e if e.ends_attempt() => {
                    if ended && !matches!(e, LockEvent::Released | LockEvent::Cancelled) {
                        return Err(format!("{e:?} after the attempt ended"));
                    }
                    ended = true;
                }
                _ => {}
            }
        }
    }
    // Settle: answer everything consistently; the lock must clean up after itself.
    if session_alive && !ended {
        lock.cancel(now);
    }
    for _ in 0..20_000 {
        let Some((id, req)) = lock
            .poll_request()
            .or_else(|| (!pending.is_empty()).then(|| pending.remove(0)))
        else {
            break;
        };
        let reply = match &req {
            Request::Delete(_) | Request::Create2(_) => {
                answer_write(&req, &mut nodes, &mut seq).unwrap_or(Err(ErrorCode::SystemError))
            }
            Request::GetChildren(_) => Ok(Response::Children(nodes.clone())),
            Request::Exists(g) | Request::GetData(g) => {
                let name = g.path.rsplit('/').next().unwrap_or("");
                if nodes.iter().any(|n| n == name) {
                    Ok(Response::Stat(Stat {
                        ephemeral_owner: SESSION,
                        ..Stat::default()
                    }))
                } else {
                    Err(ErrorCode::NoNode)
                }
            }
            _ => Err(ErrorCode::NodeExists),
        };
        trace.push(format!("  settle {id} {req:?} -> {reply:?}"));
        lock.handle_reply(now, id, reply);
        while let Some(e) = lock.poll_event() {
            trace.push(format!("  event {e:?}"));
        }
    }
    if session_alive && !nodes.is_empty() {
        return Err(format!(
            "nodes left after cancel/release settled: {nodes:?}"
        ));
    }
    Ok(())
}
