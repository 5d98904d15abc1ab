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

fn close(poll: &Poll, socket: &mut Option<Socket>) {
    if let Some(mut s) = socket.take() {
        let _ = poll.registry().deregister(&mut s.stream);
    }
}

/// The I/O thread's state: the core, the poll and what it waits on.
struct Loop {
    core: Core,
    poll: Poll,
    inputs: Receiver<Command>,
    dialer: Dialer,
    /// The poll's waker (a probe's thread wakes it with its answer).
    waker: Arc<Waker>,
    /// What probes for a read-write server read, by host.
    probes_tx: Sender<(usize, Vec<u8>)>,
    probes: Receiver<(usize, Vec<u8>)>,
    hub: Hub,
    socket: Option<Socket>,
    tls: TlsSetting,
    out: BytesMut,
    buf: Vec<u8>,
    epoch: std::time::Instant,
}

/// Drives `core` until it ends: each turn drains its outputs, then waits for the
/// socket, a command or the next deadline.
pub(crate) fn run(core: Core, io: Io, shared: BoardTx, tls: TlsSetting) {
    let Io {
        poll,
        inputs,
        waker,
    } = io;
    let (probes_tx, probes) = std::sync::mpsc::channel();
    let mut this = Loop {
        core,
        poll,
        inputs,
        dialer: Dialer::new(waker.clone()),
        waker,
        probes_tx,
        probes,
        hub: Hub::new(shared),
        socket: None,
        tls,
        out: BytesMut::with_capacity(64 * 1024),
        buf: vec![0u8; 64 * 1024],
        epoch: std::time::Instant::now(),
    };
    let mut events = MioEvents::with_capacity(16);
    loop {
        this.drain();
        if this.core.is_ended() {
            close(&this.poll, &mut this.socket);
            this.hub.ended();
            return;
        }
        this.wait(&mut events);
    }
}

impl Loop {
    fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    /// Drains every output until there is nothing but a deadline (and bytes to write).
    fn drain(&mut self) {
        loop {
            let mut progressed = self.transports();
            let connected = self.socket.as_ref().is_some_and(|s| s.connected);
            progressed |= self.hub.flush(&mut self.core, &mut self.out, connected);
            progressed |= self.write();
            if !progressed {
                return;
            }
        }
    }

    /// Carries out the core's transport requests (close, connect); did any come?
    fn transports(&mut self) -> bool {
        let mut progressed = false;
        while let Some(t) = self.core.poll_transport() {
            progressed = true;
            if let Transport::Probe { host } = t {
                self.probe(host);
                continue;
            }
            close(&self.poll, &mut self.socket);
            self.out.clear();
            self.dialer.cancel();
            if let Transport::Connect { host } = t {
                let addr = self.core.host(host).to_string();
                tracing::debug!(%addr, "connecting");
                self.dialer.start(&addr);
                let dial = self.dialer.next(&self.poll);
                self.dialed(dial);
            }
        }
        progressed
    }

    /// Probes `host` for a read-write server on a side connection, on a thread of its
    /// own (the session's socket stays); the answer wakes the poll.
    fn probe(&self, host: usize) {
        let (addr, answers, waker) = (
            self.core.host(host).to_string(),
            self.probes_tx.clone(),
            self.waker.clone(),
        );
        let _ = std::thread::Builder::new()
            .name("zk-probe".into())
            .spawn(move || {
                let _ = answers.send((host, zk_recipes_surface::probe(&addr)));
                let _ = waker.wake();
            });
    }

    /// Writes what the socket takes now; the rest waits for `writable`. True if the
    /// write failed (the core was told).
    fn write(&mut self) -> bool {
        let Some(s) = self.socket.as_mut().filter(|s| s.connected) else {
            return false;
        };
        let mut written = Ok(());
        while !self.out.is_empty() {
            match s.write(&self.out) {
                Ok(n) => self.out.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    written = Err(e);
                    break;
                }
            }
        }
        let Err(e) = written.and_then(|()| s.flush()) else {
            return false;
        };
        close(&self.poll, &mut self.socket);
        self.out.clear();
        let now = self.now();
        self.core.handle_transport_error(now, transport_error(&e));
        true
    }

    /// Waits for the socket, a command or the core's next deadline, and handles it.
    fn wait(&mut self, events: &mut MioEvents) {
        let timeout = self.core.poll_timeout().map(|deadline| {
            Duration::from_micros(deadline.as_micros().saturating_sub(self.now().as_micros()))
        });
        if let Err(e) = self.poll.poll(events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::warn!(error = %e, "poll failed; closing the session");
                let t = self.now();
                self.core.close(t, t);
            }
            return;
        }
        if events.is_empty() {
            let now = self.now();
            self.core.handle_timeout(now);
            return;
        }
        for event in events.iter() {
            match event.token() {
                WAKE => self.woken(),
                SOCKET => self.on_socket(event),
                _ => {}
            }
        }
        // Deadlines that passed while we were busy.
        let now = self.now();
        if self.core.poll_timeout().is_some_and(|t| t <= now) {
            self.core.handle_timeout(now);
        }
    }

    /// The waker: the resolver answered, commands came, or a probe answered.
    fn woken(&mut self) {
        if self.dialer.take_resolved() {
            let dial = self.dialer.next(&self.poll);
            self.dialed(dial);
        }
        while let Ok(input) = self.inputs.try_recv() {
            let now = self.now();
            self.hub.handle(&mut self.core, now, input);
        }
        while let Ok((host, answer)) = self.probes.try_recv() {
            let now = self.now();
            self.core.handle_probe(now, host, &answer);
        }
    }

    /// The socket is ready: its connect or TLS handshake goes on, or bytes came.
    fn on_socket(&mut self, event: &mio::event::Event) {
        let Some(s) = self.socket.as_ref() else {
            return;
        };
        if !s.tcp && (event.is_writable() || event.is_error()) && !self.connect_done() {
            return;
        }
        if self.socket.as_ref().is_some_and(|s| s.tcp && !s.connected) && !self.handshake() {
            return;
        }
        if event.is_readable() || event.is_read_closed() {
            let now = self.now();
            read_all(
                &mut self.core,
                &self.poll,
                &mut self.socket,
                &mut self.buf,
                now,
            );
        }
    }

    /// The TCP connect under way answered: false if it failed (the next address is
    /// tried) or has not finished.
    fn connect_done(&mut self) -> bool {
        let Some(s) = self.socket.as_mut() else {
            return false;
        };
        let failure = match s.stream.take_error() {
            // Linux may connect a socket to itself when nothing listens on a local
            // port (TCP simultaneous open): it would read its own connect request
            // back as the server's answer. Nobody listens there: refused.
            Ok(None)
                if s.stream
                    .peer_addr()
                    .is_ok_and(|peer| s.stream.local_addr().is_ok_and(|local| local == peer)) =>
            {
                TransportError::Refused
            }
            Ok(None) if s.stream.peer_addr().is_ok() => {
                match s.start_tls(&self.tls, &self.dialer.host) {
                    Ok(()) => return true,
                    Err(e) => e,
                }
            }
            Ok(None) => return true, // not yet
            Ok(Some(e)) | Err(e) => TransportError::from(&e),
        };
        self.redial(failure);
        false
    }

    /// The TLS handshake goes on: true once connected (the core is told).
    fn handshake(&mut self) -> bool {
        let Some(s) = self.socket.as_mut() else {
            return false;
        };
        match s.handshake() {
            Ok(true) => {
                s.connected = true;
                self.core.handle_random(zk_recipes_surface::random_bytes());
                let now = self.now();
                self.core.handle_connected(now);
                true
            }
            Ok(false) => false, // the handshake waits for the server
            Err(e) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                self.redial(transport_error(&e));
                false
            }
        }
    }

    /// The socket failed with `error`: closed, and the next address tried.
    fn redial(&mut self, error: TransportError) {
        close(&self.poll, &mut self.socket);
        let dial = self.dialer.failed(&self.poll, error);
        self.dialed(dial);
    }

    /// Carries out what the dialer did: a socket to wait on, or the attempt's failure.
    fn dialed(&mut self, dial: Dial) {
        match dial {
            Dial::Socket(s) => self.socket = Some(s),
            Dial::Resolving => {}
            Dial::Failed(e) => {
                let now = self.now();
                self.core.handle_transport_error(now, e);
            }
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
