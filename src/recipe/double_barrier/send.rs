//! What the participant sends: [`DoubleBarrier::drive`] sends what is needed ([`Need`])
//! when the session allows, stage by stage.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::phase::*;
use super::DoubleBarrier;
use crate::proto::*;
use crate::recipe::kit::join;
use crate::time::Instant;

impl DoubleBarrier {
    /// Sends what is needed, if the session allows it now.
    pub(super) fn drive(&mut self, now: Instant) {
        if self.need.is_empty() || !self.kit.allows(now) {
            return;
        }
        let need = core::mem::take(&mut self.need);
        match self.phase() {
            Phase::Entering => self.drive_enter(need),
            Phase::Leaving => self.drive_leave(need),
            Phase::Stopping if need.has(STOP_DELETE) => {
                self.delete(Purpose::StopDelete, self.node_path.clone());
            }
            _ => {}
        }
    }

    fn drive_enter(&mut self, need: Need) {
        if need.has(ENTER) {
            self.enter_requests(need.has(PARENTS));
        } else if need.has(ARM) {
            self.sync_first();
            self.ready_exists();
            self.list_request();
        } else if need.has(LIST) {
            self.list_request();
        }
        if need.has(READY_CREATE) {
            // Only while our node is there: the listing that counted us may be
            // older than an operator's deletion of it, and a `ready` made then
            // would open the round with too few members.
            let create = CreateRequest::new(
                self.ready_path.clone(),
                Bytes::new(),
                self.config.acl.clone(),
                CreateMode::Persistent,
            );
            let ops = alloc::vec![
                MultiOp::Check(CheckVersionRequest {
                    path: self.node_path.clone(),
                    version: -1,
                }),
                MultiOp::Create(create),
            ];
            self.kit.send(Purpose::ReadyCreate, Request::Multi(ops));
        }
        if need.has(READY_CREATE | CONFIRM) {
            // Right behind the create of `ready` (or after hearing of it): our
            // node may have been deleted by someone else meanwhile.
            let path = self.node_path.clone();
            self.kit.send(
                Purpose::Confirm,
                Request::Exists(PathWatch { path, watch: false }),
            );
        }
    }

    /// The enter's pipeline: `b` (or its ancestors), the creation watch on `ready`, our
    /// node, the listing.
    fn enter_requests(&mut self, parents: bool) {
        if parents {
            let (node, acl) = (&self.node_path, &self.config.acl);
            self.kit
                .send_parents(node, acl, CreateMode::Container, Purpose::Parent);
        } else if !self.keep_dir {
            // The last leaver of a round removes `b`: make it again in the
            // same pipeline (`NodeExists` is the usual answer) rather than
            // learn of it from a failed create one round trip later.
            let dir = CreateRequest::new(
                self.config.path.clone(),
                Bytes::new(),
                self.config.acl.clone(),
                CreateMode::Container,
            );
            self.kit.send(Purpose::Dir, Request::CreateContainer(dir));
        }
        self.sync_first();
        self.ready_exists();
        let create = CreateRequest::new(
            self.node_path.clone(),
            self.config.data.clone(),
            self.config.acl.clone(),
            CreateMode::Ephemeral,
        );
        self.kit.send(Purpose::Create, Request::Create(create));
        self.list_request();
    }

    fn drive_leave(&mut self, need: Need) {
        if need.has(DELETE_OWN) && !self.deleted_own {
            self.delete(Purpose::DeleteOwn, self.node_path.clone());
        }
        if need.has(WAIT) {
            if let Some(name) = self.watching().map(String::from) {
                let path = join(&self.config.path, &name);
                self.kit.send(
                    Purpose::Wait(name),
                    Request::Exists(PathWatch { path, watch: true }),
                );
            }
        }
        if need.has(FINAL) {
            let with_ready = matches!(&self.stage, Stage::Leaving(l) if l.saw_ready);
            let with_dir = !self.keep_dir;
            let ops = self.deletes(true, with_ready, with_dir);
            self.kit.send(
                Purpose::Final {
                    with_ready,
                    with_dir,
                },
                Request::Multi(ops),
            );
        }
        if need.has(CLEANUP) {
            let with_dir = !self.keep_dir;
            let ops = self.deletes(false, true, with_dir);
            self.kit
                .send(Purpose::Cleanup { with_dir }, Request::Multi(ops));
        }
        if need.has(LIST) {
            self.list_request();
        }
    }

    /// The deletes of one `multi`, in order: our node, `ready`, `b` (each if asked).
    fn deletes(&self, own: bool, ready: bool, dir: bool) -> Vec<MultiOp> {
        [
            (own, &self.node_path),
            (ready, &self.ready_path),
            (dir, &self.config.path),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, path)| {
            MultiOp::Delete(DeleteRequest {
                path: path.clone(),
                version: -1,
            })
        })
        .collect()
    }

    /// A `sync` of `b` if the next read must be synced.
    fn sync_first(&mut self) {
        if core::mem::take(&mut self.sync_next) {
            self.kit.sync(Purpose::Sync, &self.config.path);
        }
    }

    fn list_request(&mut self) {
        self.sync_first();
        let path = self.config.path.clone();
        self.kit.send(
            Purpose::List,
            Request::GetChildren(PathWatch { path, watch: false }),
        );
    }

    fn ready_exists(&mut self) {
        self.set_enter(|e| e.ready_armed = false);
        self.kit.send(
            Purpose::ReadyExists,
            Request::Exists(PathWatch {
                path: self.ready_path.clone(),
                watch: true,
            }),
        );
    }

    fn delete(&mut self, purpose: Purpose, path: String) {
        self.kit.send(
            purpose,
            Request::Delete(DeleteRequest { path, version: -1 }),
        );
    }
}
