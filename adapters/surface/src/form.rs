// The modules and names of a form, the same in both: included by `asynchronous.rs`
// and `blocking.rs` after each has chosen its `rt` and its `form` attribute.

#[path = "client.rs"]
mod client;
pub use client::{
    Client, Command, Driver, Ended, EventTx, ReplyTx, Routed, StatusStream, StatusTx, Watch,
    WatchStream, WatchTx,
};

#[path = "hosted.rs"]
pub mod hosted;
pub use hosted::{Events, Handle, Hosted};

#[doc(hidden)]
#[path = "hub.rs"]
pub mod hub;

#[path = "barrier.rs"]
mod barrier;
#[path = "cache.rs"]
mod cache;
#[path = "config.rs"]
mod config;
#[path = "delay_queue.rs"]
mod delay_queue;
#[path = "discovery.rs"]
mod discovery;
#[path = "election.rs"]
mod election;
#[path = "group.rs"]
mod group;
#[path = "inspect.rs"]
mod inspect;
#[path = "lease.rs"]
mod lease;
#[path = "lock.rs"]
mod lock;
#[path = "multi_lock.rs"]
mod multi_lock;
#[path = "naming.rs"]
mod naming;
#[path = "partitioner.rs"]
mod partitioner;
#[path = "queue.rs"]
mod queue;
#[path = "semaphore.rs"]
mod semaphore;
#[path = "ttl_node.rs"]
mod ttl_node;
#[path = "two_phase.rs"]
mod two_phase;
#[path = "value.rs"]
mod value;

pub use crate::common::Options;
/// The `rustls` the adapters speak TLS with (for [`Tls::from_config`]; feature `tls`).
#[cfg(feature = "tls")]
pub use crate::rustls;
#[cfg(feature = "tls")]
pub use crate::tls::Tls;
pub use barrier::{Barrier, DoubleBarrier};
pub use bytes::Bytes;
pub use cache::{CacheConfig, CacheEvent, CachedNode, TreeCacheHandle};
pub use config::{
    ConfigMode, ConfigReaderHandle, ConfigSnapshot, ReaderConfig, ReaderEvent, WriterConfig,
};
pub use discovery::{ServiceCacheHandle, ServiceRegistration};
pub use election::{Candidate, ElectionBuilder, ElectionObserver};
pub use group::{GroupMemberHandle, GroupView, NodeHandle, NodeWatchHandle, RendezvousHandle};
pub use lock::{LockBuilder, LockGuard, ReentrantLock};
pub use multi_lock::{MultiLock, MultiLockGuard, MultiLockState};
pub use naming::IdGenerator;
pub use partitioner::{PartitionState, PartitionerBuilder, SetPartitioner};
pub use queue::{Claimed, Queue};
pub use semaphore::{Lease, LeaseState, Semaphore};
pub use ttl_node::TtlNodeHandle;
pub use two_phase::{Transaction, TransactionBuilder, TransactionSite};
pub use value::{CounterFormat, CounterHandle, CounterWatchEvent, CounterWatchHandle};
pub use zk_recipes;
pub use zk_recipes::client::ops::{CreateOptions, Reconfig};
pub use zk_recipes::client::{Error, Status};
pub use zk_recipes::error::{AuthFailure, SaslFailure};
pub use zk_recipes::proto::{perms, Acl, ErrorCode, Id};
pub use zk_recipes::sasl::{DigestMd5, Mechanism};
pub use zk_recipes::session::DefaultAcl;
pub use zk_recipes::proto::{
    AddWatchMode, ClientInfo, CreateMode, EnsembleConfig, EventType, MultiOp, MultiResult,
    ReadOp, ServerRole, ServerSpec, Stat, WatcherType,
};
pub use zk_recipes::recipe::barrier::BarrierEvent;
pub use zk_recipes::recipe::discovery::{
    DownPolicy, InstanceError, RegistrationEvent, ServiceCacheEvent, ServiceInstance,
    ServiceType, Strategy as PickStrategy, UriPart,
};
pub use zk_recipes::recipe::double_barrier::DoubleBarrierEvent;
pub use zk_recipes::recipe::election::observer::{ObserverEvent, Participant};
pub use zk_recipes::recipe::election::{ElectionEvent, Leadership};
pub use zk_recipes::recipe::group::{Member, MemberConfig, ViewConfig, ViewEvent};
pub use zk_recipes::recipe::inspect::{
    Description, InspectConfig, Kind as RecipeKind, Participant as InspectedNode, Shape, Survey,
};
pub use zk_recipes::recipe::lease::{
    Holder as LeaseHolder, LeaseConfig, LeaseEvent, LeaseOutcome,
};
pub use zk_recipes::recipe::lock::{HoldState, LockChange, LostReason};
pub use zk_recipes::recipe::multi_lock::{HeldLock, MultiLockEvent};
pub use zk_recipes::recipe::naming::ResolveConfig;
pub use zk_recipes::recipe::partitioner::{HeldItem, PartitionEvent};
pub use zk_recipes::recipe::node::{NodeWatchEvent, OwnedNodeConfig, OwnedNodeEvent};
pub use zk_recipes::recipe::queue::Item as QueueItem;
pub use zk_recipes::recipe::rendezvous::{Master, RendezvousEvent, Worker};
pub use zk_recipes::recipe::ttl_node::{TtlNodeConfig, TtlNodeEvent};
pub use zk_recipes::recipe::two_phase::{CoordinatorEvent, Outcome, Variant, Vote, VoteOutcome};
pub use zk_recipes::recipe::value::UpdateConfig;
pub use zk_recipes::recipe::{Machine, Recipe};
pub use zk_recipes::session::HostFailures;
pub use zk_recipes::session::{Counters, WatchEvent};
