//! The client: a [`Session`] and the recipes it hosts, in slots. Replies and watch
//! events go to the recipe whose request they answer (by token), session changes to
//! every recipe; a recipe's requests go to the session (as a requester of its own, so
//! its listings may be shared and its entry may yield), its events come out as
//! [`ClientEvent::Recipe`]. Only recipes that got an input are drained, and their
//! deadlines are kept in order, so the work per event does not grow with the number
//! of recipes hosted. See the [module docs](super) for how to drive it.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::marker::PhantomData;

use super::options::Options;
use crate::hash::{shed_map, HashMap};
use crate::proto::{EventType, Request};
use crate::recipe::{AnyEvent, AnyRecipe, OpId, Recipe, SessionChange, SharedListing};
use crate::session::{
    Counters, Session, SessionEvent, SubmitError, Token, Transport, TransportError, WatchKind,
};
use crate::time::Instant;
use alloc::collections::BTreeSet;
use bytes::BytesMut;
use smallvec::SmallVec;

/// Which hosted recipe, without its type. The generation makes a stale id (to a recipe
/// that finished and whose slot was reused) miss instead of reaching the newcomer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecipeId {
    index: u32,
    generation: u32,
}

/// A hosted recipe of type `R`, as [`Client::add`] returns it.
pub struct RecipeHandle<R> {
    id: RecipeId,
    _recipe: PhantomData<fn() -> R>,
}

impl<R> RecipeHandle<R> {
    /// The untyped id (what [`ClientEvent::Recipe`] carries).
    pub fn id(&self) -> RecipeId {
        self.id
    }

    /// A typed handle for an id, for hosts that keep ids (the caller vouches for `R`;
    /// a wrong type makes commands miss, nothing worse).
    pub fn from_id(id: RecipeId) -> Self {
        RecipeHandle {
            id,
            _recipe: PhantomData,
        }
    }
}

impl<R> Clone for RecipeHandle<R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for RecipeHandle<R> {}
impl<R> core::fmt::Debug for RecipeHandle<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.id.fmt(f)
    }
}
impl<R> PartialEq for RecipeHandle<R> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl<R> Eq for RecipeHandle<R> {}

/// What the client reports.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ClientEvent {
    /// A raw reply, a raw watch event, or a session state change.
    Session(SessionEvent),
    /// An event of a hosted recipe (its type is the recipe's `Event`).
    Recipe {
        /// Which recipe.
        id: RecipeId,
        /// What happened.
        event: AnyEvent,
    },
    /// A hosted recipe finished after its last event and was dropped; its watch
    /// registrations are forgotten.
    RecipeDone {
        /// Which recipe.
        id: RecipeId,
    },
}

struct Slot {
    generation: u32,
    recipe: Option<Box<dyn AnyRecipe>>,
    /// Session tokens of its requests still routed to it (replies or watches): a few
    /// at a time (unique: each request gets a new one), kept inline.
    tokens: SmallVec<[Token; 2]>,
    /// A request of it was refused in this pump: its requests wait for the next input.
    refused: bool,
    /// Its deadline as entered in [`Client::timers`].
    timer: Option<Instant>,
}

/// See the [module docs](crate::client).
pub struct Client {
    session: Session,
    next_token: u64,
    slots: Vec<Slot>,
    /// Session tokens of recipe requests: which recipe, which of its ops.
    recipe_tokens: HashMap<Token, (RecipeId, OpId)>,
    /// Recipe tokens whose registration is persistent (addWatch): their route stays
    /// after a notification.
    persistent_tokens: BTreeSet<Token>,
    events: VecDeque<ClientEvent>,
    /// Slots that got an input (reply, watch, command, timeout, state change) since
    /// they were last drained; only these are drained, so the work per event does not
    /// grow with the number of hosted recipes. Ordered: slots drain by index, as if
    /// every slot were visited.
    dirty: BTreeSet<u32>,
    /// Slots refused in this pump: drained again at the next input.
    deferred: Vec<u32>,
    /// Every hosted recipe's deadline, earliest first.
    timers: BTreeSet<(Instant, u32)>,
    /// Empty slots to reuse.
    free: BTreeSet<u32>,
    /// Hosted recipes.
    live: usize,
    /// [`close`](Client::close) was called: hosted recipes were told `Closed`.
    closing: bool,
}

impl core::fmt::Debug for Client {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Client")
            .field("session", &self.session)
            .field("recipes", &self.recipes())
            .finish()
    }
}

impl Client {
    /// A client whose session starts connecting at once.
    pub fn new(options: Options, now: Instant) -> Client {
        Client {
            session: Session::new(options.session, now),
            next_token: 1,
            slots: Vec::new(),
            recipe_tokens: HashMap::default(),
            persistent_tokens: BTreeSet::new(),
            events: VecDeque::new(),
            dirty: BTreeSet::new(),
            deferred: Vec::new(),
            timers: BTreeSet::new(),
            free: BTreeSet::new(),
            live: 0,
            closing: false,
        }
    }

    /// What the session has sent and received so far (requests, bytes).
    pub fn counters(&self) -> Counters {
        self.session.counters()
    }

    /// The session (for getters).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Has the session ended for good (closed, auth failed, or expired without
    /// renewal)? Nothing more will happen; drivers stop.
    pub fn is_ended(&self) -> bool {
        matches!(self.session.state(), crate::session::SessionState::Ended(_))
    }

    /// `host:port` of host `i` of the connection string.
    pub fn host(&self, i: usize) -> &str {
        self.session.host(i)
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

    /// Closes the session (see [`Session::close`]). Every hosted recipe hears
    /// [`SessionChange::Closed`] first and reports its final event (a holder or a
    /// leader `Lost`, a waiting call its error) before closeSession is written: nothing
    /// is reported held once its client began closing, while the server, which sees
    /// closeSession later, may already hand it to somebody else. The replies of requests
    /// already sent still come back, unrouted; a recipe hosted after this hears `Closed`
    /// at once.
    pub fn close(&mut self, now: Instant, deadline: Instant) {
        if !self.closing {
            self.closing = true;
            self.end_recipes(now, SessionChange::Closed);
            self.pump(now);
        }
        self.session.close(now, deadline);
        self.pump(now);
    }

    /// Tells every hosted recipe that the session ended (`Expired` or `Closed`): none
    /// of its requests will be answered to it and none of its watches will fire.
    fn end_recipes(&mut self, now: Instant, change: SessionChange) {
        for (token, _) in self.recipe_tokens.drain() {
            self.session.forget_watches(token);
        }
        shed_map(&mut self.recipe_tokens);
        self.persistent_tokens.clear();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            slot.tokens.clear();
            if let Some(r) = &mut slot.recipe {
                r.handle_session(now, change);
                self.dirty.insert(i as u32);
            }
        }
    }

    /// Does `token` still have a watch registered? See [`Session::is_watching`].
    pub fn is_watching(&self, token: Token) -> bool {
        self.session.is_watching(token)
    }

    /// Forgets the watches registered under `token` (the waiter went away).
    pub fn forget_watches(&mut self, token: Token) {
        self.session.forget_watches(token)
    }

    // ----- recipes -----

    /// Hosts a recipe. It hears the current session state at once (`Connected`, and
    /// `Suspended` if the connection is down), then every change.
    pub fn add<R: Recipe>(&mut self, now: Instant, recipe: R) -> RecipeHandle<R> {
        RecipeHandle::from_id(self.add_boxed(now, Box::new(recipe)))
    }

    /// [`add`](Self::add) for a boxed recipe (drivers move recipes between threads
    /// this way).
    pub fn add_boxed(&mut self, now: Instant, mut recipe: Box<dyn AnyRecipe>) -> RecipeId {
        let id = self.session.session_id();
        if id != 0 {
            recipe.handle_session(now, SessionChange::Connected { session_id: id });
            if self.session.state() == crate::session::SessionState::Suspended {
                recipe.handle_session(now, SessionChange::Suspended);
            }
        }
        if self.closing {
            recipe.handle_session(now, SessionChange::Closed);
        }
        // Reuse the lowest free slot (as a scan from the front would).
        let slot = match self.free.pop_first() {
            Some(i) => i as usize,
            None => {
                // Grow by a quarter, not by doubling: with thousands of hosted recipes
                // the unused tail stays small (amortized O(1) all the same).
                if self.slots.len() == self.slots.capacity() {
                    self.slots.reserve_exact(self.slots.len() / 4 + 8);
                }
                self.slots.push(Slot {
                    generation: 0,
                    recipe: None,
                    tokens: SmallVec::new(),
                    refused: false,
                    timer: None,
                });
                self.slots.len() - 1
            }
        };
        self.slots[slot].recipe = Some(recipe);
        self.live += 1;
        let id = RecipeId {
            index: slot as u32,
            generation: self.slots[slot].generation,
        };
        self.dirty.insert(slot as u32);
        self.pump(now);
        id
    }

    /// The recipe in slot `i` got an input: drain it in this pump.
    fn touch(&mut self, id: RecipeId) {
        if self
            .slots
            .get(id.index as usize)
            .is_some_and(|s| s.generation == id.generation && s.recipe.is_some())
        {
            self.dirty.insert(id.index);
        }
    }

    fn slot(&mut self, id: RecipeId) -> Option<&mut Box<dyn AnyRecipe>> {
        self.slots
            .get_mut(id.index as usize)
            .filter(|s| s.generation == id.generation)
            .and_then(|s| s.recipe.as_mut())
    }

    /// The recipe behind `handle`, if it is still hosted.
    pub fn recipe<R: Recipe>(&self, handle: RecipeHandle<R>) -> Option<&R> {
        self.slots
            .get(handle.id.index as usize)
            .filter(|s| s.generation == handle.id.generation)?
            .recipe
            .as_ref()?
            .as_any()
            .downcast_ref::<R>()
    }

    /// Runs a command on a hosted recipe (`|lock, now| lock.acquire(now, None)`), then
    /// lets its requests and events flow. `None` if the recipe is no longer hosted.
    pub fn command<R: Recipe, T>(
        &mut self,
        now: Instant,
        handle: RecipeHandle<R>,
        command: impl FnOnce(&mut R, Instant) -> T,
    ) -> Option<T> {
        let out = self
            .slot(handle.id)
            .and_then(|r| r.as_any_mut().downcast_mut::<R>())
            .map(|r| command(r, now));
        self.touch(handle.id);
        self.pump(now);
        out
    }

    /// The recipe's owner went away: it cleans up and ends (see
    /// [`Machine::handle_abandon`](crate::recipe::Machine::handle_abandon)).
    pub fn abandon(&mut self, now: Instant, id: RecipeId) {
        if let Some(r) = self.slot(id) {
            r.handle_abandon(now);
        }
        self.touch(id);
        self.pump(now);
    }

    /// Hosted recipes that have not finished.
    pub fn recipes(&self) -> usize {
        self.live
    }

    // ----- input -----

    /// See [`Session::handle_random`]: random bytes for the next connection's SASL
    /// exchange; a driver calls it before each `handle_connected`.
    pub fn handle_random(&mut self, random: [u8; 32]) {
        self.session.handle_random(random);
    }

    /// See [`Session::handle_connected`].
    pub fn handle_connected(&mut self, now: Instant) {
        self.session.handle_connected(now);
        self.pump(now);
    }

    /// See [`Session::handle_probe`]: what a [`Transport::Probe`] of `host` read.
    pub fn handle_probe(&mut self, now: Instant, host: usize, answer: &[u8]) {
        self.session.handle_probe(now, host, answer);
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

    /// See [`Session::handle_transport_error`].
    pub fn handle_transport_error(&mut self, now: Instant, error: TransportError) {
        self.session.handle_transport_error(now, error);
        self.pump(now);
    }

    /// See [`Session::handle_timeout`]; also the timers of the recipes that are due
    /// (found in an ordered set, not by visiting every recipe).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
        while let Some(&(at, i)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(slot) = self.slots.get_mut(i as usize) else {
                continue;
            };
            slot.timer = None;
            if let Some(r) = &mut slot.recipe {
                if r.poll_timeout().is_some_and(|t| t <= now) {
                    r.handle_timeout(now);
                }
            }
            self.dirty.insert(i);
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

    /// The next event: raw replies, raw watch events and state changes, and recipe
    /// events.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// The earliest of the session's and the recipes' deadlines.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let recipes = self.timers.first().map(|(at, _)| *at);
        self.session.poll_timeout().into_iter().chain(recipes).min()
    }

    /// Routes session events to their owners and recipe requests to the session until
    /// nothing moves. Only recipes that got an input are drained (a recipe's outputs
    /// change only on an input), each in index order.
    fn pump(&mut self, now: Instant) {
        for i in core::mem::take(&mut self.deferred) {
            if let Some(slot) = self.slots.get_mut(i as usize) {
                slot.refused = false;
                self.dirty.insert(i);
            }
        }
        loop {
            while let Some(event) = self.session.poll_event() {
                self.route(now, event);
            }
            if self.dirty.is_empty() {
                break;
            }
            for i in core::mem::take(&mut self.dirty) {
                if self.drain_slot(now, i as usize) {
                    // It may have more to say after what it sent is answered or
                    // refused: visit it again next round (as a full scan would).
                    self.dirty.insert(i);
                }
                self.update_timer(i as usize);
            }
        }
    }

    /// Re-enters slot `i`'s deadline in the timer set.
    fn update_timer(&mut self, i: usize) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        let next = slot.recipe.as_ref().and_then(|r| r.poll_timeout());
        if next != slot.timer {
            if let Some(old) = slot.timer {
                self.timers.remove(&(old, i as u32));
            }
            if let Some(new) = next {
                self.timers.insert((new, i as u32));
            }
            slot.timer = next;
        }
    }

    /// Moves one recipe's requests to the session and its events out; drops it when it
    /// is done. True if anything moved.
    fn drain_slot(&mut self, now: Instant, i: usize) -> bool {
        let id = RecipeId {
            index: i as u32,
            generation: self.slots[i].generation,
        };
        let mut moved = false;
        while let Some((op, request, yields)) = match &mut self.slots[i] {
            Slot {
                recipe: Some(r),
                refused: false,
                ..
            } => r.poll_request().map(|(op, req)| (op, req, r.yields(op))),
            _ => None,
        } {
            let token = self.token();
            // The recipe's id names it as a requester: its listings may be shared
            // with other recipes' identical ones, and its entry may yield to other
            // recipes' later requests (see `Session::submit_from`).
            let requester = (u64::from(id.generation) << 33) | (u64::from(id.index) + 1);
            match self
                .session
                .submit_from(now, request, token, requester, yields)
            {
                Ok(()) => {
                    moved = true;
                    self.recipe_tokens.insert(token, (id, op));
                    self.slots[i].tokens.push(token);
                }
                Err(e) => {
                    // Refused: the recipe hears it at once, as an error reply it must
                    // retry or report (never take for success). What it sends in answer
                    // waits for the next input (once per pump): a recipe that sends
                    // again at once cannot spin the pump.
                    if !self.slots[i].refused {
                        self.slots[i].refused = true;
                        self.deferred.push(i as u32);
                    }
                    if let Some(r) = self.slots[i].recipe.as_mut() {
                        r.handle_reply(now, op, Err(e.into()));
                    }
                    moved = true;
                }
            }
        }
        while let Some(event) = self.slots[i]
            .recipe
            .as_mut()
            .and_then(|r| r.poll_any_event())
        {
            moved = true;
            self.events.push_back(ClientEvent::Recipe { id, event });
        }
        if self.slots[i].recipe.as_ref().is_some_and(|r| r.is_done()) {
            moved = true;
            let slot = &mut self.slots[i];
            slot.recipe = None;
            slot.generation = slot.generation.wrapping_add(1);
            self.live -= 1;
            self.free.insert(i as u32);
            for token in core::mem::take(&mut slot.tokens) {
                self.recipe_tokens.remove(&token);
                self.persistent_tokens.remove(&token);
                self.session.forget_watches(token);
            }
            shed_map(&mut self.recipe_tokens);
            self.events.push_back(ClientEvent::RecipeDone { id });
        }
        moved
    }

    fn route(&mut self, now: Instant, event: SessionEvent) {
        match event {
            SessionEvent::Reply(reply) if self.recipe_tokens.contains_key(&reply.token) => {
                let (id, op) = self.recipe_tokens[&reply.token];
                match reply.watch {
                    None => self.untrack(reply.token, id),
                    Some(WatchKind::Persistent | WatchKind::PersistentRecursive) => {
                        self.persistent_tokens.insert(reply.token);
                    }
                    Some(_) => {}
                }
                if let Some(r) = self.slot(id) {
                    r.handle_reply(now, op, reply.result);
                }
                self.touch(id);
            }
            SessionEvent::SharedReply(reply) => {
                // One listing for several recipes: each reads it in place, and what
                // they derive from it (a sorted index) is built once, by the first.
                let mut shared = SharedListing::default();
                for token in reply.tokens {
                    let Some(&(id, op)) = self.recipe_tokens.get(&token) else {
                        continue; // it ended meanwhile
                    };
                    if reply.watch.is_none() {
                        self.untrack(token, id);
                    }
                    if let Some(r) = self.slot(id) {
                        r.handle_shared_reply(now, op, &reply.result, &mut shared);
                    }
                    self.touch(id);
                }
            }
            SessionEvent::Watch { token, event } if self.recipe_tokens.contains_key(&token) => {
                // A one-shot watch ends with its first event (a SetWatches2 with its
                // last one's); a persistent one when it is removed.
                let (id, op) = self.recipe_tokens[&token];
                if (!self.persistent_tokens.contains(&token)
                    || event.event_type == EventType::PersistentWatchRemoved)
                    && !self.session.is_watching(token)
                {
                    self.untrack(token, id);
                }
                if let Some(r) = self.slot(id) {
                    r.handle_watch(now, op, &event);
                }
                self.touch(id);
            }
            event if event.is_state_change() => {
                self.session_changed(now, &event);
                self.events.push_back(ClientEvent::Session(event));
            }
            event => self.events.push_back(ClientEvent::Session(event)),
        }
    }

    /// Every hosted recipe hears a change of the session's state.
    fn session_changed(&mut self, now: Instant, event: &SessionEvent) {
        let change = match event {
            SessionEvent::Connected { session_id, .. } => Some(SessionChange::Connected {
                session_id: *session_id,
            }),
            SessionEvent::Suspended { .. } => Some(SessionChange::Suspended),
            SessionEvent::Reconnected { .. } => Some(SessionChange::Reconnected {
                session_id: self.session.session_id(),
            }),
            SessionEvent::Expired { .. } => Some(SessionChange::Expired),
            SessionEvent::Closed { .. } | SessionEvent::AuthFailed(_) => {
                Some(SessionChange::Closed)
            }
            _ => None,
        };
        // An expiry no new session follows ends the client: recipes that would
        // carry on into the next session (re-joining, re-creating) hear `Closed`
        // right after `Expired`, so they end too.
        let terminal = matches!(
            event,
            SessionEvent::Expired {
                renewing: false,
                ..
            }
        )
        .then_some(SessionChange::Closed);
        for change in change.into_iter().chain(terminal) {
            if matches!(change, SessionChange::Expired | SessionChange::Closed) {
                // Every request was answered and every watch dropped.
                self.end_recipes(now, change);
            } else {
                for (i, slot) in self.slots.iter_mut().enumerate() {
                    if let Some(r) = &mut slot.recipe {
                        r.handle_session(now, change);
                        self.dirty.insert(i as u32);
                    }
                }
            }
        }
    }

    fn untrack(&mut self, token: Token, id: RecipeId) {
        self.recipe_tokens.remove(&token);
        shed_map(&mut self.recipe_tokens);
        self.persistent_tokens.remove(&token);
        if let Some(slot) = self.slots.get_mut(id.index as usize) {
            if let Some(at) = slot.tokens.iter().position(|t| *t == token) {
                slot.tokens.swap_remove(at);
            }
        }
    }
}

// Core types are moved into driver threads and tasks.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Client>();
};
