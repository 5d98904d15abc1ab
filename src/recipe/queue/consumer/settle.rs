//! At least once: completing and releasing held items, and deleting stale claims of
//! ours — never a claim deleted blindly twice (a lost reply is checked after a `sync`).

use alloc::string::String;

use super::phase::{Settle, SettleState, Settling};
use super::{Consumer, ConsumerEvent, Purpose};
use crate::error::Error;
use crate::proto::multi_failure;
use crate::proto::*;
use crate::recipe::kit::Reply;
use crate::time::Instant;

impl Consumer {
    pub(super) fn settle(&mut self, now: Instant, item: &str, how: Settle) -> Result<(), Error> {
        if self.ended() {
            return Err(Error::Closed);
        }
        let Some(at) = self.held.iter().position(|h| h == item) else {
            if self.lost.iter().any(|l| l == item) {
                return Err(Error::SessionExpired);
            }
            return Err(Error::Finished);
        };
        let name = self.held.remove(at);
        self.settle_later(name, how);
        self.drive(now);
        Ok(())
    }

    /// `item` is to be completed or released.
    pub(super) fn settle_later(&mut self, item: String, how: Settle) {
        self.settling.push(Settling {
            item,
            how,
            state: SettleState::Send,
        });
    }

    pub(super) fn drive_settling(&mut self) {
        let mut synced = false;
        for i in 0..self.settling.len() {
            let Settling { item, how, state } = self.settling[i].clone();
            if state == SettleState::Busy {
                continue;
            }
            self.settling[i].state = SettleState::Busy;
            let claim = self.claim_path(&item);
            if state == SettleState::Check {
                if !synced {
                    synced = true;
                    self.kit.sync(Purpose::Sync, &self.config.meta_dir);
                }
                self.kit.send(
                    Purpose::CheckSettle(item),
                    Request::Exists(PathWatch {
                        path: claim,
                        watch: false,
                    }),
                );
                continue;
            }
            let claim = DeleteRequest {
                path: claim,
                version: -1,
            };
            match how {
                Settle::Complete => {
                    let path = self.item_path(&item);
                    let item_op = MultiOp::Delete(DeleteRequest { path, version: -1 });
                    let ops = alloc::vec![MultiOp::Delete(claim), item_op];
                    self.kit.send(Purpose::Complete(item), Request::Multi(ops));
                }
                Settle::Release => {
                    self.kit
                        .send(Purpose::Release(item), Request::Delete(claim));
                }
            }
        }
    }

    /// The stale claims to check (after a `sync`) or to delete.
    pub(super) fn drive_orphans(&mut self) {
        if !self.orphan_checks.is_empty() {
            self.kit.sync(Purpose::Sync, &self.config.meta_dir);
            for name in core::mem::take(&mut self.orphan_checks) {
                let path = self.claim_path(&name);
                self.kit.send(
                    Purpose::CheckOrphan(name),
                    Request::Exists(PathWatch { path, watch: false }),
                );
            }
        }
        for name in core::mem::take(&mut self.orphans) {
            let path = self.claim_path(&name);
            self.kit.send(
                Purpose::Orphan(name),
                Request::Delete(DeleteRequest { path, version: -1 }),
            );
        }
    }

    fn settling_at(&self, item: &str) -> Option<usize> {
        self.settling.iter().position(|s| s.item == item)
    }

    /// The settlement at `at` is over: `event` reports it.
    fn settled(&mut self, at: Option<usize>, event: ConsumerEvent) {
        if let Some(at) = at {
            self.settling.remove(at);
        }
        self.emit(event);
    }

    pub(super) fn on_complete(&mut self, now: Instant, name: String, result: Reply) {
        let failure = multi_failure(&result);
        let at = self.settling_at(&name);
        let failed = |item: String, error: Error| ConsumerEvent::CompleteFailed { item, error };
        match (result, failure) {
            (Ok(Response::Multi(_)), None) => {
                self.settled(at, ConsumerEvent::Completed { item: name })
            }
            (_, Some((1, ErrorCode::NoNode))) => {
                // The item is gone (taken outside the claim protocol): drop our claim.
                self.orphans.push(name.clone());
                self.settled(at, failed(name, Error::Server(ErrorCode::NoNode)));
            }
            (_, Some((_, code))) => self.settled(at, failed(name, Error::Server(code))),
            (Err(e), None) if e.may_have_applied() => {
                // Did it land? Our claim is gone iff it did (only we delete it).
                self.again(at, SettleState::Check, now);
            }
            (Err(e), None) => self.failed(at, name, e, SettleState::Send, now),
            (Ok(_), None) => self.settled(at, failed(name, Error::UnexpectedReply)),
        }
    }

    /// The request of the settlement at `at` failed with `error`: it goes again as
    /// `retry` after a backoff if the error allows, is left to the session's end if it
    /// ended the session, and is reported failed otherwise.
    fn failed(
        &mut self,
        at: Option<usize>,
        item: String,
        error: Error,
        retry: SettleState,
        now: Instant,
    ) {
        if error.is_retryable() {
            self.again(at, retry, now);
        } else if !error.ends_session() {
            self.settled(at, ConsumerEvent::CompleteFailed { item, error });
        }
    }

    /// The settlement at `at` goes again (`Send`) or is checked (`Check`) after a
    /// backoff.
    fn again(&mut self, at: Option<usize>, state: SettleState, now: Instant) {
        if let Some(s) = at.and_then(|at| self.settling.get_mut(at)) {
            s.state = state;
        }
        self.kit.failed(now);
    }

    /// Our claim after a complete or release whose reply was lost: gone, or another
    /// session's (only we delete ours while our session lives), means it landed; still
    /// ours means it did not: send it again.
    pub(super) fn on_check_settle(&mut self, now: Instant, name: String, result: Reply) {
        let Some(at) = self.settling_at(&name) else {
            return;
        };
        let landed = match self.settling[at].how {
            Settle::Complete => ConsumerEvent::Completed { item: name.clone() },
            Settle::Release => ConsumerEvent::Released { item: name.clone() },
        };
        match result {
            Err(Error::Server(ErrorCode::NoNode)) => self.settled(Some(at), landed),
            Ok(Response::Stat(stat)) if !self.mine.owns(&stat) => self.settled(Some(at), landed),
            // Ours: not applied, again.
            Ok(_) => self.settling[at].state = SettleState::Send,
            Err(e) => self.failed(Some(at), name, e, SettleState::Check, now),
        }
    }

    pub(super) fn on_release(&mut self, now: Instant, name: String, result: Reply) {
        let Some(at) = self.settling_at(&name) else {
            return;
        };
        match result {
            Ok(_) | Err(Error::Server(ErrorCode::NoNode)) => {
                self.settled(Some(at), ConsumerEvent::Released { item: name })
            }
            // Did it land? Another consumer may hold a claim of that name by now: check
            // whose it is before deleting again.
            Err(e) if e.may_have_applied() => self.again(Some(at), SettleState::Check, now),
            // Refused for good: the claim stays until our session ends.
            Err(e) => self.failed(Some(at), name, e, SettleState::Send, now),
        }
    }

    /// A stale claim after its delete's reply was lost (and a `sync`; after a failed
    /// sync the read reads as lost, `Outbox::answer`, and is made again).
    pub(super) fn on_check_orphan(&mut self, now: Instant, name: String, result: Reply) {
        match result {
            // Still ours (our delete did not land): delete it again.
            Ok(Response::Stat(stat)) if self.mine.owns(&stat) => self.orphans.push(name),
            Err(e) if e.is_retryable() => {
                self.orphan_checks.push(name);
                self.kit.failed(now);
            }
            // Gone, or another session's claim: nothing of ours to delete.
            _ => {}
        }
    }

    pub(super) fn on_orphan(&mut self, now: Instant, name: String, result: &Reply) {
        match result {
            // It may have landed, and the item's name may be claimed by someone else
            // since: never delete it blindly again.
            Err(e) if e.may_have_applied() => {
                self.orphan_checks.push(name);
                self.kit.failed(now);
            }
            Err(e) if e.is_retryable() => {
                self.orphans.push(name);
                self.kit.failed(now);
            }
            _ => {}
        }
    }
}
