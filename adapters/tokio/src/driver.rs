//! The driver task: socket I/O, the timer and channels around one core `Client`.
//! No protocol decisions are made here. A write never holds up reads or timers: the
//! socket is written from inside the same `select!` as it becomes writable.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use zk_recipes::client::{
    Client as Core, ClientEvent, Error, RecipeId, Routes, Sink, Status, WatchMode,
};
use zk_recipes::proto::{Request, Response};
use zk_recipes::recipe::{AnyEvent, AnyRecipe};
use zk_recipes::session::{DisconnectReason, Transport, TransportError, WatchEvent};
use zk_recipes::time::Instant;

/// A command run on a hosted recipe in the driver (it downcasts to its type).
pub(crate) type RecipeCommand = Box<dyn FnOnce(&mut dyn Any, Instant) + Send>;

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
    /// Host a recipe under `key`; its events go to `events`.
    Host {
        key: u64,
        recipe: Box<dyn AnyRecipe>,
        events: mpsc::UnboundedSender<AnyEvent>,
    },
    /// Run a command on the recipe under `key`, after adding `subscribe` (if any) to
    /// its listeners. Dropped unrun if the recipe is gone.
    Run {
        key: u64,
        command: RecipeCommand,
        subscribe: Option<mpsc::UnboundedSender<AnyEvent>>,
    },
    /// The owner of the recipe under `key` went away.
    Abandon { key: u64 },
    /// Every status change from now on.
    Statuses(mpsc::UnboundedSender<Status>),
}

/// What the handles see of the driver's state.
#[derive(Clone, Debug)]
pub(crate) struct Published {
    pub(crate) status: Status,
    pub(crate) session_id: i64,
    pub(crate) password: Vec<u8>,
    pub(crate) unreachable: Option<DisconnectReason>,
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

/// Every subscriber of one hosted recipe's events.
#[derive(Default)]
pub(crate) struct Fanout(Vec<mpsc::UnboundedSender<AnyEvent>>);

impl Sink<AnyEvent> for Fanout {
    fn send(&mut self, value: AnyEvent) -> bool {
        self.0.retain(|tx| tx.send(value.clone()).is_ok());
        true // the recipe's listener lives until it is done
    }
}

pub(crate) struct StatusTx(mpsc::UnboundedSender<Status>);

impl Sink<Status> for StatusTx {
    fn send(&mut self, value: Status) -> bool {
        self.0.send(value).is_ok()
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

/// Writes some of `out` if there is a socket and something to write (cancel-safe:
/// a write that did not complete wrote nothing).
async fn write_some(socket: &mut Option<OwnedWriteHalf>, out: &[u8]) -> io::Result<usize> {
    match socket {
        Some(s) if !out.is_empty() => s.write(out).await,
        _ => std::future::pending().await,
    }
}

async fn connected(connecting: &mut Option<Connecting>) -> io::Result<TcpStream> {
    match connecting {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

pub(crate) async fn run(
    mut core: Core,
    mut commands: mpsc::UnboundedReceiver<Command>,
    published: watch::Sender<Published>,
) {
    let epoch = tokio::time::Instant::now();
    let now = move || {
        Instant::from_micros(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    };
    let mut routes: Routes<ReplyTx, WatchTx, Fanout, StatusTx> = Routes::default();
    let mut reader: Option<OwnedReadHalf> = None;
    let mut writer: Option<OwnedWriteHalf> = None;
    let mut connecting: Option<Connecting> = None;
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut buf = vec![0u8; 64 * 1024];
    let mut close_waiters: Vec<oneshot::Sender<()>> = Vec::new();
    let mut handles_alive = true;
    let mut recipes: HashMap<u64, RecipeId> = HashMap::new();

    loop {
        // Drain every output until there is nothing but a deadline (and bytes to write).
        loop {
            let mut progressed = false;
            while let Some(t) = core.poll_transport() {
                progressed = true;
                reader = None;
                writer = None;
                connecting = None;
                out.clear();
                if let Transport::Connect { host } = t {
                    let addr = core.host(host).to_string();
                    tracing::debug!(%addr, "connecting");
                    connecting = Some(Box::pin(TcpStream::connect(addr)));
                }
            }
            if writer.is_some() && core.poll_transmit(&mut out) {
                progressed = true;
            }
            while let Some(event) = core.poll_event() {
                progressed = true;
                log(&event);
                if let ClientEvent::RecipeDone { id } = &event {
                    recipes.retain(|_, r| r != id);
                }
                if routes.deliver(&mut core, event).is_some() {
                    published.send_replace(Published {
                        status: routes.status(),
                        session_id: core.session().session_id(),
                        password: core.session().password().to_vec(),
                        unreachable: routes.unreachable().cloned(),
                    });
                }
            }
            if !progressed {
                break;
            }
        }
        if core.is_ended() {
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
                Some(c) => {
                    let t = now();
                    handle(&mut core, &mut routes, &mut recipes, &mut close_waiters, c, t);
                    // Take what else is waiting in one go: one write for many requests.
                    for _ in 0..256 {
                        match commands.try_recv() {
                            Ok(c) => handle(&mut core, &mut routes, &mut recipes, &mut close_waiters, c, t),
                            Err(_) => break,
                        }
                    }
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
                Ok(_) => {
                    reader = None;
                    writer = None;
                    core.handle_transport_error(now(), TransportError::Closed);
                }
                Err(e) => {
                    reader = None;
                    writer = None;
                    core.handle_transport_error(now(), TransportError::from(&e));
                }
            },
            result = write_some(&mut writer, &out) => match result {
                Ok(n) => out.advance(n),
                Err(e) => {
                    tracing::debug!(error = %e, "write failed");
                    reader = None;
                    writer = None;
                    core.handle_transport_error(now(), TransportError::from(&e));
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
                        out.clear();
                        core.handle_connected(now());
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "connect failed");
                        core.handle_transport_error(now(), TransportError::from(&e));
                    }
                }
            },
            _ = sleep_until(deadline) => core.handle_timeout(now()),
        }
    }
}

fn handle(
    core: &mut Core,
    routes: &mut Routes<ReplyTx, WatchTx, Fanout, StatusTx>,
    recipes: &mut HashMap<u64, RecipeId>,
    close_waiters: &mut Vec<oneshot::Sender<()>>,
    command: Command,
    t: Instant,
) {
    match command {
        Command::Submit {
            request,
            reply,
            watch,
        } => match core.submit(t, request) {
            Ok(token) => {
                let watch = watch.map(|w| {
                    let m = w.mode();
                    (w, m)
                });
                routes.insert(token, ReplyTx(Some(reply)), watch);
            }
            Err(e) => {
                let _ = reply.send(Err(e.into()));
            }
        },
        Command::Host {
            key,
            recipe,
            events,
        } => {
            let id = core.add_boxed(t, recipe);
            routes.insert_recipe(id, Fanout(vec![events]));
            recipes.insert(key, id);
            // Events it reported while being hosted are already queued in the core.
        }
        Command::Run {
            key,
            command,
            subscribe,
        } => {
            if let Some(&id) = recipes.get(&key) {
                if let Some(tx) = subscribe {
                    if let Some(fanout) = routes.listener_mut(id) {
                        fanout.0.push(tx);
                    }
                }
                core.command_any(t, id, command);
            }
        }
        Command::Abandon { key } => {
            if let Some(&id) = recipes.get(&key) {
                core.abandon(t, id);
            }
        }
        Command::Statuses(tx) => routes.subscribe_status(StatusTx(tx)),
        Command::Close { timeout, done } => {
            core.close(t, t + timeout);
            close_waiters.push(done);
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
