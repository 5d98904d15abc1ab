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

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`):
/// for the recipes that read or write wall-clock dates (the core reads no clock).
///
/// ```
/// use zk_recipes::time::{civil_from_days, days_from_civil};
/// assert_eq!(days_from_civil(2000, 2, 29), 11_016);
/// assert_eq!(civil_from_days(11_016), (2000, 2, 29));
/// ```
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date (year, month, day) of a day count since 1970-01-01, proleptic Gregorian
/// (H. Hinnant's `civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
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
