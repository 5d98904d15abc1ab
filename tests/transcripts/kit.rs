//! The one transcript toolkit (issue 28): one request renderer with one vocabulary, the
//! drains (`sent`, `lines`, `events`), the reply constructors and two small macros.
//!
//! Vocabulary of a request line (a `!` after the verb means "and leave a watch"):
//!
//! | request | line |
//! | --- | --- |
//! | create / create2 | `create /p`, `create2 /p es 'data'` (mode `e`, `s`, `es`, `ttl`, `sttl`; data when not empty) |
//! | createContainer | `container /p` (data when not empty) |
//! | delete | `delete /p`, `delete /p @3` (the version unless -1) |
//! | exists / getData | `exists /p`, `exists! /p`, `get /p`, `get! /p` |
//! | getChildren / getChildren2 | `list /p`, `list! /p`, `list2 /p`, `list2! /p` |
//! | setData | `set /p 'data'`, `set /p 'data' @0` (data always, the version unless -1) |
//! | check (in a multi) | `check /p @2` |
//! | sync | `sync /p` |
//! | multi / multiRead | `multi[create /p, delete /q @1]`, `multiRead[get /p, list /q]` |
//! | setWatches2 | `setWatches2 @zxid data[..] exist[..] child[..] persistent[..] recursive[..]` (empty lists left out) |
//! | addWatch | `addWatch /p mode` |
//!
//! Data is written `'text'` when it is printable UTF-8 (a newline as `\n`), else `0x` and hex.
#![allow(dead_code, unused_imports, unused_macros)]

pub use bytes::Bytes;
pub use zk_recipes::client::Error;
pub use zk_recipes::proto::*;
pub use zk_recipes::recipe::{Machine, OpId, Recipe, SessionChange};
pub use zk_recipes::session::WatchEvent;
pub use zk_recipes::time::Instant;

/// Node data as it appears in a line: `'text'` or `0x..`.
pub fn data_text(d: &[u8]) -> String {
    match std::str::from_utf8(d) {
        Ok(s) if s.chars().all(|c| c == '\n' || !c.is_control()) => {
            format!("'{}'", s.replace('\n', "\\n"))
        }
        _ => {
            let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
        }
    }
}

fn mode_text(flags: i32) -> String {
    match CreateMode::from_i32(flags) {
        Some(CreateMode::Persistent) | Some(CreateMode::Container) => String::new(),
        Some(CreateMode::Ephemeral) => " e".into(),
        Some(CreateMode::PersistentSequential) => " s".into(),
        Some(CreateMode::EphemeralSequential) => " es".into(),
        Some(CreateMode::PersistentWithTtl) => " ttl".into(),
        Some(CreateMode::PersistentSequentialWithTtl) => " sttl".into(),
        None => format!(" flags={flags}"),
    }
}

fn opt_data(d: &[u8]) -> String {
    if d.is_empty() {
        String::new()
    } else {
        format!(" {}", data_text(d))
    }
}

fn opt_version(v: i32) -> String {
    if v == -1 {
        String::new()
    } else {
        format!(" @{v}")
    }
}

fn bang(watch: bool) -> &'static str {
    if watch {
        "!"
    } else {
        ""
    }
}

fn create_line(verb: &str, c: &CreateRequest) -> String {
    format!(
        "{verb} {}{}{}",
        c.path,
        mode_text(c.flags),
        opt_data(&c.data)
    )
}

fn container_line(c: &CreateRequest) -> String {
    format!("container {}{}", c.path, opt_data(&c.data))
}

fn set_line(s: &SetDataRequest) -> String {
    format!(
        "set {} {}{}",
        s.path,
        data_text(&s.data),
        opt_version(s.version)
    )
}

fn delete_line(d: &DeleteRequest) -> String {
    format!("delete {}{}", d.path, opt_version(d.version))
}

/// One sub-op of a multi, rendered as the request of its own kind.
pub fn multi_op_line(o: &MultiOp) -> String {
    match o {
        MultiOp::Create(c) => create_line("create", c),
        MultiOp::Create2(c) => create_line("create2", c),
        MultiOp::CreateContainer(c) => container_line(c),
        MultiOp::Delete(d) => delete_line(d),
        MultiOp::SetData(s) => set_line(s),
        MultiOp::Check(c) => format!("check {} @{}", c.path, c.version),
        other => format!("{other:?}"),
    }
}

fn list(name: &str, items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(" {name}[{}]", items.join(" "))
    }
}

/// The one line of a request.
pub fn line(r: &Request) -> String {
    match r {
        Request::Create(c) => create_line("create", c),
        Request::Create2(c) => create_line("create2", c),
        Request::CreateContainer(c) => container_line(c),
        Request::CreateTtl(c) => format!("createTTL {} ttl={}{}", c.path, c.ttl, opt_data(&c.data)),
        Request::Delete(d) => delete_line(d),
        Request::Exists(g) => format!("exists{} {}", bang(g.watch), g.path),
        Request::GetData(g) => format!("get{} {}", bang(g.watch), g.path),
        Request::GetChildren(g) => format!("list{} {}", bang(g.watch), g.path),
        Request::GetChildren2(g) => format!("list2{} {}", bang(g.watch), g.path),
        Request::SetData(s) => set_line(s),
        Request::Sync(p) => format!("sync {}", p.path),
        Request::Multi(ops) => format!(
            "multi[{}]",
            ops.iter().map(multi_op_line).collect::<Vec<_>>().join(", ")
        ),
        Request::MultiRead(ops) => format!(
            "multiRead[{}]",
            ops.iter()
                .map(|o| match o {
                    ReadOp::GetData(g) => format!("get {}", g.path),
                    ReadOp::GetChildren(g) => format!("list {}", g.path),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Request::SetWatches2(w) => format!(
            "setWatches2 @{}{}{}{}{}{}",
            w.relative_zxid,
            list("data", &w.data_watches),
            list("exist", &w.exist_watches),
            list("child", &w.child_watches),
            list("persistent", &w.persistent_watches),
            list("recursive", &w.persistent_recursive_watches)
        ),
        Request::AddWatch(a) => format!("addWatch {} {}", a.path, a.mode),
        other => format!("{other:?}"),
    }
}

/// The line of a request with each `(prefix, abbreviation)` replaced, longest first as
/// given (the `short` form for files whose paths share a long directory).
pub fn short_line(r: &Request, abbrev: &[(&str, &str)]) -> String {
    let mut l = line(r);
    for (long, short) in abbrev {
        l = l.replace(long, short);
    }
    l
}

/// Every request the machine has queued, with its op and its line.
pub fn sent<R: Recipe>(r: &mut R) -> Vec<(OpId, String)> {
    std::iter::from_fn(|| r.poll_request())
        .map(|(op, req)| (op, line(&req)))
        .collect()
}

/// Just the lines the machine has queued, owned.
pub fn sent_lines<R: Recipe>(r: &mut R) -> Vec<String> {
    sent(r).into_iter().map(|(_, l)| l).collect()
}

/// Just the lines of `sent`.
pub fn lines(s: &[(OpId, String)]) -> Vec<&str> {
    s.iter().map(|(_, l)| l.as_str()).collect()
}

/// Every event the machine has queued.
pub fn events<R: Recipe>(r: &mut R) -> Vec<R::Event> {
    std::iter::from_fn(|| r.poll_event()).collect()
}

/// The op of the one sent line equal to `want` (panics naming the lines otherwise).
pub fn op_of(s: &[(OpId, String)], want: &str) -> OpId {
    let mut hits = s.iter().filter(|(_, l)| l == want);
    match (hits.next(), hits.next()) {
        (Some((op, _)), None) => *op,
        _ => panic!("not exactly one `{want}` in {:?}", lines(s)),
    }
}

/// The instant `n` milliseconds after zero.
pub fn ms(n: u64) -> Instant {
    Instant::from_micros(n * 1000)
}

// ----- replies -----

/// An empty success (delete, setWatches2, a sync's `Empty`).
pub fn ok() -> Result<Response, Error> {
    Ok(Response::Empty)
}

/// A server error.
pub fn code(c: ErrorCode) -> Result<Response, Error> {
    Err(Error::from(c))
}

/// `NoNode`.
pub fn no_node() -> Result<Response, Error> {
    code(ErrorCode::NoNode)
}

/// A getChildren reply.
pub fn children(names: &[&str]) -> Result<Response, Error> {
    Ok(Response::Children(
        names.iter().map(|s| s.to_string()).collect(),
    ))
}

/// A getChildren2 reply.
pub fn children2(names: &[&str], stat: Stat) -> Result<Response, Error> {
    Ok(Response::Children2 {
        children: names.iter().map(|s| s.to_string()).collect(),
        stat,
    })
}

/// A getData reply.
pub fn data(d: &(impl AsRef<[u8]> + ?Sized), stat: Stat) -> Result<Response, Error> {
    Ok(Response::Data {
        data: Bytes::copy_from_slice(d.as_ref()),
        stat,
    })
}

/// An exists / setData reply.
pub fn stat_reply(stat: Stat) -> Result<Response, Error> {
    Ok(Response::Stat(stat))
}

/// A create2 / createContainer reply.
pub fn created2(path: &str, stat: Stat) -> Result<Response, Error> {
    Ok(Response::PathStat {
        path: path.into(),
        stat,
    })
}

/// A create reply.
pub fn created(path: &str) -> Result<Response, Error> {
    Ok(Response::Path(path.into()))
}

/// A watch notification.
pub fn ev(event_type: EventType, path: &str) -> WatchEvent {
    WatchEvent {
        event_type,
        path: path.into(),
    }
}

/// A `Stat` built by named fields: `st().czxid(1).mzxid(2).owner(0x42)`.
pub fn st() -> Stat {
    Stat::default()
}

/// Named setters on `Stat` for the builder [`st`].
pub trait StatExt {
    /// Creation zxid.
    fn czxid(self, v: i64) -> Self;
    /// Last-modified zxid.
    fn mzxid(self, v: i64) -> Self;
    /// Last child change zxid.
    fn pzxid(self, v: i64) -> Self;
    /// Data version.
    fn version(self, v: i32) -> Self;
    /// Child version.
    fn cversion(self, v: i32) -> Self;
    /// Ephemeral owner session.
    fn owner(self, v: i64) -> Self;
    /// Number of children.
    fn num_children(self, v: i32) -> Self;
}

impl StatExt for Stat {
    fn czxid(mut self, v: i64) -> Self {
        self.czxid = v;
        self
    }
    fn mzxid(mut self, v: i64) -> Self {
        self.mzxid = v;
        self
    }
    fn pzxid(mut self, v: i64) -> Self {
        self.pzxid = v;
        self
    }
    fn version(mut self, v: i32) -> Self {
        self.version = v;
        self
    }
    fn cversion(mut self, v: i32) -> Self {
        self.cversion = v;
        self
    }
    fn owner(mut self, v: i64) -> Self {
        self.ephemeral_owner = v;
        self
    }
    fn num_children(mut self, v: i32) -> Self {
        self.num_children = v;
        self
    }
}

/// Asserts the lines a machine sends now and yields them with their ops:
/// `let s = expect_sent!(m, ["create2 /l/x- es", "list! /l"]);`
macro_rules! expect_sent {
    ($m:expr, [$($l:expr),* $(,)?]) => {{
        let s = $crate::kit::sent(&mut $m);
        assert_eq!($crate::kit::lines(&s), [$($l),*]);
        s
    }};
}

pub(crate) use expect_sent;

/// A machine driven by its lines: it keeps what was sent and not answered, answers by
/// line, routes watch events to the request that set the watch, and keeps the time.
pub struct Script<R: Recipe> {
    /// The machine.
    pub r: R,
    /// The time every input carries.
    pub now: Instant,
    /// Sent and not answered, oldest first.
    pub pending: Vec<(OpId, String)>,
    /// Answered, oldest first.
    pub answered: Vec<(OpId, String)>,
    /// The `short` form: `(long, short)` replacements applied to every line.
    pub abbrev: Vec<(String, String)>,
}

impl<R: Recipe> Script<R> {
    /// A script over `r` at time zero, as it is (no session event).
    pub fn new(r: R) -> Self {
        Script {
            r,
            now: Instant::ZERO,
            pending: Vec::new(),
            answered: Vec::new(),
            abbrev: Vec::new(),
        }
    }

    /// A script over `r` whose session is connected as `session_id`.
    pub fn connected(r: R, session_id: i64) -> Self {
        let mut s = Script::new(r);
        s.session(SessionChange::Connected { session_id });
        s
    }

    /// Lines use the `short` form: each `long` written as `short`.
    pub fn short(mut self, abbrev: &[(&str, &str)]) -> Self {
        self.abbrev = abbrev
            .iter()
            .map(|(l, s)| (l.to_string(), s.to_string()))
            .collect();
        self
    }

    fn shorten(&self, l: String) -> String {
        self.abbrev
            .iter()
            .fold(l, |l, (long, s)| l.replace(long, s))
    }

    /// The lines sent since the last call (they join the pending ones).
    pub fn sent(&mut self) -> Vec<String> {
        let new: Vec<(OpId, String)> = std::iter::from_fn(|| self.r.poll_request())
            .map(|(op, req)| (op, line(&req)))
            .collect();
        let new: Vec<(OpId, String)> = new
            .into_iter()
            .map(|(op, l)| (op, self.shorten(l)))
            .collect();
        let lines = new.iter().map(|(_, l)| l.clone()).collect();
        self.pending.extend(new);
        lines
    }

    /// Answers the pending request whose line is `prefix`, or else the oldest one whose
    /// line starts with it.
    pub fn reply(&mut self, prefix: &str, result: Result<Response, Error>) {
        self.sent();
        let at = self
            .pending
            .iter()
            .position(|(_, l)| l == prefix)
            .or_else(|| self.pending.iter().position(|(_, l)| l.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no pending `{prefix}` in {:?}", self.pending));
        let (op, l) = self.pending.remove(at);
        self.answered.push((op, l));
        self.r.handle_reply(self.now, op, result);
    }

    /// Every pending request fails with `e` (the connection dropped).
    pub fn fail_all(&mut self, e: Error) {
        self.sent();
        for (op, _) in std::mem::take(&mut self.pending) {
            self.r.handle_reply(self.now, op, Err(e.clone()));
        }
    }

    /// Every pending request fails with `ConnectionLoss`, then the session is suspended.
    pub fn disconnect(&mut self) {
        self.fail_all(Error::ConnectionLoss);
        self.session(SessionChange::Suspended);
    }

    /// A watch fires on `path`, routed (as the host does) to the op of the last answered
    /// request that set a watch (`exists!`, `get!`, `list!`, `list2!`, `setWatches2`) on
    /// it.
    pub fn fire(&mut self, event_type: EventType, path: &str) {
        let p = self.shorten(path.to_string());
        let op = self
            .answered
            .iter()
            .rev()
            .find(|(_, l)| {
                let mut words = l.split(' ');
                let verb = words.next().unwrap_or("");
                if verb == "setWatches2" {
                    words.any(|w| w.trim_end_matches(']').split(['[', ' ']).any(|x| x == p))
                } else {
                    verb.ends_with('!') && words.next() == Some(p.as_str())
                }
            })
            .map(|(op, _)| *op)
            .unwrap_or_else(|| panic!("nothing watched {path} in {:?}", self.answered));
        self.fire_at(op, event_type, path);
    }

    /// A watch fires on `path`, routed to the op of the last answered request, whatever
    /// it was.
    pub fn fire_last(&mut self, event_type: EventType, path: &str) {
        let op = self.answered.last().map(|(op, _)| *op).unwrap_or(0);
        self.fire_at(op, event_type, path);
    }

    /// A watch event on `path` for the op `op`.
    pub fn fire_at(&mut self, op: OpId, event_type: EventType, path: &str) {
        self.r.handle_watch(self.now, op, &ev(event_type, path));
    }

    /// The events queued.
    pub fn events(&mut self) -> Vec<R::Event> {
        events(&mut self.r)
    }

    /// A session change, now. On `Expired` and `Closed` the pending requests are
    /// dropped (the session answered them all).
    pub fn session(&mut self, change: SessionChange) {
        if matches!(change, SessionChange::Expired | SessionChange::Closed) {
            self.sent();
            self.pending.clear();
        }
        self.r.handle_session(self.now, change);
    }

    /// Time moves on by `d`, and the machine's timers are run.
    pub fn advance(&mut self, d: std::time::Duration) {
        self.now = self.now + d;
        self.r.handle_timeout(self.now);
    }
}

/// A multi reply with these results.
pub fn multi(results: Vec<MultiResult>) -> Result<Response, Error> {
    Ok(Response::Multi(results))
}

/// A multi of `n` deletes that all succeeded.
pub fn multi_deleted(n: usize) -> Result<Response, Error> {
    multi(vec![MultiResult::Delete; n])
}

/// A multi of `n` ops failed by its op `at` with `c`.
pub fn multi_failed(at: usize, c: ErrorCode, n: usize) -> Result<Response, Error> {
    multi(failed_multi(n, at, c))
}
