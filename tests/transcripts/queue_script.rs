//! The transcript notation shared by `queue_transcripts.rs` and `queue_regressions.rs`:
//! a `Script` that answers a recipe's requests by their short line, and reply helpers.
#![allow(dead_code, unused_imports)]

pub use bytes::Bytes;
pub use zk_recipes::client::Error;
pub use zk_recipes::proto::*;
pub use zk_recipes::recipe::queue::*;
pub use zk_recipes::recipe::{OpId, Recipe, SessionChange};
pub use zk_recipes::session::WatchEvent;
pub use zk_recipes::time::Instant;

pub const DIR: &str = "/app/q";
pub const META: &str = "/app/q-meta";
pub const SESSION: i64 = 0x77;
pub const T: Instant = Instant::ZERO;

pub struct Script<R: Recipe> {
    pub r: R,
    pub pending: Vec<(OpId, String)>,
    pub answered: Vec<(OpId, String)>,
}

pub fn short(p: &str) -> String {
    p.replace(META, "M").replace(DIR, "Q")
}

pub fn line(r: &Request) -> String {
    let op = |o: &MultiOp| match o {
        MultiOp::Create(c) => format!("create {}", short(&c.path)),
        MultiOp::SetData(s) => format!("set {}@{}", short(&s.path), s.version),
        MultiOp::Delete(d) => format!("delete {}", short(&d.path)),
        other => format!("{other:?}"),
    };
    match r {
        Request::Create(c) => format!("create {}", short(&c.path)),
        Request::CreateContainer(c) => format!("container {}", short(&c.path)),
        Request::GetChildren(g) if g.watch => format!("list! {}", short(&g.path)),
        Request::GetChildren(g) => format!("list {}", short(&g.path)),
        Request::Exists(g) => format!("exists {}", short(&g.path)),
        Request::Delete(d) => format!("delete {}", short(&d.path)),
        Request::Sync(p) => format!("sync {}", short(&p.path)),
        Request::MultiRead(ops) => format!(
            "read {}",
            ops.iter()
                .map(|o| match o {
                    ReadOp::GetData(g) => short(&g.path),
                    ReadOp::GetChildren(g) => short(&g.path),
                })
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Request::Multi(ops) => format!(
            "multi {}",
            ops.iter().map(op).collect::<Vec<_>>().join(" + ")
        ),
        other => format!("{other:?}"),
    }
}

impl<R: Recipe> Script<R> {
    pub fn new(mut r: R) -> Self {
        r.handle_session(
            T,
            SessionChange::Connected {
                session_id: SESSION,
            },
        );
        Script {
            r,
            pending: Vec::new(),
            answered: Vec::new(),
        }
    }

    pub fn sent(&mut self) -> Vec<String> {
        let new: Vec<(OpId, String)> = std::iter::from_fn(|| self.r.poll_request())
            .map(|(op, r)| (op, line(&r)))
            .collect();
        let lines = new.iter().map(|(_, l)| l.clone()).collect();
        self.pending.extend(new);
        lines
    }

    pub fn reply(&mut self, prefix: &str, result: Result<Response, Error>) {
        self.sent();
        let at = self
            .pending
            .iter()
            .position(|(_, l)| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no pending `{prefix}` in {:?}", self.pending));
        let (op, l) = self.pending.remove(at);
        self.answered.push((op, l));
        self.r.handle_reply(T, op, result);
    }

    /// Every pending request fails with connection loss, then the session is suspended.
    pub fn drop_connection(&mut self) {
        self.sent();
        for (op, l) in std::mem::take(&mut self.pending) {
            self.answered.push((op, l));
            self.r.handle_reply(T, op, Err(Error::ConnectionLoss));
        }
        self.r.handle_session(T, SessionChange::Suspended);
    }

    pub fn fire(&mut self, event_type: EventType, path: &str) {
        let op = self
            .answered
            .iter()
            .rev()
            .find(|(_, l)| l.starts_with("list! ") && l.ends_with(&short(path)))
            .map(|(op, _)| *op)
            .unwrap_or_else(|| panic!("nothing watched {path}"));
        self.r.handle_watch(
            T,
            op,
            &WatchEvent {
                event_type,
                path: path.into(),
            },
        );
    }

    pub fn events(&mut self) -> Vec<R::Event> {
        std::iter::from_fn(|| self.r.poll_event()).collect()
    }
}

pub fn stat(version: i32, owner: i64) -> Stat {
    Stat {
        version,
        ephemeral_owner: owner,
        ..Stat::default()
    }
}

pub fn kids(names: &[&str]) -> Result<Response, Error> {
    Ok(Response::Children(
        names.iter().map(|s| s.to_string()).collect(),
    ))
}

pub fn multi(results: Vec<MultiResult>) -> Result<Response, Error> {
    Ok(Response::Multi(results))
}

pub fn created(name: &str) -> MultiResult {
    MultiResult::Create(format!("{DIR}/{name}"))
}

pub fn data(d: &str) -> MultiResult {
    MultiResult::GetData {
        data: Bytes::copy_from_slice(d.as_bytes()),
        stat: Stat::default(),
    }
}

pub fn err(code: ErrorCode) -> MultiResult {
    MultiResult::Error(code)
}
