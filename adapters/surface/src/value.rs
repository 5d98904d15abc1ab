//! Versioned compare-and-set updates and shared counters: thin
//! wrappers over the core machines (`zk_recipes::recipe::value`); what each call and
//! event means is decided there (the retry loop, the lost-reply rule, the formats).
//!
//!
//! Watching a counter (every new value, decoded by the core):
//!

use bytes::Bytes;
use zk_recipes::proto::Stat;
pub use zk_recipes::recipe::value::CounterFormat;
pub use zk_recipes::recipe::value::CounterWatchEvent;
use zk_recipes::recipe::value::{
    Counter, CounterEvent, CounterWatch, Proposal, Update, UpdateConfig, UpdateEvent,
};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

#[form]
impl Client {
    /// Updates the node at `path` by compare-and-set: `f` gets its data (`None`: missing)
    /// and returns the new data (`None`: keep it as it is); `f` runs again whenever
    /// another writer got there first. `Ok(Some(stat))` once our data is in the node,
    /// `Ok(None)` when `f` kept it. A missing node (and missing ancestors, as
    /// containers) is created. An error whose `may_have_applied()` is true means our
    /// write may be in the node all the same (its reply was lost and the node changed
    /// meanwhile); `f` is never applied twice.
    pub async fn update<F>(&self, path: &str, f: F) -> Result<Option<Stat>, Error>
    where
        F: FnMut(Option<&[u8]>) -> Option<Bytes>,
    {
        let mut config = UpdateConfig::new(path);
        config.seed = crate::random_seed(); // the jitter of the wait after a lost race
        self.update_with(config, f).await
    }

    /// [`update`](Self::update) with options (`sync_first`, `create_if_missing`,
    /// `confirm_by_data`, `acl`, and the `seed` of the jitter after a lost race).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "update", path = %config.path))]
    pub async fn update_with<F>(
        &self,
        config: UpdateConfig,
        mut f: F,
    ) -> Result<Option<Stat>, Error>
    where
        F: FnMut(Option<&[u8]>) -> Option<Bytes>,
    {
        let mut update = Handle::start(self, Update::new(config), |u, now| u.start(now))?;
        loop {
            match update.next().await {
                Some(UpdateEvent::Current { data, .. }) => {
                    let p = f(data.as_deref()).map_or(Proposal::Keep, Proposal::Set);
                    update.hosted.run(move |u, now| u.propose(now, p))?;
                }
                Some(UpdateEvent::Updated { stat }) => return Ok(Some(stat)),
                Some(UpdateEvent::Kept) => return Ok(None),
                Some(UpdateEvent::Failed { error }) => return Err(error),
                Some(_) => {}
                None => return Err(Error::Finished),
            }
        }
    }

    /// A shared counter in node `path` (Curator's `SharedCount` format for
    /// [`CounterFormat::I32`], `DistributedAtomicLong`'s for [`CounterFormat::I64`]).
    pub fn counter(&self, path: &str, format: CounterFormat) -> Result<CounterHandle, Error> {
        let mut config = UpdateConfig::new(path);
        config.seed = crate::random_seed(); // the jitter of the wait after a lost race
        Ok(CounterHandle {
            counter: Handle::host(self, Counter::with_config(config, format))?,
            unanswered: 0,
        })
    }

    /// Watches the shared counter in node `path`, stored in `format`: every new value
    /// (a missing node counts as 0); see `zk_recipes::recipe::value::CounterWatch`.
    pub fn watch_counter(
        &self,
        path: &str,
        format: CounterFormat,
    ) -> Result<CounterWatchHandle, Error> {
        Handle::start(self, CounterWatch::new(path, format), |w, now| w.start(now))
    }
}

/// A shared counter ([`Client::counter`]). Each call runs one operation; handles on
/// the same node (in this process or elsewhere) never lose or double an increment.
/// Dropping the handle ends the counter.
pub struct CounterHandle {
    counter: Handle<Counter>,
    /// Operations started whose answer nobody read (their call was cancelled): the
    /// counter answers in order, so the next call skips them first.
    unanswered: usize,
}

#[form]
impl CounterHandle {
    async fn next_answer(&mut self) -> Result<i64, Error> {
        loop {
            match self.counter.next().await {
                Some(CounterEvent::Added { after, .. }) => return Ok(after),
                Some(CounterEvent::Value { value, .. }) => return Ok(value),
                Some(CounterEvent::Failed { error }) => return Err(error),
                Some(CounterEvent::Closed) | None => return Err(Error::Finished),
                Some(_) => {}
            }
        }
    }

    async fn run(
        &mut self,
        op: impl FnOnce(&mut Counter, zk_recipes::time::Instant) + Send + 'static,
    ) -> Result<i64, Error> {
        while self.unanswered > 0 {
            if let Err(Error::Finished) = self.next_answer().await {
                return Err(Error::Finished);
            }
            self.unanswered -= 1;
        }
        self.counter.hosted.run(op)?;
        self.unanswered = 1;
        let answer = self.next_answer().await;
        self.unanswered = 0;
        answer
    }

    /// Adds `delta` (negative subtracts): the value after our addition. An error whose
    /// `may_have_applied()` is true: the addition may be in the node all the same.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "counter"))]
    pub async fn add(&mut self, delta: i64) -> Result<i64, Error> {
        self.run(move |c, now| c.add(now, delta)).await
    }

    /// The value now (0 for a missing node).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "counter"))]
    pub async fn get(&mut self) -> Result<i64, Error> {
        self.run(|c, now| c.get(now)).await
    }
}

/// A watched shared counter ([`Client::watch_counter`]): its events and its calls
/// (`changed`, `value`, `refresh`). What each event means (the decoding, a malformed
/// node, a missing one) is decided in the core (`CounterWatchEvent::change`). Dropping
/// the handle ends the watch.
pub type CounterWatchHandle = Handle<CounterWatch>;

#[form]
impl Handle<CounterWatch> {
    /// Waits for the next value: the first one read, then one per new version.
    /// `Err(BadCounter)`: the node holds malformed data (the watch goes on); any other
    /// error: the watch has ended.
    pub async fn changed(&mut self) -> Result<i64, Error> {
        self.outcome(CounterWatchEvent::change).await
    }

    /// The value as last reported (`None`: nothing read yet).
    pub async fn value(&self) -> Result<Option<Result<i64, Error>>, Error> {
        self.hosted.call(|w, _| w.value()).await
    }

    /// `sync`, then read again: after an out-of-band notice that the counter changed,
    /// the next [`changed`](Self::changed) sees that change or a later one.
    pub fn refresh(&self) -> Result<(), Error> {
        self.hosted.run(|w, now| w.refresh(now))
    }
}
