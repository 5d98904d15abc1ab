//! Two-phase commit: thin typed wrappers over the core
//! [`Coordinator`] and [`Site`]; what each call and event means is decided there (see
//! `zk_recipes::recipe::two_phase`: node layout, decision rule, failure handling).

use std::time::{Duration, Instant};

use bytes::Bytes;
use zk_recipes::recipe::two_phase::{
    Coordinator, CoordinatorConfig, CoordinatorEvent, Outcome, Site, SiteConfig, SiteStatus,
    Variant, Vote, VoteOutcome,
};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Acl, Client, Handle};

/// A transaction to coordinate; made by [`Client::transaction`].
#[must_use = "a transaction builder does nothing until started"]
#[derive(Clone)]
pub struct TransactionBuilder {
    client: Client,
    config: CoordinatorConfig,
}

#[form]
impl TransactionBuilder {
    /// The transaction itself, given to every site (`<tx>/payload`).
    pub fn payload(mut self, payload: impl Into<Bytes>) -> Self {
        self.config.payload = payload.into();
        self
    }

    /// How long a site that has not voted may be absent before the transaction aborts
    /// (default 10 s after the start).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.config.deadline = deadline;
        self
    }

    /// Abort if not every vote is in by then, present or not (default: wait for live
    /// sites).
    pub fn vote_timeout(mut self, timeout: Duration) -> Self {
        self.config.vote_timeout = Some(timeout);
        self
    }

    /// ACL of the transaction's nodes and of parents we create.
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.config.acl = acl;
        self
    }

    /// Creates the transaction (one `multi`) and returns once it exists: sites may vote.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "two_phase", path = %self.config.tx))]
    pub async fn start(self) -> Result<Transaction, Error> {
        let mut t = Transaction {
            coordinator: Handle::host(&self.client, Coordinator::new(self.config))?,
            outcome: None,
        };
        t.coordinator.hosted.call(|c, now| c.start(now)).await?;
        t.wait(CoordinatorEvent::started_outcome).await?;
        Ok(t)
    }
}

/// A running transaction, as its coordinator. Dropping it before the outcome is known
/// writes `abort`.
pub struct Transaction {
    coordinator: Handle<Coordinator>,
    outcome: Option<Result<Outcome, Error>>,
}

#[form]
impl Transaction {
    async fn wait<T>(
        &mut self,
        done: impl Fn(&CoordinatorEvent) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.wait_until(done, None)
            .await
            .unwrap_or(Err(Error::Finished))
    }

    /// Waits for `done`'s answer until `deadline`: `None` at the deadline.
    async fn wait_until<T>(
        &mut self,
        done: impl Fn(&CoordinatorEvent) -> Option<Result<T, Error>>,
        deadline: Option<Instant>,
    ) -> Option<Result<T, Error>> {
        let outcome = &mut self.outcome;
        let seen = |e: &CoordinatorEvent| {
            if let Some(o) = e.outcome() {
                *outcome = Some(o);
            }
        };
        match self.coordinator.events.wait_until(seen, done, deadline).await {
            Ok(r) => Some(r.unwrap_or(Err(Error::Finished))),
            Err(_) => None,
        }
    }

    /// Waits for the outcome (written once in the transaction node: every site learns
    /// the same).
    pub async fn outcome(&mut self) -> Result<Outcome, Error> {
        if let Some(o) = self.outcome.clone() {
            return o;
        }
        self.wait(CoordinatorEvent::outcome).await
    }

    /// Like [`outcome`](Self::outcome), at most `timeout`: `Ok(None)` if not decided by
    /// then.
    pub async fn outcome_timeout(&mut self, timeout: Duration) -> Result<Option<Outcome>, Error> {
        if let Some(o) = self.outcome.clone() {
            return o.map(Some);
        }
        let deadline = Instant::now() + timeout;
        self.wait_until(CoordinatorEvent::outcome, Some(deadline))
            .await
            .transpose()
    }

    /// The next event (`Voted` per site, then `Decided`); `None` once it has ended.
    pub async fn next_event(&mut self) -> Option<CoordinatorEvent> {
        let e = self.coordinator.events.next().await?;
        if let Some(o) = e.outcome() {
            self.outcome = Some(o);
        }
        Some(e)
    }

    /// The votes seen so far, by site.
    pub async fn votes(&self) -> Result<Vec<(String, Option<Vote>)>, Error> {
        self.coordinator.hosted
            .call(|c, _| c.votes().map(|(s, v)| (s.to_string(), v)).collect())
            .await
    }
}

/// A site of a running transaction; made by [`Client::site`]. Dropping it before it
/// voted votes `abort`.
pub struct TransactionSite {
    site: Handle<Site>,
    status: SiteStatus,
}

#[form]
impl TransactionSite {
    async fn wait<T>(
        &mut self,
        done: impl Fn(&SiteStatus) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.wait_until(done, None)
            .await
            .unwrap_or(Err(Error::Finished))
    }

    /// Waits for `done`'s answer until `deadline`: `None` at the deadline.
    async fn wait_until<T>(
        &mut self,
        done: impl Fn(&SiteStatus) -> Option<Result<T, Error>>,
        deadline: Option<Instant>,
    ) -> Option<Result<T, Error>> {
        loop {
            while let Some(e) = self.site.events.try_next() {
                self.status.apply(&e);
            }
            if let Some(r) = done(&self.status) {
                return Some(r);
            }
            match self.site.events.next_until(deadline).await {
                Ok(Some(e)) => self.status.apply(&e),
                Ok(None) => return Some(done(&self.status).unwrap_or(Err(Error::Finished))),
                Err(_) => return None,
            }
        }
    }

    /// The transaction's payload (`None` only for a site that joined after the
    /// decision).
    pub fn payload(&self) -> Option<&Bytes> {
        self.status.payload()
    }

    /// Our vote, if written (an earlier incarnation's after a restart).
    pub fn voted(&self) -> Option<Vote> {
        self.status.vote()
    }

    /// Votes (once: a vote is never changed) and waits until it is written, or the
    /// transaction was decided without it.
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "two_phase_site"))]
    pub async fn vote(&mut self, vote: Vote) -> Result<VoteOutcome, Error> {
        while let Some(e) = self.site.events.try_next() {
            self.status.apply(&e);
        }
        if let Some(r) = self.status.vote_outcome() {
            return r; // voted before, or decided (or failed) already
        }
        match self.site.hosted.call(move |s, now| s.vote(now, vote)).await {
            Ok(_) | Err(Error::Finished) => {} // a finished site has told why
            Err(e) => return Err(e),
        }
        self.wait(SiteStatus::vote_outcome).await
    }

    /// Waits for the outcome.
    pub async fn outcome(&mut self) -> Result<Outcome, Error> {
        self.wait(SiteStatus::outcome_result).await
    }

    /// Like [`outcome`](Self::outcome), at most `timeout`: `Ok(None)` if not decided by
    /// then.
    pub async fn outcome_timeout(&mut self, timeout: Duration) -> Result<Option<Outcome>, Error> {
        let deadline = Instant::now() + timeout;
        self.wait_until(SiteStatus::outcome_result, Some(deadline))
            .await
            .transpose()
    }
}

#[form]
impl Client {
    /// Coordinates a two-phase commit at `tx` among `sites` (see
    /// `zk_recipes::recipe::two_phase`).
    pub fn transaction(&self, tx: &str, sites: &[&str], variant: Variant) -> TransactionBuilder {
        let entropy = (crate::random_seed(), crate::random_seed());
        TransactionBuilder {
            client: self.clone(),
            config: CoordinatorConfig::new(tx, sites, variant, entropy),
        }
    }

    /// Takes part in the two-phase commit at `tx` as site `name` (the coordinator's
    /// variant); returns once the transaction is known (waiting for it to be created).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "two_phase_site", path = %tx))]
    pub async fn site(
        &self,
        tx: &str,
        name: &str,
        variant: Variant,
    ) -> Result<TransactionSite, Error> {
        let machine = Site::new(SiteConfig::new(tx, name, variant));
        let mut site = TransactionSite {
            site: Handle::host(self, machine)?,
            status: SiteStatus::default(),
        };
        site.site.hosted.call(|s, now| s.start(now)).await?;
        site.wait(SiteStatus::ready_outcome).await?;
        Ok(site)
    }
}
