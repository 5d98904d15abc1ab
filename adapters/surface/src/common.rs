//! What both forms share as plain code: the options, the driver's published state, and
//! the session seed.

use std::sync::Arc;
use std::time::Duration;

use zk_recipes::client::{Error, Status};
use zk_recipes::sasl::{DigestMd5, Mechanism};
use zk_recipes::session::{DefaultAcl, HostFailures};

/// A wait that reached its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeout;

/// What the driver tells the handles about the session.
#[derive(Clone, Debug)]
pub struct Published {
    /// The session's status.
    pub status: Status,
    /// The session id (0 before the first session).
    pub session_id: i64,
    /// The session password.
    pub password: Vec<u8>,
    /// Every host and its last failure, once every host has failed.
    pub unreachable: Option<HostFailures>,
    /// The driver has ended.
    pub stopped: bool,
    /// The hosts the session uses (the connect string's, or the ensemble's latest when
    /// tracking it).
    pub hosts: Vec<String>,
    /// The host the session is connected to or dialling.
    pub host: String,
}

impl Default for Published {
    fn default() -> Self {
        Published {
            status: Status::Connecting,
            session_id: 0,
            password: Vec::new(),
            unreachable: None,
            stopped: false,
            hosts: Vec::new(),
            host: String::new(),
        }
    }
}

/// Session options, the same in both adapters.
#[derive(Clone, Debug)]
pub struct Options {
    /// Requested session timeout (the server may change it).
    pub session_timeout: Duration,
    /// How long `connect` keeps trying every host for the first session (default
    /// 30 s), as Curator's `blockUntilConnected` and kazoo's `start(timeout)` do: a
    /// server that is still starting (it closes connections, or accepts and does not
    /// answer) is tried again with backoff until then.
    pub connect_timeout: Duration,
    /// Give up `connect` as soon as every host has failed once, with the reasons,
    /// instead of trying until `connect_timeout` (default off).
    pub fail_fast: bool,
    /// How long each raw call (create, get_data, ...) waits for its reply (default
    /// 30 s); then it fails with [`Error::Timeout`]. Recipe calls have their own
    /// `_timeout` forms.
    pub call_timeout: Duration,
    /// Accept read-only servers.
    pub read_only: bool,
    /// Follow the ensemble's membership (`/zookeeper/config`) and rebalance over it as
    /// the Java client does (default off); see `docs/sessions.md`.
    pub track_ensemble: bool,
    /// Seed for host order and jitter; default: random.
    pub seed: Option<u64>,
    /// Start a new session by itself after an expiry (default on, as Curator and kazoo
    /// do); off: `Expired` ends the client.
    pub renew_on_expiry: bool,
    /// Cap on requests in flight plus requests queued in the session (default
    /// 10,000); beyond it a call fails with [`Error::Overloaded`] (never applied;
    /// recipes back off and retry by themselves).
    pub max_pending: usize,
    /// Cap on requests on the wire awaiting their reply (default 512); later ones wait
    /// in the session's queue, in order, so one client with thousands of waiters does
    /// not trip the server's throttle.
    pub max_in_flight: usize,
    /// SASL mechanism run on every connection right after the handshake (default
    /// `None`); see [`sasl_digest`](Self::sasl_digest) and `docs/auth.md`.
    pub sasl: Option<Arc<dyn Mechanism>>,
    /// The ACL of every node created with "the default" — the open ACL every recipe
    /// and `CreateOptions::default()` use unless told otherwise — per path prefix,
    /// parents included (Curator's `ACLProvider`; default `None`: nodes are open).
    pub default_acl: Option<DefaultAcl>,
    /// TLS to every host (cargo feature `tls` of the adapter; default `None`: plain
    /// TCP). See [`Tls`](crate::Tls) and `docs/tls.md`.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::Tls>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            session_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
            fail_fast: false,
            call_timeout: Duration::from_secs(30),
            read_only: false,
            track_ensemble: false,
            seed: None,
            renew_on_expiry: true,
            max_pending: 10_000,
            max_in_flight: zk_recipes::session::DEFAULT_MAX_IN_FLIGHT,
            sasl: None,
            default_acl: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl Options {
    /// Sets [`session_timeout`](Self::session_timeout).
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.session_timeout = t;
        self
    }

    /// Sets [`connect_timeout`](Self::connect_timeout).
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }

    /// Sets [`fail_fast`](Self::fail_fast).
    pub fn fail_fast(mut self, fail_fast: bool) -> Self {
        self.fail_fast = fail_fast;
        self
    }

    /// Sets [`call_timeout`](Self::call_timeout).
    pub fn call_timeout(mut self, t: Duration) -> Self {
        self.call_timeout = t;
        self
    }

    /// Sets [`read_only`](Self::read_only).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Sets [`track_ensemble`](Self::track_ensemble).
    pub fn track_ensemble(mut self, track: bool) -> Self {
        self.track_ensemble = track;
        self
    }

    /// Sets [`seed`](Self::seed).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Sets [`renew_on_expiry`](Self::renew_on_expiry).
    pub fn renew_on_expiry(mut self, renew: bool) -> Self {
        self.renew_on_expiry = renew;
        self
    }

    /// Sets [`max_pending`](Self::max_pending).
    pub fn max_pending(mut self, n: usize) -> Self {
        self.max_pending = n;
        self
    }

    /// Sets [`max_in_flight`](Self::max_in_flight).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// Authenticates every connection with SASL DIGEST-MD5 as `user` with `password`
    /// (a user of the server's JAAS `Server` section, `DigestLoginModule`); ACLs name
    /// it `sasl:<user>`. A refusal ends the client with
    /// [`Error::AuthFailed`] naming the mechanism and the reason.
    pub fn sasl_digest(self, user: &str, password: &str) -> Self {
        self.sasl(Arc::new(DigestMd5::new(user, password)))
    }

    /// Authenticates every connection with this SASL mechanism (one of the user's own:
    /// see [`zk_recipes::sasl::Mechanism`]).
    pub fn sasl(mut self, mechanism: Arc<dyn Mechanism>) -> Self {
        self.sasl = Some(mechanism);
        self
    }

    /// Sets [`default_acl`](Self::default_acl).
    pub fn default_acl(mut self, acl: DefaultAcl) -> Self {
        self.default_acl = Some(acl);
        self
    }

    /// Speaks TLS to every host, with these roots, client certificate and server name
    /// (cargo feature `tls` of the adapter).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: crate::Tls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Whether TLS is asked for (for a driver built without TLS, to refuse rather than
    /// connect in plain text).
    pub fn wants_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        return false;
    }

    /// For an adapter built without its `tls` feature: refuses options that ask for TLS
    /// (another crate of the build turned the shared TLS settings on) rather than
    /// connect in plain text.
    pub fn refuse_tls(&self, adapter: &str) -> Result<(), Error> {
        match self.wants_tls() {
            true => Err(Error::InvalidConnectString(format!(
                "Options::tls is set, but {adapter} was built without its feature `tls`"
            ))),
            false => Ok(()),
        }
    }

    /// The sans-IO client these options describe, for the driver to run.
    pub fn core(&self, connect_string: &str) -> Result<zk_recipes::client::Client, Error> {
        let mut options = zk_recipes::client::Options::new(connect_string)?
            .session_timeout(self.session_timeout)
            .read_only(self.read_only)
            .track_ensemble(self.track_ensemble)
            .renew_on_expiry(self.renew_on_expiry)
            .max_pending(self.max_pending)
            .max_in_flight(self.max_in_flight)
            .seed(self.seed.unwrap_or_else(random_seed));
        if let Some(mechanism) = &self.sasl {
            options = options.sasl(mechanism.clone());
        }
        if let Some(acl) = &self.default_acl {
            options = options.default_acl(acl.clone());
        }
        Ok(zk_recipes::client::Client::new(
            options,
            zk_recipes::time::Instant::ZERO,
        ))
    }
}

/// How long a [`probe`] may take, connecting and reading together.
pub const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Carries out a [`Transport::Probe`](zk_recipes::session::Transport::Probe) of `host`
/// (`host:port`) on a short-lived plain TCP connection, blocking (a driver runs it off
/// its I/O loop): writes the probe's request, returns what the server answered before
/// closing (at most the probe's maximum; empty if the connection or the read failed or
/// took longer than [`PROBE_TIMEOUT`]).
pub fn probe(host: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    use std::net::{TcpStream, ToSocketAddrs};
    use zk_recipes::session::Transport;
    let deadline = std::time::Instant::now() + PROBE_TIMEOUT;
    let left = || deadline.saturating_duration_since(std::time::Instant::now());
    let Ok(addrs) = host.to_socket_addrs() else {
        return Vec::new();
    };
    for addr in addrs {
        if left().is_zero() {
            break;
        }
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, left()) else {
            continue;
        };
        let mut answer = Vec::new();
        let read = stream
            .set_read_timeout(Some(left().max(std::time::Duration::from_millis(1))))
            .and_then(|()| stream.write_all(Transport::PROBE_REQUEST))
            .and_then(|()| {
                (&mut stream)
                    .take(Transport::PROBE_ANSWER_MAX as u64)
                    .read_to_end(&mut answer)
            });
        return if read.is_ok() { answer } else { Vec::new() };
    }
    Vec::new()
}

/// A fresh random id for a node we create (Curator's `_c_<uuid>-` protection prefix).
pub fn node_id() -> String {
    zk_recipes::recipe::lock::node_id(random_seed(), random_seed())
}

/// Fresh random bytes from the operating system (for a SASL client nonce); if the
/// system source fails, bytes from std's per-process random hasher keys.
pub fn random_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    if getrandom::getrandom(&mut bytes).is_err() {
        for chunk in bytes.chunks_mut(8) {
            chunk.copy_from_slice(&random_seed().to_le_bytes());
        }
    }
    bytes
}

/// The system's wall clock in milliseconds since the Unix epoch (0 before it): the
/// clock a delay queue's consumer compares its items' times with.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Entropy for seeds, from std's per-process random hasher keys.
pub fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Why an I/O error ended a connection, for the drivers: the TLS reason when `rustls`
/// failed (feature `tls`), the socket's otherwise.
pub fn transport_error(e: &std::io::Error) -> zk_recipes::session::TransportError {
    #[cfg(feature = "tls")]
    return crate::tls::transport_error(e);
    #[cfg(not(feature = "tls"))]
    return zk_recipes::session::TransportError::from(e);
}

/// A failure every address of a host would repeat (a certificate the client rejects, a
/// handshake the server refuses): a driver ends the attempt on the host with it rather
/// than dial the host's other addresses.
pub fn final_for_host(e: zk_recipes::session::TransportError) -> bool {
    #[cfg(feature = "tls")]
    return crate::tls::is_certificate_error(e);
    #[cfg(not(feature = "tls"))]
    return matches!(e, zk_recipes::session::TransportError::Tls(_));
}
