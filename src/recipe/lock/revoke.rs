//! Revoking someone else's hold: [`Revoke`].

use alloc::string::String;
use bytes::Bytes;
use core::time::Duration;

use super::types::REVOKE;
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::{protocol_head, Kit, Protocol, Reply};
use crate::recipe::{OpId, SessionChange};
use crate::time::Instant;

/// Asks the holder of a lock node to let go: writes [`REVOKE`] into it and, with a
/// grace period, deletes the node if it is still there afterwards (its holder then
/// sees `Lost`). Reports one `Result<(), Error>`; a node already gone is success.
/// Refusals and lost connections are retried (both writes are idempotent).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Revoke {
    node: String,
    force_after: Option<Duration>,
    force_at: Option<Instant>,
    step: RevokeStep,
    kit: Kit<RevokeStep, Result<(), Error>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RevokeStep {
    Idle,
    Ask,
    Grace,
    Force,
    Done,
}

impl Revoke {
    /// Revokes `node` (a full path), deleting it `force_after` the request if given.
    pub fn new(node: &str, force_after: Option<Duration>) -> Self {
        Revoke {
            node: node.into(),
            force_after,
            force_at: None,
            step: RevokeStep::Idle,
            kit: Kit::default(),
        }
    }

    /// Starts (once).
    pub fn start(&mut self, now: Instant) {
        if self.step == RevokeStep::Idle {
            self.step = RevokeStep::Ask;
            self.send(now);
        }
    }

    fn send(&mut self, now: Instant) {
        if !self.kit.allows(now) || !self.kit.is_quiet() {
            return;
        }
        let path = self.node.clone();
        match self.step {
            RevokeStep::Ask => {
                self.kit.send(
                    RevokeStep::Ask,
                    Request::SetData(SetDataRequest {
                        path,
                        data: Bytes::from_static(REVOKE),
                        version: -1,
                    }),
                );
            }
            RevokeStep::Force => {
                self.kit.send(
                    RevokeStep::Force,
                    Request::Delete(DeleteRequest { path, version: -1 }),
                );
            }
            _ => {}
        }
    }

    fn finish(&mut self, result: Result<(), Error>) {
        self.kit.end(&mut self.step, RevokeStep::Done, result);
    }
}

impl Revoke {
    /// The answer to request `op`, sent for `step` (`on_reply`: `protocol_head!`).
    fn on_answer(&mut self, now: Instant, _op: OpId, step: RevokeStep, result: Reply) {
        match (step, result) {
            (_, Err(Error::Server(ErrorCode::NoNode))) => self.finish(Ok(())),
            (_, Err(e)) if e.is_retryable() => self.kit.failed(now),
            (_, Err(e)) => self.finish(Err(e)),
            (RevokeStep::Ask, Ok(_)) => match self.force_after {
                Some(grace) => {
                    self.step = RevokeStep::Grace;
                    self.force_at = Some(now + grace);
                }
                None => self.finish(Ok(())),
            },
            (_, Ok(_)) => self.finish(Ok(())),
        }
        self.send(now);
    }
}

impl Protocol for Revoke {
    protocol_head!(Result<(), Error>, take);

    fn on_session(&mut self, now: Instant, change: SessionChange) {
        match change.end_error() {
            Some(e) => self.finish(Err(e)),
            None => self.send(now),
        }
        if self.step == RevokeStep::Done {
            self.kit.clear_requests();
        }
    }

    fn on_timeout(&mut self, now: Instant) {
        if self.step == RevokeStep::Grace && self.force_at.is_some_and(|t| now >= t) {
            self.step = RevokeStep::Force;
        }
        self.send(now);
    }

    fn on_abandon(&mut self, _: Instant) {
        // The caller went away: stop asking (a write in flight completes on its own).
        self.finish(Err(Error::Closed));
        self.kit.clear_events();
    }

    fn deadline(&self) -> Option<Instant> {
        match self.step {
            RevokeStep::Grace => self.force_at,
            RevokeStep::Ask | RevokeStep::Force if self.kit.is_quiet() => self.kit.retry_at(),
            _ => None,
        }
    }

    fn finished(&self) -> bool {
        self.step == RevokeStep::Done && self.kit.is_idle()
    }
}
