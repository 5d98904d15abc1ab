//! Interoperability with Apache Curator 5.4 (Debian's `libcurator-recipes-java`), one
//! test binary: each module runs a Java program of this folder (compiled by `support`)
//! against our recipe on the same paths of a real ZooKeeper.

mod support;

mod cache;
mod delay_queue;
mod discovery;
mod double_barrier;
mod group;
mod kazoo;
mod kazoo_lease;
mod latch;
mod lock;
mod multi_lock;
mod partitioner;
mod queue;
mod semaphore;
mod shared_count;
#[cfg(feature = "tls")]
mod tls_lock;
mod ttl_node;
