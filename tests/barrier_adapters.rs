//! Barrier and double barrier through both adapters against a real ZooKeeper: the same
//! scenario, the same meaning in `zk-recipes-blocking` and `zk-recipes-tokio`.
// A test is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

mod support;

use std::thread;
use std::time::{Duration, Instant};

use support::{runtime, Zk};
use zk_recipes::client::Error;
use zk_recipes_testing::{expire_session, TestServer};

type B = zk_recipes_blocking::Client;
type T = zk_recipes_tokio::Client;

/// One participant (one handle; each `enter` is a new participation).
trait Member: Send {
    fn enter(&mut self, within: Option<Duration>) -> Result<bool, Error>;
    fn leave(&mut self, within: Option<Duration>) -> Result<bool, Error>;
    fn late(&self) -> Option<bool>;
}

/// What the scenarios need on top of [`Zk`].
trait Barriers: Zk {
    fn set(&self, path: &str) -> Result<(), Error>;
    fn remove(&self, path: &str) -> Result<(), Error>;
    fn wait(&self, path: &str, within: Option<Duration>) -> Result<bool, Error>;
    fn member(&self, path: &str, n: u32) -> Box<dyn Member>;
}

impl Member for zk_recipes_blocking::DoubleBarrier {
    fn enter(&mut self, within: Option<Duration>) -> Result<bool, Error> {
        match within {
            Some(t) => self.enter_timeout(t),
            None => zk_recipes_blocking::DoubleBarrier::enter(self).map(|_| true),
        }
    }
    fn leave(&mut self, within: Option<Duration>) -> Result<bool, Error> {
        match within {
            Some(t) => self.leave_timeout(t),
            None => zk_recipes_blocking::DoubleBarrier::leave(self).map(|_| true),
        }
    }
    fn late(&self) -> Option<bool> {
        self.entered_late()
    }
}

impl Barriers for B {
    fn set(&self, path: &str) -> Result<(), Error> {
        self.barrier(path).set()
    }
    fn remove(&self, path: &str) -> Result<(), Error> {
        self.barrier(path).remove()
    }
    fn wait(&self, path: &str, within: Option<Duration>) -> Result<bool, Error> {
        match within {
            Some(t) => self.barrier(path).wait_timeout(t),
            None => self.barrier(path).wait().map(|_| true),
        }
    }
    fn member(&self, path: &str, n: u32) -> Box<dyn Member> {
        Box::new(self.double_barrier(path, n))
    }
}

impl Member for zk_recipes_tokio::DoubleBarrier {
    fn enter(&mut self, within: Option<Duration>) -> Result<bool, Error> {
        runtime().block_on(async {
            match within {
                Some(t) => self.enter_timeout(t).await,
                None => zk_recipes_tokio::DoubleBarrier::enter(self)
                    .await
                    .map(|_| true),
            }
        })
    }
    fn leave(&mut self, within: Option<Duration>) -> Result<bool, Error> {
        runtime().block_on(async {
            match within {
                Some(t) => self.leave_timeout(t).await,
                None => zk_recipes_tokio::DoubleBarrier::leave(self)
                    .await
                    .map(|_| true),
            }
        })
    }
    fn late(&self) -> Option<bool> {
        self.entered_late()
    }
}

impl Barriers for T {
    fn set(&self, path: &str) -> Result<(), Error> {
        runtime().block_on(self.barrier(path).set())
    }
    fn remove(&self, path: &str) -> Result<(), Error> {
        runtime().block_on(self.barrier(path).remove())
    }
    fn wait(&self, path: &str, within: Option<Duration>) -> Result<bool, Error> {
        let b = self.barrier(path);
        runtime().block_on(async {
            match within {
                Some(t) => b.wait_timeout(t).await,
                None => b.wait().await.map(|_| true),
            }
        })
    }
    fn member(&self, path: &str, n: u32) -> Box<dyn Member> {
        Box::new(self.double_barrier(path, n))
    }
}

fn server() -> TestServer {
    TestServer::start().expect("a real ZooKeeper")
}

macro_rules! both {
    ($name:ident) => {
        #[test]
        fn $name() {
            let server = server();
            scenarios::$name::<B>(&server, "/blocking");
            scenarios::$name::<T>(&server, "/tokio");
        }
    };
}

both!(barrier_set_wait_remove);
both!(double_barrier_enters_and_leaves_together_and_cleans_up);
both!(a_late_participant_is_released_and_counted_in_leave);
both!(deadlines_are_honoured_and_nothing_is_left);
both!(the_path_is_reused_round_after_round);
both!(a_session_expiring_mid_barrier_is_told_and_the_others_go_on);

mod scenarios {
    use super::*;

    const LONG: Duration = Duration::from_secs(20);

    pub fn barrier_set_wait_remove<Z: Barriers>(server: &TestServer, root: &str) {
        let cs = server.connect_string();
        let a = Z::connect(&cs).unwrap();
        let path = format!("{root}/barrier/gate");
        assert!(
            a.wait(&path, Some(Duration::ZERO)).unwrap(),
            "not set: released"
        );
        a.set(&path).unwrap();
        a.set(&path).unwrap(); // already set is fine
        let t0 = Instant::now();
        assert!(!a.wait(&path, Some(Duration::from_millis(200))).unwrap());
        assert!(t0.elapsed() >= Duration::from_millis(200));
        assert!(t0.elapsed() < Duration::from_secs(5), "deadline honoured");
        let b = Z::connect(&cs).unwrap();
        let remover = {
            let (b, path) = (b.clone(), path.clone());
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(300));
                b.remove(&path).unwrap();
            })
        };
        assert!(a.wait(&path, None).unwrap(), "released by the removal");
        remover.join().unwrap();
        a.remove(&path).unwrap(); // already gone is fine
                                  // Set again after we were released: a new wait waits again.
        b.set(&path).unwrap();
        assert!(!a.wait(&path, Some(Duration::from_millis(100))).unwrap());
        b.remove(&path).unwrap();
        assert!(!a.exists(&path).unwrap());
    }

    /// Runs `n` participants (separate sessions) through enter and leave; returns each
    /// one's (entered, left, late).
    pub fn round<Z: Barriers>(
        clients: &[Z],
        path: &str,
        n: u32,
    ) -> Vec<(bool, bool, Option<bool>)> {
        let handles: Vec<_> = clients
            .iter()
            .map(|c| {
                let mut m = c.member(path, n);
                thread::spawn(move || {
                    let entered = m.enter(Some(LONG)).unwrap();
                    let late = m.late();
                    let left = m.leave(Some(LONG)).unwrap();
                    (entered, left, late)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    pub fn connect_n<Z: Barriers>(server: &TestServer, n: usize) -> Vec<Z> {
        (0..n)
            .map(|_| Z::connect(&server.connect_string()).unwrap())
            .collect()
    }

    pub fn double_barrier_enters_and_leaves_together_and_cleans_up<Z: Barriers>(
        server: &TestServer,
        root: &str,
    ) {
        let clients = connect_n::<Z>(server, 4);
        let path = format!("{root}/db/together");
        for (entered, left, _) in round(&clients, &path, 4) {
            assert!(entered && left);
        }
        assert!(
            !clients[0].exists(&path).unwrap(),
            "the last leaver removed b"
        );
    }

    pub fn a_late_participant_is_released_and_counted_in_leave<Z: Barriers>(
        server: &TestServer,
        root: &str,
    ) {
        let clients = connect_n::<Z>(server, 3);
        let path = format!("{root}/db/late");
        let mut a = clients[0].member(&path, 2);
        let mut b = clients[1].member(&path, 2);
        let bt = thread::spawn(move || {
            assert!(b.enter(Some(LONG)).unwrap());
            b
        });
        assert!(a.enter(Some(LONG)).unwrap());
        let mut b = bt.join().unwrap();
        // B starts leaving; A is still working. C arrives now: released at once, late.
        let bl = thread::spawn(move || {
            let left = b.leave(Some(LONG)).unwrap();
            (left, Instant::now())
        });
        thread::sleep(Duration::from_millis(200));
        let mut c = clients[2].member(&path, 2);
        let t0 = Instant::now();
        assert!(c.enter(Some(Duration::from_secs(5))).unwrap());
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert_eq!(c.late(), Some(true));
        // Nobody completes leave while C (a member of the round) is still in.
        thread::sleep(Duration::from_millis(300));
        assert!(!bl.is_finished(), "B waits for A and C");
        let al = thread::spawn(move || a.leave(Some(LONG)).unwrap());
        thread::sleep(Duration::from_millis(300));
        assert!(!bl.is_finished() && !al.is_finished(), "they wait for C");
        let c_left = Instant::now();
        assert!(c.leave(Some(LONG)).unwrap());
        assert!(al.join().unwrap());
        let (left, at) = bl.join().unwrap();
        assert!(left && at >= c_left);
        assert!(!clients[0].exists(&path).unwrap());
    }

    pub fn deadlines_are_honoured_and_nothing_is_left<Z: Barriers>(
        server: &TestServer,
        root: &str,
    ) {
        let clients = connect_n::<Z>(server, 2);
        let path = format!("{root}/db/deadlines");
        let mut a = clients[0].member(&path, 2);
        let t0 = Instant::now();
        assert!(!a.enter(Some(Duration::from_millis(300))).unwrap());
        let took = t0.elapsed();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(5));
        // Our node is removed after NotEntered.
        let gone = (0..50).any(|_| {
            let c = clients[1].get_children(&path).unwrap_or_default();
            if c.is_empty() {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
            false
        });
        assert!(gone, "the node of an attempt that timed out is removed");
        // Leave with a deadline: B entered with A, A never leaves; B's leave times out.
        let mut a = clients[0].member(&path, 2);
        let mut b = clients[1].member(&path, 2);
        let at = thread::spawn(move || {
            assert!(a.enter(Some(LONG)).unwrap());
            a
        });
        assert!(b.enter(Some(LONG)).unwrap());
        let mut a = at.join().unwrap();
        let t0 = Instant::now();
        let b_left = b.leave(Some(Duration::from_millis(300))).unwrap();
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(5));
        assert!(!b_left, "B cannot have left while A is in the barrier");
        // A leaves alone (B's node was removed after NotLeft) and cleans up.
        assert!(a.leave(Some(LONG)).unwrap());
        assert!(!clients[0].exists(&path).unwrap());
    }

    pub fn the_path_is_reused_round_after_round<Z: Barriers>(server: &TestServer, root: &str) {
        let clients = connect_n::<Z>(server, 3);
        let path = format!("{root}/db/rounds");
        for _ in 0..3 {
            for (entered, left, late) in round(&clients, &path, 3) {
                assert!(entered && left);
                assert_eq!(late, Some(false));
            }
        }
        // A straggler after the last round is a participant of the next round: alone, it
        // is not released.
        let mut m = clients[0].member(&path, 3);
        assert!(!m.enter(Some(Duration::from_millis(300))).unwrap());
    }

    pub fn a_session_expiring_mid_barrier_is_told_and_the_others_go_on<Z: Barriers>(
        server: &TestServer,
        root: &str,
    ) {
        let clients = connect_n::<Z>(server, 3);
        let path = format!("{root}/db/expiry");
        // Waiting in enter: told.
        let mut w = clients[0].member(&path, 3);
        let (sid, pw) = (clients[0].session_id(), clients[0].session_password());
        let wt = thread::spawn(move || w.enter(Some(LONG)));
        thread::sleep(Duration::from_millis(300));
        expire_session(server.addr(), sid, &pw).unwrap();
        assert_eq!(wt.join().unwrap(), Err(Error::SessionExpired));
        // Entered, then A's session expires: A's leave is told, B and C leave without A.
        let d = Z::connect(&server.connect_string()).unwrap();
        let (sid, pw) = (d.session_id(), d.session_password());
        let members: Vec<_> = [&d, &clients[1], &clients[2]]
            .into_iter()
            .map(|c| c.member(&path, 3))
            .collect();
        let entered: Vec<_> = members
            .into_iter()
            .map(|mut m| {
                thread::spawn(move || {
                    assert!(m.enter(Some(LONG)).unwrap());
                    m
                })
            })
            .collect();
        let mut members: Vec<_> = entered.into_iter().map(|h| h.join().unwrap()).collect();
        expire_session(server.addr(), sid, &pw).unwrap();
        let mut a = members.remove(0);
        let others: Vec<_> = members
            .into_iter()
            .map(|mut m| thread::spawn(move || m.leave(Some(LONG))))
            .collect();
        for o in others {
            assert_eq!(o.join().unwrap(), Ok(true));
        }
        assert_eq!(a.leave(Some(LONG)), Err(Error::SessionExpired));
        assert!(!clients[1].exists(&path).unwrap());
    }
}
