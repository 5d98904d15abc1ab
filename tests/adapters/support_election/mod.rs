//! Leader election, both adapters: a small trait over what the election scenarios need,
//! implemented by the blocking adapter directly and by the tokio adapter on a shared
//! runtime (the pattern of `tests/support/mod.rs`). The scenarios are written once in
//! `tests/election_both.rs`.
#![allow(dead_code)]
// A driver owns the clock.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use zk_recipes::client::{Error, Status};
use zk_recipes::recipe::election::observer::{ObserverEvent, Participant};
use zk_recipes::recipe::election::{ElectionEvent, Leadership};

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

/// What a `lead()` work run reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Run {
    /// The work started with this token.
    Started(&'static str, i64),
    /// The work returned by itself (asked to finish).
    Finished(&'static str, i64),
    /// The work was stopped because leadership went: dropped (tokio) or saw
    /// `is_leader() == false` (blocking).
    Stopped(&'static str, i64),
}

/// The leader's work in the `lead()` scenarios: runs until asked to finish (`finish`
/// is consumed) or until leadership goes; logs what happened.
#[derive(Clone)]
pub struct Work {
    pub name: &'static str,
    pub log: Arc<Mutex<Vec<Run>>>,
    pub finish: Arc<AtomicBool>,
}

impl Work {
    fn push(&self, r: Run) {
        self.log.lock().unwrap().push(r);
    }
}

/// A candidate, either adapter's.
pub trait Cand: Send {
    /// `Ok(Some(token))` leading, `Ok(None)` not within `within`, `Err` ended.
    fn wait_elected(&mut self, within: Duration) -> Result<Option<i64>, Error>;
    fn is_leader(&mut self) -> bool;
    fn leadership(&mut self) -> Leadership;
    fn fencing_token(&mut self) -> Option<i64>;
    fn changed(&mut self, within: Duration) -> Option<ElectionEvent>;
    fn acknowledge(&mut self) -> Result<i64, Error>;
    fn resign(&mut self) -> Result<(), Error>;
    fn requeue(&mut self) -> Result<(), Error>;
    fn join(&mut self) -> Result<(), Error>;
    fn close(self: Box<Self>) -> Result<(), Error>;
    /// The adapter's `lead(requeue, work)` with [`Work`] as the work.
    fn lead(&mut self, requeue: bool, work: Work) -> Result<(), Error>;
}

/// An election observer, either adapter's.
pub trait Obs: Send {
    fn wait_for(
        &mut self,
        within: Duration,
        done: &dyn Fn(&ObserverEvent) -> bool,
    ) -> Option<ObserverEvent>;
    fn leader(&self) -> Result<Option<Participant>, Error>;
    fn participants(&self) -> Result<Vec<Participant>, Error>;
    fn acknowledged(&self) -> Result<Option<Participant>, Error>;
}

/// What the election scenarios do with a client.
pub trait Zk: Clone + Send + Sync + 'static {
    const NAME: &'static str;
    fn connect_with(cs: &str, session: Duration, renew: bool) -> Result<Self, Error>;
    fn connect(cs: &str) -> Result<Self, Error> {
        Self::connect_with(cs, Duration::from_secs(6), true)
    }
    fn status(&self) -> Status;
    /// Waits for a status satisfying `done`, every transition seen.
    fn wait_status(&self, within: Duration, done: fn(&Status) -> bool) -> Option<Status>;
    fn session_id(&self) -> i64;
    fn session_password(&self) -> Vec<u8>;
    /// `client.election(dir, id).join()`.
    fn candidate(&self, dir: &str, id: &str) -> Result<Box<dyn Cand>, Error>;
    /// `client.election(dir, id).without_rejoin().join()`.
    fn candidate_without_rejoin(&self, dir: &str, id: &str) -> Result<Box<dyn Cand>, Error>;
    fn observer(&self, dir: &str) -> Result<Box<dyn Obs>, Error>;
    fn get_children(&self, path: &str) -> Result<Vec<String>, Error>;
    fn exists(&self, path: &str) -> Result<bool, Error>;
    fn delete(&self, path: &str) -> Result<(), Error>;
    fn get_data(&self, path: &str) -> Result<Bytes, Error>;
    fn close(&self);
}

// ----- blocking -----

use zk_recipes_blocking as zb;

impl Cand for zb::Candidate {
    fn wait_elected(&mut self, within: Duration) -> Result<Option<i64>, Error> {
        self.elected_timeout(within)
    }
    fn is_leader(&mut self) -> bool {
        zb::Candidate::is_leader(self)
    }
    fn leadership(&mut self) -> Leadership {
        zb::Candidate::leadership(self)
    }
    fn fencing_token(&mut self) -> Option<i64> {
        zb::Candidate::fencing_token(self)
    }
    fn changed(&mut self, within: Duration) -> Option<ElectionEvent> {
        self.changed_timeout(within)
    }
    fn acknowledge(&mut self) -> Result<i64, Error> {
        zb::Candidate::acknowledge(self)
    }
    fn resign(&mut self) -> Result<(), Error> {
        zb::Candidate::resign(self)
    }
    fn requeue(&mut self) -> Result<(), Error> {
        zb::Candidate::requeue(self)
    }
    fn join(&mut self) -> Result<(), Error> {
        zb::Candidate::join(self)
    }
    fn close(self: Box<Self>) -> Result<(), Error> {
        zb::Candidate::close(*self)
    }
    fn lead(&mut self, requeue: bool, work: Work) -> Result<(), Error> {
        zb::Candidate::lead(self, requeue, |c, token| {
            work.push(Run::Started(work.name, token));
            loop {
                if !c.is_leader() {
                    work.push(Run::Stopped(work.name, token));
                    return;
                }
                if work.finish.swap(false, Ordering::SeqCst) {
                    work.push(Run::Finished(work.name, token));
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    }
}

impl Obs for zb::ElectionObserver {
    fn wait_for(
        &mut self,
        within: Duration,
        done: &dyn Fn(&ObserverEvent) -> bool,
    ) -> Option<ObserverEvent> {
        zb::ElectionObserver::wait_for_timeout(self, done, within)
    }
    fn leader(&self) -> Result<Option<Participant>, Error> {
        zb::ElectionObserver::leader(self)
    }
    fn participants(&self) -> Result<Vec<Participant>, Error> {
        zb::ElectionObserver::participants(self)
    }
    fn acknowledged(&self) -> Result<Option<Participant>, Error> {
        zb::ElectionObserver::acknowledged(self)
    }
}

impl Zk for zb::Client {
    const NAME: &'static str = "blocking";
    fn connect_with(cs: &str, session: Duration, renew: bool) -> Result<Self, Error> {
        zb::connect(
            cs,
            zb::Options::default()
                .session_timeout(session)
                .renew_on_expiry(renew)
                .connect_timeout(Duration::from_secs(10))
                .call_timeout(Duration::from_secs(5)),
        )
    }
    fn status(&self) -> Status {
        zb::Client::status(self)
    }
    fn wait_status(&self, within: Duration, done: fn(&Status) -> bool) -> Option<Status> {
        let mut s = self.status_stream();
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            match s.next_timeout(left) {
                Ok(st) if done(&st) => return Some(st),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
    fn session_id(&self) -> i64 {
        zb::Client::session_id(self)
    }
    fn session_password(&self) -> Vec<u8> {
        zb::Client::session_password(self)
    }
    fn candidate(&self, dir: &str, id: &str) -> Result<Box<dyn Cand>, Error> {
        Ok(Box::new(self.election(dir, id).join()?))
    }
    fn candidate_without_rejoin(&self, dir: &str, id: &str) -> Result<Box<dyn Cand>, Error> {
        Ok(Box::new(self.election(dir, id).without_rejoin().join()?))
    }
    fn observer(&self, dir: &str) -> Result<Box<dyn Obs>, Error> {
        Ok(Box::new(self.election_observer(dir)?))
    }
    fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        zb::Client::get_children(self, path)
    }
    fn exists(&self, path: &str) -> Result<bool, Error> {
        Ok(zb::Client::exists(self, path)?.is_some())
    }
    fn delete(&self, path: &str) -> Result<(), Error> {
        zb::Client::delete(self, path, None)
    }
    fn get_data(&self, path: &str) -> Result<Bytes, Error> {
        Ok(zb::Client::get_data(self, path)?.0)
    }
    fn close(&self) {
        zb::Client::close(self)
    }
}

// ----- tokio -----

use zk_recipes_tokio as zt;

fn within<T>(d: Duration, f: impl std::future::Future<Output = T>) -> Option<T> {
    runtime().block_on(async { tokio::time::timeout(d, f).await.ok() })
}

/// Logs `Stopped` when the work future is dropped before it finished.
struct StopGuard(Option<(Work, i64)>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        if let Some((w, token)) = self.0.take() {
            w.push(Run::Stopped(w.name, token));
        }
    }
}

impl Cand for zt::Candidate {
    fn wait_elected(&mut self, d: Duration) -> Result<Option<i64>, Error> {
        within(d, self.elected()).transpose()
    }
    fn is_leader(&mut self) -> bool {
        zt::Candidate::is_leader(self)
    }
    fn leadership(&mut self) -> Leadership {
        zt::Candidate::leadership(self)
    }
    fn fencing_token(&mut self) -> Option<i64> {
        zt::Candidate::fencing_token(self)
    }
    fn changed(&mut self, d: Duration) -> Option<ElectionEvent> {
        within(d, zt::Candidate::changed(self)).flatten()
    }
    fn acknowledge(&mut self) -> Result<i64, Error> {
        runtime().block_on(zt::Candidate::acknowledge(self))
    }
    fn resign(&mut self) -> Result<(), Error> {
        runtime().block_on(zt::Candidate::resign(self))
    }
    fn requeue(&mut self) -> Result<(), Error> {
        runtime().block_on(zt::Candidate::requeue(self))
    }
    fn join(&mut self) -> Result<(), Error> {
        runtime().block_on(zt::Candidate::join(self))
    }
    fn close(self: Box<Self>) -> Result<(), Error> {
        runtime().block_on(zt::Candidate::close(*self))
    }
    fn lead(&mut self, requeue: bool, work: Work) -> Result<(), Error> {
        runtime().block_on(zt::Candidate::lead(self, requeue, |token| {
            let w = work.clone();
            async move {
                w.push(Run::Started(w.name, token));
                let mut guard = StopGuard(Some((w.clone(), token)));
                loop {
                    if w.finish.swap(false, Ordering::SeqCst) {
                        guard.0 = None;
                        w.push(Run::Finished(w.name, token));
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }))
    }
}

impl Obs for zt::ElectionObserver {
    fn wait_for(
        &mut self,
        d: Duration,
        done: &dyn Fn(&ObserverEvent) -> bool,
    ) -> Option<ObserverEvent> {
        within(d, zt::ElectionObserver::wait_for(self, done)).flatten()
    }
    fn leader(&self) -> Result<Option<Participant>, Error> {
        runtime().block_on(zt::ElectionObserver::leader(self))
    }
    fn participants(&self) -> Result<Vec<Participant>, Error> {
        runtime().block_on(zt::ElectionObserver::participants(self))
    }
    fn acknowledged(&self) -> Result<Option<Participant>, Error> {
        runtime().block_on(zt::ElectionObserver::acknowledged(self))
    }
}

impl Zk for zt::Client {
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
    fn status(&self) -> Status {
        zt::Client::status(self)
    }
    fn wait_status(&self, d: Duration, done: fn(&Status) -> bool) -> Option<Status> {
        let mut s = self.status_stream();
        within(d, s.wait_for(done)).flatten()
    }
    fn session_id(&self) -> i64 {
        zt::Client::session_id(self)
    }
    fn session_password(&self) -> Vec<u8> {
        zt::Client::session_password(self)
    }
    fn candidate(&self, dir: &str, id: &str) -> Result<Box<dyn Cand>, Error> {
        Ok(Box::new(runtime().block_on(self.election(dir, id).join())?))
    }
    fn candidate_without_rejoin(&self, dir: &str, id: &str) -> Result<Box<dyn Cand>, Error> {
        Ok(Box::new(runtime().block_on(
            self.election(dir, id).without_rejoin().join(),
        )?))
    }
    fn observer(&self, dir: &str) -> Result<Box<dyn Obs>, Error> {
        Ok(Box::new(runtime().block_on(self.election_observer(dir))?))
    }
    fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        runtime().block_on(zt::Client::get_children(self, path))
    }
    fn exists(&self, path: &str) -> Result<bool, Error> {
        Ok(runtime()
            .block_on(zt::Client::exists(self, path))?
            .is_some())
    }
    fn delete(&self, path: &str) -> Result<(), Error> {
        runtime().block_on(zt::Client::delete(self, path, None))
    }
    fn get_data(&self, path: &str) -> Result<Bytes, Error> {
        Ok(runtime().block_on(zt::Client::get_data(self, path))?.0)
    }
    fn close(&self) {
        runtime().block_on(zt::Client::close(self))
    }
}
