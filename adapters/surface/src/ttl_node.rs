//! TTL node (Curator's `PersistentTtlNode` format): a thin typed handle over the core
//! [`TtlNode`](zk_recipes::recipe::ttl_node::TtlNode); what each call and event means
//! is decided there (see `zk_recipes::recipe::ttl_node`).

use std::time::Duration;

use bytes::Bytes;
use zk_recipes::client::Error;
use zk_recipes::recipe::ttl_node::{TtlNode, TtlNodeConfig, TtlNodeEvent};

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// A TTL node kept alive by touching it ([`Client::ttl_node`]): its events
/// (`Present`, `Suspended`, `Gone`, then `Closed` or `Failed`) and its calls. Dropping
/// it stops touching, as [`close`](Handle::close) does: the node lapses after its TTL.
pub type TtlNodeHandle = Handle<TtlNode>;

#[form]
impl Handle<TtlNode> {
    /// Waits until the node is present (created or touched by us), at most `timeout`:
    /// `Err(Timeout)` if not by then, the machine's error if it ended (TTL nodes off:
    /// [`Error::TtlNodesDisabled`]).
    pub async fn present(&mut self, timeout: Duration) -> Result<(), Error> {
        if self.hosted.call(|m, _| m.is_present()).await? {
            return Ok(());
        }
        let deadline = Some(std::time::Instant::now() + timeout);
        match self
            .events
            .wait_until(|_| {}, TtlNodeEvent::outcome, deadline)
            .await
        {
            Ok(Some(outcome)) => outcome,
            Ok(None) => Err(Error::Finished),
            Err(_) => Err(Error::Timeout),
        }
    }

    /// Was the node present at our last touch (nothing since said otherwise)?
    pub async fn is_present(&self) -> Result<bool, Error> {
        self.hosted.call(|m, _| m.is_present()).await
    }

    /// Stops touching; the node lapses after its TTL unless another owner keeps it.
    pub async fn close(&mut self) -> Result<(), Error> {
        self.hosted.call(|m, now| m.close(now)).await
    }
}

#[form]
impl Client {
    /// Keeps node `path` (a container holding `data`, with a `touch` child that is a
    /// TTL node) alive while this handle lives, touching it every `ttl / 2`; Curator
    /// `PersistentTtlNode` compatible. Not bound to the session: the node survives
    /// reconnects, expiries and restarts within `ttl`, and lapses `ttl` (plus the
    /// server's container check interval) after the last touch. Needs a server with
    /// TTL nodes on (`-Dzookeeper.extendedTypesEnabled=true`). Wait for it with
    /// [`present`](Handle::present).
    pub fn ttl_node(
        &self,
        path: &str,
        data: impl Into<Bytes>,
        ttl: Duration,
    ) -> Result<TtlNodeHandle, Error> {
        self.ttl_node_with(TtlNodeConfig::new(path, data, ttl))
    }

    /// [`ttl_node`](Self::ttl_node) with a full configuration (ACL, child name, touch
    /// schedule).
    pub fn ttl_node_with(&self, config: TtlNodeConfig) -> Result<TtlNodeHandle, Error> {
        Handle::start(self, TtlNode::new(config), |m, now| m.start(now))
    }
}
