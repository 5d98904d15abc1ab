//! Claiming a batch: at most once, read the items and take them in one `multi` (a take
//! in doubt is decided by our marker's version); at least once, claim each item with an
//! ephemeral node and read it.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::super::state::marker_ops;
use super::super::Format;
use super::phase::{Batch, Marker, Multi, Settle, Slot};
use super::{Consumer, ConsumerEvent, Item, Purpose};
use crate::client::ops::exists;
use crate::error::Error;
use crate::proto::multi_failure;
use crate::proto::*;
use crate::recipe::kit::Reply;
use crate::time::Instant;

impl Consumer {
    /// Sends what the batch needs now.
    pub(super) fn drive_batch(&mut self) {
        let Some(mut b) = self.batch.take() else {
            return;
        };
        match b.multi() {
            None => self.send_claims(&mut b),
            Some(Multi::Doubt) => {
                if !self.reading_marker() {
                    self.kit.sync(Purpose::Sync, &self.config.meta_dir);
                    self.kit
                        .send(Purpose::ReadMarker, exists(&self.mine.path, false));
                }
            }
            Some(Multi::Send) => {
                b.set_multi(Multi::Read);
                let slots: Vec<usize> = (0..b.slots.len())
                    .filter(|&i| matches!(b.slots[i], Slot::Ready(_)))
                    .collect();
                if !slots.is_empty() {
                    self.send_take(&b, slots);
                }
            }
            Some(_) => {
                let read: Vec<usize> = (0..b.slots.len())
                    .filter(|&i| b.slots[i] == Slot::NeedData)
                    .collect();
                self.send_read(&mut b, read);
            }
        }
        self.batch = Some(b);
        self.batch_step();
    }

    /// At least once: the claims to create or check, then one read of the items
    /// claimed or being claimed (same pipeline: the server runs them in order).
    fn send_claims(&mut self, b: &mut Batch) {
        let mut read = Vec::new();
        let mut checks = false;
        for i in 0..b.slots.len() {
            match b.slots[i] {
                Slot::ToClaim => {
                    b.slots[i] = Slot::Busy;
                    let path = self.claim_path(&b.names[i]);
                    let create = CreateRequest::new(
                        path,
                        Bytes::from(self.config.id.clone()),
                        self.config.acl.clone(),
                        CreateMode::Ephemeral,
                    );
                    self.kit.send(Purpose::Claim(i), Request::Create(create));
                    read.push(i);
                }
                Slot::Check => {
                    if !checks {
                        checks = true;
                        self.kit.sync(Purpose::Sync, &self.config.meta_dir);
                    }
                    b.slots[i] = Slot::Busy;
                    let path = self.claim_path(&b.names[i]);
                    self.kit.send(
                        Purpose::CheckClaim(i),
                        Request::Exists(PathWatch { path, watch: false }),
                    );
                }
                Slot::NeedData => read.push(i),
                _ => {}
            }
        }
        let read: Vec<usize> = read
            .into_iter()
            .filter(|&i| matches!(b.slots[i], Slot::NeedData | Slot::Busy))
            .collect();
        self.send_read(b, read);
    }

    /// One `multiRead` of the slots `read` (those wanting data become busy).
    fn send_read(&mut self, b: &mut Batch, read: Vec<usize>) {
        if read.is_empty() {
            return;
        }
        let ops = read
            .iter()
            .map(|&i| {
                if b.slots[i] == Slot::NeedData {
                    b.slots[i] = Slot::Busy;
                }
                ReadOp::GetData(PathWatch {
                    path: self.item_path(&b.names[i]),
                    watch: false,
                })
            })
            .collect();
        self.kit.send(Purpose::Read(read), Request::MultiRead(ops));
    }

    /// At most once: the take, one `multi` (our marker created if it is not there, its
    /// version checked and bumped, the items deleted).
    fn send_take(&mut self, b: &Batch, slots: Vec<usize>) {
        let applied = self.mine.marker.applied();
        let mut ops = marker_ops(
            &self.mine.path,
            &self.config.acl,
            !self.mine.present(),
            applied as i32,
            slots.len(),
        );
        for &i in &slots {
            ops.push(MultiOp::Delete(DeleteRequest {
                path: self.item_path(&b.names[i]),
                version: -1,
            }));
        }
        let no = applied.wrapping_add(1);
        self.kit.send(Purpose::Take(no, slots), Request::Multi(ops));
    }

    /// Nothing in flight for the batch: deliver it, or send the next step.
    pub(super) fn batch_step(&mut self) {
        let busy = self.kit.any(|p| {
            matches!(
                p,
                Purpose::Claim(_)
                    | Purpose::CheckClaim(_)
                    | Purpose::Read(_)
                    | Purpose::Take(..)
                    | Purpose::ReadMarker
            )
        });
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        if busy || matches!(b.multi(), Some(Multi::Doubt | Multi::Send)) {
            return;
        }
        if b.slots
            .iter()
            .any(|s| !matches!(s, Slot::Ready(_) | Slot::Skip))
        {
            return; // waits for a retry (reconnect, backoff, parents)
        }
        if b.multi() == Some(Multi::Read) && b.slots.iter().any(|s| matches!(s, Slot::Ready(_))) {
            // Read; now take them in one multi.
            b.set_multi(Multi::Send);
            self.drive_batch();
            return;
        }
        let Some(b) = self.batch.take() else {
            return;
        };
        let mut items = Vec::new();
        for (slot, name) in b.slots.into_iter().zip(b.names) {
            if let Slot::Ready(data) = slot {
                // A delay item's data is Curator's frame of it.
                let data = match self.config.format {
                    Format::Delay => crate::recipe::queue::delay::payload(data),
                    _ => data,
                };
                items.push(Item { name, data });
            }
        }
        let take = b.take;
        if self.at_least_once() && self.closing() && !items.is_empty() {
            // Claimed while closing: nobody will complete them. The take fails, the
            // claims are released before `Closed`.
            for it in items {
                self.settle_later(it.name, Settle::Release);
            }
            let error = Error::Closed;
            return self.finish_take(take, ConsumerEvent::TakeFailed { take, error });
        }
        if self.at_least_once() {
            self.held.extend(items.iter().map(|it| it.name.clone()));
        }
        if !items.is_empty() {
            self.finish_take(take, ConsumerEvent::Taken { take, items });
        } else if let Some(error) = b.error {
            self.finish_take(take, ConsumerEvent::TakeFailed { take, error });
        }
        // Otherwise nothing was had: the take goes on with the next batch.
    }

    /// The error a missing side directory fails with once no parent round is left.
    fn no_meta(&self) -> Error {
        self.parents.error.clone().unwrap_or(Error::NoParent {
            path: self.config.meta_dir.clone(),
            code: ErrorCode::NoNode,
        })
    }

    pub(super) fn on_claim(&mut self, now: Instant, i: usize, result: Reply) {
        let parents_done = self.parents.done();
        let reading = self
            .kit
            .any(|p| matches!(p, Purpose::Read(slots) if slots.contains(&i)));
        let no_meta = self.no_meta();
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        let Some(slot) = b.slots.get(i).cloned() else {
            return;
        };
        let next = match result {
            Ok(_) => {
                b.set_claimed(i, true);
                // The read sent behind the claim answers for the data — unless it
                // answered first (a read refused by the session comes back before the
                // claim's reply): then read again.
                if slot == Slot::Busy && !reading {
                    Slot::NeedData
                } else {
                    slot
                }
            }
            Err(Error::Server(ErrorCode::NodeExists)) => {
                let n = b.names.len();
                b.slots[i] = Slot::Skip;
                self.contended(n);
                return;
            }
            Err(Error::Server(ErrorCode::NoNode)) if !parents_done => {
                self.parents.need = true;
                Slot::ToClaim
            }
            Err(e) if e.may_have_applied() => {
                self.kit.failed(now);
                Slot::Check
            }
            Err(e) if e.is_retryable() => {
                self.kit.failed(now);
                Slot::ToClaim
            }
            Err(e) if e.ends_session() => Slot::Skip,
            Err(e) => {
                b.error = Some(match e {
                    Error::Server(ErrorCode::NoNode) => no_meta,
                    e => e,
                });
                Slot::Skip
            }
        };
        b.slots[i] = next;
    }

    pub(super) fn on_check_claim(&mut self, now: Instant, i: usize, result: Reply) {
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        if i >= b.slots.len() {
            return;
        }
        b.slots[i] = match result {
            Ok(Response::Stat(stat)) if self.mine.owns(&stat) => {
                b.set_claimed(i, true);
                Slot::NeedData
            }
            Ok(_) => Slot::Skip, // someone else's claim
            Err(Error::Server(ErrorCode::NoNode)) => Slot::ToClaim,
            Err(e) if e.is_retryable() => {
                self.kit.failed(now);
                Slot::Check
            }
            Err(_) => Slot::Skip,
        };
    }

    pub(super) fn on_read(&mut self, now: Instant, slots: Vec<usize>, result: Reply) {
        let alo = self.at_least_once();
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        let mut gone = 0;
        match result {
            Ok(Response::Multi(results)) if results.len() == slots.len() => {
                gone = read_results(b, alo, &slots, results, &mut self.orphans);
            }
            Err(e) if e.is_retryable() || e.ends_session() => {
                for &i in &slots {
                    // At least once, a claim in flight answers for itself.
                    let mine = !alo || b.claimed(i);
                    if let Some(s) = b.slots.get_mut(i) {
                        if (*s == Slot::Busy || *s == Slot::NeedData) && mine {
                            *s = Slot::NeedData;
                        }
                    }
                }
                self.kit.failed(now);
            }
            Err(e) => {
                for &i in &slots {
                    let mine = !alo || b.claimed(i);
                    if let Some(s) = b.slots.get_mut(i) {
                        if mine {
                            *s = Slot::Skip;
                        }
                    }
                }
                b.error = Some(e);
            }
            Ok(_) => {
                for &i in &slots {
                    if let Some(s) = b.slots.get_mut(i) {
                        *s = Slot::Skip;
                    }
                }
                b.error = Some(Error::UnexpectedReply);
            }
        }
        // At least once, claimed slots whose data is still missing read again.
        if alo {
            for i in 0..b.slots.len() {
                if b.slots[i] == Slot::Busy && b.claimed(i) {
                    b.slots[i] = Slot::NeedData;
                }
            }
        }
        if gone > 0 {
            let n = b.names.len();
            self.contended(n);
        }
    }

    pub(super) fn on_take(&mut self, now: Instant, no: u32, slots: Vec<usize>, result: Reply) {
        let present = self.mine.present();
        let marker_ops = if present { 1 } else { 2 };
        let parents_done = self.parents.done();
        let no_meta = self.no_meta();
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        match (&result, multi_failure(&result)) {
            (Ok(Response::Multi(_)), None) => {
                self.kit.succeeded();
                self.mine.marker = Marker::Present(no);
                b.set_multi(Multi::Taken); // taken: deliver
            }
            (_, Some((i, code))) if i >= marker_ops => {
                // An item vanished between our read and the take: someone else's.
                if let Some(&slot) = slots.get(i - marker_ops) {
                    b.slots[slot] = Slot::Skip;
                }
                if code == ErrorCode::NoNode {
                    b.set_multi(Multi::Send);
                    let n = b.names.len();
                    self.contended(n);
                } else {
                    b.fail(Error::Server(code));
                }
            }
            (_, Some((0, ErrorCode::NoNode))) if !present && !parents_done => {
                self.parents.need = true;
                b.set_multi(Multi::Send);
            }
            (_, Some((_, ErrorCode::NoNode))) if !present && parents_done => b.fail(no_meta),
            (_, Some(_)) => {
                // The marker is not as we think (BadVersion, NodeExists, NoNode): read it.
                b.set_multi(Multi::Doubt);
            }
            (Err(e), None) if e.may_have_applied() || e.ends_session() => {
                b.set_multi(Multi::Doubt);
                self.kit.failed(now);
            }
            (Err(e), None) if e.is_retryable() => {
                b.set_multi(Multi::Send);
                self.kit.failed(now);
            }
            (Err(e), None) => b.fail(e.clone()),
            (Ok(_), None) => b.fail(Error::UnexpectedReply),
        }
    }

    pub(super) fn on_read_marker(&mut self, now: Instant, result: Reply) {
        let found = match self.mine.read(&mut self.kit, now, result) {
            Ok(found) => found,
            Err(e) => {
                if e.is_retryable() {
                    self.kit.failed(now);
                }
                return; // read again (or the session change decides)
            }
        };
        let applied_before = self.mine.marker.applied();
        self.mine.marker = found;
        let Some(b) = self.batch.as_mut() else {
            return;
        };
        let no = applied_before.wrapping_add(1);
        if matches!(found, Marker::Present(version) if version >= no && version != applied_before) {
            // Our take was applied: the items are ours.
            b.set_multi(Multi::Taken);
        } else {
            // Not applied: take them again — after reading them again. The names were
            // read before the doubt (a disconnection, maybe long); the data is read
            // again so that what we deliver is what the multi deletes, even if the
            // directory was deleted and made again meanwhile (outside the contract: an
            // operator, or a container someone else made, see the module docs).
            b.set_multi(Multi::Read);
            for slot in b.slots.iter_mut() {
                if matches!(slot, Slot::Ready(_)) {
                    *slot = Slot::NeedData;
                }
            }
        }
    }
}

/// The answers of a batch's `multiRead` of `slots`: the data of the items that are ours
/// (at least once: claimed); at least once, a claimed item gone is a stale claim of
/// ours, to delete (`orphans`). Returns how many items were gone.
fn read_results(
    b: &mut Batch,
    alo: bool,
    slots: &[usize],
    results: Vec<MultiResult>,
    orphans: &mut Vec<String>,
) -> usize {
    let mut gone = 0;
    for (r, &i) in results.into_iter().zip(slots) {
        if i >= b.slots.len() {
            continue;
        }
        // At least once, only a claimed item's data counts.
        let claimed = b.claimed(i);
        match r {
            MultiResult::GetData { data, .. } if !alo || claimed => b.slots[i] = Slot::Ready(data),
            MultiResult::GetData { .. } => {
                // Claim not (yet) ours: its own answer decides.
            }
            _ if alo && claimed => {
                // Completed by someone meanwhile: our claim is stale.
                b.slots[i] = Slot::Skip;
                b.set_claimed(i, false);
                orphans.push(b.names[i].clone());
                gone += 1;
            }
            _ if alo => {}
            _ => {
                b.slots[i] = Slot::Skip;
                gone += 1;
            }
        }
    }
    gone
}
