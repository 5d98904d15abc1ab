//! Faults, schedules drawn from a seed, and their application to a [`Nemesis`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::{Endpoint, Nemesis, Rng};
use crate::proxy::Flow;

/// How a link is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Bytes dropped silently ([`Flow::Drop`]).
    Drop,
    /// Connections reset ([`Flow::Reset`]).
    Reset,
}

impl Cut {
    fn flow(self) -> Flow {
        match self {
            Cut::Drop => Flow::Drop,
            Cut::Reset => Flow::Reset,
        }
    }
}

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cut::Drop => "drop",
            Cut::Reset => "reset",
        })
    }
}

/// Which server a fault is about: the one leading when it is applied, or a follower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The leader at the time.
    Leader,
    /// A follower, drawn from the seed.
    Follower,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Leader => "leader",
            Side::Follower => "follower",
        })
    }
}

/// Which client a fault picks when it is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// One holding a lock, a leadership or a lease at the time (any client if none).
    Holder,
    /// One holding in the named workload at the time (any of its clients if none).
    HolderIn(&'static str),
    /// Any client.
    Any,
}

/// One fault of the nemesis. Link faults last for their step and are healed together
/// at its end; a pause ends with a SIGCONT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The ensemble split: one server cut from the other two, both ways. With the
    /// leader alone the two others elect a new leader while the old one serves its
    /// clients until it notices (`syncLimit`); with a follower alone its clients move.
    Partition {
        /// The server left alone.
        alone: Side,
        /// How its links are cut.
        cut: Cut,
    },
    /// The follower a client is connected to cut from the other two, and the client
    /// from them (a client on the leader is moved to a follower first): the lone server
    /// keeps answering the client (its pings, its reads) until it notices it lost the
    /// leader (`syncLimit`), while the leader expires the session — the classic split
    /// brain of a lock holder.
    Stranded {
        /// The client left with its server.
        client: Pick,
    },
    /// The link between the leader and one follower cut both ways; the third server
    /// still reaches both.
    CutLink {
        /// How it is cut.
        cut: Cut,
    },
    /// The bytes from one server to another dropped, the other way passing.
    OneWay {
        /// Whose bytes are dropped: the leader's to a follower, or a follower's to the
        /// leader.
        from: Side,
    },
    /// Every link between servers delayed.
    SlowServers {
        /// The fixed delay.
        delay: Duration,
        /// Up to this much more per chunk.
        jitter: Duration,
    },
    /// A client cut from every server.
    Isolate {
        /// Which client.
        client: Pick,
        /// How.
        cut: Cut,
    },
    /// A client cut from the leader only (it can move to a follower).
    FromLeader {
        /// Which client.
        client: Pick,
        /// How.
        cut: Cut,
    },
    /// One direction of a client's links dropped: its requests (`toward_servers`) or
    /// the servers' answers.
    ClientOneWay {
        /// Which client.
        client: Pick,
        /// Drop what the client sends (else what it receives).
        toward_servers: bool,
    },
    /// A client's links delayed both ways.
    SlowClient {
        /// Which client.
        client: Pick,
        /// The fixed delay.
        delay: Duration,
        /// Up to this much more per chunk.
        jitter: Duration,
    },
    /// A client process frozen (SIGSTOP) for the step, then thawed (SIGCONT).
    Pause {
        /// Which client.
        client: Pick,
    },
}

impl Fault {
    fn is_pause(&self) -> bool {
        matches!(self, Fault::Pause { .. })
    }
}

/// One step of a schedule: faults applied together, healed after `lasts`, then a quiet
/// `then`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The faults of the step.
    pub faults: Vec<Fault>,
    /// How long they last.
    pub lasts: Duration,
    /// The quiet time after the heal.
    pub then: Duration,
}

/// What a schedule is drawn for.
#[derive(Clone, Debug)]
pub struct ScheduleOptions {
    /// Steps are drawn until their total reaches this.
    pub length: Duration,
    /// The clients' session timeout: long faults last past it (a long pause, a stranded
    /// client), short ones less than a third of it.
    pub session_timeout: Duration,
    /// Steps placed first, in this order, each a long one with these faults together
    /// (then the draws).
    pub first: Vec<Vec<Fault>>,
}

/// A sequence of fault steps drawn from a seed: the same seed, options and targets give
/// the same faults (which server and client they hit depends on who leads and holds
/// at the time; [`Applied`] records it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The seed it was drawn from.
    pub seed: u64,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl Schedule {
    /// Draws steps from `seed` until they fill `opts.length`.
    pub fn random(seed: u64, opts: &ScheduleOptions) -> Schedule {
        let mut rng = Rng::new(seed);
        let t = opts.session_timeout.as_millis() as u64;
        let long = |rng: &mut Rng| ms(t + rng.between(1500, 3000));
        let short = |rng: &mut Rng| ms(rng.between(500, (t / 3).max(600)));
        let quiet = |rng: &mut Rng| ms(rng.between(500, 2000));
        let mut steps = Vec::new();
        let mut total = Duration::ZERO;
        for faults in &opts.first {
            let step = Step {
                faults: faults.clone(),
                lasts: long(&mut rng),
                then: quiet(&mut rng),
            };
            total += step.lasts + step.then;
            steps.push(step);
        }
        while total < opts.length {
            let fault = draw(&mut rng);
            // Partitions, stranded clients and pauses are long half the time (an
            // expiry), the rest short (a blip the session rides out).
            let lasts = match fault {
                Fault::Stranded { .. } => long(&mut rng),
                Fault::Partition { .. } | Fault::Pause { .. } | Fault::Isolate { .. }
                    if rng.percent(50) =>
                {
                    long(&mut rng)
                }
                _ => short(&mut rng),
            };
            let mut faults = vec![fault];
            // A quarter of the link faults come with a pause of some client.
            if !faults[0].is_pause() && rng.percent(25) {
                faults.push(Fault::Pause {
                    client: if rng.percent(50) {
                        Pick::Holder
                    } else {
                        Pick::Any
                    },
                });
            }
            let step = Step {
                faults,
                lasts,
                then: quiet(&mut rng),
            };
            total += step.lasts + step.then;
            steps.push(step);
        }
        Schedule { seed, steps }
    }

    /// The total time of the steps.
    pub fn length(&self) -> Duration {
        self.steps.iter().map(|s| s.lasts + s.then).sum()
    }
}

fn cut(rng: &mut Rng) -> Cut {
    if rng.percent(50) {
        Cut::Drop
    } else {
        Cut::Reset
    }
}

fn side(rng: &mut Rng) -> Side {
    if rng.percent(50) {
        Side::Leader
    } else {
        Side::Follower
    }
}

fn pick(rng: &mut Rng) -> Pick {
    if rng.percent(60) {
        Pick::Holder
    } else {
        Pick::Any
    }
}

fn draw(rng: &mut Rng) -> Fault {
    match rng.below(10) {
        0 => Fault::Partition {
            alone: side(rng),
            cut: cut(rng),
        },
        1 => Fault::Stranded { client: pick(rng) },
        2 => Fault::CutLink { cut: cut(rng) },
        3 => Fault::OneWay { from: side(rng) },
        4 => Fault::SlowServers {
            delay: ms(rng.between(20, 300)),
            jitter: ms(rng.between(0, 300)),
        },
        5 => Fault::Isolate {
            client: pick(rng),
            cut: cut(rng),
        },
        6 => Fault::FromLeader {
            client: pick(rng),
            cut: cut(rng),
        },
        7 => Fault::ClientOneWay {
            client: pick(rng),
            toward_servers: rng.percent(50),
        },
        8 => Fault::SlowClient {
            client: pick(rng),
            delay: ms(rng.between(20, 600)),
            jitter: ms(rng.between(0, 400)),
        },
        _ => Fault::Pause { client: pick(rng) },
    }
}

/// Who the faults can pick: the runner of the workloads knows (from the clients'
/// reports) who holds what.
pub trait Targets: Sync {
    /// The clients a fault may pick (as numbered by the nemesis).
    fn clients(&self) -> Vec<usize>;
    /// The clients holding a lock, a leadership or a lease now.
    fn holders(&self) -> Vec<usize>;
    /// The clients of the named workload, and those of them holding now.
    fn of_workload(&self, name: &str) -> (Vec<usize>, Vec<usize>);
}

/// A fault as it was applied.
#[derive(Clone, Debug)]
pub struct Applied {
    /// When, from the start of the schedule.
    pub at: Duration,
    /// Its kind, for the summary (`partition, leader alone, drop`, `pause, past the
    /// session timeout`, ...).
    pub kind: String,
    /// What it did, with the servers and clients it picked.
    pub what: String,
    /// How long it lasted.
    pub lasted: Duration,
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>7.2} s  {} for {:.2} s",
            self.at.as_secs_f64(),
            self.what,
            self.lasted.as_secs_f64()
        )
    }
}

/// The faults applied, counted by kind.
pub fn by_kind(applied: &[Applied]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for a in applied {
        *m.entry(a.kind.clone()).or_default() += 1;
    }
    m
}

impl Nemesis {
    fn side(&self, side: Side, rng: &mut Rng) -> (usize, String) {
        let leader = self.leader();
        match (side, leader) {
            (Side::Leader, Some(l)) => (l, format!("s{} (leader)", l + 1)),
            (Side::Follower, Some(l)) => {
                let f = (l + 1 + rng.below(2) as usize) % 3;
                (f, format!("s{} (follower)", f + 1))
            }
            (_, None) => {
                let s = rng.below(3) as usize;
                (s, format!("s{} (no leader at the time)", s + 1))
            }
        }
    }

    fn pick(&self, pick: Pick, targets: &dyn Targets, rng: &mut Rng) -> Option<(usize, String)> {
        let holders = targets.holders();
        let pool = match pick {
            Pick::Holder if !holders.is_empty() => holders,
            Pick::HolderIn(w) => match targets.of_workload(w) {
                (_, holding) if !holding.is_empty() => holding,
                (all, _) => all,
            },
            _ => targets.clients(),
        };
        if pool.is_empty() {
            return None;
        }
        let c = pool[rng.below(pool.len() as u64) as usize];
        let held = if targets.holders().contains(&c) {
            ", a holder"
        } else {
            ""
        };
        Some((c, format!("client {} ({}{held})", c, self.client_name(c))))
    }

    /// Applies one fault; its kind and description, or `None` if it found no target.
    fn apply(
        &self,
        fault: &Fault,
        lasts: Duration,
        session_timeout: Duration,
        targets: &dyn Targets,
        rng: &mut Rng,
    ) -> Option<(String, String)> {
        let client_links = |c: usize, flow: Flow, toward: bool, back: bool| {
            for s in 0..3 {
                if toward {
                    self.set_flow(Endpoint::Client(c), Endpoint::Server(s), flow);
                }
                if back {
                    self.set_flow(Endpoint::Server(s), Endpoint::Client(c), flow);
                }
            }
        };
        Some(match *fault {
            Fault::Partition { alone, cut } => {
                let (s, who) = self.side(alone, rng);
                self.partition(&[s], cut.flow());
                (
                    format!("partition, {alone} alone, {cut}"),
                    format!("partition: {who} | the other two, {cut}"),
                )
            }
            Fault::Stranded { client } => {
                let (c, name) = self.pick(client, targets, rng)?;
                let leader = self.leader();
                // On the leader, the client is moved first (its link to the leader
                // reset): a lone leader is harmless, the majority's new leader gives
                // every session a fresh timeout.
                let mut moved = String::new();
                if let (Some(l), Some(s)) = (leader, self.client_server(c)) {
                    if l == s {
                        let t = Instant::now();
                        let before: Vec<u64> =
                            (0..3).map(|k| self.client_bytes_received(c, k)).collect();
                        self.set_link(Endpoint::Client(c), Endpoint::Server(l), Flow::Reset);
                        // Until its session is re-established on a follower (the
                        // follower's answer to the handshake has come through): a
                        // handshake on a server cut from the leader never completes.
                        let until = t + Duration::from_secs(4);
                        while Instant::now() < until
                            && !matches!(self.client_server(c),
                                Some(f) if f != l && self.client_bytes_received(c, f) > before[f])
                        {
                            thread::sleep(ms(10));
                        }
                        thread::sleep(ms(200));
                        moved = format!(
                            ", moved off the leader first (to {:?} in {} ms),",
                            self.client_server(c).map(|s| s + 1),
                            t.elapsed().as_millis()
                        );
                    }
                }
                let (s, whose) = match self.client_server(c) {
                    Some(s) => (s, "its server"),
                    None => (rng.below(3) as usize, "not connected; a server"),
                };
                let role = if leader == Some(s) {
                    "leader"
                } else {
                    "follower"
                };
                self.partition(&[s], Flow::Drop);
                for k in (0..3).filter(|&k| k != s) {
                    self.set_link(Endpoint::Client(c), Endpoint::Server(k), Flow::Drop);
                }
                (
                    format!("client stranded with its server in the minority ({role})"),
                    format!(
                        "partition: s{} ({whose}, {role}) | the other two, drop; {name}{moved} reaches only s{}",
                        s + 1,
                        s + 1
                    ),
                )
            }
            Fault::CutLink { cut } => {
                let (l, who) = self.side(Side::Leader, rng);
                let f = (l + 1 + rng.below(2) as usize) % 3;
                self.set_link(Endpoint::Server(l), Endpoint::Server(f), cut.flow());
                (
                    format!("link leader-follower cut, {cut}"),
                    format!("link {who} - s{} cut, {cut}", f + 1),
                )
            }
            Fault::OneWay { from } => {
                let (l, who) = self.side(Side::Leader, rng);
                let f = (l + 1 + rng.below(2) as usize) % 3;
                let (a, b) = match from {
                    Side::Leader => (l, f),
                    Side::Follower => (f, l),
                };
                self.set_flow(Endpoint::Server(a), Endpoint::Server(b), Flow::Drop);
                (
                    format!("one way dropped, from the {from}"),
                    format!(
                        "bytes s{} -> s{} dropped (leader {who}), the other way passing",
                        a + 1,
                        b + 1
                    ),
                )
            }
            Fault::SlowServers { delay, jitter } => {
                for a in 0..3 {
                    for b in (0..3).filter(|&b| b != a) {
                        self.set_flow(
                            Endpoint::Server(a),
                            Endpoint::Server(b),
                            Flow::Pass { delay, jitter },
                        );
                    }
                }
                (
                    "servers' links delayed".into(),
                    format!(
                        "every link between servers delayed {} ms + up to {} ms",
                        delay.as_millis(),
                        jitter.as_millis()
                    ),
                )
            }
            Fault::Isolate { client, cut } => {
                let (c, name) = self.pick(client, targets, rng)?;
                client_links(c, cut.flow(), true, true);
                (
                    format!("client isolated, {cut}"),
                    format!("{name} cut from every server, {cut}"),
                )
            }
            Fault::FromLeader { client, cut } => {
                let (c, name) = self.pick(client, targets, rng)?;
                let (l, who) = self.side(Side::Leader, rng);
                self.set_link(Endpoint::Client(c), Endpoint::Server(l), cut.flow());
                (
                    format!("client cut from the leader, {cut}"),
                    format!("{name} cut from {who}, {cut}"),
                )
            }
            Fault::ClientOneWay {
                client,
                toward_servers,
            } => {
                let (c, name) = self.pick(client, targets, rng)?;
                client_links(c, Flow::Drop, toward_servers, !toward_servers);
                let way = if toward_servers {
                    "requests"
                } else {
                    "answers"
                };
                (
                    format!("client one way dropped ({way})"),
                    format!("{name}: its {way} dropped, the other way passing"),
                )
            }
            Fault::SlowClient {
                client,
                delay,
                jitter,
            } => {
                let (c, name) = self.pick(client, targets, rng)?;
                client_links(c, Flow::Pass { delay, jitter }, true, true);
                (
                    "client's links delayed".into(),
                    format!(
                        "{name}: links delayed {} ms + up to {} ms",
                        delay.as_millis(),
                        jitter.as_millis()
                    ),
                )
            }
            Fault::Pause { client } => {
                let (c, name) = self.pick(client, targets, rng)?;
                self.pause(c).ok()?;
                let kind = if lasts > session_timeout {
                    "client paused past its session timeout"
                } else {
                    "client paused"
                };
                (kind.into(), format!("{name} paused (SIGSTOP)"))
            }
        })
    }

    /// Applies `schedule` step by step until it ends or `stop` is set, then heals every
    /// link and thaws every client. `session_timeout` names the pauses that outlast it.
    pub fn run_schedule(
        &self,
        schedule: &Schedule,
        session_timeout: Duration,
        targets: &dyn Targets,
        stop: &AtomicBool,
    ) -> Vec<Applied> {
        let start = Instant::now();
        let mut rng = Rng::new(schedule.seed ^ 0x05ee_d0ff_a017);
        let mut applied = Vec::new();
        let wait = |d: Duration| {
            let until = Instant::now() + d;
            while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                thread::sleep(ms(20).min(until.saturating_duration_since(Instant::now())));
            }
        };
        for step in &schedule.steps {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let at = start.elapsed();
            let done: Vec<_> = step
                .faults
                .iter()
                .filter_map(|f| self.apply(f, step.lasts, session_timeout, targets, &mut rng))
                .collect();
            wait(step.lasts);
            self.heal();
            self.resume_all();
            let lasted = start.elapsed() - at;
            for (kind, what) in done {
                applied.push(Applied {
                    at,
                    kind,
                    what,
                    lasted,
                });
            }
            wait(step.then);
        }
        self.heal();
        self.resume_all();
        applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ScheduleOptions {
        ScheduleOptions {
            length: Duration::from_secs(120),
            session_timeout: Duration::from_secs(5),
            first: vec![vec![Fault::Pause {
                client: Pick::Holder,
            }]],
        }
    }

    #[test]
    fn a_seed_gives_the_same_schedule_and_another_seed_another() {
        let a = Schedule::random(7, &opts());
        assert_eq!(a, Schedule::random(7, &opts()));
        assert_ne!(a, Schedule::random(8, &opts()));
        assert!(a.length() >= Duration::from_secs(120));
        // The required fault comes first and outlasts the session.
        assert_eq!(a.steps[0].faults, opts().first[0]);
        assert!(a.steps[0].lasts > Duration::from_secs(5));
    }

    #[test]
    fn long_schedules_draw_every_kind_of_fault() {
        let s = Schedule::random(
            1,
            &ScheduleOptions {
                length: Duration::from_secs(1800),
                ..opts()
            },
        );
        let kinds: std::collections::HashSet<_> = s
            .steps
            .iter()
            .flat_map(|st| st.faults.iter())
            .map(std::mem::discriminant)
            .collect();
        assert_eq!(kinds.len(), 10, "{s:?}");
        // Short faults stay under a third of the session timeout, long ones past it.
        for st in &s.steps {
            assert!(st.lasts < Duration::from_millis(1667) || st.lasts > Duration::from_secs(6));
        }
    }
}
