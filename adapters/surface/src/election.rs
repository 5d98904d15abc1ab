//! Leader election: thin typed wrappers over the core
//! [`Election`] and [`Observer`]; what each call and event means is decided there (see
//! `zk_recipes::recipe::election`).

use std::time::{Duration, Instant};

use zk_recipes::recipe::election::observer::{Observer, ObserverEvent, Participant};
use zk_recipes::recipe::election::{
    CandidateStatus, Election, ElectionConfig, ElectionEvent, Join, Leadership,
};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Acl, Client, Handle};

/// How to stand for election; made by [`Client::election`].
#[must_use = "an election builder does nothing until joined"]
#[derive(Clone)]
pub struct ElectionBuilder {
    client: Client,
    config: ElectionConfig,
}

#[form]
impl ElectionBuilder {
    /// The directory where leaders acknowledge (default `<dir>-leader`; the leader
    /// with fencing token `t` creates `<ack_dir>/<t>`).
    pub fn ack_dir(mut self, dir: &str) -> Self {
        self.config.ack_dir = dir.into();
        self
    }

    /// ACL of our nodes and of parents we create.
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.config.acl = acl;
        self
    }

    /// Do not stand again by ourselves when a candidacy ends (session expired, node
    /// deleted): the candidate then ends with it.
    pub fn without_rejoin(mut self) -> Self {
        self.config.rejoin = false;
        self
    }

    /// Stands for election; returns once our node exists: in line behind every
    /// candidate that joined before.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "election", path = %self.config.dir))]
    pub async fn join(self) -> Result<Candidate, Error> {
        let mut c = Candidate {
            election: Handle::host(&self.client, Election::new(self.config))?,
            status: CandidateStatus::default(),
        };
        c.join().await?;
        Ok(c)
    }
}

/// A candidate: the guard of our candidacy. [`elected`](Self::elected) waits to lead;
/// act as leader only while [`is_leader`](Self::is_leader) (between `Elected` and the
/// next `Suspended`/`Lost`, see the core's module docs for the timing argument);
/// [`changed`](Self::changed) reports every event. Dropping it withdraws the candidacy
/// (without waiting).
pub struct Candidate {
    election: Handle<Election>,
    status: CandidateStatus,
}

#[form]
impl Candidate {
    fn fold(&mut self) -> &mut CandidateStatus {
        while let Some(e) = self.election.events.try_next() {
            self.status.apply(&e);
        }
        &mut self.status
    }

    /// Leading with the connection up: check before acting as leader.
    pub fn is_leader(&mut self) -> bool {
        self.fold().is_leader()
    }

    /// Where leadership stands now.
    pub fn leadership(&mut self) -> Leadership {
        self.fold().state()
    }

    /// The fencing token of the current (or last) leadership.
    pub fn fencing_token(&mut self) -> Option<i64> {
        self.fold().fencing_token()
    }

    /// The next event into the status; `Ok(false)` at the deadline, `Err(Finished)`
    /// once the candidate has ended.
    async fn next_event(&mut self, deadline: Option<Instant>) -> Result<bool, Error> {
        match self.election.events.next_until(deadline).await {
            Ok(Some(e)) => {
                self.status.apply(&e);
                Ok(true)
            }
            Ok(None) => Err(Error::Finished),
            Err(_) => Ok(false),
        }
    }

    /// Waits until we lead (elected, or back after a suspension); the leadership's
    /// fencing token. Fails when the candidacy ends for good.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "election"))]
    pub async fn elected(&mut self) -> Result<i64, Error> {
        loop {
            if let Some(outcome) = self.fold().elected_outcome() {
                return outcome;
            }
            self.next_event(None).await?;
        }
    }

    /// Like [`elected`](Self::elected), at most `timeout`: `Ok(None)` if we do not
    /// lead by then.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "election"))]
    pub async fn elected_timeout(&mut self, timeout: Duration) -> Result<Option<i64>, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(outcome) = self.fold().elected_outcome() {
                return outcome.map(Some);
            }
            if !self.next_event(Some(deadline)).await? {
                return Ok(None);
            }
        }
    }

    /// The next event, none skipped (in async code, use it in `select!` beside the
    /// leader's work); `None` once the candidate has ended and everything was reported.
    pub async fn changed(&mut self) -> Option<ElectionEvent> {
        loop {
            if let Some(e) = self.fold().next_change() {
                return Some(e);
            }
            self.next_event(None).await.ok()?;
        }
    }

    /// The next event, none skipped, waiting at most `timeout`; `None` if nothing
    /// happened (or the candidate has ended and everything was reported).
    pub async fn changed_timeout(&mut self, timeout: Duration) -> Option<ElectionEvent> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(e) = self.fold().next_change() {
                return Some(e);
            }
            if !self.next_event(Some(deadline)).await.ok()? {
                return None;
            }
        }
    }

    async fn wait<T>(
        &mut self,
        outcome: impl Fn(&ElectionEvent) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        let status = &mut self.status;
        self.election
            .events
            .outcome_seen(|e| status.apply(e), outcome)
            .await
    }

    /// After the leader procedure: writes our acknowledgement (checked against our
    /// candidacy in one `multi`). Fails with [`Error::NotLeader`] if we do not lead.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "election"))]
    pub async fn acknowledge(&mut self) -> Result<i64, Error> {
        if !self.election.hosted.call(|e, now| e.acknowledge(now)).await? {
            return Err(Error::NotLeader);
        }
        self.wait(ElectionEvent::ack_outcome).await
    }

    /// Withdraws our candidacy and waits until our node is gone; [`join`](Self::join)
    /// stands again.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "election"))]
    pub async fn resign(&mut self) -> Result<(), Error> {
        self.resign_inner(false).await
    }

    /// Resigns and stands again at once, at the back of the line (lets another
    /// candidate lead).
    pub async fn requeue(&mut self) -> Result<(), Error> {
        self.resign_inner(true).await
    }

    async fn resign_inner(&mut self, rejoin: bool) -> Result<(), Error> {
        if self
            .election
            .hosted
            .call(move |e, now| e.resign(now, rejoin))
            .await?
        {
            self.wait(ElectionEvent::resign_outcome).await
        } else {
            Ok(())
        }
    }

    /// Stands again after [`resign`](Self::resign); returns once our node exists (in
    /// line behind every candidate that joined before).
    pub async fn join(&mut self) -> Result<(), Error> {
        match self.election.hosted.call(|e, now| e.join(now)).await? {
            Join::Pending => self.wait(ElectionEvent::join_outcome).await,
            Join::InLine => Ok(()),
            Join::Ended => Err(Error::Finished),
        }
    }

    /// Withdraws for good and waits until our nodes are gone.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "election"))]
    pub async fn close(mut self) -> Result<(), Error> {
        if self.fold().state() == Leadership::Ended {
            return Ok(());
        }
        self.election.hosted.call(|e, now| e.close(now)).await?;
        self.wait(ElectionEvent::close_outcome).await
    }

    #[only_async]
    /// Curator's `LeaderSelector`: each time we lead, runs `work(fencing_token)` and
    /// drops (cancels) it as soon as leadership is suspended or lost. When `work`
    /// finishes, leadership is given up: with `requeue` we stand again at the back of
    /// the line and carry on; without, we resign and return. With `requeue` it returns
    /// only with an error, once the candidacy ends for good (the session closed, say):
    /// spawn it, or `select!` it against your shutdown signal (dropping the future
    /// stops the work), as Curator's `autoRequeue` runs until the selector is closed.
    pub async fn lead<F, Fut>(&mut self, requeue: bool, mut work: F) -> Result<(), Error>
    where
        F: FnMut(i64) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        loop {
            let token = self.elected().await?;
            let finished = {
                let run = work(token);
                tokio::pin!(run);
                loop {
                    tokio::select! {
                        _ = &mut run => break true,
                        e = self.changed() => {
                            if e.is_none() || !self.status.is_leader() {
                                break false;
                            }
                        }
                    }
                }
            };
            if finished {
                if requeue {
                    self.requeue().await?;
                } else {
                    return self.resign().await;
                }
            }
        }
    }

    #[only_blocking]
    /// Curator's `LeaderSelector`: each time we lead, runs `work(candidate, token)` on
    /// this thread. A thread cannot be cancelled from outside: `work` must stop soon
    /// after [`is_leader`](Self::is_leader) turns false (check it between steps; the
    /// tokio adapter drops the future at that point). When `work` returns, leadership
    /// is given up: with `requeue` we stand again at the back of the line and carry on;
    /// without, we resign and return. With `requeue` it returns only with an error, once
    /// the candidacy ends for good (the session closed, say): run it on a thread of its
    /// own, as Curator's `autoRequeue` runs until the selector is closed.
    pub fn lead(
        &mut self,
        requeue: bool,
        mut work: impl FnMut(&mut Candidate, i64),
    ) -> Result<(), Error> {
        loop {
            let token = self.elected()?;
            work(self, token);
            if !self.is_leader() {
                continue; // lost while working: wait to lead again
            }
            if requeue {
                self.requeue()?;
            } else {
                return self.resign();
            }
        }
    }
}

/// Watches an election without standing in it; made by [`Client::election_observer`].
/// Its events (`next`: each leader change or acknowledgement after the first view;
/// `None` once closed) and its calls (`wait_for`, `leader`, `participants`,
/// `acknowledged`).
pub type ElectionObserver = Handle<Observer>;

#[form]
impl Handle<Observer> {
    /// Waits for the first event `done` accepts; `None` if the observer closed first.
    pub async fn wait_for(
        &mut self,
        done: impl Fn(&ObserverEvent) -> bool,
    ) -> Option<ObserverEvent> {
        self.events
            .wait(|_| {}, |e| done(e).then(|| e.clone()))
            .await
    }

    /// Like [`wait_for`](Self::wait_for), waiting at most `timeout`; `None` then.
    pub async fn wait_for_timeout(
        &mut self,
        done: impl Fn(&ObserverEvent) -> bool,
        timeout: Duration,
    ) -> Option<ObserverEvent> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.events.next_until(Some(deadline)).await {
                Ok(Some(e)) if done(&e) => return Some(e),
                Ok(Some(_)) => {}
                _ => return None,
            }
        }
    }

    /// The current leader.
    pub async fn leader(&self) -> Result<Option<Participant>, Error> {
        self.hosted.call(|o, _| o.leader().cloned()).await
    }

    /// The participants in election order, the leader first, as far as read (see
    /// `Observer::participants`).
    pub async fn participants(&self) -> Result<Vec<Participant>, Error> {
        self.hosted.call(|o, _| o.participants()).await
    }

    /// The current leader if it has acknowledged.
    pub async fn acknowledged(&self) -> Result<Option<Participant>, Error> {
        self.hosted.call(|o, _| o.acknowledged().cloned()).await
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        let _ = self.election.hosted.run(|e, now| e.close(now));
    }
}

#[form]
impl Client {
    /// Leader election in `dir` as `participant` (Curator `LeaderLatch` compatible).
    pub fn election(&self, dir: &str, participant: &str) -> ElectionBuilder {
        ElectionBuilder {
            client: self.clone(),
            config: ElectionConfig::new(
                dir,
                participant,
                (crate::random_seed(), crate::random_seed()),
            ),
        }
    }

    /// Observes the election in `dir` (leaders acknowledging in `<dir>-leader`).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "election_observer", path = %dir))]
    pub async fn election_observer(&self, dir: &str) -> Result<ElectionObserver, Error> {
        self.observe(Observer::new(dir)).await
    }

    /// Observes the election in `dir` whose leaders acknowledge in `ack_dir`.
    pub async fn election_observer_with_ack_dir(
        &self,
        dir: &str,
        ack_dir: &str,
    ) -> Result<ElectionObserver, Error> {
        self.observe(Observer::with_ack_dir(dir, ack_dir)).await
    }

    async fn observe(&self, observer: Observer) -> Result<ElectionObserver, Error> {
        let mut observer = Handle::host(self, observer)?;
        observer.hosted.call(|o, now| o.start(now)).await?;
        // The first view (its `Leader` event) is in before we return.
        match observer.next().await {
            Some(ObserverEvent::Failed { error }) => Err(error),
            Some(_) => Ok(observer),
            None => Err(Error::Finished),
        }
    }
}
