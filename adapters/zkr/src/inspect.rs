//! `zkr inspect`: prints what the library's `describe_below` found (the meaning of the
//! nodes is decided there, once), as text or JSON, once or on every change.

use std::io::IsTerminal;
use std::time::Duration;

use serde_json::{json, Value};

use crate::show::{age, json_line, line, out, session, utc};
use crate::zk::{Description, InspectedNode, Shape, Survey, Zk, ZkError};

/// `n` and the word, singular or plural.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One participant as a text line: its role, session, age, fencing token, label, node.
fn text(role: &str, p: &InspectedNode, token: bool) -> String {
    let mut s = format!(
        "  {role:<12} session {:<18}  since {} ({} ago)",
        session(p.session()),
        utc(p.created_ms()),
        age(p.created_ms())
    );
    if token {
        s.push_str(&format!("  fencing token {}", p.fencing_token()));
    }
    if let Some(label) = p.label() {
        s.push_str(&format!("  \"{label}\""));
    }
    s.push_str(&format!("  {}", p.name));
    s
}

fn numbered<'a>(
    role: &'a str,
    ps: &'a [InspectedNode],
    token: bool,
) -> impl Iterator<Item = String> + 'a {
    ps.iter()
        .enumerate()
        .map(move |(i, p)| text(&format!("{role} {}", i + 1), p, token))
}

/// A description as text: a header line, then one line per participant.
fn describe_text(d: &Description) -> Vec<String> {
    let path = &d.path;
    let mut lines = Vec::new();
    match &d.shape {
        Shape::Lock { holder, waiters } => {
            lines.push(match holder {
                Some(h) => format!(
                    "{path}: lock held by session {}, {} waiting",
                    session(h.session()),
                    waiters.len()
                ),
                None => format!("{path}: lock, free"),
            });
            lines.extend(holder.iter().map(|h| text("holder", h, true)));
            lines.extend(numbered("waiter", waiters, true));
        }
        Shape::ReadWriteLock { holders, waiters } => {
            lines.push(format!(
                "{path}: read-write lock, {} holding, {} waiting",
                holders.len(),
                waiters.len()
            ));
            let kind = |p: &InspectedNode| if p.is_reader() { "read" } else { "write" };
            for h in holders {
                lines.push(text(&format!("holds {}", kind(h)), h, true));
            }
            for (i, w) in waiters.iter().enumerate() {
                lines.push(text(&format!("waits {} {}", kind(w), i + 1), w, true));
            }
        }
        Shape::Election { leader, candidates } => {
            lines.push(match leader {
                Some(l) => format!(
                    "{path}: election led by {} (session {}), {}",
                    l.label()
                        .map_or_else(|| l.name.clone(), |id| format!("\"{id}\"")),
                    session(l.session()),
                    count(candidates.len(), "other candidate", "other candidates")
                ),
                None => format!("{path}: election, no candidate"),
            });
            lines.extend(leader.iter().map(|l| text("leader", l, true)));
            lines.extend(numbered("candidate", candidates, true));
        }
        Shape::Semaphore { leases, queued } => {
            lines.push(format!(
                "{path}: semaphore, {} taken, {} queued",
                count(leases.len(), "lease", "leases"),
                queued.len()
            ));
            lines.extend(numbered("lease", leases, false));
            lines.extend(numbered("queued", queued, false));
        }
        Shape::Queue {
            priority,
            items,
            oldest,
            claims,
        } => queue_text(path, *priority, *items, oldest.as_ref(), claims, &mut lines),
        Shape::DoubleBarrier { ready, members } => {
            lines.push(format!(
                "{path}: double barrier, {} entered, {}",
                members.len(),
                if *ready {
                    "open (ready)"
                } else {
                    "filling (no ready node yet)"
                }
            ));
            lines.extend(numbered("member", members, false));
        }
        Shape::Node => lines.push(format!("{path}: a node of no recipe layout")),
        other => lines.push(format!("{path}: {other:?}")),
    }
    if d.unread > 0 {
        lines.push(format!("  ... and {} more not read", d.unread));
    }
    lines
}

/// A queue's header line (items, the oldest's age, claims), its oldest item and claims.
fn queue_text(
    path: &str,
    priority: bool,
    items: usize,
    oldest: Option<&InspectedNode>,
    claims: &[InspectedNode],
    lines: &mut Vec<String>,
) {
    let kind = if priority { "priority queue" } else { "queue" };
    lines.push(match oldest {
        Some(o) => format!(
            "{path}: {kind}, {}, the oldest {} old, {} claimed",
            count(items, "item", "items"),
            age(o.created_ms()),
            claims.len()
        ),
        None => format!(
            "{path}: {kind}, {}, {} claimed",
            count(items, "item", "items"),
            claims.len()
        ),
    });
    lines.extend(oldest.iter().map(|o| {
        format!(
            "  {:<12} created {} ({} ago), {} bytes  {}",
            "oldest",
            utc(o.created_ms()),
            age(o.created_ms()),
            o.stat.data_length,
            o.name
        )
    }));
    lines.extend(numbered("claim", claims, false));
}

fn node_json(p: &InspectedNode) -> Value {
    json!({
        "node": p.name,
        "session": session(p.session()),
        "created": utc(p.created_ms()),
        "created_ms": p.created_ms(),
        "fencing_token": p.fencing_token(),
        "label": p.label(),
        "data_length": p.stat.data_length,
    })
}

fn nodes_json(ps: &[InspectedNode]) -> Value {
    Value::Array(ps.iter().map(node_json).collect())
}

fn describe_json(d: &Description) -> Value {
    let one = |p: &Option<InspectedNode>| p.as_ref().map_or(Value::Null, node_json);
    let mut v = match &d.shape {
        Shape::Lock { holder, waiters } => {
            json!({ "holder": one(holder), "waiters": nodes_json(waiters) })
        }
        Shape::ReadWriteLock { holders, waiters } => {
            let with_kind = |ps: &[InspectedNode]| {
                Value::Array(
                    ps.iter()
                        .map(|p| {
                            let mut v = node_json(p);
                            v["read"] = Value::from(p.is_reader());
                            v
                        })
                        .collect(),
                )
            };
            json!({ "holders": with_kind(holders), "waiters": with_kind(waiters) })
        }
        Shape::Election { leader, candidates } => {
            json!({ "leader": one(leader), "candidates": nodes_json(candidates) })
        }
        Shape::Semaphore { leases, queued } => {
            json!({ "leases": nodes_json(leases), "queued": nodes_json(queued) })
        }
        Shape::Queue {
            priority,
            items,
            oldest,
            claims,
        } => json!({
            "priority": priority,
            "items": items,
            "oldest": one(oldest),
            "claims": nodes_json(claims),
        }),
        Shape::DoubleBarrier { ready, members } => {
            json!({ "ready": ready, "members": nodes_json(members) })
        }
        _ => json!({}),
    };
    v["path"] = Value::from(d.path.as_str());
    v["kind"] = Value::from(d.shape.kind().name());
    v["unread"] = Value::from(d.unread);
    v
}

/// Prints one survey of `path`.
fn print(path: &str, survey: &Survey, as_json: bool) -> Result<(), u8> {
    if as_json {
        return json_line(&json!({
            "path": path,
            "recipes": survey.descriptions.iter().map(describe_json).collect::<Vec<_>>(),
            "truncated": survey.truncated,
        }));
    }
    if survey.descriptions.is_empty() {
        line(&format!("no recipe nodes at or below {path}"))?;
    }
    for d in &survey.descriptions {
        for l in describe_text(d) {
            line(&l)?;
        }
    }
    if survey.truncated {
        line("(stopped after 10,000 requests: inspect a path further down)")?;
    }
    Ok(())
}

/// `zkr inspect PATH [--json] [--watch]`.
pub fn run(zk: &Zk, path: &str, as_json: bool, watch: bool) -> Result<u8, u8> {
    let fail = |e: ZkError| crate::zk_fail(e);
    if !watch {
        let survey = zk.inspect(path).map_err(fail)?;
        return print(path, &survey, as_json).map(|()| 0);
    }
    // Watch first, then look: a change after the look is never missed.
    let mut watching = zk.watch(path, true).map_err(fail)?;
    let clear = !as_json && std::io::stdout().is_terminal();
    loop {
        let survey = zk.inspect(path);
        if clear {
            out(b"\x1b[H\x1b[2J")?;
            line(&format!(
                "zkr inspect {path} at {} (redrawn on every change; Ctrl-C to stop)\n",
                utc(crate::show::now_ms())
            ))?;
        } else if !as_json {
            line(&format!("--- {}", utc(crate::show::now_ms())))?;
        }
        match survey {
            Ok(survey) => print(path, &survey, as_json)?,
            Err(e) => eprintln!("zkr: {e}"),
        }
        // Wait for a change, then let a burst of them settle (100 ms of quiet).
        let ended = || fail(zk.ended("inspect --watch", path));
        loop {
            match watching.changed_within(Duration::from_secs(3600)) {
                Some(true) => break,
                Some(false) => {}
                None => return Err(ended()),
            }
        }
        loop {
            match watching.changed_within(Duration::from_millis(100)) {
                Some(true) => {}
                Some(false) => break,
                None => return Err(ended()),
            }
        }
    }
}
