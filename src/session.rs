//! The sans-IO ZooKeeper session (filled in by the session issue).
