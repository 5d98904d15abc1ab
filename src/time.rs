//! Time as the driver sees it.
//!
//! The core never reads a clock. Drivers pass an [`Instant`]: microseconds since an
//! epoch of their choosing (process start, a simulation's zero, ...). All deadlines
//! the core reports are in the same units.

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);

    /// An instant `micros` microseconds after the epoch.
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros)
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
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
