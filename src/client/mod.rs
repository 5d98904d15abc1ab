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
//! // ... drive the socket; the reply arrives as ClientEvent::Session(SessionEvent::Reply { .. })
//! # let _ = op;
//! ```

mod error;
pub mod ops;
mod routes;

pub use error::Error;
pub use routes::{Routes, Sink, Status, WatchMode};

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::time::Duration;
use hashbrown::HashMap;

use crate::proto::{ErrorCode, Request};
use crate::recipe::lock::Lock;
use crate::recipe::{OpId, Recipe, RecipeEvent, SessionChange};
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

/// A recipe hosted by a [`Client`]. The generation makes a stale handle (to a recipe
/// that finished and whose slot was reused) miss instead of reaching the newcomer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecipeHandle {
    index: u32,
    generation: u32,
}

/// What the client reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// A raw reply, a raw watch event, or a session state change.
    Session(SessionEvent),
    /// An event of a hosted recipe.
    Recipe {
        /// Which recipe.
        handle: RecipeHandle,
        /// What happened.
        event: RecipeEvent,
    },
}

/// The recipes a client can host.
#[derive(Debug)]
enum Hosted {
    Lock(Lock),
}

impl Hosted {
    fn recipe(&mut self) -> &mut dyn Recipe {
        match self {
            Hosted::Lock(l) => l,
        }
    }
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    hosted: Option<Hosted>,
}

/// See the [module docs](self).
#[derive(Debug)]
pub struct Client {
    session: Session,
    next_token: u64,
    slots: Vec<Slot>,
    /// Session tokens of recipe requests: which recipe, which of its ops.
    recipe_tokens: HashMap<Token, (RecipeHandle, OpId)>,
    events: VecDeque<ClientEvent>,
}

fn submit_error_code(e: &SubmitError) -> ErrorCode {
    match e {
        SubmitError::InvalidPath { .. } | SubmitError::TooLarge(_) | SubmitError::NotAllowed(_) => {
            ErrorCode::BadArguments
        }
        SubmitError::TooManyPending | SubmitError::TooManyWatches => ErrorCode::Throttled,
        SubmitError::Ended(end) => end.error_code(),
    }
}

impl Client {
    /// A client whose session starts connecting at once.
    pub fn new(options: Options, now: Instant) -> Client {
        Client {
            session: Session::new(options.session, now),
            next_token: 1,
            slots: Vec::new(),
            recipe_tokens: HashMap::new(),
            events: VecDeque::new(),
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

    fn token(&mut self) -> Token {
        let t = Token(self.next_token);
        self.next_token += 1;
        t
    }

    /// Submits a raw request; its reply and any watch it sets come back under the
    /// returned handle as [`ClientEvent::Session`].
    pub fn submit(&mut self, now: Instant, request: Request) -> Result<Token, SubmitError> {
        let token = Token(self.next_token);
        self.session.submit(now, request, token)?;
        self.next_token += 1;
        Ok(token)
    }

    /// Closes the session (see [`Session::close`]).
    pub fn close(&mut self, now: Instant, deadline: Instant) {
        self.session.close(now, deadline);
        self.pump(now);
    }

    /// Forgets the watches registered under `token` (the waiter went away).
    pub fn forget_watches(&mut self, token: Token) {
        self.session.forget_watches(token)
    }

    // ----- recipes -----

    /// Hosts a lock (it does nothing until acquired; see [`Client::lock_mut`]).
    pub fn add_lock(&mut self, now: Instant, lock: Lock) -> RecipeHandle {
        let handle = self.host_recipe(Hosted::Lock(lock));
        let id = self.session.session_id();
        if let Some(h) = self.hosted(handle) {
            if id != 0 {
                h.recipe()
                    .handle_session(now, SessionChange::Connected { session_id: id });
            }
        }
        handle
    }

    fn host_recipe(&mut self, hosted: Hosted) -> RecipeHandle {
        match self.slots.iter().position(|s| s.hosted.is_none()) {
            Some(i) => {
                let slot = &mut self.slots[i];
                slot.hosted = Some(hosted);
                RecipeHandle {
                    index: i as u32,
                    generation: slot.generation,
                }
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    hosted: Some(hosted),
                });
                RecipeHandle {
                    index: (self.slots.len() - 1) as u32,
                    generation: 0,
                }
            }
        }
    }

    fn hosted(&mut self, h: RecipeHandle) -> Option<&mut Hosted> {
        self.slots
            .get_mut(h.index as usize)
            .filter(|s| s.generation == h.generation)
            .and_then(|s| s.hosted.as_mut())
    }

    /// The lock behind `handle`, if it is still hosted.
    pub fn lock(&self, handle: RecipeHandle) -> Option<&Lock> {
        match self
            .slots
            .get(handle.index as usize)
            .filter(|s| s.generation == handle.generation)?
            .hosted
            .as_ref()?
        {
            Hosted::Lock(l) => Some(l),
        }
    }

    /// Runs a command on a hosted lock (`|lock| lock.acquire(now, None)`), then lets
    /// its requests and events flow. False if the handle is stale.
    pub fn lock_mut(
        &mut self,
        now: Instant,
        handle: RecipeHandle,
        command: impl FnOnce(&mut Lock),
    ) -> bool {
        let found = match self.hosted(handle) {
            Some(Hosted::Lock(l)) => {
                command(l);
                true
            }
            None => false,
        };
        self.pump(now);
        found
    }

    /// Hosted recipes that have not finished.
    pub fn recipes(&self) -> usize {
        self.slots.iter().filter(|s| s.hosted.is_some()).count()
    }

    // ----- input -----

    /// See [`Session::handle_connected`].
    pub fn handle_connected(&mut self, now: Instant) {
        self.session.handle_connected(now);
        self.pump(now);
    }

    /// See [`Session::handle_bytes`].
    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        self.session.handle_bytes(now, bytes);
        self.pump(now);
    }

    /// See [`Session::handle_disconnect`].
    pub fn handle_disconnect(&mut self, now: Instant) {
        self.session.handle_disconnect(now);
        self.pump(now);
    }

    /// See [`Session::handle_timeout`]; also every recipe's timer.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
        for slot in &mut self.slots {
            if let Some(h) = &mut slot.hosted {
                h.recipe().handle_timeout(now);
            }
        }
        self.pump(now);
    }

    // ----- output -----

    /// See [`Session::poll_transport`].
    pub fn poll_transport(&mut self) -> Option<Transport> {
        self.session.poll_transport()
    }

    /// See [`Session::poll_transmit`].
    pub fn poll_transmit(&mut self, out: &mut BytesMut) -> bool {
        self.session.poll_transmit(out)
    }

    /// The next event: raw replies, raw watch events and state changes, and recipe events.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// The earliest of the session's and the recipes' deadlines.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let recipes = self.slots.iter().filter_map(|s| match &s.hosted {
            Some(Hosted::Lock(l)) => l.poll_timeout(),
            None => None,
        });
        self.session.poll_timeout().into_iter().chain(recipes).min()
    }

    /// Routes session events to their owners and recipe requests to the session until
    /// nothing moves.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut moved = false;
            while let Some(event) = self.session.poll_event() {
                moved = true;
                self.route(now, event);
            }
            for i in 0..self.slots.len() {
                let generation = self.slots[i].generation;
                let handle = RecipeHandle {
                    index: i as u32,
                    generation,
                };
                while let Some((op, request)) = self.slots[i]
                    .hosted
                    .as_mut()
                    .and_then(|h| h.recipe().poll_request())
                {
                    moved = true;
                    let token = self.token();
                    match self.session.submit(now, request, token) {
                        Ok(()) => {
                            self.recipe_tokens.insert(token, (handle, op));
                        }
                        Err(e) => {
                            // Refused: the recipe hears it at once, as an error reply.
                            if let Some(h) = self.slots[i].hosted.as_mut() {
                                h.recipe().handle_reply(now, op, Err(submit_error_code(&e)));
                            }
                        }
                    }
                }
                while let Some(event) = self.slots[i]
                    .hosted
                    .as_mut()
                    .and_then(|h| h.recipe().poll_event())
                {
                    moved = true;
                    self.events.push_back(ClientEvent::Recipe { handle, event });
                }
                if self.slots[i]
                    .hosted
                    .as_mut()
                    .is_some_and(|h| h.recipe().is_done())
                {
                    self.slots[i].hosted = None;
                    self.slots[i].generation = self.slots[i].generation.wrapping_add(1);
                    self.recipe_tokens.retain(|_, (h, _)| *h != handle);
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn route(&mut self, now: Instant, event: SessionEvent) {
        match event {
            SessionEvent::Reply(reply) if self.recipe_tokens.contains_key(&reply.token) => {
                let (handle, op) = self.recipe_tokens[&reply.token];
                if reply.watch.is_none() {
                    self.recipe_tokens.remove(&reply.token);
                }
                if let Some(h) = self.hosted(handle) {
                    h.recipe().handle_reply(now, op, reply.result);
                }
            }
            SessionEvent::Watch { token, event } if self.recipe_tokens.contains_key(&token) => {
                // Recipes set one-shot watches only: the first event ends the route.
                let (handle, op) = self.recipe_tokens.remove(&token).expect("checked");
                if let Some(h) = self.hosted(handle) {
                    h.recipe().handle_watch(now, op, &event);
                }
            }
            event if event.is_state_change() => {
                let change = match &event {
                    SessionEvent::Connected { session_id, .. } => Some(SessionChange::Connected {
                        session_id: *session_id,
                    }),
                    SessionEvent::Suspended { .. } => Some(SessionChange::Suspended),
                    SessionEvent::Reconnected { .. } => Some(SessionChange::Reconnected {
                        session_id: self.session.session_id(),
                    }),
                    SessionEvent::Expired { .. } => Some(SessionChange::Expired),
                    SessionEvent::Closed | SessionEvent::AuthFailed => Some(SessionChange::Closed),
                    _ => None,
                };
                if let Some(change) = change {
                    if matches!(change, SessionChange::Expired | SessionChange::Closed) {
                        self.recipe_tokens.clear();
                    }
                    for slot in &mut self.slots {
                        if let Some(h) = &mut slot.hosted {
                            h.recipe().handle_session(now, change);
                        }
                    }
                }
                self.events.push_back(ClientEvent::Session(event));
            }
            event => self.events.push_back(ClientEvent::Session(event)),
        }
    }
}

use alloc::string::String;

// Core types are moved into driver threads and tasks.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Client>();
};
