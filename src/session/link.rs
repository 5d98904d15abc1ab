//! The current connection's bytes: the frame decoder for what arrives, the bytes
//! waiting for the driver to write, and when we last sent something and last heard a
//! whole frame (what pings and the read timeout count from, see `timers.rs`).
//!
//! Owns nothing that outlives a connection but those two instants: a new connection
//! starts with an empty decoder and nothing to write.

use bytes::BytesMut;

use super::event::Counters;
use crate::proto::{encode_request, FrameDecoder, Request};
use crate::time::Instant;

/// Room for outgoing bytes the session keeps between writes.
pub(super) const TX_KEEP: usize = 16 * 1024;

/// The bytes of the connection in use.
#[derive(Debug)]
pub(super) struct Link {
    pub(super) decoder: FrameDecoder,
    /// Frames to write, in order.
    pub(super) tx: BytesMut,
    /// When a whole frame last arrived (only the server's words count).
    pub(super) last_recv: Instant,
    /// When anything was last queued for writing.
    pub(super) last_send: Instant,
}

impl Link {
    /// No connection yet; frames up to `max_reply` bytes will be read.
    pub(super) fn new(max_reply: usize, now: Instant) -> Link {
        Link {
            decoder: FrameDecoder::new(max_reply),
            tx: BytesMut::new(),
            last_recv: now,
            last_send: now,
        }
    }

    /// A new connection, or none: nothing half-read, nothing left to write.
    pub(super) fn reset(&mut self) {
        self.decoder.reset();
        self.tx.clear();
    }

    /// Writes a frame the session sends by itself (ping, auth, SetWatches) under
    /// `xid`, with no size limit (the session sizes these).
    pub(super) fn write_control(
        &mut self,
        now: Instant,
        xid: i32,
        request: &Request,
        counters: &mut Counters,
    ) {
        let _ = encode_request(&mut self.tx, xid, request, usize::MAX);
        counters.control_sent += 1;
        self.last_send = now;
    }

    /// Moves the bytes to write into `out`; true if there were any.
    pub(super) fn transmit(&mut self, out: &mut BytesMut, counters: &mut Counters) -> bool {
        if self.tx.is_empty() {
            return false;
        }
        counters.bytes_sent = counters.bytes_sent.saturating_add(self.tx.len() as u64);
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
}
