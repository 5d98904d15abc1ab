//! The sans-IO client: a [`Session`] plus the allocation of operation handles. It is the
//! only type adapters drive; recipes will be hosted here too.
//!
//! # Driving it (the adapters do exactly this)
//!
//! ```text
//! loop {
//!     feed one input: handle_connected / handle_bytes / handle_disconnect / handle_timeout,
//!                     or a command: submit / close
//!     drain outputs, in order, until each is empty:
//!         poll_transport  -> dial a host / close the socket
//!         poll_transmit   -> write these bytes
//!         poll_event      -> replies, watch events, session state changes
//!     sleep until poll_timeout() or the next input
//! }
//! ```
//!
//! ```
//! use zk_recipes::client::{Client, Options};
//! use zk_recipes::session::Transport;
//! use zk_recipes::time::Instant;
//!
//! let mut client = Client::new(Options::new("127.0.0.1:2181").unwrap(), Instant::ZERO);
//! assert_eq!(client.poll_transport(), Some(Transport::Connect { host: 0 }));
//! assert_eq!(client.host(0), "127.0.0.1:2181");
//! let op = client.submit(Instant::ZERO, zk_recipes::client::ops::get_data("/config", true)).unwrap();
//! // ... drive the socket; the reply arrives as SessionEvent::Reply { token: op, .. }
//! # let _ = op;
//! ```

mod error;
pub mod ops;
mod routes;

pub use error::Error;
pub use routes::{Routes, Sink, Status, WatchMode};

use core::time::Duration;

use crate::proto::Request;
use crate::session::{
    ConnectString, ConnectStringError, Session, SessionConfig, SessionEvent, SubmitError, Token,
    Transport,
};
use crate::time::Instant;
use bytes::BytesMut;

/// Client options: the session settings plus nothing else yet.
#[derive(Clone, Debug)]
pub struct Options {
    /// Session settings.
    pub session: SessionConfig,
}

impl Options {
    /// Options for a connection string (`host:port,...[/chroot]`) with default settings.
    pub fn new(connect_string: &str) -> Result<Options, ConnectStringError> {
        Ok(Options {
            session: SessionConfig::new(connect_string.parse::<ConnectString>()?),
        })
    }

    /// Sets the requested session timeout.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session.session_timeout = timeout;
        self
    }

    /// Sets the seed for host order and jitter (drivers pass real entropy).
    pub fn seed(mut self, seed: u64) -> Self {
        self.session.seed = seed;
        self
    }

    /// Accept read-only servers.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.session.read_only = read_only;
        self
    }
}

/// See the [module docs](self).
#[derive(Debug)]
pub struct Client {
    session: Session,
    next_token: u64,
}

impl Client {
    /// A client whose session starts connecting at once.
    pub fn new(options: Options, now: Instant) -> Client {
        Client {
            session: Session::new(options.session, now),
            next_token: 1,
        }
    }

    /// The session (for getters).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// `host:port` of host `i` of the connection string.
    pub fn host(&self, i: usize) -> &str {
        self.session
            .config()
            .connect_string
            .hosts()
            .get(i)
            .map(String::as_str)
            .unwrap_or("")
    }

    /// Submits a raw request; its reply and any watch it sets come back under the
    /// returned handle.
    pub fn submit(&mut self, now: Instant, request: Request) -> Result<Token, SubmitError> {
        let token = Token(self.next_token);
        self.session.submit(now, request, token)?;
        self.next_token += 1;
        Ok(token)
    }

    /// Closes the session (see [`Session::close`]).
    pub fn close(&mut self, now: Instant, deadline: Instant) {
        self.session.close(now, deadline)
    }

    /// Forgets the watches registered under `token` (the waiter went away).
    pub fn forget_watches(&mut self, token: Token) {
        self.session.forget_watches(token)
    }

    /// See [`Session::handle_connected`].
    pub fn handle_connected(&mut self, now: Instant) {
        self.session.handle_connected(now)
    }

    /// See [`Session::handle_bytes`].
    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        self.session.handle_bytes(now, bytes)
    }

    /// See [`Session::handle_disconnect`].
    pub fn handle_disconnect(&mut self, now: Instant) {
        self.session.handle_disconnect(now)
    }

    /// See [`Session::handle_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now)
    }

    /// See [`Session::poll_transport`].
    pub fn poll_transport(&mut self) -> Option<Transport> {
        self.session.poll_transport()
    }

    /// See [`Session::poll_transmit`].
    pub fn poll_transmit(&mut self, out: &mut BytesMut) -> bool {
        self.session.poll_transmit(out)
    }

    /// See [`Session::poll_event`].
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.session.poll_event()
    }

    /// See [`Session::poll_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }
}

use alloc::string::String;

// Core types are moved into driver threads and tasks.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Client>();
};
