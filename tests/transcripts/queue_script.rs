//! The transcript notation shared by `queue_transcripts.rs` and `queue_regressions.rs`:
//! the kit's `Script` in the `short` form, and the queue's reply helpers.
#![allow(dead_code, unused_imports)]

pub use super::kit::*;
pub use zk_recipes::recipe::queue::*;

pub const DIR: &str = "/app/q";
pub const META: &str = "/app/q-meta";
pub const SESSION: i64 = 0x77;
pub const T: Instant = Instant::ZERO;

/// A queue machine, connected, its lines in the `short` form (`M` for the meta
/// directory, `Q` for the queue).
pub fn script<R: Recipe>(r: R) -> Script<R> {
    Script::connected(r, SESSION).short(&[(META, "M"), (DIR, "Q")])
}

pub fn created(name: &str) -> MultiResult {
    MultiResult::Create(format!("{DIR}/{name}"))
}

pub fn data(d: &str) -> MultiResult {
    MultiResult::GetData {
        data: Bytes::copy_from_slice(d.as_bytes()),
        stat: Stat::default(),
    }
}

pub fn err(code: ErrorCode) -> MultiResult {
    MultiResult::Error(code)
}
