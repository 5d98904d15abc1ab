//! The SASL step of the handshake: after the server accepts the `ConnectRequest` and
//! before anything else is written on the connection (auth replay, SetWatches, queued
//! requests), the configured [`Mechanism`]'s exchange runs, on every connection (a
//! resumed session is authenticated again: the server keeps authentication per
//! connection). Each token goes out as a `sasl` request (opcode 102) under the next
//! xid, as the Java client sends it; the server answers each at once with its token.
//! When the exchange is complete the session is established
//! ([`established`](Session::established)). A refusal — an error in the server's
//! answer, a challenge the mechanism rejects, a server that cannot prove it knows the
//! password — ends the session with [`AuthFailure::Sasl`]: final, never redialled, so
//! wrong credentials make no reconnect storm. A connection lost or silent during the
//! exchange is an attempt that failed, retried like a handshake.
//!
//! A step over the `sasl` part, which owns the exchange of this connection and the
//! driver's random bytes for the next.

use alloc::sync::Arc;

use bytes::Bytes;

use super::{Phase, Session};
use crate::error::{AuthFailure, DisconnectReason, SaslFailure, SessionEnd};
use crate::proto::{decode_exact, decode_reply, ErrorCode, Request, SaslToken};
use crate::sasl::Mechanism;
use crate::time::Instant;

impl Session {
    /// The server accepted the handshake: the exchange starts.
    pub(super) fn begin_sasl(
        &mut self,
        now: Instant,
        deadline: Instant,
        mechanism: Arc<dyn Mechanism>,
        resumed: bool,
    ) -> Result<(), DisconnectReason> {
        self.phase = Phase::Authenticating { deadline };
        self.sasl.mechanism = mechanism.name();
        self.sasl.resumed = resumed;
        let Some(random) = self.sasl.random.take() else {
            self.sasl_failed(SaslFailure::NoRandom);
            return Ok(());
        };
        let mut exchange = mechanism.start(random);
        match exchange.initial_response() {
            Ok(token) => {
                self.sasl.exchange = Some(exchange);
                self.send_sasl(now, token);
            }
            Err(reason) => self.sasl_failed(reason),
        }
        Ok(())
    }

    /// One frame while the exchange runs.
    pub(super) fn on_sasl_frame(
        &mut self,
        now: Instant,
        frame: Bytes,
    ) -> Result<(), DisconnectReason> {
        let (header, body) = decode_reply(frame).map_err(DisconnectReason::Decode)?;
        if header.xid != self.window.next_xid() {
            // Nothing else was written on this connection.
            return Err(DisconnectReason::UnexpectedXid {
                expected: self.window.next_xid(),
                got: header.xid,
            });
        }
        if header.err != 0 {
            self.sasl_failed(SaslFailure::Refused(ErrorCode::from_i32(header.err)));
            return Ok(());
        }
        let token: SaslToken = decode_exact(body).map_err(DisconnectReason::Decode)?;
        let Some(exchange) = self.sasl.exchange.as_mut() else {
            return Ok(());
        };
        match exchange.evaluate_challenge(&token.token) {
            Ok(Some(next)) => self.send_sasl(now, next),
            Ok(None) if exchange.is_complete() => {
                self.sasl.exchange = None;
                let resumed = self.sasl.resumed;
                self.established(now, resumed);
            }
            Ok(None) => self.sasl_failed(SaslFailure::Mechanism(
                "the exchange stopped before it completed",
            )),
            Err(reason) => self.sasl_failed(reason),
        }
        Ok(())
    }

    fn send_sasl(&mut self, now: Instant, token: alloc::vec::Vec<u8>) {
        let request = Request::Sasl(SaslToken {
            token: Bytes::from(token),
        });
        let xid = self.window.next_xid();
        self.link
            .write_control(now, xid, &request, &mut self.counters);
    }

    /// The exchange failed: the session ends, for good.
    fn sasl_failed(&mut self, reason: SaslFailure) {
        self.sasl.exchange = None;
        let mechanism = self.sasl.mechanism;
        self.end(
            SessionEnd::AuthFailed(AuthFailure::Sasl { mechanism, reason }),
            false,
        );
    }
}
