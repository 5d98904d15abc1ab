//! Barrier and double barrier: thin typed wrappers over the core
//! [`Barrier`](zk_recipes::recipe::barrier::Barrier) and
//! [`DoubleBarrier`](zk_recipes::recipe::double_barrier::DoubleBarrier); what each call
//! and event means is decided there (see `zk_recipes::recipe::barrier` and
//! `zk_recipes::recipe::double_barrier`).

use std::time::Duration;

use zk_recipes::recipe::barrier::{Barrier as Machine, BarrierConfig, BarrierEvent};
use zk_recipes::recipe::double_barrier::{
    DoubleBarrier as Participant, DoubleBarrierConfig, DoubleBarrierEvent,
};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// A barrier node (Curator's `DistributedBarrier`); made by [`Client::barrier`].
#[derive(Clone)]
pub struct Barrier {
    client: Client,
    config: BarrierConfig,
}

#[form]
impl Barrier {
    async fn run(
        &self,
        machine: Machine,
        timeout: Option<Duration>,
        mut seen: impl FnMut(&BarrierEvent),
    ) -> Result<bool, Error> {
        let mut barrier = Handle::host(&self.client, machine)?;
        barrier
            .hosted
            .call(move |m, now| {
                m.set_deadline(timeout.map(|t| now + t));
                m.start(now)
            })
            .await?;
        barrier
            .events
            .outcome_seen(|e| seen(e), BarrierEvent::outcome)
            .await
    }

    /// Sets the barrier (creates its node; parents as containers). Already set is fine.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "barrier", path = %self.config.path))]
    pub async fn set(&self) -> Result<(), Error> {
        self.run(Machine::set(self.config.clone()), None, |_| {})
            .await
            .map(drop)
    }

    /// Removes the barrier (deletes its node). Already gone is fine.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "barrier", path = %self.config.path))]
    pub async fn remove(&self) -> Result<(), Error> {
        self.run(Machine::remove(self.config.clone()), None, |_| {})
            .await
            .map(drop)
    }

    /// Waits until the barrier does not exist. Fails if the session is lost.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "barrier", path = %self.config.path))]
    pub async fn wait(&self) -> Result<(), Error> {
        self.wait_with(None, |_| {}).await.map(drop)
    }

    /// Waits at most `timeout`: `Ok(false)` if the barrier was still up.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "barrier", path = %self.config.path))]
    pub async fn wait_timeout(&self, timeout: Duration) -> Result<bool, Error> {
        self.wait_with(Some(timeout), |_| {}).await
    }

    /// [`wait_timeout`](Self::wait_timeout) (no deadline for `None`), telling `seen`
    /// every event on the way (`Suspended` / `Reconnected` while the connection is
    /// down).
    pub async fn wait_with(
        &self,
        timeout: Option<Duration>,
        seen: impl FnMut(&BarrierEvent),
    ) -> Result<bool, Error> {
        self.run(Machine::wait(self.config.clone(), None), timeout, seen)
            .await
    }
}

/// A double barrier participant (Curator's `DistributedDoubleBarrier`); made by
/// [`Client::double_barrier`]. Each [`enter`](Self::enter) starts a new participation
/// (a new member node) that [`leave`](Self::leave) ends; dropping it mid-way removes
/// our node.
pub struct DoubleBarrier {
    client: Client,
    path: String,
    count: u32,
    current: Option<Handle<Participant>>,
    late: Option<bool>,
}

#[form]
impl DoubleBarrier {
    /// Enters and waits until `N` have entered (or the round was already on).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "double_barrier", path = %self.path))]
    pub async fn enter(&mut self) -> Result<(), Error> {
        self.enter_inner(None).await.map(drop)
    }

    /// Enters, waiting at most `timeout`: `Ok(false)` if not entered by then (our node
    /// is removed).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "double_barrier", path = %self.path))]
    pub async fn enter_timeout(&mut self, timeout: Duration) -> Result<bool, Error> {
        self.enter_inner(Some(timeout)).await
    }

    async fn enter_inner(&mut self, timeout: Option<Duration>) -> Result<bool, Error> {
        let id = crate::node_id();
        let config = DoubleBarrierConfig::new(&self.path, self.count, &id);
        let mut participant = Handle::host(&self.client, Participant::new(config))?;
        self.late = None;
        self.current = None;
        // Kept once the enter has its outcome: a cancelled enter (tokio) drops the
        // participant, which is abandoned and deletes its node.
        let late = &mut self.late;
        let outcome = match participant
            .hosted
            .call(move |p, now| p.enter(now, timeout.map(|t| now + t)))
            .await
            .and_then(|r| r)
        {
            Ok(()) => {
                participant
                    .events
                    .outcome_seen(
                        |e| {
                            if let DoubleBarrierEvent::Entered { late: l } = e {
                                *late = Some(*l);
                            }
                        },
                        DoubleBarrierEvent::enter_outcome,
                    )
                    .await
            }
            Err(e) => Err(e),
        };
        self.current = Some(participant);
        outcome
    }

    /// Leaves and waits until every participant of the round has left.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "double_barrier", path = %self.path))]
    pub async fn leave(&mut self) -> Result<(), Error> {
        self.leave_inner(None).await.map(drop)
    }

    /// Leaves, waiting at most `timeout`: `Ok(false)` if others were still in the
    /// barrier by then (our node is removed, so they are not held up by us).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "double_barrier", path = %self.path))]
    pub async fn leave_timeout(&mut self, timeout: Duration) -> Result<bool, Error> {
        self.leave_inner(Some(timeout)).await
    }

    async fn leave_inner(&mut self, timeout: Option<Duration>) -> Result<bool, Error> {
        let Some(participant) = self.current.as_mut() else {
            return Err(Error::Finished);
        };
        // Ended while we worked (session lost, ...)? Say why.
        while let Some(e) = participant.try_next() {
            if let Some(Err(error)) = e.leave_outcome() {
                self.current = None;
                return Err(error);
            }
        }
        let started = participant
            .hosted
            .call(move |p, now| p.leave(now, timeout.map(|t| now + t)))
            .await;
        if let Err(e) = started.and_then(|r| r) {
            while let Some(ev) = participant.try_next() {
                if let Some(Err(error)) = ev.leave_outcome() {
                    return Err(error);
                }
            }
            return Err(e);
        }
        participant
            .outcome(DoubleBarrierEvent::leave_outcome)
            .await
    }

    /// Did the last `enter` find the round already on (`ready` existed)?
    pub fn entered_late(&self) -> Option<bool> {
        self.late
    }

    /// The next event of the current participation (`Suspended`, `Reconnected`,
    /// `Failed` while we work between enter and leave); `None` once it has ended.
    pub async fn changed(&mut self) -> Option<DoubleBarrierEvent> {
        self.current.as_mut()?.next().await
    }

    /// Like [`changed`](Self::changed), waiting at most `timeout`: `Ok(None)` once the
    /// participation has ended, `Err(Timeout)` if nothing came.
    pub async fn changed_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<DoubleBarrierEvent>, Error> {
        match self.current.as_mut() {
            Some(participant) => participant.next_timeout(timeout).await,
            None => Ok(None),
        }
    }
}

#[form]
impl Client {
    /// The barrier node `path` (set / remove / wait).
    pub fn barrier(&self, path: &str) -> Barrier {
        Barrier {
            client: self.clone(),
            config: BarrierConfig::new(path),
        }
    }

    /// A participant of the double barrier at `path` for `count` participants
    /// (Curator `DistributedDoubleBarrier` compatible).
    pub fn double_barrier(&self, path: &str, count: u32) -> DoubleBarrier {
        DoubleBarrier {
            client: self.clone(),
            path: path.into(),
            count,
            current: None,
            late: None,
        }
    }
}
