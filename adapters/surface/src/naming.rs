//! Name service: thin typed wrappers over
//! `zk_recipes::recipe::naming` (register, resolve, watch, unique increasing ids); what each
//! call means is decided there.
//!

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use zk_recipes::proto::{CreateMode, Stat};
use zk_recipes::recipe::naming::{
    name_path, register_config, IdEvent, IdGenerator as IdMachine, IdGeneratorConfig, Resolve,
    ResolveConfig, ResolveEvent,
};
use zk_recipes::recipe::node::OwnedNode;

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle, NodeHandle, NodeWatchHandle};

/// Generator numbers of this process: part of the node names, so generators sharing a
/// session never take each other's nodes for their own.
static NEXT_NONCE: AtomicU64 = AtomicU64::new(1);

/// Unique, increasing ids from directory `dir` ([`Client::id_generator`]). Dropping
/// it fails nothing (no call is waiting) and deletes any node of ours left.
pub struct IdGenerator {
    ids: Handle<IdMachine>,
}

#[form]
impl IdGenerator {
    /// One id: larger than every id this generator returned before, and than every id
    /// any client was given before this call started.
    pub async fn next_id(&mut self) -> Result<i64, Error> {
        let mut ids = self.next_ids(1).await?;
        ids.pop().ok_or(Error::Finished)
    }

    /// `n` ids at once (their creates are pipelined), increasing. The first failure
    /// is returned (the ids drawn for the other requests are dropped).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "id_generator"))]
    pub async fn next_ids(&mut self, n: usize) -> Result<Vec<i64>, Error> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let first = self
            .ids
            .hosted
            .call(move |g, now| {
                let first = g.request(now);
                for _ in 1..n {
                    g.request(now);
                }
                first
            })
            .await?;
        let mut ids = Vec::with_capacity(n);
        let mut failed = None;
        let last = first + n as u64;
        let mut ended = 0;
        while ended < n {
            let e = self.ids.next().await.ok_or(Error::Finished)?;
            let (request, outcome) = match e {
                IdEvent::Id { request, id } => (request, Ok(id)),
                IdEvent::Failed { request, error } => (request, Err(error)),
                _ => continue,
            };
            if request < first || request >= last {
                continue; // a request of an earlier call given up
            }
            ended += 1;
            match outcome {
                Ok(id) => ids.push(id),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(ids),
        }
    }
}

#[form]
impl Client {
    /// Follows name `name` in directory `dir` (see `zk_recipes::recipe::node::NodeWatch`).
    pub fn watch_name(&self, dir: &str, name: &str) -> Result<NodeWatchHandle, Error> {
        self.watch_node(&name_path(dir, name)?)
    }

    /// Registers `name` in directory `dir` with `data` (`mode`: `Ephemeral`, kept
    /// registered across session expiry, or `Persistent`); the handle's `created`
    /// waits until it is in place, dropping it unregisters.
    pub fn register_name(
        &self,
        dir: &str,
        name: &str,
        data: impl Into<Bytes>,
        mode: CreateMode,
    ) -> Result<NodeHandle<OwnedNode>, Error> {
        self.owned_node(register_config(dir, name, data, mode)?)
    }

    /// Resolves `name` in directory `dir` with one read: its data and Stat, `None` if
    /// it is not registered.
    pub async fn resolve(&self, dir: &str, name: &str) -> Result<Option<(Bytes, Stat)>, Error> {
        self.resolve_with(ResolveConfig::new(dir, name)?).await
    }

    /// [`resolve`](Self::resolve) with a full configuration (`sync_first`).
    #[tracing::instrument(level = "debug", skip_all, fields(recipe = "naming", path = %config.path))]
    pub async fn resolve_with(
        &self,
        config: ResolveConfig,
    ) -> Result<Option<(Bytes, Stat)>, Error> {
        let mut resolve = Handle::start(self, Resolve::new(config), |r, now| r.start(now))?;
        match resolve.next().await {
            Some(ResolveEvent::Resolved { data, stat }) => Ok(Some((data, stat))),
            Some(ResolveEvent::NotFound) => Ok(None),
            Some(ResolveEvent::Failed(e)) => Err(e),
            _ => Err(Error::Finished),
        }
    }

    /// Unique, increasing ids from directory `dir` (created persistent if missing).
    pub fn id_generator(&self, dir: &str) -> Result<IdGenerator, Error> {
        let nonce = NEXT_NONCE.fetch_add(1, Ordering::Relaxed);
        let machine = IdMachine::new(IdGeneratorConfig::new(dir, nonce));
        Ok(IdGenerator {
            ids: Handle::host(self, machine)?,
        })
    }
}
