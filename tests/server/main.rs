//! Against a real ZooKeeper 3.8 started on 127.0.0.1: the server facts the recipes rely on, and the
//! simulator's server model checked reply for reply against the real server.
//!
//! One test binary per layer (issue 28); each former test file is a module here.

mod embedded_server;
mod server_facts;
mod sim_differential;
