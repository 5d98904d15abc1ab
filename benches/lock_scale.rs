//! Lock at scale (issue 15): N lock waiters hosted by ONE session on one path, all
//! queued at once, then passing the lock along (each holder releases as soon as it
//! holds). `cargo bench --bench lock_scale`; not run by `cargo test`.
//!
//! The core [`Client`] is driven here directly over a blocking `TcpStream` (the same
//! loop the adapters run, without a runtime), so the session's counters and the core's
//! heap are measured exactly:
//!
//! * **µs/acq** — wall time from the first `acquire` to the last release, per
//!   acquisition; **handoff µs** — the same from the moment every waiter is queued;
//! * **cpu us/acq** — CPU time of the bench process, every thread (the client and
//!   its driver loop) per acquisition: the client's own cost, apart from the server's;
//!   **srv cpu** — the server JVM's CPU time per acquisition (`/proc/<pid>/stat`);
//! * **req/acq**, **B rx/acq**, **B tx/acq** — the session's counters
//!   ([`Client::counters`]) over the whole run, per acquisition (each waiter's entry
//!   listing included: waiter *i* of N queued at once lists *i* children);
//! * **h req**, **h B rx** — the same from the moment every waiter is queued: what
//!   passing the lock along costs;
//! * **RSS** — peak resident set of the process (`VmHWM`; each N runs in a process of
//!   its own);
//! * **B/waiter** — core state per queued waiter: `size_of::<Lock>()` and the heap the
//!   client holds once every waiter is queued (measured by a counting allocator: live
//!   bytes with N queued waiters minus live bytes with none, over N: the machines,
//!   their boxes, the client's routes and the session's watch registrations);
//! * **failed** — attempts that ended in anything but `Acquired` (must be 0);
//! * **left** — children of the lock directory after the run (must be 0).
//!
//! Two cases: `core` (above: the core client, every waiter queued before the first
//! release, so entry and handoff are told apart) and `e2e` (issue 25: N tasks on one
//! `zk_recipes_tokio` session, each `lock(dir).acquire().await` then
//! `release().await`, all spawned at once — the lock is passed along while later
//! waiters still enter, entry included: what an application sees; no handoff split,
//! no heap measure). `LOCK_SCALE_CASES=core,e2e` (default) picks them;
//! `LOCK_SCALE_WAITERS=100,1000,10000` (default) the counts;
//! `LOCK_SCALE_TIMEOUT` (seconds, default 900) bounds each run: a stall is reported
//! (with how far it got) and the bench exits non-zero instead of hanging.
//! `LOCK_SCALE_MAX_IN_FLIGHT` overrides the session's in-flight bound (default 512).
//! `LOCK_SCALE_TRACE=1` makes the `e2e` case print where its time went (`TRACE` lines:
//! when the first, 1%, 10%, ... of acquisitions came, µs per acquisition in each tenth
//! of them, and how long releases took early in the run and later).
//!
//! Each count runs in rounds of N until at least 2,000 acquisitions (20 rounds of 100,
//! 2 of 1,000, 1 of 10,000; the figures are over all rounds), after one warm-up run of
//! `LOCK_SCALE_WARMUP` waiters (default 1,000; 0 for none) that is not reported: a
//! fresh server is slow at first, and the first count must not be the one paying.
//!
//! Measured (`cargo bench --bench lock_scale`, ZooKeeper 3.8.0 on a disk-backed temp
//! dir, 2 shared cores; session `max_in_flight` 512), with grant on release:
//!
//! ```text
//! size_of::<Lock>() = 432 B; a queued waiter's machine holds 541 B in all
//! waiters rounds    us/acq    handoff cpu us/acq  req/acq   B rx/acq    h req     h B rx  B tx/acq   RSS KiB  B/waiter  failed  left
//!     100     20     748.8      545.6     145.9     4.98       6379     1.98       3138      3309      4100      1257       0     0
//!    1000      2    1014.7      645.3     317.1     5.00      33962     2.00       4170      4143      7416      1050       0     0
//!   10000      1    2904.1      606.3    1985.0     5.00     301609     2.00       6315      4236     25368       970       0     0
//! ```
//!
//! A handoff is two requests (the holder's `multi` with its grant or notice, and the
//! read of it by the contender it tells) whatever N; what grows with N is one listing every 129 handoffs (a grant carries
//! [`MAX_SUCCESSORS`](zk_recipes::recipe::lock::MAX_SUCCESSORS) = 128 successors) and
//! each waiter's entry listing. With 32 successors per grant (same machine, same day)
//! the handoff was 955 µs at 10,000 waiters against 602 at 100 (1.59×): the listing
//! every 33 handoffs, 10,000 names long, was on the path. Before grant on release:
//! 6.00 requests per acquisition and 590,465 B received per acquisition at 10,000
//! waiters (every woken waiter listed all N children again), 10,043 µs/acq.
//!
//! The end-to-end case (issue 25), before and after a contender name's marker is read
//! in O(1) from its 10-digit suffix (`contender::split`), three runs each (the last
//! two alternated), same day, 2 cores at a load average of 6–10 from other work (so
//! wall time is noisy: CPU per acquisition is the figure to compare):
//! `LOCK_SCALE_CASES=e2e LOCK_SCALE_WAITERS=1000,10000 cargo bench --bench lock_scale`
//!
//! ```text
//!          waiters    us/acq       cpu us/acq    srv cpu    req/acq  B rx/acq
//! before     1000    989–4675       270–373     820–960      5.00    33943–33969
//! before    10000   3456–8083      1557–1809   2493–3204     5.00   301606–301617
//! after      1000    968–3063       181–225     785–1010     5.00    33967–33969
//! after     10000   4068–6479       753–863    2703–2916     5.00   301570–301575
//! ```
//!
//! What grew with N was each waiter's entry listing (waiter *i* of N queued at once
//! listed about *i* children: B rx/acq ≈ 30 B × N): the server's CPU per acquisition
//! (serialising the listings) and the client's (decoding them, one `String` per
//! child). Since listings queued in the session are shared (`Session::submit_from`,
//! read through one `contender::SortedListing`), the same command gives 4.25 / 4.03
//! req/acq and 6,383–6,425 / 6,821–7,219 B rx/acq at 1,000 / 10,000 waiters (six runs
//! each, alternated with the base; all figures in `docs/benchmarks.md`).
//! The `core` case the same day (one run each, `LOCK_SCALE_CASES=core`): client CPU
//! 206.7 → 130.3 µs/acq at 1,000 waiters, 1,458.8 → 833.3 at 10,000.
// A benchmark is a driver: it owns the clock.
#![allow(clippy::disallowed_methods)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant as StdInstant};

use bytes::BytesMut;
use zk_recipes::client::{ops, Client, ClientEvent, Options, RecipeHandle};
use zk_recipes::proto::{CreateMode, Response, Stat};
use zk_recipes::recipe::lock::{node_id, Lock, LockConfig, LockEvent, LockKind};
use zk_recipes::recipe::{Machine, Recipe, SessionChange};
use zk_recipes::session::{SessionEvent, Token, Transport};
use zk_recipes::time::Instant;
use zk_recipes_testing::TestServer;

/// Counts live heap bytes (the core's state is measured with it).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same layout as asked.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The lock machine's own share of a queued waiter: one boxed `Lock` fed the replies
/// of a waiter with two blockers (create, listing, blocker watch armed), measured alone
/// by the counting allocator. The rest of "B/waiter" is the client's and the
/// session's (the recipe's slot and routes, the watch registration of its blocker).
fn machine_bytes() -> isize {
    let dir = "/lock_scale/n10000";
    let names: Vec<String> = (0..3)
        .map(|i| format!("_c_{}-lock-{i:010}", node_id(1, i)))
        .collect();
    let id = node_id(1, 2);
    let before = live();
    let mut l = Box::new(Lock::new(LockConfig::new(dir, LockKind::Exclusive, &id)));
    l.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
    l.acquire(Instant::ZERO, None);
    let (create, _) = l.poll_request().unwrap();
    let (list, _) = l.poll_request().unwrap();
    let path = format!("{dir}/{}", names[2]);
    let stat = Stat::default();
    l.handle_reply(Instant::ZERO, create, Ok(Response::PathStat { path, stat }));
    l.handle_reply(Instant::ZERO, list, Ok(Response::Children(names.clone())));
    let (watch, _) = l.poll_request().unwrap();
    l.handle_reply(Instant::ZERO, watch, Ok(Response::Children(Vec::new())));
    while l.poll_request().is_some() || l.poll_event().is_some() {}
    let bytes = live() - before;
    drop((l, names));
    bytes
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// CPU time of this process, every thread (the client's own cost, apart from the
/// server's and the network's): `/proc/self/task/*/schedstat`, nanoseconds on a CPU.
fn cpu_time() -> Duration {
    let ns: u64 = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum();
    Duration::from_nanos(ns)
}

/// CPU time of the server's JVM so far (`utime + stime` of `/proc/<pid>/stat`, every
/// thread, in clock ticks of `getconf CLK_TCK`); zero if its pid is not known.
fn server_cpu() -> Duration {
    let Some(pid) = std::env::var("LOCK_SCALE_SERVER_PID").ok() else {
        return Duration::ZERO;
    };
    let ticks_per_s: u64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0);
    let ticks: u64 = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .map(|s| {
            // Fields after the command name (which is in parentheses): utime is the
            // 14th field of the line, stime the 15th.
            let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            rest.split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    if ticks_per_s == 0 {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(ticks as f64 / ticks_per_s as f64)
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The adapters' loop, blocking: one socket, reads with a timeout up to the client's
/// next deadline.
struct Driver {
    client: Client,
    hosts: Vec<String>,
    stream: Option<TcpStream>,
    start: StdInstant,
    out: BytesMut,
    buf: Vec<u8>,
}

impl Driver {
    fn now(&self) -> Instant {
        Instant::from_micros(self.start.elapsed().as_micros() as u64)
    }

    /// Moves the client's outputs to the socket; returns its events.
    fn flush(&mut self, events: &mut Vec<ClientEvent>) {
        loop {
            let mut moved = false;
            while let Some(t) = self.client.poll_transport() {
                moved = true;
                match t {
                    Transport::Connect { host } => {
                        self.stream = None;
                        let now = self.now();
                        match TcpStream::connect(&self.hosts[host]) {
                            Ok(s) => {
                                s.set_nodelay(true).unwrap();
                                self.stream = Some(s);
                                self.client.handle_connected(now);
                            }
                            Err(e) => self.client.handle_transport_error(now, (&e).into()),
                        }
                    }
                    Transport::Close => self.stream = None,
                    // Read-only mode is off: never asked for.
                    Transport::Probe { .. } => {}
                }
            }
            while self.client.poll_transmit(&mut self.out) {
                moved = true;
                let res = match &mut self.stream {
                    Some(s) => s.write_all(&self.out),
                    None => Ok(()),
                };
                self.out.clear();
                if self.out.capacity() > 16 * 1024 {
                    // Not the client's state: a burst's write buffer is not kept.
                    self.out = BytesMut::new();
                }
                if let Err(e) = res {
                    let now = self.now();
                    self.stream = None;
                    self.client.handle_transport_error(now, (&e).into());
                }
            }
            while let Some(e) = self.client.poll_event() {
                moved = true;
                events.push(e);
            }
            if !moved {
                return;
            }
        }
    }

    /// One input: bytes, or a timeout.
    fn step(&mut self) {
        let now = self.now();
        let wait = self
            .client
            .poll_timeout()
            .map(|t| Duration::from_micros(t.saturating_since(now).as_micros() as u64))
            .unwrap_or(Duration::from_millis(50))
            .clamp(Duration::from_micros(200), Duration::from_millis(50));
        let Some(s) = &mut self.stream else {
            std::thread::sleep(wait);
            let now = self.now();
            self.client.handle_timeout(now);
            return;
        };
        s.set_read_timeout(Some(wait)).unwrap();
        match s.read(&mut self.buf) {
            Ok(0) => {
                let now = self.now();
                self.stream = None;
                self.client.handle_disconnect(now);
            }
            Ok(n) => {
                let now = self.now();
                self.client.handle_bytes(now, &self.buf[..n]);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => {
                let now = self.now();
                self.stream = None;
                self.client.handle_transport_error(now, (&e).into());
            }
        }
        let now = self.now();
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
    }

    /// A raw request, driven to its reply (other events are dropped: call only when no
    /// recipe runs).
    fn call(
        &mut self,
        req: zk_recipes::proto::Request,
    ) -> Result<Response, zk_recipes::client::Error> {
        let now = self.now();
        let token: Token = self.client.submit(now, req).expect("submitted");
        let mut events = Vec::new();
        loop {
            self.flush(&mut events);
            for e in events.drain(..) {
                if let ClientEvent::Session(SessionEvent::Reply(r)) = e {
                    if r.token == token {
                        return r.result;
                    }
                }
            }
            self.step();
        }
    }
}

struct Outcome {
    n: usize,
    total: Duration,
    handoff: Duration,
    cpu: Duration,
    /// CPU time of the server's JVM over the run.
    server_cpu: Duration,
    requests: u64,
    rx: u64,
    tx: u64,
    heap_per_waiter: f64,
    /// Requests and bytes received from the moment every waiter is queued (the
    /// handoffs alone, without each waiter's entry listing).
    handoff_requests: u64,
    handoff_rx: u64,
    failed: usize,
    left: usize,
    acquired: usize,
    stalled: bool,
}

impl Outcome {
    /// Folds another round of the same count in (heap per waiter stays the first
    /// round's: the same machines, measured once).
    fn add(&mut self, o: Outcome) {
        self.n += o.n;
        self.total += o.total;
        self.handoff += o.handoff;
        self.cpu += o.cpu;
        self.server_cpu += o.server_cpu;
        self.requests += o.requests;
        self.rx += o.rx;
        self.tx += o.tx;
        self.handoff_requests += o.handoff_requests;
        self.handoff_rx += o.handoff_rx;
        self.failed += o.failed;
        self.left += o.left;
        self.acquired += o.acquired;
        self.stalled |= o.stalled;
    }
}

/// Rounds per count: at least 2,000 acquisitions, so that a small N is not one short,
/// noisy sample (100 waiters pass the lock along in about a tenth of a second).
fn rounds_for(n: usize) -> usize {
    2_000usize.div_ceil(n.max(1)).max(1)
}

/// `LOCK_SCALE_MAX_IN_FLIGHT`: the session's cap on requests on the wire, if set.
fn max_in_flight() -> Option<usize> {
    std::env::var("LOCK_SCALE_MAX_IN_FLIGHT")
        .ok()
        .and_then(|s| s.parse().ok())
}

fn run(cs: &str, n: usize, round: usize, timeout: Duration) -> Outcome {
    let dir = format!("/lock_scale/n{n}r{round}");
    let mut options = Options::new(cs)
        .unwrap()
        .session_timeout(Duration::from_secs(30))
        .max_pending(n * 2 + 1_000)
        .seed((n * 1_000 + round) as u64);
    if let Some(b) = max_in_flight() {
        options = options.max_in_flight(b);
    }
    // Room for one data watch per waiter (and slack).
    options.session.max_watches = n * 2 + 1_000;
    let start = StdInstant::now();
    let client = Client::new(options, Instant::ZERO);
    let hosts = (0..client.session().config().connect_string.hosts().len())
        .map(|i| client.host(i).to_string())
        .collect();
    let mut d = Driver {
        client,
        hosts,
        stream: None,
        start,
        out: BytesMut::new(),
        buf: vec![0u8; 1 << 20],
    };
    let mut events = Vec::new();
    while d.client.session().session_id() == 0 {
        d.flush(&mut events);
        d.step();
    }
    events.clear();
    // The directory, created once so the lock does not create it in the first listing.
    let _ = d.call(ops::create(
        "/lock_scale",
        Default::default(),
        &ops::CreateOptions::mode(CreateMode::Persistent),
    ));
    let _ = d.call(ops::create(
        &dir,
        Default::default(),
        &ops::CreateOptions::mode(CreateMode::Persistent),
    ));
    let ids: Vec<String> = (0..n as u64).map(|i| node_id(n as u64, i)).collect();
    let mut handles: Vec<RecipeHandle<Lock>> = Vec::with_capacity(n);
    let mut index = std::collections::HashMap::with_capacity(n);
    events.reserve(4 * n);
    let heap_before = live();
    let before = d.client.counters();
    let t0 = StdInstant::now();
    let cpu0 = cpu_time();
    let server_cpu0 = server_cpu();
    for id in &ids {
        let now = d.now();
        let h = d.client.add(
            now,
            Lock::new(LockConfig::new(&dir, LockKind::Exclusive, id)),
        );
        d.client.command(now, h, |l, now| l.acquire(now, None));
        index.insert(h.id(), handles.len());
        handles.push(h);
    }
    let mut holder: Option<usize> = None;
    let mut first_held = true;
    let mut queued_at: Option<StdInstant> = None;
    let mut heap_queued = 0isize;
    let mut at_queued = before;
    let (mut acquired, mut released, mut done, mut failed) = (0usize, 0usize, 0usize, 0usize);
    let mut last_fencing = i64::MIN;
    let mut stalled = false;
    while done < n {
        if t0.elapsed() > timeout {
            stalled = true;
            break;
        }
        d.flush(&mut events);
        let mut to_release = Vec::new();
        let had_events = !events.is_empty();
        for e in events.drain(..) {
            match e {
                ClientEvent::Recipe { id, event } => {
                    let Some(&i) = index.get(&id) else { continue };
                    match event.downcast_ref::<LockEvent>() {
                        Some(LockEvent::Acquired { fencing_token, .. }) => {
                            assert!(holder.is_none(), "two holders at once");
                            assert!(*fencing_token > last_fencing, "fencing token went back");
                            last_fencing = *fencing_token;
                            holder = Some(i);
                            acquired += 1;
                            if !first_held {
                                to_release.push(i);
                            }
                        }
                        Some(LockEvent::Released) => released += 1,
                        Some(LockEvent::Suspended) | Some(LockEvent::Reconnected) => {}
                        Some(other) => {
                            failed += 1;
                            eprintln!("waiter {i}: {other:?}");
                        }
                        None => {}
                    }
                }
                ClientEvent::RecipeDone { .. } => done += 1,
                _ => {}
            }
        }
        // The first holder keeps the lock until every other waiter is queued (its node
        // created, its predecessor watched: nothing left on the wire).
        if first_held && holder.is_some() && d.client.session().pending() == 0 {
            let all = handles
                .iter()
                .all(|h| d.client.recipe(*h).is_some_and(|l| l.node().is_some()));
            if all {
                first_held = false;
                heap_queued = live();
                queued_at = Some(StdInstant::now());
                at_queued = d.client.counters();
                to_release.extend(holder);
            }
        }
        let busy = had_events || !to_release.is_empty();
        for i in to_release {
            // The holder stops using the lock when it asks to release (the next one
            // may hear of the deletion before we hear the delete's reply).
            assert_eq!(holder, Some(i));
            holder = None;
            let now = d.now();
            d.client.command(now, handles[i], |l, now| l.release(now));
        }
        if !busy {
            d.step();
        }
    }
    let total = t0.elapsed();
    let cpu = cpu_time().saturating_sub(cpu0);
    let server_cpu = server_cpu().saturating_sub(server_cpu0);
    let handoff = queued_at.map(|t| t.elapsed()).unwrap_or_default();
    let after = d.client.counters();
    let left = match d.call(ops::get_children(&dir, false)) {
        Ok(Response::Children(c)) => c.len(),
        other => panic!("listing {dir}: {other:?}"),
    };
    if left == 0 && !stalled {
        let _ = d.call(ops::delete(&dir, None));
    }
    let now = d.now();
    d.client.close(now, now + Duration::from_secs(5));
    let mut ev = Vec::new();
    while !d.client.is_ended() {
        d.flush(&mut ev);
        d.step();
    }
    let _ = released;
    Outcome {
        n,
        total,
        handoff,
        cpu,
        server_cpu,
        requests: after.requests_sent - before.requests_sent,
        rx: after.bytes_received - before.bytes_received,
        tx: after.bytes_sent - before.bytes_sent,
        heap_per_waiter: (heap_queued - heap_before) as f64 / n as f64,
        handoff_requests: after.requests_sent - at_queued.requests_sent,
        handoff_rx: after.bytes_received - at_queued.bytes_received,
        failed: failed + (n - acquired.min(n)) * usize::from(stalled),
        left,
        acquired,
        stalled,
    }
}

/// The end-to-end case (issue 25): N tasks on one tokio session (`zk_recipes_tokio`,
/// a 2-worker runtime), each `lock(dir).acquire().await` then `release().await`, all
/// spawned at once: the lock is passed along while later waiters are still entering,
/// as an application sees it. Entry included; no "handoff" split.
fn run_tokio(cs: &str, n: usize, round: usize, timeout: Duration) -> Outcome {
    use std::sync::atomic::{AtomicI64, AtomicUsize};
    use std::sync::Arc;
    use zk_recipes_tokio as zt;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = format!("/lock_scale/e2e{n}r{round}");
    rt.block_on(async {
        let mut options = zt::Options::default()
            .session_timeout(Duration::from_secs(30))
            .max_pending(n * 2 + 1_000)
            .seed((n * 1_000 + round) as u64);
        if let Some(b) = max_in_flight() {
            options = options.max_in_flight(b);
        }
        let zk = zt::connect(cs, options).await.expect("a session");
        let persistent = zt::CreateOptions::mode(CreateMode::Persistent);
        let _ = zk.create("/lock_scale", "", &persistent).await;
        let _ = zk.create(&dir, "", &persistent).await;
        let before = zk.counters().await.expect("counters");
        let inside = Arc::new(AtomicUsize::new(0));
        let acquired = Arc::new(AtomicUsize::new(0));
        let last_fencing = Arc::new(AtomicI64::new(i64::MIN));
        let t0 = StdInstant::now();
        let cpu0 = cpu_time();
        let server_cpu0 = server_cpu();
        let tracing = trace_on();
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let zk = zk.clone();
                let dir = dir.clone();
                let (inside, acquired, last) =
                    (inside.clone(), acquired.clone(), last_fencing.clone());
                tokio::spawn(async move {
                    let guard = zk.lock(&dir).acquire().await?;
                    let held_at = t0.elapsed();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    let token = guard.fencing_token();
                    let previous = last.swap(token, Ordering::SeqCst);
                    assert!(token > previous, "fencing token went back");
                    acquired.fetch_add(1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await?;
                    Ok::<_, zt::Error>((held_at, t0.elapsed()))
                })
            })
            .collect();
        let mut times = Vec::new();
        let mut failed = 0usize;
        let all = async {
            for t in tasks {
                match t.await {
                    Ok(Ok(at)) => times.push(at),
                    Ok(Err(e)) => {
                        failed += 1;
                        eprintln!("waiter: {e:?}");
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("waiter panicked: {e:?}");
                    }
                }
            }
        };
        let stalled = tokio::time::timeout(timeout, all).await.is_err();
        let total = t0.elapsed();
        if tracing {
            trace_phases(n, &mut times, total);
        }
        let cpu = cpu_time().saturating_sub(cpu0);
        let server_cpu = server_cpu().saturating_sub(server_cpu0);
        let after = zk.counters().await.expect("counters");
        let acquired = acquired.load(Ordering::SeqCst);
        // The listing itself may be refused while the last deletions drain.
        let left = loop {
            match zk.get_children(&dir).await {
                Err(zt::Error::Overloaded) => tokio::time::sleep(Duration::from_millis(10)).await,
                other => break other.map(|c| c.len()).unwrap_or(usize::MAX),
            }
        };
        if left == 0 && !stalled {
            let _ = zk.delete(&dir, None).await;
        }
        zk.close().await;
        Outcome {
            n,
            total,
            handoff: Duration::ZERO,
            cpu,
            server_cpu,
            requests: after.requests_sent - before.requests_sent,
            rx: after.bytes_received - before.bytes_received,
            tx: after.bytes_sent - before.bytes_sent,
            heap_per_waiter: 0.0,
            handoff_requests: 0,
            handoff_rx: 0,
            failed: failed + (n - acquired.min(n)) * usize::from(stalled),
            left,
            acquired,
            stalled,
        }
    })
}

/// `LOCK_SCALE_TRACE=1`: the end-to-end case prints where its time went (`TRACE`
/// lines): when the first and later acquisitions came, and how long each release took
/// (from `release()` to its return) early in the run and later.
fn trace_on() -> bool {
    std::env::var("LOCK_SCALE_TRACE").is_ok_and(|v| v != "0")
}

/// Prints the phases of one end-to-end run from each waiter's (acquired at, released
/// at), both from the start of the run.
fn trace_phases(n: usize, times: &mut [(Duration, Duration)], total: Duration) {
    if times.is_empty() {
        return;
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].0;
    println!(
        "TRACE n={n} total {:.0} ms; acquisitions at (ms): first {:.1}, 1% {:.1}, 10% {:.1}, 50% {:.1}, 90% {:.1}, last {:.1}",
        ms(total),
        ms(at(0.0)),
        ms(at(0.01)),
        ms(at(0.1)),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(1.0)),
    );
    // A release's time: from the holder's acquisition (it releases at once) to the
    // release's return, for the first 1% of holders and for the rest.
    let split = (times.len() / 100).max(1);
    for (name, part) in [("first 1%", &times[..split]), ("rest", &times[split..])] {
        let mut r: Vec<Duration> = part.iter().map(|(a, b)| b.saturating_sub(*a)).collect();
        if r.is_empty() {
            continue;
        }
        r.sort();
        let q = |f: f64| ms(r[((r.len() - 1) as f64 * f) as usize]);
        println!(
            "TRACE n={n} release {name} ({}): p50 {:.2} ms, p90 {:.2}, max {:.2}",
            r.len(),
            q(0.5),
            q(0.9),
            q(1.0)
        );
    }
    // Handoff gaps: from one acquisition to the next.
    let gaps: Vec<f64> = times.windows(2).map(|w| ms(w[1].0 - w[0].0)).collect();
    let in_first = |f: f64| -> f64 {
        let k = ((gaps.len() as f64) * f) as usize;
        gaps[..k.max(1).min(gaps.len())].iter().sum::<f64>() / k.max(1) as f64
    };
    // Time per acquisition in each tenth of the acquisitions, in order.
    let tenth: Vec<String> = (0..10)
        .map(|k| {
            let a = times[times.len() * k / 10].0;
            let b = times[(times.len() * (k + 1) / 10).min(times.len() - 1)].0;
            let count = (times.len() * (k + 1) / 10).min(times.len() - 1) - times.len() * k / 10;
            format!("{:.0}", (b - a).as_secs_f64() * 1e6 / count.max(1) as f64)
        })
        .collect();
    println!(
        "TRACE n={n} us per acquisition by tenth: {}",
        tenth.join(" ")
    );
    if !gaps.is_empty() {
        println!(
            "TRACE n={n} mean gap between acquisitions (ms): first 1% {:.3}, first 10% {:.3}, all {:.3}",
            in_first(0.01),
            in_first(0.1),
            in_first(1.0)
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` smoke mode: nothing to do without a server
    }
    let timeout = Duration::from_secs(
        std::env::var("LOCK_SCALE_TIMEOUT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(900),
    );
    let counts: Vec<usize> = std::env::var("LOCK_SCALE_WAITERS")
        .unwrap_or_else(|_| "100,1000,10000".into())
        .split(',')
        .filter_map(|s| s.trim().replace('_', "").parse().ok())
        .collect();
    if let Ok(cs) = std::env::var("LOCK_SCALE_CHILD") {
        // One count in a process of its own (so its peak RSS is its own).
        let n = counts[0];
        let rounds = rounds_for(n);
        let one = |round| match std::env::var("LOCK_SCALE_CASE").as_deref() {
            Ok("e2e") => run_tokio(&cs, n, round, timeout),
            _ => run(&cs, n, round, timeout),
        };
        let mut o = one(0);
        for round in 1..rounds {
            if o.stalled {
                break;
            }
            o.add(one(round));
        }
        // Per-acquisition figures over every round (`o.n` counts them all).
        println!(
            "ROW {} {:.1} {:.1} {:.2} {:.0} {:.0} {} {:.0} {} {} {} {} {:.1} {:.2} {:.0} {} {:.1}",
            n,
            o.total.as_secs_f64() * 1e6 / o.n as f64,
            o.handoff.as_secs_f64() * 1e6 / o.n as f64,
            o.requests as f64 / o.n as f64,
            o.rx as f64 / o.n as f64,
            o.tx as f64 / o.n as f64,
            peak_rss_kib(),
            o.heap_per_waiter,
            o.failed,
            o.left,
            o.acquired,
            o.stalled,
            o.cpu.as_secs_f64() * 1e6 / o.n as f64,
            o.handoff_requests as f64 / o.n as f64,
            o.handoff_rx as f64 / o.n as f64,
            o.n / n,
            o.server_cpu.as_secs_f64() * 1e6 / o.n as f64,
        );
        return;
    }
    // `LOCK_SCALE_SERVER_FLAGS="-Dzookeeper.request_throttle_max_requests=100
    // -Dzookeeper.throttled_op_wait_time=5"` turns the server's request throttle on
    // (off by default): requests queued longer than that are answered `Throttled`.
    let flags: Vec<String> = std::env::var("LOCK_SCALE_SERVER_FLAGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    let server = TestServer::start_with(zk_recipes_testing::Options {
        jvm_flags: flags.clone(),
        ..Default::default()
    })
    .expect("a real ZooKeeper 3.8.0");
    if !flags.is_empty() {
        println!("server flags: {}", flags.join(" "));
    }
    let cs = server.connect_string();
    println!(
        "lock_scale: N waiters on ONE session, one path, all queued at once, then passing the lock along\n\
         size_of::<Lock>() = {} B; a queued waiter's machine holds {} B in all; timeout {:?} per run",
        std::mem::size_of::<Lock>(),
        machine_bytes(),
        timeout
    );
    let cases: Vec<String> = std::env::var("LOCK_SCALE_CASES")
        .unwrap_or_else(|_| "core,e2e".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let server_pid = server.pid().map(|p| p.to_string()).unwrap_or_default();
    let child = |case: &str, n: usize| {
        Command::new(std::env::current_exe().unwrap())
            .env("LOCK_SCALE_CHILD", &cs)
            .env("LOCK_SCALE_CASE", case)
            .env("LOCK_SCALE_SERVER_PID", &server_pid)
            .env("LOCK_SCALE_WAITERS", n.to_string())
            .env("LOCK_SCALE_TIMEOUT", timeout.as_secs().to_string())
            .output()
            .expect("run the child")
    };
    // A fresh server is slow at first (its JIT, its transaction log's first
    // preallocation): a warm-up run, not reported, so the first count is not the one
    // that pays for it.
    let warm_up: usize = std::env::var("LOCK_SCALE_WARMUP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    if warm_up > 0 {
        let out = child(&cases[0], warm_up);
        println!(
            "(warm-up: {warm_up} waiters, not reported: {})",
            if out.status.success() { "ok" } else { "FAILED" }
        );
    }
    let mut bad = false;
    for case in &cases {
        if case == "e2e" {
            println!(
                "end to end (issue 25): N tasks on ONE tokio session, `lock(dir).acquire()` then \
                 `release()`, all spawned at once (entry included, the lock passed along meanwhile)"
            );
        } else {
            println!("core client, every waiter queued before the first release:");
        }
        println!(
            "{:>7} {:>6} {:>9} {:>10} {:>9} {:>9} {:>8} {:>10} {:>8} {:>10} {:>9} {:>9} {:>9} {:>7} {:>5}",
            "waiters",
            "rounds",
            "us/acq",
            "handoff",
            "cpu us/acq",
            "srv cpu",
            "req/acq",
            "B rx/acq",
            "h req",
            "h B rx",
            "B tx/acq",
            "RSS KiB",
            "B/waiter",
            "failed",
            "left"
        );
        for &n in &counts {
            let out = child(case, n);
            let stdout = String::from_utf8_lossy(&out.stdout);
            for l in stdout.lines().filter(|l| l.starts_with("TRACE ")) {
                println!("{l}");
            }
            let Some(row) = stdout.lines().find_map(|l| l.strip_prefix("ROW ")) else {
                bad = true;
                println!(
                    "{n:>7} child failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .skip_while(|l| !l.contains("panicked"))
                        .take(3)
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
                continue;
            };
            let f: Vec<&str> = row.split_whitespace().collect();
            let stalled = f[11] == "true";
            // The end-to-end case has no "handoff" part nor a heap measure.
            let e2e = |v: &str| {
                if case == "e2e" {
                    "-".to_string()
                } else {
                    v.to_string()
                }
            };
            println!(
                "{:>7} {:>6} {:>9} {:>10} {:>9} {:>9} {:>8} {:>10} {:>8} {:>10} {:>9} {:>9} {:>9} {:>7} {:>5}{}",
                f[0],
                f[15],
                f[1],
                e2e(f[2]),
                f[12],
                f[16],
                f[3],
                f[4],
                e2e(f[13]),
                e2e(f[14]),
                f[5],
                f[6],
                e2e(f[7]),
                f[8],
                f[9],
                if stalled {
                    format!("  STALLED after {} of {n} acquisitions", f[10])
                } else {
                    String::new()
                }
            );
            bad |= stalled || f[8] != "0" || f[9] != "0";
        }
    }
    // Requests the server answered `Throttled` over all runs (retried by the lock
    // after a backoff, never a failed acquisition: see "failed").
    let throttled = zk_recipes_testing::four_letter(server.addr(), "mntr")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("zk_throttled_ops\t")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    println!("server zk_throttled_ops: {throttled}");
    drop(server);
    if bad {
        std::process::exit(1);
    }
}
