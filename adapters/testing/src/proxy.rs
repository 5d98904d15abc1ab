//! A loopback TCP proxy whose two directions a test controls: the links of the nemesis
//! ([`crate::Nemesis`]).
//!
//! Every connection accepted on the proxy's address is forwarded to its target. The
//! bytes going *up* (from whoever connected to the target) follow one [`FlowControl`],
//! the bytes coming back *down* another, so each direction of a link can be delayed,
//! dropped or reset on its own, for the connections already open and for new ones.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crate::nemesis::Rng;

/// What happens to the bytes flowing one way over a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Delivered in order, each chunk `delay` plus up to `jitter` (uniform) after it was
    /// read. `Flow::PASS` has neither.
    Pass {
        /// The fixed part of the delay.
        delay: Duration,
        /// The random part: up to this much more, drawn per chunk (order is kept).
        jitter: Duration,
    },
    /// Dropped silently, as behind a firewall's `DROP` rule: nothing is delivered and
    /// nothing says so. The proxy stops forwarding, so the sender's bytes wait in TCP
    /// buffers (as a real TCP stack would keep retransmitting them) and reach the other
    /// end in order if the link heals before either end gives the connection up. A
    /// connection opened meanwhile is accepted but goes nowhere until it heals (a
    /// connect whose handshake is lost).
    Drop,
    /// Reset: the connections open over the link are reset at both ends (`RST`) and new
    /// ones are reset as soon as they are accepted.
    Reset,
}

impl Flow {
    /// Delivered at once.
    pub const PASS: Flow = Flow::Pass {
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
    };

    /// Whether bytes go through (perhaps late).
    pub fn passes(&self) -> bool {
        matches!(self, Flow::Pass { .. })
    }
}

/// One direction of a link: its [`Flow`], shared by every connection that crosses it.
/// Setting it applies at once to the connections open over it and to new ones.
pub struct FlowControl {
    state: Mutex<FlowState>,
    changed: Condvar,
}

struct FlowState {
    flow: Flow,
    conns: Vec<Weak<Conn>>,
}

impl Default for FlowControl {
    fn default() -> Self {
        FlowControl {
            state: Mutex::new(FlowState {
                flow: Flow::PASS,
                conns: Vec::new(),
            }),
            changed: Condvar::new(),
        }
    }
}

impl FlowControl {
    /// A direction that passes everything at once.
    pub fn new() -> Arc<FlowControl> {
        Arc::new(FlowControl::default())
    }

    fn lock(&self) -> MutexGuard<'_, FlowState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The flow now.
    pub fn flow(&self) -> Flow {
        self.lock().flow
    }

    /// Sets the flow; `Reset` resets every connection open over this direction.
    pub fn set(&self, flow: Flow) {
        let reset: Vec<Arc<Conn>> = {
            let mut s = self.lock();
            s.flow = flow;
            s.conns.retain(|c| c.strong_count() > 0);
            if flow == Flow::Reset {
                s.conns.iter().filter_map(Weak::upgrade).collect()
            } else {
                Vec::new()
            }
        };
        self.changed.notify_all();
        for c in reset {
            c.reset();
        }
    }

    /// Connections open over this direction now.
    pub fn open(&self) -> usize {
        self.lock()
            .conns
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|c| !c.dead.load(Ordering::SeqCst))
            .count()
    }

    fn register(&self, conn: &Arc<Conn>) {
        let mut s = self.lock();
        s.conns.retain(|c| c.strong_count() > 0);
        s.conns.push(Arc::downgrade(conn));
    }

    /// Waits while the flow drops bytes; the flow it passes with, or `None` once the
    /// connection is dead (reset or gone).
    fn wait_passing(&self, conn: &Conn) -> Option<Flow> {
        let mut s = self.lock();
        loop {
            if conn.dead.load(Ordering::SeqCst) {
                return None;
            }
            match s.flow {
                Flow::Reset => {
                    drop(s);
                    conn.reset();
                    return None;
                }
                Flow::Drop => {
                    s = self
                        .changed
                        .wait_timeout(s, Duration::from_millis(100))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                flow => return Some(flow),
            }
        }
    }
}

/// One proxied connection: its two sockets, shared by its pump threads.
struct Conn {
    down_end: Arc<TcpStream>,
    up_end: Arc<TcpStream>,
    dead: AtomicBool,
    /// The pumps' queues, to wake them when the connection dies.
    queues: [Arc<Pipe>; 2],
}

impl Conn {
    /// Resets both ends: `SO_LINGER` 0, then the pumps stop and the last of them to drop
    /// a socket closes it, which sends `RST`.
    fn reset(&self) {
        if self.dead.swap(true, Ordering::SeqCst) {
            return;
        }
        for s in [&self.down_end, &self.up_end] {
            let _ = socket2::SockRef::from(s.as_ref()).set_linger(Some(Duration::ZERO));
            // Wakes a pump blocked in `read` (it reads end of file).
            let _ = s.shutdown(Shutdown::Read);
        }
        for q in &self.queues {
            q.ready.notify_all();
        }
    }
}

/// What a reader hands its writer.
enum Chunk {
    Data(Instant, Vec<u8>),
    End,
}

#[derive(Default)]
struct Pipe {
    chunks: Mutex<VecDeque<Chunk>>,
    ready: Condvar,
}

impl Pipe {
    fn push(&self, c: Chunk) {
        self.chunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(c);
        self.ready.notify_all();
    }
}

/// A listener on 127.0.0.1 forwarding every connection to `target` through two
/// [`FlowControl`]s. Stops accepting when dropped (open connections end with it: their
/// pumps see the flag).
pub struct LinkProxy {
    addr: SocketAddr,
    shared: Arc<ProxyShared>,
}

/// Where the connecting side of an election connection should say it listens: the
/// election proxy of the opposite link (see the nemesis's module docs).
pub(crate) type Announce = Arc<dyn Fn() -> Option<SocketAddr> + Send + Sync>;

struct ProxyShared {
    target: SocketAddr,
    announce: Option<Announce>,
    up: Arc<FlowControl>,
    down: Arc<FlowControl>,
    stop: AtomicBool,
    accepted: AtomicUsize,
    bytes: [AtomicU64; 2],
    seed: AtomicU64,
}

impl LinkProxy {
    /// Listens on a free loopback port and forwards to `target`: bytes from the
    /// connecting side follow `up`, the answers `down`. `seed` draws the jitter.
    pub fn start(
        target: SocketAddr,
        up: Arc<FlowControl>,
        down: Arc<FlowControl>,
        seed: u64,
    ) -> io::Result<LinkProxy> {
        Self::start_with(target, up, down, seed, None)
    }

    /// [`start`](Self::start), rewriting the address a ZooKeeper server announces when
    /// it opens an election connection (the first message up) to `announce()`.
    pub(crate) fn start_with(
        target: SocketAddr,
        up: Arc<FlowControl>,
        down: Arc<FlowControl>,
        seed: u64,
        announce: Option<Announce>,
    ) -> io::Result<LinkProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(ProxyShared {
            target,
            announce,
            up,
            down,
            stop: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            bytes: [AtomicU64::new(0), AtomicU64::new(0)],
            seed: AtomicU64::new(seed),
        });
        let s = shared.clone();
        thread::Builder::new()
            .name(format!("proxy {addr}"))
            .spawn(move || {
                for client in listener.incoming() {
                    if s.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    s.accepted.fetch_add(1, Ordering::SeqCst);
                    let s = s.clone();
                    let _ = thread::Builder::new()
                        .name("proxy conn".into())
                        .spawn(move || s.serve(client));
                }
            })?;
        Ok(LinkProxy { addr, shared })
    }

    /// The address to connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address it forwards to.
    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Bytes delivered so far (up, down).
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.shared.bytes[0].load(Ordering::SeqCst),
            self.shared.bytes[1].load(Ordering::SeqCst),
        )
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)); // wakes accept
    }
}

impl ProxyShared {
    fn serve(self: Arc<Self>, client: TcpStream) {
        let client = Arc::new(client);
        // A connect over a link that drops bytes either way goes nowhere until it heals
        // (its handshake would be lost); over a reset link it is reset.
        loop {
            let (up, down) = (self.up.flow(), self.down.flow());
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            if up == Flow::Reset || down == Flow::Reset {
                let _ = socket2::SockRef::from(client.as_ref()).set_linger(Some(Duration::ZERO));
                return;
            }
            if up.passes() && down.passes() {
                break;
            }
            // Gone if the connecting side gave up meanwhile.
            let _ = client.set_nonblocking(true);
            let mut probe = [0u8; 1];
            let gone = matches!(client.peek(&mut probe), Ok(0))
                || matches!(client.peek(&mut probe), Err(ref e) if e.kind() != io::ErrorKind::WouldBlock);
            let _ = client.set_nonblocking(false);
            if gone {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let Ok(server) = TcpStream::connect_timeout(&self.target, Duration::from_secs(2)) else {
            let _ = socket2::SockRef::from(client.as_ref()).set_linger(Some(Duration::ZERO));
            return;
        };
        let _ = server.set_nodelay(true);
        let _ = client.set_nodelay(true);
        let server = Arc::new(server);
        let conn = Arc::new(Conn {
            down_end: client.clone(),
            up_end: server.clone(),
            dead: AtomicBool::new(false),
            queues: [Arc::new(Pipe::default()), Arc::new(Pipe::default())],
        });
        self.up.register(&conn);
        self.down.register(&conn);
        let seed = self.seed.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::SeqCst);
        let dirs = [
            (client, server.clone(), self.up.clone(), 0usize),
            (server, conn.down_end.clone(), self.down.clone(), 1usize),
        ];
        for (from, to, flow, i) in dirs {
            let pipe = conn.queues[i].clone();
            let (c, s, f, p) = (conn.clone(), self.clone(), flow.clone(), pipe.clone());
            let _ = thread::Builder::new()
                .name("proxy write".into())
                .spawn(move || s.write_pump(&c, &f, &p, &to, i));
            let (c, s) = (conn.clone(), self.clone());
            let announce = if i == 0 { self.announce.clone() } else { None };
            let _ = thread::Builder::new()
                .name("proxy read".into())
                .spawn(move || s.read_pump(&c, &flow, &pipe, &from, seed ^ i as u64, announce));
        }
    }

    fn read_pump(
        &self,
        conn: &Conn,
        flow: &FlowControl,
        pipe: &Pipe,
        from: &TcpStream,
        seed: u64,
        mut announce: Option<Announce>,
    ) {
        let mut rng = Rng::new(seed);
        let mut buf = vec![0u8; 64 * 1024];
        let mut last_due = Instant::now();
        // The start of an election connection, kept until its announcement is complete.
        let mut first = Vec::new();
        loop {
            if self.stop.load(Ordering::SeqCst) {
                conn.reset();
                return;
            }
            let n = match (&*from).read(&mut buf) {
                Ok(0) => {
                    pipe.push(Chunk::End);
                    return;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Reset by its end: pass the reset on.
                    conn.reset();
                    return;
                }
            };
            let read_at = Instant::now();
            let mut bytes = buf[..n].to_vec();
            if let Some(to) = &announce {
                first.extend_from_slice(&bytes);
                match rewrite_announcement(&first, to()) {
                    Some(rewritten) => {
                        bytes = rewritten;
                        first.clear();
                        announce = None;
                    }
                    None => continue,
                }
            }
            // Bytes read while the flow drops wait here until it heals.
            let Some(Flow::Pass { delay, jitter }) = flow.wait_passing(conn) else {
                return;
            };
            let extra = if jitter.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_micros(rng.below(jitter.as_micros() as u64 + 1))
            };
            // In order: never before the chunk ahead of it.
            let due = (read_at + delay + extra).max(last_due);
            last_due = due;
            pipe.push(Chunk::Data(due, bytes));
        }
    }

    fn write_pump(&self, conn: &Conn, flow: &FlowControl, pipe: &Pipe, to: &TcpStream, dir: usize) {
        loop {
            let chunk = {
                let mut q = pipe.chunks.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if conn.dead.load(Ordering::SeqCst) {
                        return;
                    }
                    let now = Instant::now();
                    match q.front() {
                        Some(Chunk::Data(due, _)) if *due > now => {
                            let wait = *due - now;
                            q = pipe
                                .ready
                                .wait_timeout(q, wait)
                                .unwrap_or_else(|e| e.into_inner())
                                .0;
                        }
                        Some(_) => break q.pop_front(),
                        None => {
                            q = pipe
                                .ready
                                .wait_timeout(q, Duration::from_millis(100))
                                .unwrap_or_else(|e| e.into_inner())
                                .0;
                        }
                    }
                }
            };
            // A flow that began dropping holds what was in flight too.
            if flow.wait_passing(conn).is_none() {
                return;
            }
            match chunk {
                Some(Chunk::Data(_, bytes)) => {
                    if (&*to).write_all(&bytes).is_err() {
                        conn.reset();
                        return;
                    }
                    self.bytes[dir].fetch_add(bytes.len() as u64, Ordering::SeqCst);
                }
                Some(Chunk::End) => {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
                None => {}
            }
        }
    }
}

/// The start of an election connection (ZooKeeper 3.8's `QuorumCnxManager`: protocol
/// version `i64`, server id `i64`, then the length-prefixed `host:port` it listens on)
/// with the address replaced by `to`; `None` while incomplete. A start in another form
/// (an old protocol: a bare non-negative id) passes unchanged.
fn rewrite_announcement(start: &[u8], to: Option<SocketAddr>) -> Option<Vec<u8>> {
    let version = i64::from_be_bytes(start.get(..8)?.try_into().ok()?);
    let Some(to) = to.filter(|_| version < 0) else {
        return Some(start.to_vec());
    };
    let len = i32::from_be_bytes(start.get(16..20)?.try_into().ok()?);
    let end = 20usize.checked_add(usize::try_from(len).ok()?)?;
    if start.len() < end {
        return None;
    }
    let addr = to.to_string().into_bytes();
    let mut out = start[..16].to_vec();
    out.extend_from_slice(&(addr.len() as i32).to_be_bytes());
    out.extend_from_slice(&addr);
    out.extend_from_slice(&start[end..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_election_announcement_is_rewritten_whole_and_only_once_complete() {
        let mut msg = (-65536i64).to_be_bytes().to_vec();
        msg.extend_from_slice(&2i64.to_be_bytes());
        let own = b"127.0.0.1:40001";
        msg.extend_from_slice(&(own.len() as i32).to_be_bytes());
        msg.extend_from_slice(own);
        msg.extend_from_slice(b"rest");
        let to: SocketAddr = "127.0.0.1:5".parse().unwrap();
        for cut in 0..20 + own.len() {
            assert_eq!(rewrite_announcement(&msg[..cut], Some(to)), None, "{cut}");
        }
        let out = rewrite_announcement(&msg, Some(to)).unwrap();
        assert_eq!(&out[..16], &msg[..16]);
        assert_eq!(&out[16..20], &11i32.to_be_bytes());
        assert_eq!(&out[20..31], b"127.0.0.1:5");
        assert_eq!(&out[31..], b"rest");
        // An old-protocol start (a bare id) passes as it is.
        let old = 3i64.to_be_bytes();
        assert_eq!(rewrite_announcement(&old, Some(to)), Some(old.to_vec()));
    }
}
