//! The I/O thread: one per session. A reader thread per connection and a connector
//! thread per dial feed the same input channel; inputs carry the connection generation
//! so that anything from an abandoned socket is ignored. No protocol decisions here.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use bytes::BytesMut;
use zk_recipes::client::ClientEvent;
use zk_recipes::client::{Client as Core, Error, Routes, Sink, Status, WatchMode};
use zk_recipes::proto::{Request, Response};
use zk_recipes::recipe::lock::{Lock, LockConfig, LockEvent};
use zk_recipes::recipe::RecipeEvent;
use zk_recipes::session::{Transport, WatchEvent};
use zk_recipes::time::Instant;

pub(crate) enum Input {
    Submit {
        request: Request,
        reply: SyncSender<Result<Response, Error>>,
        watch: Option<WatchTx>,
    },
    Close {
        timeout: Duration,
        done: SyncSender<()>,
    },
    /// Every handle is gone.
    Shutdown,
    /// Host a lock under `key` and start acquiring.
    Lock {
        key: u64,
        config: LockConfig,
        wait: Option<Duration>,
        events: Sender<LockEvent>,
    },
    /// Release (or cancel) the lock hosted under `key`.
    Unlock {
        key: u64,
    },
    Connected(u64, TcpStream),
    ConnectFailed(u64),
    Bytes(u64, Vec<u8>),
    Eof(u64),
}

pub(crate) struct ReplyTx(SyncSender<Result<Response, Error>>);

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

/// Where a lock's events go.
pub(crate) struct LockTx(pub(crate) Sender<LockEvent>);

impl Sink<RecipeEvent> for LockTx {
    fn send(&mut self, value: RecipeEvent) -> bool {
        match value {
            RecipeEvent::Lock(e) => self.0.send(e).is_ok(),
            _ => true,
        }
    }
}

/// Status and credentials, shared with every handle.
#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) state: Mutex<(Option<Status>, i64, Vec<u8>)>,
    pub(crate) changed: Condvar,
}

fn publish(shared: &Shared, status: Status, core: &Core) {
    if let Ok(mut s) = shared.state.lock() {
        *s = (
            Some(status),
            core.session().session_id(),
            core.session().password().to_vec(),
        );
    }
    shared.changed.notify_all();
}

fn spawn_reader(generation: u64, mut stream: TcpStream, inputs: Sender<Input>) {
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stream.read(&mut buf) {
                Ok(n) if n > 0 => {
                    if inputs
                        .send(Input::Bytes(generation, buf[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
                _ => {
                    let _ = inputs.send(Input::Eof(generation));
                    return;
                }
            }
        }
    });
}

fn spawn_connector(generation: u64, addr: String, timeout: Duration, inputs: Sender<Input>) {
    thread::spawn(move || {
        let stream = addr
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.find_map(|a| TcpStream::connect_timeout(&a, timeout).ok()));
        let _ = inputs.send(match stream {
            Some(s) => Input::Connected(generation, s),
            None => Input::ConnectFailed(generation),
        });
    });
}

pub(crate) fn run(
    mut core: Core,
    inputs: Receiver<Input>,
    feed: Sender<Input>,
    shared: Arc<Shared>,
) {
    let epoch = std::time::Instant::now();
    let now = move || {
        Instant::from_micros(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    };
    let mut routes: Routes<ReplyTx, WatchTx, LockTx> = Routes::default();
    let mut socket: Option<TcpStream> = None;
    let mut generation = 0u64;
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut close_waiters: Vec<SyncSender<()>> = Vec::new();
    let mut locks: std::collections::HashMap<u64, zk_recipes::client::RecipeHandle> =
        std::collections::HashMap::new();

    let drop_socket = |socket: &mut Option<TcpStream>| {
        if let Some(s) = socket.take() {
            let _ = s.shutdown(Shutdown::Both); // unblocks its reader thread
        }
    };

    loop {
        loop {
            let mut progressed = false;
            while let Some(t) = core.poll_transport() {
                progressed = true;
                generation += 1;
                drop_socket(&mut socket);
                if let Transport::Connect { host } = t {
                    let addr = core.host(host).to_string();
                    tracing::debug!(%addr, "connecting");
                    // The session enforces its own connect deadline; this only bounds the thread.
                    spawn_connector(generation, addr, Duration::from_secs(60), feed.clone());
                }
            }
            if core.poll_transmit(&mut out) {
                progressed = true;
                if let Some(s) = &mut socket {
                    if let Err(e) = s.write_all(&out) {
                        tracing::debug!(error = %e, "write failed");
                        generation += 1;
                        drop_socket(&mut socket);
                        core.handle_disconnect(now());
                    }
                }
                out.clear();
            }
            while let Some(event) = core.poll_event() {
                progressed = true;
                log(&event);
                if let Some(status) = routes.deliver(&mut core, event) {
                    publish(&shared, status, &core);
                }
            }
            if !progressed {
                break;
            }
        }
        if routes.status().is_terminal() {
            drop_socket(&mut socket);
            for done in close_waiters.drain(..) {
                let _ = done.try_send(());
            }
            return;
        }

        let input = match core.poll_timeout() {
            Some(deadline) => {
                let wait =
                    Duration::from_micros(deadline.as_micros().saturating_sub(now().as_micros()));
                match inputs.recv_timeout(wait) {
                    Ok(input) => input,
                    Err(RecvTimeoutError::Timeout) => {
                        core.handle_timeout(now());
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            None => match inputs.recv() {
                Ok(input) => input,
                Err(_) => return,
            },
        };
        match input {
            Input::Submit {
                request,
                reply,
                watch,
            } => match core.submit(now(), request) {
                Ok(token) => {
                    let watch = watch.map(|w| {
                        let mode = w.1;
                        (w, mode)
                    });
                    routes.insert(token, ReplyTx(reply), watch);
                }
                Err(e) => {
                    let _ = reply.try_send(Err(e.into()));
                }
            },
            Input::Close { timeout, done } => {
                let t = now();
                core.close(t, t + timeout);
                close_waiters.push(done);
            }
            Input::Lock {
                key,
                config,
                wait,
                events,
            } => {
                let t = now();
                let handle = core.add_lock(t, Lock::new(config));
                routes.insert_recipe(handle, LockTx(events));
                locks.insert(key, handle);
                core.lock_mut(t, handle, |l| l.acquire(t, wait.map(|w| t + w)));
            }
            Input::Unlock { key } => {
                if let Some(handle) = locks.remove(&key) {
                    let t = now();
                    core.lock_mut(t, handle, |l| l.release(t));
                }
            }
            Input::Shutdown => {
                let t = now();
                core.close(t, t + Duration::from_secs(2));
            }
            Input::Connected(g, stream) if g == generation => {
                let _ = stream.set_nodelay(true);
                match stream.try_clone() {
                    Ok(reader) => {
                        spawn_reader(g, reader, feed.clone());
                        socket = Some(stream);
                        core.handle_connected(now());
                    }
                    Err(_) => core.handle_disconnect(now()),
                }
            }
            Input::ConnectFailed(g) | Input::Eof(g) if g == generation => {
                drop_socket(&mut socket);
                core.handle_disconnect(now());
            }
            Input::Bytes(g, bytes) if g == generation => core.handle_bytes(now(), &bytes),
            // Input from an abandoned connection.
            Input::Connected(_, stream) => {
                let _ = stream.shutdown(Shutdown::Both);
            }
            Input::ConnectFailed(_) | Input::Eof(_) | Input::Bytes(..) => {}
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
