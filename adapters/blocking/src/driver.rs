//! The I/O thread: one per session, and the only one. It waits in `mio::Poll` for the
//! socket (readable, writable, connected), for a command (a `Waker`), or for the core's
//! next deadline, whichever comes first, so a write that cannot proceed never holds up
//! reads, pings or timers. Bytes read go straight into the core. No protocol decisions
//! here.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use mio::net::TcpStream;
use mio::{Events as MioEvents, Interest, Poll, Token, Waker};
use zk_recipes::client::Client as Core;
use zk_recipes::session::{Transport, TransportError};
use zk_recipes::time::Instant;
use zk_recipes_surface::blocking::hub::Hub;
use zk_recipes_surface::blocking::rt::BoardTx;
use zk_recipes_surface::blocking::{Command, Driver, Ended};
use zk_recipes_surface::{final_for_host, transport_error};

/// The TLS settings the driver dials with (`None`: plain TCP).
#[cfg(feature = "tls")]
pub(crate) type TlsSetting = Option<zk_recipes_surface::Tls>;
/// The TLS settings the driver dials with (the feature `tls` off: none to have).
#[cfg(not(feature = "tls"))]
pub(crate) type TlsSetting = Option<std::convert::Infallible>;

const SOCKET: Token = Token(0);
const WAKE: Token = Token(1);

/// The way into the I/O thread: a channel plus the waker of its poll.
pub(crate) struct Inputs {
    tx: Sender<Command>,
    waker: Arc<Waker>,
}

impl Driver for Inputs {
    fn send(&self, command: Command) -> Result<(), Ended> {
        self.tx.send(command).map_err(|_| Ended)?;
        self.waker.wake().map_err(|_| Ended)
    }
}

/// What the I/O thread is given: its poll, the input channel and the poll's waker.
pub(crate) struct Io {
    pub(crate) poll: Poll,
    pub(crate) inputs: Receiver<Command>,
    pub(crate) waker: Arc<Waker>,
}

/// A poll, its waker and the input channel, made before the thread starts.
pub(crate) fn channel() -> io::Result<(Inputs, Io)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
    let (tx, rx) = std::sync::mpsc::channel();
    let io = Io {
        poll,
        inputs: rx,
        waker: waker.clone(),
    };
    Ok((Inputs { tx, waker }, io))
}

struct Socket {
    stream: TcpStream,
    /// The TCP connection is established.
    tcp: bool,
    /// Ready for the session (TCP and, with TLS, the handshake): the core was told.
    connected: bool,
    #[cfg(feature = "tls")]
    tls: Option<Box<crate::tls_io::TlsIo>>,
}

impl Socket {
    /// The TCP connection is up: start TLS on it if the settings say so.
    fn start_tls(&mut self, tls: &TlsSetting, host: &str) -> Result<(), TransportError> {
        self.tcp = true;
        let _ = self.stream.set_nodelay(true);
        if let Some(tls) = tls {
            #[cfg(feature = "tls")]
            {
                self.tls = Some(Box::new(crate::tls_io::TlsIo::new(tls, host)?));
            }
            #[cfg(not(feature = "tls"))]
            match (*tls, host) {}
        }
        Ok(())
    }

    /// Drives the TLS handshake (plain TCP: nothing to do): `Ok(true)` once ready.
    fn handshake(&mut self) -> io::Result<bool> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &mut self.tls {
            return tls.handshake(&mut self.stream);
        }
        Ok(true)
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &mut self.tls {
            return tls.read(&mut self.stream, buf);
        }
        self.stream.read(buf)
    }

    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &mut self.tls {
            return tls.write(&mut self.stream, data);
        }
        self.stream.write(data)
    }

    /// Writes what TLS still holds, as far as the socket takes it (plain: nothing).
    fn flush(&mut self) -> io::Result<()> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &mut self.tls {
            return tls.flush(&mut self.stream);
        }
        Ok(())
    }
}

/// A name's addresses, or why it has none.
type Resolved = (u64, io::Result<Vec<SocketAddr>>);

/// One attempt to reach a host of the connection string: every address its name
/// resolves to, tried in turn as tokio's `TcpStream::connect` does. The name is
/// resolved on a thread of its own, so a slow resolver never holds up the I/O thread's
/// timers, reads or writes.
struct Dialer {
    /// Which attempt (a result for an older one is dropped).
    attempt: u64,
    /// Addresses not tried yet.
    addrs: VecDeque<SocketAddr>,
    /// Waiting for the name's addresses.
    resolving: bool,
    /// Why the last address failed.
    last: TransportError,
    /// The host (`host:port`) of the attempt under way.
    host: String,
    results: (Sender<Resolved>, Receiver<Resolved>),
    waker: Arc<Waker>,
}

/// What [`Dialer::next`] did.
enum Dial {
    /// A connect is under way on this socket.
    Socket(Socket),
    /// Waiting for the name to resolve.
    Resolving,
    /// Every address failed, the last for this reason.
    Failed(TransportError),
}

impl Dialer {
    fn new(waker: Arc<Waker>) -> Self {
        Dialer {
            attempt: 0,
            addrs: VecDeque::new(),
            resolving: false,
            last: TransportError::Unreachable,
            host: String::new(),
            results: std::sync::mpsc::channel(),
            waker,
        }
    }

    /// Starts an attempt on `host` (`host:port`).
    fn start(&mut self, host: &str) {
        self.cancel();
        self.last = TransportError::Unreachable;
        self.host = host.to_string();
        if let Ok(addr) = host.parse::<SocketAddr>() {
            self.addrs.push_back(addr);
            return;
        }
        self.resolving = true;
        let (attempt, tx, waker, host) = (
            self.attempt,
            self.results.0.clone(),
            self.waker.clone(),
            host.to_string(),
        );
        let resolve = move || {
            let addrs = host.to_socket_addrs().map(Iterator::collect);
            let _ = tx.send((attempt, addrs));
            let _ = waker.wake();
        };
        let spawned = std::thread::Builder::new()
            .name("zk-resolve".into())
            .spawn(resolve.clone());
        if spawned.is_err() {
            resolve(); // no thread to be had: resolve here rather than not at all
        }
    }

    /// Drops the attempt under way.
    fn cancel(&mut self) {
        self.attempt += 1;
        self.addrs.clear();
        self.resolving = false;
    }

    /// Takes the resolver's answer for the attempt under way, if it came.
    fn take_resolved(&mut self) -> bool {
        let mut got = false;
        while let Ok((attempt, result)) = self.results.1.try_recv() {
            if attempt != self.attempt || !self.resolving {
                continue;
            }
            self.resolving = false;
            got = true;
            match result {
                Ok(addrs) => self.addrs.extend(addrs),
                // Whatever the resolver said: the name has no address to dial.
                Err(_) => self.last = TransportError::Unreachable,
            }
        }
        got
    }

    /// The connect on the current address failed with `error`: try the next.
    fn failed(&mut self, poll: &Poll, error: TransportError) -> Dial {
        self.last = error;
        // Every address of the host would fail the same way (a certificate).
        if final_for_host(error) {
            self.addrs.clear();
        }
        self.next(poll)
    }

    /// Connects to the next address not tried yet.
    fn next(&mut self, poll: &Poll) -> Dial {
        if self.resolving {
            return Dial::Resolving;
        }
        while let Some(addr) = self.addrs.pop_front() {
            let stream = TcpStream::connect(addr).and_then(|mut stream| {
                poll.registry()
                    .register(&mut stream, SOCKET, Interest::READABLE | Interest::WRITABLE)
                    .map(|()| stream)
            });
            match stream {
                Ok(stream) => {
                    return Dial::Socket(Socket {
                        stream,
                        tcp: false,
                        connected: false,
                        #[cfg(feature = "tls")]
                        tls: None,
                    })
                }
                Err(e) => self.last = TransportError::from(&e),
            }
        }
        Dial::Failed(self.last)
    }
}

/// Carries out what the dialer did: a socket to wait on, or the attempt's failure.
fn dialed(core: &mut Core, socket: &mut Option<Socket>, dial: Dial, t: Instant) {
    match dial {
        Dial::Socket(s) => *socket = Some(s),
        Dial::Resolving => {}
        Dial::Failed(e) => core.handle_transport_error(t, e),
    }
}

fn close(poll: &Poll, socket: &mut Option<Socket>) {
    if let Some(mut s) = socket.take() {
        let _ = poll.registry().deregister(&mut s.stream);
    }
}

pub(crate) fn run(mut core: Core, io: Io, shared: BoardTx, tls: TlsSetting) {
    let Io {
        mut poll,
        inputs,
        waker,
    } = io;
    let mut dialer = Dialer::new(waker.clone());
    let epoch = std::time::Instant::now();
    let now = move || {
        Instant::from_micros(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    };
    let mut hub = Hub::new(shared);
    let mut socket: Option<Socket> = None;
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut buf = vec![0u8; 64 * 1024];
    let mut events = MioEvents::with_capacity(16);
    // What probes for a read-write server read, by host.
    let (probes_tx, probes) = std::sync::mpsc::channel::<(usize, Vec<u8>)>();

    loop {
        // Drain every output until there is nothing but a deadline (and bytes to write).
        loop {
            let mut progressed = false;
            while let Some(t) = core.poll_transport() {
                progressed = true;
                if let Transport::Probe { host } = t {
                    // A side connection, on a thread of its own: the socket stays.
                    let (addr, answers, waker) = (
                        core.host(host).to_string(),
                        probes_tx.clone(),
                        waker.clone(),
                    );
                    let _ = std::thread::Builder::new()
                        .name("zk-probe".into())
                        .spawn(move || {
                            let _ = answers.send((host, zk_recipes_surface::probe(&addr)));
                            let _ = waker.wake();
                        });
                    continue;
                }
                close(&poll, &mut socket);
                out.clear();
                dialer.cancel();
                if let Transport::Connect { host } = t {
                    let addr = core.host(host).to_string();
                    tracing::debug!(%addr, "connecting");
                    dialer.start(&addr);
                    let dial = dialer.next(&poll);
                    dialed(&mut core, &mut socket, dial, now());
                }
            }
            let connected = socket.as_ref().is_some_and(|s| s.connected);
            progressed |= hub.flush(&mut core, &mut out, connected);
            // Write what the socket takes now; the rest waits for `writable`.
            if let Some(s) = socket.as_mut().filter(|s| s.connected) {
                let mut written = Ok(());
                while !out.is_empty() {
                    match s.write(&out) {
                        Ok(n) => out.advance(n),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            written = Err(e);
                            break;
                        }
                    }
                }
                if let Err(e) = written.and_then(|()| s.flush()) {
                    close(&poll, &mut socket);
                    out.clear();
                    core.handle_transport_error(now(), transport_error(&e));
                    progressed = true;
                }
            }
            if !progressed {
                break;
            }
        }
        if core.is_ended() {
            close(&poll, &mut socket);
            hub.ended();
            return;
        }

        let timeout = core.poll_timeout().map(|deadline| {
            Duration::from_micros(deadline.as_micros().saturating_sub(now().as_micros()))
        });
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::warn!(error = %e, "poll failed; closing the session");
                let t = now();
                core.close(t, t);
            }
            continue;
        }
        if events.is_empty() {
            core.handle_timeout(now());
            continue;
        }
        for event in events.iter() {
            match event.token() {
                WAKE => {
                    if dialer.take_resolved() {
                        let dial = dialer.next(&poll);
                        dialed(&mut core, &mut socket, dial, now());
                    }
                    while let Ok(input) = inputs.try_recv() {
                        hub.handle(&mut core, now(), input);
                    }
                    while let Ok((host, answer)) = probes.try_recv() {
                        core.handle_probe(now(), host, &answer);
                    }
                }
                SOCKET => {
                    let Some(s) = socket.as_mut() else { continue };
                    if !s.tcp && (event.is_writable() || event.is_error()) {
                        match s.stream.take_error() {
                            // Linux may connect a socket to itself when nothing
                            // listens on a local port (TCP simultaneous open): it
                            // would read its own connect request back as the
                            // server's answer. Nobody listens there: refused.
                            Ok(None)
                                if s.stream.peer_addr().is_ok_and(|peer| {
                                    s.stream.local_addr().is_ok_and(|local| local == peer)
                                }) =>
                            {
                                close(&poll, &mut socket);
                                let dial = dialer.failed(&poll, TransportError::Refused);
                                dialed(&mut core, &mut socket, dial, now());
                                continue;
                            }
                            Ok(None) if s.stream.peer_addr().is_ok() => {
                                if let Err(e) = s.start_tls(&tls, &dialer.host) {
                                    close(&poll, &mut socket);
                                    let dial = dialer.failed(&poll, e);
                                    dialed(&mut core, &mut socket, dial, now());
                                    continue;
                                }
                            }
                            Ok(None) => {} // not yet
                            Ok(Some(e)) | Err(e) => {
                                close(&poll, &mut socket);
                                let dial = dialer.failed(&poll, TransportError::from(&e));
                                dialed(&mut core, &mut socket, dial, now());
                                continue;
                            }
                        }
                    }
                    if s.tcp && !s.connected {
                        match s.handshake() {
                            Ok(true) => {
                                s.connected = true;
                                core.handle_random(zk_recipes_surface::random_bytes());
                                core.handle_connected(now());
                            }
                            Ok(false) => continue, // the handshake waits for the server
                            Err(e) => {
                                tracing::debug!(error = %e, "TLS handshake failed");
                                close(&poll, &mut socket);
                                let dial = dialer.failed(&poll, transport_error(&e));
                                dialed(&mut core, &mut socket, dial, now());
                                continue;
                            }
                        }
                    }
                    if event.is_readable() || event.is_read_closed() {
                        read_all(&mut core, &poll, &mut socket, &mut buf, now());
                    }
                }
                _ => {}
            }
        }
        // Deadlines that passed while we were busy.
        if core.poll_timeout().is_some_and(|t| t <= now()) {
            core.handle_timeout(now());
        }
    }
}

/// Reads until the socket would block (mio is edge-triggered), feeding the core.
fn read_all(core: &mut Core, poll: &Poll, socket: &mut Option<Socket>, buf: &mut [u8], t: Instant) {
    loop {
        let Some(s) = socket.as_mut().filter(|s| s.connected) else {
            return;
        };
        match s.read(buf) {
            Ok(0) => {
                close(poll, socket);
                return core.handle_transport_error(t, TransportError::Closed);
            }
            Ok(n) => core.handle_bytes(t, &buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                close(poll, socket);
                return core.handle_transport_error(t, transport_error(&e));
            }
        }
        // The core dropped the connection (a bad frame, say): the drain loop closes it.
        if core.session().transport_pending() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits for the next event on `token`, for at most 5 s.
    fn wait_for(poll: &mut Poll, token: Token) -> bool {
        let mut events = MioEvents::with_capacity(4);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            poll.poll(&mut events, Some(Duration::from_millis(100)))
                .unwrap();
            if events.iter().any(|e| e.token() == token) {
                return true;
            }
        }
        false
    }

    /// Issue 25, item 2: a host whose name resolves to several addresses is dialled at
    /// each in turn (it used to try the first only): the first refuses, the second
    /// listens.
    #[test]
    fn every_address_of_a_host_is_tried_in_turn() {
        let refused = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap(); // dropped: nothing listens there now
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (_inputs, mut io) = channel().unwrap();
        let mut dialer = Dialer::new(io.waker.clone());
        dialer
            .addrs
            .extend([refused, listener.local_addr().unwrap()]);
        let Dial::Socket(first) = dialer.next(&io.poll) else {
            panic!("a connect under way")
        };
        let error = match first.stream.take_error() {
            Ok(Some(e)) => Some(e),
            _ if wait_for(&mut io.poll, SOCKET) => first.stream.take_error().ok().flatten(),
            _ => None,
        };
        let error = error.expect("the first address refuses");
        let mut first = first;
        let _ = io.poll.registry().deregister(&mut first.stream);
        let Dial::Socket(second) = dialer.failed(&io.poll, TransportError::from(&error)) else {
            panic!("the second address is tried")
        };
        assert!(wait_for(&mut io.poll, SOCKET), "the second connects");
        assert_eq!(
            second.stream.peer_addr().unwrap(),
            listener.local_addr().unwrap()
        );
        // With none left, the attempt fails with the last reason.
        assert!(matches!(
            dialer.failed(&io.poll, TransportError::Reset),
            Dial::Failed(TransportError::Reset)
        ));
    }

    /// A name is resolved off the I/O thread: the dialer waits (the thread goes on
    /// with its timers), and the answer wakes the poll.
    #[test]
    fn a_name_is_resolved_off_the_io_thread() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (_inputs, mut io) = channel().unwrap();
        let mut dialer = Dialer::new(io.waker.clone());
        dialer.start(&format!("localhost:{port}"));
        assert!(matches!(dialer.next(&io.poll), Dial::Resolving));
        assert!(wait_for(&mut io.poll, WAKE), "the resolver wakes the poll");
        assert!(dialer.take_resolved());
        assert!(matches!(dialer.next(&io.poll), Dial::Socket(_)));
        // An answer for an attempt given up is dropped.
        dialer.start(&format!("localhost:{port}"));
        dialer.cancel();
        assert!(wait_for(&mut io.poll, WAKE));
        assert!(!dialer.take_resolved());
    }
}
