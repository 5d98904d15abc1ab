//! The counting semaphore against a real ZooKeeper 3.8 through both adapters at once:
//! six workers (three per adapter, each on its own session) share `N = 2` leases, 30
//! acquisitions each, and an atomic counter of concurrent holders must never exceed 2;
//! at the end no lease or mutex node is left. Then timeouts and drop-to-release, the
//! same scenario for either adapter.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::{runtime, Zk};
use zk_recipes::client::Error;
use zk_recipes_testing::{expire_session, TestServer};

use zk_recipes_blocking as zb;
use zk_recipes_tokio as zt;

/// A held lease, either adapter's.
trait LeaseH: Send {
    fn path(&self) -> String;
    fn is_held(&mut self) -> bool;
    fn lost_to_expiry(&mut self) -> bool;
    fn release(self: Box<Self>) -> Result<(), Error>;
}

/// A semaphore, either adapter's.
trait SemH: Send + Sync {
    fn acquire(&self) -> Result<Box<dyn LeaseH>, Error>;
    fn acquire_timeout(&self, wait: Duration) -> Result<Option<Box<dyn LeaseH>>, Error>;
}

trait SemZk: Zk {
    fn semaphore(&self, path: &str, n: u32) -> Box<dyn SemH>;
}

impl LeaseH for zb::Lease {
    fn path(&self) -> String {
        zb::Lease::path(self).to_string()
    }
    fn is_held(&mut self) -> bool {
        zb::Lease::is_held(self)
    }
    fn lost_to_expiry(&mut self) -> bool {
        zb::Lease::state(self) == zb::LeaseState::Lost(zb::LostReason::SessionExpired)
    }
    fn release(self: Box<Self>) -> Result<(), Error> {
        zb::Lease::release(*self)
    }
}

impl SemH for zb::Semaphore {
    fn acquire(&self) -> Result<Box<dyn LeaseH>, Error> {
        Ok(Box::new(zb::Semaphore::acquire(self)?))
    }
    fn acquire_timeout(&self, wait: Duration) -> Result<Option<Box<dyn LeaseH>>, Error> {
        Ok(zb::Semaphore::acquire_timeout(self, wait)?.map(|l| Box::new(l) as Box<dyn LeaseH>))
    }
}

impl SemZk for zb::Client {
    fn semaphore(&self, path: &str, n: u32) -> Box<dyn SemH> {
        Box::new(zb::Client::semaphore(self, path, n))
    }
}

impl LeaseH for zt::Lease {
    fn path(&self) -> String {
        zt::Lease::path(self).to_string()
    }
    fn is_held(&mut self) -> bool {
        zt::Lease::is_held(self)
    }
    fn lost_to_expiry(&mut self) -> bool {
        zt::Lease::state(self) == zt::LeaseState::Lost(zt::LostReason::SessionExpired)
    }
    fn release(self: Box<Self>) -> Result<(), Error> {
        runtime().block_on(zt::Lease::release(*self))
    }
}

impl SemH for zt::Semaphore {
    fn acquire(&self) -> Result<Box<dyn LeaseH>, Error> {
        Ok(Box::new(runtime().block_on(zt::Semaphore::acquire(self))?))
    }
    fn acquire_timeout(&self, wait: Duration) -> Result<Option<Box<dyn LeaseH>>, Error> {
        Ok(runtime()
            .block_on(zt::Semaphore::acquire_timeout(self, wait))?
            .map(|l| Box::new(l) as Box<dyn LeaseH>))
    }
}

impl SemZk for zt::Client {
    fn semaphore(&self, path: &str, n: u32) -> Box<dyn SemH> {
        Box::new(zt::Client::semaphore(self, path, n))
    }
}

type B = zb::Client;
type T = zt::Client;

fn worker<Z: SemZk>(cs: String, holders: Arc<AtomicUsize>, max: Arc<AtomicUsize>) {
    let zk = Z::connect(&cs).expect("connect");
    let sem = zk.semaphore("/sem/workers", 2);
    for _ in 0..30 {
        let mut lease = sem.acquire().expect("a lease");
        assert!(lease.is_held());
        assert!(lease.path().starts_with("/sem/workers/leases/_c_"));
        let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
        max.fetch_max(now, Ordering::SeqCst);
        assert!(now <= 2, "{now} concurrent holders with 2 leases");
        std::thread::sleep(Duration::from_millis(3));
        holders.fetch_sub(1, Ordering::SeqCst);
        lease.release().expect("released");
    }
    zk.close();
}

#[test]
fn six_workers_through_both_adapters_never_exceed_two_holders() {
    let server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    let holders = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let started = std::time::Instant::now();
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let (cs, h, m) = (cs.clone(), holders.clone(), max.clone());
            std::thread::spawn(move || {
                if i % 2 == 0 {
                    worker::<B>(cs, h, m)
                } else {
                    worker::<T>(cs, h, m)
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker");
    }
    let elapsed = started.elapsed();
    println!(
        "180 acquisitions in {elapsed:?}: {:.0}/s",
        180.0 / elapsed.as_secs_f64()
    );
    assert_eq!(
        max.load(Ordering::SeqCst),
        2,
        "both leases were used at once"
    );
    let zk = B::connect(&cs).expect("connect");
    assert_eq!(
        zk.get_children("/sem/workers/leases").expect("leases"),
        Vec::<String>::new()
    );
    assert_eq!(
        zk.get_children("/sem/workers/locks").expect("locks"),
        Vec::<String>::new()
    );
}

fn timeout_and_drop<Z: SemZk, Y: SemZk>(cs: &str, path: &str) {
    let a = Z::connect(cs).expect("connect");
    let b = Y::connect(cs).expect("connect");
    let sa = a.semaphore(path, 1);
    let sb = b.semaphore(path, 1);
    let held = sa.acquire().expect("the free lease");
    // Full: the other waits at most its timeout, then its nodes go.
    let t = std::time::Instant::now();
    assert!(sb
        .acquire_timeout(Duration::from_millis(300))
        .expect("no error")
        .is_none());
    assert!(t.elapsed() >= Duration::from_millis(300));
    let leases = format!("{path}/leases");
    let wait_for = |n: usize| {
        for _ in 0..100 {
            if a.get_children(&leases).expect("leases").len() == n {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{leases} never had {n} children");
    };
    wait_for(1);
    // Dropping a lease releases it: the other gets it.
    drop(held);
    let got = sb
        .acquire_timeout(Duration::from_secs(10))
        .expect("no error")
        .expect("the dropped lease");
    got.release().expect("released");
    wait_for(0);
    a.close();
    b.close();
}

#[test]
fn timeouts_and_dropped_leases_both_ways() {
    let server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    timeout_and_drop::<B, T>(&cs, "/sem/bt");
    timeout_and_drop::<T, B>(&cs, "/sem/tb");
}

/// A holder's session expires: its lease node goes with it, the holder sees `Lost`, and
/// a waiter on another session (the other adapter) gets the lease.
fn expiry_hands_the_lease_over<Z: SemZk, Y: SemZk>(server: &TestServer, path: &str) {
    let cs = server.connect_string();
    let a = Z::connect(&cs).expect("connect");
    let b = Y::connect(&cs).expect("connect");
    let mut held = a.semaphore(path, 1).acquire().expect("the free lease");
    let waiter = {
        let b = b.clone();
        let path = path.to_string();
        std::thread::spawn(move || {
            b.semaphore(&path, 1)
                .acquire_timeout(Duration::from_secs(20))
                .map(|l| l.map(|l| l.path()))
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_finished(), "the lease is held");
    expire_session(server.addr(), a.session_id(), &a.session_password()).expect("expired");
    let got = waiter.join().expect("waiter").expect("no error");
    assert!(got.is_some(), "the expired holder's lease was handed over");
    let mut lost = false;
    for _ in 0..200 {
        if held.lost_to_expiry() {
            lost = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(lost, "the holder was told its lease is lost");
    assert!(!held.is_held());
    held.release().expect("releasing a lost lease is a no-op");
    a.close();
    b.close();
}

#[test]
fn session_expiry_releases_the_lease_both_ways() {
    let server = TestServer::start().expect("a real ZooKeeper");
    expiry_hands_the_lease_over::<B, T>(&server, "/sem/xbt");
    expiry_hands_the_lease_over::<T, B>(&server, "/sem/xtb");
}

/// tokio: dropping a pending `acquire()` future gives up and deletes our nodes.
#[test]
fn dropping_a_pending_acquire_deletes_its_nodes() {
    let server = TestServer::start().expect("a real ZooKeeper");
    let cs = server.connect_string();
    let a = T::connect(&cs).expect("connect");
    let held = SemZk::semaphore(&a, "/sem/drop", 1)
        .acquire()
        .expect("the free lease");
    let b = T::connect(&cs).expect("connect");
    runtime().block_on(async {
        let sem = zt::Client::semaphore(&b, "/sem/drop", 1);
        let pending = tokio::time::timeout(Duration::from_millis(300), sem.acquire()).await;
        assert!(pending.is_err(), "the lease is held: still waiting");
    });
    // Only the holder's lease and no mutex node remain once the abandoned attempt
    // cleaned up.
    let mut clean = false;
    for _ in 0..100 {
        let leases = Zk::get_children(&a, "/sem/drop/leases").expect("leases");
        let locks = Zk::get_children(&a, "/sem/drop/locks").expect("locks");
        if leases.len() == 1 && locks.is_empty() {
            clean = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(clean, "the dropped attempt left nodes behind");
    held.release().expect("released");
}
