//! Group membership and rendezvous: thin typed wrappers over the
//! core machines (`zk_recipes::recipe::{group, node, rendezvous}`); what each call and
//! event means is decided there.
//!
//! Each handle owns its hosted machine and its event stream; the waiting calls
//! (`created`, `synced`, `address`, ...) read that stream, so events they pass over
//! are not seen again by the handle's `next`. Dropping a handle abandons the
//! machine: a member leaves, a coordinator deletes `z_r`, a view or worker stops.

use bytes::Bytes;
use zk_recipes::proto::{ErrorCode, Stat};
use zk_recipes::recipe::group::{GroupMember, Member, MemberConfig, View, ViewConfig, ViewEvent};
use zk_recipes::recipe::node::{
    NodeCommands, NodeWatch, NodeWatchEvent, OwnedNode, OwnedNodeConfig, OwnedNodeEvent,
};
use zk_recipes::recipe::rendezvous::{
    coordinator_config, publisher_config, Master, RendezvousEvent, Worker,
};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// A node kept in place: a group member ([`Client::group_member`]), a rendezvous
/// coordinator or publisher ([`Client::rendezvous_coordinator`],
/// [`Client::rendezvous_publisher`]), or any [`OwnedNode`] ([`Client::owned_node`]):
/// its events and its calls (`created`, `set_data`, `delete`, `leave`).
pub type NodeHandle<R> = Handle<R>;

/// A group member ([`Client::group_member`]).
pub type GroupMemberHandle = NodeHandle<GroupMember>;

fn node_error(e: &OwnedNodeEvent) -> Option<Error> {
    match e {
        OwnedNodeEvent::Failed { error } => Some(error.clone()),
        OwnedNodeEvent::Removed => Some(Error::Finished),
        _ => None,
    }
}

/// Hosts `recipe` and has it create its node.
fn keep_node<R: NodeCommands>(client: &Client, recipe: R) -> Result<NodeHandle<R>, Error> {
    Handle::start(client, recipe, |r, now| r.create_node(now))
}

#[form]
impl<R: NodeCommands> Handle<R> {
    /// Waits until the node is in place (`Created`): its Stat. Fails if the machine
    /// ends first.
    pub async fn created(&mut self) -> Result<Stat, Error> {
        self.outcome(|e| match e {
            OwnedNodeEvent::Created { stat } => Some(Ok(*stat)),
            e => node_error(e).map(Err),
        })
        .await
    }

    /// Keeps `data` in the node and waits until it is written (`DataSet`): the Stat.
    pub async fn set_data(&mut self, data: impl Into<Bytes>) -> Result<Stat, Error> {
        let data = data.into();
        self.hosted.run(move |r, now| r.set_node_data(now, data))?;
        self.outcome(|e| match e {
            OwnedNodeEvent::DataSet { stat } => Some(Ok(*stat)),
            OwnedNodeEvent::DataRefused { error } => Some(Err(error.clone())),
            e => node_error(e).map(Err),
        })
        .await
    }

    /// Deletes the node (if it is ours) and waits until it is gone.
    pub async fn delete(mut self) -> Result<(), Error> {
        self.hosted.run(|r, now| r.delete_node(now))?;
        self.events
            .wait(
                |_| {},
                |e| match e {
                    OwnedNodeEvent::Removed => Some(Ok(())),
                    OwnedNodeEvent::Failed { error } => Some(Err(error.clone())),
                    _ => None,
                },
            )
            .await
            .unwrap_or(Ok(()))
    }

    /// [`delete`](Self::delete) for a member: leaves the group.
    pub async fn leave(self) -> Result<(), Error> {
        self.delete().await
    }
}

/// A view of a group's members ([`Client::group_view`]): its events and its calls
/// (`synced`, `members`).
pub type GroupView = Handle<View>;

#[form]
impl Handle<View> {
    /// Waits for the next `Synced` (a complete view), then returns the members as they
    /// are when it asks (members a newer listing showed are in once read).
    pub async fn synced(&mut self) -> Result<Vec<Member>, Error> {
        self.outcome(|e| match e {
            ViewEvent::Synced => Some(Ok(())),
            ViewEvent::Failed(e) => Some(Err(e.clone())),
            ViewEvent::Closed => Some(Err(Error::Finished)),
            _ => None,
        })
        .await?;
        self.members().await
    }

    /// The members now (a snapshot, sorted by name).
    pub async fn members(&self) -> Result<Vec<Member>, Error> {
        self.hosted.call(|v, _| v.members().to_vec()).await
    }
}

/// A rendezvous master or worker ([`Client::rendezvous_master`],
/// [`Client::rendezvous_worker`]): its events and its calls (`gone`; a worker's
/// `address`; a master's `publish`, `published`).
pub type RendezvousHandle<R> = Handle<R>;

/// What ends a rendezvous wait: `z_r` gone is `NoNode`.
fn rendezvous_error(e: &RendezvousEvent) -> Option<Error> {
    match e {
        RendezvousEvent::Gone => Some(Error::Server(ErrorCode::NoNode)),
        RendezvousEvent::Failed(e) => Some(e.clone()),
        RendezvousEvent::Closed => Some(Error::Finished),
        _ => None,
    }
}

#[form]
impl<R: zk_recipes::recipe::Recipe<Event = RendezvousEvent>> Handle<R> {
    /// Waits until `z_r` is deleted (`Gone`): `Ok` then; `Err` if the role ends
    /// otherwise.
    pub async fn gone(&mut self) -> Result<(), Error> {
        self.outcome(|e| match e {
            RendezvousEvent::Gone => Some(Ok(())),
            e => rendezvous_error(e).map(Err),
        })
        .await
    }
}

#[form]
impl Handle<Worker> {
    /// Waits for the next address in `z_r` (the first, or a newer one): its data.
    /// `Err(Server(NoNode))` if `z_r` goes first.
    pub async fn address(&mut self) -> Result<Bytes, Error> {
        self.outcome(|e| match e {
            RendezvousEvent::Address { data, .. } => Some(Ok(data.clone())),
            e => rendezvous_error(e).map(Err),
        })
        .await
    }
}

#[form]
impl Handle<Master> {
    /// Waits until our address is in `z_r` (`Published`): `z_r`'s Stat.
    /// `Err(Server(NoNode))` if `z_r` goes first.
    pub async fn published(&mut self) -> Result<Stat, Error> {
        self.outcome(|e| match e {
            RendezvousEvent::Published { stat } => Some(Ok(*stat)),
            e => rendezvous_error(e).map(Err),
        })
        .await
    }

    /// Writes a new address; then [`published`](Self::published) waits for it.
    pub fn publish(&self, address: impl Into<Bytes>) -> Result<(), Error> {
        let address = address.into();
        self.hosted.run(move |m, now| m.publish(now, address))
    }
}

#[form]
impl Client {
    /// Joins group `dir` as `id` with `data` (Curator's `GroupMember` layout); the
    /// member node is kept in place (see `zk_recipes::recipe::group`). It returns at
    /// once and creates the node in the background: the handle's `.created().await` waits until it
    /// exists (do that before a view or another client should see it).
    pub fn group_member(
        &self,
        dir: &str,
        id: &str,
        data: impl Into<Bytes>,
    ) -> Result<GroupMemberHandle, Error> {
        self.group_member_with(MemberConfig::new(dir, id, data))
    }

    /// [`group_member`](Self::group_member) with a full configuration (ACL, no
    /// re-creation).
    pub fn group_member_with(&self, config: MemberConfig) -> Result<GroupMemberHandle, Error> {
        keep_node(self, GroupMember::new(config))
    }

    /// Follows the members of group `dir`.
    pub fn group_view(&self, dir: &str) -> Result<GroupView, Error> {
        self.group_view_with(ViewConfig::new(dir))
    }

    /// [`group_view`](Self::group_view) with a full configuration.
    pub fn group_view_with(&self, config: ViewConfig) -> Result<GroupView, Error> {
        Handle::start(self, View::new(config), |v, now| v.start(now))
    }

    /// Keeps any node in place (see `zk_recipes::recipe::node::OwnedNode`). It returns
    /// at once; the handle's `.created().await` waits until the node exists.
    pub fn owned_node(&self, config: OwnedNodeConfig) -> Result<NodeHandle<OwnedNode>, Error> {
        keep_node(self, OwnedNode::new(config))
    }

    /// Creates rendezvous node `path` (`z_r`, ephemeral) as its coordinator; dropping
    /// or deleting the handle deletes it, which ends the master and the workers.
    pub fn rendezvous_coordinator(&self, path: &str) -> Result<NodeHandle<OwnedNode>, Error> {
        self.owned_node(coordinator_config(path))
    }

    /// The simpler rendezvous: creates `path` itself with `address` as its data.
    pub fn rendezvous_publisher(
        &self,
        path: &str,
        address: impl Into<Bytes>,
    ) -> Result<NodeHandle<OwnedNode>, Error> {
        self.owned_node(publisher_config(path, address))
    }

    /// A rendezvous master: writes `address` into `path` once it exists.
    pub fn rendezvous_master(
        &self,
        path: &str,
        address: impl Into<Bytes>,
    ) -> Result<RendezvousHandle<Master>, Error> {
        Handle::start(self, Master::new(path, address), |m, now| m.start(now))
    }

    /// A rendezvous worker: waits for the master's address in `path`.
    pub fn rendezvous_worker(&self, path: &str) -> Result<RendezvousHandle<Worker>, Error> {
        Handle::start(self, Worker::new(path), |w, now| w.start(now))
    }
}

/// A followed node: its data kept current ([`Client::watch_node`], the paper's watched
/// configuration value; see `zk_recipes::recipe::node::NodeWatch`): its events and its
/// calls (`value`, `changed`, `refresh`).
pub type NodeWatchHandle = Handle<NodeWatch>;

#[form]
impl Handle<NodeWatch> {
    /// The node's data and Stat as last read (`None`: missing, or not read yet).
    pub async fn value(&self) -> Result<Option<(Bytes, Stat)>, Error> {
        self.hosted
            .call(|w, _| w.value().map(|(d, s)| (d.clone(), *s)))
            .await
    }

    /// Waits for the next version the watch reports: `Some(data)` for a new version,
    /// `None` when the node is missing. `Err` if the watch ends.
    pub async fn changed(&mut self) -> Result<Option<Bytes>, Error> {
        self.outcome(|e| match e {
            NodeWatchEvent::Data { data, .. } => Some(Ok(Some(data.clone()))),
            NodeWatchEvent::Missing { .. } => Some(Ok(None)),
            NodeWatchEvent::Failed(e) => Some(Err(e.clone())),
            NodeWatchEvent::Closed => Some(Err(Error::Finished)),
            _ => None,
        })
        .await
    }

    /// `sync`, then read again: after an out-of-band notice that the node changed, the
    /// next [`changed`](Self::changed) sees that change or a later one.
    pub fn refresh(&self) -> Result<(), Error> {
        self.hosted.run(|w, now| w.refresh(now))
    }
}

#[form]
impl Client {
    /// Follows the node at `path`: its data and Stat kept current, every version the
    /// server reports, a deleted and re-created node followed, re-read after a
    /// reconnect (nothing missed).
    pub fn watch_node(&self, path: &str) -> Result<NodeWatchHandle, Error> {
        Handle::start(self, NodeWatch::new(path), |w, now| w.start(now))
    }
}
