//! The delay queue in the model world: the [queue's script](super::queue) with
//! [`Format::Delay`] — one or two producers putting items with times from 10 ms in the
//! past to 410 ms ahead, one to three consumers at most once or at least once, every
//! fault of the queue's script — and, on top of the queue's invariants (no item created
//! twice or lost, deleted only by the protocol, at most one live holder, liveness and
//! accounting once faults stop), the delay queue's own:
//!
//! * safety: an item is delivered only once its time has come by the consumer's clock
//!   (the model's convention: an instant is microseconds since the Unix epoch), and its
//!   name carries the time it was put with;
//! * liveness: once faults stop, consumers waiting on items not yet due wake at their
//!   time (no watch fires for them) and the queue drains.

use alloc::string::String;
use zk_recipes::recipe::queue::Format;

pub use super::queue::Stats;

/// Runs one schedule; `Err` describes the broken invariant and the last steps taken.
pub fn run(schedule: &[u8]) -> Result<Stats, String> {
    super::queue::run_format(schedule, Some(Format::Delay))
}
