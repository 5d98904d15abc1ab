//! The one delivery path every adapter uses: which waiter gets which reply, which
//! watcher gets which watch event, and what the session state is. Adapters supply the
//! channel types through [`Sink`].

use hashbrown::HashMap;

use super::{Client, ClientEvent, Error, RecipeHandle};
use crate::proto::{EventType, Response};
use crate::recipe::RecipeEvent;
use crate::session::{SessionEvent, Token, WatchEvent};
use core::time::Duration;

/// Something a value can be handed to: a oneshot sender, a channel, a callback.
pub trait Sink<T> {
    /// Hands over `value`; false if the receiving side is gone.
    fn send(&mut self, value: T) -> bool;
}

/// Whether a watcher wants one event or every event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchMode {
    /// A standard watch: the first event ends it.
    Once,
    /// A persistent (recursive) watch: events until removed or the receiver drops.
    Persistent,
}

/// Session state as applications see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// No session yet.
    Connecting,
    /// A live session on a live connection.
    Connected {
        /// Session id.
        session_id: i64,
        /// Negotiated timeout.
        timeout: Duration,
        /// The server is read-only.
        read_only: bool,
    },
    /// Connection lost; the session may be alive; reconnecting.
    Suspended,
    /// The session expired. Terminal.
    Expired,
    /// Closed. Terminal.
    Closed,
    /// Authentication failed. Terminal.
    AuthFailed,
}

impl Status {
    /// Expired, closed or auth-failed: nothing more will happen.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Expired | Status::Closed | Status::AuthFailed)
    }

    /// The error a call fails with in this status, when the session is gone.
    pub fn error(self) -> Error {
        match self {
            Status::Expired => Error::SessionExpired,
            Status::AuthFailed => Error::AuthFailed,
            _ => Error::Closed,
        }
    }
}

/// Waiters and watchers by token, recipe listeners by handle.
#[derive(Debug)]
pub struct Routes<R, W, L> {
    replies: HashMap<Token, R>,
    watches: HashMap<Token, (W, WatchMode)>,
    recipes: HashMap<RecipeHandle, L>,
    status: Status,
}

impl<R, W, L> Default for Routes<R, W, L> {
    fn default() -> Self {
        Routes {
            replies: HashMap::new(),
            watches: HashMap::new(),
            recipes: HashMap::new(),
            status: Status::Connecting,
        }
    }
}

impl<R: Sink<Result<Response, Error>>, W: Sink<WatchEvent>, L: Sink<RecipeEvent>> Routes<R, W, L> {
    /// Routes the events of a hosted recipe to `listener`.
    pub fn insert_recipe(&mut self, handle: RecipeHandle, listener: L) {
        self.recipes.insert(handle, listener);
    }

    /// Stops routing a recipe's events (its listener went away).
    pub fn remove_recipe(&mut self, handle: RecipeHandle) {
        self.recipes.remove(&handle);
    }

    /// Routes the reply of `token` to `reply` and its watch events, if any, to `watch`.
    pub fn insert(&mut self, token: Token, reply: R, watch: Option<(W, WatchMode)>) {
        self.replies.insert(token, reply);
        if let Some(w) = watch {
            self.watches.insert(token, w);
        }
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Waiters still expecting a reply.
    pub fn waiting(&self) -> usize {
        self.replies.len()
    }

    /// Watchers still registered.
    pub fn watching(&self) -> usize {
        self.watches.len()
    }

    /// Recipe listeners still registered.
    pub fn listening(&self) -> usize {
        self.recipes.len()
    }

    /// Delivers one event; returns the new status when it changed.
    pub fn deliver(&mut self, client: &mut Client, event: ClientEvent) -> Option<Status> {
        let event = match event {
            ClientEvent::Session(e) => e,
            ClientEvent::Recipe { handle, event } => {
                let last = event.is_final();
                if let Some(listener) = self.recipes.get_mut(&handle) {
                    // A listener goes with the recipe's last event (or with its receiver).
                    if !listener.send(event) || last {
                        self.recipes.remove(&handle);
                    }
                }
                return None;
            }
        };
        let status = match event {
            SessionEvent::Reply(reply) => {
                if let Some(mut waiter) = self.replies.remove(&reply.token) {
                    waiter.send(reply.result.map_err(Error::from));
                }
                if reply.watch.is_none() {
                    // No watch was set: its receiver learns that by being dropped.
                    self.watches.remove(&reply.token);
                }
                return None;
            }
            SessionEvent::Watch { token, event } => {
                if let Some((watcher, mode)) = self.watches.get_mut(&token) {
                    // A token holds one registration; a *Removed event is its last.
                    let removed = matches!(
                        event.event_type,
                        EventType::DataWatchRemoved
                            | EventType::ChildWatchRemoved
                            | EventType::PersistentWatchRemoved
                    );
                    let alive = watcher.send(event);
                    if *mode == WatchMode::Once || !alive || removed {
                        self.watches.remove(&token);
                        client.forget_watches(token);
                    }
                }
                return None;
            }
            SessionEvent::Connected {
                session_id,
                timeout,
                read_only,
            } => Status::Connected {
                session_id,
                timeout,
                read_only,
            },
            SessionEvent::Reconnected { read_only } => {
                let s = client.session();
                Status::Connected {
                    session_id: s.session_id(),
                    timeout: s.negotiated_timeout().unwrap_or_default(),
                    read_only,
                }
            }
            SessionEvent::Suspended { .. } => Status::Suspended,
            SessionEvent::Expired { .. } => Status::Expired,
            SessionEvent::Closed => Status::Closed,
            SessionEvent::AuthFailed => Status::AuthFailed,
        };
        self.status = status;
        if status.is_terminal() {
            // Every request was already answered by the session; dropping the watchers
            // tells their receivers nothing more will come.
            self.replies.clear();
            self.watches.clear();
            self.recipes.clear();
        }
        Some(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Options;
    use crate::recipe::lock::{Lock, LockConfig, LockEvent, LockKind};
    use crate::time::Instant;
    use alloc::vec::Vec;

    struct Collect(Vec<RecipeEvent>);
    impl Sink<RecipeEvent> for Collect {
        fn send(&mut self, value: RecipeEvent) -> bool {
            self.0.push(value);
            true
        }
    }
    struct Never;
    impl Sink<Result<Response, Error>> for Never {
        fn send(&mut self, _: Result<Response, Error>) -> bool {
            true
        }
    }
    impl Sink<WatchEvent> for Never {
        fn send(&mut self, _: WatchEvent) -> bool {
            true
        }
    }

    #[test]
    fn a_recipe_listener_goes_with_its_last_event() {
        let mut client = Client::new(Options::new("h:1").unwrap(), Instant::ZERO);
        let handle = client.add_lock(
            Instant::ZERO,
            Lock::new(LockConfig::new("/l", LockKind::Exclusive, "id")),
        );
        let mut routes: Routes<Never, Never, Collect> = Routes::default();
        routes.insert_recipe(handle, Collect(Vec::new()));
        let suspended = ClientEvent::Recipe {
            handle,
            event: RecipeEvent::Lock(LockEvent::Suspended),
        };
        routes.deliver(&mut client, suspended);
        assert_eq!(routes.listening(), 1, "not final");
        let released = ClientEvent::Recipe {
            handle,
            event: RecipeEvent::Lock(LockEvent::Released),
        };
        routes.deliver(&mut client, released);
        assert_eq!(routes.listening(), 0, "dropped after the final event");
    }
}
