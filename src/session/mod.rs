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
//! * Only the `ConnectRequest` is written until the server answers it. An answer with a
//!   zero timeout means the session is gone: [`SessionEvent::Expired`], for good.
//! * Normal requests get xids 1, 2, … and replies must come back in that order; anything
//!   else is a protocol error that drops the connection. Pings (-2), auth (-4) and
//!   SetWatches (-8) are matched outside that queue.
//! * A ping goes out after `readTimeout / 2` without sending (`readTimeout` = 2/3 of the
//!   negotiated timeout); `readTimeout` without receiving drops the connection.
//! * On connection loss every request in flight completes with
//!   [`ErrorCode::ConnectionLoss`] (the server may or may not have applied it); requests
//!   not yet written wait for the next connection, up to `max_pending`.
//! * Backpressure: at most `max_in_flight` requests are on the wire at once; the rest
//!   wait in the session's queue, in submission order, and go out as replies come back
//!   (pings, auth and SetWatches bypass the bound; a close goes after everything
//!   submitted before it). Beyond `max_pending` (in flight plus queued) a request is
//!   refused with [`SubmitError::TooManyPending`] ([`Error::Overloaded`]: never
//!   applied, retry after a backoff). One process with thousands of waiters thus never
//!   has more than `max_in_flight` requests outstanding at the server (ZooKeeper's
//!   global outstanding limit is 1,000 by default). Within that bound the window adapts
//!   to a throttling server: a `Throttled` reply halves it (once per window of
//!   replies), a window's worth of other replies grows it by one.
//! * Two lanes: a request submitted as *yielding*
//!   ([`submit_yielding`](Session::submit_yielding): a hosted recipe's entry, such as a
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

mod config;
mod connect_string;
mod event;
mod rng;
mod watches;

use alloc::boxed::Box;
use alloc::collections::{BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};
use core::time::Duration;

pub use crate::error::{
    ConnectStringError, DisconnectReason, HostFailures, SessionEnd, SubmitError, TlsFailure,
    TransportError,
};
pub use config::{SessionConfig, DEFAULT_MAX_IN_FLIGHT};
pub use connect_string::ConnectString;
pub use event::{
    Counters, Reply, SessionEvent, SessionState, SharedReply, Token, Transport, WatchEvent,
    WatchKind,
};
pub use watches::WatchLists;

use crate::error::Error;
use crate::hash::{shed_map, shed_queue, HashMap};
use crate::proto::*;
use crate::time::Instant;
use rng::Rng;
use watches::WatchRegistry;

/// What to do once a request's reply arrives.
#[derive(Debug)]
enum After {
    Nothing,
    /// Register a watch if the reply says it was set.
    Watch {
        path: String,
        on_ok: Option<WatchKind>,
        on_no_node: Option<WatchKind>,
    },
    /// Drop registrations the server removed.
    RemoveWatches {
        path: String,
        which: WatcherType,
    },
    /// The closeSession reply.
    Close,
    /// A caller's SetWatches2: these watches are registered as it is written.
    Arm(Vec<(String, WatchKind)>),
}

/// Room for outgoing bytes the session keeps between writes.
const TX_KEEP: usize = 16 * 1024;

#[derive(Debug)]
struct InFlight {
    xid: i32,
    op: OpCode,
    token: Token,
    after: After,
    /// The other requesters a shared read answers (see [`Session::submit_shared`]).
    more: Vec<Token>,
}

/// A request waiting for a connection; its frame has a zero xid to patch.
#[derive(Debug)]
struct Queued {
    frame: BytesMut,
    op: OpCode,
    token: Token,
    after: After,
    /// A read other requesters' identical reads may join (see [`Session::submit_shared`]).
    share: Option<Box<Share>>,
    /// Who submitted it (0: nobody in particular, a raw request).
    requester: u64,
}

/// A queued listing that answers every requester that joined it.
#[derive(Debug)]
struct Share {
    /// Which shared read (the same while it moves back in the queue).
    id: u64,
    op: OpCode,
    /// As sent (chroot applied).
    path: String,
    watch: bool,
    /// Who it answers, the queued request's own token first: (token, requester).
    members: Vec<(Token, u64)>,
}

/// How far from the back of the queue a listing looks for an identical one to join
/// (a waiter's create sits between two waiters' listings).
const SHARE_LOOKBACK: usize = 8;

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
    /// Session established on this connection.
    Connected,
    /// closeSession written; waiting for its reply until `deadline`.
    Closing {
        deadline: Instant,
    },
    Ended(SessionEnd),
}

const SET_WATCHES_BATCH: usize = 128 * 1024;

/// Picks one list of a SetWatches2 batch.
type WatchSlot = fn(&mut SetWatches2) -> &mut Vec<String>;

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
    rng: Rng,
    now: Instant,
    phase: Phase,
    /// Host order (indices into the connect string) and position in it.
    order: Vec<usize>,
    position: usize,
    /// Failed connection attempts since the last stable connection (a connection lost
    /// within `stable_after` of its handshake counts as failed), for backoff.
    failures: u32,
    /// When the current connection's handshake completed.
    connected_at: Instant,
    /// Why the last connection attempt failed (for `Unreachable` and logs).
    last_failure: Option<DisconnectReason>,
    /// Before the first session: each host's last failure, by host index.
    host_failures: Vec<Option<DisconnectReason>>,
    /// A session was ever established (on this session id or an earlier one).
    ever_connected: bool,

    session_id: i64,
    passwd: Bytes,
    negotiated: Option<Duration>,
    read_only_server: bool,
    last_zxid: i64,
    /// The session had a connection that was lost and not yet regained.
    suspended: bool,
    last_recv: Instant,
    last_send: Instant,

    decoder: FrameDecoder,
    tx: BytesMut,
    next_xid: i32,
    in_flight: VecDeque<InFlight>,
    /// The queue: requests waiting for a connection or for room on the wire, written
    /// in order before any of the yielding lane's.
    queued: VecDeque<Queued>,
    /// The yielding lane (see [`Session::submit_yielding`]), written once `queued` is
    /// empty; a close waits at its back.
    yielding: VecDeque<Queued>,
    /// How many requests each requester has in the yielding lane (a shared listing
    /// counts for each of its members): its later requests queue there too.
    yielders: HashMap<u64, u32>,
    /// How many requests may be on the wire now (at most `max_in_flight`): halved when
    /// the server answers `Throttled` (at most once per window of replies), grown by
    /// one per window of replies that were not (AIMD), so a session finds a throttling
    /// server's limit by itself.
    window: usize,
    /// Replies since the window was last cut, and since it last grew.
    since_cut: usize,
    since_grow: usize,
    /// Auth packets to replay on every connection; the token is reported once.
    auths: Vec<(AuthPacket, Option<Token>)>,
    auth_waiters: VecDeque<Option<Token>>,
    watches: WatchRegistry,

    transport: VecDeque<Transport>,
    events: VecDeque<SessionEvent>,
    scratch: Vec<Token>,
    /// Callers' SetWatches2 in flight, and the notifications their watches got before
    /// the reply (held back until it).
    arming: Vec<Token>,
    deferred: Vec<(Token, WatchEvent)>,
    /// Watch events queued and not yet polled, by token.
    unpolled: HashMap<Token, u32>,
    counters: Counters,
    /// Shared reads: the next id; each requester's latest queued shared read; the
    /// shared reads a member of which submitted something after them (they stay put).
    next_share: u64,
    sharing: HashMap<u64, u64>,
    sealed: BTreeSet<u64>,
}

impl Session {
    /// A session that starts connecting at once.
    pub fn new(config: SessionConfig, now: Instant) -> Session {
        let window = config.max_in_flight.max(1);
        let mut rng = Rng::new(config.seed);
        let mut order: Vec<usize> = (0..config.connect_string.hosts().len()).collect();
        rng.shuffle(&mut order);
        let decoder = FrameDecoder::new(config.max_reply);
        let mut s = Session {
            config,
            rng,
            now,
            phase: Phase::Idle { dial_at: now },
            order,
            position: 0,
            failures: 0,
            connected_at: now,
            last_failure: None,
            host_failures: Vec::new(),
            ever_connected: false,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            negotiated: None,
            read_only_server: false,
            last_zxid: 0,
            suspended: false,
            last_recv: now,
            last_send: now,
            decoder,
            tx: BytesMut::new(),
            next_xid: 1,
            in_flight: VecDeque::new(),
            queued: VecDeque::new(),
            yielding: VecDeque::new(),
            yielders: HashMap::default(),
            window,
            since_cut: usize::MAX,
            since_grow: 0,
            auths: Vec::new(),
            auth_waiters: VecDeque::new(),
            watches: WatchRegistry::default(),
            transport: VecDeque::new(),
            events: VecDeque::new(),
            scratch: Vec::new(),
            arming: Vec::new(),
            deferred: Vec::new(),
            unpolled: HashMap::default(),
            counters: Counters::default(),
            next_share: 0,
            sharing: HashMap::default(),
            sealed: BTreeSet::new(),
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
        self.session_id
    }

    /// Session password (zeros before the first handshake).
    pub fn password(&self) -> &[u8] {
        &self.passwd
    }

    /// Negotiated timeout, once known.
    pub fn negotiated_timeout(&self) -> Option<Duration> {
        self.negotiated
    }

    /// Highest zxid seen in a reply.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Where the session stands.
    pub fn state(&self) -> SessionState {
        match self.phase {
            Phase::Ended(end) => SessionState::Ended(end),
            Phase::Closing { .. } => SessionState::Closing,
            Phase::Connected => SessionState::Connected,
            _ if self.suspended => SessionState::Suspended,
            _ => SessionState::Connecting,
        }
    }

    /// Why the last connection attempt failed, if one did.
    pub fn last_failure(&self) -> Option<&DisconnectReason> {
        self.last_failure.as_ref()
    }

    /// Index of the host being used or dialled.
    pub fn current_host(&self) -> usize {
        self.order.get(self.position).copied().unwrap_or(0)
    }

    /// Requests in flight plus requests waiting in the queue (for a connection or for
    /// room under `max_in_flight`).
    pub fn pending(&self) -> usize {
        self.in_flight.len() + self.queued.len() + self.yielding.len()
    }

    /// Requests written and not yet answered (at most `max_in_flight`, plus a close).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// What the session has sent and received so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Does `token` still have a watch registered (one a watch event has not used up)?
    pub fn is_watching(&self, token: Token) -> bool {
        self.watches.kind_of(token).is_some()
            || self.unpolled.contains_key(&token)
            || self.deferred.iter().any(|(t, _)| *t == token)
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
        let Phase::Dialing { deadline } = self.phase else {
            return;
        };
        self.phase = Phase::Handshaking { deadline };
        self.decoder.reset();
        self.tx.clear();
        // `last_recv` stays: only the server's words count as hearing from it.
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid,
            timeout_ms: millis(self.config.session_timeout),
            session_id: self.session_id,
            passwd: self.passwd.clone(),
            read_only: self.config.read_only,
        };
        encode_connect(&mut self.tx, &req);
        self.counters.control_sent += 1;
        self.last_send = now;
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
            Phase::Handshaking { .. } => {
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
            Phase::Handshaking { .. } | Phase::Connected | Phase::Closing { .. }
        ) {
            return; // stale bytes from a connection we already gave up
        }
        while !bytes.is_empty() {
            let handshaking = matches!(self.phase, Phase::Handshaking { .. });
            let frame = match self.decoder.decode(&mut bytes) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) if handshaking => {
                    return self.connection_lost(now, DisconnectReason::NotZooKeeper)
                }
                Err(e) => return self.connection_lost(now, DisconnectReason::Frame(e)),
            };
            // Only a whole frame counts as hearing from the server: a reply trickled a
            // byte at a time does not keep a dead connection alive.
            self.last_recv = now;
            let result = match self.phase {
                Phase::Handshaking { .. } => self.on_handshake(now, frame),
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

    fn fire_due(&mut self, now: Instant) -> bool {
        if let Some(at) = self.expiry_estimate() {
            if at <= now {
                self.expire(now, false);
                return true;
            }
        }
        match self.phase {
            Phase::Idle { dial_at } if dial_at <= now => {
                self.dial();
                true
            }
            Phase::Dialing { deadline } if deadline <= now => {
                self.connection_lost(now, DisconnectReason::ConnectTimeout);
                true
            }
            Phase::Handshaking { deadline } if deadline <= now => {
                self.connection_lost(now, DisconnectReason::NoHandshakeReply);
                true
            }
            Phase::Connected | Phase::Closing { .. }
                if self.last_recv + self.read_timeout() <= now =>
            {
                self.connection_lost(now, DisconnectReason::ReadTimeout);
                true
            }
            Phase::Closing { deadline } if deadline <= now => {
                self.end(SessionEnd::Closed, false);
                true
            }
            Phase::Connected if self.last_send + self.ping_interval() <= now => {
                let _ = encode_request(&mut self.tx, xid::PING, &Request::Ping, usize::MAX);
                self.counters.control_sent += 1;
                self.last_send = now;
                true
            }
            _ => false,
        }
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
        self.submit_shared(now, request, token, 0)
    }

    /// [`submit_shared`](Self::submit_shared) for a request that may **yield**: while
    /// it waits in the queue (behind a full window or for a connection), requests
    /// other requesters submit later are written before it. For what nobody else waits
    /// for — a lock waiter's create and first listing, say — so that what others do
    /// wait for (a holder's release) does not wait behind thousands of entries.
    /// Yielding requests keep their order among themselves, and a requester's own
    /// requests are never reordered: while this one is queued, everything `requester`
    /// submits queues behind it. Requester 0 (raw requests) never yields. Requests
    /// already on the wire are answered in order as always (ZooKeeper runs one
    /// session's requests in order).
    pub fn submit_yielding(
        &mut self,
        now: Instant,
        request: Request,
        token: Token,
        requester: u64,
    ) -> Result<(), SubmitError> {
        self.submit_in(now, request, token, requester, requester != 0)
    }

    /// [`submit`](Self::submit) for one of several independent `requester`s (nonzero;
    /// a host passes each hosted recipe's id): a listing (`getChildren`,
    /// `getChildren2`) waiting in the queue behind a full window is **shared** with the
    /// identical listing (same path, same watch flag) another requester submits later:
    /// the earlier one moves back to the later one's place, and one request on the wire
    /// answers both as one [`SessionEvent::SharedReply`], its watch registered for each.
    /// A read answered later than asked is still a read after everything its requester
    /// submitted before it; a listing whose requester submitted anything after it (or
    /// requester 0) never moves, so each requester's replies keep its own order. Without
    /// a backlog nothing is shared (the request is written at once). Listings of a
    /// directory that thousands of waiters of one session join at once thus cost one
    /// request and one reply, not one each (issue 25).
    pub fn submit_shared(
        &mut self,
        now: Instant,
        request: Request,
        token: Token,
        requester: u64,
    ) -> Result<(), SubmitError> {
        self.submit_in(now, request, token, requester, false)
    }

    fn submit_in(
        &mut self,
        now: Instant,
        mut request: Request,
        token: Token,
        requester: u64,
        yields: bool,
    ) -> Result<(), SubmitError> {
        let now = self.tick(now);
        match self.phase {
            Phase::Ended(end) => return Err(SubmitError::Ended(end)),
            Phase::Closing { .. } => return Err(SubmitError::Ended(SessionEnd::Closed)),
            _ => {}
        }
        let op = request.op_code();
        if matches!(
            request,
            Request::Ping | Request::SetWatches(_) | Request::CloseSession
        ) {
            return Err(SubmitError::NotAllowed(op));
        }
        if self.pending() >= self.config.max_pending {
            return Err(SubmitError::TooManyPending);
        }
        let mut invalid = None;
        let chroot = self.config.connect_string.chroot().clone();
        request.for_each_path_mut(|role, path| {
            let check = match role {
                PathRole::Node => validate_path(path),
                PathRole::SequentialPrefix => validate_sequential_prefix(path),
                PathRole::Prefix => Ok(()),
            };
            if let Err(error) = check {
                invalid.get_or_insert(SubmitError::InvalidPath {
                    path: path.clone(),
                    error,
                });
            }
        });
        if let Some(e) = invalid {
            return Err(e);
        }
        let after = after_reply(&request);
        let arming = match &after {
            After::Watch { .. } => 1,
            After::Arm(places) => places.len(),
            _ => 0,
        };
        if arming > 0 && self.watches.len() + arming > self.config.max_watches {
            return Err(SubmitError::TooManyWatches);
        }
        request.for_each_path_mut(|_, path| {
            if chroot.root().is_some() {
                *path = chroot.prefix(path);
            }
        });
        if let Request::Auth(packet) = request {
            // Same size rule as every request (auth packets are tiny in practice).
            encode_request(
                &mut BytesMut::new(),
                xid::AUTH,
                &Request::Auth(packet.clone()),
                self.config.max_request,
            )
            .map_err(SubmitError::TooLarge)?;
            // Replayed on every connection; this token hears about the first answer.
            if self.phase == Phase::Connected {
                self.write_auth(now, &packet, Some(token));
                self.auths.push((packet, None));
            } else {
                self.auths.push((packet, Some(token)));
            }
            return Ok(());
        }
        if self.phase == Phase::Connected
            && self.queued.is_empty()
            && self.yielding.is_empty()
            && self.has_room()
        {
            // Straight into the transmit buffer with its real xid (nothing is written
            // if it is too large).
            let xid = self.next_xid;
            encode_request(&mut self.tx, xid, &request, self.config.max_request)
                .map_err(SubmitError::TooLarge)?;
            self.advance_xid();
            self.counters.requests_sent += 1;
            self.arm_at_write(token, &after);
            self.in_flight.push_back(InFlight {
                xid,
                op,
                token,
                after,
                more: Vec::new(),
            });
            self.last_send = now;
        } else {
            let mut frame = BytesMut::new();
            encode_request(&mut frame, 0, &request, self.config.max_request)
                .map_err(SubmitError::TooLarge)?;
            if requester != 0 {
                // Whatever this requester sent before keeps its place from now on.
                if let Some(id) = self.sharing.remove(&requester) {
                    self.sealed.insert(id);
                }
            }
            // Behind its own yielding requests, a requester's request yields too.
            let lane_yields =
                requester != 0 && (yields || self.yielders.get(&requester).is_some_and(|n| *n > 0));
            let share = match &request {
                Request::GetChildren(r) | Request::GetChildren2(r) if requester != 0 => {
                    if self.join_shared(op, &r.path, r.watch, token, requester, lane_yields) {
                        return Ok(());
                    }
                    let id = self.next_share;
                    self.next_share += 1;
                    self.sharing.insert(requester, id);
                    Some(Box::new(Share {
                        id,
                        op,
                        path: r.path.clone(),
                        watch: r.watch,
                        members: alloc::vec![(token, requester)],
                    }))
                }
                _ => None,
            };
            let q = Queued {
                frame,
                op,
                token,
                after,
                share,
                requester,
            };
            if lane_yields {
                *self.yielders.entry(requester).or_insert(0) += 1;
                self.yielding.push_back(q);
            } else {
                self.queued.push_back(q);
            }
        }
        Ok(())
    }

    /// Joins an identical queued listing near the back of the queue that may still
    /// move (no member submitted anything after it): it moves to the back, answering
    /// `token` too. False if there is none.
    fn join_shared(
        &mut self,
        op: OpCode,
        path: &str,
        watch: bool,
        token: Token,
        requester: u64,
        yielding: bool,
    ) -> bool {
        let lane = if yielding {
            &mut self.yielding
        } else {
            &mut self.queued
        };
        let len = lane.len();
        let sealed = &self.sealed;
        let found = (len.saturating_sub(SHARE_LOOKBACK)..len).rev().find(|&i| {
            lane[i].share.as_ref().is_some_and(|s| {
                s.op == op && s.watch == watch && s.path == path && !sealed.contains(&s.id)
            })
        });
        let Some(mut q) = found.and_then(|i| lane.remove(i)) else {
            return false;
        };
        if let Some(s) = q.share.as_mut() {
            s.members.push((token, requester));
            self.sharing.insert(requester, s.id);
        }
        lane.push_back(q);
        if yielding {
            *self.yielders.entry(requester).or_insert(0) += 1;
        }
        self.counters.listings_shared += 1;
        true
    }

    /// A request leaves the yielding lane (written or failed): its requesters' counts.
    fn leave_yielding(&mut self, q: &Queued) {
        let mut one = |requester: u64| {
            if let Some(n) = self.yielders.get_mut(&requester) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.yielders.remove(&requester);
                }
            }
        };
        match &q.share {
            Some(share) => share.members.iter().for_each(|(_, r)| one(*r)),
            None => one(q.requester),
        }
        shed_map(&mut self.yielders);
    }

    /// A queued request leaves the queue (written or failed): its shared read's
    /// bookkeeping goes; the other tokens it answers.
    fn unshare(&mut self, share: Option<Box<Share>>) -> Vec<Token> {
        let Some(share) = share else {
            return Vec::new();
        };
        self.sealed.remove(&share.id);
        for (_, requester) in &share.members {
            if self.sharing.get(requester) == Some(&share.id) {
                self.sharing.remove(requester);
            }
        }
        shed_map(&mut self.sharing);
        share.members.iter().skip(1).map(|(t, _)| *t).collect()
    }

    /// Closes the session: sends closeSession after anything already submitted (in
    /// flight or queued under `max_in_flight`) and waits for the answer until
    /// `deadline`. Without a connection it ends at once (the server then expires the
    /// session after its timeout).
    pub fn close(&mut self, now: Instant, deadline: Instant) {
        let now = self.tick(now);
        match self.phase {
            Phase::Connected => {
                let mut frame = BytesMut::new();
                let _ = encode_request(&mut frame, 0, &Request::CloseSession, usize::MAX);
                let close = Queued {
                    frame,
                    op: OpCode::CloseSession,
                    token: Token(u64::MAX),
                    after: After::Close,
                    share: None,
                    requester: 0,
                };
                if self.queued.is_empty() && self.yielding.is_empty() {
                    // The close itself is not held back by the bound: nothing follows it.
                    self.write(now, close);
                } else {
                    // After everything, the yielding lane included.
                    self.yielding.push_back(close);
                }
                self.phase = Phase::Closing {
                    deadline: deadline.max(now),
                };
            }
            Phase::Idle { .. } | Phase::Dialing { .. } | Phase::Handshaking { .. } => {
                self.end(SessionEnd::Closed, false)
            }
            Phase::Closing { .. } | Phase::Ended(_) => {}
        }
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
        if self.tx.is_empty() {
            return false;
        }
        self.counters.bytes_sent = self
            .counters
            .bytes_sent
            .saturating_add(self.tx.len() as u64);
        if out.is_empty() {
            core::mem::swap(out, &mut self.tx);
        } else {
            out.extend_from_slice(&self.tx);
            self.tx.clear();
        }
        if self.tx.capacity() > TX_KEEP {
            // A burst's room (the driver's buffer, swapped in) goes back: an idle
            // session keeps room for a few requests, not for the burst.
            self.tx = BytesMut::new();
        }
        true
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        let event = self.events.pop_front();
        match &event {
            None => {
                shed_queue(&mut self.events);
                shed_map(&mut self.unpolled);
            }
            Some(SessionEvent::Watch { token, .. }) => {
                if let Some(n) = self.unpolled.get_mut(token) {
                    *n -= 1;
                    if *n == 0 {
                        self.unpolled.remove(token);
                    }
                }
            }
            Some(_) => {}
        }
        event
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let phase = match self.phase {
            Phase::Idle { dial_at } => Some(dial_at),
            Phase::Dialing { deadline } | Phase::Handshaking { deadline } => Some(deadline),
            Phase::Connected => Some(
                (self.last_recv + self.read_timeout()).min(self.last_send + self.ping_interval()),
            ),
            Phase::Closing { deadline } => Some(deadline.min(self.last_recv + self.read_timeout())),
            Phase::Ended(_) => None,
        };
        match (phase, self.expiry_estimate()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    // ----- internals -----

    fn timeout(&self) -> Duration {
        self.negotiated.unwrap_or(self.config.session_timeout)
    }

    fn read_timeout(&self) -> Duration {
        (self.timeout() * 2 / 3).max(Duration::from_millis(1))
    }

    fn ping_interval(&self) -> Duration {
        (self.read_timeout() / 2).max(Duration::from_millis(1))
    }

    /// One attempt's time to connect and handshake: the session timeout shared among
    /// the hosts, and at most a third of it, so that even with one host a server that
    /// accepts and never answers (ZooKeeper 3.8 does this to a connection accepted while
    /// it starts) leaves time for two more attempts before the expiry estimate.
    fn connect_timeout(&self) -> Duration {
        let hosts = u32::try_from(self.order.len().max(3)).unwrap_or(u32::MAX);
        (self.timeout() / hosts).max(Duration::from_millis(1))
    }

    /// When the client gives the session up while disconnected.
    fn expiry_estimate(&self) -> Option<Instant> {
        match self.phase {
            Phase::Idle { .. } | Phase::Dialing { .. } | Phase::Handshaking { .. }
                if self.suspended =>
            {
                Some(self.last_recv + self.timeout())
            }
            _ => None,
        }
    }

    fn dial(&mut self) {
        let deadline = self.now + self.connect_timeout();
        self.phase = Phase::Dialing { deadline };
        self.transport.push_back(Transport::Connect {
            host: self.current_host(),
        });
    }

    fn advance_xid(&mut self) {
        self.next_xid = if self.next_xid == i32::MAX {
            1
        } else {
            self.next_xid + 1
        };
    }

    /// Is there room on the wire for one more request?
    fn has_room(&self) -> bool {
        self.in_flight.len() < self.window.min(self.config.max_in_flight).max(1)
    }

    /// The window after a reply: cut on `Throttled`, grown otherwise.
    fn adapt_window(&mut self, throttled: bool) {
        let max = self.config.max_in_flight.max(1);
        self.since_cut = self.since_cut.saturating_add(1);
        if throttled {
            self.counters.throttled += 1;
            // Once per window: the replies of requests sent before the cut say nothing
            // about the new window.
            if self.since_cut > self.window {
                self.window = (self.window / 2).max(1);
                self.since_cut = 0;
                self.since_grow = 0;
            }
        } else if self.window < max {
            self.since_grow += 1;
            if self.since_grow >= self.window {
                self.window += 1;
                self.since_grow = 0;
            }
        }
    }

    /// Writes queued requests while there is room on the wire: the queue in order,
    /// then the yielding lane in order (a close at its back goes regardless).
    fn flush_queued(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Connected | Phase::Closing { .. }) {
            return;
        }
        while self.has_room() {
            let Some(q) = self.queued.pop_front() else {
                break;
            };
            self.write(now, q);
        }
        while self.queued.is_empty()
            && (self.has_room()
                || self
                    .yielding
                    .front()
                    .is_some_and(|q| q.op == OpCode::CloseSession))
        {
            let Some(q) = self.yielding.pop_front() else {
                break;
            };
            self.leave_yielding(&q);
            self.write(now, q);
        }
        shed_queue(&mut self.queued);
        shed_queue(&mut self.yielding);
    }

    fn write(&mut self, now: Instant, q: Queued) {
        let more = self.unshare(q.share);
        self.counters.requests_sent += 1;
        let xid = self.next_xid;
        self.advance_xid();
        let mut frame = q.frame;
        frame[4..8].copy_from_slice(&xid.to_be_bytes());
        self.tx.extend_from_slice(&frame);
        self.arm_at_write(q.token, &q.after);
        self.in_flight.push_back(InFlight {
            xid,
            op: q.op,
            token: q.token,
            after: q.after,
            more,
        });
        self.last_send = now;
    }

    /// A SetWatches2 of the caller's arms its watches as it is written: the server may
    /// fire them before it answers (a change after the relative zxid), and those
    /// notifications must find their registrant. They are held back until the reply,
    /// so a registrant still hears its reply first.
    fn arm_at_write(&mut self, token: Token, after: &After) {
        if let After::Arm(places) = after {
            for (path, kind) in places {
                self.watches.add(path, *kind, token);
            }
            self.arming.push(token);
        }
    }

    /// The reply to a caller's SetWatches2: what it armed and what fired meanwhile.
    fn armed(&mut self, token: Token, ok: bool) -> Option<WatchKind> {
        self.arming.retain(|t| *t != token);
        if !ok {
            // Not armed on this connection (or refused): forget them; the caller arms
            // again (a new connection holds none of the old one's watches anyway).
            self.watches.forget(token);
            self.deferred.retain(|(t, _)| *t != token);
            return None;
        }
        let fired = self.deferred.iter().any(|(t, _)| *t == token);
        let kind = self.watches.kind_of(token);
        kind.or(fired.then_some(WatchKind::Data))
    }

    /// Queues a watch event, counted until polled: a token's route ends with its last
    /// event, which [`is_watching`](Self::is_watching) tells only if it knows what is
    /// still queued (two events for one SetWatches2 may arrive in one read).
    fn push_watch(&mut self, token: Token, event: WatchEvent) {
        *self.unpolled.entry(token).or_default() += 1;
        self.events.push_back(SessionEvent::Watch { token, event });
    }

    /// The notifications held back for `token` until its reply, in order.
    fn release_deferred(&mut self, token: Token) {
        if self.deferred.is_empty() {
            return;
        }
        let mut i = 0;
        while i < self.deferred.len() {
            if self.deferred[i].0 == token {
                let (token, event) = self.deferred.remove(i);
                self.push_watch(token, event);
            } else {
                i += 1;
            }
        }
    }

    fn write_auth(&mut self, now: Instant, packet: &AuthPacket, token: Option<Token>) {
        let _ = encode_request(
            &mut self.tx,
            xid::AUTH,
            &Request::Auth(packet.clone()),
            usize::MAX,
        );
        self.auth_waiters.push_back(token);
        self.counters.control_sent += 1;
        self.last_send = now;
    }

    fn on_handshake(&mut self, now: Instant, mut frame: Bytes) -> Result<(), DisconnectReason> {
        let resp =
            ConnectResponse::decode(&mut frame).map_err(|_| DisconnectReason::NotZooKeeper)?;
        if resp.is_expired() {
            self.expire(now, true);
            return Ok(());
        }
        let timeout = Duration::from_millis(u64::try_from(resp.timeout_ms).unwrap_or(0));
        let resumed = self.session_id != 0 && self.session_id == resp.session_id;
        self.session_id = resp.session_id;
        self.passwd = resp.passwd;
        self.negotiated = Some(timeout);
        self.read_only_server = resp.read_only;
        self.phase = Phase::Connected;
        self.connected_at = now;
        self.ever_connected = true;
        self.events.push_back(if resumed {
            SessionEvent::Reconnected {
                read_only: resp.read_only,
            }
        } else {
            SessionEvent::Connected {
                session_id: resp.session_id,
                timeout,
                read_only: resp.read_only,
            }
        });
        self.suspended = false;
        // Priming order: auth, then watches, then whatever waited for this connection.
        let auths = core::mem::take(&mut self.auths);
        for (packet, token) in &auths {
            self.write_auth(now, packet, *token);
        }
        self.auths = auths.into_iter().map(|(p, _)| (p, None)).collect();
        if resumed {
            self.write_set_watches(now);
        }
        self.flush_queued(now);
        Ok(())
    }

    fn write_set_watches(&mut self, now: Instant) {
        let lists = self.watches.lists();
        let chroot = self.config.connect_string.chroot().clone();
        let mut batch = SetWatches2 {
            relative_zxid: self.last_zxid,
            ..Default::default()
        };
        let mut size = 0;
        let tables: [(&Vec<String>, WatchSlot); 5] = [
            (&lists.data, |b| &mut b.data_watches),
            (&lists.exist, |b| &mut b.exist_watches),
            (&lists.child, |b| &mut b.child_watches),
            (&lists.persistent, |b| &mut b.persistent_watches),
            (&lists.recursive, |b| &mut b.persistent_recursive_watches),
        ];
        for (paths, slot) in tables {
            for p in paths {
                let server_path = chroot.prefix(p);
                if size + server_path.len() > SET_WATCHES_BATCH {
                    self.write_watch_batch(now, core::mem::take(&mut batch));
                    batch.relative_zxid = self.last_zxid;
                    size = 0;
                }
                size += server_path.len() + 4;
                slot(&mut batch).push(server_path);
            }
        }
        self.write_watch_batch(now, batch);
    }

    fn write_watch_batch(&mut self, now: Instant, b: SetWatches2) {
        let empty = b.data_watches.is_empty()
            && b.exist_watches.is_empty()
            && b.child_watches.is_empty()
            && b.persistent_watches.is_empty()
            && b.persistent_recursive_watches.is_empty();
        if empty {
            return;
        }
        // Plain SetWatches when possible, for servers older than 3.6.
        let req = if b.persistent_watches.is_empty() && b.persistent_recursive_watches.is_empty() {
            Request::SetWatches(SetWatches {
                relative_zxid: b.relative_zxid,
                data_watches: b.data_watches,
                exist_watches: b.exist_watches,
                child_watches: b.child_watches,
            })
        } else {
            Request::SetWatches2(b)
        };
        let _ = encode_request(&mut self.tx, xid::SET_WATCHES, &req, usize::MAX);
        self.counters.control_sent += 1;
        self.last_send = now;
    }

    fn on_frame(&mut self, now: Instant, frame: Bytes) -> Result<(), DisconnectReason> {
        let (header, body) = decode_reply(frame).map_err(DisconnectReason::Decode)?;
        match header.xid {
            xid::NOTIFICATION => {
                let event: WatcherEvent = decode_exact(body).map_err(DisconnectReason::Decode)?;
                self.counters.notifications_received += 1;
                self.on_notification(event);
                Ok(())
            }
            xid::PING | xid::SET_WATCHES => Ok(()),
            xid::AUTH => {
                let token = self.auth_waiters.pop_front().flatten();
                if header.err == ErrorCode::AuthFailed.to_i32() {
                    self.end(SessionEnd::AuthFailed, false);
                    return Ok(());
                }
                if let Some(token) = token {
                    let result = if header.err == 0 {
                        Ok(Response::Empty)
                    } else {
                        Err(Error::from(ErrorCode::from_i32(header.err)))
                    };
                    self.events.push_back(SessionEvent::Reply(Reply {
                        token,
                        zxid: header.zxid,
                        result,
                        watch: None,
                    }));
                }
                Ok(())
            }
            got => {
                let Some(head) = self.in_flight.front() else {
                    return Err(DisconnectReason::UnexpectedXid { expected: 0, got });
                };
                if head.xid != got {
                    return Err(DisconnectReason::UnexpectedXid {
                        expected: head.xid,
                        got,
                    });
                }
                let result = if header.err == 0 {
                    Ok(Response::decode(head.op, body).map_err(DisconnectReason::Decode)?)
                } else {
                    Err(Error::from(ErrorCode::from_i32(header.err)))
                };
                let done = self.in_flight.pop_front().expect("head checked above");
                shed_queue(&mut self.in_flight);
                self.adapt_window(header.err == ErrorCode::Throttled.to_i32());
                if header.zxid > 0 {
                    self.last_zxid = self.last_zxid.max(header.zxid);
                }
                self.counters.replies_received += 1;
                self.complete(done, header.zxid, result);
                // Room on the wire again: the next queued request goes out.
                self.flush_queued(now);
                Ok(())
            }
        }
    }

    fn complete(&mut self, req: InFlight, zxid: i64, mut result: Result<Response, Error>) {
        let mut registered = None;
        match req.after {
            After::Close => {
                self.end(SessionEnd::Closed, false);
                return;
            }
            After::Watch {
                path,
                on_ok,
                on_no_node,
            } => {
                let kind = match &result {
                    Ok(_) => on_ok,
                    Err(Error::Server(ErrorCode::NoNode)) => on_no_node,
                    Err(_) => None,
                };
                if let Some(kind) = kind {
                    self.watches.add(&path, kind, req.token);
                    for token in &req.more {
                        self.watches.add(&path, kind, *token);
                    }
                }
                registered = kind;
            }
            After::RemoveWatches { path, which } => {
                if result.is_ok() {
                    for (token, kind) in self.watches.remove(&path, which) {
                        let event_type = match kind {
                            WatchKind::Data | WatchKind::Exist => EventType::DataWatchRemoved,
                            WatchKind::Child => EventType::ChildWatchRemoved,
                            WatchKind::Persistent | WatchKind::PersistentRecursive => {
                                EventType::PersistentWatchRemoved
                            }
                        };
                        self.push_watch(
                            token,
                            WatchEvent {
                                event_type,
                                path: path.clone(),
                            },
                        );
                    }
                }
            }
            After::Arm(_) => registered = self.armed(req.token, result.is_ok()),
            After::Nothing => {}
        }
        if let Ok(resp) = &mut result {
            self.strip_chroot(req.op, resp);
        }
        if req.more.is_empty() {
            self.events.push_back(SessionEvent::Reply(Reply {
                token: req.token,
                zxid,
                result,
                watch: registered,
            }));
        } else {
            let mut tokens = req.more;
            tokens.insert(0, req.token);
            self.events
                .push_back(SessionEvent::SharedReply(SharedReply {
                    tokens,
                    zxid,
                    result,
                    watch: registered,
                }));
        }
        self.release_deferred(req.token);
    }

    fn strip_chroot(&self, op: OpCode, resp: &mut Response) {
        let chroot = self.config.connect_string.chroot();
        if chroot.root().is_none() {
            return;
        }
        match resp {
            Response::Path(p) | Response::PathStat { path: p, .. } => *p = chroot.strip(p),
            Response::Children(paths) if op == OpCode::GetEphemerals => {
                for p in paths.iter_mut() {
                    *p = chroot.strip(p);
                }
            }
            Response::Multi(results) => {
                for r in results {
                    if let MultiResult::Create(p) | MultiResult::Create2 { path: p, .. } = r {
                        *p = chroot.strip(p);
                    }
                }
            }
            _ => {}
        }
    }

    fn on_notification(&mut self, event: WatcherEvent) {
        let Some(event_type) = event.kind() else {
            return;
        };
        let path = self.config.connect_string.chroot().strip(&event.path);
        let mut tokens = core::mem::take(&mut self.scratch);
        tokens.clear();
        self.watches.trigger(&path, event_type, &mut tokens);
        for token in tokens.drain(..) {
            let event = WatchEvent {
                event_type,
                path: path.clone(),
            };
            if self.arming.contains(&token) {
                self.deferred.push((token, event)); // after its reply
            } else {
                self.push_watch(token, event);
            }
        }
        self.scratch = tokens;
    }

    fn fail_in_flight(&mut self, code: Error) {
        while let Some(req) = self.in_flight.pop_front() {
            if matches!(req.after, After::Arm(_)) {
                self.armed(req.token, false);
            }
            if !matches!(req.after, After::Close) {
                for token in core::iter::once(req.token).chain(req.more) {
                    self.events.push_back(SessionEvent::Reply(Reply {
                        token,
                        zxid: 0,
                        result: Err(code.clone()),
                        watch: None,
                    }));
                }
            }
        }
        while let Some(token) = self.auth_waiters.pop_front() {
            if let Some(token) = token {
                self.events.push_back(SessionEvent::Reply(Reply {
                    token,
                    zxid: 0,
                    result: Err(code.clone()),
                    watch: None,
                }));
            }
        }
    }

    /// Before the first session, notes the failure of an attempt on the current host;
    /// once every host has failed (`failures` counts this attempt), reports
    /// [`SessionEvent::Unreachable`].
    fn failed_attempt(&mut self, reason: &DisconnectReason) {
        if self.ever_connected {
            return;
        }
        let n = self.config.connect_string.hosts().len();
        self.host_failures.resize(n, None);
        let host = self.current_host();
        if let Some(slot) = self.host_failures.get_mut(host) {
            *slot = Some(reason.clone());
        }
        let hosts = u32::try_from(self.order.len().max(1)).unwrap_or(u32::MAX);
        if self.failures >= hosts {
            let hosts = self
                .config
                .connect_string
                .hosts()
                .iter()
                .cloned()
                .zip(self.host_failures.iter().cloned())
                .collect();
            self.events.push_back(SessionEvent::Unreachable {
                reason: reason.clone(),
                hosts: HostFailures {
                    last: reason.clone(),
                    hosts,
                },
            });
        }
    }

    fn connection_lost(&mut self, now: Instant, reason: DisconnectReason) {
        let was_connected = matches!(self.phase, Phase::Connected | Phase::Closing { .. });
        let closing = matches!(self.phase, Phase::Closing { .. });
        self.transport.push_back(Transport::Close);
        self.decoder.reset();
        self.tx.clear();
        self.fail_in_flight(Error::ConnectionLoss);
        if closing {
            return self.end(SessionEnd::Closed, false);
        }
        if was_connected {
            self.suspended = true;
            self.events.push_back(SessionEvent::Suspended {
                reason: reason.clone(),
            });
        }
        let stable =
            was_connected && now.saturating_since(self.connected_at) >= self.config.stable_after;
        if stable {
            self.failures = 0;
        } else {
            self.failures = self.failures.saturating_add(1);
        }
        self.failed_attempt(&reason);
        self.last_failure = Some(reason);
        self.position = (self.position + 1) % self.order.len().max(1);
        self.schedule_dial(now, stable);
    }

    /// Dials the next host now or after a backoff. After a stable connection: a short
    /// random delay in `[0, backoff_min]`, so that the clients of a restarted server do
    /// not all come back at once. Otherwise the first round of hosts is tried at once,
    /// and each later round waits twice as long as the one before (up to
    /// `backoff_max`), with jitter in `[base / 2, base]`.
    fn schedule_dial(&mut self, now: Instant, after_stable: bool) {
        let hosts = u32::try_from(self.order.len().max(1)).unwrap_or(u32::MAX);
        let delay = if after_stable {
            Duration::from_micros(self.rng.next_u64() % (micros(self.config.backoff_min) + 1))
        } else if self.failures < hosts {
            Duration::ZERO
        } else {
            let rounds = self.failures / hosts - 1;
            let cap = self.config.backoff_max.max(self.config.backoff_min);
            let base = self
                .config
                .backoff_min
                .saturating_mul(1 << rounds.min(16))
                .min(cap);
            let half = base / 2;
            half + Duration::from_micros(self.rng.next_u64() % (micros(half) + 1))
        };
        if delay.is_zero() {
            self.dial();
        } else {
            self.phase = Phase::Idle {
                dial_at: now + delay,
            };
        }
    }

    /// The session is gone. With `renew_on_expiry`, fail what it had and start a new one.
    fn expire(&mut self, now: Instant, confirmed: bool) {
        if !self.config.renew_on_expiry {
            return self.end(SessionEnd::Expired, confirmed);
        }
        if !matches!(self.phase, Phase::Idle { .. }) {
            self.transport.push_back(Transport::Close);
        }
        self.fail_everything(Error::SessionExpired);
        // A session that ends this way is a failed attempt: a server that keeps
        // expiring new sessions is redialled with backoff, not in a loop.
        self.failures = self.failures.saturating_add(1);
        if self.session_id == 0 {
            // Not even a first session: the server refuses us one.
            self.failed_attempt(&DisconnectReason::SessionRefused);
        } else {
            self.events.push_back(SessionEvent::Expired {
                confirmed,
                renewing: true,
            });
        }
        self.session_id = 0;
        self.passwd = Bytes::from_static(&[0; 16]);
        self.negotiated = None;
        self.suspended = false;
        self.decoder.reset();
        self.tx.clear();
        self.position = (self.position + 1) % self.order.len().max(1);
        self.schedule_dial(now, false);
    }

    /// Fails every request in flight, queued, or waiting for an auth answer.
    fn fail_everything(&mut self, code: Error) {
        self.fail_in_flight(code.clone());
        self.yielders.clear();
        shed_map(&mut self.yielders);
        let yielding = core::mem::take(&mut self.yielding);
        let queued = core::mem::take(&mut self.queued);
        for q in queued.into_iter().chain(yielding) {
            let more = self.unshare(q.share);
            if matches!(q.after, After::Close) {
                continue;
            }
            for token in core::iter::once(q.token).chain(more) {
                self.events.push_back(SessionEvent::Reply(Reply {
                    token,
                    zxid: 0,
                    result: Err(code.clone()),
                    watch: None,
                }));
            }
        }
        for (_, token) in self.auths.iter_mut() {
            if let Some(t) = token.take() {
                self.events.push_back(SessionEvent::Reply(Reply {
                    token: t,
                    zxid: 0,
                    result: Err(code.clone()),
                    watch: None,
                }));
            }
        }
        self.watches.clear();
    }

    fn end(&mut self, end: SessionEnd, confirmed: bool) {
        if matches!(self.phase, Phase::Ended(_)) {
            return;
        }
        if !matches!(self.phase, Phase::Idle { .. }) {
            self.transport.push_back(Transport::Close);
        }
        self.phase = Phase::Ended(end);
        self.suspended = false;
        self.tx.clear();
        self.fail_everything(end.into());
        self.auths.clear();
        self.events.push_back(match end {
            SessionEnd::Expired => SessionEvent::Expired {
                confirmed,
                renewing: false,
            },
            SessionEnd::Closed => SessionEvent::Closed,
            SessionEnd::AuthFailed => SessionEvent::AuthFailed,
        });
    }
}

fn after_reply(request: &Request) -> After {
    use WatchKind::*;
    let watch = |path: &str, on_ok, on_no_node| After::Watch {
        path: path.into(),
        on_ok,
        on_no_node,
    };
    match request {
        Request::GetData(r) if r.watch => watch(&r.path, Some(Data), None),
        Request::Exists(r) if r.watch => watch(&r.path, Some(Data), Some(Exist)),
        Request::GetChildren(r) | Request::GetChildren2(r) if r.watch => {
            watch(&r.path, Some(Child), None)
        }
        Request::AddWatch(r) => match AddWatchMode::from_i32(r.mode) {
            Some(AddWatchMode::Persistent) => watch(&r.path, Some(Persistent), None),
            Some(AddWatchMode::PersistentRecursive) => {
                watch(&r.path, Some(PersistentRecursive), None)
            }
            None => After::Nothing,
        },
        Request::SetWatches2(r) => {
            let lists: [(&Vec<String>, WatchKind); 5] = [
                (&r.data_watches, Data),
                (&r.exist_watches, Exist),
                (&r.child_watches, Child),
                (&r.persistent_watches, Persistent),
                (&r.persistent_recursive_watches, PersistentRecursive),
            ];
            After::Arm(
                lists
                    .iter()
                    .flat_map(|(paths, kind)| paths.iter().map(|p| (p.clone(), *kind)))
                    .collect(),
            )
        }
        Request::RemoveWatches(r) => match WatcherType::from_i32(r.watcher_type) {
            Some(which) => After::RemoveWatches {
                path: r.path.clone(),
                which,
            },
            None => After::Nothing,
        },
        _ => After::Nothing,
    }
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
