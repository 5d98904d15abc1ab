//! The I/O thread: one per session, and the only one. It waits in `mio::Poll` for the
//! socket (readable, writable, connected), for a command (a `Waker`), or for the core's
//! next deadline, whichever comes first, so a write that cannot proceed never holds up
//! reads, pings or timers. Bytes read go straight into the core. No protocol decisions
//! here.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use mio::net::TcpStream;
use mio::{Events as MioEvents, Interest, Poll, Token, Waker};
use zk_recipes::client::{Client as Core, ClientEvent, Error, Routes, Sink, Status, WatchMode};
use zk_recipes::proto::Response;
use zk_recipes::recipe::AnyEvent;
use zk_recipes::session::{HostFailures, Transport, TransportError, WatchEvent};
use zk_recipes::time::Instant;

const SOCKET: Token = Token(0);
const WAKE: Token = Token(1);

/// The routed commands, with this adapter's channel types.
pub(crate) type Routed = zk_recipes::client::Command<ReplyTx, WatchTx, EventTx, StatusTx>;

pub(crate) enum Input {
    /// Submit, host, run, abandon, subscribe: carried out by the core's `Routes`.
    Route(Routed),
    Close {
        timeout: Duration,
        done: SyncSender<()>,
    },
    /// Every handle is gone.
    Shutdown,
}

/// The way into the I/O thread: a channel plus the waker of its poll.
pub(crate) struct Inputs {
    tx: Sender<Input>,
    waker: Arc<Waker>,
}

impl Inputs {
    pub(crate) fn send(&self, input: Input) -> Result<(), ()> {
        self.tx.send(input).map_err(|_| ())?;
        self.waker.wake().map_err(|_| ())
    }
}

pub(crate) struct ReplyTx(pub(crate) SyncSender<Result<Response, Error>>);

impl Sink<Result<Response, Error>> for ReplyTx {
    fn send(&mut self, value: Result<Response, Error>) -> bool {
        self.0.try_send(value).is_ok()
    }
}

pub(crate) struct WatchTx(pub(crate) Sender<WatchEvent>, pub(crate) WatchMode);

impl Sink<WatchEvent> for WatchTx {
    fn send(&mut self, value: WatchEvent) -> bool {
        self.0.send(value).is_ok()
    }
}

/// One subscriber of a hosted recipe's events.
pub(crate) struct EventTx(pub(crate) Sender<AnyEvent>);

impl Sink<AnyEvent> for EventTx {
    fn send(&mut self, value: AnyEvent) -> bool {
        self.0.send(value).is_ok()
    }
}

pub(crate) struct StatusTx(pub(crate) Sender<Status>);

impl Sink<Status> for StatusTx {
    fn send(&mut self, value: Status) -> bool {
        self.0.send(value).is_ok()
    }
}

/// What the handles see of the driver's state.
#[derive(Clone, Debug)]
pub(crate) struct Published {
    pub(crate) status: Status,
    pub(crate) session_id: i64,
    pub(crate) password: Vec<u8>,
    pub(crate) unreachable: Option<HostFailures>,
    /// The I/O thread has stopped.
    pub(crate) stopped: bool,
}

/// Published state, shared with every handle.
pub(crate) struct Shared {
    pub(crate) state: Mutex<Published>,
    pub(crate) changed: Condvar,
}

impl Shared {
    pub(crate) fn new() -> Self {
        Shared {
            state: Mutex::new(Published {
                status: Status::Connecting,
                session_id: 0,
                password: Vec::new(),
                unreachable: None,
                stopped: false,
            }),
            changed: Condvar::new(),
        }
    }

    fn publish(&self, update: impl FnOnce(&mut Published)) {
        if let Ok(mut s) = self.state.lock() {
            update(&mut s);
        }
        self.changed.notify_all();
    }
}

/// A poll, its waker and the input channel, made before the thread starts.
pub(crate) fn channel() -> io::Result<(Inputs, Receiver<Input>, Poll)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
    let (tx, rx) = std::sync::mpsc::channel();
    Ok((Inputs { tx, waker }, rx, poll))
}

struct Socket {
    stream: TcpStream,
    connected: bool,
}

fn dial(poll: &Poll, addr: &str) -> Result<Socket, TransportError> {
    let addr: SocketAddr = addr
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or(TransportError::Unreachable)?;
    let mut stream = TcpStream::connect(addr).map_err(|e| TransportError::from(&e))?;
    poll.registry()
        .register(&mut stream, SOCKET, Interest::READABLE | Interest::WRITABLE)
        .map_err(|e| TransportError::from(&e))?;
    Ok(Socket {
        stream,
        connected: false,
    })
}

fn close(poll: &Poll, socket: &mut Option<Socket>) {
    if let Some(mut s) = socket.take() {
        let _ = poll.registry().deregister(&mut s.stream);
    }
}

pub(crate) fn run(mut core: Core, inputs: Receiver<Input>, mut poll: Poll, shared: Arc<Shared>) {
    let epoch = std::time::Instant::now();
    let now = move || {
        Instant::from_micros(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    };
    let mut routes: Routes<ReplyTx, WatchTx, EventTx, StatusTx> = Routes::default();
    let mut socket: Option<Socket> = None;
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut buf = vec![0u8; 64 * 1024];
    let mut close_waiters: Vec<SyncSender<()>> = Vec::new();
    let mut events = MioEvents::with_capacity(16);

    loop {
        // Drain every output until there is nothing but a deadline (and bytes to write).
        loop {
            let mut progressed = false;
            while let Some(t) = core.poll_transport() {
                progressed = true;
                close(&poll, &mut socket);
                out.clear();
                if let Transport::Connect { host } = t {
                    let addr = core.host(host).to_string();
                    tracing::debug!(%addr, "connecting");
                    match dial(&poll, &addr) {
                        Ok(s) => socket = Some(s),
                        Err(e) => core.handle_transport_error(now(), e),
                    }
                }
            }
            if socket.as_ref().is_some_and(|s| s.connected) && core.poll_transmit(&mut out) {
                progressed = true;
            }
            // Write what the socket takes now; the rest waits for `writable`.
            if let Some(s) = socket.as_mut().filter(|s| s.connected) {
                while !out.is_empty() {
                    match s.stream.write(&out) {
                        Ok(n) => out.advance(n),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            close(&poll, &mut socket);
                            out.clear();
                            core.handle_transport_error(now(), TransportError::from(&e));
                            progressed = true;
                            break;
                        }
                    }
                }
            }
            while let Some(event) = core.poll_event() {
                progressed = true;
                log(&event);
                if routes.deliver(&mut core, event).is_some() {
                    shared.publish(|p| {
                        p.status = routes.status();
                        p.session_id = core.session().session_id();
                        p.password = core.session().password().to_vec();
                        p.unreachable = routes.unreachable().cloned();
                    });
                }
            }
            if !progressed {
                break;
            }
        }
        if core.is_ended() {
            close(&poll, &mut socket);
            for done in close_waiters.drain(..) {
                let _ = done.try_send(());
            }
            shared.publish(|p| p.stopped = true);
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
                    while let Ok(input) = inputs.try_recv() {
                        let t = now();
                        match input {
                            Input::Route(r) => routes.handle(&mut core, t, r),
                            Input::Close { timeout, done } => {
                                core.close(t, t + timeout);
                                close_waiters.push(done);
                            }
                            Input::Shutdown => core.close(t, t + Duration::from_secs(2)),
                        }
                    }
                }
                SOCKET => {
                    let Some(s) = socket.as_mut() else { continue };
                    if !s.connected && (event.is_writable() || event.is_error()) {
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
                                core.handle_transport_error(now(), TransportError::Refused);
                                continue;
                            }
                            Ok(None) if s.stream.peer_addr().is_ok() => {
                                let _ = s.stream.set_nodelay(true);
                                s.connected = true;
                                core.handle_connected(now());
                            }
                            Ok(None) => {} // not yet
                            Ok(Some(e)) | Err(e) => {
                                close(&poll, &mut socket);
                                core.handle_transport_error(now(), TransportError::from(&e));
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
        match s.stream.read(buf) {
            Ok(0) => {
                close(poll, socket);
                return core.handle_transport_error(t, TransportError::Closed);
            }
            Ok(n) => core.handle_bytes(t, &buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                close(poll, socket);
                return core.handle_transport_error(t, TransportError::from(&e));
            }
        }
        // The core dropped the connection (a bad frame, say): the drain loop closes it.
        if core.session().transport_pending() {
            return;
        }
    }
}

fn log(event: &ClientEvent) {
    if let ClientEvent::Session(event) = event {
        if event.is_state_change() {
            tracing::info!(target: "zk_recipes", "{event}");
        }
    }
}
