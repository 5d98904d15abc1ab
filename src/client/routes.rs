//! The one path every adapter uses between its handles and the core, and its one
//! owner: the commands a handle sends ([`Command`]: submit, host a recipe, run a typed
//! [`RecipeCommand`] on it, abandon it, subscribe to status) are carried out here on
//! the [`Client`], and what comes back is delivered here — which waiter gets which
//! reply, which watcher gets which watch event, which subscribers get a hosted recipe's
//! events, and what the session status is (every transition, for status streams).
//! Adapters supply only the channel types, through [`Sink`]; they decide nothing.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::hosting::{Client, ClientEvent, RecipeHandle, RecipeId};
use super::status::Status;
use crate::error::{Error, HostFailures};
use crate::hash::HashMap;
use crate::proto::{EventType, Request, Response};
use crate::recipe::{AnyEvent, AnyRecipe, Recipe};
use crate::session::{SessionEvent, Token, WatchEvent};
use crate::time::Instant;

/// Something a value can be handed to: a oneshot sender, a channel, a callback.
pub trait Sink<T> {
    /// Hands over `value`; false if the receiving side is gone.
    fn send(&mut self, value: T) -> bool;
}

/// Whether a watcher wants one event or every event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchMode {
    /// A standard watch: the first event ends it.
    Once,
    /// A persistent (recursive) watch: events until removed or the receiver drops.
    Persistent,
}

/// A command for a hosted recipe of type `R`, made on the handle's side from a typed
/// closure ([`new`](Self::new)) and run in the driver, on the recipe the [`Command::Run`]
/// names, through [`Client::command`] — the same typed call a host driving the core
/// makes. It misses (runs nothing) if the recipe is gone.
pub struct RecipeCommand(Box<RunOn>);

/// What a [`RecipeCommand`] does in the driver: run on the recipe `id` of the client.
type RunOn = dyn FnOnce(&mut Client, RecipeId, Instant) + Send;

impl RecipeCommand {
    /// `command` to run on a hosted `R` (with the driver's `now`).
    pub fn new<R: Recipe>(command: impl FnOnce(&mut R, Instant) + Send + 'static) -> Self {
        RecipeCommand(Box::new(move |client, id, now| {
            client.command(now, RecipeHandle::<R>::from_id(id), command);
        }))
    }

    fn run(self, client: &mut Client, id: RecipeId, now: Instant) {
        (self.0)(client, id, now)
    }
}

/// What a handle asks of its driver, the same in every adapter (the adapter picks the
/// channel types). Keys name hosted recipes; the handle side allocates them, so hosting
/// needs no round trip to the driver.
pub enum Command<R, W, L, S> {
    /// A raw request: its reply goes to `reply`, its watch events (if it sets one) to
    /// `watch`.
    Submit {
        /// The request.
        request: Request,
        /// Where its reply goes (a refusal included).
        reply: R,
        /// Where its watch events go, and whether one or all.
        watch: Option<(W, WatchMode)>,
    },
    /// Host a recipe under `key`; its events go to `listener`.
    Host {
        /// The handle side's name for it.
        key: u64,
        /// The recipe.
        recipe: Box<dyn AnyRecipe>,
        /// Its first subscriber.
        listener: L,
    },
    /// Run `command` on the recipe under `key`, after adding `subscribe` to its
    /// subscribers (so nothing the command causes is missed). Dropped unrun if the
    /// recipe is gone: the handle side learns it from its dropped reply channel.
    Run {
        /// Which recipe.
        key: u64,
        /// What to run.
        command: RecipeCommand,
        /// A new subscriber, if any.
        subscribe: Option<L>,
    },
    /// The owner of the recipe under `key` went away: it cleans up and ends.
    Abandon {
        /// Which recipe.
        key: u64,
    },
    /// Every status change from now on goes to this subscriber.
    Statuses(S),
}

/// Waiters and watchers by token, recipe subscribers by id, status subscribers.
#[derive(Debug)]
pub struct Routes<R, W, L, S> {
    replies: HashMap<Token, R>,
    watches: HashMap<Token, (W, WatchMode)>,
    /// Each hosted recipe's key and subscribers.
    recipes: HashMap<RecipeId, (u64, Vec<L>)>,
    keys: HashMap<u64, RecipeId>,
    statuses: Vec<S>,
    status: Status,
    unreachable: Option<HostFailures>,
}

impl<R, W, L, S> Default for Routes<R, W, L, S> {
    fn default() -> Self {
        Routes {
            replies: HashMap::default(),
            watches: HashMap::default(),
            recipes: HashMap::default(),
            keys: HashMap::default(),
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
    /// Carries out a handle's command.
    pub fn handle(&mut self, client: &mut Client, now: Instant, command: Command<R, W, L, S>) {
        match command {
            Command::Submit {
                request,
                mut reply,
                watch,
            } => match client.submit(now, request) {
                Ok(token) => self.insert(token, reply, watch),
                Err(e) => {
                    reply.send(Err(e.into()));
                }
            },
            Command::Host {
                key,
                recipe,
                listener,
            } => {
                let id = client.add_boxed(now, recipe);
                // Events it reported while being hosted wait in the client's queue.
                self.recipes.insert(id, (key, vec![listener]));
                self.keys.insert(key, id);
            }
            Command::Run {
                key,
                command,
                subscribe,
            } => {
                if let Some(&id) = self.keys.get(&key) {
                    if let (Some(s), Some((_, subs))) = (subscribe, self.recipes.get_mut(&id)) {
                        subs.push(s);
                    }
                    command.run(client, id, now);
                }
            }
            Command::Abandon { key } => {
                if let Some(&id) = self.keys.get(&key) {
                    client.abandon(now, id);
                }
            }
            Command::Statuses(s) => self.subscribe_status(s),
        }
    }

    /// Routes the reply of `token` to `reply` and its watch events, if any, to `watch`.
    fn insert(&mut self, token: Token, reply: R, watch: Option<(W, WatchMode)>) {
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
    pub fn unreachable(&self) -> Option<&HostFailures> {
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
        self.deliver_and_publish(client, event, |_, _| {})
    }

    /// [`deliver`](Self::deliver) for a driver that also shows the state somewhere its
    /// handles read it (a `status()`): `publish` is called when the status changed (or
    /// every host was found unreachable), with the new state in place and before any
    /// status subscriber hears of it. So a handle that heard a status from a stream
    /// never reads an older one afterwards.
    pub fn deliver_and_publish(
        &mut self,
        client: &mut Client,
        event: ClientEvent,
        publish: impl FnOnce(&Self, &Client),
    ) -> Option<Status> {
        match event {
            ClientEvent::Session(event) => self.deliver_session(client, event, publish),
            ClientEvent::Recipe { id, event } => {
                if let Some((_, subscribers)) = self.recipes.get_mut(&id) {
                    // Each subscriber gets its own copy; gone ones are dropped. The
                    // entry itself lives until the recipe is done.
                    subscribers.retain_mut(|s| s.send(event.clone()));
                }
                None
            }
            ClientEvent::RecipeDone { id } => {
                // Dropping the subscribers tells their receivers nothing more will come.
                if let Some((key, _)) = self.recipes.remove(&id) {
                    self.keys.remove(&key);
                }
                None
            }
        }
    }

    fn deliver_session(
        &mut self,
        client: &mut Client,
        event: SessionEvent,
        publish: impl FnOnce(&Self, &Client),
    ) -> Option<Status> {
        match event {
            SessionEvent::Reply(reply) => {
                self.reply(reply.token, reply.result, reply.watch.is_some());
                None
            }
            SessionEvent::SharedReply(reply) => {
                // Only hosted recipes' listings are shared; a raw waiter among its
                // tokens (none today) gets its copy all the same.
                for token in reply.tokens {
                    self.reply(token, reply.result.clone(), reply.watch.is_some());
                }
                None
            }
            SessionEvent::Watch { token, event } => {
                self.watch_event(client, token, event);
                None
            }
            SessionEvent::Unreachable { hosts, .. } => {
                self.unreachable = Some(hosts);
                publish(self, client);
                Some(self.status)
            }
            event => {
                let status = Status::after(&event, client.session())?;
                self.set_status(status, client, publish);
                Some(status)
            }
        }
    }

    /// The reply of `token` goes to its waiter; without a watch, its watcher's receiver
    /// learns that none was set by being dropped.
    fn reply(&mut self, token: Token, result: Result<Response, Error>, watching: bool) {
        if let Some(mut waiter) = self.replies.remove(&token) {
            waiter.send(result);
        }
        if !watching {
            self.watches.remove(&token);
        }
    }

    fn watch_event(&mut self, client: &mut Client, token: Token, event: WatchEvent) {
        let Some((watcher, mode)) = self.watches.get_mut(&token) else {
            return;
        };
        // A token holds one registration (a SetWatches2's, several: its last event
        // ends it); a *Removed event is its last.
        let removed = matches!(
            event.event_type,
            EventType::DataWatchRemoved
                | EventType::ChildWatchRemoved
                | EventType::PersistentWatchRemoved
        );
        let alive = watcher.send(event);
        let spent = *mode == WatchMode::Once && !client.is_watching(token);
        if spent || !alive || removed {
            self.watches.remove(&token);
            client.forget_watches(token);
        }
    }

    /// The new status: published (`publish`) before the status subscribers hear it.
    fn set_status(
        &mut self,
        status: Status,
        client: &Client,
        publish: impl FnOnce(&Self, &Client),
    ) {
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
        publish(self, client);
        self.statuses.retain_mut(|s| s.send(status));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Options;
    use crate::recipe::path::DeleteAll;
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
        let mut routes: Routes<Never, Never, Collect, Never> = Routes::default();
        let t = Instant::ZERO;
        let host = Command::Host {
            key: 7,
            recipe: alloc::boxed::Box::new(DeleteAll::new("/x")),
            listener: Collect(Vec::new()),
        };
        routes.handle(&mut client, t, host);
        assert_eq!(routes.listening(), 1);
        // Abandoned before it started: done at once, no event.
        routes.handle(&mut client, t, Command::Abandon { key: 7 });
        let mut seen = 0;
        while let Some(e) = client.poll_event() {
            seen += 1;
            routes.deliver(&mut client, e);
        }
        assert_eq!(seen, 1, "RecipeDone");
        assert_eq!(routes.listening(), 0, "dropped after RecipeDone");
        assert_eq!(client.recipes(), 0);
        assert!(routes.keys.is_empty(), "the key went with it");
    }
}
