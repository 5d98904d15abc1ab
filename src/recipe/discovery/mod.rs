//! Service discovery, Curator `curator-x-discovery` compatible: a [`Registration`]
//! keeps one instance of a service registered; a [`ServiceCache`] follows a service's
//! instances (added / updated / removed) and picks one for each call through a
//! [`Provider`] (round robin, random from a seed, or sticky; instances reported
//! failing are skipped for a while).
//!
//! # Node format (Curator 5.4's `ServiceDiscoveryImpl` and `JsonInstanceSerializer`)
//!
//! * An instance is the node `<base>/<name>/<id>`; its data is one JSON object, the
//!   fields in Curator's order: `name`, `id`, `address`, `port`, `sslPort`, `payload`,
//!   `registrationTimeUTC`, `serviceType` (`"DYNAMIC"`, `"STATIC"`, `"PERMANENT"`,
//!   `"DYNAMIC_SEQUENTIAL"`), `uriSpec` (`{"parts":[{"value":..,"variable":..}]}` or
//!   `null`), `enabled`. `DYNAMIC` instances are `EPHEMERAL` nodes, `STATIC` and
//!   `PERMANENT` ones `PERSISTENT`; `<base>` and `<base>/<name>` are created as
//!   containers when missing.
//! * What we write: every field, `enabled` included (Curator 5.4 reads it but does not
//!   write it); the payload exactly as the raw JSON text given (see
//!   [`ServiceInstance`]: a Java class payload carries Jackson's `"@class"` member).
//! * What we read: the fields in any order, unknown fields skipped, `enabled` true
//!   when absent, the payload kept as its raw text (`"@class"` included). Data that is
//!   not such an object is reported ([`ServiceCacheEvent::Unreadable`]) and left out.
//!   The reader ([`ServiceInstance::from_json`]) is hand-written and bounded (nesting
//!   within 32 levels, no allocation beyond the input's size, no panic on any input).
//!
//! # Registration ([`Registration`], Curator's `registerService`)
//!
//! 1. It is an [`OwnedNode`] at `<base>/<name>/<id>` with the instance's JSON: created
//!    (parents as containers), and a create whose reply was lost is found ours by its
//!    `ephemeralOwner` and adopted.
//! 2. A dynamic instance gone with an expired session is re-created once a new session
//!    is up (Curator re-registers after `RECONNECTED`), as is one deleted by someone
//!    else; both are reported as `Lost` then `Created`.
//! 3. [`update`](Registration::update) writes the new JSON (`DataSet`);
//!    [`unregister`](Registration::unregister) (or abandoning it) deletes the node,
//!    only if it is ours, and ends with `Removed`.
//!
//! # Cache ([`ServiceCache`], Curator's `ServiceCache`)
//!
//! 1. A group [`View`] of `<base>/<name>`: one child watch on the service node and one
//!    data read (with its watch) per new or changed instance; a missing service node
//!    is an empty service, watched with `exists`. No herd: a change costs the
//!    instances it touches, not a re-read of all of them.
//! 2. Each member's data is decoded: [`Added`](ServiceCacheEvent::Added),
//!    [`Updated`](ServiceCacheEvent::Updated), [`Removed`](ServiceCacheEvent::Removed);
//!    [`Synced`](ServiceCacheEvent::Synced) once the view is complete (first load, and
//!    after each resync following a reconnect, which reads after a `sync`).
//! 3. [`pick`](ServiceCache::pick) asks the [`Provider`] for one of the cached
//!    instances: no request to the server. [`note_error`](ServiceCache::note_error)
//!    reports one failing; the [`DownPolicy`] decides for how long it is skipped.
//!
//! Queries (the names of a base path's services, the instances of one service) are a
//! view or a cache read until `Synced`; the adapters offer them as one call.
//!
//! # Session semantics
//!
//! As the [`OwnedNode`] and the [`View`]: `Suspended` on connection loss,
//! `Reconnected` when the session is back (the registration once its node is verified
//! ours, the cache before its resync); a closed session ends both with
//! `Failed(Error::Closed)`.
//!
//! ```
//! use zk_recipes::recipe::discovery::{Registration, ServiceInstance};
//! use zk_recipes::recipe::{Machine, Recipe, SessionChange};
//! use zk_recipes::time::Instant;
//!
//! let instance = ServiceInstance::new("web", "host-1", "10.0.0.1", 8080);
//! let mut r = Registration::new("/services", &instance).unwrap();
//! r.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
//! r.register(Instant::ZERO);
//! let (_, create) = r.poll_request().unwrap(); // create2 /services/web/host-1 {json}
//! assert_eq!(create.op_code(), zk_recipes::proto::OpCode::Create2);
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::group::{Member, View, ViewConfig, ViewEvent};
use super::kit::{join, Events};
use super::node::{node_commands, OwnedNode, OwnedNodeConfig, OwnedNodeEvent};
use super::{Machine, Recipe};
use crate::error::Error;
use crate::proto::*;
use crate::time::Instant;

mod error;
mod instance;
pub(crate) mod json;
mod provider;

pub use error::InstanceError;
pub use instance::{ServiceInstance, ServiceType, UriPart};
pub use json::MAX_DEPTH;
pub use provider::{DownPolicy, Provider, Strategy};

/// The service node `<base>/<name>`.
pub fn service_path(base: &str, name: &str) -> String {
    join(base, name)
}

/// The instance node `<base>/<name>/<id>` (an id holding `/` gives a path that fails
/// with `InvalidPath` naming it).
pub fn instance_path(base: &str, name: &str, id: &str) -> String {
    let mut path = join(&join(base, name), id);
    if id.contains('/') || id.is_empty() {
        path.push('/');
    }
    path
}

// ======================================================================================
// Registration
// ======================================================================================

/// What a [`Registration`] reports: its node's life (`Created` registered (again),
/// `Lost` gone involuntarily, `DataSet` an update written, `Removed` unregistered,
/// final; `Failed` final).
pub type RegistrationEvent = OwnedNodeEvent;

/// One registered instance; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Registration {
    node: OwnedNode,
    base: String,
    instance: ServiceInstance,
}

impl Registration {
    /// Registers `instance` under `base` once [`register`](Self::register) is called.
    /// Fails if its payload is not one JSON value.
    pub fn new(base: &str, instance: &ServiceInstance) -> Result<Self, InstanceError> {
        let json = instance.to_json()?;
        let path = instance_path(base, &instance.name, &instance.id);
        let mut config = OwnedNodeConfig::new(&path, Bytes::from(json));
        config.mode = match instance.service_type {
            ServiceType::Dynamic => CreateMode::Ephemeral,
            ServiceType::Static | ServiceType::Permanent => CreateMode::Persistent,
            ServiceType::DynamicSequential => CreateMode::EphemeralSequential,
        };
        Ok(Registration {
            node: OwnedNode::new(config),
            base: base.into(),
            instance: instance.clone(),
        })
    }

    /// The instance as last given.
    pub fn instance(&self) -> &ServiceInstance {
        &self.instance
    }

    /// The instance node's path.
    pub fn path(&self) -> &str {
        &self.node.config().path
    }

    /// The JSON kept in the node.
    pub fn data(&self) -> &Bytes {
        &self.node.config().data
    }

    /// Registered (our node in place and the connection up)?
    pub fn is_registered(&self) -> bool {
        self.node.is_present()
    }

    /// Has it ended (unregistered or failed)?
    pub fn has_ended(&self) -> bool {
        self.node.has_ended()
    }

    /// Creates the instance node and keeps it in place.
    pub fn register(&mut self, now: Instant) {
        self.node.create(now)
    }

    /// Writes `instance` (same name and id, else `Err` and nothing changes; a
    /// payload that is not JSON likewise); `DataSet` once written.
    pub fn update(
        &mut self,
        now: Instant,
        instance: &ServiceInstance,
    ) -> Result<(), InstanceError> {
        if instance.name != self.instance.name || instance.id != self.instance.id {
            return Err(InstanceError::Field("name/id (an update keeps them)"));
        }
        let json = instance.to_json()?;
        self.instance = instance.clone();
        self.node.set_data(now, Bytes::from(json));
        Ok(())
    }

    /// Deletes the instance node (only if ours); `Removed` once gone.
    pub fn unregister(&mut self, now: Instant) {
        self.node.delete(now)
    }

    /// The base path.
    pub fn base(&self) -> &str {
        &self.base
    }
}

node_commands!(Registration: register, unregister, node.set_data);

impl Machine for Registration {
    super::kit::follow_part!(node);
}

super::kit::recipe_events!(Registration => RegistrationEvent, node.poll_event);

// ======================================================================================
// ServiceCache
// ======================================================================================

/// What a [`ServiceCache`] reports. `Failed` and `Closed` are final.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServiceCacheEvent {
    /// The cache is complete: the first time, and after each resync.
    Synced,
    /// An instance appeared (or its data became readable).
    Added(ServiceInstance),
    /// An instance's data changed (the new version).
    Updated(ServiceInstance),
    /// An instance went (as last seen), or its data became unreadable.
    Removed(ServiceInstance),
    /// The node `id` of the service holds data that is not an instance; it is left out
    /// until it changes.
    Unreadable {
        /// The node's name.
        id: String,
        /// Why.
        error: InstanceError,
    },
    /// The connection dropped (or the session expired): the cache may be stale.
    Suspended,
    /// A session is back; a resync is under way (`Synced` when done).
    Reconnected,
    /// Ended: the service node cannot be read, or the session was closed. Final.
    Failed(Error),
    /// Ended by [`close`](ServiceCache::close). Final.
    Closed,
}

impl ServiceCacheEvent {
    /// Does this event end the cache?
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            ServiceCacheEvent::Failed(_) | ServiceCacheEvent::Closed
        )
    }
}

/// The instances of one service, kept up to date, and a [`Provider`] over them; see
/// the [module docs](self).
///
/// ```
/// use zk_recipes::recipe::discovery::{DownPolicy, ServiceCache, Strategy};
/// use zk_recipes::recipe::{Machine, Recipe, SessionChange};
/// use zk_recipes::time::Instant;
///
/// let mut cache = ServiceCache::new("/services", "web", Strategy::RoundRobin, DownPolicy::default());
/// cache.handle_session(Instant::ZERO, SessionChange::Connected { session_id: 7 });
/// cache.start(Instant::ZERO);
/// let (_, list) = cache.poll_request().unwrap(); // getChildren(/services/web, watch)
/// assert_eq!(list.op_code(), zk_recipes::proto::OpCode::GetChildren);
/// assert!(cache.pick(Instant::ZERO).is_none()); // nothing known yet
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServiceCache {
    view: View,
    name: String,
    /// The node names of the readable instances, sorted.
    names: Vec<String>,
    /// Their instances, in the same order (what the provider picks from).
    list: Vec<ServiceInstance>,
    provider: Provider,
    events: Events<ServiceCacheEvent>,
}

impl ServiceCache {
    /// A cache of service `name` under `base`, picking with `strategy` and `policy`.
    pub fn new(base: &str, name: &str, strategy: Strategy, policy: DownPolicy) -> Self {
        ServiceCache {
            view: View::new(ViewConfig::new(&service_path(base, name))),
            name: name.into(),
            names: Vec::new(),
            list: Vec::new(),
            provider: Provider::new(strategy, policy),
            events: Events::default(),
        }
    }

    /// The service's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The readable instances now, sorted by node name (Curator's `getInstances`).
    pub fn instances(&self) -> &[ServiceInstance] {
        &self.list
    }

    /// The instance at node `id`.
    pub fn instance(&self, id: &str) -> Option<&ServiceInstance> {
        self.find(id).ok().map(|k| &self.list[k])
    }

    /// Complete (since the last reconnect)?
    pub fn is_synced(&self) -> bool {
        self.view.is_synced()
    }

    /// Has it ended?
    pub fn has_ended(&self) -> bool {
        self.view.has_ended()
    }

    /// The provider.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    crate::recipe::kit::part_calls!(
        view, pump;
        /// Starts following (once).
        start,
        /// Stops; [`ServiceCacheEvent::Closed`].
        close,
    );

    /// One usable instance by the strategy (enabled, not down), from the cache: no
    /// request. `now` ends down periods that are over first.
    pub fn pick(&mut self, now: Instant) -> Option<ServiceInstance> {
        self.provider.handle_timeout(now);
        self.provider.pick(&self.list).cloned()
    }

    /// Instance `id` failed for the caller (Curator's `noteError`).
    pub fn note_error(&mut self, now: Instant, id: &str) {
        self.provider.note_error(now, id)
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.names.binary_search_by(|n| n.as_str().cmp(name))
    }

    fn remove(&mut self, name: &str) -> Option<ServiceInstance> {
        let k = self.find(name).ok()?;
        self.names.remove(k);
        Some(self.list.remove(k))
    }

    fn apply(&mut self, m: Member) {
        match ServiceInstance::from_json(&m.data) {
            Ok(i) => {
                let e = match self.find(&m.name) {
                    Ok(k) => {
                        self.list[k] = i.clone();
                        ServiceCacheEvent::Updated(i)
                    }
                    Err(k) => {
                        self.names.insert(k, m.name);
                        self.list.insert(k, i.clone());
                        ServiceCacheEvent::Added(i)
                    }
                };
                self.events.emit(e);
            }
            Err(error) => {
                if let Some(old) = self.remove(&m.name) {
                    self.events.emit(ServiceCacheEvent::Removed(old));
                }
                self.events
                    .emit(ServiceCacheEvent::Unreadable { id: m.name, error });
            }
        }
    }

    fn pump(&mut self) {
        while let Some(e) = self.view.poll_event() {
            match e {
                ViewEvent::Joined(m) | ViewEvent::Changed(m) => self.apply(m),
                ViewEvent::Left(m) => {
                    if let Some(old) = self.remove(&m.name) {
                        self.events.emit(ServiceCacheEvent::Removed(old));
                    }
                }
                ViewEvent::Synced => self.events.emit(ServiceCacheEvent::Synced),
                ViewEvent::Suspended => self.events.emit(ServiceCacheEvent::Suspended),
                ViewEvent::Reconnected => self.events.emit(ServiceCacheEvent::Reconnected),
                ViewEvent::Failed(e) => self.events.emit(ServiceCacheEvent::Failed(e)),
                ViewEvent::Closed => self.events.emit(ServiceCacheEvent::Closed),
            }
        }
        debug_assert!(
            self.names.len() == self.list.len()
                && self.names.iter().all(|n| self.view.member(n).is_some()),
            "the cached instances are the view's readable members"
        );
    }
}

impl Machine for ServiceCache {
    super::kit::follow_part!(view, pump);

    fn handle_abandon(&mut self, now: Instant) {
        self.close(now);
    }
}

super::kit::recipe_events!(ServiceCache => ServiceCacheEvent, events.poll);
