//! Hosting any [`Recipe`] on a session: the one generic path every recipe uses (the
//! lock, the path helpers, and recipes written outside this crate). The same shape as
//! the tokio adapter's, blocking.
//!
//! [`Client::host`] moves a recipe into the I/O thread and returns a [`Hosted`] handle
//! (its owner) and the recipe's [`Events`]. Commands run on the machine in the I/O
//! thread ([`Hosted::run`], [`Hosted::call`]); what its events mean is the recipe's
//! business (the core decides; this only waits). Dropping the last clone of the
//! `Hosted` abandons the recipe: it cleans up (deletes what it created) and ends.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes::recipe::{AnyEvent, Recipe};

use crate::driver::{EventTx, Input, Routed};
use crate::{Client, Error};

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

struct Owner {
    client: Client,
    key: u64,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self
            .client
            .inner
            .inputs
            .send(Input::Route(Routed::Abandon { key: self.key }));
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
    rx: Receiver<AnyEvent>,
    _recipe: PhantomData<fn() -> R>,
}

impl<R: Recipe> Events<R> {
    fn new(rx: Receiver<AnyEvent>) -> Self {
        Events {
            rx,
            _recipe: PhantomData,
        }
    }

    /// The next event within `timeout`: `Err(Timeout)` if none came, `Ok(None)` once
    /// the recipe is done.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<R::Event>, Error> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(e) => {
                    if let Ok(e) = e.downcast::<R::Event>() {
                        return Ok(Some(e));
                    }
                }
                Err(RecvTimeoutError::Timeout) => return Err(Error::Timeout),
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
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
    pub fn wait<T>(
        &mut self,
        mut seen: impl FnMut(&R::Event),
        mut outcome: impl FnMut(&R::Event) -> Option<T>,
    ) -> Option<T> {
        loop {
            let e = self.next()?;
            seen(&e);
            if let Some(t) = outcome(&e) {
                return Some(t);
            }
        }
    }
}

/// The events, blocking: `next()` waits for the next one; `None` once the recipe is
/// done.
impl<R: Recipe> Iterator for Events<R> {
    type Item = R::Event;

    fn next(&mut self) -> Option<R::Event> {
        loop {
            if let Ok(e) = self.rx.recv().ok()?.downcast::<R::Event>() {
                return Some(e);
            }
        }
    }
}

impl<R: Recipe> Hosted<R> {
    /// Hosts `recipe` on `client`'s session; returns its owner and its events.
    pub fn new(client: &Client, recipe: R) -> Result<(Self, Events<R>), Error> {
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        client
            .inner
            .inputs
            .send(Input::Route(Routed::Host {
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
        subscribe: Option<Sender<AnyEvent>>,
    ) -> Result<(), Error> {
        let o = &self.owner;
        o.client
            .inner
            .inputs
            .send(Input::Route(Routed::Run {
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
    pub fn call<T: Send + 'static>(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) -> T + Send + 'static,
    ) -> Result<T, Error> {
        self.call_inner(command, None)
    }

    /// [`call`](Self::call), subscribing to the recipe's events from just before the
    /// command runs: nothing it causes is missed.
    pub fn call_subscribed<T: Send + 'static>(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) -> T + Send + 'static,
    ) -> Result<(T, Events<R>), Error> {
        let (tx, rx) = mpsc::channel();
        let t = self.call_inner(command, Some(tx))?;
        Ok((t, Events::new(rx)))
    }

    fn call_inner<T: Send + 'static>(
        &self,
        command: impl FnOnce(&mut R, zk_recipes::time::Instant) -> T + Send + 'static,
        subscribe: Option<Sender<AnyEvent>>,
    ) -> Result<T, Error> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(
            move |r, now| {
                let _ = tx.send(command(r, now));
            },
            subscribe,
        )?;
        rx.recv().map_err(|_| match self.owner.client.status() {
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
