//! Hosting any [`Recipe`] on a session: the one generic path every recipe uses (the
//! lock, the path helpers, and recipes written outside this crate).
//!
//! [`Client::host`] moves a recipe into the driver task and returns a [`Hosted`]
//! handle (its owner) and the recipe's [`Events`]. Commands run on the machine in the
//! driver ([`Hosted::run`], [`Hosted::call`]); what its events mean is the recipe's
//! business (the core decides; this only waits). Dropping the last clone of the
//! `Hosted` abandons the recipe: it cleans up (deletes what it created) and ends.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use zk_recipes::recipe::{AnyEvent, Recipe};

use crate::driver::{Command, EventTx, Routed};
use crate::{Client, Error};

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
            .commands
            .send(Command::Route(Routed::Abandon { key: self.key }));
    }
}

/// The owner of a hosted recipe of type `R`. Clones share ownership; when the last one
/// drops, the recipe is abandoned (see [`Recipe::handle_abandon`]).
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
    rx: mpsc::UnboundedReceiver<AnyEvent>,
    _recipe: PhantomData<fn() -> R>,
}

impl<R: Recipe> Events<R> {
    fn new(rx: mpsc::UnboundedReceiver<AnyEvent>) -> Self {
        Events {
            rx,
            _recipe: PhantomData,
        }
    }

    /// The next event; `None` once the recipe is done.
    pub async fn next(&mut self) -> Option<R::Event> {
        loop {
            let e = self.rx.recv().await?;
            if let Ok(e) = e.downcast::<R::Event>() {
                return Some(e);
            }
        }
    }

    /// The next event if one is waiting.
    pub fn try_next(&mut self) -> Option<R::Event> {
        while let Ok(e) = self.rx.try_recv() {
            if let Ok(e) = e.downcast::<R::Event>() {
                return Some(e);
            }
        }
        None
    }

    /// Waits for the first event `outcome` maps to `Some`, feeding every event to
    /// `seen` on the way; `None` if the recipe ended first.
    pub async fn wait<T>(
        &mut self,
        mut seen: impl FnMut(&R::Event),
        mut outcome: impl FnMut(&R::Event) -> Option<T>,
    ) -> Option<T> {
        loop {
            let e = self.next().await?;
            seen(&e);
            if let Some(t) = outcome(&e) {
                return Some(t);
            }
        }
    }
}

impl<R: Recipe> Hosted<R> {
    /// Hosts `recipe` on `client`'s session; returns its owner and its events.
    pub fn new(client: &Client, recipe: R) -> Result<(Self, Events<R>), Error> {
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        client
            .commands
            .send(Command::Route(Routed::Host {
                key,
                recipe: Box::new(recipe),
                listener: EventTx(tx),
            }))
            .map_err(|_| client.dead())?;
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
        subscribe: Option<mpsc::UnboundedSender<AnyEvent>>,
    ) -> Result<(), Error> {
        let o = &self.owner;
        o.client
            .commands
            .send(Command::Route(Routed::Run {
                key: o.key,
                command: Box::new(move |any, now| {
                    if let Some(r) = any.downcast_mut::<R>() {
                        command(r, now)
                    }
                }),
                subscribe: subscribe.map(EventTx),
            }))
            .map_err(|_| o.client.dead())
    }

    /// Runs `command` on the machine, without waiting.
    pub fn run(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) + Send + 'static,
    ) -> Result<(), Error> {
        self.send(command, None)
    }

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
        let (tx, rx) = mpsc::unbounded_channel();
        let t = self.call_inner(command, Some(tx)).await?;
        Ok((t, Events::new(rx)))
    }

    async fn call_inner<T: Send + 'static>(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) -> T + Send + 'static,
        subscribe: Option<mpsc::UnboundedSender<AnyEvent>>,
    ) -> Result<T, Error> {
        let (tx, rx) = oneshot::channel();
        self.send(
            move |r, now| {
                let _ = tx.send(command(r, now));
            },
            subscribe,
        )?;
        rx.await.map_err(|_| match self.owner.client.status() {
            s if s.is_terminal() => s.error(),
            _ => Error::Finished,
        })
    }
}

impl Client {
    /// Hosts any recipe on this session (see the [module docs](crate::hosted)).
    pub fn host<R: Recipe>(&self, recipe: R) -> Result<(Hosted<R>, Events<R>), Error> {
        Hosted::new(self, recipe)
    }
}
