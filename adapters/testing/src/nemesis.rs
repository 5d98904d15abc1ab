//! The nemesis: a real three-server ensemble whose every link a test controls, and
//! faults drawn from a seed (issue 41).
//!
//! **Links.** Each server's config lists its peers at proxies of this process, one per
//! directed link and port: server `i` reaches server `j`'s quorum port (where a follower
//! connects to the leader) and election port through two [`LinkProxy`]s of the link
//! `i → j`, and lists itself at its real ports on 127.0.0.1. ZooKeeper 3.8 keeps each
//! server's own view of its peers (checked in its sources and by the tests below): a
//! follower connects to the leader at the address its own config gives, and the
//! leader's config, sent to followers while they sync, never replaces theirs (with
//! reconfiguration off, the default, `processReconfig` returns at once; and a server
//! takes a config only if its version is higher, while static configs all have
//! version 0). One exception: when a lower id connects for an election, the higher id
//! drops that connection and connects back to the address the lower one *announced*
//! in its first message (its own listed address, unless that is a wildcard). The
//! election proxy of `i → j` therefore rewrites that announcement to the address of
//! the election proxy of `j → i`, so the connect-back crosses the nemesis too (listing
//! each server at `0.0.0.0` would also do, but would listen on every interface).
//! Both directions between two servers are a pair of [`FlowControl`]s shared by every
//! connection between them, whichever side opened it: bytes from `i` to `j` follow the
//! flow `i → j` on both of their proxies. Clients connect through proxies of their own,
//! one per server ([`Nemesis::add_client`]), so a single client can be cut off, slowed
//! or half-cut. Everything stays on 127.0.0.1 and needs no privileges: no firewall
//! rule, no network namespace, no `tc`.
//!
//! The checks that the servers really talk only through the proxies are in
//! `adapters/testing/tests/real_server/nemesis.rs`: no JVM holds a TCP connection to
//! another's quorum or election port, a server cut from both peers stops serving and
//! rejoins once healed, and the flows carry the quorum's traffic.
//!
//! **Faults** ([`Fault`]): cut a link (bytes dropped silently, or connections reset),
//! heal, delay (fixed and jittered), drop one direction only, split the ensemble into a
//! majority and a minority (the leader in either), a client left with only the minority
//! server, and pause a client process (SIGSTOP/SIGCONT). [`Schedule::random`] draws a
//! sequence of them from a seed; [`Nemesis::run_schedule`] applies it and logs what it did
//! (with the servers and clients it picked: which server leads is known only then), so a
//! failing run prints its schedule and `seed` replays the same draws.

mod check;
mod history;
mod run;
mod schedule;

pub use check::{check_counter, check_exclusive, check_leases, check_queue, CheckReport};
pub use history::{
    now_micros, Event, FencedStore, History, Line, Micros, Pause, StoreWrite, CLIENT_LINE_PREFIX,
};
pub use run::{
    run_workloads, ClientSpec, Outcome, Program, RunOptions, WorkloadKind, WorkloadReport,
    WorkloadSpec,
};
pub use schedule::{
    by_kind, Applied, Cut, Fault, Pick, Schedule, ScheduleOptions, Side, Step, Targets,
};

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::proxy::{Flow, FlowControl, LinkProxy};
use crate::server::{freeze, signal, EnsembleOptions, PeerPorts, TestEnsemble};

/// A small deterministic generator (SplitMix64): the nemesis's draws from a seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose draws depend on `seed` only.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One end of a link: a server of the ensemble or a client of the test (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// Server `i` (`server.{i+1}` in the configs).
    Server(usize),
    /// Client `c`, as numbered by [`Nemesis::add_client`].
    Client(usize),
}

/// How to start a [`Nemesis`].
#[derive(Clone, Debug)]
pub struct NemesisOptions {
    /// `tickTime` of the ensemble in ms.
    pub tick_time_ms: u32,
    /// `initLimit` in ticks.
    pub init_limit: u32,
    /// `syncLimit` in ticks: a server cut from the leader stops serving (and closes its
    /// clients' connections) after this many ticks, so a session timeout well above
    /// `tick_time_ms * sync_limit` is what keeps "stop acting on `Suspended`" safe for
    /// a client of that server (it keeps answering pings until then).
    pub sync_limit: u32,
    /// The seed of the proxies' jitter.
    pub seed: u64,
}

impl Default for NemesisOptions {
    fn default() -> Self {
        NemesisOptions {
            tick_time_ms: 500,
            init_limit: 10,
            sync_limit: 4,
            seed: 0,
        }
    }
}

struct ClientLinks {
    name: String,
    proxies: Vec<LinkProxy>,
    pid: Option<u32>,
    paused_since: Option<Micros>,
}

/// A real three-server ensemble behind proxies the test controls (module docs).
/// Dropping it stops the servers and the proxies; paused client processes are
/// resumed first.
pub struct Nemesis {
    flows: Mutex<HashMap<(Endpoint, Endpoint), Arc<FlowControl>>>,
    server_proxies: Vec<LinkProxy>,
    clients: Mutex<Vec<ClientLinks>>,
    pauses: Mutex<Vec<Pause>>,
    seed: Mutex<u64>,
    opts: NemesisOptions,
    // Last: the servers die after the proxies stop accepting.
    ensemble: TestEnsemble,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Nemesis {
    /// Starts the ensemble with a proxy on every directed link between servers and
    /// waits until it serves.
    pub fn start(opts: NemesisOptions) -> io::Result<Nemesis> {
        let flows: Mutex<HashMap<(Endpoint, Endpoint), Arc<FlowControl>>> = Mutex::default();
        let proxies: Arc<Mutex<Vec<LinkProxy>>> = Arc::default();
        {
            let mut f = lock(&flows);
            for i in 0..3 {
                for j in 0..3 {
                    if i != j {
                        f.insert(
                            (Endpoint::Server(i), Endpoint::Server(j)),
                            FlowControl::new(),
                        );
                    }
                }
            }
        }
        let table: HashMap<_, _> = lock(&flows).clone();
        let made = proxies.clone();
        let seed = opts.seed;
        // The election proxy of each link i → j, for the announcements of j → i.
        let elections: Arc<Mutex<HashMap<(usize, usize), SocketAddr>>> = Arc::default();
        let view = move |i: usize, j: usize, own: PeerPorts| -> io::Result<PeerPorts> {
            let up = table[&(Endpoint::Server(i), Endpoint::Server(j))].clone();
            let down = table[&(Endpoint::Server(j), Endpoint::Server(i))].clone();
            let salt = seed ^ (((i * 3 + j) as u64) << 32);
            let quorum = LinkProxy::start(own.quorum, up.clone(), down.clone(), salt)?;
            let back = elections.clone();
            let announce: crate::proxy::Announce =
                Arc::new(move || lock(&back).get(&(j, i)).copied());
            let election = LinkProxy::start_with(own.election, up, down, salt ^ 1, Some(announce))?;
            lock(&elections).insert((i, j), election.addr());
            let seen = PeerPorts {
                quorum: quorum.addr(),
                election: election.addr(),
            };
            lock(&made).extend([quorum, election]);
            Ok(seen)
        };
        let ensemble = TestEnsemble::start_with(EnsembleOptions {
            tick_time_ms: opts.tick_time_ms,
            init_limit: opts.init_limit,
            sync_limit: opts.sync_limit,
            min_session_timeout_ms: 1000,
            peer_view: Some(Arc::new(view)),
            ..EnsembleOptions::default()
        })?;
        let server_proxies = std::mem::take(&mut *lock(&proxies));
        Ok(Nemesis {
            flows,
            server_proxies,
            clients: Mutex::default(),
            pauses: Mutex::default(),
            seed: Mutex::new(opts.seed),
            opts,
            ensemble,
        })
    }

    /// The ensemble (its servers' real client addresses, modes, logs).
    pub fn ensemble(&self) -> &TestEnsemble {
        &self.ensemble
    }

    /// The options it was started with.
    pub fn options(&self) -> &NemesisOptions {
        &self.opts
    }

    /// The proxies between servers (for checks that traffic goes through them).
    pub fn server_proxies(&self) -> &[LinkProxy] {
        &self.server_proxies
    }

    /// A new client: a proxy in front of each server, whose links the nemesis controls.
    /// Returns its number and the connect string to give it (the three proxies).
    pub fn add_client(&self, name: &str) -> io::Result<(usize, String)> {
        let mut clients = lock(&self.clients);
        let c = clients.len();
        let mut flows = lock(&self.flows);
        let mut proxies = Vec::new();
        for s in 0..3 {
            let up = flows
                .entry((Endpoint::Client(c), Endpoint::Server(s)))
                .or_default()
                .clone();
            let down = flows
                .entry((Endpoint::Server(s), Endpoint::Client(c)))
                .or_default()
                .clone();
            let seed = {
                let mut seed = lock(&self.seed);
                *seed = seed.wrapping_add(0x2545_f491_4f6c_dd1d);
                *seed
            };
            proxies.push(LinkProxy::start(self.ensemble.addr(s), up, down, seed)?);
        }
        let connect = proxies
            .iter()
            .map(|p| p.addr().to_string())
            .collect::<Vec<_>>()
            .join(",");
        clients.push(ClientLinks {
            name: name.to_string(),
            proxies,
            pid: None,
            paused_since: None,
        });
        Ok((c, connect))
    }

    /// The name given to client `c`.
    pub fn client_name(&self, c: usize) -> String {
        lock(&self.clients)
            .get(c)
            .map(|l| l.name.clone())
            .unwrap_or_default()
    }

    /// Client `c`'s proxy in front of server `s`.
    pub fn client_proxy_addr(&self, c: usize, s: usize) -> Option<SocketAddr> {
        lock(&self.clients)
            .get(c)
            .and_then(|l| l.proxies.get(s).map(LinkProxy::addr))
    }

    /// The server client `c` has a connection open to now (through its proxy).
    pub fn client_server(&self, c: usize) -> Option<usize> {
        let flows = lock(&self.flows);
        (0..3).find(|&s| {
            flows
                .get(&(Endpoint::Client(c), Endpoint::Server(s)))
                .is_some_and(|f| f.open() > 0)
        })
    }

    /// Bytes client `c`'s proxy in front of server `s` has delivered to the client so
    /// far (every connection's answers).
    pub fn client_bytes_received(&self, c: usize, s: usize) -> u64 {
        lock(&self.clients)
            .get(c)
            .and_then(|l| l.proxies.get(s).map(|p| p.bytes().1))
            .unwrap_or(0)
    }

    /// Records the process that runs client `c`, so that it can be paused.
    pub fn set_pid(&self, c: usize, pid: u32) {
        if let Some(l) = lock(&self.clients).get_mut(c) {
            l.pid = Some(pid);
        }
    }

    /// Sets the flow of the bytes going from `from` to `to` (every connection between
    /// them, open or new, whichever side opened it).
    pub fn set_flow(&self, from: Endpoint, to: Endpoint, flow: Flow) {
        let f = lock(&self.flows).get(&(from, to)).cloned();
        if let Some(f) = f {
            f.set(flow);
        }
    }

    /// The flow of the bytes going from `from` to `to` now.
    pub fn flow(&self, from: Endpoint, to: Endpoint) -> Option<Flow> {
        lock(&self.flows).get(&(from, to)).map(|f| f.flow())
    }

    /// Sets both directions between `a` and `b`.
    pub fn set_link(&self, a: Endpoint, b: Endpoint, flow: Flow) {
        self.set_flow(a, b, flow);
        self.set_flow(b, a, flow);
    }

    /// Cuts every link between the servers in `side` and the others, both ways.
    pub fn partition(&self, side: &[usize], flow: Flow) {
        for a in side {
            for b in (0..3).filter(|b| !side.contains(b)) {
                self.set_link(Endpoint::Server(*a), Endpoint::Server(b), flow);
            }
        }
    }

    /// Every link passes at once again (paused clients stay paused: [`Self::resume_all`]).
    pub fn heal(&self) {
        let flows: Vec<_> = lock(&self.flows).values().cloned().collect();
        for f in flows {
            f.set(Flow::PASS);
        }
    }

    /// The server leading now (asked over the servers' own client ports), if one does.
    pub fn leader(&self) -> Option<usize> {
        (0..3).find(|&i| self.ensemble.mode(i).as_deref() == Some("leader"))
    }

    /// Freezes client `c`'s process (SIGSTOP); the pause is recorded for the checkers.
    pub fn pause(&self, c: usize) -> io::Result<()> {
        let mut clients = lock(&self.clients);
        let l = clients
            .get_mut(c)
            .ok_or_else(|| io::Error::other(format!("no client {c}")))?;
        let pid = l
            .pid
            .ok_or_else(|| io::Error::other(format!("client {c} has no process")))?;
        if l.paused_since.is_some() {
            return Ok(());
        }
        let at = history::now_micros();
        freeze(pid)?;
        l.paused_since = Some(at);
        Ok(())
    }

    /// Thaws client `c`'s process (SIGCONT) and records the pause.
    pub fn resume(&self, c: usize) -> io::Result<()> {
        let mut clients = lock(&self.clients);
        let Some(l) = clients.get_mut(c) else {
            return Ok(());
        };
        let (Some(pid), Some(since)) = (l.pid, l.paused_since.take()) else {
            return Ok(());
        };
        signal(pid, "-CONT")?;
        let to = history::now_micros();
        lock(&self.pauses).push(Pause {
            client: c,
            from: since,
            to,
        });
        Ok(())
    }

    /// Thaws every paused client.
    pub fn resume_all(&self) {
        let n = lock(&self.clients).len();
        for c in 0..n {
            let _ = self.resume(c);
        }
    }

    /// The pauses so far (each from just before its SIGSTOP to just after its SIGCONT).
    pub fn pauses(&self) -> Vec<Pause> {
        lock(&self.pauses).clone()
    }
}

impl Drop for Nemesis {
    fn drop(&mut self) {
        self.resume_all();
        self.heal();
    }
}
