//! Tree and children caches: a thin typed wrapper over the core
//! machine (`zk_recipes::recipe::cache`); what each call and event means is decided
//! there.
//!
//! The handle owns its hosted cache and its event stream. `initialized` reads that
//! stream up to `Initialized` (the `Created` events of the load are passed over: take a
//! `snapshot` then); `next` gives every event in order. Dropping the handle stops the
//! cache.

use std::collections::BTreeMap;

use zk_recipes::recipe::cache::TreeCache;
pub use zk_recipes::recipe::cache::{CacheConfig, CacheEvent, CachedNode};

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// A tree or children cache ([`Client::tree_cache`], [`Client::children_cache`]): its
/// events and its calls (`initialized`, `get`, `children`, `snapshot`, ...).
pub type TreeCacheHandle = Handle<TreeCache>;

fn cache_error(e: &CacheEvent) -> Option<Error> {
    match e {
        CacheEvent::Failed(e) => Some(e.clone()),
        CacheEvent::Closed => Some(Error::Finished),
        _ => None,
    }
}

#[form]
impl Handle<TreeCache> {
    /// Waits until the first load is complete (`Initialized`): the number of nodes
    /// cached then. Fails if the cache ends first (`TooLarge` past `max_nodes`, ...).
    pub async fn initialized(&mut self) -> Result<usize, Error> {
        self.outcome(|e| match e {
            CacheEvent::Initialized => Some(Ok(())),
            e => cache_error(e).map(Err),
        })
        .await?;
        self.len().await
    }

    /// The cached node at `path` now.
    pub async fn get(&self, path: &str) -> Result<Option<CachedNode>, Error> {
        let path = path.to_string();
        self.hosted.call(move |c, _| c.get(&path).cloned()).await
    }

    /// The names of the cached children of `path` now, sorted.
    pub async fn children(&self, path: &str) -> Result<Vec<String>, Error> {
        let path = path.to_string();
        self.hosted.call(move |c, _| c.children(&path)).await
    }

    /// Every cached node now, by path.
    pub async fn snapshot(&self) -> Result<BTreeMap<String, CachedNode>, Error> {
        self.hosted
            .call(|c, _| c.nodes().map(|(p, n)| (p.to_string(), n.clone())).collect())
            .await
    }

    /// How many nodes are cached now.
    pub async fn len(&self) -> Result<usize, Error> {
        self.hosted.call(|c, _| c.len()).await
    }

    /// Nothing cached now.
    pub async fn is_empty(&self) -> Result<bool, Error> {
        self.hosted.call(|c, _| c.is_empty()).await
    }

    /// Loaded, connected and not resyncing (see `TreeCache::is_synced`).
    pub async fn is_synced(&self) -> Result<bool, Error> {
        self.hosted.call(|c, _| c.is_synced()).await
    }
}

#[form]
impl Client {
    /// Caches the subtree at `path`, root included, kept up to date (see
    /// `zk_recipes::recipe::cache`).
    pub fn tree_cache(&self, path: &str) -> Result<TreeCacheHandle, Error> {
        self.tree_cache_with(CacheConfig::tree(path))
    }

    /// Caches the node at `path` and its children, with data (depth 1).
    pub fn children_cache(&self, path: &str) -> Result<TreeCacheHandle, Error> {
        self.tree_cache_with(CacheConfig::children(path))
    }

    /// A cache with a full configuration (depth, `max_nodes`, reads in flight,
    /// one-shot watches).
    pub fn tree_cache_with(&self, config: CacheConfig) -> Result<TreeCacheHandle, Error> {
        Handle::start(self, TreeCache::new(config), |c, now| c.start(now))
    }
}
