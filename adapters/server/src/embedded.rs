//! The model served over real TCP: [`EmbeddedServer`].
//!
//! One background thread owns the listener, every connection and the [`ServerModel`];
//! it waits on them with `mio` (no async runtime), reads what clients write into the
//! model, writes what the model answers, and moves the model's clock on real time
//! (sessions expire, containers and TTL nodes are reaped, lagging followers catch up).
//! The handle's calls (the fault controls, [`inspect`](EmbeddedServer::inspect)) run
//! on that thread between two reads, and return once done.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BytesMut};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use zk_recipes::proto::{ErrorCode, DEFAULT_MAX_REQUEST};

use crate::four_letter;
use crate::model::{ConnId, ServerConfig, ServerModel, Stats};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);

/// How an [`EmbeddedServer`] is started: [`EmbeddedServer::builder`].
#[derive(Clone, Debug)]
pub struct Builder {
    addr: SocketAddr,
    config: ServerConfig,
    max_connections: usize,
    max_request: usize,
    max_output: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            config: ServerConfig {
                // ZooKeeper's own default for `znode.container.checkIntervalMs`.
                container_check_ms: 60_000,
                ..ServerConfig::default()
            },
            max_connections: 1024,
            max_request: DEFAULT_MAX_REQUEST,
            max_output: 16 * 1024 * 1024,
        }
    }
}

impl Builder {
    /// Listens on `127.0.0.1:port` (default: port 0, a free port the system picks).
    pub fn port(mut self, port: u16) -> Self {
        self.addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        self
    }

    /// Listens on `addr` (default `127.0.0.1:0`). The server has no authentication of
    /// its own beyond ZooKeeper's ACLs: keep it on loopback.
    pub fn addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// The range of session timeouts granted (default 1 s to 40 s: ZooKeeper's
    /// `minSessionTimeout` and `maxSessionTimeout`; a client asking for less or more
    /// gets the bound).
    pub fn session_timeouts(mut self, min: Duration, max: Duration) -> Self {
        self.config.min_session_timeout_ms = millis_i32(min);
        self.config.max_session_timeout_ms =
            millis_i32(max).max(self.config.min_session_timeout_ms);
        self
    }

    /// How often empty containers and expired TTL nodes are reaped (default 60 s, as
    /// ZooKeeper's `znode.container.checkIntervalMs`; a test can also call
    /// [`EmbeddedServer::reap_now`]).
    pub fn container_check(mut self, every: Duration) -> Self {
        self.config.container_check_ms =
            i64::try_from(every.as_millis()).unwrap_or(i64::MAX).max(1);
        self
    }

    /// Whether TTL nodes may be created (default yes; off, `createTTL` is answered
    /// `Unimplemented` as by a server without `zookeeper.extendedTypesEnabled`).
    pub fn ttl_nodes(mut self, enabled: bool) -> Self {
        self.config.ttl_enabled = enabled;
        self
    }

    /// At most this many connections at once (default 1024); more are closed as
    /// accepted, as ZooKeeper does past `maxClientCnxns`.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Binds the listener and starts the server's thread.
    pub fn start(self) -> io::Result<EmbeddedServer> {
        let std_listener = std::net::TcpListener::bind(self.addr)?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let mut listener = TcpListener::from_std(std_listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (controls_tx, controls) = mpsc::channel();
        let clock = Clock::new();
        let mut config = self.config;
        // As ZooKeeper does: session ids from the clock (server id 1 in the top byte),
        // so a server restarted on the same port never hands a reconnecting client of
        // the last one somebody else's session.
        config.first_session_id = (1 << 56) | ((clock.start_ms << 24) as u64 >> 8) as i64;
        let io = Io {
            poll,
            listener,
            listener_ready: true,
            model: ServerModel::new(config),
            conns: HashMap::new(),
            clock,
            frozen: None,
            stop: false,
            controls,
            max_connections: self.max_connections,
            max_request: self.max_request,
            max_output: self.max_output,
            refused: 0,
        };
        let thread = thread::Builder::new()
            .name(format!("zk-embedded-server-{}", addr.port()))
            .spawn(move || io.run())?;
        Ok(EmbeddedServer {
            addr,
            controls: controls_tx,
            waker,
            thread: Some(thread),
        })
    }
}

fn millis_i32(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// A ZooKeeper-compatible server in this process, **for development and tests only**:
/// one node, in memory, on loopback. Dropping it stops it (its clients see the
/// connection go).
///
/// It speaks ZooKeeper's wire protocol (3.5–3.9 clients: this crate's, Curator,
/// kazoo, the `zkCli`), with the semantics of a 3.8 standalone server: sessions that
/// expire on real time, ephemeral, sequential, container and TTL nodes (reaped as
/// ZooKeeper's container manager does), one-shot, persistent and recursive watches,
/// `multi`, ACLs with `digest` authentication, and the four-letter words `ruok`,
/// `srvr`, `stat`, `mntr` and `isro`. What it does not do, and what it answers
/// instead, is in the [crate docs](crate#what-it-is-not).
///
/// Faults a test can cause, each one call: [`expire_session`](Self::expire_session),
/// [`drop_connections`](Self::drop_connections), [`freeze`](Self::freeze) /
/// [`freeze_for`](Self::freeze_for) / [`resume`](Self::resume),
/// [`throttle_next`](Self::throttle_next) / [`fail_next`](Self::fail_next),
/// [`reap_now`](Self::reap_now) and [`lag_session`](Self::lag_session).
///
/// ```
/// use zk_recipes_server::EmbeddedServer;
///
/// let server = EmbeddedServer::start()?;
/// println!("ZooKeeper (embedded) at {}", server.connect_string());
/// assert_eq!(server.stats().sessions, 0);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct EmbeddedServer {
    addr: SocketAddr,
    controls: mpsc::Sender<Control>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for EmbeddedServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// A call run on the server's thread.
type Control = Box<dyn FnOnce(&mut Io) + Send>;

impl EmbeddedServer {
    /// Starts a server on a free port of 127.0.0.1 with the defaults of [`Builder`].
    pub fn start() -> io::Result<EmbeddedServer> {
        Builder::default().start()
    }

    /// A server to configure, then [`Builder::start`].
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// `127.0.0.1:<port>`, for a client's connect string.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Runs `f` on the server's thread; `None` if that thread has ended.
    fn call<T: Send + 'static>(&self, f: impl FnOnce(&mut Io) -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.controls
            .send(Box::new(move |io: &mut Io| {
                let _ = tx.send(f(io));
            }))
            .ok()?;
        self.waker.wake().ok()?;
        rx.recv().ok()
    }

    /// Reads the server's state: `f` gets the model (nodes, sessions, zxid, ...) on the
    /// server's thread, between two requests. `None` if the server has stopped.
    pub fn inspect<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ServerModel) -> T + Send + 'static,
    ) -> Option<T> {
        self.call(move |io| f(&io.model))
    }

    /// What the server holds (nodes, sessions, connections, watches), as `mntr` counts it.
    pub fn stats(&self) -> Stats {
        self.call(|io| io.model.stats()).unwrap_or_default()
    }

    /// The live sessions' ids.
    pub fn sessions(&self) -> Vec<i64> {
        self.call(|io| io.model.session_ids()).unwrap_or_default()
    }

    /// Expires session `id` now, as if its timeout had passed: its ephemeral nodes are
    /// deleted (their watches fire) and its connection is closed; the client hears that
    /// the session expired when it reconnects. False if no such session is alive.
    pub fn expire_session(&self, id: i64) -> bool {
        self.call(move |io| {
            let alive = io.model.session_alive(id);
            io.model.expire_session(id);
            alive
        })
        .unwrap_or(false)
    }

    /// Closes every client connection now; the sessions stay alive (a network blip, or
    /// a server restart within the session timeout): clients see a connection loss and
    /// re-attach their sessions. How many connections were closed.
    pub fn drop_connections(&self) -> usize {
        self.call(|io| {
            let tokens: Vec<Token> = io.conns.keys().copied().collect();
            for t in &tokens {
                io.close(*t);
            }
            tokens.len()
        })
        .unwrap_or(0)
    }

    /// Stops answering until [`resume`](Self::resume): nothing is read, written or
    /// accepted and the server's timers stand still, as a `SIGSTOP`ped ZooKeeper; the
    /// clients time out reading (`Suspended`) and try other connections, which wait.
    /// On resume, sessions not heard from for longer than their timeout expire (as the
    /// thawed server's session tracker finds them), then what waited is served.
    pub fn freeze(&self) {
        self.call(|io| io.frozen = Some(None));
    }

    /// [`freeze`](Self::freeze), resuming by itself after `d`.
    pub fn freeze_for(&self, d: Duration) {
        self.call(move |io| io.frozen = Some(Instant::now().checked_add(d)));
    }

    /// Resumes a frozen server (nothing if it is not frozen).
    pub fn resume(&self) {
        self.call(|io| io.thaw());
    }

    /// Whether the server is frozen.
    pub fn is_frozen(&self) -> bool {
        self.call(|io| io.frozen.is_some()).unwrap_or(false)
    }

    /// Answers the next `n` requests (of any client; pings, authentication,
    /// `setWatches` and `closeSession` excepted) with `THROTTLEDOP`
    /// ([`ErrorCode::Throttled`]) without applying them, as ZooKeeper's request
    /// throttle does. 0 stops it.
    pub fn throttle_next(&self, n: u32) {
        self.fail_next(n, ErrorCode::Throttled);
    }

    /// Answers the next `n` requests (as [`throttle_next`](Self::throttle_next)) with
    /// the error `code` without applying them: a refusing server. 0 stops it.
    pub fn fail_next(&self, n: u32, code: ErrorCode) {
        self.call(move |io| io.model.fail_requests(n, code));
    }

    /// Runs the container check now: empty containers that once had a child, and TTL
    /// nodes not modified for longer than their TTL, are deleted (their watches fire).
    pub fn reap_now(&self) {
        self.call(|io| {
            let now = io.clock.now_ms();
            io.model.reap_now(now)
        });
    }

    /// Serves session `id` from a lagging follower: its connection is closed, and the
    /// connection it makes next lands on a follower that stopped applying transactions
    /// now. There its reads see the tree as it is now and its watches hear nothing of
    /// later writes, until it catches up: at a `sync`, at a write of its own, or after
    /// `catch_up`. So a test can check that a client reads behind a `sync` what it must
    /// not read stale. False if no such session is alive.
    pub fn lag_session(&self, id: i64, catch_up: Duration) -> bool {
        let ms = i64::try_from(catch_up.as_millis()).unwrap_or(i64::MAX);
        self.call(move |io| io.model.lag_session(id, ms))
            .unwrap_or(false)
    }

    /// Bytes answered but not yet taken by the clients' sockets, over every connection.
    /// Bounded: a connection whose client leaves more than 1 MiB unread is not read
    /// until it reads (its requests wait), and one that has more than 16 MiB waiting
    /// (notifications of others' writes) is closed.
    pub fn unwritten_bytes(&self) -> usize {
        self.call(|io| io.conns.values().map(|c| c.out.len()).sum())
            .unwrap_or(0)
    }

    /// Connections closed on arrival because [`Builder::max_connections`] were open.
    pub fn refused_connections(&self) -> u64 {
        self.call(|io| io.refused).unwrap_or(0)
    }

    /// Stops the server (as dropping it does) and waits for its thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.call(|io| io.stop = true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The server's time: wall-clock milliseconds (ZooKeeper's `ctime`/`mtime` are), moved
/// on by a monotonic clock so a wall-clock jump expires no session.
struct Clock {
    start: Instant,
    start_ms: i64,
}

impl Clock {
    fn new() -> Clock {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0));
        Clock {
            start: Instant::now(),
            start_ms: wall,
        }
    }

    fn now_ms(&self) -> i64 {
        let elapsed = i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.start_ms.saturating_add(elapsed)
    }

    /// How long until server time `ms`.
    fn until(&self, ms: i64) -> Duration {
        Duration::from_millis(u64::try_from(ms.saturating_sub(self.now_ms())).unwrap_or(0))
    }
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    id: ConnId,
    /// Bytes to write, not yet taken by the socket.
    out: BytesMut,
    /// The socket may have bytes to read (edge-triggered: until a read would block).
    readable: bool,
    /// The first bytes of the connection, until there are four: a four-letter word or
    /// the length of the handshake.
    first: Option<Vec<u8>>,
    /// Bytes read but not yet handed to the model (its client was slow to read the
    /// answers); at most one read's worth.
    pending: BytesMut,
    /// The server is done with it: close once `out` is written.
    closing: bool,
}

impl Conn {
    /// Has input to read or to hand over, and room for the answers.
    fn wants_work(&self) -> bool {
        !self.closing && self.out.len() < OUTPUT_HIGH && (self.readable || !self.pending.is_empty())
    }
}

/// Bytes read from one connection before the others get a turn.
const READ_TURN: usize = 256 * 1024;
/// A connection whose unwritten output is past this is not read (its client is slow
/// to read its answers) until the output drains.
const OUTPUT_HIGH: usize = 1024 * 1024;

/// The server's thread.
struct Io {
    poll: Poll,
    listener: TcpListener,
    listener_ready: bool,
    model: ServerModel,
    conns: HashMap<Token, Conn>,
    clock: Clock,
    /// Frozen until (`None`: until resumed).
    frozen: Option<Option<Instant>>,
    stop: bool,
    controls: mpsc::Receiver<Control>,
    max_connections: usize,
    max_request: usize,
    /// A connection whose unwritten output grows past this is closed.
    max_output: usize,
    refused: u64,
}

fn token_of(id: ConnId) -> Token {
    Token(usize::try_from(id).unwrap_or(usize::MAX).saturating_add(2))
}

impl Io {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let timeout = self.timeout();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return;
                }
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.listener_ready = true,
                    WAKER => {}
                    token => {
                        if let Some(c) = self.conns.get_mut(&token) {
                            // Writable: the loop below writes whatever is waiting.
                            if event.is_readable() || event.is_read_closed() || event.is_error() {
                                c.readable = true;
                            }
                        }
                    }
                }
            }
            while let Ok(control) = self.controls.try_recv() {
                control(&mut self);
            }
            if self.stop {
                return;
            }
            if let Some(Some(until)) = self.frozen {
                if Instant::now() >= until {
                    self.thaw();
                }
            }
            if self.frozen.is_none() {
                self.model.tick(self.clock.now_ms());
                self.accept();
                self.read(&mut buf);
            }
            self.write();
        }
    }

    /// How long the poll may wait: until the model's next deadline or the frozen
    /// server's thaw; not at all if a connection still has bytes to read.
    fn timeout(&self) -> Option<Duration> {
        match self.frozen {
            Some(None) => return None,
            Some(Some(until)) => return Some(until.saturating_duration_since(Instant::now())),
            None => {}
        }
        let more = self.conns.values().any(Conn::wants_work);
        if more || self.listener_ready {
            return Some(Duration::ZERO);
        }
        let next = self
            .model
            .next_deadline_ms()
            .into_iter()
            .chain([self.model.next_reap_ms()])
            .min()?;
        Some(self.clock.until(next))
    }

    fn thaw(&mut self) {
        if self.frozen.take().is_some() {
            // Readiness that came while frozen was noted, not acted on: look again.
            self.listener_ready = true;
            for c in self.conns.values_mut() {
                c.readable = true;
            }
        }
    }

    fn accept(&mut self) {
        while self.listener_ready {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    if self.conns.len() >= self.max_connections {
                        self.refused += 1;
                        continue; // dropped: closed as accepted
                    }
                    let id = self.model.connect(self.max_request);
                    let token = token_of(id);
                    let _ = stream.set_nodelay(true);
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                        .is_err()
                    {
                        self.model.disconnect(id);
                        continue;
                    }
                    self.conns.insert(
                        token,
                        Conn {
                            stream,
                            id,
                            out: BytesMut::new(),
                            readable: true,
                            first: Some(Vec::with_capacity(4)),
                            pending: BytesMut::new(),
                            closing: false,
                        },
                    );
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.listener_ready = false,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                // Out of descriptors or the like: try again at the next readiness.
                Err(_) => self.listener_ready = false,
            }
        }
    }

    /// Reads every readable connection (a turn each) into the model.
    fn read(&mut self, buf: &mut [u8]) {
        let tokens: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, c)| c.wants_work())
            .map(|(t, _)| *t)
            .collect();
        for token in tokens {
            let mut taken = 0;
            while taken < READ_TURN {
                if !self.feed_pending(token) {
                    break; // closed, or its client reads slowly: its requests wait
                }
                let Some(c) = self.conns.get_mut(&token) else {
                    break;
                };
                if !c.readable {
                    break;
                }
                match c.stream.read(buf) {
                    Ok(0) => {
                        self.close(token);
                        break;
                    }
                    Ok(n) => {
                        taken += n;
                        self.input(token, &buf[..n]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.readable = false,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        self.close(token);
                        break;
                    }
                }
            }
        }
    }

    /// Bytes a client wrote: a four-letter word if a connection starts with one, else
    /// the model's (kept as pending input once its client is slow to read).
    fn input(&mut self, token: Token, mut bytes: &[u8]) {
        let Some(c) = self.conns.get_mut(&token) else {
            return;
        };
        if let Some(first) = &mut c.first {
            let take = (4 - first.len()).min(bytes.len());
            first.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if first.len() < 4 {
                return;
            }
            let word = [first[0], first[1], first[2], first[3]];
            c.first = None;
            if let Some(answer) = four_letter::answer(&word, &self.model.stats()) {
                c.out.extend_from_slice(answer.as_bytes());
                c.closing = true;
                return;
            }
            c.pending.extend_from_slice(&word);
        }
        c.pending.extend_from_slice(bytes);
        self.feed_pending(token);
    }

    /// Hands a connection's pending input to the model, as far as its client keeps up
    /// with the answers. True if it all went and the connection may be read further.
    fn feed_pending(&mut self, token: Token) -> bool {
        let now = self.clock.now_ms();
        let Some(c) = self.conns.get_mut(&token) else {
            return false;
        };
        if !c.pending.is_empty() && c.out.len() < OUTPUT_HIGH {
            let budget = OUTPUT_HIGH - c.out.len();
            let used = self.model.handle_bytes_until(now, c.id, &c.pending, budget);
            c.pending.advance(used);
            self.collect();
        }
        self.conns
            .get(&token)
            .is_some_and(|c| c.pending.is_empty() && !c.closing && c.out.len() < OUTPUT_HIGH)
    }

    /// Moves what the model wrote into the connections' output; notes the ones it closed.
    fn collect(&mut self) {
        for id in self.model.conns_with_output() {
            let out = self.model.take_output(id);
            let closed = self.model.is_closed(id);
            match self.conns.get_mut(&token_of(id)) {
                Some(c) => {
                    c.out.extend_from_slice(&out);
                    c.closing |= closed;
                }
                // Its socket is gone already.
                None => self.model.disconnect(id),
            }
        }
    }

    /// Writes what waits; closes connections that are done, or too far behind.
    fn write(&mut self) {
        self.collect();
        if self.frozen.is_some() {
            return;
        }
        let tokens: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.out.is_empty() || c.closing)
            .map(|(t, _)| *t)
            .collect();
        for token in tokens {
            let Some(c) = self.conns.get_mut(&token) else {
                continue;
            };
            let mut failed = false;
            while !c.out.is_empty() {
                match c.stream.write(&c.out) {
                    Ok(0) => {
                        failed = true;
                        break;
                    }
                    Ok(n) => c.out.advance(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            // A connection the server is done with goes once written, or at once if
            // its client is not reading: what it did not take is dropped, as the real
            // server drops it when it closes a socket (an expired session's, say).
            let done = c.closing;
            if failed || done || c.out.len() > self.max_output {
                self.close(token);
            }
        }
    }

    /// Closes a connection: the socket goes, the model forgets it (its session stays).
    fn close(&mut self, token: Token) {
        if let Some(mut c) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(&mut c.stream);
            self.model.disconnect(c.id);
        }
    }
}
