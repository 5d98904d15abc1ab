//! The one delivery path every adapter uses: which waiter gets which reply, which
//! watcher gets which watch event, which listener gets a hosted recipe's events, and
//! what the session state is (with every transition, for status streams). Adapters
//! supply the channel types through [`Sink`].

use alloc::vec::Vec;

use super::{Client, ClientEvent, Error, RecipeId};
use crate::hash::HashMap;
use crate::proto::{EventType, Response};
use crate::recipe::AnyEvent;
use crate::session::{DisconnectReason, SessionEvent, Token, WatchEvent};
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
    /// No session yet (or a new one after an expiry is being established).
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
    /// The session expired: its ephemeral nodes, watches and recipes are gone. With
    /// `renewing`, a new session is on its way (`Connected` with a new id follows);
    /// otherwise terminal.
    Expired {
        /// A new session is being established.
        renewing: bool,
    },
    /// Closed. Terminal.
    Closed,
    /// Authentication failed. Terminal.
    AuthFailed,
}

impl Status {
    /// Nothing more will happen (closed, auth failed, expired without renewal).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Expired { renewing: false } | Status::Closed | Status::AuthFailed
        )
    }

    /// Connected now.
    pub fn is_connected(self) -> bool {
        matches!(self, Status::Connected { .. })
    }

    /// The error a call fails with in this status, when the session is gone.
    pub fn error(self) -> Error {
        match self {
            Status::Expired { .. } => Error::SessionExpired,
            Status::AuthFailed => Error::AuthFailed,
            _ => Error::Closed,
        }
    }
}

/// Waiters and watchers by token, recipe listeners by id, status subscribers.
#[derive(Debug)]
pub struct Routes<R, W, L, S> {
    replies: HashMap<Token, R>,
    watches: HashMap<Token, (W, WatchMode)>,
    recipes: HashMap<RecipeId, L>,
    statuses: Vec<S>,
    status: Status,
    unreachable: Option<DisconnectReason>,
}

impl<R, W, L, S> Default for Routes<R, W, L, S> {
    fn default() -> Self {
        Routes {
            replies: HashMap::default(),
            watches: HashMap::default(),
            recipes: HashMap::default(),
            statuses: Vec::new(),
            status: Status::Connecting,
            unreachable: None,
        }
    }
}

impl<R, W, L, S> Routes<R, W, L, S>
where
    R: Sink<Result<Response, Error>>,
    W: Sink<WatchEvent>,
    L: Sink<AnyEvent>,
    S: Sink<Status>,
{
    /// Routes the events of a hosted recipe to `listener` until it is done.
    pub fn insert_recipe(&mut self, id: RecipeId, listener: L) {
        self.recipes.insert(id, listener);
    }

    /// The listener of a hosted recipe (to add subscribers to it, say).
    pub fn listener_mut(&mut self, id: RecipeId) -> Option<&mut L> {
        self.recipes.get_mut(&id)
    }

    /// Routes the reply of `token` to `reply` and its watch events, if any, to `watch`.
    pub fn insert(&mut self, token: Token, reply: R, watch: Option<(W, WatchMode)>) {
        self.replies.insert(token, reply);
        if let Some(w) = watch {
            self.watches.insert(token, w);
        }
    }

    /// Adds a status subscriber: it gets the current status now, then every change,
    /// none dropped.
    pub fn subscribe_status(&mut self, mut subscriber: S) {
        if subscriber.send(self.status) {
            self.statuses.push(subscriber);
        }
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Why no server could be reached, if every host failed since the last session
    /// (cleared by the next session).
    pub fn unreachable(&self) -> Option<&DisconnectReason> {
        self.unreachable.as_ref()
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

    /// Delivers one event; returns the new status when it changed (or when every host
    /// was found unreachable: see [`unreachable`](Self::unreachable)).
    pub fn deliver(&mut self, client: &mut Client, event: ClientEvent) -> Option<Status> {
        let event = match event {
            ClientEvent::Session(e) => e,
            ClientEvent::Recipe { id, event } => {
                if let Some(listener) = self.recipes.get_mut(&id) {
                    if !listener.send(event) {
                        self.recipes.remove(&id);
                    }
                }
                return None;
            }
            ClientEvent::RecipeDone { id } => {
                // Dropping the listener tells its receiver nothing more will come.
                self.recipes.remove(&id);
                return None;
            }
        };
        let status = match event {
            SessionEvent::Reply(reply) => {
                if let Some(mut waiter) = self.replies.remove(&reply.token) {
                    waiter.send(reply.result);
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
            SessionEvent::Unreachable { reason } => {
                self.unreachable = Some(reason);
                return Some(self.status);
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
            SessionEvent::Expired { renewing, .. } => Status::Expired { renewing },
            SessionEvent::Closed => Status::Closed,
            SessionEvent::AuthFailed => Status::AuthFailed,
        };
        if status.is_connected() {
            self.unreachable = None;
        }
        if matches!(status, Status::Expired { .. }) || status.is_terminal() {
            // Every request was already answered by the session and every watch is
            // gone: dropping the watchers tells their receivers nothing more will come.
            // Recipe listeners stay until each recipe's last event and `RecipeDone`.
            self.replies.clear();
            self.watches.clear();
        }
        self.status = status;
        self.statuses.retain_mut(|s| s.send(status));
        Some(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Options;
    use crate::recipe::path::DeleteAll;
    use crate::recipe::Recipe;
    use crate::time::Instant;

    struct Collect(Vec<AnyEvent>);
    impl Sink<AnyEvent> for Collect {
        fn send(&mut self, value: AnyEvent) -> bool {
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
    impl Sink<Status> for Never {
        fn send(&mut self, _: Status) -> bool {
            true
        }
    }

    #[test]
    fn a_recipe_listener_goes_with_recipe_done_after_its_last_event() {
        let mut client = Client::new(Options::new("h:1").unwrap(), Instant::ZERO);
        let handle = client.add(Instant::ZERO, DeleteAll::new("/x"));
        let mut routes: Routes<Never, Never, Collect, Never> = Routes::default();
        routes.insert_recipe(handle.id(), Collect(Vec::new()));
        // Abandoned before it started: done at once, no event.
        client.abandon(Instant::ZERO, handle.id());
        let mut seen = 0;
        while let Some(e) = client.poll_event() {
            seen += 1;
            routes.deliver(&mut client, e);
        }
        assert_eq!(seen, 1, "RecipeDone");
        assert_eq!(routes.listening(), 0, "dropped after RecipeDone");
        assert_eq!(client.recipes(), 0);
        let _ = Recipe::is_done(&DeleteAll::new("/y"));
    }
}
