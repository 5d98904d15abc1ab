//! Auth replay: the credentials added with `addauth`, sent again on every connection
//! (in order, first of all), and who waits for an answer on this connection — the
//! token of the call that added a packet hears about its first answer only; a replay's
//! answer reaches nobody. A rejected packet ends the session (`AuthFailed`).
//!
//! Owns the packets and the answers awaited. A SASL exchange would keep its state
//! beside them and run as a step of the handshake (`connection.rs`).

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::event::{Counters, Token};
use super::link::Link;
use crate::proto::{xid, AuthPacket, Request};
use crate::time::Instant;

/// Credentials to replay and the answers awaited.
#[derive(Debug, Default)]
pub(super) struct Auth {
    /// Auth packets to replay on every connection; the token is reported once.
    packets: Vec<(AuthPacket, Option<Token>)>,
    /// One entry per auth packet written on this connection, in order.
    waiters: VecDeque<Option<Token>>,
}

impl Auth {
    /// Adds a packet (validated and sized by the caller): written now if `connected`,
    /// else on the next connection; `token` hears about its first answer.
    pub(super) fn add(
        &mut self,
        link: &mut Link,
        now: Instant,
        packet: AuthPacket,
        token: Token,
        connected: bool,
        counters: &mut Counters,
    ) {
        if connected {
            self.write(link, now, &packet, Some(token), counters);
            self.packets.push((packet, None));
        } else {
            self.packets.push((packet, Some(token)));
        }
    }

    fn write(
        &mut self,
        link: &mut Link,
        now: Instant,
        packet: &AuthPacket,
        token: Option<Token>,
        counters: &mut Counters,
    ) {
        link.write_control(now, xid::AUTH, &Request::Auth(packet.clone()), counters);
        self.waiters.push_back(token);
    }

    /// A new connection: every packet goes out again, before anything else.
    pub(super) fn replay(&mut self, link: &mut Link, now: Instant, counters: &mut Counters) {
        let packets = core::mem::take(&mut self.packets);
        for (packet, token) in &packets {
            self.write(link, now, packet, *token, counters);
        }
        self.packets = packets.into_iter().map(|(p, _)| (p, None)).collect();
    }

    /// An auth answer arrived: who waits for it, if anyone.
    pub(super) fn answered(&mut self) -> Option<Token> {
        self.waiters.pop_front().flatten()
    }

    /// The connection is gone: the callers whose packets were written on it, in order.
    pub(super) fn take_waiters(&mut self) -> impl Iterator<Item = Token> + '_ {
        self.waiters.drain(..).flatten()
    }

    /// The session is gone: the callers whose packets were never written.
    pub(super) fn take_unsent(&mut self) -> impl Iterator<Item = Token> + '_ {
        self.packets
            .iter_mut()
            .filter_map(|(_, token)| token.take())
    }

    /// The session ended: nothing to replay.
    pub(super) fn clear(&mut self) {
        self.packets.clear();
    }
}
