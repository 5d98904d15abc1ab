//! The driver task: socket I/O, the timer and channels around one core `Client`.
//! No protocol decisions are made here.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use zk_recipes::client::ClientEvent;
use zk_recipes::client::{Client as Core, Error, Routes, Sink, Status, WatchMode};
use zk_recipes::proto::{Request, Response};
use zk_recipes::recipe::lock::{Lock, LockConfig, LockEvent};
use zk_recipes::recipe::RecipeEvent;
use zk_recipes::session::{Transport, WatchEvent};
use zk_recipes::time::Instant;

pub(crate) enum Command {
    Submit {
        request: Request,
        reply: oneshot::Sender<Result<Response, Error>>,
        watch: Option<WatchTx>,
    },
    Close {
        timeout: Duration,
        done: oneshot::Sender<()>,
    },
    /// Host a lock under `key` and start acquiring.
    Lock {
        key: u64,
        config: LockConfig,
        wait: Option<Duration>,
        events: mpsc::UnboundedSender<LockEvent>,
    },
    /// Release (or cancel) the lock hosted under `key`.
    Unlock { key: u64 },
}

pub(crate) struct ReplyTx(Option<oneshot::Sender<Result<Response, Error>>>);

impl Sink<Result<Response, Error>> for ReplyTx {
    fn send(&mut self, value: Result<Response, Error>) -> bool {
        self.0.take().is_some_and(|tx| tx.send(value).is_ok())
    }
}

pub(crate) enum WatchTx {
    Once(Option<oneshot::Sender<WatchEvent>>),
    Stream(mpsc::UnboundedSender<WatchEvent>),
}

impl WatchTx {
    fn mode(&self) -> WatchMode {
        match self {
            WatchTx::Once(_) => WatchMode::Once,
            WatchTx::Stream(_) => WatchMode::Persistent,
        }
    }
}

impl Sink<WatchEvent> for WatchTx {
    fn send(&mut self, value: WatchEvent) -> bool {
        match self {
            WatchTx::Once(tx) => tx.take().is_some_and(|tx| tx.send(value).is_ok()),
            WatchTx::Stream(tx) => tx.send(value).is_ok(),
        }
    }
}

/// Where a lock's events go.
pub(crate) struct LockTx(pub(crate) mpsc::UnboundedSender<LockEvent>);

impl Sink<RecipeEvent> for LockTx {
    fn send(&mut self, value: RecipeEvent) -> bool {
        match value {
            RecipeEvent::Lock(e) => self.0.send(e).is_ok(),
            _ => true,
        }
    }
}

type Connecting = Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>>;

/// Reads from the socket if there is one; otherwise never completes.
async fn read_some(socket: &mut Option<OwnedReadHalf>, buf: &mut [u8]) -> io::Result<usize> {
    match socket {
        Some(s) => s.read(buf).await,
        None => std::future::pending().await,
    }
}

async fn connected(connecting: &mut Option<Connecting>) -> io::Result<TcpStream> {
    match connecting {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

pub(crate) async fn run(
    mut core: Core,
    mut commands: mpsc::UnboundedReceiver<Command>,
    status: watch::Sender<Status>,
    credentials: std::sync::Arc<std::sync::Mutex<(i64, Vec<u8>)>>,
) {
    let epoch = tokio::time::Instant::now();
    let now = move || {
        Instant::from_micros(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    };
    let mut routes: Routes<ReplyTx, WatchTx, LockTx> = Routes::default();
    let mut reader: Option<OwnedReadHalf> = None;
    let mut writer: Option<OwnedWriteHalf> = None;
    let mut connecting: Option<Connecting> = None;
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut buf = vec![0u8; 64 * 1024];
    let mut close_waiters: Vec<oneshot::Sender<()>> = Vec::new();
    let mut handles_alive = true;
    let mut locks: std::collections::HashMap<u64, zk_recipes::client::RecipeHandle> =
        std::collections::HashMap::new();

    loop {
        // Drain every output until there is nothing but a deadline.
        loop {
            let mut progressed = false;
            while let Some(t) = core.poll_transport() {
                progressed = true;
                reader = None;
                writer = None;
                connecting = None;
                if let Transport::Connect { host } = t {
                    let addr = core.host(host).to_string();
                    tracing::debug!(%addr, "connecting");
                    connecting = Some(Box::pin(TcpStream::connect(addr)));
                }
            }
            if core.poll_transmit(&mut out) {
                progressed = true;
                if let Some(w) = &mut writer {
                    if let Err(e) = w.write_all(&out).await {
                        tracing::debug!(error = %e, "write failed");
                        reader = None;
                        writer = None;
                        core.handle_disconnect(now());
                    }
                }
                out.clear();
            }
            while let Some(event) = core.poll_event() {
                progressed = true;
                log(&event);
                if let Some(s) = routes.deliver(&mut core, event) {
                    if let Ok(mut c) = credentials.lock() {
                        *c = (
                            core.session().session_id(),
                            core.session().password().to_vec(),
                        );
                    }
                    status.send_replace(s);
                }
            }
            if !progressed {
                break;
            }
        }
        if routes.status().is_terminal() {
            for done in close_waiters.drain(..) {
                let _ = done.send(());
            }
            // Commands still queued get an error from their dropped reply senders.
            return;
        }

        let deadline = core
            .poll_timeout()
            .map(|t| epoch + Duration::from_micros(t.as_micros()));
        tokio::select! {
            command = commands.recv(), if handles_alive => match command {
                Some(Command::Submit { request, reply, watch }) => match core.submit(now(), request) {
                    Ok(token) => {
                        let watch = watch.map(|w| { let m = w.mode(); (w, m) });
                        routes.insert(token, ReplyTx(Some(reply)), watch);
                    }
                    Err(e) => { let _ = reply.send(Err(e.into())); }
                },
                Some(Command::Lock { key, config, wait, events }) => {
                    let t = now();
                    let handle = core.add_lock(t, Lock::new(config));
                    routes.insert_recipe(handle, LockTx(events));
                    locks.insert(key, handle);
                    core.lock_mut(t, handle, |l| l.acquire(t, wait.map(|w| t + w)));
                }
                Some(Command::Unlock { key }) => {
                    if let Some(handle) = locks.remove(&key) {
                        let t = now();
                        core.lock_mut(t, handle, |l| l.release(t));
                    }
                }
                Some(Command::Close { timeout, done }) => {
                    let t = now();
                    core.close(t, t + timeout);
                    close_waiters.push(done);
                }
                None => {
                    // Every handle is gone: close the session politely.
                    handles_alive = false;
                    let t = now();
                    core.close(t, t + Duration::from_secs(2));
                }
            },
            result = read_some(&mut reader, &mut buf) => match result {
                Ok(n) if n > 0 => core.handle_bytes(now(), &buf[..n]),
                Ok(_) | Err(_) => {
                    reader = None;
                    writer = None;
                    core.handle_disconnect(now());
                }
            },
            result = connected(&mut connecting) => {
                connecting = None;
                match result {
                    Ok(stream) => {
                        let _ = stream.set_nodelay(true);
                        let (r, w) = stream.into_split();
                        reader = Some(r);
                        writer = Some(w);
                        core.handle_connected(now());
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "connect failed");
                        core.handle_disconnect(now());
                    }
                }
            },
            _ = sleep_until(deadline) => core.handle_timeout(now()),
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn log(event: &ClientEvent) {
    if let ClientEvent::Session(event) = event {
        if event.is_state_change() {
            tracing::info!(target: "zk_recipes", "{event}");
        }
    }
}
