//! Driving the consumer: what to send next, the listing, the takes' deadlines, the
//! session's end.

use alloc::string::String;
use alloc::vec::Vec;

use super::super::names::{sorted_items, Format, CLAIM_PREFIX};
use super::super::state::in_doubt;
use super::phase::{Batch, Life, Mode, Multi, SideWatch, Slot, Take, View};
use super::{Consumer, ConsumerEvent, Delivery, Purpose, LOST_KEPT};
use crate::client::ops::delete;
use crate::error::Error;
use crate::proto::*;
use crate::recipe::kit::Reply;
use crate::time::Instant;

impl Consumer {
    /// Sends what is due: every input ends with it.
    pub(super) fn drive(&mut self, now: Instant) {
        if self.ended() || !self.can_send(now) {
            return;
        }
        let dirs = (&*self.config.dir, &*self.config.meta_dir, &*self.config.acl);
        self.parents
            .send_round(&mut self.kit, dirs, Purpose::Parent, Purpose::is_parent);
        self.drive_settling();
        self.drive_orphans();
        if self.batch.is_some() {
            self.drive_batch();
        }
        self.expire_takes(now);
        if self.closing() && self.batch.is_none() && !self.takes.is_empty() {
            // The take whose batch was on the wire at close: that batch is over.
            self.fail_takes(Error::Closed);
        }
        if self.batch.is_none() && !self.takes.is_empty() {
            self.next_batch();
        }
        if self.closing_idle() && !self.reading_marker() {
            if self.mine.present() {
                self.life = Life::Closing { deleting: true };
                self.kit
                    .send(Purpose::DeleteMarker, delete(&self.mine.path, None));
            } else if self.kit.is_quiet() {
                self.end();
            }
        }
    }

    /// Closing, with nothing left but the marker: no take, no batch, no settlement,
    /// the marker's delete not on the wire.
    fn closing_idle(&self) -> bool {
        self.life == (Life::Closing { deleting: false })
            && self.takes.is_empty()
            && self.batch.is_none()
            && self.settling.is_empty()
    }

    /// Connected, is something waiting to go out but for the backoff? (A consumer
    /// waiting for replies or for a session has no retry deadline.)
    pub(super) fn stuck(&self) -> bool {
        let batch_waits = match &self.batch {
            None => !self.takes.is_empty() && !self.view.in_flight() && !self.view.watching(),
            Some(b) => {
                matches!(b.multi(), Some(Multi::Send))
                    || (b.multi() == Some(Multi::Doubt) && !self.reading_marker())
                    || b.slots
                        .iter()
                        .any(|s| matches!(s, Slot::ToClaim | Slot::Check | Slot::NeedData))
            }
        };
        let closing = self.closing_idle()
            && (self.mine.present() || self.kit.is_quiet())
            && !self.reading_marker();
        let parents = self.parents.due(&self.kit, Purpose::is_parent);
        parents
            || !self.orphans.is_empty()
            || !self.orphan_checks.is_empty()
            || self
                .settling
                .iter()
                .any(|s| s.state != super::phase::SettleState::Busy)
            || batch_waits
            || closing
    }

    pub(super) fn end(&mut self) {
        if !self.ended() {
            self.life = Life::Ended;
            self.emit(ConsumerEvent::Closed);
        }
    }

    /// No batch: list, wait, or start the next batch from the listing.
    fn next_batch(&mut self) {
        let Some((take, max)) = self.takes.front().map(|t| (t.id, t.max)) else {
            return;
        };
        let View::Held {
            names: listing,
            cursor,
        } = &mut self.view
        else {
            if self.view == View::Stale {
                self.list();
            }
            return;
        };
        if *cursor >= listing.len() {
            self.list();
            return;
        }
        let end = (*cursor + max).min(listing.len());
        let names: Vec<String> = listing[*cursor..end].to_vec();
        *cursor = end;
        let n = names.len();
        let (first, mode) = if self.at_least_once() {
            (Slot::ToClaim, Mode::Claims(alloc::vec![false; n]))
        } else {
            (Slot::NeedData, Mode::Once(Multi::Read))
        };
        self.batch = Some(Batch {
            take,
            names,
            slots: alloc::vec![first; n],
            mode,
            error: None,
        });
        self.drive_batch();
    }

    fn list(&mut self) {
        let watch = self.last_empty || self.config.format == Format::Priority;
        if self.at_least_once() {
            let claims_watch = watch && self.side.blocked;
            self.side.watch = if claims_watch {
                SideWatch::Set
            } else {
                SideWatch::Off
            };
            self.kit.send(
                Purpose::ListClaims,
                Request::GetChildren(PathWatch {
                    path: self.config.meta_dir.clone(),
                    watch: claims_watch,
                }),
            );
        }
        self.kit.send(
            Purpose::List,
            Request::GetChildren(PathWatch {
                path: self.config.dir.clone(),
                watch,
            }),
        );
        // The watch is waited on unless the listing finds items.
        self.view = View::Listing { watched: watch };
    }

    /// Contention met: jump ahead in the listing.
    pub(super) fn contended(&mut self, batch_len: usize) {
        self.contended = true;
        let jump = batch_len.max(1) * (self.config.spread % 8) as usize;
        if let View::Held { cursor, .. } = &mut self.view {
            *cursor = cursor.saturating_add(jump);
        }
    }

    pub(super) fn on_list(&mut self, now: Instant, result: Reply) {
        let watched = self.view.watching();
        self.view = View::Stale;
        let children = match result {
            Ok(Response::Children(children)) | Ok(Response::Children2 { children, .. }) => children,
            Err(Error::Server(ErrorCode::NoNode)) => {
                if self.parents.done() {
                    let e = self.parents.error.take().unwrap_or(Error::NoParent {
                        path: self.config.dir.clone(),
                        code: ErrorCode::NoNode,
                    });
                    self.fail_takes(e);
                } else {
                    self.parents.need = true;
                }
                return;
            }
            Err(e) if e.is_retryable() => return self.kit.failed(now),
            Err(e) if e.ends_session() => return,
            Err(e) => return self.fail_takes(e),
            Ok(_) => return self.fail_takes(Error::UnexpectedReply),
        };
        self.kit.succeeded();
        if let Some(t) = self.takes.front_mut() {
            t.looked = true;
        }
        let mut items = sorted_items(self.config.format, &children, self.config.max_listing);
        if self.config.format == Format::Delay {
            // Items whose time has not come count as absent; the first wakes us.
            self.wake = crate::recipe::queue::delay::hold_back(&mut items, self.clock, now);
        }
        let listed = items.len();
        if self.at_least_once() {
            // Skip the items claimed, and those we hold whatever the claims listing
            // says (it may have been refused, or read on a lagging follower): a held
            // item's claim is ours, so a claim in doubt would find it "ours" again.
            let claims = core::mem::take(&mut self.side.claims);
            let held = &self.held;
            items.retain(|n| {
                !held.contains(n)
                    && !claims
                        .iter()
                        .any(|c| c.strip_prefix(CLAIM_PREFIX) == Some(n.as_str()))
            });
        }
        self.side.blocked = listed > 0 && items.is_empty();
        if items.is_empty() {
            // Only claimed items: the wake-up is a claim going away, so the side
            // directory must be watched too, and must not have changed while we listed.
            let claims_missed = self.side.blocked && self.side.watch != SideWatch::Set;
            self.last_empty = true;
            if watched {
                self.view = View::Waiting;
            }
            if (!watched || claims_missed) && !self.takes.is_empty() && !self.closing() {
                // List again, this time with a watch (no lost wake-up).
                self.list();
            }
            return;
        }
        self.last_empty = false;
        let mut cursor = 0;
        if core::mem::take(&mut self.contended) {
            let k = self.takes.front().map(|t| t.max).unwrap_or(1);
            let start = k * (self.config.spread % 8) as usize;
            if start < items.len() {
                cursor = start;
            }
        }
        self.view = View::Held {
            names: items,
            cursor,
        };
    }

    pub(super) fn fail_takes(&mut self, error: Error) {
        let keep = self.batch.as_ref().map(|b| b.take);
        let takes: Vec<_> = self.takes.drain(..).collect();
        for t in takes {
            if Some(t.id) == keep {
                self.takes.push_back(t);
            } else {
                self.emit(ConsumerEvent::TakeFailed {
                    take: t.id,
                    error: error.clone(),
                });
            }
        }
    }

    pub(super) fn finish_take(&mut self, take: u64, event: ConsumerEvent) {
        if let Some(at) = self.takes.iter().position(|t| t.id == take) {
            self.takes.remove(at);
            self.emit(event);
        }
    }

    /// Takes whose deadline passed and that wait for nothing in flight end.
    pub(super) fn expire_takes(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.takes.len() {
            if self.take_expiry(i).is_some_and(|at| now >= at) && self.take_looked(i, now) {
                let id = self.takes[i].id;
                self.takes.remove(i);
                self.emit(ConsumerEvent::TimedOut { take: id });
            } else {
                i += 1;
            }
        }
    }

    /// When take `i` may end on its deadline: never while its batch or its first
    /// listing is on the wire (their replies decide).
    pub(super) fn take_expiry(&self, i: usize) -> Option<Instant> {
        let t = self.takes.get(i)?;
        let blocked = self.batch.as_ref().is_some_and(|b| b.take == t.id)
            || (i == 0 && !t.looked && self.connected() && self.view.in_flight());
        if blocked {
            None
        } else {
            t.deadline
        }
    }

    /// Has take `i` had its one look by `now`? A listing answered, a watch on an empty
    /// queue, no connection, a take behind another, or a backoff that still holds at
    /// `now` (a refused look is a look: the deadline is not stretched by the backoff).
    pub(super) fn take_looked(&self, i: usize, now: Instant) -> bool {
        self.takes.get(i).is_some_and(|t| t.looked)
            || self.view.watching()
            || !self.connected()
            || i > 0
            || !self.kit.allows(now)
    }

    pub(super) fn on_session_end(&mut self, error: Error, terminal: bool) {
        self.kit.clear_requests();
        self.mine.end_session();
        self.view = View::Stale;
        self.life.delete_over();
        self.parents.need = false;
        self.orphans.clear();
        self.orphan_checks.clear();
        if let Some(b) = self.batch.take() {
            // At most once, a take in flight or in doubt may have deleted the items.
            let maybe_taken = self.config.delivery == Delivery::AtMostOnce
                && match b.multi() {
                    Some(Multi::Doubt) => true,
                    Some(Multi::Read) => b.slots.iter().any(|s| matches!(s, Slot::Ready(_))),
                    _ => false,
                };
            if maybe_taken {
                self.finish_take(
                    b.take,
                    ConsumerEvent::TakeFailed {
                        take: b.take,
                        error: in_doubt(&error),
                    },
                );
            }
        }
        for name in core::mem::take(&mut self.held) {
            if self.lost.len() >= LOST_KEPT {
                self.lost.pop_front();
            }
            self.lost.push_back(name.clone());
            self.emit(ConsumerEvent::ClaimLost { item: name });
        }
        for s in core::mem::take(&mut self.settling) {
            match s.how {
                super::phase::Settle::Release => {
                    self.emit(ConsumerEvent::Released { item: s.item })
                }
                super::phase::Settle::Complete => {
                    self.emit(ConsumerEvent::ClaimLost { item: s.item })
                }
            }
        }
        if terminal {
            self.fail_takes(error);
            let rest: Vec<Take> = self.takes.drain(..).collect();
            for t in rest {
                self.emit(ConsumerEvent::TakeFailed {
                    take: t.id,
                    error: Error::Closed,
                });
            }
            self.end();
        }
    }
}
