//! A [`Session`] fed a schedule decoded from bytes: a fake server that mostly answers
//! correctly (handshakes, replies to the oldest request, notifications, pings) and
//! sometimes sends garbage, drops the connection or lets time jump. Invariants are
//! checked after every step:
//!
//! * every submitted request completes exactly once (checked at the end, after the
//!   session is closed and has ended), and no reply names an unknown token;
//! * after `handle_timeout(t)`, `poll_timeout()` is `None` or later than `t`;
//! * a request's watch events never come before its reply;
//! * nothing panics, whatever the bytes.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};
use core::time::Duration;
use zk_recipes::hash::HashMap;

use zk_recipes::proto::*;
use zk_recipes::session::*;
use zk_recipes::time::Instant;

/// Consumes bytes from the front of a schedule (also `server_input`'s).
pub(crate) struct Input<'a>(pub(crate) &'a [u8]);

impl Input<'_> {
    pub(crate) fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    /// The next byte, 0 once the schedule is used up.
    pub(crate) fn or0(&mut self) -> u8 {
        self.byte().unwrap_or(0)
    }
    pub(crate) fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
}

/// The harness. Use [`run`] unless you need the pieces.
pub struct SessionHarness {
    session: Session,
    now: Instant,
    next_token: u64,
    /// token → replies seen (must end at exactly 1).
    replies: HashMap<u64, u32>,
    /// xids (and ops) the fake server has received and not answered, oldest first.
    unanswered: Vec<(i32, OpCode)>,
    decoder: FrameDecoder,
    /// The fake server has a connection and has seen its ConnectRequest.
    server_connected: bool,
    handshake_done: bool,
    dial_pending: bool,
    ok_replies: usize,
}

const PATHS: [&str; 4] = ["/a", "/a/b", "/c", "/"];

impl SessionHarness {
    /// A session with a 3 s timeout over two hosts, and an optional chroot.
    pub fn new(chroot: bool) -> Self {
        let cs = if chroot { "h1:1,h2:2/app" } else { "h1:1,h2:2" };
        let mut config = SessionConfig::new(cs.parse().expect("valid"));
        config.session_timeout = Duration::from_secs(3);
        config.max_pending = 64;
        SessionHarness {
            session: Session::new(config, Instant::ZERO),
            now: Instant::ZERO,
            next_token: 1,
            replies: HashMap::default(),
            unanswered: Vec::new(),
            decoder: FrameDecoder::new(1 << 20),
            server_connected: false,
            handshake_done: false,
            dial_pending: false,
            ok_replies: 0,
        }
    }

    fn drain(&mut self) -> Result<(), String> {
        while let Some(t) = self.session.poll_transport() {
            self.server_connected = false;
            self.handshake_done = false;
            self.unanswered.clear();
            self.decoder.reset();
            self.dial_pending = matches!(t, Transport::Connect { .. });
        }
        let mut out = BytesMut::new();
        if self.session.poll_transmit(&mut out) && self.server_connected {
            let mut input = &out[..];
            while let Some(frame) = self
                .decoder
                .decode(&mut input)
                .map_err(|e| format!("session sent a bad frame: {e}"))?
            {
                if !self.handshake_done
                    && self.unanswered.is_empty()
                    && frame.len() >= 44
                    && frame.len() <= 45
                {
                    continue; // ConnectRequest
                }
                let (h, _) =
                    decode_request(frame).map_err(|e| format!("undecodable request: {e}"))?;
                let op = OpCode::from_i32(h.op).ok_or_else(|| format!("unknown op {}", h.op))?;
                if h.xid > 0 {
                    self.unanswered.push((h.xid, op));
                }
            }
        }
        while let Some(ev) = self.session.poll_event() {
            if let SessionEvent::Watch { token, .. } = &ev {
                // A request's watch events come after its reply (a SetWatches2's that
                // fired at once are held back until it).
                if self.replies.get(&token.0) == Some(&0) {
                    return Err(format!("a watch event for {token:?} before its reply"));
                }
            }
            if let SessionEvent::Reply(r) = ev {
                self.ok_replies += usize::from(r.result.is_ok());
                let n = self
                    .replies
                    .get_mut(&r.token.0)
                    .ok_or_else(|| format!("reply for unknown {:?}", r.token))?;
                *n += 1;
                if *n > 1 {
                    return Err(format!("{:?} completed twice", r.token));
                }
            }
        }
        Ok(())
    }

    fn submit(&mut self, kind: u8, path: &str, watch: bool) {
        let req = match kind % 8 {
            0 => Request::GetData(PathWatch {
                path: path.into(),
                watch,
            }),
            1 => Request::Exists(PathWatch {
                path: path.into(),
                watch,
            }),
            2 => Request::GetChildren2(PathWatch {
                path: path.into(),
                watch,
            }),
            3 => Request::Create(CreateRequest::new(
                path,
                Bytes::new(),
                Acl::open_unsafe(),
                CreateMode::Ephemeral,
            )),
            4 => Request::Delete(DeleteRequest {
                path: path.into(),
                version: -1,
            }),
            5 => Request::AddWatch(AddWatchRequest {
                path: path.into(),
                mode: 1,
            }),
            6 => Request::SetWatches2(SetWatches2 {
                relative_zxid: i64::from(kind >> 3),
                data_watches: alloc::vec![path.into()],
                child_watches: alloc::vec![PATHS[usize::from(kind >> 3) % PATHS.len()].into()],
                ..SetWatches2::default()
            }),
            _ => Request::Auth(AuthPacket {
                auth_type: 0,
                scheme: "digest".into(),
                auth: Bytes::from_static(b"u:p"),
            }),
        };
        let token = self.next_token;
        self.next_token += 1;
        if self.session.submit(self.now, req, Token(token)).is_ok() {
            self.replies.insert(token, 0);
        }
    }

    fn answer(&mut self, err: u8) -> BytesMut {
        let mut out = BytesMut::new();
        if self.unanswered.is_empty() {
            return out;
        }
        let (xid, op) = self.unanswered.remove(0);
        let code = match err % 4 {
            0 | 1 => 0,
            2 => ErrorCode::NoNode.to_i32(),
            _ => ErrorCode::NodeExists.to_i32(),
        };
        let stat = Stat::default();
        let body = match op {
            OpCode::GetData => Response::Data {
                data: Bytes::new(),
                stat,
            },
            OpCode::Exists => Response::Stat(stat),
            OpCode::GetChildren2 => Response::Children2 {
                children: Vec::new(),
                stat,
            },
            OpCode::Create => Response::Path("/app/a".into()),
            OpCode::AddWatch => Response::WatchAdded,
            _ => Response::Empty,
        };
        encode_reply(
            &mut out,
            &ReplyHeader {
                xid,
                zxid: i64::from(xid),
                err: code,
            },
            Some(&body),
        );
        out
    }

    fn handshake(&mut self, expired: bool) {
        let mut out = BytesMut::new();
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout_ms: if expired { 0 } else { 3000 },
            session_id: if expired { 0 } else { 0x55 },
            passwd: Bytes::from_static(&[1; 16]),
            read_only: false,
        };
        encode_connect_response(&mut out, &resp);
        self.handshake_done = true;
        self.session.handle_bytes(self.now, &out);
    }

    /// One step of the schedule; false when the input is used up.
    fn step(&mut self, input: &mut Input<'_>) -> Result<bool, String> {
        let Some(op) = input.byte() else {
            return Ok(false);
        };
        let arg = input.byte().unwrap_or(0);
        // The fake server accepts dials and answers handshakes unless told otherwise.
        if self.dial_pending {
            self.dial_pending = false;
            if op == 0xff {
                self.session.handle_disconnect(self.now); // connection refused
                self.drain()?;
                return Ok(true);
            }
            self.server_connected = true;
            self.session.handle_connected(self.now);
            self.drain()?;
        }
        if self.server_connected && !self.handshake_done {
            self.handshake(op == 0xfe);
            self.drain()?;
        }
        match op % 16 {
            0..=4 => self.submit(
                arg,
                PATHS[usize::from(arg >> 4) % PATHS.len()],
                arg & 8 != 0,
            ),
            5..=8 if self.handshake_done => {
                let out = self.answer(arg);
                // Sometimes in two pieces.
                let cut = usize::from(arg) % (out.len() + 1);
                self.session.handle_bytes(self.now, &out[..cut]);
                self.drain()?;
                self.session.handle_bytes(self.now, &out[cut..]);
            }
            9 if self.handshake_done => {
                let mut out = BytesMut::new();
                let path = PATHS[usize::from(arg) % PATHS.len()];
                encode_notification(
                    &mut out,
                    &WatcherEvent {
                        event_type: i32::from(arg % 5),
                        state: 3,
                        path: path.into(),
                    },
                );
                self.session.handle_bytes(self.now, &out);
            }
            10 if self.server_connected && arg % 4 == 0 => {
                let garbage = input.take(usize::from(arg % 16)).to_vec();
                self.session.handle_bytes(self.now, &garbage);
            }
            11 if arg % 2 == 0 && self.server_connected => {
                self.server_connected = false;
                self.session.handle_disconnect(self.now);
            }
            12 | 13 => {
                // Time jumps: to the deadline, or by an arbitrary amount.
                let t = match (arg % 2, self.session.poll_timeout()) {
                    (0, Some(t)) => t,
                    _ => self.now + Duration::from_millis(u64::from(arg) * 20),
                };
                self.now = self.now.max(t);
                self.session.handle_timeout(self.now);
                if let Some(next) = self.session.poll_timeout() {
                    if next <= self.now {
                        return Err(format!(
                            "timer rule: deadline {next:?} not after now {:?}",
                            self.now
                        ));
                    }
                }
            }
            14 if arg % 16 == 0 => {
                self.session
                    .close(self.now, self.now + Duration::from_millis(500));
            }
            _ => {}
        }
        self.drain()?;
        Ok(true)
    }

    /// After the schedule: close, let time run until the session ends, then check every
    /// request completed exactly once.
    fn finish(&mut self) -> Result<(), String> {
        self.session
            .close(self.now, self.now + Duration::from_millis(500));
        self.drain()?;
        for _ in 0..10_000 {
            if matches!(self.session.state(), SessionState::Ended(_)) {
                break;
            }
            // The fake server answers nothing more; only time passes.
            let Some(t) = self.session.poll_timeout() else {
                break;
            };
            self.now = self.now.max(t);
            self.session.handle_timeout(self.now);
            self.drain()?;
        }
        if !matches!(self.session.state(), SessionState::Ended(_)) {
            return Err(format!(
                "session did not end after close: {:?}",
                self.session.state()
            ));
        }
        if let Some((t, n)) = self.replies.iter().find(|(_, n)| **n != 1) {
            return Err(format!("request {t} completed {n} times"));
        }
        if self.session.pending() != 0 {
            return Err(format!(
                "{} requests still pending after the end",
                self.session.pending()
            ));
        }
        Ok(())
    }
}

/// Runs a whole schedule; `Err` describes the broken invariant.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    run_with_stats(schedule).map(|_| ())
}

/// Like [`run`], also returning (requests submitted, replies that were not errors).
pub fn run_with_stats(schedule: &[u8]) -> Result<(usize, usize), String> {
    let mut input = Input(schedule);
    let chroot = input.byte().is_some_and(|b| b % 2 == 1);
    let mut h = SessionHarness::new(chroot);
    h.drain()?;
    while h.step(&mut input)? {}
    h.finish()?;
    Ok((h.replies.len(), h.ok_replies))
}
