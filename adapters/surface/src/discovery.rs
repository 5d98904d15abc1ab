//! Service discovery (Curator `curator-x-discovery` compatible): thin typed wrappers
//! over the core machines (`zk_recipes::recipe::discovery`); what each call and event
//! means is decided there.
//!
//! A registration is a node kept in place: besides its own calls it has those of every
//! [`NodeHandle`](super::NodeHandle) (`created`, `delete`). Dropping a registration
//! unregisters (deletes our instance node); dropping a cache stops it.

use std::time::{SystemTime, UNIX_EPOCH};

use zk_recipes::proto::{ErrorCode, Stat};
use zk_recipes::recipe::discovery::{
    DownPolicy, Registration, RegistrationEvent, ServiceCache, ServiceCacheEvent,
    ServiceInstance, Strategy,
};
use zk_recipes::recipe::group::ViewConfig;
use zk_recipes::recipe::node::NodeCommands;

use zk_recipes::client::Error;

#[allow(unused_imports)]
use super::{form, only_async, only_blocking, rt};
use super::{Client, Handle};

/// A registered service instance ([`Client::register_service`]): its events and its
/// calls (`created`, `update`, `unregister`).
pub type ServiceRegistration = Handle<Registration>;

/// A followed service ([`Client::service_cache`]): its events and its calls
/// (`synced`, `instances`, `pick`, `note_error`).
pub type ServiceCacheHandle = Handle<ServiceCache>;

/// A payload that is not one JSON value (or an update that changes name or id).
fn bad_instance() -> Error {
    Error::Server(ErrorCode::BadArguments)
}

/// The instance with its registration time set now when it has none.
fn stamped(instance: &ServiceInstance) -> ServiceInstance {
    let mut i = instance.clone();
    if i.registration_time_utc == 0 {
        i.registration_time_utc = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    }
    i
}

#[form]
impl Handle<Registration> {
    /// Writes `instance` (same name and id) and waits until it is in the node: the
    /// Stat. `Err(Server(BadArguments))` for another name or id or a payload that is
    /// not JSON (nothing changes then).
    pub async fn update(&mut self, instance: &ServiceInstance) -> Result<Stat, Error> {
        let i = instance.clone();
        let accepted = self.hosted.call(move |r, now| r.update(now, &i)).await?;
        accepted.map_err(|_| bad_instance())?;
        self.outcome(|e| match e {
            RegistrationEvent::DataSet { stat } => Some(Ok(*stat)),
            RegistrationEvent::DataRefused { error } => Some(Err(error.clone())),
            RegistrationEvent::Failed { error } => Some(Err(error.clone())),
            RegistrationEvent::Removed => Some(Err(Error::Finished)),
            _ => None,
        })
        .await
    }

    /// The instance as registered (its registration time stamped) or last updated.
    pub async fn instance(&self) -> Result<ServiceInstance, Error> {
        self.hosted.call(|r, _| r.instance().clone()).await
    }

    /// Unregisters: deletes our instance node and waits until it is gone.
    pub async fn unregister(self) -> Result<(), Error> {
        self.delete().await
    }
}

#[form]
impl Handle<ServiceCache> {
    /// Waits for the next `Synced` (a complete cache), then returns the instances.
    pub async fn synced(&mut self) -> Result<Vec<ServiceInstance>, Error> {
        self.outcome(|e| match e {
            ServiceCacheEvent::Synced => Some(Ok(())),
            ServiceCacheEvent::Failed(e) => Some(Err(e.clone())),
            ServiceCacheEvent::Closed => Some(Err(Error::Finished)),
            _ => None,
        })
        .await?;
        self.instances().await
    }

    /// The cached instances now (sorted by id; no request to the server).
    pub async fn instances(&self) -> Result<Vec<ServiceInstance>, Error> {
        self.hosted.call(|c, _| c.instances().to_vec()).await
    }

    /// One usable instance by the cache's strategy, from the cache (no request to the
    /// server); `None` when there is none.
    pub async fn pick(&self) -> Result<Option<ServiceInstance>, Error> {
        self.hosted.call(|c, now| c.pick(now)).await
    }

    /// Reports instance `id` failing: the down-instance policy skips it for a while.
    pub fn note_error(&self, id: &str) -> Result<(), Error> {
        let id = id.to_owned();
        self.hosted.run(move |c, now| c.note_error(now, &id))
    }
}

#[form]
impl Client {
    /// Registers `instance` under `base` (`<base>/<name>/<id>`, Curator's
    /// `ServiceDiscovery.registerService`), its registration time set now if it is 0;
    /// the node is kept in place (re-created after an expiry) until the handle is
    /// unregistered or dropped. It returns at once; `.created().await` waits until the
    /// instance is registered. `Err(Server(BadArguments))` if the payload is not JSON
    /// (`ServiceInstance::to_json` says why).
    pub fn register_service(
        &self,
        base: &str,
        instance: &ServiceInstance,
    ) -> Result<ServiceRegistration, Error> {
        let r = Registration::new(base, &stamped(instance)).map_err(|_| bad_instance())?;
        Handle::start(self, r, |r, now| r.create_node(now))
    }

    /// Follows service `name` under `base`, picking round robin with Curator's default
    /// down-instance policy (2 errors, 30 s).
    pub fn service_cache(&self, base: &str, name: &str) -> Result<ServiceCacheHandle, Error> {
        self.service_cache_with(base, name, Strategy::RoundRobin, DownPolicy::default())
    }

    /// [`service_cache`](Self::service_cache) with a strategy and a policy.
    pub fn service_cache_with(
        &self,
        base: &str,
        name: &str,
        strategy: Strategy,
        policy: DownPolicy,
    ) -> Result<ServiceCacheHandle, Error> {
        let cache = ServiceCache::new(base, name, strategy, policy);
        Handle::start(self, cache, |c, now| c.start(now))
    }

    /// The instances of service `name` under `base` now (Curator's
    /// `queryForInstances`): a cache read until complete, then stopped.
    pub async fn query_instances(
        &self,
        base: &str,
        name: &str,
    ) -> Result<Vec<ServiceInstance>, Error> {
        self.service_cache(base, name)?.synced().await
    }

    /// The names of the services under `base` (Curator's `queryForNames`).
    pub async fn query_names(&self, base: &str) -> Result<Vec<String>, Error> {
        let mut config = ViewConfig::new(base);
        config.watch_data = false;
        let mut view = self.group_view_with(config)?;
        let members = view.synced().await?;
        Ok(members.into_iter().map(|m| m.name).collect())
    }
}
