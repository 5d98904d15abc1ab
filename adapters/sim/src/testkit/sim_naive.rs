//! A raw-API exclusive lock that proves the simulator's invariant harness can fail: the
//! naive version (a common real bug: "NodeExists after a retry means mine") must be
//! caught, with a seed that replays the failure exactly. (The careful version adopts
//! a node only if its `ephemeralOwner` is ours.) The recipes themselves run in
//! [`super::sim_lock`].

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::sim::{Actor, SimConfig, Simulation, View};
use zk_recipes::client::{Client, ClientEvent};
use zk_recipes::proto::*;
use zk_recipes::session::{SessionEvent, Token};
use zk_recipes::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Idle {
        until: Instant,
    },
    Creating,
    /// Careful only: after NodeExists on a retried create, whose node is it?
    Checking,
    Waiting,
    Holding {
        until: Instant,
    },
    Releasing,
}

/// A raw-API lock actor: `careful` adopts a node after a lost create reply only if its
/// `ephemeralOwner` is this session; the naive one assumes it is.
pub struct LockActor {
    careful: bool,
    rng: u64,
    state: State,
    pending: Option<Token>,
    watch: Option<Token>,
    retried: bool,
    suspended: bool,
    /// Times this actor got the lock.
    pub acquisitions: u64,
}

const HOLDER: &str = "/holder";

impl LockActor {
    /// A new actor.
    pub fn new(careful: bool, seed: u64) -> Self {
        LockActor {
            careful,
            rng: seed | 1,
            state: State::Idle {
                until: Instant::ZERO,
            },
            pending: None,
            watch: None,
            retried: false,
            suspended: false,
            acquisitions: 0,
        }
    }

    /// Does it believe it holds the lock (and, if careful, is not suspended)?
    pub fn holds(&self) -> bool {
        matches!(self.state, State::Holding { .. }) && !(self.careful && self.suspended)
    }

    fn rand_ms(&mut self, lo: u64, hi: u64) -> Duration {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        Duration::from_millis(lo + self.rng % (hi - lo))
    }

    fn submit(&mut self, now: Instant, client: &mut Client, req: Request) {
        self.pending = client.submit(now, req).ok();
    }

    fn create(&mut self, now: Instant, client: &mut Client) {
        self.state = State::Creating;
        let req = CreateRequest::new(
            HOLDER,
            Bytes::new(),
            Acl::open_unsafe(),
            CreateMode::Ephemeral,
        );
        self.submit(now, client, Request::Create(req));
    }

    fn check_owner(&mut self, now: Instant, client: &mut Client, next: State) {
        self.state = next;
        self.submit(
            now,
            client,
            Request::GetData(PathWatch {
                path: HOLDER.into(),
                watch: false,
            }),
        );
    }

    fn wait(&mut self, now: Instant, client: &mut Client) {
        self.state = State::Waiting;
        self.submit(
            now,
            client,
            Request::Exists(PathWatch {
                path: HOLDER.into(),
                watch: true,
            }),
        );
        self.watch = self.pending;
    }

    fn hold(&mut self, now: Instant) {
        self.acquisitions += 1;
        let hold = self.rand_ms(2, 40);
        self.state = State::Holding { until: now + hold };
    }

    fn idle(&mut self, now: Instant) {
        let pause = self.rand_ms(1, 30);
        self.state = State::Idle { until: now + pause };
    }

    fn on_reply(
        &mut self,
        now: Instant,
        client: &mut Client,
        result: Result<Response, zk_recipes::error::Error>,
    ) {
        let me = client.session().session_id();
        match (self.state, result) {
            (State::Creating, Ok(_)) => self.hold(now),
            (State::Creating, Err(zk_recipes::error::Error::Server(ErrorCode::NodeExists)))
                if self.retried =>
            {
                if self.careful {
                    self.check_owner(now, client, State::Checking);
                } else {
                    self.hold(now); // "my earlier create must have landed" — the bug
                }
            }
            (State::Creating, Err(zk_recipes::error::Error::Server(ErrorCode::NodeExists))) => {
                self.wait(now, client)
            }
            (State::Creating, Err(zk_recipes::error::Error::ConnectionLoss)) => {
                self.retried = true;
                self.create(now, client);
            }
            (State::Checking, Ok(Response::Data { stat, .. })) => {
                self.retried = false;
                if stat.ephemeral_owner == me {
                    self.hold(now);
                } else {
                    self.wait(now, client);
                }
            }
            (State::Checking, Err(zk_recipes::error::Error::Server(ErrorCode::NoNode))) => {
                self.retried = false;
                self.create(now, client);
            }
            (State::Checking, Err(zk_recipes::error::Error::ConnectionLoss)) => {
                self.check_owner(now, client, State::Checking)
            }
            (State::Waiting, Ok(_)) => {} // the watch will tell us when it goes
            (State::Waiting, Err(zk_recipes::error::Error::Server(ErrorCode::NoNode))) => {
                self.retried = false;
                self.create(now, client);
            }
            (State::Waiting, Err(zk_recipes::error::Error::ConnectionLoss)) => {
                self.wait(now, client)
            }
            (State::Releasing, Ok(Response::Data { stat, .. })) => {
                if stat.ephemeral_owner == me {
                    self.submit(
                        now,
                        client,
                        Request::Delete(DeleteRequest {
                            path: HOLDER.into(),
                            version: stat.version,
                        }),
                    );
                } else {
                    self.idle(now);
                }
            }
            (State::Releasing, Ok(_))
            | (State::Releasing, Err(zk_recipes::error::Error::Server(ErrorCode::NoNode))) => {
                self.idle(now)
            }
            (State::Releasing, Err(_)) => self.release(now, client),
            _ => {}
        }
    }

    fn release(&mut self, now: Instant, client: &mut Client) {
        if self.careful {
            self.check_owner(now, client, State::Releasing);
        } else {
            self.state = State::Releasing;
            self.submit(
                now,
                client,
                Request::Delete(DeleteRequest {
                    path: HOLDER.into(),
                    version: -1,
                }),
            );
        }
    }
}

impl Actor for LockActor {
    fn step(&mut self, now: Instant, client: &mut Client, events: &[ClientEvent]) {
        for ev in events {
            let ClientEvent::Session(ev) = ev else {
                continue;
            };
            match ev {
                SessionEvent::Reply(r) if Some(r.token) == self.pending => {
                    self.pending = None;
                    self.on_reply(now, client, r.result.clone());
                }
                SessionEvent::Watch { token, event } if Some(*token) == self.watch => {
                    self.watch = None;
                    if self.state == State::Waiting && event.event_type == EventType::NodeDeleted {
                        self.retried = false;
                        self.create(now, client);
                    }
                }
                SessionEvent::Suspended { .. } => self.suspended = true,
                SessionEvent::Reconnected { .. } => {
                    self.suspended = false;
                    if self.careful && matches!(self.state, State::Holding { .. }) {
                        // Still ours? Verify before believing it again.
                        self.check_owner(now, client, State::Checking);
                        self.retried = true;
                    }
                }
                _ => {}
            }
        }
        match self.state {
            State::Idle { until } if now >= until => {
                self.retried = false;
                self.create(now, client);
            }
            State::Holding { until } if now >= until && self.pending.is_none() => {
                self.release(now, client)
            }
            _ => {}
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        match self.state {
            State::Idle { until } | State::Holding { until } => Some(until),
            _ => None,
        }
    }

    fn restart(&mut self) {
        let seed = self.rng;
        *self = LockActor::new(self.careful, seed);
    }
}

/// The invariant: never two holders whose processes run and whose sessions the server
/// still has.
pub fn mutual_exclusion(view: &View<'_, LockActor>) -> Result<(), String> {
    let holders: Vec<usize> = (0..view.actors.len())
        .filter(|&i| view.actors[i].holds() && view.live(i))
        .collect();
    if holders.len() > 1 {
        return Err(format!("two live holders: clients {holders:?}"));
    }
    Ok(())
}

/// One schedule with every fault; returns the number of acquisitions.
pub fn run(careful: bool, seed: u64) -> Result<u64, String> {
    run_with(careful, SimConfig::with_faults(seed, 8))
}

/// One schedule with the given settings.
pub fn run_with(careful: bool, config: SimConfig) -> Result<u64, String> {
    let seed = config.seed;
    let mut sim = Simulation::new(config, |i| {
        LockActor::new(careful, seed.wrapping_mul(31).wrapping_add(i as u64))
    });
    sim.run(mutual_exclusion)?;
    Ok(sim.actors().iter().map(|a| a.acquisitions).sum())
}
