//! Set partitioners: a thin wrapper over the core
//! [`Partitioner`](zk_recipes::recipe::partitioner::Partitioner) machine; what each
//! call and event means is decided there (see `zk_recipes::recipe::partitioner`: kazoo
//! `SetPartitioner` nodes and division, each item's hold an exclusive lock).
//!
//! The handle keeps where the member stands ([`PartitionState`]) and the items it holds,
//! folding in every event it reads, whichever call reads it: a wait that is cancelled
//! (its future dropped, its timeout passed) loses no event and leaves the member as it
//! was — still in the party, its share held or being divided. Only
//! [`SetPartitioner::finish`] and dropping the handle leave the party.

use std::time::{Duration, Instant};

use zk_recipes::proto::Acl;
use zk_recipes::recipe::partitioner::{
    HeldItem, PartitionEvent, Partitioner as Machine, PartitionerConfig,
};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// A set partitioner to join: made by [`Client::partitioner`], joined by
/// [`join`](Self::join).
#[must_use = "a partitioner does nothing until joined"]
#[derive(Clone)]
pub struct PartitionerBuilder {
    client: Client,
    config: PartitionerConfig,
}

/// Where a member stands (kazoo's `SetPartitioner` states, plus the finish).
#[derive(Clone, Debug, PartialEq)]
pub enum PartitionState {
    /// Dividing: waiting for a stable party, taking our items' locks, or releasing
    /// (kazoo's `ALLOCATING`).
    Allocating,
    /// Our share is held and nothing asks for a release (kazoo's `ACQUIRED`).
    Acquired,
    /// The party changed, the connection dropped or an item's lock was lost: stop
    /// working on the items and [`release`](SetPartitioner::release) them (kazoo's
    /// `RELEASE`). The items stay locked until then.
    ReleaseNeeded,
    /// Finished: our locks and party node are deleted.
    Finished,
    /// Ended with this error (the session expired or closed, a request refused for
    /// good): kazoo's `FAILURE`. Nothing of ours is left but what the error names.
    Failed(Error),
}

/// What the handle knows from the events it has read.
struct Share {
    state: PartitionState,
    items: Vec<HeldItem>,
    /// How many `Released` were read.
    releases: u64,
}

impl Share {
    fn fold(&mut self, e: &PartitionEvent) {
        match e {
            PartitionEvent::Acquired { items } => {
                self.items = items.clone();
                self.state = PartitionState::Acquired;
            }
            PartitionEvent::ReleaseNeeded if self.state == PartitionState::Acquired => {
                self.state = PartitionState::ReleaseNeeded;
            }
            PartitionEvent::Released => {
                self.items.clear();
                self.releases += 1;
                self.state = PartitionState::Allocating;
            }
            PartitionEvent::Finished => {
                self.items.clear();
                self.state = PartitionState::Finished;
            }
            PartitionEvent::Failed { error } => {
                self.items.clear();
                self.state = PartitionState::Failed(error.clone());
            }
            _ => {}
        }
    }

    /// The error a wait ends with once the member has ended.
    fn ended(&self) -> Option<Result<(), Error>> {
        match &self.state {
            PartitionState::Finished => Some(Err(Error::Finished)),
            PartitionState::Failed(e) => Some(Err(e.clone())),
            _ => None,
        }
    }
}

#[form]
impl PartitionerBuilder {
    /// This member's identifier in the party (kazoo's `identifier`; unique in the party,
    /// no `/`). The default is a fresh random id.
    pub fn identifier(mut self, identifier: &str) -> Self {
        self.config.identifier = identifier.into();
        self
    }

    /// How long the party must stay unchanged before the set is divided (kazoo's
    /// `time_boundary`; 30 s by default, as there).
    pub fn time_boundary(mut self, time_boundary: Duration) -> Self {
        self.config.time_boundary = time_boundary;
        self
    }

    /// The ACL of our nodes and of the parents we create (open by default).
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.config.acl = acl;
        self
    }

    /// Joins the party and starts dividing; returns at once (the handle's
    /// [`acquired`](SetPartitioner::acquired) waits for our share). A bad config ends
    /// the member with `Failed` at once.
    pub fn join(self) -> Result<SetPartitioner, Error> {
        let path = self.config.path.clone();
        let hold = Handle::start(&self.client, Machine::new(self.config), |m, now| {
            m.start(now)
        })?;
        Ok(SetPartitioner {
            hold,
            share: Share {
                state: PartitionState::Allocating,
                items: Vec::new(),
                releases: 0,
            },
            path,
        })
    }
}

/// A member of a set partitioner's party (kazoo's `SetPartitioner`). Dropping it
/// releases its items and leaves the party without waiting (from any context: it only
/// sends a message); [`finish`](Self::finish) waits until nothing of it is left.
pub struct SetPartitioner {
    hold: Handle<Machine>,
    share: Share,
    /// For the calls' spans.
    path: String,
}

#[form]
impl SetPartitioner {
    /// Where the member stands now (the events read so far).
    pub fn state(&mut self) -> PartitionState {
        self.read_waiting();
        self.share.state.clone()
    }

    /// The items held (sorted, each with its lock node and fencing token) while the
    /// state is `Acquired` or `ReleaseNeeded`; empty otherwise, and when the party has
    /// more members than items.
    pub fn items(&mut self) -> &[HeldItem] {
        self.read_waiting();
        &self.share.items
    }

    fn read_waiting(&mut self) {
        while let Some(e) = self.hold.try_next() {
            self.share.fold(&e);
        }
    }

    /// Reads events until `want` answers (`Ok(None)`: not before `deadline`); `Err` if
    /// the member ends first.
    async fn until<T>(
        &mut self,
        deadline: Option<Instant>,
        want: impl Fn(&Share) -> Option<Result<T, Error>>,
    ) -> Result<Option<T>, Error> {
        loop {
            self.read_waiting();
            if let Some(r) = want(&self.share) {
                return r.map(Some);
            }
            match self.hold.events.next_until(deadline).await {
                Err(_) => return Ok(None),
                Ok(Some(e)) => self.share.fold(&e),
                Ok(None) => return want(&self.share).unwrap_or(Err(Error::Finished)).map(Some),
            }
        }
    }

    /// Waits until our share of the set is held (at once if it is): the items. Called
    /// while a release is needed (the caller is done with its share), it releases
    /// first. `Err` once the member has ended (`Finished` after a finish).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "partitioner", path = %self.path))]
    pub async fn acquired(&mut self) -> Result<Vec<HeldItem>, Error> {
        self.acquired_until(None).await?.ok_or(Error::Timeout)
    }

    /// [`acquired`](Self::acquired), waiting at most `wait`: `Ok(None)` if the share
    /// was not held in time (the member goes on dividing).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "partitioner", path = %self.path))]
    pub async fn acquired_timeout(
        &mut self,
        wait: Duration,
    ) -> Result<Option<Vec<HeldItem>>, Error> {
        self.acquired_until(Some(Instant::now() + wait)).await
    }

    async fn acquired_until(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<HeldItem>>, Error> {
        if self.state() == PartitionState::ReleaseNeeded {
            self.release().await?;
        }
        self.until(deadline, |s| match s.state {
            PartitionState::Acquired => Some(Ok(s.items.clone())),
            _ => s.ended().map(|r| r.map(|()| Vec::new())),
        })
        .await
    }

    /// Waits until the items must be released (at once if they must): the party
    /// changed, the connection dropped or an item's lock was lost. Stop working on them
    /// and call [`release`](Self::release). `Err` once the member has ended.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "partitioner", path = %self.path))]
    pub async fn release_needed(&mut self) -> Result<(), Error> {
        self.release_needed_until(None).await?.ok_or(Error::Timeout)
    }

    /// [`release_needed`](Self::release_needed), waiting at most `wait`: `Ok(false)` if
    /// no release was needed in time.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "partitioner", path = %self.path))]
    pub async fn release_needed_timeout(&mut self, wait: Duration) -> Result<bool, Error> {
        let needed = self.release_needed_until(Some(Instant::now() + wait)).await?;
        Ok(needed.is_some())
    }

    async fn release_needed_until(&mut self, deadline: Option<Instant>) -> Result<Option<()>, Error> {
        self.until(deadline, |s| match s.state {
            PartitionState::ReleaseNeeded => Some(Ok(())),
            _ => s.ended(),
        })
        .await
    }

    /// Releases our items (kazoo's `release_set`) and waits until every lock node is
    /// deleted; the set is then divided again. Nothing to do (`Ok`) while nothing is
    /// held.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "partitioner", path = %self.path))]
    pub async fn release(&mut self) -> Result<(), Error> {
        if !matches!(
            self.state(),
            PartitionState::Acquired | PartitionState::ReleaseNeeded
        ) {
            return Ok(());
        }
        let before = self.share.releases;
        self.hold.hosted.run(|m, now| m.release(now))?;
        let released = self.until(None, |s| match s.releases > before {
            true => Some(Ok(())),
            false => s.ended(),
        });
        released.await.map(|_| ())
    }

    /// Releases our items and leaves the party (kazoo's `finish`), and waits until
    /// nothing of ours is left.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "partitioner", path = %self.path))]
    pub async fn finish(mut self) -> Result<(), Error> {
        if let Some(end) = self.share.ended() {
            return end.or_else(|e| if e == Error::Finished { Ok(()) } else { Err(e) });
        }
        match self.hold.hosted.run(|m, now| m.finish(now)) {
            Ok(()) | Err(Error::Finished) => {}
            Err(e) => return Err(e),
        }
        let finished = self.until(None, |s| match &s.state {
            PartitionState::Finished => Some(Ok(())),
            _ => s.ended(),
        });
        finished.await.map(|_| ())
    }
}

#[form]
impl Client {
    /// A set partitioner dividing `items` under `path` (kazoo
    /// `SetPartitioner(client, path, set)` compatible: a kazoo member and ours in one
    /// party agree on who takes what). Configure it, then
    /// [`join`](PartitionerBuilder::join).
    pub fn partitioner<S: AsRef<str>>(&self, path: &str, items: &[S]) -> PartitionerBuilder {
        let id = crate::node_id();
        PartitionerBuilder {
            client: self.clone(),
            config: PartitionerConfig::new(path, items, &id, &id),
        }
    }
}
