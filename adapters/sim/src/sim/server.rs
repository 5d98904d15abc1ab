//! The in-memory ZooKeeper 3.8 server model, from `zk-recipes-server` (where it is
//! `model::ServerModel`; the embedded server serves it over TCP). Re-exported here
//! under the simulator's names.

pub use zk_recipes_server::model::{ConnId, Lag, ServerConfig, ServerModel as SimServer};
