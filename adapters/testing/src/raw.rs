use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use zk_recipes::proto::*;

/// A bare protocol client: the `zk-recipes` codec over a blocking `TcpStream`, with no
/// session logic. For protocol-level tests (and the differential tests of the simulator).
pub struct RawClient {
    stream: TcpStream,
    decoder: FrameDecoder,
    next_xid: i32,
    /// Notifications read while waiting for a reply.
    pending: VecDeque<WatcherEvent>,
    /// Bytes read but not yet decoded.
    inbox: BytesMut,
    /// The server's handshake answer.
    pub session: ConnectResponse,
}

fn bad(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl RawClient {
    /// Connects and creates a new session with the requested timeout.
    pub fn connect(addr: SocketAddr, timeout_ms: i32) -> io::Result<RawClient> {
        Self::handshake(
            addr,
            ConnectRequest {
                timeout_ms,
                passwd: Bytes::from_static(&[0; 16]),
                ..Default::default()
            },
        )
    }

    /// Connects with an explicit handshake (to resume a session, say).
    pub fn handshake(addr: SocketAddr, req: ConnectRequest) -> io::Result<RawClient> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        let mut client = RawClient {
            stream,
            decoder: FrameDecoder::new(DEFAULT_MAX_REPLY),
            next_xid: 1,
            pending: VecDeque::new(),
            inbox: BytesMut::new(),
            session: ConnectResponse::default(),
        };
        let mut out = BytesMut::new();
        encode_connect(&mut out, &req);
        client.stream.write_all(&out)?;
        client.session = decode_exact(client.read_frame()?).map_err(bad)?;
        Ok(client)
    }

    fn read_frame(&mut self) -> io::Result<Bytes> {
        loop {
            let mut input = &self.inbox[..];
            let frame = self.decoder.decode(&mut input).map_err(bad)?;
            let used = self.inbox.len() - input.len();
            let _ = self.inbox.split_to(used);
            if let Some(frame) = frame {
                return Ok(frame);
            }
            let mut buf = [0u8; 64 * 1024];
            let n = self.stream.read(&mut buf)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the connection",
                ));
            }
            self.inbox.extend_from_slice(&buf[..n]);
        }
    }

    /// Sends a request with the next xid (or `xid` for pings/auth) without waiting.
    pub fn send(&mut self, req: &Request) -> io::Result<i32> {
        let xid = match req {
            Request::Ping => xid::PING,
            Request::Auth(_) => xid::AUTH,
            _ => {
                let x = self.next_xid;
                self.next_xid = self.next_xid.wrapping_add(1).max(1);
                x
            }
        };
        let mut out = BytesMut::new();
        encode_request(&mut out, xid, req, DEFAULT_MAX_REQUEST).map_err(bad)?;
        self.stream.write_all(&out)?;
        Ok(xid)
    }

    /// Writes raw bytes (for malformed-input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads the next reply, parking notifications for [`next_event`](Self::next_event).
    /// Returns the header and, when `err == 0`, the body decoded for `op`.
    pub fn recv_reply(&mut self, op: OpCode) -> io::Result<(ReplyHeader, Option<Response>)> {
        loop {
            let (header, body) = decode_reply(self.read_frame()?).map_err(bad)?;
            if header.xid == xid::NOTIFICATION {
                self.pending.push_back(decode_exact(body).map_err(bad)?);
                continue;
            }
            let resp = if header.err == 0 {
                Some(Response::decode(op, body).map_err(bad)?)
            } else {
                None
            };
            return Ok((header, resp));
        }
    }

    /// Sends a request and waits for its reply.
    pub fn call(&mut self, req: &Request) -> io::Result<(ReplyHeader, Option<Response>)> {
        let xid = self.send(req)?;
        let (header, resp) = self.recv_reply(req.op_code())?;
        if header.xid != xid {
            return Err(bad(format!(
                "reply xid {} does not answer {}",
                header.xid, xid
            )));
        }
        Ok((header, resp))
    }

    /// The next watch notification, reading from the socket if none is parked.
    pub fn next_event(&mut self) -> io::Result<WatcherEvent> {
        if let Some(ev) = self.pending.pop_front() {
            return Ok(ev);
        }
        let (header, body) = decode_reply(self.read_frame()?).map_err(bad)?;
        if header.xid != xid::NOTIFICATION {
            return Err(bad(format!(
                "expected a notification, got a reply with xid {}",
                header.xid
            )));
        }
        decode_exact(body).map_err(bad)
    }

    /// Notifications parked so far (without reading).
    pub fn take_events(&mut self) -> Vec<WatcherEvent> {
        self.pending.drain(..).collect()
    }

    /// Sets the socket read timeout.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(t)
    }
}

/// Ends a live session from outside, as an operator (or a partition) would: takes it
/// over with its id and password and closes it, until the server says it is gone. The
/// session's own client fights back by re-attaching, hence the loop (bounded: 10 s).
pub fn expire_session(addr: SocketAddr, session_id: i64, password: &[u8]) -> io::Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let req = ConnectRequest {
            timeout_ms: 6000,
            session_id,
            passwd: Bytes::copy_from_slice(password),
            ..Default::default()
        };
        if let Ok(mut thief) = RawClient::handshake(addr, req) {
            if thief.session.is_expired() {
                return Ok(());
            }
            let _ = thief.call(&Request::CloseSession);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "the session would not end",
    ))
}
