//! The delay queue: the [`Queue`] handle over Curator's `DistributedDelayQueue` format,
//! with puts that carry a time; takes are the queue's own (see
//! `zk_recipes::recipe::delay_queue` for what each call means).

use bytes::Bytes;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use zk_recipes::recipe::queue::Format;

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Queue};
use super::queue::PutAt;

/// Milliseconds since the Unix epoch of `at` (0 before it).
fn unix_ms_of(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[form]
impl Queue {
    /// Puts one item into a delay queue, takeable from `at` on (Curator's
    /// `put(item, delayUntilEpoch)`); its name once the server answered. Refused
    /// (`BadArguments`) by a queue that is not a delay queue.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "delay_queue"))]
    pub async fn put_at(
        &mut self,
        data: impl Into<Bytes>,
        at: SystemTime,
    ) -> Result<Option<String>, Error> {
        let at = PutAt::UnixMs(unix_ms_of(at));
        let mut names = self.put_all(vec![(data.into(), at)]).await?;
        Ok(names.pop().flatten())
    }

    /// Puts one item into a delay queue, takeable `delay` from now on.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "delay_queue"))]
    pub async fn put_delayed(
        &mut self,
        data: impl Into<Bytes>,
        delay: Duration,
    ) -> Result<Option<String>, Error> {
        self.put_at(data, SystemTime::now() + delay).await
    }

    /// Puts many items into a delay queue, each with its time, pipelined and batched, in
    /// order; waits for all of them.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "delay_queue"))]
    pub async fn put_many_at<I, D>(&mut self, items: I) -> Result<Vec<Option<String>>, Error>
    where
        I: IntoIterator<Item = (D, SystemTime)>,
        D: Into<Bytes>,
    {
        let items = items
            .into_iter()
            .map(|(d, at)| (d.into(), PutAt::UnixMs(unix_ms_of(at))))
            .collect();
        self.put_all(items).await
    }
}

#[form]
impl Client {
    /// A delay queue at `dir` (Curator `DistributedDelayQueue` compatible:
    /// `queue-|<time>|` items, framed as Curator's `ItemSerializer` frames them): an item
    /// is takeable from its time on. Take with [`Queue::take`] and the other takes.
    pub fn delay_queue(&self, dir: &str) -> Queue {
        self.queue_with(dir, Format::Delay)
    }
}
