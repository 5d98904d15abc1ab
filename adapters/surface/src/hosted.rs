//! Hosting any [`Recipe`] on a session: the one generic path every recipe uses (the
//! recipes here, the path helpers, and recipes written outside this crate).
//!
//! [`Client::host`] moves a recipe into the driver (the tokio adapter's task, the
//! blocking adapter's I/O thread) and returns a [`Hosted`] handle (its owner) and the
//! recipe's [`Events`]. Commands run on the machine in the driver ([`Hosted::run`],
//! [`Hosted::call`]); what its events mean is the recipe's business (the core decides;
//! this only waits). Dropping the last clone of the `Hosted` abandons the recipe: it
//! cleans up (deletes what it created) and ends.
//!
//! Every recipe handle of this crate is wired here, once: a [`Handle`] is a hosted
//! recipe with its events (its `next`, `next_timeout`, `try_next`, and `Iterator` in
//! the blocking form; dropped, the recipe is abandoned), and [`Events`] waits for the
//! event that ends a call. A recipe's file holds only its calls: the handle types of
//! the caches, views, member nodes, followed nodes and values are `Handle<TheRecipe>`.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::client::{Error, RecipeCommand};
use zk_recipes::recipe::{AnyEvent, Recipe};

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Command, EventTx, Routed};

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

struct Owner {
    client: Client,
    key: u64,
}

impl Drop for Owner {
    fn drop(&mut self) {
        // A channel send: fine from any context, inside a runtime or not.
        let _ = self
            .client
            .send(Command::Route(Routed::Abandon { key: self.key }));
    }
}

/// The owner of a hosted recipe of type `R`. Clones share ownership; when the last one
/// drops, the recipe is abandoned (see [`Machine::handle_abandon`](zk_recipes::recipe::Machine::handle_abandon)).
pub struct Hosted<R> {
    owner: Arc<Owner>,
    _recipe: PhantomData<fn() -> R>,
}

impl<R> Clone for Hosted<R> {
    fn clone(&self) -> Self {
        Hosted {
            owner: self.owner.clone(),
            _recipe: PhantomData,
        }
    }
}

/// A subscription to a hosted recipe's events, from when it was made until the recipe
/// is done.
pub struct Events<R> {
    rx: rt::Rx<AnyEvent>,
    _recipe: PhantomData<fn() -> R>,
}

impl<R: Recipe> Events<R> {
    fn new(rx: rt::Rx<AnyEvent>) -> Self {
        Events {
            rx,
            _recipe: PhantomData,
        }
    }

    /// The next event if one is waiting.
    pub fn try_next(&mut self) -> Option<R::Event> {
        while let Some(e) = self.rx.try_recv() {
            if let Ok(e) = e.downcast::<R::Event>() {
                return Some(e);
            }
        }
        None
    }
}

#[form]
impl<R: Recipe> Events<R> {
    /// The next event; `None` once the recipe is done.
    pub async fn next(&mut self) -> Option<R::Event> {
        self.next_until(None).await.unwrap_or(None)
    }

    /// The next event within `timeout`: `Err(Timeout)` if none came, `Ok(None)` once
    /// the recipe is done.
    pub async fn next_timeout(&mut self, timeout: Duration) -> Result<Option<R::Event>, Error> {
        self.next_until(Some(Instant::now() + timeout))
            .await
            .map_err(|_| Error::Timeout)
    }

    /// The next event, waiting until `deadline` at most (`None`: no limit).
    pub async fn next_until(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<Option<R::Event>, rt::Timeout> {
        loop {
            match self.rx.recv_until(deadline).await? {
                None => return Ok(None),
                Some(e) => {
                    if let Ok(e) = e.downcast::<R::Event>() {
                        return Ok(Some(e));
                    }
                }
            }
        }
    }

    /// Waits for the first event `outcome` maps to `Some`, feeding every event to
    /// `seen` on the way; `None` if the recipe ended first.
    pub async fn wait<T>(
        &mut self,
        seen: impl FnMut(&R::Event),
        outcome: impl FnMut(&R::Event) -> Option<T>,
    ) -> Option<T> {
        self.wait_until(seen, outcome, None).await.unwrap_or(None)
    }

    /// Waits for the first event `outcome` answers: the result of a call that ends with
    /// an event. `Err(Finished)` if the recipe ended first.
    pub(crate) async fn outcome<T>(
        &mut self,
        outcome: impl FnMut(&R::Event) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.outcome_seen(|_| {}, outcome).await
    }

    /// [`outcome`](Self::outcome), feeding every event to `seen` on the way.
    pub(crate) async fn outcome_seen<T>(
        &mut self,
        seen: impl FnMut(&R::Event),
        outcome: impl FnMut(&R::Event) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.wait(seen, outcome)
            .await
            .unwrap_or(Err(Error::Finished))
    }

    /// [`wait`](Self::wait), until `deadline` at most (`None`: no limit).
    pub async fn wait_until<T>(
        &mut self,
        mut seen: impl FnMut(&R::Event),
        mut outcome: impl FnMut(&R::Event) -> Option<T>,
        deadline: Option<Instant>,
    ) -> Result<Option<T>, rt::Timeout> {
        loop {
            let Some(e) = self.next_until(deadline).await? else {
                return Ok(None);
            };
            seen(&e);
            if let Some(t) = outcome(&e) {
                return Ok(Some(t));
            }
        }
    }
}

/// The events, blocking: `next()` waits for the next one; `None` once the recipe is
/// done.
#[only_blocking]
impl<R: Recipe> Iterator for Events<R> {
    type Item = R::Event;

    fn next(&mut self) -> Option<R::Event> {
        self.next_until(None).unwrap_or(None)
    }
}

impl<R: Recipe> Hosted<R> {
    /// Hosts `recipe` on `client`'s session; returns its owner and its events.
    pub fn new(client: &Client, recipe: R) -> Result<(Self, Events<R>), Error> {
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = rt::channel();
        client.send(Command::Route(Routed::Host {
            key,
            recipe: Box::new(recipe),
            listener: EventTx(tx),
        }))?;
        let owner = Arc::new(Owner {
            client: client.clone(),
            key,
        });
        Ok((
            Hosted {
                owner,
                _recipe: PhantomData,
            },
            Events::new(rx),
        ))
    }

    fn send(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) + Send + 'static,
        subscribe: Option<rt::Tx<AnyEvent>>,
    ) -> Result<(), Error> {
        let o = &self.owner;
        o.client.send(Command::Route(Routed::Run {
            key: o.key,
            command: RecipeCommand::new(command),
            subscribe: subscribe.map(EventTx),
        }))
    }

    /// Runs `command` on the machine, without waiting.
    pub fn run(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) + Send + 'static,
    ) -> Result<(), Error> {
        self.send(command, None)
    }
}

#[form]
impl<R: Recipe> Hosted<R> {
    /// Runs `command` on the machine and returns its answer; [`Error::Finished`] if the
    /// recipe is done.
    pub async fn call<T: Send + 'static>(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) -> T + Send + 'static,
    ) -> Result<T, Error> {
        self.call_inner(command, None).await
    }

    /// [`call`](Self::call), subscribing to the recipe's events from just before the
    /// command runs: nothing it causes is missed.
    pub async fn call_subscribed<T: Send + 'static>(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) -> T + Send + 'static,
    ) -> Result<(T, Events<R>), Error> {
        let (tx, rx) = rt::channel();
        let t = self.call_inner(command, Some(tx)).await?;
        Ok((t, Events::new(rx)))
    }

    async fn call_inner<T: Send + 'static>(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) -> T + Send + 'static,
        subscribe: Option<rt::Tx<AnyEvent>>,
    ) -> Result<T, Error> {
        let (tx, rx) = rt::oneshot();
        self.send(
            move |r, now| {
                let _ = tx.send(command(r, now));
            },
            subscribe,
        )?;
        rx.recv()
            .await
            .ok_or_else(|| match self.owner.client.status() {
                s if s.is_terminal() => s.error(),
                _ => Error::Finished,
            })
    }
}

/// A hosted recipe and its events since it was hosted: the handle of a recipe one
/// keeps (a cache, a group view, a member node, a followed node or counter, an election
/// observer). Its events come in order from [`next`](Self::next),
/// [`next_timeout`](Self::next_timeout) and [`try_next`](Self::try_next) (and, in the
/// blocking form, as an `Iterator`); the recipe's own calls are methods of its
/// `Handle<TheRecipe>`; dropping it abandons the recipe (it cleans up and ends).
pub struct Handle<R: Recipe> {
    pub(crate) hosted: Hosted<R>,
    pub(crate) events: Events<R>,
}

impl<R: Recipe> Handle<R> {
    /// Hosts `recipe` on `client`.
    pub(crate) fn host(client: &Client, recipe: R) -> Result<Self, Error> {
        let (hosted, events) = Hosted::new(client, recipe)?;
        Ok(Handle { hosted, events })
    }

    /// Hosts `recipe` and runs `start` on it, without waiting.
    pub(crate) fn start(
        client: &Client,
        recipe: R,
        start: impl FnOnce(&mut R, zk_recipes::time::Instant) + Send + 'static,
    ) -> Result<Self, Error> {
        let handle = Self::host(client, recipe)?;
        handle.hosted.run(start)?;
        Ok(handle)
    }

    /// The next event if one is waiting.
    pub fn try_next(&mut self) -> Option<R::Event> {
        self.events.try_next()
    }
}

#[form]
impl<R: Recipe> Handle<R> {
    /// The next event; `None` once the recipe is done.
    pub async fn next(&mut self) -> Option<R::Event> {
        self.events.next().await
    }

    /// The next event within `timeout`: `Err(Timeout)` if none came, `Ok(None)` once
    /// the recipe is done.
    pub async fn next_timeout(&mut self, timeout: Duration) -> Result<Option<R::Event>, Error> {
        self.events.next_timeout(timeout).await
    }

    /// Waits for the first event `outcome` answers (see [`Events::outcome`]).
    pub(crate) async fn outcome<T>(
        &mut self,
        outcome: impl FnMut(&R::Event) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.events.outcome(outcome).await
    }
}

/// The events, blocking: `next()` waits for the next one; `None` once the recipe is
/// done.
#[only_blocking]
impl<R: Recipe> Iterator for Handle<R> {
    type Item = R::Event;

    fn next(&mut self) -> Option<R::Event> {
        self.events.next()
    }
}

impl Client {
    /// Hosts any recipe on this session (see the [module docs](self)).
    pub fn host<R: Recipe>(&self, recipe: R) -> Result<(Hosted<R>, Events<R>), Error> {
        Hosted::new(self, recipe)
    }
}
