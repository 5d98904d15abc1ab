//! Time as the driver sees it.
//!
//! The core never reads a clock. Drivers pass an [`Instant`]: microseconds since an
//! epoch of their choosing (process start, a simulation's zero, ...). All deadlines
//! the core reports are in the same units.

use core::num::NonZeroU64;
use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time, in microseconds since a driver-chosen epoch.
///
/// ```
/// use zk_recipes::time::Instant;
/// use core::time::Duration;
/// let t = Instant::from_micros(1_000);
/// assert_eq!(t + Duration::from_millis(2), Instant::from_micros(3_000));
/// assert_eq!(Instant::from_micros(3_000) - t, Duration::from_millis(2));
/// ```
///
/// Kept as microseconds + 1 in a `NonZeroU64`, so an `Option<Instant>` (a deadline,
/// a timer) takes 8 bytes, not 16: every machine keeps a few. The far future is
/// `u64::MAX - 1` µs after the epoch (about 584,000 years); later instants saturate.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(NonZeroU64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(NonZeroU64::MIN);

    /// An instant `micros` microseconds after the epoch (saturating at the far future).
    pub const fn from_micros(micros: u64) -> Self {
        Instant(NonZeroU64::MIN.saturating_add(micros))
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0.get() - 1
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.get().saturating_sub(earlier.0.get()))
    }
}

impl Default for Instant {
    fn default() -> Self {
        Instant::ZERO
    }
}

impl core::fmt::Debug for Instant {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Instant").field(&self.as_micros()).finish()
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at the far future instead of overflowing.
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(micros(rhs)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_optional_instant_takes_no_more_room_than_an_instant() {
        assert_eq!(core::mem::size_of::<Option<Instant>>(), 8);
    }

    #[test]
    fn arithmetic_and_order_are_those_of_microseconds() {
        let t = Instant::from_micros(5);
        assert_eq!(t.as_micros(), 5);
        assert_eq!(Instant::ZERO.as_micros(), 0);
        assert_eq!(Instant::default(), Instant::ZERO);
        assert!(Instant::ZERO < t);
        assert_eq!(t - Instant::from_micros(7), Duration::ZERO);
        assert_eq!(Instant::from_micros(7) - t, Duration::from_micros(2));
        let far = Instant::from_micros(u64::MAX);
        assert_eq!(far.as_micros(), u64::MAX - 1);
        assert_eq!(far + Duration::MAX, far);
        assert_eq!(alloc::format!("{t:?}"), "Instant(5)");
    }
}
