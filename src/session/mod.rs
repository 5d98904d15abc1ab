//! One logical ZooKeeper session across many TCP connections, as a sans-IO state machine.
//!
//! # Shape
//!
//! * **Input** — [`handle_connected`](Session::handle_connected) (the socket the session
//!   asked for is up), [`handle_bytes`](Session::handle_bytes),
//!   [`handle_disconnect`](Session::handle_disconnect) (the socket failed or closed),
//!   [`handle_timeout`](Session::handle_timeout). Each takes `now`.
//! * **Commands** — [`submit`](Session::submit) a request under a caller-chosen
//!   [`Token`], [`close`](Session::close).
//! * **Output** — [`poll_transport`](Session::poll_transport) (dial host *i* / close the
//!   socket), [`poll_transmit`](Session::poll_transmit) (bytes to write),
//!   [`poll_event`](Session::poll_event) (replies, watch events, state changes),
//!   [`poll_timeout`](Session::poll_timeout) (when to call `handle_timeout`).
//!
//! After every input or command the driver drains the outputs in this order —
//! `poll_transport`, `poll_transmit`, `poll_event` — until each returns nothing, then
//! sleeps until `poll_timeout` or the next input.
//!
//! # Behaviour (reference §2, §3, §8, §12)
//!
//! * Hosts are tried in an order shuffled from the configured seed; after a full round
//!   without a session, the next round waits with exponential backoff and jitter. Each
//!   attempt gets `session timeout / number of hosts`, at most a third of the timeout,
//!   to connect and handshake (a restarting ZooKeeper can accept a connection and never
//!   answer it: one such attempt must not use up the session).
//! * Only the `ConnectRequest` is written until the server answers it. With a SASL
//!   mechanism ([`SessionConfig::sasl`]), its exchange follows on every connection, and
//!   nothing else is written until it completes; a refusal ends the session
//!   ([`SessionEvent::AuthFailed`], final). An answer with a
//!   zero timeout means the session is gone: [`SessionEvent::Expired`], for good.
//! * Normal requests get xids 1, 2, … and replies must come back in that order; anything
//!   else is a protocol error that drops the connection. Pings (-2), auth (-4) and
//!   SetWatches (-8) are matched outside that queue.
//! * A ping goes out after `readTimeout / 2` without sending (`readTimeout` = 2/3 of the
//!   negotiated timeout); `readTimeout` without receiving drops the connection.
//! * On connection loss every request in flight completes with
//!   [`ErrorCode::ConnectionLoss`](crate::proto::ErrorCode::ConnectionLoss) (the server may or may not have applied it); requests
//!   not yet written wait for the next connection, up to `max_pending`.
//! * Backpressure: at most `max_in_flight` requests are on the wire at once; the rest
//!   wait in the session's queue, in submission order, and go out as replies come back
//!   (pings, auth and SetWatches bypass the bound; a close goes after everything
//!   submitted before it). Beyond `max_pending` (in flight plus queued) a request is
//!   refused with [`SubmitError::TooManyPending`] ([`Error::Overloaded`](crate::error::Error::Overloaded): never
//!   applied, retry after a backoff). One process with thousands of waiters thus never
//!   has more than `max_in_flight` requests outstanding at the server (ZooKeeper's
//!   global outstanding limit is 1,000 by default). Within that bound the window adapts
//!   to a throttling server: a `Throttled` reply halves it (once per window of
//!   replies), a window's worth of other replies grows it by one.
//! * Two lanes: a request submitted as *yielding*
//!   ([`submit_from`](Session::submit_from) with `yields`: a hosted recipe's entry, such as a
//!   lock waiter's create and first listing, which nobody else waits for) waits, while
//!   queued, behind requests of other requesters submitted later; every other request
//!   keeps submission order with everything but those. A requester's own requests are
//!   never reordered: while one of its yielding requests is queued, its later ones
//!   queue behind it, whatever their kind. So a lock holder's release is written as
//!   soon as the window has room, not after thousands of other waiters' entries.
//! * A caller may submit `SetWatches2` itself: one request that arms watches on several
//!   paths, each firing at once if its node changed after the given zxid (ZooKeeper
//!   answers it under its xid like any request). The watches are registered under the
//!   caller's token as the request is written, and notifications the server sends
//!   before its reply are held back until the reply, so the caller hears the reply
//!   first, as for any read that sets a watch; a failed one registers nothing.
//! * After a resume: auth packets are replayed, then SetWatches/SetWatches2 (in batches
//!   under the frame limit, with the last zxid seen) re-arm every watch, then queued
//!   requests go out.
//! * Disconnected for the negotiated session timeout (counted from the last byte
//!   received) ⇒ `Expired` locally: whoever holds something ephemeral must stop
//!   believing it, even before a server confirms.
//!
//! # Parts
//!
//! [`Session`] holds one value per part and the phase of the connection; each
//! part is a module that says what it owns:
//!
//! | module | owns |
//! |---|---|
//! | `hosts` | host order and rotation, failures, backoff, `Unreachable` |
//! | `identity` | session id and password, negotiated timeout, read-only, last zxid, suspended |
//! | `link` | the connection's bytes: frame decoder, bytes to write, last send and receive |
//! | `window` | xids, the requests in flight (FIFO matching), the AIMD window; the `Ticket` (opcode, token, what the answer does) a request carries from the lanes to its answer |
//! | `lanes` | the queue: main and yielding lanes, shared listings |
//! | `auth` | auth packets to replay, answers awaited |
//! | `sasl` | the SASL exchange of this connection (a step of the handshake) |
//! | `default_acl` | the ACL creates asking for "the default" get (applied at submit) |
//! | `watches` | the registry, SetWatches2 arming, fan-out, re-arming after a resume |
//! | `rebalance` | the ensemble tracker's state and rules: which reads are of `/zookeeper/config`, where their watches live, the rebalancing decision |
//! | `ensemble` | following `/zookeeper/config` and rebalancing over its members ([`SessionConfig::track_ensemble`]) |
//!
//! and the session's own steps, over those parts: `connection` (dialling, the
//! handshake, priming, losing a connection), `authenticate` (the SASL exchange), `submit` (admitting and writing
//! requests), `replies` (reading frames, completing requests), `timers` (pings,
//! timeouts, the expiry estimate), `close` (closing, ending, expiry, failing what is
//! pending). `config` and `event` are the settings and the vocabulary; the error types
//! live in [`crate::error`].

mod auth;
mod authenticate;
mod close;
mod config;
mod connect_string;
mod connection;
mod default_acl;
mod ensemble;
mod event;
mod hosts;
mod identity;
mod lanes;
mod link;
mod rebalance;
mod replies;
mod rng;
mod sasl;
mod submit;
mod timers;
mod watches;
mod window;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use bytes::BytesMut;
use core::time::Duration;

pub use crate::error::{
    AuthFailure, ConnectStringError, DisconnectReason, HostFailures, SaslFailure, SessionEnd,
    SubmitError, TlsFailure, TransportError,
};
pub use config::{SessionConfig, DEFAULT_MAX_IN_FLIGHT};
pub use connect_string::ConnectString;
pub use default_acl::DefaultAcl;
pub use event::{
    Counters, Reply, SessionEvent, SessionState, SharedReply, Token, Transport, WatchEvent,
    WatchKind,
};
pub use watches::WatchLists;

use crate::hash::shed_queue;
use crate::proto::Request;
use crate::time::Instant;
use auth::Auth;
use hosts::Hosts;
use identity::Identity;
use lanes::Lanes;
use link::Link;
use rebalance::Tracker;
use sasl::SaslStep;
use watches::Watches;
use window::Window;

/// Where the connection stands (the session's state is this and `Identity::suspended`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    /// Waiting until `dial_at` to dial the next host.
    Idle {
        dial_at: Instant,
    },
    /// Asked the driver to connect; `deadline` covers connect + handshake.
    Dialing {
        deadline: Instant,
    },
    /// ConnectRequest written; waiting for the answer.
    Handshaking {
        deadline: Instant,
    },
    /// The server accepted the handshake; the SASL exchange runs (nothing else is
    /// written) until `deadline`, the handshake's.
    Authenticating {
        deadline: Instant,
    },
    /// Session established on this connection.
    Connected,
    /// closeSession written; waiting for its reply until `deadline`.
    Closing {
        deadline: Instant,
    },
    Ended(SessionEnd),
}

/// The sans-IO session. See the [module docs](self).
///
/// ```
/// use zk_recipes::session::*;
/// use zk_recipes::time::Instant;
/// use zk_recipes::proto::{Request, PathWatch};
///
/// let cfg = SessionConfig::new("127.0.0.1:2181".parse().unwrap());
/// let mut s = Session::new(cfg, Instant::ZERO);
/// // The driver is asked to dial host 0.
/// assert_eq!(s.poll_transport(), Some(Transport::Connect { host: 0 }));
/// // Requests made before the connection is up wait for it.
/// s.submit(Instant::ZERO, Request::Exists(PathWatch { path: "/a".into(), watch: false }), Token(1)).unwrap();
/// s.handle_connected(Instant::from_micros(1_000));
/// let mut out = bytes::BytesMut::new();
/// assert!(s.poll_transmit(&mut out)); // the ConnectRequest, and only that
/// assert_eq!(out.len(), 4 + 45);
/// ```
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    /// The latest `now` seen: time never goes back.
    now: Instant,
    phase: Phase,
    hosts: Hosts,
    identity: Identity,
    link: Link,
    window: Window,
    lanes: Lanes,
    auth: Auth,
    sasl: SaslStep,
    watches: Watches,
    ensemble: Tracker,
    /// What the driver must do with its socket, in order.
    transport: VecDeque<Transport>,
    /// What the session reports, in order.
    events: VecDeque<SessionEvent>,
    counters: Counters,
}

impl Session {
    /// A session that starts connecting at once.
    pub fn new(config: SessionConfig, now: Instant) -> Session {
        let hosts = Hosts::new(config.connect_string.hosts().to_vec(), config.seed, now);
        let mut s = Session {
            hosts,
            now,
            phase: Phase::Idle { dial_at: now },
            identity: Identity::default(),
            link: Link::new(config.max_reply, now),
            window: Window::new(config.max_in_flight),
            lanes: Lanes::default(),
            auth: Auth::default(),
            sasl: SaslStep::default(),
            watches: Watches::default(),
            ensemble: Tracker::default(),
            transport: VecDeque::new(),
            events: VecDeque::new(),
            counters: Counters::default(),
            config,
        };
        s.dial();
        s
    }

    // ----- getters -----

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Session id (0 before the first handshake).
    pub fn session_id(&self) -> i64 {
        self.identity.session_id
    }

    /// Session password (zeros before the first handshake).
    pub fn password(&self) -> &[u8] {
        self.identity.password()
    }

    /// Negotiated timeout, once known.
    pub fn negotiated_timeout(&self) -> Option<Duration> {
        self.identity.negotiated
    }

    /// Highest zxid seen in a reply.
    pub fn last_zxid(&self) -> i64 {
        self.identity.last_zxid
    }

    /// Where the session stands.
    pub fn state(&self) -> SessionState {
        match self.phase {
            Phase::Ended(end) => SessionState::Ended(end),
            Phase::Closing { .. } => SessionState::Closing,
            Phase::Connected => SessionState::Connected,
            _ if self.identity.suspended => SessionState::Suspended,
            _ => SessionState::Connecting,
        }
    }

    /// Why the last connection attempt failed, if one did.
    pub fn last_failure(&self) -> Option<&DisconnectReason> {
        self.hosts.last_failure()
    }

    /// Index of the host being used or dialled.
    pub fn current_host(&self) -> usize {
        self.hosts.current()
    }

    /// Requests in flight plus requests waiting in the queue (for a connection or for
    /// room under `max_in_flight`).
    pub fn pending(&self) -> usize {
        self.window.len() + self.lanes.len()
    }

    /// Requests written and not yet answered (at most `max_in_flight`, plus a close).
    pub fn in_flight(&self) -> usize {
        self.window.len()
    }

    /// What the session has sent and received so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Does `token` still have a watch registered (one a watch event has not used up)?
    pub fn is_watching(&self, token: Token) -> bool {
        self.watches.is_watching(token)
    }

    /// Watch registrations.
    pub fn watch_count(&self) -> usize {
        self.watches.len()
    }

    /// Registrants of one watch (for tests and introspection).
    pub fn watch_registrants(&self, path: &str, kind: WatchKind) -> Vec<Token> {
        self.watches.registrants(path, kind)
    }

    /// Paths with watches, by table.
    pub fn watch_lists(&self) -> WatchLists {
        self.watches.lists()
    }

    // ----- input -----

    fn tick(&mut self, now: Instant) -> Instant {
        // A `now` earlier than the last one is treated as the last one.
        self.now = self.now.max(now);
        self.now
    }

    /// The socket asked for by [`Transport::Connect`] is connected.
    pub fn handle_connected(&mut self, now: Instant) {
        let now = self.tick(now);
        if let Phase::Dialing { deadline } = self.phase {
            self.start_handshake(now, deadline);
        }
    }

    /// The socket was closed by the peer (same as
    /// [`handle_transport_error`](Self::handle_transport_error) with `Closed`).
    pub fn handle_disconnect(&mut self, now: Instant) {
        self.handle_transport_error(now, TransportError::Closed)
    }

    /// The socket failed to connect, or failed or closed afterwards.
    pub fn handle_transport_error(&mut self, now: Instant, error: TransportError) {
        let now = self.tick(now);
        match self.phase {
            Phase::Dialing { .. } | Phase::Connected => {
                self.connection_lost(now, DisconnectReason::Transport(error))
            }
            Phase::Handshaking { .. } | Phase::Authenticating { .. } => {
                self.connection_lost(now, DisconnectReason::ClosedBeforeHandshake(error))
            }
            // The server closes the socket right after answering closeSession; if the
            // answer did not make it, the close is done all the same.
            Phase::Closing { .. } => self.end(SessionEnd::Closed, false),
            Phase::Idle { .. } | Phase::Ended(_) => {}
        }
    }

    /// Bytes read from the socket.
    pub fn handle_bytes(&mut self, now: Instant, mut bytes: &[u8]) {
        let now = self.tick(now);
        self.counters.bytes_received = self
            .counters
            .bytes_received
            .saturating_add(bytes.len() as u64);
        if !matches!(
            self.phase,
            Phase::Handshaking { .. }
                | Phase::Authenticating { .. }
                | Phase::Connected
                | Phase::Closing { .. }
        ) {
            return; // stale bytes from a connection we already gave up
        }
        while !bytes.is_empty() {
            let handshaking = matches!(self.phase, Phase::Handshaking { .. });
            let frame = match self.link.decoder.decode(&mut bytes) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) if handshaking => {
                    return self.connection_lost(now, DisconnectReason::NotZooKeeper)
                }
                Err(e) => return self.connection_lost(now, DisconnectReason::Frame(e)),
            };
            // Only a whole frame counts as hearing from the server: a reply trickled a
            // byte at a time does not keep a dead connection alive.
            self.link.last_recv = now;
            let result = match self.phase {
                Phase::Handshaking { .. } => self.on_handshake(now, frame),
                Phase::Authenticating { .. } => self.on_sasl_frame(now, frame),
                Phase::Connected | Phase::Closing { .. } => self.on_frame(now, frame),
                _ => return,
            };
            if let Err(reason) = result {
                return self.connection_lost(now, reason);
            }
        }
    }

    /// Time passed; call at or after [`poll_timeout`](Self::poll_timeout).
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.tick(now);
        // Each step moves its deadline past `now` or ends the session; a few rounds
        // settle any chain (a read timeout that leads into an expired estimate).
        for _ in 0..4 {
            if !self.fire_due(now) {
                break;
            }
        }
    }

    /// Random bytes from the driver's entropy source, for the next connection's SASL
    /// exchange (DIGEST-MD5's client nonce): a driver whose session has a SASL
    /// mechanism calls this before each [`handle_connected`](Self::handle_connected)
    /// (the core has no random number generator). Without it the exchange fails with
    /// [`SaslFailure::NoRandom`].
    pub fn handle_random(&mut self, random: [u8; 32]) {
        self.sasl.random = Some(random);
    }

    /// What a [`Transport::Probe`] of `host` read: `answer` (empty if the probe failed
    /// or nothing came). If it says `host` serves read-write while this session is
    /// still on a read-only server, the session drops that connection and dials `host`
    /// at once (resuming the session there, its watches re-armed); requests in flight
    /// fail with `ConnectionLoss`, as on any lost connection. If it says `host` is
    /// read-only while the session is disconnected and `host` closed the handshake
    /// presenting it, `host` is dialled next for a read-only stand-in. Anything else
    /// changes nothing (the next probe asks another host later).
    pub fn handle_probe(&mut self, now: Instant, host: usize, answer: &[u8]) {
        let now = self.tick(now);
        if answer == b"ro" {
            let idle = matches!(self.phase, Phase::Idle { .. });
            let disconnected = idle
                || matches!(
                    self.phase,
                    Phase::Dialing { .. } | Phase::Handshaking { .. }
                );
            if disconnected && self.hosts.found_read_only(host, idle) && idle {
                // Dial now: the wait was for the host that refused.
                self.dial();
            }
            return;
        }
        if answer != b"rw"
            || self.phase != Phase::Connected
            || !self.identity.read_only_server()
            || !self.hosts.found_read_write(host)
        {
            return;
        }
        self.connection_lost(now, DisconnectReason::ReadWriteServerFound { host });
    }

    // ----- commands -----

    /// Submits a request. Paths are validated and the chroot applied here; on error
    /// nothing is queued or sent. The reply comes back as [`SessionEvent::Reply`] with
    /// `token`, exactly once.
    pub fn submit(
        &mut self,
        now: Instant,
        request: Request,
        token: Token,
    ) -> Result<(), SubmitError> {
        self.submit_from(now, request, token, 0, false)
    }

    /// Closes the session: sends closeSession after anything already submitted (in
    /// flight or queued under `max_in_flight`) and waits for the answer until
    /// `deadline`. Without a connection it ends at once (the server then expires the
    /// session after its timeout). [`SessionEvent::Closed`] says whether a server
    /// answered the session's own closeSession (`confirmed`); on a read-only stand-in
    /// the answer closes the stand-in only, so it is not.
    pub fn close(&mut self, now: Instant, deadline: Instant) {
        let now = self.tick(now);
        self.begin_close(now, deadline);
    }

    /// Forgets every watch registration of `token` (its owner is gone). The server's
    /// watch remains until it fires; its event then reaches nobody.
    pub fn forget_watches(&mut self, token: Token) {
        self.watches.forget(token);
    }

    // ----- output -----

    /// Has the session something to say about the socket (close it, dial)? A driver
    /// reading in a loop stops when it has.
    pub fn transport_pending(&self) -> bool {
        !self.transport.is_empty()
    }

    /// What to do with the socket, if anything.
    pub fn poll_transport(&mut self) -> Option<Transport> {
        self.transport.pop_front()
    }

    /// Moves bytes to write into `out`; true if there were any.
    pub fn poll_transmit(&mut self, out: &mut BytesMut) -> bool {
        self.link.transmit(out, &mut self.counters)
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        let event = self.events.pop_front();
        match &event {
            None => {
                shed_queue(&mut self.events);
                self.watches.shed();
            }
            Some(SessionEvent::Watch { token, .. }) => self.watches.polled(*token),
            Some(_) => {}
        }
        event
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_deadline()
    }
}

#[cfg(test)]
mod tests;
