//! The blocking adapter end to end against a real ZooKeeper (started by the test
//! support on 127.0.0.1), one test binary.

mod locks;
mod raw_api;
