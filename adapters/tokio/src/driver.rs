//! The driver task: socket I/O, the timer and channels around one core `Client`.
//! No protocol decisions are made here. A write never holds up reads or timers: the
//! socket is written from inside the same `select!` as it becomes writable.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use zk_recipes::client::Client as Core;
use zk_recipes::session::{Transport, TransportError};
use zk_recipes::time::Instant;
use zk_recipes_surface::asynchronous::hub::Hub;
use zk_recipes_surface::asynchronous::rt::BoardTx;
use zk_recipes_surface::asynchronous::{Command, Driver, Ended};
use zk_recipes_surface::transport_error;

/// The TLS settings the driver dials with (`None`: plain TCP).
#[cfg(feature = "tls")]
pub(crate) type TlsSetting = Option<zk_recipes_surface::Tls>;
/// The TLS settings the driver dials with (the feature `tls` off: none to have; boxed
/// so that it is `Clone` like the real one, not `Copy`).
#[cfg(not(feature = "tls"))]
pub(crate) type TlsSetting = Option<Box<std::convert::Infallible>>;

/// The handles' side of the command channel.
pub(crate) struct Commands(pub(crate) mpsc::UnboundedSender<Command>);

impl Driver for Commands {
    fn send(&self, command: Command) -> Result<(), Ended> {
        self.0.send(command).map_err(|_| Ended)
    }
}

/// The connection's read half: a TCP socket's, or a TLS stream's.
type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// The connection's write half.
type Writer = Box<dyn AsyncWrite + Send + Unpin>;
type Connecting = Pin<Box<dyn Future<Output = Result<(Reader, Writer), TransportError>> + Send>>;

/// Reads from the socket if there is one; otherwise never completes.
async fn read_some(socket: &mut Option<Reader>, buf: &mut [u8]) -> io::Result<usize> {
    match socket {
        Some(s) => s.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Writes some of `out` if there is a socket and something to write (cancel-safe:
/// a write that did not complete wrote nothing), then flushes what a TLS stream
/// may still hold (`None` once flushed).
async fn write_some(
    socket: &mut Option<Writer>,
    out: &[u8],
    unflushed: bool,
) -> io::Result<Option<usize>> {
    match socket {
        Some(s) if !out.is_empty() => s.write(out).await.map(Some),
        Some(s) if unflushed => s.flush().await.map(|()| None),
        _ => std::future::pending().await,
    }
}

/// Resolves `host` and connects to each of its addresses in turn (as the blocking
/// driver does); a name that does not resolve is `NotFound`, which the core reads as
/// "host unreachable or not resolvable", whatever the resolver's own error was.
async fn connect_any(host: String) -> io::Result<TcpStream> {
    let addrs = tokio::net::lookup_host(host.as_str())
        .await
        .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e))?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no address");
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Connects to `host` (any of its addresses), then speaks TLS on the connection if
/// `tls` says so. A certificate the client rejects, or a handshake the server refuses,
/// ends the attempt on this host with its reason (the session's backoff applies).
async fn dial(host: String, tls: TlsSetting) -> Result<(Reader, Writer), TransportError> {
    let stream = connect_any(host.clone())
        .await
        .map_err(|e| TransportError::from(&e))?;
    // Linux may connect a socket to itself when nothing listens on a local port (TCP
    // simultaneous open): it would read its own connect request back as the server's
    // answer. Nobody listens: refused.
    if stream.peer_addr().ok() == stream.local_addr().ok() {
        return Err(TransportError::Refused);
    }
    let _ = stream.set_nodelay(true);
    if let Some(tls) = tls {
        #[cfg(feature = "tls")]
        {
            let name = tls.name_for(&host)?;
            let connector = tokio_rustls::TlsConnector::from(tls.config().clone());
            let stream = connector
                .connect(name, stream)
                .await
                .map_err(|e| transport_error(&e))?;
            let (r, w) = tokio::io::split(stream);
            return Ok((Box::new(r), Box::new(w)));
        }
        #[cfg(not(feature = "tls"))]
        match *tls {}
    }
    let (r, w) = stream.into_split();
    Ok((Box::new(r), Box::new(w)))
}

async fn connected(
    connecting: &mut Option<Connecting>,
) -> Result<(Reader, Writer), TransportError> {
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
    published: BoardTx,
    tls: TlsSetting,
) {
    let epoch = tokio::time::Instant::now();
    let now = move || {
        Instant::from_micros(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    };
    let mut hub = Hub::new(published);
    let mut reader: Option<Reader> = None;
    let mut writer: Option<Writer> = None;
    // Bytes written to a TLS stream may wait in it for a flush.
    let mut unflushed = false;
    let mut connecting: Option<Connecting> = None;
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut buf = vec![0u8; 64 * 1024];
    // What probes for a read-write server read, by host.
    let (probes_tx, mut probes) = mpsc::unbounded_channel::<(usize, Vec<u8>)>();

    loop {
        // Drain every output until there is nothing but a deadline (and bytes to write).
        loop {
            let mut progressed = false;
            while let Some(t) = core.poll_transport() {
                progressed = true;
                if let Transport::Probe { host } = t {
                    // A side connection: the session's socket stays.
                    let (addr, answers) = (core.host(host).to_string(), probes_tx.clone());
                    tokio::task::spawn_blocking(move || {
                        let _ = answers.send((host, zk_recipes_surface::probe(&addr)));
                    });
                    continue;
                }
                reader = None;
                writer = None;
                connecting = None;
                out.clear();
                if let Transport::Connect { host } = t {
                    let addr = core.host(host).to_string();
                    tracing::debug!(%addr, "connecting");
                    connecting = Some(Box::pin(dial(addr, tls.clone())));
                }
            }
            progressed |= hub.flush(&mut core, &mut out, writer.is_some());
            if !progressed {
                break;
            }
        }
        if core.is_ended() {
            hub.ended();
            return;
        }

        let deadline = core
            .poll_timeout()
            .map(|t| epoch + Duration::from_micros(t.as_micros()));
        tokio::select! {
            command = commands.recv(), if hub.handles_alive() => match command {
                Some(c) => {
                    let t = now();
                    let mut next = Some(c);
                    // Take what else is waiting in one go (up to 256): one write for
                    // many requests. A command is taken off the channel only to be
                    // handled: none is dropped unanswered.
                    let mut taken = 0;
                    while let Some(c) = next.take() {
                        hub.handle(&mut core, t, c);
                        taken += 1;
                        if taken < 256 && hub.handles_alive() {
                            next = commands.try_recv().ok();
                        }
                    }
                }
                None => hub.shutdown(&mut core, now()),
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
                    core.handle_transport_error(now(), transport_error(&e));
                }
            },
            result = write_some(&mut writer, &out, unflushed) => match result {
                Ok(Some(n)) => {
                    out.advance(n);
                    unflushed = true;
                }
                Ok(None) => unflushed = false,
                Err(e) => {
                    tracing::debug!(error = %e, "write failed");
                    reader = None;
                    writer = None;
                    core.handle_transport_error(now(), transport_error(&e));
                }
            },
            result = connected(&mut connecting) => {
                connecting = None;
                match result {
                    Ok((r, w)) => {
                        reader = Some(r);
                        writer = Some(w);
                        unflushed = false;
                        out.clear();
                        core.handle_random(zk_recipes_surface::random_bytes());
                        core.handle_connected(now());
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "connect failed");
                        core.handle_transport_error(now(), e);
                    }
                }
            },
            Some((host, answer)) = probes.recv() => core.handle_probe(now(), host, &answer),
            _ = sleep_until(deadline) => core.handle_timeout(now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host name is resolved and its address dialled (`localhost` is in the hosts
    /// file: no resolver is asked).
    #[tokio::test]
    async fn a_host_name_is_resolved_and_dialled() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stream = connect_any(format!("localhost:{port}")).await.unwrap();
        assert_eq!(stream.peer_addr().unwrap(), listener.local_addr().unwrap());
        // A port nobody listens on: refused, as before.
        drop(listener);
        let e = connect_any(format!("127.0.0.1:{port}")).await.unwrap_err();
        assert_eq!(TransportError::from(&e), TransportError::Refused);
    }
}
