//! Distributed queues: thin typed wrappers over the core
//! [`Producer`] and [`Consumer`]; what each call and event means is decided there (see
//! `zk_recipes::recipe::queue`).

use bytes::Bytes;
use std::time::Duration;
use zk_recipes::recipe::queue::{
    Consumer, ConsumerConfig, ConsumerEvent, Delivery, Format, Item, Producer, ProducerConfig,
    PutsWait,
};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle, Hosted};

/// How one item is put: at once with the default priority, with a priority (a priority
/// queue), or takeable from a time in Unix milliseconds (a delay queue).
#[derive(Clone, Copy, Debug)]
pub(crate) enum PutAt {
    Now,
    Priority(u16),
    UnixMs(u64),
}

/// A queue handle, made by [`Client::queue`], [`Client::priority_queue`] or
/// [`Client::delay_queue`]. Puts and
/// takes host their machines on first use; dropping the handle ends them (items
/// claimed at least once and not completed are released).
pub struct Queue {
    client: Client,
    dir: String,
    format: Format,
    ephemeral: bool,
    producer: Option<Hosted<Producer>>,
    consumer: Option<Taker>,
    claimer: Option<Taker>,
}

/// A consumer with its events since it was made (so an outcome whose caller was
/// cancelled stays readable) and the items such outcomes brought: the next take gets
/// them first, nothing taken is dropped unseen.
struct Taker {
    consumer: Handle<Consumer>,
    stash: std::collections::VecDeque<Item>,
}

#[form]
impl Taker {
    /// Up to `max` items left by cancelled takes, if there are any.
    fn stashed(&mut self, max: usize) -> Option<Vec<Item>> {
        let n = max.clamp(1, self.stash.len().max(1));
        (!self.stash.is_empty()).then(|| self.stash.drain(..n).collect())
    }
}

/// Gives a take up in the core if its future is dropped before its outcome.
struct CancelTake {
    hosted: Hosted<Consumer>,
    take: Option<zk_recipes::recipe::queue::TakeId>,
}

impl Drop for CancelTake {
    fn drop(&mut self) {
        if let Some(id) = self.take {
            let _ = self.hosted.run(move |c, now| {
                c.cancel_take(now, id);
            });
        }
    }
}

/// An item held at least once ([`Queue::take_claimed`]): [`complete`](Self::complete)
/// it once processed. Dropping it releases the claim (another consumer takes the item).
pub struct Claimed {
    item: Item,
    hosted: Hosted<Consumer>,
    settled: bool,
}

#[form]
impl Claimed {
    /// The item.
    pub fn item(&self) -> &Item {
        &self.item
    }

    /// Its data.
    pub fn data(&self) -> &Bytes {
        &self.item.data
    }

    async fn settle(mut self, complete: bool) -> Result<(), Error> {
        self.settled = true;
        let name = self.item.name.clone();
        let n = name.clone();
        let (r, mut events) = self
            .hosted
            .call_subscribed(move |c, now| {
                if complete {
                    c.complete(now, &n)
                } else {
                    c.release(now, &n)
                }
            })
            .await?;
        r?;
        events.outcome(|e| e.settle_outcome(&name)).await
    }

    /// Deletes the item and our claim in one transaction.
    pub async fn complete(self) -> Result<(), Error> {
        self.settle(true).await
    }

    /// Gives the item back: deletes our claim only.
    pub async fn release(self) -> Result<(), Error> {
        self.settle(false).await
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if !self.settled {
            let name = self.item.name.clone();
            let _ = self.hosted.run(move |c, now| {
                let _ = c.release(now, &name);
            });
        }
    }
}

#[form]
impl Queue {
    /// Items vanish with this client's session (`EPHEMERAL_SEQUENTIAL`); call before the
    /// first put.
    pub fn ephemeral(mut self) -> Self {
        self.ephemeral = true;
        self
    }

    fn producer(&mut self) -> Result<&Hosted<Producer>, Error> {
        if self.producer.is_none() {
            let mut config = ProducerConfig::new(&self.dir, &crate::node_id());
            config.format = self.format;
            config.ephemeral = self.ephemeral;
            let (hosted, _events) = Hosted::new(&self.client, Producer::new(config))?;
            self.producer = Some(hosted);
        }
        self.producer.as_ref().ok_or(Error::Finished)
    }

    fn consumer(&mut self, delivery: Delivery) -> Result<&mut Taker, Error> {
        let slot = match delivery {
            Delivery::AtMostOnce => &mut self.consumer,
            Delivery::AtLeastOnce => &mut self.claimer,
        };
        if slot.is_none() {
            let mut config = ConsumerConfig::new(&self.dir, &crate::node_id());
            config.format = self.format;
            config.delivery = delivery;
            config.spread = crate::random_seed();
            *slot = Some(Taker {
                consumer: Handle::host(&self.client, Consumer::new(config))?,
                stash: Default::default(),
            });
        }
        slot.as_mut().ok_or(Error::Finished)
    }

    /// Puts one item (default priority in a priority queue); its name once the server
    /// answered (`None` if only recovery after a lost reply confirmed it).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "queue", path = %self.dir))]
    pub async fn put(&mut self, data: impl Into<Bytes>) -> Result<Option<String>, Error> {
        let mut names = self.put_many_priority(vec![(data.into(), None)]).await?;
        Ok(names.pop().flatten())
    }

    /// Puts one item with `priority` (0..=999, lower first) into a priority queue.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "queue", path = %self.dir))]
    pub async fn put_priority(
        &mut self,
        data: impl Into<Bytes>,
        priority: u16,
    ) -> Result<Option<String>, Error> {
        let mut names = self
            .put_many_priority(vec![(data.into(), Some(priority))])
            .await?;
        Ok(names.pop().flatten())
    }

    /// Puts many items, pipelined and batched, in order; waits for all of them.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "queue", path = %self.dir))]
    pub async fn put_many<I, D>(&mut self, items: I) -> Result<Vec<Option<String>>, Error>
    where
        I: IntoIterator<Item = D>,
        D: Into<Bytes>,
    {
        let items = items.into_iter().map(|d| (d.into(), None)).collect();
        self.put_many_priority(items).await
    }

    async fn put_many_priority(
        &mut self,
        items: Vec<(Bytes, Option<u16>)>,
    ) -> Result<Vec<Option<String>>, Error> {
        let items = items
            .into_iter()
            .map(|(data, prio)| (data, prio.map_or(PutAt::Now, PutAt::Priority)))
            .collect();
        self.put_all(items).await
    }

    /// Puts items, each with its priority or its time (a delay queue), in order.
    pub(crate) async fn put_all(
        &mut self,
        items: Vec<(Bytes, PutAt)>,
    ) -> Result<Vec<Option<String>>, Error> {
        let n = items.len();
        let (first, mut events) = self
            .producer()?
            .call_subscribed(move |p, now| {
                let mut first = None;
                for (data, at) in items {
                    let id = match at {
                        PutAt::Now => p.put(now, data)?,
                        PutAt::Priority(prio) => p.put_with_priority(now, data, prio)?,
                        PutAt::UnixMs(ms) => p.put_at(now, data, ms)?,
                    };
                    first.get_or_insert(id);
                }
                Ok::<_, Error>(first)
            })
            .await?;
        let Some(first) = first? else {
            return Ok(Vec::new());
        };
        let mut wait = PutsWait::new(first, n);
        events.outcome(|e| wait.feed(e)).await
    }

    async fn take_inner(
        &mut self,
        delivery: Delivery,
        max: usize,
        wait: Option<Duration>,
    ) -> Result<Vec<Item>, Error> {
        let taker = self.consumer(delivery)?;
        if let Some(items) = taker.stashed(max) {
            return Ok(items);
        }
        let id = taker
            .consumer
            .hosted
            .call(move |c, now| {
                // A delay queue compares its items' times with this clock.
                c.set_clock(now, crate::unix_ms());
                c.take(now, max, wait.map(|w| now + w))
            })
            .await?;
        let mut cancel = CancelTake {
            hosted: taker.consumer.hosted.clone(),
            take: Some(id),
        };
        let stash = &mut taker.stash;
        let outcome = taker
            .consumer
            .events
            .outcome_seen(
                |e| {
                    // An earlier take whose caller was cancelled: its items are the
                    // next caller's.
                    if let ConsumerEvent::Taken { take, items } = e {
                        if *take != id {
                            stash.extend(items.iter().cloned());
                        }
                    }
                },
                |e: &ConsumerEvent| e.take_outcome(id),
            )
            .await;
        cancel.take = None;
        match outcome {
            // Nothing came for us, but a cancelled take's items did meanwhile.
            Ok(items) if items.is_empty() => Ok(taker.stashed(max).unwrap_or_default()),
            other => other,
        }
    }

    /// Takes the next item, waiting as long as it takes (at most once: it is deleted).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "queue", path = %self.dir))]
    pub async fn take(&mut self) -> Result<Item, Error> {
        loop {
            if let Some(item) = self.take_inner(Delivery::AtMostOnce, 1, None).await?.pop() {
                return Ok(item);
            }
        }
    }

    /// Takes the next item, waiting at most `wait`; `None` if none came.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "queue", path = %self.dir))]
    pub async fn take_timeout(&mut self, wait: Duration) -> Result<Option<Item>, Error> {
        Ok(self
            .take_inner(Delivery::AtMostOnce, 1, Some(wait))
            .await?
            .pop())
    }

    /// Takes up to `k` items in order (at least one, waiting as long as it takes), in
    /// one round of requests where the queue allows.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "queue", path = %self.dir))]
    pub async fn take_batch(&mut self, k: usize) -> Result<Vec<Item>, Error> {
        loop {
            let items = self.take_inner(Delivery::AtMostOnce, k, None).await?;
            if !items.is_empty() {
                return Ok(items);
            }
        }
    }

    /// Takes up to `k` items, waiting at most `wait` (empty if none came).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "queue", path = %self.dir))]
    pub async fn take_batch_timeout(
        &mut self,
        k: usize,
        wait: Duration,
    ) -> Result<Vec<Item>, Error> {
        self.take_inner(Delivery::AtMostOnce, k, Some(wait)).await
    }

    /// Claims the next item at least once: it stays in the queue, held by our ephemeral
    /// claim, until [`Claimed::complete`]. If this session dies first, another consumer
    /// takes it.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "queue", path = %self.dir))]
    pub async fn take_claimed(&mut self) -> Result<Claimed, Error> {
        loop {
            if let Some(item) = self.take_inner(Delivery::AtLeastOnce, 1, None).await?.pop() {
                return self.claimed(item);
            }
        }
    }

    /// [`take_claimed`](Self::take_claimed), waiting at most `wait`.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "queue", path = %self.dir))]
    pub async fn take_claimed_timeout(&mut self, wait: Duration) -> Result<Option<Claimed>, Error> {
        match self
            .take_inner(Delivery::AtLeastOnce, 1, Some(wait))
            .await?
            .pop()
        {
            Some(item) => Ok(Some(self.claimed(item)?)),
            None => Ok(None),
        }
    }

    fn claimed(&mut self, item: Item) -> Result<Claimed, Error> {
        Ok(Claimed {
            item,
            hosted: self.consumer(Delivery::AtLeastOnce)?.consumer.hosted.clone(),
            settled: false,
        })
    }
}

#[form]
impl Client {
    /// A FIFO queue at `dir` (Curator `SimpleDistributedQueue` compatible: `qn-` items).
    pub fn queue(&self, dir: &str) -> Queue {
        self.queue_with(dir, Format::Fifo)
    }

    /// A priority queue at `dir` (kazoo `Queue` compatible: `entry-<ppp>-` items).
    pub fn priority_queue(&self, dir: &str) -> Queue {
        self.queue_with(dir, Format::Priority)
    }

    pub(crate) fn queue_with(&self, dir: &str, format: Format) -> Queue {
        Queue {
            client: self.clone(),
            dir: dir.into(),
            format,
            ephemeral: false,
            producer: None,
            consumer: None,
            claimer: None,
        }
    }
}
