//! A misbehaving fake ZooKeeper server, for testing how clients cope with broken peers.
//!
//! [`FakeServer`] listens on a free `127.0.0.1` port and treats every connection as its
//! [`Misbehaviour`] says: garbage frames, impossible lengths, truncated replies, silence,
//! a peer that stops reading, one byte per second, HTTP, a 1 ms session, an expired
//! session... or a healthy baseline. It speaks the protocol with the `zk-recipes` codec.
//!
//! Everything it does is bounded: one thread per connection (at most
//! [`MAX_LIVE_CONNECTIONS`] at a time), every blocking call has a short timeout and
//! checks the stop flag, buffers hold at most one request frame (1 MiB), and [`FakeServer::stop`]
//! (or drop) ends every thread and closes every socket within about 100 ms.
//!
//! ```
//! use zk_recipes::proto::*;
//! use zk_recipes_testing::{FakeServer, Misbehaviour, RawClient};
//!
//! let server = FakeServer::start(Misbehaviour::Healthy).unwrap();
//! let mut client = RawClient::connect(server.addr(), 6000).unwrap();
//! assert_eq!(client.session.timeout_ms, 6000);
//! let (header, _) = client.call(&Request::Ping).unwrap();
//! assert_eq!((header.xid, header.err), (xid::PING, 0));
//! assert_eq!(server.connections(), 1);
//! // dropped: the accept loop and the connection thread end, the sockets close
//! ```

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use zk_recipes::proto::*;

/// The session id every [`FakeServer`] grants (and grants again when a client resumes).
pub const FAKE_SESSION_ID: i64 = 0x1234_5678;
/// The 16-byte session password every [`FakeServer`] grants.
pub const FAKE_PASSWORD: &[u8; 16] = b"fake-zk-password";
/// The zxid in every reply header (constant, so a resuming client never looks "ahead").
pub const FAKE_ZXID: i64 = 0x100;
/// The xid [`Misbehaviour::UnknownXid`] answers with.
pub const UNKNOWN_XID: i32 = 999_999;
/// At most this many connections are served at once; later ones are accepted (and
/// counted) but closed at once, so a client reconnecting in a tight loop cannot make the
/// fake server grow without bound.
pub const MAX_LIVE_CONNECTIONS: usize = 128;
/// [`FakeServer::connection_times`] keeps the accept times of this many connections (the
/// first ones); [`FakeServer::connections`] keeps counting past it.
pub const MAX_RECORDED_TIMES: usize = 10_000;

/// How long a blocked read or write waits before looking at the stop flag again.
const POLL: Duration = Duration::from_millis(50);
/// How long the accept loop sleeps when no connection is waiting.
const ACCEPT_POLL: Duration = Duration::from_millis(2);
/// How long a graceful close waits for the client to close its side.
const CLOSE_DRAIN: Duration = Duration::from_secs(1);
/// Pause between two bytes in [`Misbehaviour::Trickle`].
const TRICKLE_PAUSE: Duration = Duration::from_secs(1);
/// Largest request frame body the fake server accepts (a bigger one closes the socket).
const MAX_REQUEST: usize = DEFAULT_MAX_REQUEST;
/// Bytes read from a socket at a time (and the most bytes buffered beyond one frame).
const CHUNK: usize = 4096;

/// The answer of [`Misbehaviour::Http`].
pub const HTTP_400: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// The frame [`Misbehaviour::Garbage`] sends: a valid length prefix (7) and a body too
/// short to hold a 16-byte reply header.
pub const GARBAGE_FRAME: &[u8] = b"\x00\x00\x00\x07garbage";

/// What a [`FakeServer`] does with each connection.
///
/// "Handshake" means: read the client's `ConnectRequest` and answer a `ConnectResponse`
/// with protocol version 0, the requested session timeout (unless the mode says
/// otherwise), session id [`FAKE_SESSION_ID`] (for a new session and for a resumed one
/// alike) and password [`FAKE_PASSWORD`]. A request that does not decode ends the
/// connection. "Healthy" replies are those of [`Healthy`](Misbehaviour::Healthy).
/// "Close" means a graceful close: shut down the write side, wait up to 1 s for the
/// client to close (discarding what it sends), then close the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Misbehaviour {
    /// Handshake; on the first request after it, send [`GARBAGE_FRAME`]: a frame whose
    /// body is not a reply header. Then read and discard until the client closes.
    Garbage,
    /// Handshake; on the first request after it, send the length prefix -1
    /// (`ff ff ff ff`) and nothing more. Then read and discard until the client closes.
    NegativeLength,
    /// Handshake, then at once a length prefix of 2 GiB - 1 (`7f ff ff ff`) followed by
    /// 8 bytes of body. Then read and discard until the client closes.
    HugeLength,
    /// Handshake; on the first request after it, send a reply to it (header only, `err`
    /// 0) whose length prefix says 16 bytes but only the first 8 body bytes follow; then
    /// close.
    Truncated,
    /// Handshake; answer the first request after it with a well-formed reply carrying
    /// xid [`UNKNOWN_XID`] (err NoNode, no body) instead of its own, and never answer it
    /// properly. Later requests get healthy replies (so pings keep the connection alive
    /// and only the client's own xid check can notice the fault).
    UnknownXid,
    /// Accept and close at once, without reading anything.
    ResetAtAccept,
    /// Read the `ConnectRequest`, then close without answering.
    CloseBeforeHandshake,
    /// Handshake, then never write again (no ping replies either) while reading and
    /// discarding whatever the client sends, until it closes.
    SilentAfterHandshake,
    /// The first connection: handshake, then never read or write again, so the client's
    /// writes block once the socket buffers fill. Later connections: accepted, never read
    /// from and never answered. Every socket stays open until the server stops.
    StopReading,
    /// Handshake, then answer every request with its healthy reply written one byte at a
    /// time, 1 s between bytes (a 16-byte reply frame takes 19 s). Requests are answered
    /// one after another; ends when a write fails (the client left) or the server stops.
    Trickle,
    /// Read and discard whatever comes, never answer anything, until the client closes.
    NoHandshake,
    /// Read once (up to 4 KiB, waiting up to 1 s), answer [`HTTP_400`], close: "not a
    /// ZooKeeper server".
    Http,
    /// Handshake granting a 1 ms session timeout, then healthy replies.
    TinyTimeout,
    /// The baseline: handshake granting the requested timeout, then healthy replies:
    /// * ping (xid -2): header with xid -2, zxid [`FAKE_ZXID`], err 0, no body;
    /// * closeSession: header with err 0, then close;
    /// * auth, setWatches, setWatches2 (no body on success either): header with err 0;
    /// * any other request: header with its xid and err NoNode (-101), no body.
    Healthy,
    /// Answer the handshake with timeout 0, session id 0 and a zero password (the
    /// server's "session expired"), then close.
    ExpiredHandshake,
}

impl Misbehaviour {
    /// Every mode, for tests that sweep them all.
    pub const ALL: [Misbehaviour; 15] = [
        Misbehaviour::Garbage,
        Misbehaviour::NegativeLength,
        Misbehaviour::HugeLength,
        Misbehaviour::Truncated,
        Misbehaviour::UnknownXid,
        Misbehaviour::ResetAtAccept,
        Misbehaviour::CloseBeforeHandshake,
        Misbehaviour::SilentAfterHandshake,
        Misbehaviour::StopReading,
        Misbehaviour::Trickle,
        Misbehaviour::NoHandshake,
        Misbehaviour::Http,
        Misbehaviour::TinyTimeout,
        Misbehaviour::Healthy,
        Misbehaviour::ExpiredHandshake,
    ];
}

/// State shared by the accept loop, the connection threads and the handle.
struct Shared {
    stop: AtomicBool,
    started: Instant,
    accepted: AtomicUsize,
    times: Mutex<Vec<Duration>>,
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A fake ZooKeeper server on `127.0.0.1` that misbehaves as its [`Misbehaviour`] says.
///
/// Stops (all threads end, all sockets close) on [`stop`](Self::stop) or drop.
pub struct FakeServer {
    addr: SocketAddr,
    mode: Misbehaviour,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeServer")
            .field("addr", &self.addr)
            .field("mode", &self.mode)
            .field("connections", &self.connections())
            .field("stopped", &self.shared.stopped())
            .finish()
    }
}

impl FakeServer {
    /// Binds `127.0.0.1:0` and starts accepting connections on a background thread.
    pub fn start(mode: Misbehaviour) -> io::Result<FakeServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            started: Instant::now(),
            accepted: AtomicUsize::new(0),
            times: Mutex::new(Vec::new()),
        });
        let accept = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("fake-zk-accept-{}", addr.port()))
                .spawn(move || accept_loop(listener, mode, shared))?
        };
        Ok(FakeServer {
            addr,
            mode,
            shared,
            accept: Some(accept),
        })
    }

    /// The listening address (`127.0.0.1:PORT`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `"127.0.0.1:PORT"`, for a client's connect string.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// The mode this server was started with.
    pub fn mode(&self) -> Misbehaviour {
        self.mode
    }

    /// TCP connections accepted so far (including those closed at once).
    pub fn connections(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// When each connection was accepted, as time since [`start`](Self::start), in
    /// accept order (the first [`MAX_RECORDED_TIMES`] only).
    pub fn connection_times(&self) -> Vec<Duration> {
        lock(&self.shared.times).clone()
    }

    /// Stops accepting, ends every connection thread and closes every socket; returns
    /// once all threads have ended (about 100 ms). Calling it again does nothing.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            // The accept loop joins the connection threads before it returns.
            let _ = accept.join();
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Locks, ignoring poisoning (the data is a plain list).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(listener: TcpListener, mode: Misbehaviour, shared: Arc<Shared>) {
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stopped() {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // WouldBlock, or a transient error such as running out of descriptors.
            Err(_) => {
                thread::sleep(ACCEPT_POLL);
                continue;
            }
        };
        let index = shared.accepted.fetch_add(1, Ordering::SeqCst);
        {
            let mut times = lock(&shared.times);
            if times.len() < MAX_RECORDED_TIMES {
                times.push(shared.started.elapsed());
            }
        }
        threads.retain(|t| !t.is_finished());
        if mode == Misbehaviour::ResetAtAccept || threads.len() >= MAX_LIVE_CONNECTIONS {
            drop(stream);
            continue;
        }
        let shared = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name(format!("fake-zk-conn-{index}"))
            .spawn(move || {
                if let Some(mut conn) = Conn::new(stream, shared) {
                    conn.serve(mode, index);
                }
            });
        // If the thread cannot be spawned, the closure (and the stream) is dropped.
        if let Ok(t) = spawned {
            threads.push(t);
        }
    }
    drop(listener);
    for t in threads {
        let _ = t.join();
    }
}

/// One connection, served on its own thread.
struct Conn {
    stream: TcpStream,
    shared: Arc<Shared>,
    decoder: FrameDecoder,
    /// Bytes read but not yet decoded (at most one [`CHUNK`]).
    inbox: BytesMut,
}

impl Conn {
    fn new(stream: TcpStream, shared: Arc<Shared>) -> Option<Conn> {
        stream.set_nonblocking(false).ok()?;
        stream.set_read_timeout(Some(POLL)).ok()?;
        stream.set_write_timeout(Some(POLL)).ok()?;
        stream.set_nodelay(true).ok()?;
        Some(Conn {
            stream,
            shared,
            decoder: FrameDecoder::new(MAX_REQUEST),
            inbox: BytesMut::new(),
        })
    }

    fn serve(&mut self, mode: Misbehaviour, index: usize) {
        use Misbehaviour::*;
        match mode {
            Garbage => {
                if self.handshake(None) && self.read_frame().is_some() && self.send(GARBAGE_FRAME) {
                    self.discard_until_closed();
                }
            }
            NegativeLength => {
                if self.handshake(None) && self.read_frame().is_some() && self.send(&[0xff; 4]) {
                    self.discard_until_closed();
                }
            }
            HugeLength => {
                let mut huge = 0x7fff_ffff_i32.to_be_bytes().to_vec();
                huge.extend_from_slice(b"\x00\x00\x00\x01huge");
                if self.handshake(None) && self.send(&huge) {
                    self.discard_until_closed();
                }
            }
            Truncated => {
                if !self.handshake(None) {
                    return;
                }
                let Some((header, _)) = self.read_request() else {
                    return;
                };
                let mut frame = BytesMut::new();
                let reply = ReplyHeader {
                    xid: header.xid,
                    zxid: FAKE_ZXID,
                    err: 0,
                };
                encode_reply(&mut frame, &reply, None);
                // The prefix announces 16 body bytes; send only half of them.
                let body_len = frame.len() - 4;
                if self.send(&frame[..4 + body_len / 2]) {
                    self.close();
                }
            }
            UnknownXid => {
                if !self.handshake(None) {
                    return;
                }
                if self.read_request().is_none() {
                    return;
                }
                let reply = ReplyHeader {
                    xid: UNKNOWN_XID,
                    zxid: FAKE_ZXID,
                    err: ErrorCode::NoNode.to_i32(),
                };
                let mut frame = BytesMut::new();
                encode_reply(&mut frame, &reply, None);
                if self.send(&frame) {
                    self.serve_healthy(false);
                }
            }
            // Closed by the accept loop; kept here so the match stays exhaustive.
            ResetAtAccept => {}
            CloseBeforeHandshake => {
                let _ = self.read_frame();
            }
            SilentAfterHandshake => {
                if self.handshake(None) {
                    self.discard_until_closed();
                }
            }
            StopReading => {
                if index == 0 && !self.handshake(None) {
                    return;
                }
                self.hold_until_stop();
            }
            Trickle => {
                if self.handshake(None) {
                    self.serve_healthy(true);
                }
            }
            NoHandshake => self.discard_until_closed(),
            Http => {
                // Answer after the first bytes, or after 1 s of silence.
                let deadline = Instant::now() + Duration::from_secs(1);
                let mut buf = [0u8; CHUNK];
                let _ = self.read_some(&mut buf, Some(deadline));
                if self.send(HTTP_400) {
                    self.close();
                }
            }
            TinyTimeout => {
                if self.handshake(Some(1)) {
                    self.serve_healthy(false);
                }
            }
            Healthy => {
                if self.handshake(None) {
                    self.serve_healthy(false);
                }
            }
            ExpiredHandshake => {
                if self.read_connect().is_none() {
                    return;
                }
                let resp = ConnectResponse {
                    protocol_version: 0,
                    timeout_ms: 0,
                    session_id: 0,
                    passwd: Bytes::from_static(&[0; 16]),
                    read_only: false,
                };
                let mut frame = BytesMut::new();
                encode_connect_response(&mut frame, &resp);
                if self.send(&frame) {
                    self.close();
                }
            }
        }
    }

    /// Reads the `ConnectRequest`.
    fn read_connect(&mut self) -> Option<ConnectRequest> {
        let mut body = self.read_frame()?;
        ConnectRequest::decode(&mut body).ok()
    }

    /// Reads the `ConnectRequest` and grants a session with the requested timeout (or
    /// `timeout_ms`). False if the client left, sent garbage or the server stopped.
    fn handshake(&mut self, timeout_ms: Option<i32>) -> bool {
        let Some(req) = self.read_connect() else {
            return false;
        };
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout_ms: timeout_ms.unwrap_or(req.timeout_ms),
            // New or resumed: the fake server has a single session.
            session_id: FAKE_SESSION_ID,
            passwd: Bytes::from_static(FAKE_PASSWORD),
            read_only: false,
        };
        let mut frame = BytesMut::new();
        encode_connect_response(&mut frame, &resp);
        self.send(&frame)
    }

    /// Answers requests as [`Misbehaviour::Healthy`] until the client leaves or the
    /// server stops; `trickle` writes each reply a byte a second.
    fn serve_healthy(&mut self, trickle: bool) {
        while let Some((header, _)) = self.read_request() {
            let close = header.op == OpCode::CloseSession.to_i32();
            let err = match OpCode::from_i32(header.op) {
                Some(
                    OpCode::Ping
                    | OpCode::CloseSession
                    | OpCode::Auth
                    | OpCode::SetWatches
                    | OpCode::SetWatches2,
                ) => 0,
                _ => ErrorCode::NoNode.to_i32(),
            };
            let reply = ReplyHeader {
                xid: header.xid,
                zxid: FAKE_ZXID,
                err,
            };
            let mut frame = BytesMut::new();
            encode_reply(&mut frame, &reply, None);
            let sent = if trickle {
                self.trickle(&frame)
            } else {
                self.send(&frame)
            };
            if !sent {
                return;
            }
            if close {
                self.close();
                return;
            }
        }
    }

    /// Writes `bytes` one at a time, pausing [`TRICKLE_PAUSE`] after each but the last.
    fn trickle(&mut self, bytes: &[u8]) -> bool {
        for (i, b) in bytes.iter().enumerate() {
            if i > 0 && !self.sleep(TRICKLE_PAUSE) {
                return false;
            }
            if !self.send(std::slice::from_ref(b)) {
                return false;
            }
        }
        true
    }

    /// Sleeps in [`POLL`] steps; false if the server stopped meanwhile.
    fn sleep(&self, total: Duration) -> bool {
        let deadline = Instant::now() + total;
        loop {
            if self.shared.stopped() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            thread::sleep(POLL.min(deadline - now));
        }
    }

    /// Reads one request frame and splits off its header.
    fn read_request(&mut self) -> Option<(RequestHeader, Bytes)> {
        decode_request(self.read_frame()?).ok()
    }

    /// The next frame body; `None` once the client closed, sent a bad length, an I/O
    /// error happened or the server stopped.
    fn read_frame(&mut self) -> Option<Bytes> {
        loop {
            if !self.inbox.is_empty() {
                let mut input = &self.inbox[..];
                let frame = self.decoder.decode(&mut input).ok()?;
                let used = self.inbox.len() - input.len();
                let _ = self.inbox.split_to(used);
                if frame.is_some() {
                    return frame;
                }
            }
            let mut buf = [0u8; CHUNK];
            let n = self.read_some(&mut buf, None)?;
            self.inbox.extend_from_slice(&buf[..n]);
        }
    }

    /// One successful non-empty read; `None` on EOF, error, stop or at `deadline`.
    fn read_some(&mut self, buf: &mut [u8], deadline: Option<Instant>) -> Option<usize> {
        loop {
            if self.shared.stopped() || deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            match self.stream.read(buf) {
                Ok(0) => return None,
                Ok(n) => return Some(n),
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            }
        }
    }

    /// Writes all of `bytes`; false if the client left, an error happened or the server
    /// stopped before everything was written.
    fn send(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            if self.shared.stopped() {
                return false;
            }
            match self.stream.write(bytes) {
                Ok(0) => return false,
                Ok(n) => bytes = &bytes[n..],
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
        true
    }

    /// Reads and throws away everything until the client closes or the server stops.
    fn discard_until_closed(&mut self) {
        let mut buf = [0u8; CHUNK];
        while self.read_some(&mut buf, None).is_some() {}
    }

    /// Keeps the socket open, untouched, until the server stops.
    fn hold_until_stop(&self) {
        while self.sleep(Duration::from_secs(3600)) {}
    }

    /// Graceful close: FIN after everything written, then wait (bounded) for the client's
    /// FIN so that unread client bytes do not turn the close into a reset.
    fn close(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + CLOSE_DRAIN;
        let mut buf = [0u8; CHUNK];
        while self.read_some(&mut buf, Some(deadline)).is_some() {}
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
