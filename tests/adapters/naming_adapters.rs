//! The name service against a real ZooKeeper 3.8 through both adapters: four workers
//! (two per adapter, each on its own session) take 250 ids each at once — 1,000
//! distinct ids, increasing per worker, above every id given before; once one id per
//! call, once 250 per call (pipelined); ids/s of both printed on one line; no node
//! left — and a name registered, watched,
//! resolved from another session, registered again after its session expired, and
//! unregistered.
#![allow(clippy::disallowed_methods)]

use crate::support;
use crate::support_group;

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::Bytes;
use support::{runtime, Zk};
use support_group::NodeH;
use zk_recipes::client::Error;
use zk_recipes::proto::{CreateMode, PathError, Stat};
use zk_recipes::recipe::lock::LostReason;
use zk_recipes::recipe::node::{NodeWatchEvent, OwnedNodeEvent};
use zk_recipes_testing::{expire_session, TestServer};

type B = zk_recipes_blocking::Client;
type T = zk_recipes_tokio::Client;

const W: Duration = Duration::from_secs(10);

/// An id generator, either adapter's.
trait Ids: Send {
    fn next_id(&mut self) -> Result<i64, Error>;
    fn next_ids(&mut self, n: usize) -> Result<Vec<i64>, Error>;
}

/// A name watch, either adapter's.
trait NameW: Send {
    fn next(&mut self, within: Duration) -> Option<NodeWatchEvent>;
}

impl NameW for zk_recipes_blocking::NodeWatchHandle {
    fn next(&mut self, within: Duration) -> Option<NodeWatchEvent> {
        self.next_timeout(within).ok().flatten()
    }
}

impl NameW for zk_recipes_tokio::NodeWatchHandle {
    fn next(&mut self, within: Duration) -> Option<NodeWatchEvent> {
        runtime()
            .block_on(async {
                tokio::time::timeout(within, zk_recipes_tokio::NodeWatchHandle::next(self)).await
            })
            .ok()
            .flatten()
    }
}

/// The name service calls, either adapter's.
trait NamingZk: Zk {
    fn ids(&self, dir: &str) -> Box<dyn Ids>;
    fn register(
        &self,
        dir: &str,
        name: &str,
        data: &'static str,
        mode: CreateMode,
    ) -> Result<Box<dyn NodeH>, Error>;
    fn resolve(&self, dir: &str, name: &str) -> Result<Option<(Bytes, Stat)>, Error>;
    fn watch(&self, dir: &str, name: &str) -> Box<dyn NameW>;
}

impl Ids for zk_recipes_blocking::IdGenerator {
    fn next_id(&mut self) -> Result<i64, Error> {
        zk_recipes_blocking::IdGenerator::next_id(self)
    }
    fn next_ids(&mut self, n: usize) -> Result<Vec<i64>, Error> {
        zk_recipes_blocking::IdGenerator::next_ids(self, n)
    }
}

impl NamingZk for B {
    fn ids(&self, dir: &str) -> Box<dyn Ids> {
        Box::new(self.id_generator(dir).unwrap())
    }
    fn register(
        &self,
        dir: &str,
        name: &str,
        data: &'static str,
        mode: CreateMode,
    ) -> Result<Box<dyn NodeH>, Error> {
        Ok(Box::new(self.register_name(dir, name, data, mode)?))
    }
    fn resolve(&self, dir: &str, name: &str) -> Result<Option<(Bytes, Stat)>, Error> {
        B::resolve(self, dir, name)
    }
    fn watch(&self, dir: &str, name: &str) -> Box<dyn NameW> {
        Box::new(self.watch_name(dir, name).unwrap())
    }
}

impl Ids for zk_recipes_tokio::IdGenerator {
    fn next_id(&mut self) -> Result<i64, Error> {
        runtime().block_on(async {
            tokio::time::timeout(W, zk_recipes_tokio::IdGenerator::next_id(self))
                .await
                .unwrap_or(Err(Error::Timeout))
        })
    }
    fn next_ids(&mut self, n: usize) -> Result<Vec<i64>, Error> {
        runtime().block_on(async {
            tokio::time::timeout(W, zk_recipes_tokio::IdGenerator::next_ids(self, n))
                .await
                .unwrap_or(Err(Error::Timeout))
        })
    }
}

impl NamingZk for T {
    fn ids(&self, dir: &str) -> Box<dyn Ids> {
        Box::new(self.id_generator(dir).unwrap())
    }
    fn register(
        &self,
        dir: &str,
        name: &str,
        data: &'static str,
        mode: CreateMode,
    ) -> Result<Box<dyn NodeH>, Error> {
        Ok(Box::new(self.register_name(dir, name, data, mode)?))
    }
    fn resolve(&self, dir: &str, name: &str) -> Result<Option<(Bytes, Stat)>, Error> {
        runtime().block_on(async {
            tokio::time::timeout(W, T::resolve(self, dir, name))
                .await
                .unwrap_or(Err(Error::Timeout))
        })
    }
    fn watch(&self, dir: &str, name: &str) -> Box<dyn NameW> {
        Box::new(self.watch_name(dir, name).unwrap())
    }
}

/// The next `Data` or `Missing` event (connection events skipped).
fn next_change(w: &mut Box<dyn NameW>) -> NodeWatchEvent {
    loop {
        match w.next(W).expect("a watch event") {
            NodeWatchEvent::Suspended | NodeWatchEvent::Reconnected => {}
            e => return e,
        }
    }
}

fn server() -> TestServer {
    TestServer::start().expect("a real ZooKeeper")
}

/// A worker on its own session: `n` ids one at a time, or (`batch`) `n` at once.
fn take<Z: NamingZk>(
    cs: String,
    dir: &'static str,
    n: usize,
    batch: bool,
    go: Arc<Barrier>,
) -> std::thread::JoinHandle<Vec<i64>> {
    let zk = Z::connect(&cs).unwrap();
    let mut g = zk.ids(dir);
    std::thread::spawn(move || {
        go.wait();
        let ids: Vec<i64> = if batch {
            g.next_ids(n).unwrap_or_else(|e| panic!("{}: {e}", Z::NAME))
        } else {
            (0..n)
                .map(|_| g.next_id().unwrap_or_else(|e| panic!("{}: {e}", Z::NAME)))
                .collect()
        };
        drop(g);
        zk.close();
        ids
    })
}

#[test]
fn four_workers_on_both_adapters_take_1000_distinct_increasing_ids() {
    let server = server();
    let cs = server.connect_string();
    const DIR: &str = "/naming/ids";
    const EACH: usize = 250;
    // The directory exists before the clock starts (the first create makes it).
    let zk = B::connect(&cs).unwrap();
    let mut warm = zk.ids(DIR);
    let mut floor = warm.next_id().unwrap();
    let mut rates = Vec::new();
    let mut all = BTreeSet::new();
    for batch in [false, true] {
        // Connected and hosted before the clock starts.
        let go = Arc::new(Barrier::new(5));
        let workers = vec![
            take::<B>(cs.clone(), DIR, EACH, batch, go.clone()),
            take::<B>(cs.clone(), DIR, EACH, batch, go.clone()),
            take::<T>(cs.clone(), DIR, EACH, batch, go.clone()),
            take::<T>(cs.clone(), DIR, EACH, batch, go.clone()),
        ];
        go.wait();
        let start = Instant::now();
        let per: Vec<Vec<i64>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        let took = start.elapsed();
        let mut round = BTreeSet::new();
        for (w, ids) in per.iter().enumerate() {
            assert_eq!(ids.len(), EACH);
            assert!(
                ids.windows(2).all(|p| p[0] < p[1]),
                "worker {w}: ids not increasing: {ids:?}"
            );
            assert!(
                ids[0] > floor,
                "worker {w} got an id below one given before"
            );
            round.extend(ids.iter().copied());
        }
        assert_eq!(round.len(), 4 * EACH, "ids repeated across workers");
        floor = *round.last().unwrap();
        rates.push((took, round.len() as f64 / took.as_secs_f64()));
        all.extend(round);
    }
    assert_eq!(all.len(), 8 * EACH);
    println!(
        "naming: 1000 ids by 4 workers (2 blocking, 2 tokio): one at a time {:.0} ms, {:.0} ids/s; 250 pipelined per call {:.0} ms, {:.0} ids/s",
        rates[0].0.as_secs_f64() * 1e3,
        rates[0].1,
        rates[1].0.as_secs_f64() * 1e3,
        rates[1].1,
    );
    // Every node drawn is deleted.
    drop(warm);
    let deadline = Instant::now() + W;
    loop {
        let left = zk.get_children(DIR).unwrap();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "nodes left: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

macro_rules! both {
    ($name:ident) => {
        #[test]
        fn $name() {
            let mut server = server();
            scenarios::$name::<B>(&mut server, "/blocking");
            scenarios::$name::<T>(&mut server, "/tokio");
        }
    };
}

both!(register_resolve_and_expiry_of_an_ephemeral_name);
both!(persistent_names_and_invalid_names);

mod scenarios {
    use super::*;

    pub fn register_resolve_and_expiry_of_an_ephemeral_name<Z: NamingZk>(
        server: &mut TestServer,
        root: &str,
    ) {
        let dir = format!("{root}/services");
        let owner = Z::connect(&server.connect_string()).unwrap();
        let reader = Z::connect(&server.connect_string()).unwrap();
        assert_eq!(reader.resolve(&dir, "db").unwrap(), None, "{}", Z::NAME);
        let mut watch = reader.watch(&dir, "db");
        assert_eq!(
            next_change(&mut watch),
            NodeWatchEvent::Missing { gone: false }
        );

        let mut db = owner
            .register(&dir, "db", "10.0.0.7:5432", CreateMode::Ephemeral)
            .unwrap();
        let stat = db.created(W).unwrap();
        let old = owner.session_id();
        assert_eq!(stat.ephemeral_owner, old);
        let (data, stat) = reader.resolve(&dir, "db").unwrap().expect("registered");
        assert_eq!(&data[..], b"10.0.0.7:5432");
        assert_eq!(stat.ephemeral_owner, old);
        match next_change(&mut watch) {
            NodeWatchEvent::Data { data, stat } => {
                assert_eq!(&data[..], b"10.0.0.7:5432");
                assert_eq!(stat.ephemeral_owner, old);
            }
            e => panic!("{}: {e:?}", Z::NAME),
        }

        // The owner's session expires: the name is registered again on the new one.
        expire_session(server.addr(), old, &owner.session_password()).unwrap();
        let mut seen = Vec::new();
        loop {
            match db.next(W).expect("an event of the name") {
                OwnedNodeEvent::Created { stat } => {
                    assert_ne!(stat.ephemeral_owner, old);
                    assert_eq!(stat.ephemeral_owner, owner.session_id());
                    break;
                }
                e => seen.push(e),
            }
        }
        assert!(
            seen.contains(&OwnedNodeEvent::Lost {
                reason: LostReason::SessionExpired
            }),
            "{}: {seen:?}",
            Z::NAME
        );
        let (data, stat) = reader
            .resolve(&dir, "db")
            .unwrap()
            .expect("registered again");
        assert_eq!(&data[..], b"10.0.0.7:5432");
        assert_eq!(stat.ephemeral_owner, owner.session_id());

        // The watcher follows: the name is owned by the new session in the end.
        loop {
            match next_change(&mut watch) {
                NodeWatchEvent::Data { stat, .. } if stat.ephemeral_owner == owner.session_id() => {
                    break
                }
                NodeWatchEvent::Data { .. } | NodeWatchEvent::Missing { .. } => {}
                e => panic!("{}: {e:?}", Z::NAME),
            }
        }

        // Unregistered.
        db.delete(W).unwrap();
        assert_eq!(reader.resolve(&dir, "db").unwrap(), None);
        assert_eq!(
            next_change(&mut watch),
            NodeWatchEvent::Missing { gone: true }
        );
        owner.close();
        reader.close();
    }

    pub fn persistent_names_and_invalid_names<Z: NamingZk>(server: &mut TestServer, root: &str) {
        let dir = format!("{root}/registry");
        let zk = Z::connect(&server.connect_string()).unwrap();
        let mut cfg = zk
            .register(&dir, "config", "v1", CreateMode::Persistent)
            .unwrap();
        assert_eq!(cfg.created(W).unwrap().ephemeral_owner, 0);
        assert_eq!(&zk.resolve(&dir, "config").unwrap().unwrap().0[..], b"v1");
        cfg.delete(W).unwrap();
        assert_eq!(zk.resolve(&dir, "config").unwrap(), None);
        let slash = zk.register(&dir, "a/b", "", CreateMode::Ephemeral).err();
        assert_eq!(
            slash,
            Some(Error::InvalidPath {
                path: "a/b".into(),
                error: PathError::InvalidChar { offset: 1, ch: '/' }
            })
        );
        assert!(matches!(
            zk.resolve(&dir, ""),
            Err(Error::InvalidPath {
                error: PathError::Empty,
                ..
            })
        ));
        zk.close();
    }
}
