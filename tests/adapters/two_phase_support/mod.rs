//! Two-phase commit through either adapter: a small trait over what the scenarios in
//! `tests/two_phase_adapters.rs` need, implemented by the blocking adapter directly and
//! by the tokio adapter on a shared runtime.
#![allow(dead_code)]
// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use zk_recipes::client::Error;
use zk_recipes::recipe::two_phase::{Outcome, Variant, Vote, VoteOutcome};

pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// A running transaction (the coordinator's handle), either adapter's.
pub trait Coord: Send {
    /// The outcome within `within` (`Ok(None)`: not by then).
    fn outcome(&mut self, within: Duration) -> Result<Option<Outcome>, Error>;
}

/// A site's handle, either adapter's.
pub trait SiteH: Send {
    fn payload(&self) -> Option<Bytes>;
    fn voted(&self) -> Option<Vote>;
    fn vote(&mut self, vote: Vote) -> Result<VoteOutcome, Error>;
    fn outcome(&mut self, within: Duration) -> Result<Option<Outcome>, Error>;
}

pub trait Tpc: Clone + Send + Sync + 'static {
    const NAME: &'static str;
    fn connect(cs: &str, session: Duration) -> Result<Self, Error> {
        Self::connect_with(cs, session, true)
    }
    /// `renew`: start a new session after an expiry (else the client ends).
    fn connect_with(cs: &str, session: Duration, renew: bool) -> Result<Self, Error>;
    fn session_id(&self) -> i64;
    fn session_password(&self) -> Vec<u8>;
    fn close(&self);
    fn transaction(
        &self,
        tx: &str,
        sites: &[&str],
        variant: Variant,
        payload: &'static [u8],
        deadline: Duration,
    ) -> Result<Box<dyn Coord>, Error>;
    /// Joins as a site; returns once the transaction is known.
    fn site(&self, tx: &str, name: &str, variant: Variant) -> Result<Box<dyn SiteH>, Error>;
}

// ----- blocking -----

use zk_recipes_blocking as zb;

struct BCoord(zb::Transaction);

impl Coord for BCoord {
    fn outcome(&mut self, within: Duration) -> Result<Option<Outcome>, Error> {
        self.0.outcome_timeout(within)
    }
}

struct BSite(zb::TransactionSite);

impl SiteH for BSite {
    fn payload(&self) -> Option<Bytes> {
        self.0.payload().cloned()
    }
    fn voted(&self) -> Option<Vote> {
        self.0.voted()
    }
    fn vote(&mut self, vote: Vote) -> Result<VoteOutcome, Error> {
        self.0.vote(vote)
    }
    fn outcome(&mut self, within: Duration) -> Result<Option<Outcome>, Error> {
        self.0.outcome_timeout(within)
    }
}

impl Tpc for zb::Client {
    const NAME: &'static str = "blocking";
    fn connect_with(cs: &str, session: Duration, renew: bool) -> Result<Self, Error> {
        zb::connect(
            cs,
            zb::Options::default()
                .session_timeout(session)
                .renew_on_expiry(renew)
                .connect_timeout(Duration::from_secs(10)),
        )
    }
    fn session_id(&self) -> i64 {
        zb::Client::session_id(self)
    }
    fn session_password(&self) -> Vec<u8> {
        zb::Client::session_password(self)
    }
    fn close(&self) {
        zb::Client::close(self)
    }
    fn transaction(
        &self,
        tx: &str,
        sites: &[&str],
        variant: Variant,
        payload: &'static [u8],
        deadline: Duration,
    ) -> Result<Box<dyn Coord>, Error> {
        let t = zb::Client::transaction(self, tx, sites, variant)
            .payload(payload)
            .deadline(deadline)
            .start()?;
        Ok(Box::new(BCoord(t)))
    }
    fn site(&self, tx: &str, name: &str, variant: Variant) -> Result<Box<dyn SiteH>, Error> {
        Ok(Box::new(BSite(zb::Client::site(self, tx, name, variant)?)))
    }
}

// ----- tokio -----

use zk_recipes_tokio as zt;

struct TCoord(zt::Transaction);

impl Coord for TCoord {
    fn outcome(&mut self, within: Duration) -> Result<Option<Outcome>, Error> {
        runtime().block_on(async {
            match tokio::time::timeout(within, self.0.outcome()).await {
                Ok(r) => r.map(Some),
                Err(_) => Ok(None),
            }
        })
    }
}

struct TSite(zt::TransactionSite);

impl SiteH for TSite {
    fn payload(&self) -> Option<Bytes> {
        self.0.payload().cloned()
    }
    fn voted(&self) -> Option<Vote> {
        self.0.voted()
    }
    fn vote(&mut self, vote: Vote) -> Result<VoteOutcome, Error> {
        runtime().block_on(self.0.vote(vote))
    }
    fn outcome(&mut self, within: Duration) -> Result<Option<Outcome>, Error> {
        runtime().block_on(async {
            match tokio::time::timeout(within, self.0.outcome()).await {
                Ok(r) => r.map(Some),
                Err(_) => Ok(None),
            }
        })
    }
}

impl Drop for TSite {
    fn drop(&mut self) {
        // Dropped inside the runtime's context, as an async user would.
        let _g = runtime().enter();
    }
}

impl Tpc for zt::Client {
    const NAME: &'static str = "tokio";
    fn connect_with(cs: &str, session: Duration, renew: bool) -> Result<Self, Error> {
        runtime().block_on(zt::connect(
            cs,
            zt::Options::default()
                .session_timeout(session)
                .renew_on_expiry(renew)
                .connect_timeout(Duration::from_secs(10)),
        ))
    }
    fn session_id(&self) -> i64 {
        zt::Client::session_id(self)
    }
    fn session_password(&self) -> Vec<u8> {
        zt::Client::session_password(self)
    }
    fn close(&self) {
        runtime().block_on(zt::Client::close(self))
    }
    fn transaction(
        &self,
        tx: &str,
        sites: &[&str],
        variant: Variant,
        payload: &'static [u8],
        deadline: Duration,
    ) -> Result<Box<dyn Coord>, Error> {
        let b = zt::Client::transaction(self, tx, sites, variant)
            .payload(payload)
            .deadline(deadline);
        Ok(Box::new(TCoord(runtime().block_on(b.start())?)))
    }
    fn site(&self, tx: &str, name: &str, variant: Variant) -> Result<Box<dyn SiteH>, Error> {
        let s = runtime().block_on(zt::Client::site(self, tx, name, variant))?;
        Ok(Box::new(TSite(s)))
    }
}
