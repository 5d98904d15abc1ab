//! The driver's side of the handles, the same for every driver: commands in, events
//! out to their subscribers, the published state. A driver does I/O and calls these.

use std::time::Duration;

use zk_recipes::client::{Client as Core, ClientEvent, Routes};
use zk_recipes::time::Instant;

use super::rt::{BoardTx, OnceTx};
use super::{Command, EventTx, ReplyTx, StatusTx, WatchTx};

/// Routes, the published state and the callers of `close` waiting for the end.
pub struct Hub {
    routes: Routes<ReplyTx, WatchTx, EventTx, StatusTx>,
    board: BoardTx,
    close_waiters: Vec<OnceTx<()>>,
    handles_alive: bool,
}

impl Hub {
    /// A hub publishing to `board`.
    pub fn new(board: BoardTx) -> Self {
        Hub {
            routes: Routes::default(),
            board,
            close_waiters: Vec::new(),
            handles_alive: true,
        }
    }

    /// Carries out one command at `t`.
    pub fn handle(&mut self, core: &mut Core, t: Instant, command: Command) {
        match command {
            Command::Route(r) => self.routes.handle(core, t, r),
            Command::Close { timeout, done } => {
                core.close(t, t + timeout);
                self.close_waiters.push(done);
            }
            Command::Counters(reply) => {
                let _ = reply.send(core.counters());
            }
            Command::Shutdown => self.shutdown(core, t),
        }
    }

    /// Every handle is gone: closes the session politely.
    pub fn shutdown(&mut self, core: &mut Core, t: Instant) {
        self.handles_alive = false;
        core.close(t, t + Duration::from_secs(2));
    }

    /// Whether any handle may still send commands.
    pub fn handles_alive(&self) -> bool {
        self.handles_alive
    }

    /// Delivers every event the core has; true if there were any.
    fn deliver(&mut self, core: &mut Core) -> bool {
        let mut any = false;
        while let Some(event) = core.poll_event() {
            any = true;
            if let ClientEvent::Session(e) = &event {
                if e.is_state_change() {
                    tracing::info!(target: "zk_recipes", "{e}");
                }
            }
            // A new host list is published whether or not the status changes.
            let hosts_changed = matches!(
                &event,
                ClientEvent::Session(zk_recipes::session::SessionEvent::EnsembleChanged { .. })
            );
            // The board first, then the status streams: a handle that heard a status
            // from a stream reads it (or a later one) from `status()`.
            let board = &self.board;
            self.routes.deliver_and_publish(core, event, |routes, core| {
                board.publish(|p| {
                    p.status = routes.status();
                    p.session_id = core.session().session_id();
                    p.password = core.session().password().to_vec();
                    p.unreachable = routes.unreachable().cloned();
                    publish_hosts(p, core);
                })
            });
            if hosts_changed {
                board.publish(|p| publish_hosts(p, core));
            }
        }
        any
    }

    /// What the core has for the handles and for the server, in that order: every event
    /// is delivered first, then (if `connected`) the bytes to send are appended to `out`.
    /// So what a call ends reaches its handles before the requests queued behind it can
    /// reach the server: a closing client's lock holder hears `Lost(SessionClosed)`
    /// before its closeSession is written, and no other client can be granted the lock
    /// while the guard still believes it holds. True if anything happened.
    pub fn flush(&mut self, core: &mut Core, out: &mut bytes::BytesMut, connected: bool) -> bool {
        let delivered = self.deliver(core);
        let sent = connected && core.poll_transmit(out);
        delivered || sent
    }

    /// The session has ended: tells the callers of `close`. (Commands still queued get
    /// an error from their dropped reply senders.)
    pub fn ended(&mut self) {
        for done in self.close_waiters.drain(..) {
            let _ = done.send(());
        }
    }
}

/// The session's host list and current server, onto the board (copied only when they
/// changed).
fn publish_hosts(p: &mut crate::common::Published, core: &Core) {
    let session = core.session();
    if p.hosts != session.hosts() {
        p.hosts = session.hosts().to_vec();
    }
    let host = session.host(session.current_host());
    if p.host != host {
        p.host = host.into();
    }
}
