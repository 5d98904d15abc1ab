//! The sans-IO client: a session plus routing (filled in by the session issue).
